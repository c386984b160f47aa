package skill

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestNormalizeCertURL_Vectors(t *testing.T) {
	accept := map[string]string{
		"https://s3.amazonaws.com/echo.api/echo-api-cert.pem":                 "https://s3.amazonaws.com/echo.api/echo-api-cert.pem",
		"https://s3.amazonaws.com:443/echo.api/echo-api-cert.pem":             "https://s3.amazonaws.com/echo.api/echo-api-cert.pem",
		"https://s3.amazonaws.com/echo.api/../echo.api/echo-api-cert.pem":     "https://s3.amazonaws.com/echo.api/echo-api-cert.pem",
		"HTTPS://S3.AMAZONAWS.COM/echo.api/echo-api-cert.pem":                 "https://s3.amazonaws.com/echo.api/echo-api-cert.pem",
		"https://s3.amazonaws.com/echo.api/cert":                              "https://s3.amazonaws.com/echo.api/cert",
		"https://s3.amazonaws.com:443/echo.api/../echo.api/echo-api-cert.pem": "https://s3.amazonaws.com/echo.api/echo-api-cert.pem",
	}
	for in, want := range accept {
		got, err := NormalizeCertURL(in)
		if err != nil || got != want {
			t.Errorf("NormalizeCertURL(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	reject := []string{
		"http://s3.amazonaws.com/echo.api/echo-api-cert.pem",
		"https://notamazon.com/echo.api/echo-api-cert.pem",
		"https://very.bad/echo.api/cert",
		"https://s3.amazonaws.com/EcHo.aPi/echo-api-cert.pem",
		"https://s3.amazonaws.com/ECHO.API/cert",
		"https://s3.amazonaws.com/invalid.path/echo-api-cert.pem",
		"https://s3.amazonaws.com/cert",
		"https://s3.amazonaws.com/echo.api/../cert",
		"https://s3.amazonaws.com/echo.api/../bad/x.pem",
		"https://s3.amazonaws.com/echo.api/%2e%2e/bad/x.pem",
		"https://s3.amazonaws.com:563/echo.api/echo-api-cert.pem",
		"https://user@s3.amazonaws.com/echo.api/echo-api-cert.pem",
		"https://user:pw@s3.amazonaws.com/echo.api/echo-api-cert.pem",
		"https://s3.amazonaws.com/echo.api/echo-api-cert.pem?x=1",
		"https://s3.amazonaws.com.evil.com/echo.api/echo-api-cert.pem",
		"badUrl",
		"",
	}
	for _, in := range reject {
		if got, err := NormalizeCertURL(in); !errors.Is(err, ErrCertURL) {
			t.Errorf("NormalizeCertURL(%q) = %q, %v; want ErrCertURL", in, got, err)
		}
	}
}

// TestServeHTTP_VerificationVectors drives POST /alexa with real signed
// requests: each accepted vector reaches the handler (200), each refused
// one answers 400 without a handler call, and a URL that breaks the rules
// is never fetched.
func TestServeHTTP_VerificationVectors(t *testing.T) {
	body := envelope(reqOpts{Extra: ".déjà vu"})
	if !bytes.Contains(body, []byte("déjà vu")) {
		t.Fatal("positive body must carry non-ASCII bytes")
	}
	flipped := append([]byte(nil), body...)
	i := bytes.Index(flipped, []byte("LaunchRequest"))
	flipped[i] ^= 0x20
	cases := []struct {
		name      string
		certURL   string
		sig       string // "" signs body; "-" omits; else literal
		body      []byte
		signBody  []byte // sign this instead of body
		want      int
		wantFetch bool
	}{
		{name: "plain", certURL: testCertURL, want: 200, wantFetch: true},
		{name: "port 443", certURL: "https://s3.amazonaws.com:443/echo.api/echo-api-cert.pem", want: 200, wantFetch: true},
		{name: "dot segments back into echo.api", certURL: "https://s3.amazonaws.com/echo.api/../echo.api/echo-api-cert.pem", want: 200, wantFetch: true},
		{name: "upper-case scheme and host", certURL: "HTTPS://S3.AMAZONAWS.COM/echo.api/echo-api-cert.pem", want: 200, wantFetch: true},
		{name: "http scheme", certURL: "http://s3.amazonaws.com/echo.api/echo-api-cert.pem", want: 400},
		{name: "other host", certURL: "https://notamazon.com/echo.api/echo-api-cert.pem", want: 400},
		{name: "path case", certURL: "https://s3.amazonaws.com/EcHo.aPi/echo-api-cert.pem", want: 400},
		{name: "invalid path", certURL: "https://s3.amazonaws.com/invalid.path/echo-api-cert.pem", want: 400},
		{name: "traversal out of echo.api", certURL: "https://s3.amazonaws.com/echo.api/../bad/x.pem", want: 400},
		{name: "port 563", certURL: "https://s3.amazonaws.com:563/echo.api/echo-api-cert.pem", want: 400},
		{name: "user info", certURL: "https://user@s3.amazonaws.com/echo.api/echo-api-cert.pem", want: 400},
		{name: "missing cert URL header", certURL: "", want: 400},
		{name: "missing signature header", certURL: testCertURL, sig: "-", want: 400},
		{name: "bad base64 signature", certURL: testCertURL, sig: "not*base64!", want: 400},
		{name: "one flipped body byte", certURL: testCertURL, body: flipped, signBody: body, want: 400, wantFetch: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := newRig(t, nil)
			b := body
			if c.body != nil {
				b = c.body
			}
			sig := c.sig
			if c.signBody != nil {
				sig = r.pki.sign(c.signBody)
			}
			code, resp := r.post(b, c.certURL, sig)
			if code != c.want {
				t.Fatalf("status %d, want %d (%s); logs: %s", code, c.want, resp, r.logs)
			}
			calls := r.care.calls.Load()
			if c.want == 200 && calls == 0 {
				t.Error("accepted request did not reach the handler")
			}
			if c.want != 200 {
				if calls != 0 {
					t.Errorf("refused request reached the handler (%d care calls)", calls)
				}
				if !strings.Contains(r.logs.String(), "alexa request refused") {
					t.Errorf("no log line with the reason: %s", r.logs)
				}
			}
			if fetched := r.fetcher.n.Load() > 0; fetched != c.wantFetch {
				t.Errorf("fetched = %v, want %v", fetched, c.wantFetch)
			}
			if c.wantFetch && r.fetcher.got[0] != testCertURL {
				t.Errorf("fetched %q, want the normalized %q", r.fetcher.got[0], testCertURL)
			}
		})
	}
}

func TestServeHTTP_TimestampWindow(t *testing.T) {
	cases := []struct {
		name string
		typ  string
		skew time.Duration // request timestamp − server clock
		want int
	}{
		{"150 s old", TypeLaunch, -150 * time.Second, 200},
		{"151 s old", TypeLaunch, -151 * time.Second, 400},
		{"150 s ahead", TypeLaunch, 150 * time.Second, 200},
		{"151 s ahead", TypeLaunch, 151 * time.Second, 400},
		{"skill event 3600 s old", "AlexaSkillEvent.SkillEnabled", -3600 * time.Second, 200},
		{"skill event 3601 s old", "AlexaSkillEvent.SkillEnabled", -3601 * time.Second, 400},
		{"skill event 3600 s ahead", "AlexaSkillEvent.ProactiveSubscriptionChanged", 3600 * time.Second, 200},
		{"skill event 3601 s ahead", "AlexaSkillEvent.ProactiveSubscriptionChanged", 3601 * time.Second, 400},
		{"launch 3000 s old is not a skill event", TypeLaunch, -3000 * time.Second, 400},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := newRig(t, nil)
			code, resp := r.post(envelope(reqOpts{Type: c.typ, Timestamp: t0.Add(c.skew)}), testCertURL, "")
			if code != c.want {
				t.Fatalf("status %d, want %d: %s", code, c.want, resp)
			}
			if c.want == 400 && !strings.Contains(r.logs.String(), ErrTimestamp.Error()) {
				t.Errorf("log lacks the timestamp reason: %s", r.logs)
			}
		})
	}
}

func TestServeHTTP_RefusesAnotherSkillsID(t *testing.T) {
	r := newRig(t, nil)
	if code, _ := r.post(envelope(reqOpts{SkillID: "amzn1.ask.skill.other"}), testCertURL, ""); code != 400 {
		t.Fatalf("other skill id: status %d, want 400", code)
	}
	if r.care.calls.Load() != 0 {
		t.Error("handler ran for another skill's request")
	}
	if code, _ := r.post(envelope(reqOpts{}), testCertURL, ""); code != 200 {
		t.Fatalf("own skill id: status %d, want 200", code)
	}
}

func TestServeHTTP_ChecksSkillIDInContextNotSession(t *testing.T) {
	r := newRig(t, nil)
	body := bytes.Replace(envelope(reqOpts{}), []byte(`"session":{"application":{"applicationId":"`+testSkillID),
		[]byte(`"session":{"application":{"applicationId":"amzn1.ask.skill.session-only`), 1)
	// The session's id differs, the context's is ours: accepted.
	if code, b := r.post(body, testCertURL, ""); code != 200 {
		t.Fatalf("status %d: %s", code, b)
	}
}

func TestServeHTTP_RefusesBadChains(t *testing.T) {
	p := getPKI(t)
	cases := []struct {
		name string
		pem  []byte
		now  time.Time
		want int
	}{
		{"trusted chain", p.chainPEM, t0, 200},
		{"leaf without SAN echo-api.amazon.com", p.noSANPEM, t0, 400},
		{"leaf under an untrusted root", p.otherPEM, t0, 400},
		{"leaf expired", p.chainPEM, p.leafUntil.Add(time.Second), 400},
		{"leaf not yet valid", p.chainPEM, t0.Add(-48 * time.Hour), 400},
		{"not PEM", []byte("hello"), t0, 400},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := newRig(t, nil)
			r.fetcher.pem = c.pem
			r.setNow(c.now)
			code, _ := r.post(envelope(reqOpts{Timestamp: c.now}), testCertURL, "")
			if code != c.want {
				t.Fatalf("status %d, want %d; logs %s", code, c.want, r.logs)
			}
		})
	}
}

func TestVerifier_CachesChainPerURLUntilItExpires(t *testing.T) {
	r := newRig(t, nil)
	for i := 0; i < 3; i++ {
		if code, _ := r.post(envelope(reqOpts{}), testCertURL, ""); code != 200 {
			t.Fatalf("status %d", code)
		}
	}
	if n := r.fetcher.n.Load(); n != 1 {
		t.Fatalf("%d fetches for one URL, want 1", n)
	}
	// A second URL is its own entry.
	other := "https://s3.amazonaws.com/echo.api/echo-api-cert-2.pem"
	if code, _ := r.post(envelope(reqOpts{}), other, ""); code != 200 {
		t.Fatalf("status %d", code)
	}
	if n := r.fetcher.n.Load(); n != 2 {
		t.Fatalf("%d fetches for two URLs, want 2", n)
	}
	// Past the leaf's NotAfter the cached entry is not used: it is fetched
	// again and refused as expired.
	late := r.pki.leafUntil.Add(time.Minute)
	r.setNow(late)
	if code, _ := r.post(envelope(reqOpts{Timestamp: late}), testCertURL, ""); code != 400 {
		t.Fatalf("expired chain: status %d, want 400", code)
	}
	if n := r.fetcher.n.Load(); n != 3 {
		t.Fatalf("%d fetches, want a re-fetch after expiry (3)", n)
	}
}

func TestVerifier_ConcurrentColdRequestsFetchOnce(t *testing.T) {
	r := newRig(t, nil)
	errs := make(chan error, 16)
	for i := 0; i < 16; i++ {
		body := envelope(reqOpts{}) // each its own request id
		h := http.Header{}
		h.Set(HeaderSignature256, r.pki.sign(body))
		h.Set(HeaderCertChainURL, testCertURL)
		go func() {
			_, err := r.skill.verifier.Verify(context.Background(), h, body)
			errs <- err
		}()
	}
	for i := 0; i < 16; i++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if n := r.fetcher.n.Load(); n != 1 {
		t.Fatalf("%d fetches, want 1", n)
	}
}

func TestVerifier_ErrorsNameTheRule(t *testing.T) {
	r := newRig(t, nil)
	body := envelope(reqOpts{})
	hdr := func(sig, u string) http.Header {
		h := http.Header{}
		if sig != "" {
			h.Set(HeaderSignature256, sig)
		}
		if u != "" {
			h.Set(HeaderCertChainURL, u)
		}
		return h
	}
	v := r.skill.verifier
	cases := []struct {
		h    http.Header
		body []byte
		want error
	}{
		{hdr("", testCertURL), body, ErrMissingHeader},
		{hdr(r.pki.sign(body), "http://s3.amazonaws.com/echo.api/x"), body, ErrCertURL},
		{hdr("%%%", testCertURL), body, ErrSignature},
		{hdr(r.pki.sign([]byte("other")), testCertURL), body, ErrSignature},
		{hdr(r.pki.sign([]byte("{")), testCertURL), []byte("{"), ErrMalformed},
		{hdr(r.pki.sign(envelope(reqOpts{SkillID: "x"})), testCertURL), envelope(reqOpts{SkillID: "x"}), ErrSkillID},
		{hdr(r.pki.sign(envelope(reqOpts{Timestamp: t0.Add(time.Hour)})), testCertURL), envelope(reqOpts{Timestamp: t0.Add(time.Hour)}), ErrTimestamp},
	}
	for i, c := range cases {
		if _, err := v.Verify(context.Background(), c.h, c.body); !errors.Is(err, c.want) {
			t.Errorf("case %d: err %v, want %v", i, err, c.want)
		}
	}
	if env, err := v.Verify(context.Background(), hdr(r.pki.sign(body), testCertURL), body); err != nil || env.Request.Type != TypeLaunch {
		t.Errorf("good request: %v, %+v", err, env)
	}
}

func TestServeHTTP_CertOverrideServesChainFromFile(t *testing.T) {
	p := getPKI(t)
	file := writeFile(t, "chain.pem", p.chainPEM)
	fail := &countingFetcher{pem: []byte("must not be used")}
	r := newRig(t, func(c *Config) {
		c.CertOverrides = map[string]string{"https://s3.amazonaws.com:443/echo.api/echo-api-cert.pem": file}
		c.Fetcher = fail
	})
	if code, b := r.post(envelope(reqOpts{}), testCertURL, ""); code != 200 {
		t.Fatalf("status %d: %s", code, b)
	}
	if fail.n.Load() != 0 {
		t.Error("an overridden URL was fetched")
	}
	// A URL without an override is fetched (and here refused: bad PEM).
	if code, _ := r.post(envelope(reqOpts{}), "https://s3.amazonaws.com/echo.api/other.pem", ""); code != 400 || fail.n.Load() != 1 {
		t.Errorf("status %d, fetches %d; want 400 after one fetch", code, fail.n.Load())
	}
}

func TestNew_RefusesOverrideThatBreaksTheURLRules(t *testing.T) {
	p := getPKI(t)
	file := writeFile(t, "chain.pem", p.chainPEM)
	_, err := New(Config{SkillID: testSkillID, Verify: true, CertOverrides: map[string]string{"http://s3.amazonaws.com/echo.api/x.pem": file}}, rayCare(), nil)
	if !errors.Is(err, ErrCertURL) {
		t.Fatalf("err %v, want ErrCertURL", err)
	}
	if _, err := New(Config{SkillID: testSkillID, Verify: true, CertOverrides: map[string]string{testCertURL: file}}, rayCare(), nil); err != nil {
		t.Fatalf("valid override refused: %v", err)
	}
	if _, err := New(Config{SkillID: testSkillID, Verify: true, CertOverrides: map[string]string{testCertURL: file + ".missing"}}, rayCare(), nil); err == nil {
		t.Fatal("missing override file accepted")
	}
}

func TestServeHTTP_VerifyWithoutSkillIDAnswers503(t *testing.T) {
	r := newRig(t, func(c *Config) { c.SkillID = "" })
	if code, _ := r.post(envelope(reqOpts{}), testCertURL, ""); code != http.StatusServiceUnavailable {
		t.Fatalf("status %d, want 503", code)
	}
	if notes := strings.Join(r.skill.StartupNotes(), "; "); !strings.Contains(notes, "no --alexa-skill-id: /alexa answers 503") {
		t.Errorf("startup notes %q", notes)
	}
	ok := newRig(t, nil)
	if code, _ := ok.post(envelope(reqOpts{}), testCertURL, ""); code != 200 {
		t.Fatalf("with a skill id: status %d, want 200", code)
	}
	if notes := strings.Join(ok.skill.StartupNotes(), "; "); strings.Contains(notes, "503") || strings.Contains(notes, "OFF") {
		t.Errorf("startup notes %q", notes)
	}
}

func TestServeHTTP_VerificationOffAcceptsUnsignedAndSaysSo(t *testing.T) {
	r := newRig(t, func(c *Config) { c.Verify = false })
	if code, b := r.post(envelope(reqOpts{SkillID: "anything"}), "", "-"); code != 200 {
		t.Fatalf("status %d: %s", code, b)
	}
	notes := strings.Join(r.skill.StartupNotes(), "; ")
	if !strings.Contains(notes, "ALEXA VERIFICATION OFF") || !strings.Contains(notes, "default patient ray for unlinked devices") {
		t.Errorf("startup notes %q", notes)
	}
	if code, _ := r.post([]byte("{not json"), "", "-"); code != 400 {
		t.Errorf("malformed body with verification off: status %d, want 400", code)
	}
}

func TestServeHTTP_RefusesOversizedBodyAndOtherMethods(t *testing.T) {
	r := newRig(t, nil)
	big := bytes.Repeat([]byte("x"), MaxRequestBytes+1)
	if code, _ := r.post(big, testCertURL, ""); code != http.StatusRequestEntityTooLarge {
		t.Errorf("oversized: status %d, want 413", code)
	}
	if r.fetcher.n.Load() != 0 {
		t.Error("oversized body caused a certificate fetch")
	}
	resp, err := http.Get(r.srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "POST" {
		t.Errorf("GET: status %d Allow %q", resp.StatusCode, resp.Header.Get("Allow"))
	}
}
