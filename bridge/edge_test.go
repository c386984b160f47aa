package bridge

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/unsay/unsay/models"
	"github.com/unsay/unsay/store"
)

// admin calls the admin handler (what --admin-addr serves) in process,
// with Host 127.0.0.1:9090.
func (h *harness) admin(method, path string, hdr map[string]string) rawResp {
	h.t.Helper()
	req := httptest.NewRequest(method, "http://127.0.0.1:9090"+path, nil)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	h.srv.AdminHandler().ServeHTTP(rec, req)
	body, _ := io.ReadAll(rec.Result().Body)
	return rawResp{status: rec.Code, header: rec.Result().Header, body: body}
}

// serve runs one request through the public handler in process, from
// remoteAddr with Host host (the real-socket harness always comes from
// 127.0.0.1).
func serve(s *Server, method, target, host, remoteAddr string, hdr map[string]string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, target, nil)
	req.Host, req.RemoteAddr = host, remoteAddr
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, req)
	return rec
}

// publicSnapshot is everything an anonymous stranger can read off the
// public listener's operational endpoints.
func (h *harness) publicSnapshot() string {
	h.t.Helper()
	var b strings.Builder
	for _, p := range []string{"/healthz", "/readyz", "/metrics"} {
		r := h.do("GET", p, "", nil, "")
		b.WriteString(p + " " + http.StatusText(r.status) + "\n" + string(r.body) + "\n")
	}
	return b.String()
}

// fanOutCount reads unsay_change_fanout_delay_seconds_count off the admin
// /metrics: the number of changes the server has fanned out.
func (h *harness) fanOutCount() string {
	h.t.Helper()
	m := regexp.MustCompile(`(?m)^unsay_change_fanout_delay_seconds_count (\d+)$`).FindSubmatch(h.admin("GET", "/metrics", nil).body)
	if m == nil {
		return ""
	}
	return string(m[1])
}

// waitFanOut waits until the admin fan-out count differs from before.
func (h *harness) waitFanOut(before string) {
	h.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for h.fanOutCount() == before {
		if time.Now().After(deadline) {
			h.t.Fatalf("the change was not fanned out within 10 s (count still %s)", before)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// An assistant-only write moves nothing an anonymous caller can read on the
// public listener: /readyz carries no sequence number and /metrics is not
// there. The twin: the admin listener's lastSeq and counters do move, so
// the test would see a change if the public side showed one.
func TestPublicEndpoints_AnAssistantOnlyWriteMovesNothingAStrangerCanRead(t *testing.T) {
	h := newHarness(t)
	c := h.connect(h.token("host", dualScopes)) // a session, so fan-out has someone to tell
	c.listAll(t)
	beforeAdmin := string(h.admin("GET", "/readyz", nil).body)
	beforeCount := h.fanOutCount()
	before := h.publicSnapshot()

	h.publish("clinical_notes", models.AudienceAssistant, "Assistant-only note, revised at "+time.Now().Format(time.RFC3339Nano))
	h.waitFanOut(beforeCount)

	if after := h.publicSnapshot(); after != before {
		t.Errorf("an assistant-only write changed what a stranger reads:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	if after := string(h.admin("GET", "/readyz", nil).body); after == beforeAdmin {
		t.Errorf("positive twin: the admin /readyz did not move with the write (%s)", after)
	}
}

func TestReadyz_PublicSaysReadyOrNotAndWhyInGeneralTerms(t *testing.T) {
	h := newHarness(t)
	h.srv.extra.Ready = func(context.Context) map[string]any {
		return map[string]any{"speech": map[string]any{"ok": true, "patients": []string{"ray"}, "instance": "box-7:4242:abcd", "backlog": 3}}
	}
	r := h.do("GET", "/readyz", "", nil, "")
	if r.status != http.StatusOK || strings.TrimSpace(string(r.body)) != `{"ok":true}` {
		t.Errorf("public /readyz: %d %s, want 200 {\"ok\":true} and nothing else", r.status, r.body)
	}
	// Twin: the admin /readyz carries the details.
	a := h.admin("GET", "/readyz", nil)
	for _, want := range []string{`"lastSeq"`, `"ray"`, `box-7:4242:abcd`, `"sessions"`} {
		if !strings.Contains(string(a.body), want) {
			t.Errorf("admin /readyz lacks %s: %s", want, a.body)
		}
	}
	// Not ready: the public body names the failing part only.
	h.srv.extra.Ready = func(context.Context) map[string]any {
		return map[string]any{"speech": map[string]any{"ok": false, "patients": []string{"ray"}, "instance": "box-7:4242:abcd"}}
	}
	r = h.do("GET", "/readyz", "", nil, "")
	var body struct {
		OK      *bool    `json:"ok"`
		Reasons []string `json:"reasons"`
	}
	if err := json.Unmarshal(r.body, &body); err != nil || r.status != 503 || body.OK == nil || *body.OK || len(body.Reasons) != 1 || body.Reasons[0] != "speech not ready" {
		t.Errorf("public /readyz not ready: %d %s", r.status, r.body)
	}
	if strings.Contains(string(r.body), "ray") || strings.Contains(string(r.body), "box-7") {
		t.Errorf("public /readyz names a patient or the instance: %s", r.body)
	}
}

func TestReadyz_NotReadyWhileTheStoreCannotCommitWrites(t *testing.T) {
	h := newHarness(t)
	h.srv.extra.StoreWritable = func(context.Context) store.WriteHealthReport {
		return store.WriteHealthReport{Err: errors.New("disk I/O error: /var/lib/unsay/unsay.db")}
	}
	r := h.do("GET", "/readyz", "", nil, "")
	if r.status != http.StatusServiceUnavailable || !strings.Contains(string(r.body), `"store cannot commit writes"`) || strings.Contains(string(r.body), "/var/lib") {
		t.Errorf("public /readyz with an unwritable store: %d %s (want 503, the reason, no path)", r.status, r.body)
	}
	if a := h.admin("GET", "/readyz", nil); a.status != http.StatusServiceUnavailable || !strings.Contains(string(a.body), `"writable":false`) {
		t.Errorf("admin /readyz with an unwritable store: %d %s", a.status, a.body)
	}
	// Twin: a store that commits is ready.
	h.srv.extra.StoreWritable = func(context.Context) store.WriteHealthReport { return store.WriteHealthReport{} }
	if r := h.do("GET", "/readyz", "", nil, ""); r.status != http.StatusOK {
		t.Errorf("public /readyz with a writable store: %d %s", r.status, r.body)
	}
	if a := h.admin("GET", "/readyz", nil); !strings.Contains(string(a.body), `"writable":true`) {
		t.Errorf("admin /readyz with a writable store: %s", a.body)
	}
}

// TestReadyz_AnswersWithinASecondAndSaysNotReadyWhileTheDatabaseIsLocked
// (T5): /readyz learnt of a database locked by another process only from
// a failed commit or a 15 s probe, and that probe held the request for the
// whole 10 s busy timeout. Now both /readyz answer within about a second
// while another connection holds the SQLite file's write lock (BEGIN
// EXCLUSIVE), say not ready within seconds (admin: "the database is busy",
// with the age of that answer), and ready again once it is released.
func TestReadyz_AnswersWithinASecondAndSaysNotReadyWhileTheDatabaseIsLocked(t *testing.T) {
	h := newHarness(t)
	h.srv.extra.StoreWritable = h.st.WriteHealthState
	timed := func(f func() rawResp) rawResp {
		t.Helper()
		start := time.Now()
		r := f()
		if d := time.Since(start); d > 2*time.Second {
			t.Fatalf("/readyz answered after %s (the busy timeout is 10 s)", d)
		}
		return r
	}
	public := func() rawResp { return h.do("GET", "/readyz", "", nil, "") }
	admin := func() rawResp { return h.admin("GET", "/readyz", nil) }
	if r := timed(public); r.status != http.StatusOK {
		t.Fatalf("public /readyz before the lock: %d %s", r.status, r.body)
	}

	db, err := sql.Open("sqlite", "file:"+h.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	conn, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(context.Background(), "BEGIN EXCLUSIVE"); err != nil {
		t.Fatal(err)
	}
	waitStatus := func(f func() rawResp, status int, what string) rawResp {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for {
			r := timed(f)
			if r.status == status {
				return r
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: /readyz still %d %s after 5 s", what, r.status, r.body)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	r := waitStatus(public, http.StatusServiceUnavailable, "locked")
	if !strings.Contains(string(r.body), `"store cannot commit writes"`) {
		t.Errorf("public /readyz while locked: %s, want the reason", r.body)
	}
	a := timed(admin)
	if a.status != http.StatusServiceUnavailable || !strings.Contains(string(a.body), `"writeFault":"the database is busy"`) ||
		!strings.Contains(string(a.body), `"writable":false`) || !strings.Contains(string(a.body), `"writeCheckedAgoMs":`) {
		t.Errorf("admin /readyz while locked: %d %s", a.status, a.body)
	}

	// Positive twin: released → ready again within seconds.
	if _, err := conn.ExecContext(context.Background(), "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	waitStatus(public, http.StatusOK, "released")
	if a := timed(admin); a.status != http.StatusOK || !strings.Contains(string(a.body), `"writable":true`) {
		t.Errorf("admin /readyz once released: %d %s", a.status, a.body)
	}
}

func TestMetrics_OnlyOnTheAdminHandler(t *testing.T) {
	h := newHarness(t)
	if r := h.do("GET", "/metrics", "", nil, ""); r.status != http.StatusNotFound {
		t.Errorf("public /metrics: %d, want 404", r.status)
	}
	if r := h.admin("GET", "/metrics", nil); r.status != http.StatusOK || !strings.Contains(string(r.body), "unsay_http_requests_total") {
		t.Errorf("admin /metrics: %d", r.status)
	}
}

func TestAdminHandler_RefusesAForeignDNSName(t *testing.T) {
	h := newHarness(t)
	for host, want := range map[string]int{
		"rebind.evil.example:9090": http.StatusForbidden,
		"10.0.0.11:9090":           http.StatusOK,
		"[::1]:9090":               http.StatusOK,
		"localhost:9090":           http.StatusOK,
	} {
		req := httptest.NewRequest("GET", "/metrics", nil)
		req.Host = host
		rec := httptest.NewRecorder()
		h.srv.AdminHandler().ServeHTTP(rec, req)
		if rec.Code != want {
			t.Errorf("admin /metrics with Host %s: %d, want %d", host, rec.Code, want)
		}
	}
}

// With a real public host, probes answer by address, the box itself reaches
// the server on a loopback name, and everything else still needs the
// public host.
func TestHostRule_ProbesByAddressAndTheLocalCLI(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.PublicURL = "https://care.example.org" })
	const (
		lb     = "10.0.0.2:41000"  // a load balancer
		local  = "127.0.0.1:41000" // the box itself
		remote = "203.0.113.7:41000"
	)
	xff := map[string]string{"X-Forwarded-For": "203.0.113.7"}
	fwd := map[string]string{"Forwarded": "for=203.0.113.7;proto=https"}
	for _, tc := range []struct {
		name, method, target, host, from string
		hdr                              map[string]string
		want                             int
	}{
		{"probe /healthz by address", "GET", "/healthz", "10.0.0.11:8080", lb, nil, 200},
		{"probe /readyz by address", "GET", "/readyz", "10.0.0.11:8080", lb, nil, 200},
		{"probe /readyz by a foreign name", "GET", "/readyz", "whatever.internal", lb, nil, 200},
		{"other route by address is refused", "GET", "/verify?uri=care://ray/weight_bearing", "10.0.0.11:8080", lb, nil, 403},
		{"public host", "GET", "/verify?uri=care://ray/weight_bearing", "care.example.org", remote, nil, 200},
		{"CLI on the box (127.0.0.1)", "GET", "/verify?uri=care://ray/weight_bearing", "127.0.0.1:8080", local, nil, 200},
		{"CLI on the box (localhost)", "GET", "/verify?uri=care://ray/weight_bearing", "localhost:8080", local, nil, 200},
		{"loopback Host from a remote peer", "GET", "/verify?uri=care://ray/weight_bearing", "127.0.0.1:8080", remote, nil, 403},
		{"loopback Host relayed by a proxy (X-Forwarded-For)", "GET", "/verify?uri=care://ray/weight_bearing", "127.0.0.1:8080", local, xff, 403},
		{"loopback Host relayed by a proxy (Forwarded)", "GET", "/verify?uri=care://ray/weight_bearing", "127.0.0.1:8080", local, fwd, 403},
		{"foreign name from the box", "GET", "/verify?uri=care://ray/weight_bearing", "evil.example", local, nil, 403},
	} {
		rec := serve(h.srv, tc.method, tc.target, tc.host, tc.from, tc.hdr)
		if rec.Code != tc.want {
			t.Errorf("%s: %d %s, want %d", tc.name, rec.Code, strings.TrimSpace(rec.Body.String()), tc.want)
		}
	}
}

func TestNoSniff_OnEveryResponse(t *testing.T) {
	h := newHarness(t)
	for _, tc := range []struct {
		method, path string
		hdr          map[string]string
	}{
		{"GET", "/healthz", nil},
		{"GET", "/readyz", nil},
		{"GET", "/", nil},
		{"GET", "/echo.html", nil},
		{"GET", "/clinician", nil},
		{"GET", "/verify?uri=care://ray/weight_bearing", nil},
		{"GET", "/.well-known/oauth-protected-resource/mcp", nil},
		{"POST", "/mcp", nil},
		{"POST", "/write", nil},
		{"GET", "/no-such-page", nil},
		{"GET", "/healthz", map[string]string{"Origin": "https://evil.example"}},
		{"OPTIONS", "/mcp", map[string]string{"Origin": "https://carer.example", "Access-Control-Request-Method": "POST"}},
	} {
		r := h.do(tc.method, tc.path, "", tc.hdr, "")
		if got := r.header.Get("X-Content-Type-Options"); got != "nosniff" {
			t.Errorf("%s %s (%d): X-Content-Type-Options %q, want nosniff", tc.method, tc.path, r.status, got)
		}
	}
	for _, p := range []string{"/readyz", "/metrics", "/nothing"} {
		if got := h.admin("GET", p, nil).header.Get("X-Content-Type-Options"); got != "nosniff" {
			t.Errorf("admin GET %s: X-Content-Type-Options %q, want nosniff", p, got)
		}
	}
}
