//go:build e2e

package e2e_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/unsay/unsay/test/harness"
)

// get sends GET url with Host host ("" keeps the URL's) and returns the
// status, the body and the response headers.
func get(t *testing.T, url, host string) (int, string, http.Header) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if host != "" {
		req.Host = host
	}
	c := &http.Client{Timeout: 10 * time.Second}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

// An instance whose --public-url names a real host (behind a proxy) is
// still reached by `unsay write --url http://127.0.0.1:PORT` on the box
// and probed by address (the harness itself waits on /healthz by
// 127.0.0.1). A stranger's DNS name is refused, /metrics is only on the
// admin listener, and every response says nosniff.
func TestEdge_TheCLIAndProbesReachAnInstanceWithAPublicHost(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := harness.Start(ctx, harness.Options{Bin: bin, Dir: t.TempDir(), PublicURL: "https://care.example.org"})
	if err != nil {
		t.Fatalf("start behind a public host: %v", err)
	}
	t.Cleanup(func() { _ = s.Stop() })

	out, err := s.Write(ctx, "ray", "weight_bearing", "Full weight-bearing as tolerated.", "okafor", "Sarah Okafor, physio")
	if err != nil || !strings.Contains(out, " as version ") {
		t.Fatalf("unsay write --url %s on the box: %v %s", s.URL, err, out)
	}
	for _, p := range []string{"/healthz", "/readyz"} {
		if code, body, _ := get(t, s.URL+p, "10.0.0.11:8080"); code == http.StatusForbidden {
			t.Errorf("probe %s by address: 403 %s", p, body)
		}
	}
	if code, _, _ := get(t, s.URL+"/verify?uri=care://ray/weight_bearing", "rebind.evil.example"); code != http.StatusForbidden {
		t.Errorf("a foreign DNS name on /verify: %d, want 403", code)
	}
	if code, _, _ := get(t, s.URL+"/verify?uri=care://ray/weight_bearing", "care.example.org"); code != http.StatusOK {
		t.Errorf("the public host on /verify: %d, want 200", code)
	}
	if code, _, _ := get(t, s.URL+"/metrics", ""); code != http.StatusNotFound {
		t.Errorf("public /metrics: %d, want 404", code)
	}
	if s.AdminURL == "" {
		t.Fatalf("no admin listener announced in the startup line:\n%s", s.Output())
	}
	if code, body, _ := get(t, s.AdminURL+"/metrics", ""); code != http.StatusOK || !strings.Contains(body, `unsay_http_requests_total{code="201",route="/write"}`) {
		t.Errorf("admin /metrics: %d, want 200 counting the write", code)
	}
	if _, body, _ := get(t, s.URL+"/readyz", ""); strings.Contains(body, "lastSeq") || strings.Contains(body, "ray") {
		t.Errorf("public /readyz shows details: %s", body)
	}
	for _, u := range []string{s.URL + "/healthz", s.URL + "/echo.html", s.URL + "/nothing", s.AdminURL + "/readyz"} {
		if _, _, h := get(t, u, ""); h.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("GET %s: X-Content-Type-Options %q, want nosniff", u, h.Get("X-Content-Type-Options"))
		}
	}
}
