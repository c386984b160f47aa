package bridge

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

const pingBody = `{"jsonrpc":"2.0","id":7,"method":"ping"}`

func TestHTTP_UnknownSessionIs404(t *testing.T) {
	h := newHarness(t)
	tok := h.token("host", userScopes)
	sid := h.rawInit(tok)
	hdr := func(id string) map[string]string {
		return map[string]string{"Mcp-Session-Id": id, "MCP-Protocol-Version": ProtocolVersion}
	}
	if r := h.do("POST", "/mcp", tok, hdr("NO-SUCH-SESSION"), pingBody); r.status != http.StatusNotFound {
		t.Errorf("unknown session: %d %s, want 404", r.status, r.body)
	}
	if r := h.do("POST", "/mcp", tok, hdr(sid), pingBody); r.status != http.StatusOK {
		t.Errorf("known session: %d %s, want 200", r.status, r.body)
	}
	// DELETE ends the session; it is unknown afterwards.
	if r := h.do("DELETE", "/mcp", tok, hdr(sid), ""); r.status != http.StatusNoContent {
		t.Errorf("DELETE: %d", r.status)
	}
	if r := h.do("POST", "/mcp", tok, hdr(sid), pingBody); r.status != http.StatusNotFound {
		t.Errorf("deleted session: %d, want 404", r.status)
	}
	waitUntil(t, func() bool { return h.srv.sessions.get(sid) == nil })
}

func TestHTTP_UnsupportedProtocolVersionIs400(t *testing.T) {
	h := newHarness(t)
	tok := h.token("host", userScopes)
	sid := h.rawInit(tok)
	for _, v := range []string{"2024-01-01", "garbage", "2026-07-28", "9999-99-99"} {
		r := h.do("POST", "/mcp", tok, map[string]string{"Mcp-Session-Id": sid, "MCP-Protocol-Version": v}, pingBody)
		if r.status != http.StatusBadRequest {
			t.Errorf("MCP-Protocol-Version %q: %d, want 400", v, r.status)
		}
	}
	r := h.do("POST", "/mcp", tok, map[string]string{"Mcp-Session-Id": sid, "MCP-Protocol-Version": ProtocolVersion}, pingBody)
	if r.status != http.StatusOK {
		t.Errorf("MCP-Protocol-Version %s: %d, want 200", ProtocolVersion, r.status)
	}
}

func TestHTTP_NotificationPostIs202WithNoBody(t *testing.T) {
	h := newHarness(t)
	tok := h.token("host", userScopes)
	sid := h.rawInit(tok)
	r := h.do("POST", "/mcp", tok, map[string]string{"Mcp-Session-Id": sid, "MCP-Protocol-Version": ProtocolVersion},
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	if r.status != http.StatusAccepted || len(r.body) != 0 {
		t.Errorf("notification POST: %d with %d body bytes, want 202 and none", r.status, len(r.body))
	}
	// Twin: a request on the same session gets a response body.
	if r := h.do("POST", "/mcp", tok, map[string]string{"Mcp-Session-Id": sid, "MCP-Protocol-Version": ProtocolVersion}, pingBody); r.status != 200 || len(r.body) == 0 {
		t.Errorf("request POST: %d with %d bytes", r.status, len(r.body))
	}
}

func TestHTTP_ForeignOriginAndHostAre403BeforeAnythingRuns(t *testing.T) {
	h := newHarness(t)
	tok := h.token("host", userScopes)
	for _, tc := range []struct {
		name    string
		hdr     map[string]string
		host    string
		status  int
		healthz int // the probe answers whatever the Host (README "Host rule")
	}{
		{"foreign origin", map[string]string{"Origin": "https://evil.example"}, "", 403, 403},
		{"null origin", map[string]string{"Origin": "null"}, "", 403, 403},
		{"foreign host (DNS rebinding)", nil, "evil.example", 403, 200},
		{"own origin", map[string]string{"Origin": h.base}, "", 200, 200},
		{"allowed origin", map[string]string{"Origin": "https://carer.example"}, "", 200, 200},
		{"no origin", nil, "", 200, 200},
		{"localhost host on a loopback public URL", nil, "localhost:1234", 200, 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, path := range []string{"/mcp", "/healthz"} {
				req, _ := http.NewRequest("POST", h.base+path, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`))
				if path == "/healthz" {
					req.Method = "GET"
					req.Body = http.NoBody
				}
				req.Header.Set("Authorization", "Bearer "+tok)
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Accept", "application/json, text/event-stream")
				for k, v := range tc.hdr {
					req.Header.Set(k, v)
				}
				if tc.host != "" {
					req.Host = tc.host
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				want := tc.status
				if path == "/healthz" {
					want = tc.healthz
				}
				if resp.StatusCode != want {
					t.Errorf("%s %s: %d, want %d", req.Method, path, resp.StatusCode, want)
				}
			}
		})
	}
}

func TestHostAllowed_NonLoopbackPublicURLAcceptsOnlyItsHost(t *testing.T) {
	pub, err := parsePublicURL("https://care.example.org")
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{pub: pub}
	const remote = "203.0.113.7:50000"
	for host, want := range map[string]bool{
		"care.example.org": true, "CARE.example.org:443": true,
		"127.0.0.1:8080": false, "localhost": false, "evil.example": false, "care.example.org.evil": false, "": false,
	} {
		r := httptest.NewRequest("GET", "/mcp", nil)
		r.Host, r.RemoteAddr = host, remote
		if got := s.hostAllowed(r); got != want {
			t.Errorf("hostAllowed(%q from %s) = %v, want %v", host, remote, got, want)
		}
	}
}

func TestHTTP_BearerChallengesOnMCP(t *testing.T) {
	h := newHarness(t)
	meta := `resource_metadata="` + h.base + `/.well-known/oauth-protected-resource/mcp"`
	for _, tc := range []struct {
		name, tok, wantAuth string
		status              int
	}{
		{"no token", "", "Bearer " + meta, 401},
		{"invalid token", "not-a-jwt", "Bearer " + meta + `, error="invalid_token"`, 401},
		{"no read scope", h.writeOnlyToken(), "Bearer " + meta + `, error="insufficient_scope", scope="care.read.user"`, 403},
	} {
		r := h.do("POST", "/mcp", tc.tok, nil, pingBody)
		if r.status != tc.status || r.header.Get("WWW-Authenticate") != tc.wantAuth {
			t.Errorf("%s: %d %q, want %d %q", tc.name, r.status, r.header.Get("WWW-Authenticate"), tc.status, tc.wantAuth)
		}
	}
	// Twin: a read token initializes.
	if sid := h.rawInit(h.token("host", userScopes)); sid == "" {
		t.Error("no session for a valid token")
	}
}

func TestHTTP_HealthReadyMetrics(t *testing.T) {
	h := newHarness(t)
	if r := h.do("GET", "/healthz", "", nil, ""); r.status != 200 {
		t.Errorf("/healthz %d", r.status)
	}
	r := h.admin("GET", "/readyz", nil)
	var body map[string]any
	if err := json.Unmarshal(r.body, &body); err != nil || r.status != 200 || body["ok"] != true {
		t.Fatalf("admin /readyz %d %s", r.status, r.body)
	}
	if st, _ := body["store"].(map[string]any); st["ok"] != true || st["backend"] != "sqlite" {
		t.Errorf("admin /readyz store %v", body["store"])
	}
	c := h.connect(h.token("host", userScopes))
	c.listAll(t)
	m := h.admin("GET", "/metrics", nil)
	for _, want := range []string{
		`unsay_http_requests_total{code="200",route="/mcp"}`,
		`unsay_mcp_sessions 1`,
		`unsay_mcp_subscriptions 0`,
		`unsay_publish_latency_seconds_count`,
	} {
		if !strings.Contains(string(m.body), want) {
			t.Errorf("admin /metrics lacks %s", want)
		}
	}
	if strings.Contains(string(m.body), "Bearer") {
		t.Error("/metrics mentions a token")
	}
}

func TestHTTP_ReadyzIs503WhenAReadyHookReportsNotOK(t *testing.T) {
	h := newHarness(t)
	h.srv.extra.Ready = nil
	if r := h.do("GET", "/readyz", "", nil, ""); r.status != 200 {
		t.Fatalf("/readyz without hook: %d", r.status)
	}
	h.srv.extra.Ready = func(context.Context) map[string]any {
		return map[string]any{"speech": map[string]any{"ok": false, "state": "reconnecting"}}
	}
	r := h.do("GET", "/readyz", "", nil, "")
	if r.status != http.StatusServiceUnavailable || !strings.Contains(string(r.body), "speech not ready") || strings.Contains(string(r.body), "reconnecting") {
		t.Errorf("public /readyz with a failing hook: %d %s (want 503, the reason in general terms only)", r.status, r.body)
	}
	a := h.admin("GET", "/readyz", nil)
	if a.status != http.StatusServiceUnavailable || !strings.Contains(string(a.body), "reconnecting") {
		t.Errorf("admin /readyz with a failing hook: %d %s (want 503 with the details)", a.status, a.body)
	}
}

func TestKeepAlive_AListeningClientOutlivesTheIdleTimeout(t *testing.T) {
	h := newHarness(t, func(c *Config) {
		c.SessionTimeout = 300 * time.Millisecond
		c.KeepAlive = 60 * time.Millisecond
	})
	listening := h.connect(h.token("speech", userScopes)) // the SDK client keeps its GET stream open
	raw := h.rawInit(h.token("raw", userScopes))          // never opens a stream, never POSTs again
	time.Sleep(900 * time.Millisecond)
	if _, err := listening.cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: "care://ray/contact"}); err != nil {
		t.Errorf("the listening session did not survive the idle timeout: %v", err)
	}
	tok := h.token("raw", userScopes)
	r := h.do("POST", "/mcp", tok, map[string]string{"Mcp-Session-Id": raw, "MCP-Protocol-Version": ProtocolVersion}, pingBody)
	if r.status != http.StatusNotFound {
		t.Errorf("the idle raw session answered %d, want 404 (closed)", r.status)
	}
}

func TestHTTP_BadTokensAre401OnMCP(t *testing.T) {
	h := newHarness(t)
	sign := func(secret []byte, claims jwt.MapClaims) string {
		s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString(secret)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	claims := func(mut func(jwt.MapClaims)) jwt.MapClaims {
		c := jwt.MapClaims{"sub": "host", "aud": h.base + "/mcp", "scope": "care.read.user", "patients": []string{"ray"},
			"exp": time.Now().Add(time.Hour).Unix(), "iat": time.Now().Unix()}
		if mut != nil {
			mut(c)
		}
		return c
	}
	valid := sign(testSecret, claims(nil))
	parts := strings.Split(valid, ".")
	widened := base64.RawURLEncoding.EncodeToString([]byte(`{"sub":"host","aud":"` + h.base + `/mcp","scope":"care.read.user care.read.assistant","patients":["ray"],"exp":` + strconv.FormatInt(time.Now().Add(time.Hour).Unix(), 10) + `}`))
	none := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none","typ":"JWT"}`)) + "." + parts[1] + "."
	for name, tok := range map[string]string{
		"wrong audience": sign(testSecret, claims(func(c jwt.MapClaims) { c["aud"] = "https://elsewhere.example/mcp" })),
		"expired":        sign(testSecret, claims(func(c jwt.MapClaims) { c["exp"] = time.Now().Add(-time.Minute).Unix() })),
		"no expiry":      sign(testSecret, claims(func(c jwt.MapClaims) { delete(c, "exp") })),
		"alg none":       none,
		"wrong secret":   sign([]byte("another-secret-another-secret-0123456789"), claims(nil)),
		"scope tampered": parts[0] + "." + widened + "." + parts[2],
		"no patients":    sign(testSecret, claims(func(c jwt.MapClaims) { delete(c, "patients") })),
	} {
		r := h.do("POST", "/mcp", tok, nil, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`)
		if r.status != http.StatusUnauthorized || !strings.Contains(r.header.Get("WWW-Authenticate"), `error="invalid_token"`) {
			t.Errorf("%s: %d %q, want 401 invalid_token", name, r.status, r.header.Get("WWW-Authenticate"))
		}
	}
	// Positive twin: the untampered token initializes a session.
	if sid := h.rawInit(valid); sid == "" {
		t.Error("valid token refused")
	}
}

func TestHTTP_CORSPreflightOnlyForAllowedOrigins(t *testing.T) {
	h := newHarness(t)
	pre := map[string]string{"Origin": "https://carer.example", "Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "authorization, mcp-session-id"}
	r := h.do("OPTIONS", "/mcp", "", pre, "")
	if r.status != http.StatusNoContent || r.header.Get("Access-Control-Allow-Origin") != "https://carer.example" ||
		!strings.Contains(r.header.Get("Access-Control-Allow-Headers"), "Mcp-Session-Id") ||
		!strings.Contains(r.header.Get("Access-Control-Expose-Headers"), "Mcp-Session-Id") {
		t.Errorf("allowed preflight: %d %v", r.status, r.header)
	}
	pre["Origin"] = "https://evil.example"
	if r := h.do("OPTIONS", "/mcp", "", pre, ""); r.status != http.StatusForbidden || r.header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("foreign preflight: %d %v", r.status, r.header)
	}
	// An allowed origin's real request still needs a token.
	if r := h.do("POST", "/mcp", "", map[string]string{"Origin": "https://carer.example"}, pingBody); r.status != http.StatusUnauthorized {
		t.Errorf("allowed origin without token: %d", r.status)
	}
}
