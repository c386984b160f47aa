package speech

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/unsay/unsay/models"
)

// fakeCare is a small Unsay MCP server for these tests, built with the SDK
// the way the real bridge serves them: resources/list
// paged at 3 with a key cursor, resources/read with the unsay/* _meta keys,
// STALE and SUPERSEDED headers, -32002 for anything not found, subscribe
// hooks, updated for v ≥ 2 and list_changed for v1. It checks the bearer
// token and records every read and subscribe it is asked for.
type fakeCare struct {
	t           testing.TB
	clientToken string // what the principal under test sends
	srv         *httptest.Server

	keepAlive    time.Duration // the principal's Config.KeepAlive; -1 (off) unless a test sets it
	listenIdle   time.Duration // the principal's Config.ListenIdle; 0 (the default) unless a test sets it
	unauthorized atomic.Int64
	readDelay    atomic.Int64 // nanoseconds each resources/read and list page waits first (a slow or frozen server)
	readFail     atomic.Bool  // resources/read and list answer an internal error (a broken server)
	// undescribedList: resources/list entries carry no models.ListMeta (a
	// server that does not describe its versions; the principal reads
	// every fact to confirm it).
	undescribedList atomic.Bool
	// readHold, when set, holds every resources/read and list page after
	// its answer is decided (and recorded) until the channel is closed: a
	// request in flight.
	readHold atomic.Pointer[chan struct{}]
	// endHold, when set, holds the end of every POST's response for that
	// long after the SDK wrote (and flushed) it: the client has its answer
	// while the stream's end is still to come, as on a busy machine.
	endHold atomic.Int64 // nanoseconds

	// dual makes the fake serve 2026-07-28 too, statelessly, as the real
	// bridge does (newDualFakeCare); without it the fake is a legacy-only
	// server, like a remote Unsay that predates 2026-07-28.
	dual bool
	// probes counts requests at 2026-07-28 (server/discover first);
	// initializes counts initialize requests.
	probes, initializes atomic.Int64

	mu       sync.Mutex
	token    string                   // what the server accepts
	facts    map[string][]fakeVersion // unversioned URI → versions (index n-1)
	audience map[string]models.Audience
	extra    []string // listed non-care resources (ui://unsay/echo)
	reads    []string
	lists    int // resources/list requests for a first page: whole lists begun
	// listPages is each resources/list request's "unsay/patient" _meta
	// ("" without it), which the fake honours as the bridge does.
	listPages  []string
	subscribes []string
	listens    [][]string      // each subscriptions/listen's resourceSubscriptions, as asked
	refuse     map[string]bool // URIs a listen leaves unacknowledged
	server     *mcp.Server
	handler    http.Handler
	modern     *mcp.Server // dual only
	modernH    http.Handler
}

type fakeVersion struct {
	value       string
	authorID    string
	authorLabel string
	writtenAt   time.Time
	stale       bool
}

// fakeHash stands in for the chain hash of version n of fact (P-5): it
// names the version's words, so two versions that differ never share it.
func fakeHash(fact string, vs []fakeVersion, n int) string {
	fv := vs[n-1]
	return fmt.Sprintf("%x", sha256.Sum256([]byte(fmt.Sprint(fact, n, fv.value, fv.authorID, fv.writtenAt.UnixNano()))))
}

var fakeEpoch = time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)

func newFakeCare(t testing.TB) *fakeCare { return newFake(t, false) }

// newDualFakeCare is newFakeCare serving 2026-07-28 as well: a request
// carrying it (the MCP-Protocol-Version header) is served by a stateless
// SDK handler whose subscriptions/listen acknowledges only facts that
// exist (and not those in refuse).
func newDualFakeCare(t testing.TB) *fakeCare { return newFake(t, true) }

func newFake(t testing.TB, dual bool) *fakeCare {
	t.Helper()
	f := &fakeCare{
		dual:      dual,
		refuse:    map[string]bool{},
		t:         t,
		token:     "speech-token-" + t.Name(),
		facts:     map[string][]fakeVersion{},
		audience:  map[string]models.Audience{},
		extra:     []string{"ui://unsay/echo"},
		keepAlive: -1,
	}
	f.clientToken = f.token
	f.mu.Lock()
	f.server, f.handler = f.newServerLocked()
	f.modern, f.modernH = f.newModernLocked()
	f.mu.Unlock()
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("MCP-Protocol-Version") == ModernProtocolVersion {
			f.probes.Add(1)
		}
		f.mu.Lock()
		accepted := f.token
		f.mu.Unlock()
		if r.Header.Get("Authorization") != "Bearer "+accepted {
			f.unauthorized.Add(1)
			w.Header().Set("WWW-Authenticate", `Bearer resource_metadata="x"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		f.mu.Lock()
		h := f.handler
		if f.dual && r.Header.Get("MCP-Protocol-Version") == ModernProtocolVersion {
			h = f.modernH
		}
		f.mu.Unlock()
		h.ServeHTTP(w, r)
		if d := time.Duration(f.endHold.Load()); d > 0 && r.Method == http.MethodPost {
			_ = http.NewResponseController(w).Flush()
			time.Sleep(d)
		}
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeCare) url() string { return f.srv.URL + "/mcp" }

// newServerLocked builds a fresh MCP server and handler over the same facts:
// calling it again is a server restart (every session is forgotten).
func (f *fakeCare) newServerLocked() (*mcp.Server, http.Handler) {
	s := mcp.NewServer(&mcp.Implementation{Name: "fake-unsay", Version: "1"}, &mcp.ServerOptions{
		SubscribeHandler: func(_ context.Context, r *mcp.SubscribeRequest) error {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.subscribes = append(f.subscribes, r.Params.URI)
			if _, ok := f.facts[r.Params.URI]; !ok {
				return notFound(r.Params.URI)
			}
			return nil
		},
		UnsubscribeHandler: func(context.Context, *mcp.UnsubscribeRequest) error { return nil },
	})
	s.AddResource(&mcp.Resource{URI: "ui://unsay/echo", Name: "echo", MIMEType: "text/html;profile=mcp-app"},
		func(_ context.Context, r *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: r.Params.URI, Text: "<html></html>"}}}, nil
		})
	for uri := range f.facts {
		s.AddResource(&mcp.Resource{URI: uri, Name: uri}, f.unused)
	}
	s.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			switch method {
			case "initialize":
				f.initializes.Add(1)
			case "resources/list":
				return f.list(req.(*mcp.ListResourcesRequest).Params)
			case "resources/read":
				return f.read(req.(*mcp.ReadResourceRequest).Params.URI)
			}
			return next(ctx, method, req)
		}
	})
	return s, mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
}

// newModernLocked builds the 2026-07-28 side of a dual fake (nil, nil
// otherwise): the same facts, stateless, with subscriptions/listen
// narrowed to facts that exist and are not refused, as the bridge does.
func (f *fakeCare) newModernLocked() (*mcp.Server, http.Handler) {
	if !f.dual {
		return nil, nil
	}
	s := mcp.NewServer(&mcp.Implementation{Name: "fake-unsay-2026", Version: "1"}, &mcp.ServerOptions{
		SubscribeHandler:   func(context.Context, *mcp.SubscribeRequest) error { return nil },
		UnsubscribeHandler: func(context.Context, *mcp.UnsubscribeRequest) error { return nil },
	})
	s.AddResource(&mcp.Resource{URI: "ui://unsay/echo", Name: "echo", MIMEType: "text/html;profile=mcp-app"}, f.unused)
	for uri := range f.facts {
		s.AddResource(&mcp.Resource{URI: uri, Name: uri}, f.unused)
	}
	s.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			switch method {
			case "resources/list":
				return f.list(req.(*mcp.ListResourcesRequest).Params)
			case "resources/read":
				res, err := f.read(req.(*mcp.ReadResourceRequest).Params.URI)
				if we, ok := err.(*jsonrpc.Error); ok && we.Code == -32002 {
					we.Code = jsonrpc.CodeInvalidParams // SEP-2164
				}
				return res, err
			case "subscriptions/listen":
				lr := req.(*mcp.SubscriptionsListenRequest)
				if n := lr.Params.Notifications; n != nil {
					f.mu.Lock()
					f.listens = append(f.listens, slices.Clone(n.ResourceSubscriptions))
					var acked []string
					for _, u := range n.ResourceSubscriptions {
						if _, ok := f.facts[u]; ok && !f.refuse[u] {
							acked = append(acked, u)
						}
					}
					f.mu.Unlock()
					n.ResourceSubscriptions = acked
				}
			}
			return next(ctx, method, req)
		}
	})
	return s, mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{Stateless: true})
}

func (f *fakeCare) unused(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	return nil, fmt.Errorf("reads go through the middleware")
}

func notFound(uri string) error {
	data, _ := json.Marshal(map[string]string{"uri": uri})
	return &jsonrpc.Error{Code: -32002, Message: "Resource not found: " + uri, Data: data}
}

// list pages at 3 over URI order; the cursor is the last URI emitted.
// With "unsay/patient" in the params' _meta it lists only that patient's
// care facts, as the bridge does (bridge.MetaListPatient).
func (f *fakeCare) list(params *mcp.ListResourcesParams) (*mcp.ListResourcesResult, error) {
	cursor, patient := params.Cursor, ""
	if params.Meta != nil {
		patient, _ = params.Meta[metaListPatient].(string)
	}
	// A slow, broken or held server is slow, broken or held for lists too.
	if d := time.Duration(f.readDelay.Load()); d > 0 {
		time.Sleep(d)
	}
	if f.readFail.Load() {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "Internal error"}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if cursor == "" {
		f.lists++
	}
	f.listPages = append(f.listPages, patient)
	all := slices.Clone(f.extra)
	if patient != "" {
		all = nil
	}
	for uri := range f.facts {
		if u, err := models.ParseURI(uri); patient == "" || err == nil && u.Patient == patient {
			all = append(all, uri)
		}
	}
	sort.Strings(all)
	start := 0
	if cursor != "" {
		last, err := base64.RawURLEncoding.DecodeString(cursor)
		i := slices.Index(all, string(last))
		if err != nil || i < 0 {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "invalid cursor"}
		}
		start = i + 1
	}
	end := min(start+3, len(all))
	res := &mcp.ListResourcesResult{}
	for _, uri := range all[start:end] {
		r := &mcp.Resource{URI: uri, Name: uri}
		if vs := f.facts[uri]; len(vs) > 0 && !f.undescribedList.Load() {
			// As the bridge lists a fact: its current version described (models.ListMeta).
			r.Meta = models.ListMeta{Version: len(vs), VersionHash: fakeHash(uri, vs, len(vs)), Stale: vs[len(vs)-1].stale}.Map()
		}
		res.Resources = append(res.Resources, r)
	}
	if end < len(all) {
		res.NextCursor = base64.RawURLEncoding.EncodeToString([]byte(all[end-1]))
	}
	if h := f.readHold.Load(); h != nil {
		f.mu.Unlock()
		<-*h
		f.mu.Lock()
	}
	return res, nil
}

func (f *fakeCare) read(asked string) (*mcp.ReadResourceResult, error) {
	if d := time.Duration(f.readDelay.Load()); d > 0 {
		time.Sleep(d)
	}
	if f.readFail.Load() {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "Internal error"}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads = append(f.reads, asked)
	u, err := models.ParseURI(asked)
	if err != nil {
		return nil, notFound(asked)
	}
	fact := u.Unversioned().String()
	vs, ok := f.facts[fact]
	if !ok {
		return nil, notFound(asked)
	}
	n := len(vs)
	if u.Version != 0 {
		if u.Version > len(vs) {
			return nil, notFound(asked)
		}
		n = u.Version
	}
	fv := vs[n-1]
	if h := f.readHold.Load(); h != nil {
		f.mu.Unlock()
		<-*h
		f.mu.Lock()
	}
	// The read contract of bridge/resources.go, from models.
	v := models.Version{Patient: u.Patient, Domain: u.Domain, N: n, Audience: f.audience[fact], Value: fv.value,
		AuthorID: fv.authorID, AuthorLabel: fv.authorLabel, WrittenAt: fv.writtenAt,
		Hash: fakeHash(fact, vs, n)}
	if n > 1 {
		v.PrevHash = fakeHash(fact, vs, n-1)
	}
	if fv.stale {
		v.StaleAfter = fakeEpoch
	}
	now := time.Now()
	m := models.NewReadMeta(v, len(vs), now)
	text := models.ReadText(v, m, now)
	meta := mcp.Meta(m.Map())
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: asked, MIMEType: "text/plain", Text: text, Meta: meta}}}, nil
}

// setStale makes the current version of uri past its review date (or not)
// from now on: a review date that passes between two reads.
func (f *fakeCare) setStale(uri string, stale bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	vs := f.facts[uri]
	vs[len(vs)-1].stale = stale
}

// seed adds version 1 of a fact with no notification (the demo seed, P-8).
func (f *fakeCare) seed(uri, value string) {
	f.t.Helper()
	f.publishAs(uri, value, models.AudienceUser, false, false)
}

// publish appends a version and notifies like the real server: v1 →
// list_changed (through AddResource), v ≥ 2 → updated {uri}.
func (f *fakeCare) publish(uri, value string) int {
	f.t.Helper()
	return f.publishAs(uri, value, models.AudienceUser, true, false)
}

// publishSilently appends a version and tells nobody: a revision made
// while the principal was disconnected.
func (f *fakeCare) publishSilently(uri, value string) int {
	f.t.Helper()
	return f.publishAs(uri, value, models.AudienceUser, false, false)
}

func (f *fakeCare) publishAs(uri, value string, aud models.Audience, notify, stale bool) int {
	f.t.Helper()
	f.mu.Lock()
	vs := f.facts[uri]
	n := len(vs) + 1
	f.facts[uri] = append(vs, fakeVersion{
		value:       value,
		authorID:    "okafor",
		authorLabel: "Sarah Okafor, physio",
		writtenAt:   fakeEpoch.Add(time.Duration(n) * time.Hour),
		stale:       stale,
	})
	if n == 1 {
		f.audience[uri] = aud
	}
	servers := []*mcp.Server{f.server}
	if f.modern != nil {
		servers = append(servers, f.modern)
	}
	f.mu.Unlock()
	for _, s := range servers {
		if n == 1 {
			s.AddResource(&mcp.Resource{URI: uri, Name: uri}, f.unused) // list_changed to every session (listen stream)
			continue
		}
		if notify {
			if err := s.ResourceUpdated(context.Background(), &mcp.ResourceUpdatedNotificationParams{URI: uri}); err != nil {
				f.t.Errorf("ResourceUpdated: %v", err)
			}
		}
	}
	return n
}

// restart forgets every session, as a restarted server does: the old
// sessions are closed and a new server answers, so the client's session
// id now gets 404 (ErrSessionMissing).
func (f *fakeCare) restart() {
	f.mu.Lock()
	olds := []*mcp.Server{f.server, f.modern}
	f.server, f.handler = f.newServerLocked()
	f.modern, f.modernH = f.newModernLocked()
	f.mu.Unlock()
	for _, old := range olds {
		if old == nil {
			continue
		}
		for ss := range old.Sessions() {
			_ = ss.Close() // on 2026-07-28: ends each listen stream
		}
	}
}

// listenCount is how many subscriptions/listen requests the fake served.
func (f *fakeCare) listenCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.listens)
}

// forgetSessions swaps in a new server without closing the old sessions'
// streams: the client's event stream stays open on a ghost, and only its
// next request (a ping) learns that the session is gone.
func (f *fakeCare) forgetSessions() {
	f.mu.Lock()
	f.server, f.handler = f.newServerLocked()
	f.mu.Unlock()
}

// deleteSessions terminates every session with an HTTP DELETE, as a host
// or an operator may.
func (f *fakeCare) deleteSessions() {
	f.t.Helper()
	f.mu.Lock()
	s := f.server
	f.mu.Unlock()
	for ss := range s.Sessions() {
		req, _ := http.NewRequest(http.MethodDelete, f.url(), nil)
		req.Header.Set("Authorization", "Bearer "+f.clientToken)
		req.Header.Set("Mcp-Session-Id", ss.ID())
		req.Header.Set("Mcp-Protocol-Version", models.ProtocolVersion)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			f.t.Fatalf("DELETE session: %v", err)
		}
		resp.Body.Close()
		if resp.StatusCode/100 != 2 {
			f.t.Fatalf("DELETE session: %s", resp.Status)
		}
	}
}

func (f *fakeCare) sessionIDs() []string {
	f.mu.Lock()
	s := f.server
	f.mu.Unlock()
	var ids []string
	for ss := range s.Sessions() {
		ids = append(ids, ss.ID())
	}
	return ids
}

func (f *fakeCare) recorded() (reads, subscribes []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.reads), slices.Clone(f.subscribes)
}

// testPrincipal is a running principal against f on a ledger database.
type testPrincipal struct {
	*Principal
	cancel context.CancelFunc
	done   chan error
}

// startPrincipal runs a principal over a new handle on db: starting
// another on the same db is a restart, or a second instance.
func startPrincipal(t *testing.T, f *fakeCare, db *memDB, patients ...string) *testPrincipal {
	t.Helper()
	p, err := New(Config{
		MCPURL:         f.url(),
		Token:          f.clientToken,
		Patients:       patients,
		Ledger:         openDB(t, db),
		Backoff:        Backoff{Min: 20 * time.Millisecond, Max: 200 * time.Millisecond},
		RequestTimeout: 5 * time.Second,
		KeepAlive:      f.keepAlive,
		ListenIdle:     f.listenIdle,
	})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	tp := &testPrincipal{Principal: p, cancel: cancel, done: make(chan error, 1)}
	go func() { tp.done <- p.Run(ctx) }()
	t.Cleanup(tp.stop)
	return tp
}

// stop ends Run; safe to call twice.
func (tp *testPrincipal) stop() {
	tp.cancel()
	if tp.done != nil {
		<-tp.done
		tp.done = nil
	}
}

// eventually polls cond until it holds or 10 s pass (synchronization, not
// a timing assertion).
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func waitConnected(t *testing.T, p *testPrincipal) {
	t.Helper()
	eventually(t, "the principal to connect", func() bool { return p.State().Connected })
}

func waitPending(t *testing.T, p *testPrincipal, uri string, version int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	u := mustURI(t, uri)
	if err := p.WaitPending(ctx, u.Patient, u, version); err != nil {
		t.Fatalf("WaitPending(%s, v%d): %v", uri, version, err)
	}
}

func mustURI(t testing.TB, s string) models.URI {
	t.Helper()
	u, err := models.ParseURI(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func contains(list []string, s string) bool { return slices.Contains(list, s) }

func hasPrefixAny(list []string, prefix string) []string {
	var out []string
	for _, s := range list {
		if strings.HasPrefix(s, prefix) {
			out = append(out, s)
		}
	}
	return out
}

// createSilently adds version 1 of a new fact that the list serves at
// once but whose list_changed no session is sent yet: a fact created a
// moment before a turn.
func (f *fakeCare) createSilently(uri, value string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.facts[uri] = []fakeVersion{{value: value, authorID: "okafor", authorLabel: "Sarah Okafor, physio", writtenAt: time.Now().UTC().Truncate(time.Millisecond)}}
	f.audience[uri] = models.AudienceUser
}
