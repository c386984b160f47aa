package skill

import (
	"errors"
	"net/url"
	"strings"
	"testing"
)

// FuzzNormalizeCertURL: every URL NormalizeCertURL accepts is normalized
// to https://s3.amazonaws.com/echo.api/… with no port, user info, query,
// fragment or dot segment, is its own normal form, and names the same host
// Go's URL parser reads in the original; every refusal wraps ErrCertURL.
func FuzzNormalizeCertURL(f *testing.F) {
	for _, s := range []string{
		"https://s3.amazonaws.com/echo.api/echo-api-cert.pem",
		"https://s3.amazonaws.com:443/echo.api/../echo.api/echo-api-cert.pem",
		"HTTPS://S3.AMAZONAWS.COM/echo.api/echo-api-cert.pem",
		"https://s3.amazonaws.com/echo.api/%2e%2e/bad/x.pem",
		"https://s3.amazonaws.com/echo.api%2F..%2F..%2Fx.pem",
		"https://s3.amazonaws.com.evil.com/echo.api/echo-api-cert.pem",
		"https://user@s3.amazonaws.com/echo.api/x.pem",
		"https://s3.amazonaws.com\\@evil.com/echo.api/x.pem",
		"https://s3.amazonaws.com:563/echo.api/x.pem",
		"https://[::1]/echo.api/x.pem",
		"https://s3.amazonaws.com/echo.api/x.pem?y=1#z",
		"https://s3.amazonaws.com//echo.api//x.pem",
		"https:s3.amazonaws.com/echo.api/x.pem",
		"//s3.amazonaws.com/echo.api/x.pem",
		"",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		out, err := NormalizeCertURL(raw)
		if err != nil {
			if !errors.Is(err, ErrCertURL) || out != "" {
				t.Fatalf("NormalizeCertURL(%q) = %q, %v: a refusal must wrap ErrCertURL and return nothing", raw, out, err)
			}
			return
		}
		const prefix = "https://s3.amazonaws.com/echo.api/"
		if !strings.HasPrefix(out, prefix) {
			t.Fatalf("NormalizeCertURL(%q) = %q, outside %s", raw, out, prefix)
		}
		u, perr := url.Parse(out)
		if perr != nil || u.Host != "s3.amazonaws.com" || u.User != nil || u.RawQuery != "" || u.Fragment != "" || u.ForceQuery {
			t.Fatalf("NormalizeCertURL(%q) = %q: not a bare https://s3.amazonaws.com URL", raw, out)
		}
		for _, seg := range strings.Split(u.Path, "/")[1:] {
			if seg == ".." || seg == "." {
				t.Fatalf("NormalizeCertURL(%q) = %q keeps a dot segment", raw, out)
			}
		}
		if again, err := NormalizeCertURL(out); err != nil || again != out {
			t.Fatalf("NormalizeCertURL(%q) = %q, %v: not its own normal form", out, again, err)
		}
		if o, err := url.Parse(raw); err != nil || !strings.EqualFold(o.Hostname(), "s3.amazonaws.com") || !strings.EqualFold(o.Scheme, "https") {
			t.Fatalf("NormalizeCertURL accepted %q, which Go reads as scheme %q host %q", raw, o.Scheme, o.Hostname())
		}
	})
}
