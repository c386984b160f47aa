package bridge

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/unsay/unsay/models"
)

func mustURI(s string) models.URI {
	u, err := models.ParseURI(s)
	if err != nil {
		panic(err)
	}
	return u
}

// modernMeta is the per-request _meta of a 2026-07-28 request.
const modernMeta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"raw","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}`

// modernHeaders are the request headers of a 2026-07-28 request for method
// (and Mcp-Name for name, when non-empty).
func modernHeaders(method, name string) map[string]string {
	h := map[string]string{"MCP-Protocol-Version": ModernProtocolVersion, "Mcp-Method": method}
	if name != "" {
		h["Mcp-Name"] = name
	}
	return h
}

// withMeta puts modernMeta into a JSON params object ("{}" or "{...}").
func withMeta(params string) string {
	params = strings.TrimSpace(params)
	if params == "" || params == "{}" {
		return "{" + modernMeta + "}"
	}
	return "{" + modernMeta + "," + strings.TrimPrefix(params, "{")
}

// modernCall makes one 2026-07-28 request (no session) and returns the HTTP
// status and the response frame (from an SSE or a JSON body).
func (h *harness) modernCall(tok string, id int, method, name, params string) (int, map[string]any) {
	h.t.Helper()
	r := h.do("POST", "/mcp", tok, modernHeaders(method, name),
		fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`, id, method, withMeta(params)))
	return r.status, responseFrame(h.t, r)
}

// responseFrame is the JSON-RPC response (a frame with an id) of r's body.
func responseFrame(t testing.TB, r rawResp) map[string]any {
	t.Helper()
	for _, ev := range parseSSE(r.body) {
		var m map[string]any
		if err := json.Unmarshal(ev.data, &m); err == nil && m["id"] != nil {
			return m
		}
	}
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("no JSON-RPC frame in HTTP %d %q", r.status, r.body)
	}
	return m
}

// errorOf returns a frame's JSON-RPC error code and message (0, "" for a result).
func errorOf(m map[string]any) (int, string, map[string]any) {
	e, ok := m["error"].(map[string]any)
	if !ok {
		return 0, "", nil
	}
	code, _ := e["code"].(float64)
	msg, _ := e["message"].(string)
	data, _ := e["data"].(map[string]any)
	return int(code), msg, data
}

// listenStream is an open subscriptions/listen response stream.
type listenStream struct {
	status int
	frames chan map[string]any // every frame, in order; closed when the stream ends
	cancel func()
}

// openListen sends subscriptions/listen with the given notifications
// object and delivers the frames of its response stream.
func (h *harness) openListen(tok string, id int, notifications string) *listenStream {
	h.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"subscriptions/listen","params":{%s,"notifications":%s}}`, id, modernMeta, notifications)
	req, _ := http.NewRequestWithContext(ctx, "POST", h.base+"/mcp", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range modernHeaders("subscriptions/listen", "") {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		h.t.Fatalf("subscriptions/listen: %v", err)
	}
	ls := &listenStream{status: resp.StatusCode, frames: make(chan map[string]any, 256), cancel: cancel}
	h.t.Cleanup(cancel)
	go func() {
		defer close(ls.frames)
		defer resp.Body.Close()
		rd := bufio.NewReader(resp.Body)
		var data []byte
		for {
			line, err := rd.ReadString('\n')
			if err != nil {
				return
			}
			line = strings.TrimRight(line, "\r\n")
			switch {
			case line == "" && len(data) > 0:
				var m map[string]any
				if json.Unmarshal(data, &m) == nil {
					ls.frames <- m
				}
				data = nil
			case strings.HasPrefix(line, "data:"):
				data = append(data, strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " ")...)
			case strings.HasPrefix(line, "{"): // an application/json body
				var m map[string]any
				if json.Unmarshal([]byte(line), &m) == nil {
					ls.frames <- m
				}
			}
		}
	}()
	return ls
}

// next returns the next frame within 5 s, failing the test otherwise; ok
// is false when the stream ended.
func (ls *listenStream) next(t testing.TB) (map[string]any, bool) {
	t.Helper()
	select {
	case m, ok := <-ls.frames:
		return m, ok
	case <-time.After(5 * time.Second):
		t.Fatal("no frame on the listen stream within 5 s")
		return nil, false
	}
}

// quiet returns the frames that arrive within d (the stream stays open).
func (ls *listenStream) quiet(d time.Duration) []map[string]any {
	var out []map[string]any
	deadline := time.After(d)
	for {
		select {
		case m, ok := <-ls.frames:
			if !ok {
				return out
			}
			out = append(out, m)
		case <-deadline:
			return out
		}
	}
}

// ackedURIs returns the resourceSubscriptions of an acknowledgement frame,
// failing unless f is one.
func ackedURIs(t testing.TB, f map[string]any) []string {
	t.Helper()
	if f["method"] != methodAcknowledged {
		t.Fatalf("first frame on the listen stream is %v, want %s", f, methodAcknowledged)
	}
	params, _ := f["params"].(map[string]any)
	n, _ := params["notifications"].(map[string]any)
	var out []string
	raw, _ := n["resourceSubscriptions"].([]any)
	for _, u := range raw {
		out = append(out, u.(string))
	}
	return out
}

func subscriptionIDOf(f map[string]any) any {
	params, _ := f["params"].(map[string]any)
	if params == nil {
		params, _ = f["result"].(map[string]any)
	}
	meta, _ := params["_meta"].(map[string]any)
	return meta["io.modelcontextprotocol/subscriptionId"]
}

func TestModern_DiscoverListsBothErasAndOpensNoSession(t *testing.T) {
	h := newHarness(t)
	tok := h.token("host", userScopes)
	r := h.do("POST", "/mcp", tok, modernHeaders("server/discover", ""),
		`{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{`+modernMeta+`}}`)
	if r.status != http.StatusOK {
		t.Fatalf("server/discover: HTTP %d %s", r.status, r.body)
	}
	if sid := r.header.Get("Mcp-Session-Id"); sid != "" {
		t.Errorf("server/discover minted a session id %q", sid)
	}
	res, _ := responseFrame(t, r)["result"].(map[string]any)
	var versions []string
	for _, v := range res["supportedVersions"].([]any) {
		versions = append(versions, v.(string))
	}
	if strings.Join(versions, ",") != strings.Join(SupportedProtocolVersions(), ",") {
		t.Errorf("supportedVersions %v, want %v", versions, SupportedProtocolVersions())
	}
	for _, v := range []string{ModernProtocolVersion, ProtocolVersion} {
		if !contains(versions, v) {
			t.Errorf("supportedVersions %v lack %s", versions, v)
		}
	}
	ins, _ := res["instructions"].(string)
	for _, want := range []string{"whats_changed", MetaLastReadVersion, "previousValue", "retraction"} {
		if !strings.Contains(ins, want) {
			t.Errorf("instructions do not mention %q", want)
		}
	}
	caps, _ := res["capabilities"].(map[string]any)
	resources, _ := caps["resources"].(map[string]any)
	if resources["subscribe"] != true || resources["listChanged"] != true {
		t.Errorf("capabilities.resources = %v, want subscribe and listChanged", resources)
	}
	if h.srv.sessions.len() != 0 {
		t.Errorf("%d sessions registered after server/discover, want 0", h.srv.sessions.len())
	}
	// Twin: initialize still opens a 2025-11-25 session on the same endpoint.
	if sid := h.rawInit(tok); h.srv.sessions.get(sid) == nil {
		t.Error("initialize opened no session")
	}
}

// TestModern_EveryProbeGetsAModernAnswer: however a client puts 2026-07-28
// (or another version) into a request, the answer is a result or a
// JSON-RPC error a dual-era client recognises as modern (it then stays on
// 2026-07-28 or retries with a listed version, rather than falling back):
// -32020 for a missing or mismatched header, -32602 for missing _meta,
// -32022 with the full supported list for a version /mcp does not serve.
func TestModern_EveryProbeGetsAModernAnswer(t *testing.T) {
	h := newHarness(t)
	tok := h.token("host", userScopes)
	sid := h.rawInit(tok)
	discover := func(meta string) string {
		return `{"jsonrpc":"2.0","id":5,"method":"server/discover","params":{"_meta":{` + meta + `"io.modelcontextprotocol/clientCapabilities":{}}}}`
	}
	pv := func(v string) string { return `"io.modelcontextprotocol/protocolVersion":"` + v + `",` }
	for _, tc := range []struct {
		name     string
		hdr      map[string]string
		body     string
		status   int
		code     int
		versions bool // error.data lists SupportedProtocolVersions
	}{
		{"header and _meta", modernHeaders("server/discover", ""), discover(pv(ModernProtocolVersion)), 200, 0, false},
		{"header, _meta and a stale session id", map[string]string{"MCP-Protocol-Version": ModernProtocolVersion, "Mcp-Method": "server/discover", "Mcp-Session-Id": sid}, discover(pv(ModernProtocolVersion)), 200, 0, false},
		{"_meta without the header", map[string]string{"Mcp-Method": "server/discover"}, discover(pv(ModernProtocolVersion)), 400, -32020, false},
		{"header without _meta", modernHeaders("server/discover", ""), `{"jsonrpc":"2.0","id":5,"method":"server/discover","params":{}}`, 400, -32602, false},
		{"header and _meta disagree", map[string]string{"MCP-Protocol-Version": ProtocolVersion, "Mcp-Method": "server/discover"}, discover(pv(ModernProtocolVersion)), 400, -32020, false},
		{"a future version", map[string]string{"MCP-Protocol-Version": "2099-01-01", "Mcp-Method": "server/discover"}, discover(pv("2099-01-01")), 400, -32022, true},
		{"an unknown old version", map[string]string{"MCP-Protocol-Version": "1900-01-01"}, discover(pv("1900-01-01")), 400, -32022, true},
		{"an unknown version on a session", map[string]string{"MCP-Protocol-Version": "2024-01-01", "Mcp-Session-Id": sid}, pingBody, 400, -32022, true},
		{"initialize at 2026-07-28", modernHeaders("initialize", ""), `{"jsonrpc":"2.0","id":5,"method":"initialize","params":{` + modernMeta + `}}`, 404, -32601, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := h.do("POST", "/mcp", tok, tc.hdr, tc.body)
			if r.status != tc.status {
				t.Fatalf("HTTP %d %s, want %d", r.status, r.body, tc.status)
			}
			if r.header.Get("Mcp-Session-Id") != "" {
				t.Errorf("answered with a session id")
			}
			f := responseFrame(t, r)
			code, msg, data := errorOf(f)
			if code != tc.code {
				t.Fatalf("JSON-RPC error %d %q, want %d (frame %v)", code, msg, tc.code, f)
			}
			if code == 0 && f["result"] == nil {
				t.Fatalf("neither a result nor an error: %v", f)
			}
			if tc.versions {
				var got []string
				sup, _ := data["supported"].([]any)
				for _, v := range sup {
					got = append(got, v.(string))
				}
				if strings.Join(got, ",") != strings.Join(SupportedProtocolVersions(), ",") {
					t.Errorf("error.data.supported %v, want %v", got, SupportedProtocolVersions())
				}
				if data["requested"] != tc.hdr["MCP-Protocol-Version"] {
					t.Errorf("error.data.requested %v, want %q", data["requested"], tc.hdr["MCP-Protocol-Version"])
				}
				if fmt.Sprint(f["id"]) != "5" && fmt.Sprint(f["id"]) != "7" {
					t.Errorf("error id %v does not echo the request's", f["id"])
				}
			}
		})
	}
	// Twin: the session's own version is still served on the stateful path.
	if r := h.do("POST", "/mcp", tok, map[string]string{"MCP-Protocol-Version": ProtocolVersion, "Mcp-Session-Id": sid}, pingBody); r.status != http.StatusOK {
		t.Errorf("ping on the session: HTTP %d %s", r.status, r.body)
	}
	if r := h.do("GET", "/mcp", tok, map[string]string{"MCP-Protocol-Version": ModernProtocolVersion}, ""); r.status != http.StatusMethodNotAllowed {
		t.Errorf("GET at 2026-07-28: HTTP %d, want 405", r.status)
	}
}

func TestModern_StatelessRequestsDoNotCountAgainstTheSessionCap(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.MaxSessionsPerPrincipal = 1 })
	tok := h.token("host", userScopes)
	sid := h.rawInit(tok)
	_, status, cancel := h.openStream(tok, sid, "") // live: never ended to make room
	if status != http.StatusOK {
		t.Fatalf("GET stream: %d", status)
	}
	defer cancel()
	for i := range 5 {
		if st, f := h.modernCall(tok, 10+i, "resources/list", "", "{}"); st != http.StatusOK || f["result"] == nil {
			t.Fatalf("stateless request %d with the cap reached: HTTP %d %v", i, st, f)
		}
	}
	ls := h.openListen(tok, 20, `{"resourceSubscriptions":["care://ray/weight_bearing"]}`)
	if f, _ := ls.next(t); f["method"] != methodAcknowledged {
		t.Fatalf("listen with the cap reached: %v", f)
	}
	// Twin: a second session is still refused while the first is live.
	r := h.do("POST", "/mcp", tok, nil, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	if r.status != http.StatusTooManyRequests {
		t.Errorf("second initialize: HTTP %d, want 429", r.status)
	}
}

// TestModern_EveryUnreadableURIIsOneErrorOnRead is P-2 on 2026-07-28:
// forbidden, absent, another patient's, a missing version, malformed and
// unknown-scheme URIs all answer -32602 "Resource not found: {uri}" with
// data {"uri"} and HTTP 400; the same URIs answer -32002 on a 2025-11-25
// session (each era's code), and a readable one reads (twin).
func TestModern_EveryUnreadableURIIsOneErrorOnRead(t *testing.T) {
	h := newHarness(t)
	tok := h.token("host", userScopes)
	sid := h.rawInit(tok)
	for _, uri := range []string{
		"care-internal://ray/risk", "care://ray/no_such_domain", "care://bob/weight_bearing",
		"care://ray/weight_bearing/v99", "care://ray/weight_bearing/3", "care://RAY/weight_bearing", "care://ray//x", "file:///etc/passwd",
	} {
		st, f := h.modernCall(tok, 1, "resources/read", uri, fmt.Sprintf(`{"uri":%q}`, uri))
		code, msg, data := errorOf(f)
		if st != http.StatusBadRequest || code != CodeResourceNotFoundModern || msg != "Resource not found: "+uri || data["uri"] != uri || len(data) != 1 {
			t.Errorf("2026-07-28 read %s: HTTP %d, %d %q %v; want 400, -32602 %q {uri}", uri, st, code, msg, data, "Resource not found: "+uri)
		}
		legacy := h.rawCall(tok, sid, 2, "resources/read", fmt.Sprintf(`{"uri":%q}`, uri))
		if code, msg, _ := errorOf(legacy); code != CodeResourceNotFound || msg != "Resource not found: "+uri {
			t.Errorf("2025-11-25 read %s: %d %q; want -32002", uri, code, msg)
		}
	}
	st, f := h.modernCall(tok, 3, "resources/read", "care://ray/weight_bearing", `{"uri":"care://ray/weight_bearing"}`)
	res, _ := f["result"].(map[string]any)
	if st != http.StatusOK || res == nil {
		t.Fatalf("readable read: HTTP %d %v", st, f)
	}
	if res["cacheScope"] != "private" || res["resultType"] != "complete" || res["ttlMs"] != float64(0) {
		t.Errorf("read result cacheScope %v, resultType %v, ttlMs %v; want private, complete, 0", res["cacheScope"], res["resultType"], res["ttlMs"])
	}
}

func TestModern_ListPagesAtThreeWithAPrivateCacheScope(t *testing.T) {
	h := newHarness(t)
	for _, tc := range []struct {
		scopes   []string
		tok      string
		internal bool
	}{
		{tok: h.token("user", userScopes)},
		{tok: h.token("dual", dualScopes), internal: true},
	} {
		var all []string
		cursor := ""
		for page := 0; ; page++ {
			params := "{}"
			if cursor != "" {
				params = fmt.Sprintf(`{"cursor":%q}`, cursor)
			}
			st, f := h.modernCall(tc.tok, page, "resources/list", "", params)
			res, _ := f["result"].(map[string]any)
			if st != http.StatusOK || res == nil {
				t.Fatalf("page %d: HTTP %d %v", page, st, f)
			}
			if res["cacheScope"] != "private" {
				t.Errorf("page %d cacheScope %v, want private", page, res["cacheScope"])
			}
			rs, _ := res["resources"].([]any)
			if len(rs) > 3 {
				t.Errorf("page %d holds %d", page, len(rs))
			}
			for _, r := range rs {
				all = append(all, r.(map[string]any)["uri"].(string))
			}
			cursor, _ = res["nextCursor"].(string)
			if cursor == "" {
				break
			}
		}
		hasInternal := false
		for _, u := range all {
			hasInternal = hasInternal || strings.HasPrefix(u, "care-internal://")
		}
		if hasInternal != tc.internal || !contains(all, "care://ray/weight_bearing") || !contains(all, EchoURI) {
			t.Errorf("listed %q; care-internal listed %v, want %v", all, hasInternal, tc.internal)
		}
	}
	st, f := h.modernCall(h.token("user", userScopes), 9, "resources/list", "", `{"cursor":"c1.bm90.b3Vycw"}`)
	if code, _, _ := errorOf(f); st != http.StatusBadRequest || code != -32602 {
		t.Errorf("a cursor the server did not issue: HTTP %d %v, want 400 -32602", st, f)
	}
}

// TestCursor_AnInstanceSharingTheSecretContinuesAnotherInstancesList: two
// servers configured with one CursorSecret (two instances behind a load
// balancer) honour each other's cursors; with different secrets the
// cursor is -32602 (twin).
func TestCursor_AnInstanceSharingTheSecretContinuesAnotherInstancesList(t *testing.T) {
	secret := []byte("shared-audit-key-0123456789abcdef")
	a := newHarness(t, func(c *Config) { c.CursorSecret = secret })
	b := newHarness(t, func(c *Config) { c.CursorSecret = secret })
	other := newHarness(t, func(c *Config) { c.CursorSecret = []byte("another-secret-0123456789abcdef!") })
	_, f := a.modernCall(a.token("u", userScopes), 1, "resources/list", "", "{}")
	cursor, _ := f["result"].(map[string]any)["nextCursor"].(string)
	if cursor == "" {
		t.Fatalf("no nextCursor from A: %v", f)
	}
	params := fmt.Sprintf(`{"cursor":%q}`, cursor)
	if st, f := b.modernCall(b.token("u", userScopes), 2, "resources/list", "", params); st != http.StatusOK || f["result"] == nil {
		t.Errorf("B refused A's cursor: HTTP %d %v", st, f)
	}
	if _, f := other.modernCall(other.token("u", userScopes), 3, "resources/list", "", params); func() bool { c, _, _ := errorOf(f); return c != -32602 }() {
		t.Errorf("a server with another secret accepted the cursor: %v", f)
	}
}

// TestListen_AcknowledgesOnlyWhatThePrincipalMayRead is P-2 on a
// subscriptions/listen filter: a user-scoped listen naming a forbidden, an
// absent, another patient's, a versioned, a malformed and an unknown-scheme
// URI is acknowledged for the readable ones only — the unreadable ones are
// simply left out, whatever the cause — and the stream opens (no error).
// Twin: a dual-scoped listen is acknowledged for care-internal://ray/risk.
func TestListen_AcknowledgesOnlyWhatThePrincipalMayRead(t *testing.T) {
	h := newHarness(t)
	asked := `["care://ray/weight_bearing","care-internal://ray/risk","care://ray/no_such_domain","care://bob/weight_bearing",` +
		`"care://ray/weight_bearing/v1","care://ray//x","care://RAY/exercise","file:///etc/passwd","care://ray/weight_bearing","ui://unsay/echo"]`
	for _, tc := range []struct {
		name   string
		scopes []models.Scope
		want   []string
	}{
		{"user", userScopes, []string{"care://ray/weight_bearing", EchoURI}},
		{"dual", dualScopes, []string{"care://ray/weight_bearing", "care-internal://ray/risk", EchoURI}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ls := h.openListen(h.token(tc.name, tc.scopes), 7, `{"resourceSubscriptions":`+asked+`}`)
			if ls.status != http.StatusOK {
				t.Fatalf("listen: HTTP %d", ls.status)
			}
			f, _ := ls.next(t)
			got := ackedURIs(t, f)
			if strings.Join(got, " ") != strings.Join(tc.want, " ") {
				t.Errorf("acknowledged %q, want %q", got, tc.want)
			}
			if id := subscriptionIDOf(f); id != float64(7) {
				t.Errorf("acknowledgement subscriptionId %v, want 7", id)
			}
			waitUntil(t, func() bool { return h.srv.Subscribers(mustURI("care://ray/weight_bearing")) >= 1 })
		})
	}
	if got := h.srv.listenSubscribers(mustURI("care-internal://ray/risk")); got != 1 {
		t.Errorf("%d listen streams hold care-internal://ray/risk, want the dual one only", got)
	}
}

// TestListen_CarriesTaggedUpdatesOnlyForReadableAcknowledgedURIs: a
// revision of care://ray/weight_bearing reaches the user-scoped stream as
// resources/updated tagged with the listen's id; a revision of
// care-internal://ray/risk never does (it reaches the dual-scoped stream,
// the twin), nor one of a fact the stream did not ask for, and nothing the
// user stream carries names a care-internal URI (P-1, P-9).
func TestListen_CarriesTaggedUpdatesOnlyForReadableAcknowledgedURIs(t *testing.T) {
	h := newHarness(t)
	user := h.openListen(h.token("user", userScopes), 11, `{"resourceSubscriptions":["care://ray/weight_bearing","care-internal://ray/risk"]}`)
	dual := h.openListen(h.token("dual", dualScopes), 12, `{"resourceSubscriptions":["care-internal://ray/risk"]}`)
	user.next(t)
	dual.next(t)
	h.publish("risk", models.AudienceAssistant, "Fall risk reviewed: still high.")
	h.publish("exercise", models.AudienceUser, "Heel slides, fifteen a day.")
	h.publish("weight_bearing", models.AudienceUser, "Full weight-bearing as tolerated.")
	f, _ := user.next(t)
	params, _ := f["params"].(map[string]any)
	if f["method"] != methodUpdated || params["uri"] != "care://ray/weight_bearing" {
		t.Fatalf("user stream: %v, want updated care://ray/weight_bearing", f)
	}
	if id := subscriptionIDOf(f); id != float64(11) {
		t.Errorf("updated carries subscriptionId %v, want 11", id)
	}
	if _, ok := params["value"]; ok || len(params) != 2 {
		t.Errorf("updated params %v: want only uri and _meta (P-9: no content)", params)
	}
	g, _ := dual.next(t)
	if p, _ := g["params"].(map[string]any); g["method"] != methodUpdated || p["uri"] != "care-internal://ray/risk" {
		t.Fatalf("dual stream: %v, want updated care-internal://ray/risk", g)
	}
	for _, f := range user.quiet(300 * time.Millisecond) {
		t.Errorf("user stream carried another frame: %v", f)
	}
	raw, _ := json.Marshal(f)
	if strings.Contains(string(raw), "care-internal://") {
		t.Errorf("user stream frame names a care-internal URI: %s", raw)
	}
}

// TestListen_ATokenThatExpiresEndsTheStream is P-9 at send time on
// 2026-07-28: a listen whose bearer token expires is answered with its
// listen result (_meta unsay/endReason "tokenExpired") and the stream
// ends; nothing is sent after the expiry. Twin: a stream opened with an
// hour-long token is still open then.
func TestListen_ATokenThatExpiresEndsTheStream(t *testing.T) {
	h := newHarness(t)
	short := h.openListen(h.tokenFor("short", userScopes, 2*time.Second, "ray"), 21, `{"resourceSubscriptions":["care://ray/weight_bearing"]}`)
	long := h.openListen(h.token("long", userScopes), 22, `{"resourceSubscriptions":["care://ray/weight_bearing"]}`)
	short.next(t)
	long.next(t)
	var end map[string]any
	select {
	case end = <-short.frames:
	case <-time.After(10 * time.Second):
		t.Fatal("the listen stream of an expired token is still open 10 s later")
	}
	res, _ := end["result"].(map[string]any)
	meta, _ := res["_meta"].(map[string]any)
	if end["id"] != float64(21) || meta[MetaEndReason] != "tokenExpired" || res["resultType"] != "complete" {
		t.Errorf("last frame %v, want the listen result with %s tokenExpired", end, MetaEndReason)
	}
	if _, open := <-short.frames; open {
		t.Error("the stream carried more after its result")
	}
	h.publish("weight_bearing", models.AudienceUser, "Full weight-bearing as tolerated.")
	f, ok := long.next(t)
	if !ok || f["method"] != methodUpdated {
		t.Errorf("the hour-long token's stream: %v (open %v), want updated", f, ok)
	}
	if v := counterValue(h.srv.metrics.listensEnded.WithLabelValues("tokenExpired")); v != 1 {
		t.Errorf("unsay_mcp_listen_streams_ended_total{reason=tokenExpired} = %v, want 1", v)
	}
}

// TestListen_ListChangedGoesOnlyToStreamsThatAskedAndMaySeeTheNewFact is
// P-8 on 2026-07-28: a new fact (version 1) sends list_changed to a
// stream that asked for resourcesListChanged and whose principal may read
// it, and to no other; a new assistant-only fact sends none to a
// user-scoped stream.
func TestListen_ListChangedGoesOnlyToStreamsThatAskedAndMaySeeTheNewFact(t *testing.T) {
	h := newHarness(t)
	asked := h.openListen(h.token("asked", userScopes), 31, `{"resourcesListChanged":true}`)
	notAsked := h.openListen(h.token("notasked", userScopes), 32, `{"resourceSubscriptions":["care://ray/weight_bearing"]}`)
	bob := h.openListen(h.tokenFor("bob", userScopes, time.Hour, "bob"), 33, `{"resourcesListChanged":true}`)
	for _, ls := range []*listenStream{asked, notAsked, bob} {
		ls.next(t)
	}
	h.publish("sleep", models.AudienceAssistant, "Sleeps poorly; for the assistant only.")
	for _, f := range asked.quiet(300 * time.Millisecond) {
		t.Errorf("a new assistant-only fact sent the user-scoped stream %v", f)
	}
	h.publish("diet", models.AudienceUser, "Eat little and often.")
	f, _ := asked.next(t)
	if f["method"] != methodListChanged || subscriptionIDOf(f) != float64(31) {
		t.Errorf("asking stream: %v, want list_changed tagged 31", f)
	}
	for name, ls := range map[string]*listenStream{"not asked": notAsked, "another patient's": bob} {
		for _, f := range ls.quiet(300 * time.Millisecond) {
			t.Errorf("%s stream received %v", name, f)
		}
	}
}

// TestRead_LastReadVersionCarriesTheRetraction: on 2026-07-28 (no session)
// a read naming, as _meta unsay/lastReadVersion, the version the client
// read before a revision carries the retraction of those words; without
// the key, or naming the current version, it carries none; a key that is
// not a positive integer is -32602 Invalid params — the same for a
// forbidden URI, so it reveals nothing about the resource (P-2).
func TestRead_LastReadVersionCarriesTheRetraction(t *testing.T) {
	h := newHarness(t)
	tok := h.token("host", userScopes)
	const uri = "care://ray/weight_bearing"
	read := func(extra string) map[string]any {
		t.Helper()
		body := fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":%q,"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}%s}}}`, uri, extra)
		return responseFrame(t, h.do("POST", "/mcp", tok, modernHeaders("resources/read", uri), body))
	}
	contents := func(f map[string]any) map[string]any {
		t.Helper()
		res, _ := f["result"].(map[string]any)
		cs, _ := res["contents"].([]any)
		if len(cs) != 1 {
			t.Fatalf("read: %v", f)
		}
		return cs[0].(map[string]any)
	}
	first := contents(read(""))
	heard := first["text"].(string)
	n := int(first["_meta"].(map[string]any)[MetaVersion].(float64))
	h.publish("weight_bearing", models.AudienceUser, "Full weight-bearing as tolerated.")

	again := contents(read(""))
	if r, ok := again["_meta"].(map[string]any)[MetaRetraction]; ok {
		t.Errorf("a stateless read without %s carried a retraction: %v", MetaLastReadVersion, r)
	}
	with := contents(read(fmt.Sprintf(`,%q:%d`, MetaLastReadVersion, n)))
	r, _ := with["_meta"].(map[string]any)[MetaRetraction].(string)
	if !strings.HasPrefix(strings.ToLower(r), "stop") || !strings.Contains(r, strings.TrimSuffix(heard, ".")) || !strings.Contains(r, "Full weight-bearing") {
		t.Errorf("retraction %q: want stop first, the words of v%d (%q) and the new ones", r, n, heard)
	}
	current := int(with["_meta"].(map[string]any)[MetaVersion].(float64))
	if r, ok := contents(read(fmt.Sprintf(`,%q:%d`, MetaLastReadVersion, current)))["_meta"].(map[string]any)[MetaRetraction]; ok {
		t.Errorf("naming the current version carried a retraction: %v", r)
	}
	// A version not yet written is refused too, saying which is the latest:
	// silently, it would mean no retraction (the twin above names the
	// current version and is answered).
	for _, ahead := range []int{current + 1, 99999} {
		f := read(fmt.Sprintf(`,%q:%d`, MetaLastReadVersion, ahead))
		if code, msg, _ := errorOf(f); code != -32602 || !strings.Contains(msg, fmt.Sprintf("the latest version of %s is %d", uri, current)) {
			t.Errorf("%s = %d beyond the latest v%d: %d %q, want -32602 naming the latest", MetaLastReadVersion, ahead, current, code, msg)
		}
	}
	for _, bad := range []string{`"two"`, `0`, `-1`, `1.5`, `true`} {
		f := read(fmt.Sprintf(`,%q:%s`, MetaLastReadVersion, bad))
		if code, msg, _ := errorOf(f); code != -32602 || !strings.HasPrefix(msg, "Invalid params") {
			t.Errorf("%s = %s: %d %q, want -32602 Invalid params", MetaLastReadVersion, bad, code, msg)
		}
	}
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"care-internal://ray/risk","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},%q:"two"}}}`, MetaLastReadVersion)
	f := responseFrame(t, h.do("POST", "/mcp", tok, modernHeaders("resources/read", "care-internal://ray/risk"), body))
	if _, msg, _ := errorOf(f); !strings.HasPrefix(msg, "Invalid params") {
		t.Errorf("a bad %s on a forbidden URI: %q, want the same Invalid params", MetaLastReadVersion, msg)
	}
}

// TestRead_LastReadVersionOnASessionTakesPrecedence: a 2025-11-25 session
// naming the version explicitly gets the retraction of that version even
// though the session itself read nothing.
func TestRead_LastReadVersionOnASessionTakesPrecedence(t *testing.T) {
	h := newHarness(t)
	before := h.publish("weight_bearing", models.AudienceUser, "Walk with two sticks.")
	h.publish("weight_bearing", models.AudienceUser, "Walk with one stick.")
	c := h.connect(h.token("host", userScopes))
	res, err := c.cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: "care://ray/weight_bearing", Meta: mcp.Meta{MetaLastReadVersion: before.Version.N}})
	if err != nil {
		t.Fatal(err)
	}
	r, _ := res.Contents[0].Meta[MetaRetraction].(string)
	if !strings.Contains(r, "two sticks") || !strings.Contains(r, "one stick") {
		t.Errorf("retraction %q, want the two-sticks sentence withdrawn", r)
	}
}

// TestListen_AStalledListenerDelaysNoOtherAndIsEnded is P-25 on
// 2026-07-28: ten listen streams and one whose client sent its listen on a
// socket it never reads. Over 500 revisions every reading stream receives
// every resources/updated, and the stalled stream is ended for not keeping
// up (its queue filled, or a write passed its deadline). Twin: no reading
// stream is ended.
func TestListen_AStalledListenerDelaysNoOtherAndIsEnded(t *testing.T) {
	if testing.Short() {
		t.Skip("500 revisions")
	}
	const readers, writes = 10, 500
	const uri = "care://ray/weight_bearing"
	h := newHarness(t)
	counts := make([]chan struct{}, readers)
	for i := range readers {
		ls := h.openListen(h.token(fmt.Sprintf("host%d", i), userScopes), 100+i, `{"resourceSubscriptions":["`+uri+`"]}`)
		ls.next(t)
		counts[i] = make(chan struct{}, writes+10)
		go func() {
			for f := range ls.frames {
				if f["method"] == methodUpdated {
					counts[i] <- struct{}{}
				}
			}
		}()
	}
	tok := h.token("stalled", userScopes)
	body := `{"jsonrpc":"2.0","id":99,"method":"subscriptions/listen","params":{` + modernMeta + `,"notifications":{"resourceSubscriptions":["` + uri + `"]}}}`
	addr := strings.TrimPrefix(h.base, "http://")
	stalledConn(t, addr, fmt.Sprintf("POST /mcp HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nMCP-Protocol-Version: %s\r\nMcp-Method: subscriptions/listen\r\nContent-Length: %d\r\n\r\n%s",
		addr, tok, ModernProtocolVersion, len(body), body))
	waitUntil(t, func() bool { return h.srv.listeners.len() == readers+1 })

	for i := range writes {
		h.publish("weight_bearing", models.AudienceUser, fmt.Sprintf("Walk with a frame, revision %d.", i))
	}
	deadline := time.After(60 * time.Second)
	for i := range readers {
		for n := 0; n < writes; n++ {
			select {
			case <-counts[i]:
			case <-deadline:
				t.Fatalf("after 60 s reading stream %d had %d of %d updates: a stalled listener held it up", i, n, writes)
			}
		}
	}
	endedSlow := func() float64 {
		return counterValue(h.srv.metrics.listensEnded.WithLabelValues(closedOverflow)) +
			counterValue(h.srv.metrics.listensEnded.WithLabelValues(closedWriteTimeout))
	}
	// The stream's failure is counted by OnFail in a goroutine of its own,
	// which may run after the listen has already returned: wait for both.
	waitUntilWithin(t, 30*time.Second, func() bool { return h.srv.listeners.len() == readers && endedSlow() >= 1 })
	if ended := endedSlow(); ended != 1 {
		t.Errorf("%v listen streams ended for not keeping up, want exactly the stalled one", ended)
	}
	for i := range readers {
		if extra := len(counts[i]); extra != 0 {
			t.Errorf("reading stream %d received %d updates more than the %d revisions", i, extra, writes)
		}
	}
}

// TestListen_CloseEndsEveryStreamWithItsResult: on Close a listen stream
// is answered with its listen result (_meta unsay/endReason "shutdown"),
// the spec's graceful closure, before the stream ends.
func TestListen_CloseEndsEveryStreamWithItsResult(t *testing.T) {
	h := newHarness(t)
	ls := h.openListen(h.token("host", userScopes), 41, `{"resourceSubscriptions":["care://ray/weight_bearing"]}`)
	ls.next(t)
	done := make(chan struct{})
	go func() { h.srv.Close(); close(done) }()
	f, ok := ls.next(t)
	res, _ := f["result"].(map[string]any)
	meta, _ := res["_meta"].(map[string]any)
	if !ok || f["id"] != float64(41) || meta[MetaEndReason] != "shutdown" {
		t.Errorf("last frame %v, want the listen result with %s shutdown", f, MetaEndReason)
	}
	select {
	case <-done:
	case <-time.After(CloseTimeout + time.Second):
		t.Fatalf("Close did not return within %v", CloseTimeout)
	}
}

// TestModern_TheGoSDKClientSpeaks2026 drives the 2026-07-28 path with the
// official Go SDK client in its default mode (server/discover first): it
// negotiates 2026-07-28, pages the list, reads with private caching and
// calls whats_changed, whose retraction (no session) withdraws the version
// current at since.
func TestModern_TheGoSDKClientSpeaks2026(t *testing.T) {
	h := newHarness(t)
	br := &bearer{base: defaultTransport()}
	br.tok.Store(h.token("host", userScopes))
	ctx := context.Background()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "go-sdk-2026", Version: "1"}, nil).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: h.base + "/mcp", HTTPClient: httpClient(br)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if v := cs.InitializeResult().ProtocolVersion; v != ModernProtocolVersion {
		t.Fatalf("negotiated %s, want %s", v, ModernProtocolVersion)
	}
	if cs.ID() != "" || h.srv.sessions.len() != 0 {
		t.Errorf("a 2026-07-28 client has session %q (%d registered)", cs.ID(), h.srv.sessions.len())
	}
	var listed []string
	for r, err := range cs.Resources(ctx, nil) {
		if err != nil {
			t.Fatal(err)
		}
		listed = append(listed, r.URI)
	}
	if len(listed) != 6 || !contains(listed, "care://ray/weight_bearing") {
		t.Errorf("listed %q", listed)
	}
	since := h.st.Now().Add(-time.Minute).UTC().Format(time.RFC3339)
	h.publish("weight_bearing", models.AudienceUser, "Full weight-bearing as tolerated.")
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: ToolWhatsChanged, Arguments: map[string]any{"since": since}})
	if err != nil || res.IsError {
		t.Fatalf("whats_changed: %v %v", err, res)
	}
	raw, _ := json.Marshal(res.StructuredContent)
	var out WhatsChangedOutput
	_ = json.Unmarshal(raw, &out)
	if len(out.Changes) != 1 || !strings.Contains(out.Changes[0].Retraction, "Partial weight-bearing") || out.Changes[0].PreviousValue == "" {
		t.Errorf("whats_changed %s: want one change withdrawing the partial weight-bearing sentence, with previousValue", raw)
	}
}

// breakit8 G11: one principal holds at most MaxListensPerPrincipal
// subscriptions/listen streams; the next is refused 429 with Retry-After
// before the SDK runs, so one token cannot hold every connection of the
// public listener. Twins: another principal's listen is served at the
// same time, and closing a stream lets the first principal listen again.
func TestListen_OnePrincipalHoldsAtMostMaxListensStreams(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.MaxListensPerPrincipal = 2 })
	const asked = `{"resourceSubscriptions":["care://ray/weight_bearing"]}`
	tok := h.token("card", userScopes)
	first := h.openListen(tok, 1, asked)
	second := h.openListen(tok, 2, asked)
	for i, ls := range []*listenStream{first, second} {
		if ls.status != http.StatusOK {
			t.Fatalf("listen %d: HTTP %d", i+1, ls.status)
		}
		f, _ := ls.next(t)
		ackedURIs(t, f)
	}
	third := h.openListen(tok, 3, asked)
	if third.status != http.StatusTooManyRequests {
		t.Fatalf("a third listen of one principal: HTTP %d, want 429", third.status)
	}
	other := h.openListen(h.token("another", userScopes), 4, asked)
	if other.status != http.StatusOK {
		t.Fatalf("another principal's listen: HTTP %d, want 200", other.status)
	}
	if f, _ := other.next(t); len(ackedURIs(t, f)) != 1 {
		t.Errorf("another principal's listen acknowledged %v", f)
	}
	first.cancel()
	waitUntil(t, func() bool {
		ls := h.openListen(tok, 5, asked)
		defer ls.cancel()
		return ls.status == http.StatusOK
	})
}
