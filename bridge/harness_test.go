package bridge

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/unsay/unsay/bridge/auth"
	"github.com/unsay/unsay/bridge/httpapi"
	"github.com/unsay/unsay/models"
	"github.com/unsay/unsay/store"
)

var testSecret = []byte("bridge-test-token-secret-0123456789abcdef")

// Scopes used by the tests.
var (
	userScopes = []models.Scope{models.ScopeReadUser}
	dualScopes = []models.Scope{models.ScopeReadUser, models.ScopeReadAssistant}
)

// harness is a real server on a real socket over a real SQLite store in
// t.TempDir(), seeded with the demo seed.
type harness struct {
	t  testing.TB
	st *store.Store
	// dsn is the SQLite file st opened (for tests that tamper with it).
	dsn string
	// writeSecret signs POST /write.
	writeSecret []byte
	srv         *Server
	ts          *httptest.Server
	base        string
}

type harnessOpt func(*Config)

func newHarness(t testing.TB, opts ...harnessOpt) *harness {
	t.Helper()
	return newHarnessExtra(t, Extra{}, opts...)
}

// newHarnessExtra is newHarness with the optional pieces in extra.
func newHarnessExtra(t testing.TB, extra Extra, opts ...harnessOpt) *harness {
	t.Helper()
	ctx := context.Background()
	dsn := filepath.Join(t.TempDir(), "unsay.db")
	st, err := store.Open(ctx, store.Options{DSN: dsn, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatalf("store.Open: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	if _, err := store.Seed(ctx, st, st.Now()); err != nil {
		t.Fatalf("store.Seed: %v", err)
	}
	ts := httptest.NewUnstartedServer(nil)
	base := "http://" + ts.Listener.Addr().String()
	v, err := auth.NewVerifier(auth.Config{Secret: testSecret, PublicURL: base})
	if err != nil {
		t.Fatalf("auth.NewVerifier: %v", err)
	}
	writeSecret := []byte("bridge-test-write-secret-0123456789")
	logger := slog.New(slog.DiscardHandler)
	if os.Getenv("BRIDGE_TEST_LOG") != "" {
		logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	cfg := Config{PublicURL: base, AllowedOrigins: []string{"https://carer.example"}, Logger: logger}
	for _, o := range opts {
		o(&cfg)
	}
	srv, err := New(ctx, cfg, st, v, extra)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	srv.Mount(httpapi.New(httpapi.Config{
		Store: st, Verifier: v, WriteSecret: writeSecret, PublicURL: base,
		Subscribers: srv.Subscribers, OnPublish: srv.ObservePublish,
	}))
	ts.Config.Handler = srv.Handler()
	ts.Config.ConnContext = srv.ConnContext
	ts.Start()
	t.Cleanup(func() {
		srv.Close()
		ts.CloseClientConnections()
		ts.Close()
	})
	return &harness{t: t, st: st, dsn: dsn, srv: srv, ts: ts, base: base, writeSecret: writeSecret}
}

// token mints a token for subject sub bound to ray with the given scopes.
func (h *harness) token(sub string, scopes []models.Scope) string {
	h.t.Helper()
	tok, err := auth.Mint(auth.Config{Secret: testSecret, PublicURL: h.base}, sub, scopes, []string{"ray"}, time.Hour)
	if err != nil {
		h.t.Fatalf("Mint: %v", err)
	}
	return tok
}

// tokenFor mints a token for subject sub bound to patients with the given
// scopes, expiring ttl from now (at whole seconds: "exp" is a NumericDate).
func (h *harness) tokenFor(sub string, scopes []models.Scope, ttl time.Duration, patients ...string) string {
	h.t.Helper()
	tok, err := auth.Mint(auth.Config{Secret: testSecret, PublicURL: h.base}, sub, scopes, patients, ttl)
	if err != nil {
		h.t.Fatalf("Mint: %v", err)
	}
	return tok
}

// publish writes a revision directly through the store as a clinician.
func (h *harness) publish(domain string, a models.Audience, value string) store.PublishResult {
	h.t.Helper()
	p := models.Principal{Subject: "okafor", Scopes: []models.Scope{models.ScopeWrite, models.ScopeWriteAssistant}, Patients: []string{"ray"}}
	res, err := h.st.Publish(context.Background(), p, store.PublishInput{
		Patient: "ray", Domain: domain, Audience: a, Value: value,
		AuthorID: "okafor", AuthorLabel: "Sarah Okafor, physio", Priority: 0.5,
	})
	if err != nil {
		h.t.Fatalf("Publish %s: %v", domain, err)
	}
	return res
}

// bearer is an http.RoundTripper that adds a (replaceable) bearer token.
type bearer struct {
	tok  atomic.Value // string
	base http.RoundTripper
}

func (b *bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.tok.Load().(string))
	return b.base.RoundTrip(r)
}

// client is an SDK client session pinned to 2025-11-25 with recorded notifications.
type client struct {
	cs     *mcp.ClientSession
	bearer *bearer

	mu          sync.Mutex
	updated     []string
	logs        []map[string]any
	listChanged int
	events      chan string // "updated <uri>", "log <uri>", "list_changed"
}

func (h *harness) connect(tok string) *client {
	h.t.Helper()
	c := &client{bearer: &bearer{base: http.DefaultTransport}, events: make(chan string, 256)}
	c.bearer.tok.Store(tok)
	mc := mcp.NewClient(&mcp.Implementation{Name: "test-host", Version: "1"}, &mcp.ClientOptions{
		ResourceUpdatedHandler: func(_ context.Context, r *mcp.ResourceUpdatedNotificationRequest) {
			c.mu.Lock()
			c.updated = append(c.updated, r.Params.URI)
			c.mu.Unlock()
			c.events <- "updated " + r.Params.URI
		},
		ResourceListChangedHandler: func(context.Context, *mcp.ResourceListChangedRequest) {
			c.mu.Lock()
			c.listChanged++
			c.mu.Unlock()
			c.events <- "list_changed"
		},
		//lint:ignore SA1019 the test drives the 2025-11-25 logging channel the server keeps
		LoggingMessageHandler: func(_ context.Context, r *mcp.LoggingMessageRequest) {
			data, _ := r.Params.Data.(map[string]any)
			c.mu.Lock()
			c.logs = append(c.logs, data)
			c.mu.Unlock()
			c.events <- fmt.Sprintf("log %v", data["uri"])
		},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cs, err := mc.Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint: h.base + "/mcp", HTTPClient: &http.Client{Transport: c.bearer},
	}, &mcp.ClientSessionOptions{ProtocolVersion: ProtocolVersion})
	if err != nil {
		h.t.Fatalf("Connect: %v", err)
	}
	h.t.Cleanup(func() { cs.Close() })
	c.cs = cs
	return c
}

// waitFor waits for the next event satisfying match, failing after 5 s.
// Events that do not match are returned in skipped.
func (c *client) waitFor(t testing.TB, match func(string) bool) (skipped []string) {
	t.Helper()
	deadline := time.After(5 * time.Second)
	for {
		select {
		case e := <-c.events:
			if match(e) {
				return skipped
			}
			skipped = append(skipped, e)
		case <-deadline:
			t.Fatalf("timed out waiting for an event; saw %q", skipped)
			return skipped
		}
	}
}

// waitForAll waits until every event in want has arrived, in any order,
// and returns every event seen.
func (c *client) waitForAll(t testing.TB, want ...string) []string {
	t.Helper()
	missing := map[string]bool{}
	for _, w := range want {
		missing[w] = true
	}
	var seen []string
	deadline := time.After(5 * time.Second)
	for len(missing) > 0 {
		select {
		case e := <-c.events:
			seen = append(seen, e)
			delete(missing, e)
		case <-deadline:
			t.Fatalf("timed out waiting for %v; saw %q", want, seen)
		}
	}
	return seen
}

// drain returns the events that arrive within d.
func (c *client) drain(d time.Duration) []string {
	var out []string
	deadline := time.After(d)
	for {
		select {
		case e := <-c.events:
			out = append(out, e)
		case <-deadline:
			return out
		}
	}
}

func (c *client) listAll(t testing.TB) []*mcp.Resource {
	t.Helper()
	var out []*mcp.Resource
	for r, err := range c.cs.Resources(context.Background(), nil) {
		if err != nil {
			t.Fatalf("Resources: %v", err)
		}
		out = append(out, r)
	}
	return out
}

// wireError extracts the JSON-RPC error of err.
func wireError(t testing.TB, err error) *jsonrpc.Error {
	t.Helper()
	var we *jsonrpc.Error
	if !errors.As(err, &we) {
		t.Fatalf("error %v (%T) is not a JSON-RPC error", err, err)
	}
	return we
}

// ---- raw HTTP helpers ----

type rawResp struct {
	status int
	header http.Header
	body   []byte
}

func (h *harness) do(method, path, tok string, hdr map[string]string, body string) rawResp {
	h.t.Helper()
	req, err := http.NewRequest(method, h.base+path, strings.NewReader(body))
	if err != nil {
		h.t.Fatal(err)
	}
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return rawResp{status: resp.StatusCode, header: resp.Header, body: b}
}

// rawInit initializes a session over raw HTTP and sends
// notifications/initialized; it returns the session id.
func (h *harness) rawInit(tok string) string {
	h.t.Helper()
	r := h.do("POST", "/mcp", tok, nil, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	if r.status != http.StatusOK {
		h.t.Fatalf("initialize: %d %s", r.status, r.body)
	}
	sid := r.header.Get("Mcp-Session-Id")
	if sid == "" {
		h.t.Fatal("initialize: no Mcp-Session-Id")
	}
	n := h.do("POST", "/mcp", tok, map[string]string{"Mcp-Session-Id": sid, "MCP-Protocol-Version": ProtocolVersion},
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	if n.status != http.StatusAccepted {
		h.t.Fatalf("initialized: %d %s", n.status, n.body)
	}
	return sid
}

// rawCall makes one JSON-RPC call on session sid and returns the response frame.
func (h *harness) rawCall(tok, sid string, id int, method, params string) map[string]any {
	h.t.Helper()
	r := h.do("POST", "/mcp", tok, map[string]string{"Mcp-Session-Id": sid, "MCP-Protocol-Version": ProtocolVersion},
		fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`, id, method, params))
	if r.status != http.StatusOK {
		h.t.Fatalf("%s: %d %s", method, r.status, r.body)
	}
	for _, ev := range parseSSE(r.body) {
		if len(ev.data) == 0 {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal(ev.data, &m); err == nil && m["id"] != nil {
			return m
		}
	}
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		h.t.Fatalf("%s: no response frame in %q", method, r.body)
	}
	return m
}

type sseEvent struct {
	id   string
	data []byte
}

func parseSSE(b []byte) []sseEvent {
	var out []sseEvent
	var cur sseEvent
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if cur.id != "" || cur.data != nil {
				out = append(out, cur)
			}
			cur = sseEvent{}
		case strings.HasPrefix(line, "id:"):
			cur.id = strings.TrimSpace(strings.TrimPrefix(line, "id:"))
		case strings.HasPrefix(line, "data:"):
			cur.data = append(cur.data, strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " ")...)
		}
	}
	return out
}

// openStream opens the standalone GET stream of session sid (replaying from
// lastEventID when non-empty) and delivers its events on the channel until
// the returned cancel is called.
func (h *harness) openStream(tok, sid, lastEventID string) (<-chan sseEvent, int, func()) {
	h.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", h.base+"/mcp", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", sid)
	req.Header.Set("MCP-Protocol-Version", ProtocolVersion)
	if lastEventID != "" {
		req.Header.Set("Last-Event-ID", lastEventID)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		h.t.Fatalf("GET /mcp: %v", err)
	}
	ch := make(chan sseEvent, 64)
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		close(ch)
		return ch, resp.StatusCode, cancel
	}
	go func() {
		defer close(ch)
		defer resp.Body.Close()
		rd := bufio.NewReader(resp.Body)
		var cur sseEvent
		for {
			line, err := rd.ReadString('\n')
			if err != nil {
				return
			}
			line = strings.TrimRight(line, "\r\n")
			switch {
			case line == "":
				if cur.id != "" || cur.data != nil {
					ch <- cur
				}
				cur = sseEvent{}
			case strings.HasPrefix(line, "id:"):
				cur.id = strings.TrimSpace(strings.TrimPrefix(line, "id:"))
			case strings.HasPrefix(line, "data:"):
				cur.data = append(cur.data, strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " ")...)
			}
		}
	}()
	return ch, resp.StatusCode, cancel
}

// nextEvents reads n data events from ch within 5 s.
func nextEvents(t testing.TB, ch <-chan sseEvent, n int) []sseEvent {
	t.Helper()
	var out []sseEvent
	deadline := time.After(5 * time.Second)
	for len(out) < n {
		select {
		case ev, ok := <-ch:
			if !ok {
				t.Fatalf("stream ended after %d of %d events", len(out), n)
			}
			if len(ev.data) > 0 {
				out = append(out, ev)
			}
		case <-deadline:
			t.Fatalf("timed out after %d of %d events", len(out), n)
		}
	}
	return out
}

// writeOnlyToken mints a valid token with care.write only (no read scope).
func (h *harness) writeOnlyToken() string {
	h.t.Helper()
	return h.token("okafor", []models.Scope{models.ScopeWrite})
}

func defaultTransport() http.RoundTripper { return http.DefaultTransport }

func httpClient(rt http.RoundTripper) *http.Client { return &http.Client{Transport: rt} }

func storeInput(domain string, a models.Audience, value string) store.PublishInput {
	return store.PublishInput{Patient: "ray", Domain: domain, Audience: a, Value: value,
		AuthorID: "okafor", AuthorLabel: "Sarah Okafor, physio", Priority: 0.5}
}
