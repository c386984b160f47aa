package app_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/unsay/unsay/bridge/app"
	"github.com/unsay/unsay/bridge/auth"
	"github.com/unsay/unsay/bridge/httpapi"
	"github.com/unsay/unsay/models"
	"github.com/unsay/unsay/skill"
	"github.com/unsay/unsay/store"
)

// prodSecret passes for every production secret in these tests, and
// prodSigningKey for UNSAY_SIGNING_KEY.
var (
	prodSecret     = []byte("edge-test-production-secret-0123456789abcdef")
	prodSigningKey = []byte(store.FormatSigningKey(ed25519.NewKeyFromSeed(bytes.Repeat([]byte{9}, ed25519.SeedSize))))
)

// serveApp starts the whole program with cfg (a temporary SQLite database
// and a free loopback port unless set) and stops it at the end of the test.
func serveApp(t *testing.T, cfg app.Config) *app.App {
	t.Helper()
	if cfg.Addr == "" {
		cfg.Addr = "127.0.0.1:0"
	}
	if cfg.DB == "" {
		cfg.DB = filepath.Join(t.TempDir(), "unsay.db")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	a, err := app.New(context.Background(), cfg)
	if err != nil {
		t.Fatalf("app.New: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-done
		a.Close()
	})
	return a
}

// hostport is the listener address of a (its public URL must be loopback).
func hostport(t *testing.T, a *app.App) string {
	t.Helper()
	u, err := url.Parse(a.URL())
	if err != nil {
		t.Fatal(err)
	}
	return u.Host
}

// rawExchange dials addr, writes req, and reads the first answer (or the
// connection's end) within 20 s. It returns the status line ("" when the
// server closed the connection without one) and whether the connection
// ended by the server's doing rather than the client's 20 s limit.
func rawExchange(t *testing.T, addr, req string) (status string, serverEnded bool) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, req); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return "", !isTimeout(err)
	}
	return strings.TrimSpace(line), true
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout() || errors.Is(err, os.ErrDeadlineExceeded)
}

// A body that never finishes arriving is not held: the server gives up at
// the read timeout (300 ms here) on /write and on /alexa. Twin: the same
// request with its whole body is answered by the handler.
func TestServe_ASlowRequestBodyIsCutAtTheReadTimeout(t *testing.T) {
	a := serveApp(t, app.Config{HTTP: app.HTTPLimits{ReadTimeout: 300 * time.Millisecond},
		Alexa: skill.Config{Verify: true, SkillID: "amzn1.ask.skill.edge"}})
	addr := hostport(t, a)
	for _, path := range []string{"/write", "/alexa"} {
		head := "POST " + path + " HTTP/1.1\r\nHost: " + addr + "\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n"
		start := time.Now()
		status, ended := rawExchange(t, addr, head+"{") // one byte of two, then nothing
		if !ended {
			t.Errorf("POST %s with a body that never arrives: still held after 20 s", path)
			continue
		}
		if took := time.Since(start); took < 300*time.Millisecond {
			t.Errorf("POST %s ended after %v (%q), before the read timeout: not the timeout's doing", path, took, status)
		}
		// Twin: the whole body is read and judged by the handler (401: unsigned
		// write; 400: unverifiable Alexa request).
		status, _ = rawExchange(t, addr, head+"{}")
		if !strings.Contains(status, " 401 ") && !strings.Contains(status, " 400 ") {
			t.Errorf("POST %s with its whole body: %q, want the handler's 400/401", path, status)
		}
	}
}

// An idle keep-alive connection is closed at the idle timeout (300 ms
// here). Twin: a connection reused at once serves a second request.
func TestServe_AnIdleKeepAliveConnectionIsClosed(t *testing.T) {
	a := serveApp(t, app.Config{HTTP: app.HTTPLimits{IdleTimeout: 300 * time.Millisecond}})
	addr := hostport(t, a)
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	br := bufio.NewReader(conn)
	get := func() error {
		if _, err := io.WriteString(conn, "GET /healthz HTTP/1.1\r\nHost: "+addr+"\r\n\r\n"); err != nil {
			return err
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.Body.Close()
	}
	for i := range 2 {
		if err := get(); err != nil {
			t.Fatalf("request %d on a kept-alive connection: %v", i+1, err)
		}
	}
	_ = conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	if _, err := br.ReadByte(); err == nil || isTimeout(err) {
		t.Errorf("idle keep-alive connection: read %v, want the server to close it at the idle timeout", err)
	}
}

// holdServing opens a connection to addr whose request is being served
// until the read timeout: a POST /alexa whose body never comes. The
// server's 100 Continue shows its handler is reading the body.
func holdServing(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := io.WriteString(c, "POST /alexa HTTP/1.1\r\nHost: "+addr+"\r\nContent-Type: application/json\r\nContent-Length: 100\r\nExpect: 100-continue\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "HTTP/1.1 100") {
		t.Fatalf("a held request was not being served: %q, %v", line, err)
	}
	return c
}

// holdWaiting opens a connection to addr that sends half a request head
// and no more: it waits for headers until the header timeout.
func holdWaiting(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := io.WriteString(c, "POST /alexa HTTP/1.1\r\nHost: "+addr+"\r\n"); err != nil {
		t.Fatal(err)
	}
	return c
}

// askHealthz sends GET /healthz on a new connection and reports whether it
// was answered 200 within wait.
func askHealthz(t *testing.T, addr string, wait time.Duration) (net.Conn, bool) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: "+addr+"\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(wait))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return c, false
	}
	resp.Body.Close()
	return c, resp.StatusCode == http.StatusOK
}

// The public listener holds at most MaxConnections connections serving a
// request at once; another waits until one closes. Twin: closing one lets
// it in.
func TestServe_ConcurrentConnectionsServingRequestsAreCapped(t *testing.T) {
	a := serveApp(t, app.Config{HTTP: app.HTTPLimits{MaxConnections: 2}})
	addr := hostport(t, a)
	first := holdServing(t, addr)
	holdServing(t, addr)
	third, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer third.Close()
	if _, err := io.WriteString(third, "GET /healthz HTTP/1.1\r\nHost: "+addr+"\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(third)
	_ = third.SetReadDeadline(time.Now().Add(time.Second))
	if _, err := br.ReadByte(); !isTimeout(err) {
		t.Fatalf("a third connection was served while two were serving requests (read: %v); want it to wait", err)
	}
	first.Close()
	_ = third.SetReadDeadline(time.Now().Add(20 * time.Second))
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("the waiting connection after one closed: %v", err)
	}
	resp.Body.Close()
}

// breakit8 G11: connections that never send a whole request head (half
// headers re-sent before the header timeout) or sit idle between requests
// do not keep a whole request out when the cap is reached: the one that
// has waited longest is closed to make room, and the request is answered
// at once. Twin: TestServe_ConcurrentConnectionsServingRequestsAreCapped,
// where every held connection serves a request and nothing is closed.
func TestServe_HalfSentHeadersAndIdleKeepAlivesDoNotKeepARequestOut(t *testing.T) {
	a := serveApp(t, app.Config{HTTP: app.HTTPLimits{MaxConnections: 3}})
	addr := hostport(t, a)
	serving := holdServing(t, addr)
	idle, ok := askHealthz(t, addr, 20*time.Second) // answered, then idle on keep-alive
	if !ok {
		t.Fatal("the keep-alive connection was not served")
	}
	time.Sleep(20 * time.Millisecond) // so the two waiting connections wait in a known order
	half := holdWaiting(t, addr)
	for i, want := range []net.Conn{idle, half} {
		if _, ok := askHealthz(t, addr, 5*time.Second); !ok {
			t.Fatalf("request %d at the cap was not answered while connections waited for headers", i+1)
		}
		_ = want.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := want.Read(make([]byte, 512)); err == nil || isTimeout(err) {
			t.Errorf("request %d: the connection waiting longest was not closed to make room (read: %v)", i+1, err)
		}
	}
	_ = serving.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	if _, err := serving.Read(make([]byte, 1)); !isTimeout(err) {
		t.Errorf("the connection serving a request was closed or answered (read: %v); want it left alone", err)
	}
}

// The speech principal does not count against the public cap: with the cap
// at one connection, held by a stranger, the speech principal still opens a
// new session for a newly followed patient and holds his facts. Twin: a
// second stranger is not served.
func TestServe_TheSpeechPrincipalIsNotKeptOutByTheConnectionCap(t *testing.T) {
	a := serveApp(t, app.Config{HTTP: app.HTTPLimits{MaxConnections: 1}})
	addr := hostport(t, a)
	stranger, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer stranger.Close()
	if _, err := io.WriteString(stranger, "GET /healthz HTTP/1.1\r\nHost: "+addr+"\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	_ = stranger.SetReadDeadline(time.Now().Add(20 * time.Second))
	if resp, err := http.ReadResponse(bufio.NewReader(stranger), nil); err != nil {
		t.Fatalf("the stranger was not served the only public connection: %v", err)
	} else {
		resp.Body.Close()
	}
	// A new patient set is a new MCP session: new requests, new connections.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	eventually(t, "the speech principal's first session", func() bool { return a.Speech.State().Connected })
	if err := a.Speech.AddPatient(ctx, "ray"); err != nil {
		t.Fatalf("the speech principal could not follow ray while a stranger holds the only public connection: %v", err)
	}
	eventually(t, "the speech principal to hold Ray's facts", func() bool {
		f, err := a.Speech.Facts(context.Background(), "ray")
		return err == nil && len(f) > 0
	})
	// Twin: a second public connection waits while the first serves a
	// request (an idle one would be closed to make room for it).
	stranger.Close()
	holdServing(t, addr)
	if _, ok := askHealthz(t, addr, time.Second); ok {
		t.Errorf("a second public connection was served over the cap of one")
	}
}

// mcpPost POSTs one JSON-RPC message to /mcp and returns the response.
func mcpPost(t *testing.T, base, tok, sid, body string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, base+"/mcp", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if sid != "" {
		req.Header.Set("Mcp-Session-Id", sid)
		req.Header.Set("MCP-Protocol-Version", "2025-11-25")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// The GET /mcp event stream outlives the server-wide read and write
// timeouts (300 ms here): a revision written a second later still arrives
// on it. Twin: an ordinary request on the same server still answers.
func TestServe_TheMCPEventStreamOutlivesTheServerWideTimeouts(t *testing.T) {
	a := serveApp(t, app.Config{HTTP: app.HTTPLimits{ReadTimeout: 300 * time.Millisecond, WriteTimeout: 300 * time.Millisecond}})
	base := a.URL()
	tok, err := auth.Mint(a.TokenConfig(), "edge-host", []models.Scope{models.ScopeReadUser}, []string{"ray"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	resp := mcpPost(t, base, tok, "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"edge","version":"1"}}}`)
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	sid := resp.Header.Get("Mcp-Session-Id")
	if sid == "" {
		t.Fatalf("initialize: %d, no session", resp.StatusCode)
	}
	for i, m := range []string{`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"resources/subscribe","params":{"uri":"care://ray/weight_bearing"}}`} {
		r := mcpPost(t, base, tok, sid, m)
		_, _ = io.Copy(io.Discard, r.Body)
		r.Body.Close()
		if r.StatusCode/100 != 2 {
			t.Fatalf("message %d: %d", i, r.StatusCode)
		}
	}
	req, _ := http.NewRequest(http.MethodGet, base+"/mcp", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", sid)
	req.Header.Set("MCP-Protocol-Version", "2025-11-25")
	stream, err := http.DefaultClient.Do(req)
	if err != nil || stream.StatusCode != http.StatusOK {
		t.Fatalf("GET /mcp: %v", err)
	}
	defer stream.Body.Close()
	lines := make(chan string, 64)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stream.Body)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()

	time.Sleep(time.Second) // past both server-wide timeouts: the condition under test
	body, _ := json.Marshal(map[string]any{"patient": "ray", "domain": "weight_bearing", "audience": "user",
		"value": "Full weight-bearing as tolerated.", "authorId": "okafor", "authorLabel": "Sarah Okafor, physio"})
	ts := time.Now().Unix()
	wreq, _ := http.NewRequest(http.MethodPost, base+"/write", bytes.NewReader(body))
	wreq.Header.Set("Content-Type", "application/json")
	wreq.Header.Set(httpapi.HeaderTimestamp, strconv.FormatInt(ts, 10))
	wreq.Header.Set(httpapi.HeaderSignature, httpapi.SignWrite([]byte(httpapi.DevWriteSecret), ts, body))
	wresp, err := http.DefaultClient.Do(wreq)
	if err != nil {
		t.Fatal(err)
	}
	wresp.Body.Close()
	if wresp.StatusCode != http.StatusCreated {
		t.Fatalf("twin: the ordinary /write answered %d", wresp.StatusCode)
	}
	deadline := time.After(20 * time.Second)
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatal("the GET /mcp stream ended before the revision arrived")
			}
			if strings.Contains(l, "notifications/resources/updated") && strings.Contains(l, "care://ray/weight_bearing") {
				return
			}
		case <-deadline:
			t.Fatal("no resources/updated on the stream within 20 s")
		}
	}
}

// While a development-only setting is in force (allowed on a loopback
// listener only), a request relayed by a reverse proxy is refused. Twins:
// the same request straight from the box is served, and with production
// settings a relayed request is served.
func TestServe_DevelopmentSettingsRefuseRequestsRelayedByAProxy(t *testing.T) {
	get := func(a *app.App, hdr map[string]string) int {
		req, _ := http.NewRequest(http.MethodGet, a.URL()+"/verify?uri=care://ray/weight_bearing", nil)
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	relayed := []map[string]string{
		{"X-Forwarded-For": "203.0.113.7"},
		{"Forwarded": "for=203.0.113.7;proto=https"},
		{"X-Real-IP": "203.0.113.7"},
	}
	for name, cfg := range map[string]app.Config{
		"development secrets":  {Alexa: skill.Config{Verify: true, SkillID: "amzn1.ask.skill.edge"}},
		"--alexa-verify=false": {TokenSecret: prodSecret, WriteSecret: prodSecret, AuditKey: prodSecret, SigningKey: prodSigningKey},
		"--default-patient": {TokenSecret: prodSecret, WriteSecret: prodSecret, AuditKey: prodSecret, SigningKey: prodSigningKey,
			Alexa: skill.Config{Verify: true, SkillID: "amzn1.ask.skill.edge", DefaultPatient: "ray"}},
	} {
		a := serveApp(t, cfg)
		for _, h := range relayed {
			if got := get(a, h); got != http.StatusForbidden {
				t.Errorf("%s, relayed (%v): %d, want 403", name, h, got)
			}
		}
		if got := get(a, nil); got != http.StatusOK {
			t.Errorf("%s, straight from the box: %d, want 200", name, got)
		}
	}
	prod := serveApp(t, app.Config{TokenSecret: prodSecret, WriteSecret: prodSecret, AuditKey: prodSecret, SigningKey: prodSigningKey,
		Alexa: skill.Config{Verify: true, SkillID: "amzn1.ask.skill.edge"}})
	for _, h := range relayed {
		if got := get(prod, h); got != http.StatusOK {
			t.Errorf("production settings, relayed (%v): %d, want 200", h, got)
		}
	}
}

// With a real public host, a signed write sent by the CLI on the box to
// http://127.0.0.1:PORT is applied, and a load balancer's probe by address
// is answered. Twin: the same write relayed by a proxy with a loopback Host
// is refused.
func TestServe_TheCLIOnTheBoxReachesAnInstanceWithAPublicHost(t *testing.T) {
	a := serveApp(t, app.Config{PublicURL: "https://care.example.org", TokenSecret: prodSecret, WriteSecret: prodSecret, AuditKey: prodSecret, SigningKey: prodSigningKey,
		Alexa: skill.Config{Verify: true, SkillID: "amzn1.ask.skill.edge"}})
	local := "http://" + listenAddr(t, a)
	write := func(hdr map[string]string) int {
		body, _ := json.Marshal(map[string]any{"patient": "ray", "domain": "weight_bearing", "audience": "user",
			"value": "Full weight-bearing as tolerated, from the box " + strconv.FormatInt(time.Now().UnixNano(), 10), "authorId": "okafor", "authorLabel": "Sarah Okafor, physio"})
		ts := time.Now().Unix()
		req, _ := http.NewRequest(http.MethodPost, local+"/write", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(httpapi.HeaderTimestamp, strconv.FormatInt(ts, 10))
		req.Header.Set(httpapi.HeaderSignature, httpapi.SignWrite(prodSecret, ts, body))
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := write(nil); got != http.StatusCreated {
		t.Errorf("signed write to %s from the box: %d, want 201", local, got)
	}
	if got := write(map[string]string{"X-Forwarded-For": "203.0.113.7"}); got != http.StatusForbidden {
		t.Errorf("the same write relayed by a proxy with a loopback Host: %d, want 403", got)
	}
	for _, p := range []string{"/healthz", "/readyz"} {
		req, _ := http.NewRequest(http.MethodGet, local+p, nil)
		req.Host = "10.0.0.11:8080" // the instance's address, as a load balancer probes it
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusForbidden {
			t.Errorf("probe %s by address: 403", p)
		}
	}
}

// listenAddr is the public listener's address (the public URL may name
// another host).
func listenAddr(t *testing.T, a *app.App) string {
	t.Helper()
	addr := a.ListenAddr()
	if addr == "" {
		t.Fatal("no listen address")
	}
	return addr
}

// The admin listener is off by default; with --admin-addr it serves the
// readiness details and /metrics, and pprof only with --admin-pprof. The
// public listener never serves any of them.
func TestServe_AdminListenerServesDetailsMetricsAndPprofOnlyWhenAsked(t *testing.T) {
	status := func(u string) (int, string) {
		resp, err := http.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	off := serveApp(t, app.Config{})
	if off.AdminURL() != "" {
		t.Errorf("admin listener on by default: %s", off.AdminURL())
	}
	for _, p := range []string{"/metrics", "/debug/pprof/"} {
		if code, _ := status(off.URL() + p); code != http.StatusNotFound {
			t.Errorf("public %s: %d, want 404", p, code)
		}
	}
	if _, body := status(off.URL() + "/readyz"); strings.Contains(body, "lastSeq") || strings.Contains(body, "patients") || strings.Contains(body, "instance") {
		t.Errorf("public /readyz shows details: %s", body)
	}

	on := serveApp(t, app.Config{AdminAddr: "127.0.0.1:0", SpeechPatients: []string{"ray"}})
	if on.AdminURL() == "" || !strings.Contains(on.StartupLine(), "admin "+on.AdminURL()) {
		t.Fatalf("admin listener not announced: %q", on.StartupLine())
	}
	if code, body := status(on.AdminURL() + "/metrics"); code != 200 || !strings.Contains(body, "unsay_mcp_sessions") {
		t.Errorf("admin /metrics: %d", code)
	}
	eventually(t, "the admin /readyz to show the speech principal's details", func() bool {
		_, body := status(on.AdminURL() + "/readyz")
		return strings.Contains(body, `"lastSeq"`) && strings.Contains(body, `"ray"`) && strings.Contains(body, `"instance"`)
	})
	if code, _ := status(on.AdminURL() + "/debug/pprof/"); code != http.StatusNotFound {
		t.Errorf("admin pprof without --admin-pprof: %d, want 404", code)
	}

	prof := serveApp(t, app.Config{AdminAddr: "127.0.0.1:0", AdminPprof: true})
	for _, p := range []string{"/debug/pprof/", "/debug/pprof/goroutine?debug=1", "/debug/pprof/cmdline"} {
		if code, _ := status(prof.AdminURL() + p); code != http.StatusOK {
			t.Errorf("admin %s with --admin-pprof: %d, want 200", p, code)
		}
	}
	if code, _ := status(prof.URL() + "/debug/pprof/"); code != http.StatusNotFound {
		t.Errorf("public /debug/pprof/ with --admin-pprof: %d, want 404", code)
	}
	if _, err := app.New(context.Background(), app.Config{Addr: "127.0.0.1:0", DB: filepath.Join(t.TempDir(), "u.db"), AdminPprof: true}); err == nil || !strings.Contains(err.Error(), "--admin-addr") {
		t.Errorf("--admin-pprof without --admin-addr: %v, want a refusal", err)
	}
}
