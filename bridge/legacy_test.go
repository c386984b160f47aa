package bridge

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/unsay/unsay/models"
)

// Issue 13's legacy-path defects and issue 12's session hardening, each
// with its positive twin.

// subscribedRaw initializes a raw session with tok subscribed to
// care://ray/weight_bearing and returns its id.
func (h *harness) subscribedRaw(tok string) string {
	h.t.Helper()
	sid := h.rawInit(tok)
	if r := h.rawCall(tok, sid, 2, "resources/subscribe", `{"uri":"care://ray/weight_bearing"}`); r["error"] != nil {
		h.t.Fatalf("subscribe: %v", r["error"])
	}
	return sid
}

// detached waits until the session has no standalone stream attached.
func (h *harness) detached(sid string) {
	h.t.Helper()
	st := h.srv.sessions.get(sid)
	waitUntil(h.t, func() bool { return !st.attached() })
}

// TestReplay_ALastEventIDPastTheEndIsRefused: a forged or stale
// Last-Event-ID naming an event after the last one stored is refused (400)
// rather than accepted and used to renumber the stream — which made the
// update published while the client was away vanish when it resumed with
// the id it really had. A Last-Event-ID naming a stream the session never
// had is refused too. Twin: resuming with the real last id replays the
// update published in the gap, at the next id.
func TestReplay_ALastEventIDPastTheEndIsRefused(t *testing.T) {
	h := newHarness(t)
	tok := h.token("host", userScopes)
	sid := h.subscribedRaw(tok)
	ch, status, cancel := h.openStream(tok, sid, "")
	if status != http.StatusOK {
		t.Fatalf("GET: %d", status)
	}
	h.publish("weight_bearing", models.AudienceUser, "Full weight-bearing as tolerated.")
	h.publish("weight_bearing", models.AudienceUser, "Partial weight-bearing, 50%.")
	evs := nextEvents(t, ch, 2)
	if evs[1].id != "_1" {
		t.Fatalf("second event id %q, want _1", evs[1].id)
	}
	cancel()
	h.detached(sid)
	h.publish("weight_bearing", models.AudienceUser, "Full weight-bearing; walk with a frame.") // the gap: stored as _2

	for _, forged := range []string{"_99", "_3", "nosuchstream_0"} {
		_, status, c := h.openStream(tok, sid, forged)
		c()
		if status != http.StatusBadRequest {
			t.Errorf("Last-Event-ID %q: %d, want 400", forged, status)
		}
	}
	ch2, c2 := h.resume(tok, sid, "_1")
	defer c2()
	got := nextEvents(t, ch2, 1)
	if got[0].id != "_2" || !strings.Contains(string(got[0].data), "care://ray/weight_bearing") {
		t.Errorf("resuming from _1 gave %s %s, want the gap's update as _2", got[0].id, got[0].data)
	}
}

// TestStream_AGETWithoutLastEventIDRepeatsNothingAlreadyDelivered: a
// client that reopens its GET stream without Last-Event-ID is not sent
// again the notifications its earlier stream carried (duplicates), only
// what was stored since, while no stream was attached. Twin: resuming with
// Last-Event-ID replays from that id as asked.
func TestStream_AGETWithoutLastEventIDRepeatsNothingAlreadyDelivered(t *testing.T) {
	h := newHarness(t)
	tok := h.token("host", userScopes)
	sid := h.subscribedRaw(tok)
	ch, _, cancel := h.openStream(tok, sid, "")
	h.publish("weight_bearing", models.AudienceUser, "Full weight-bearing as tolerated.")
	h.publish("weight_bearing", models.AudienceUser, "Partial weight-bearing, 50%.")
	nextEvents(t, ch, 2)
	st := h.srv.sessions.get(sid)
	waitUntil(t, func() bool { return st.lastDelivered() == 1 })
	cancel()
	h.detached(sid)
	h.publish("weight_bearing", models.AudienceUser, "Full weight-bearing; walk with a frame.")

	ch2, c2 := h.resume(tok, sid, "")
	got := nextEvents(t, ch2, 1)
	if got[0].id != "_2" {
		t.Errorf("a GET without Last-Event-ID started with %s, want _2 (the one event never delivered)", got[0].id)
	}
	c2()
	h.detached(sid)

	ch3, c3 := h.resume(tok, sid, "_0")
	defer c3()
	again := nextEvents(t, ch3, 2)
	if again[0].id != "_1" || again[1].id != "_2" {
		t.Errorf("resuming from _0 gave %s, %s; want _1, _2", again[0].id, again[1].id)
	}
}

// TestKeepAlive_ASessionWithoutAStreamIsNotClosedByKeepAlive: a session
// whose client never opened its GET stream cannot receive a ping; the
// SDK's keep-alive pinged it anyway and closed it after three unanswered
// pings (an external host lost its session after ~15 min idle, before the
// 30 min timeout). It outlives many keep-alive intervals. Twin: a session
// whose stream is attached but whose client never answers is closed after
// KeepAliveMisses sweeps.
func TestKeepAlive_ASessionWithoutAStreamIsNotClosedByKeepAlive(t *testing.T) {
	h := newHarness(t, func(c *Config) {
		c.KeepAlive = 30 * time.Millisecond
		c.SessionTimeout = -1
	})
	tok := h.token("host", userScopes)
	quiet := h.rawInit(tok)
	deaf := h.rawInit(tok)
	_, status, cancel := h.openStream(tok, deaf, "") // read, never answered
	defer cancel()
	if status != http.StatusOK {
		t.Fatalf("GET: %d", status)
	}
	waitUntil(t, h.srv.sessions.get(deaf).attached)
	start := h.srv.sweeps.Load()
	waitUntil(t, func() bool { return h.srv.sweeps.Load() >= start+4*KeepAliveMisses })

	hdr := map[string]string{"Mcp-Session-Id": quiet, "MCP-Protocol-Version": ProtocolVersion}
	if r := h.do("POST", "/mcp", tok, hdr, pingBody); r.status != http.StatusOK {
		t.Errorf("the session without a stream after %d keep-alive sweeps: %d, want 200", 4*KeepAliveMisses, r.status)
	}
	waitUntil(t, func() bool { return h.srv.sessions.get(deaf) == nil })
	if n := counterValue(h.srv.metrics.sessionsClosed.WithLabelValues(closedKeepAlive)); n != 1 {
		t.Errorf("%v sessions closed by keep-alive, want 1 (the deaf one)", n)
	}
}

// TestMCP_EventStreamsCarryTheProxyHeaderAndCommentKeepAlives: the
// standalone GET stream and a POST's SSE response say X-Accel-Buffering:
// no (an nginx-style proxy otherwise buffers notifications), and a silent
// stream gets ": keep-alive" comment lines. Twin: a 202 (no event stream)
// carries no such header.
func TestMCP_EventStreamsCarryTheProxyHeaderAndCommentKeepAlives(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.StreamKeepAlive = 20 * time.Millisecond })
	tok := h.token("host", userScopes)
	sid := h.rawInit(tok)
	hdr := map[string]string{"Mcp-Session-Id": sid, "MCP-Protocol-Version": ProtocolVersion}
	if r := h.do("POST", "/mcp", tok, hdr, pingBody); r.header.Get("X-Accel-Buffering") != "no" || !strings.HasPrefix(r.header.Get("Content-Type"), "text/event-stream") {
		t.Errorf("POST SSE response: Content-Type %q, X-Accel-Buffering %q", r.header.Get("Content-Type"), r.header.Get("X-Accel-Buffering"))
	}
	if r := h.do("POST", "/mcp", tok, hdr, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); r.status != http.StatusAccepted || r.header.Get("X-Accel-Buffering") != "" {
		t.Errorf("202: %d, X-Accel-Buffering %q", r.status, r.header.Get("X-Accel-Buffering"))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", h.base+"/mcp", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", sid)
	req.Header.Set("MCP-Protocol-Version", ProtocolVersion)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.Header.Get("X-Accel-Buffering") != "no" {
		t.Errorf("GET stream: X-Accel-Buffering %q", resp.Header.Get("X-Accel-Buffering"))
	}
	sc := bufio.NewScanner(resp.Body)
	comments := 0
	for comments < 2 && sc.Scan() {
		if sc.Text() == ": keep-alive" {
			comments++
		}
	}
	if comments < 2 {
		t.Errorf("the silent GET stream carried %d keep-alive comments (%v)", comments, sc.Err())
	}
}

// TestHTTP_CORSPreflightAllowsBothErasHeaders: the preflight for an
// allowed origin allows every header an MCP browser client sends —
// Mcp-Method, Mcp-Name (2026-07-28), Mcp-Protocol-Version, Mcp-Session-Id,
// Last-Event-ID, Authorization. Twin: a foreign origin's preflight is 403.
func TestHTTP_CORSPreflightAllowsBothErasHeaders(t *testing.T) {
	h := newHarness(t)
	pre := map[string]string{"Origin": "https://carer.example", "Access-Control-Request-Method": "POST",
		"Access-Control-Request-Headers": "authorization, mcp-method, mcp-name, mcp-protocol-version, mcp-session-id, last-event-id"}
	r := h.do("OPTIONS", "/mcp", "", pre, "")
	allowed := map[string]bool{}
	for _, f := range strings.Split(r.header.Get("Access-Control-Allow-Headers"), ",") {
		allowed[strings.ToLower(strings.TrimSpace(f))] = true
	}
	for _, want := range []string{"mcp-method", "mcp-name", "mcp-protocol-version", "mcp-session-id", "last-event-id", "authorization"} {
		if !allowed[want] {
			t.Errorf("preflight does not allow %s: %q", want, r.header.Get("Access-Control-Allow-Headers"))
		}
	}
	pre["Origin"] = "https://evil.example"
	if r := h.do("OPTIONS", "/mcp", "", pre, ""); r.status != http.StatusForbidden {
		t.Errorf("foreign preflight: %d", r.status)
	}
}

// TestWhatsChanged_OutputSchemaTypesChangesAsAnArray: "changes" is
// declared an array (the SDK inferred null-or-array), and an empty window
// answers [] — valid against it. Twin: a non-empty window answers the
// revisions in the same array.
func TestWhatsChanged_OutputSchemaTypesChangesAsAnArray(t *testing.T) {
	h := newHarness(t)
	c := h.connect(h.token("host", userScopes))
	tools, err := c.cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tl := range tools.Tools {
		if tl.Name != ToolWhatsChanged {
			continue
		}
		b, _ := json.Marshal(tl.OutputSchema)
		var sch struct {
			Properties map[string]map[string]any `json:"properties"`
		}
		if err := json.Unmarshal(b, &sch); err != nil {
			t.Fatal(err)
		}
		if typ := sch.Properties["changes"]["type"]; typ != "array" {
			t.Errorf(`changes has "type": %v, want "array"`, typ)
		}
	}
	res, _ := callWhatsChanged(t, c, time.Now().UTC().Format(time.RFC3339))
	raw, _ := json.Marshal(res.StructuredContent)
	if !strings.Contains(string(raw), `"changes":[]`) {
		t.Errorf("an empty window answered %s, want changes: []", raw)
	}
	since := time.Now().UTC().Add(-time.Second).Format(time.RFC3339Nano)
	h.publish("weight_bearing", models.AudienceUser, "Full weight-bearing as tolerated.")
	if _, out := callWhatsChanged(t, c, since); len(out.Changes) != 1 {
		t.Errorf("%d changes, want 1", len(out.Changes))
	}
}

// TestWhatsChanged_ALargeWindowIsBounded: with more revisions since 'since'
// than one answer carries, the answer holds each fact's latest revision
// only — still with its retraction of the version current at since — and
// counts the rest in olderRevisionsOmitted; with more facts changed than
// that, it is a tool error naming the limit. Twin: under the limit every
// revision is returned and nothing is omitted.
func TestWhatsChanged_ALargeWindowIsBounded(t *testing.T) {
	for _, tc := range []struct {
		name    string
		limit   int
		changes int
		omitted int
		isError bool
	}{
		{"under the limit", 100, 9, 0, false},
		{"collapsed", 5, 2, 7, false},
		{"too many facts", 1, 0, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, func(c *Config) { c.WhatsChangedLimit = tc.limit })
			c := h.connect(h.token("host", userScopes))
			since := time.Now().UTC().Add(-time.Second).Format(time.RFC3339Nano)
			for i := range 8 {
				h.publish("weight_bearing", models.AudienceUser, fmt.Sprintf("Walk with a frame, revision %d.", i))
			}
			h.publish("contact", models.AudienceUser, "Call the ward on 0161 555 0199.")
			res, out := callWhatsChanged(t, c, since)
			if res.IsError != tc.isError {
				t.Fatalf("isError %v: %v", res.IsError, res.Content)
			}
			if tc.isError {
				text := res.Content[0].(*mcp.TextContent).Text
				if !strings.Contains(text, "more than the 1 one answer carries") {
					t.Errorf("error %q does not name the limit", text)
				}
				return
			}
			if len(out.Changes) != tc.changes || out.OlderRevisionsOmitted != tc.omitted {
				t.Fatalf("%d changes, %d omitted; want %d, %d", len(out.Changes), out.OlderRevisionsOmitted, tc.changes, tc.omitted)
			}
			var walk Revision
			for _, r := range out.Changes {
				if r.URI == "care://ray/weight_bearing" {
					walk = r
				}
			}
			if !strings.Contains(walk.Value, "revision 7") || !strings.HasPrefix(walk.Retraction, "Stop") {
				t.Errorf("the walking instruction's latest entry: %+v", walk)
			}
		})
	}
}

// TestSessions_CappedPerPrincipalOnlyWhenEverySessionIsLive: one principal
// may hold MaxSessionsPerPrincipal sessions; when each of them has a
// request or stream open, the next initialize is 429 with Retry-After.
// Twins: another principal is not affected; once one session is ended
// (DELETE) the first may open another; and once one stream closes, an
// initialize is served by ending that idle session instead.
func TestSessions_CappedPerPrincipalOnlyWhenEverySessionIsLive(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.MaxSessionsPerPrincipal = 3 })
	tok := h.token("host", userScopes)
	var sids []string
	var cancels []func()
	for range 3 {
		sid := h.rawInit(tok)
		_, status, cancel := h.openStream(tok, sid, "")
		if status != http.StatusOK {
			t.Fatalf("GET stream: %d", status)
		}
		sids, cancels = append(sids, sid), append(cancels, cancel)
	}
	defer func() {
		for _, c := range cancels {
			c()
		}
	}()
	for _, sid := range sids {
		waitUntil(t, func() bool { st := h.srv.sessions.get(sid); return st != nil && st.attached() })
	}
	init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`
	r := h.do("POST", "/mcp", tok, nil, init)
	if r.status != http.StatusTooManyRequests || r.header.Get("Retry-After") == "" || !strings.Contains(string(r.body), "3 open MCP sessions") {
		t.Errorf("a fourth session with three live ones: %d %q %s, want 429 naming the limit with Retry-After", r.status, r.header.Get("Retry-After"), r.body)
	}
	// The same subject with other scopes is another principal.
	if sid := h.rawInit(h.token("host", dualScopes)); sid == "" {
		t.Error("another principal was refused")
	}
	hdr := map[string]string{"Mcp-Session-Id": sids[0], "MCP-Protocol-Version": ProtocolVersion}
	cancels[0]()
	if r := h.do("DELETE", "/mcp", tok, hdr, ""); r.status != http.StatusNoContent {
		t.Fatalf("DELETE: %d", r.status)
	}
	waitUntil(t, func() bool { return h.srv.sessions.get(sids[0]) == nil })
	fourth := h.rawInit(tok)
	// Now the three are sids[1], sids[2] (live) and fourth (idle). Closing
	// sids[1]'s stream leaves two idle: the least recently used goes.
	cancels[1]()
	waitUntil(t, func() bool { st := h.srv.sessions.get(sids[1]); return st != nil && !st.attached() && st.idle() })
	h.rawCall(tok, sids[1], 2, "ping", "{}") // sids[1] is now used after fourth
	h.rawInit(tok)
	if r := h.do("POST", "/mcp", tok, map[string]string{"Mcp-Session-Id": fourth, "MCP-Protocol-Version": ProtocolVersion},
		`{"jsonrpc":"2.0","id":3,"method":"ping","params":{}}`); r.status != http.StatusNotFound {
		t.Errorf("the least recently used idle session after an initialize at the cap: %d %s, want 404", r.status, r.body)
	}
	if m := h.rawCall(tok, sids[1], 4, "ping", "{}"); m["error"] != nil {
		t.Errorf("the more recently used session was ended too: %v", m)
	}
}

// TestSessions_AtTheCapTheLeastRecentlyUsedIdleSessionMakesRoom: Alexa+
// may open a 2025-11-25 session per conversation and never send DELETE;
// at the cap the principal was refused 429 for up to 30 minutes. Now an
// initialize at the cap ends the principal's least-recently-used session
// that has no request or stream open: that session answers 404 (its
// client initializes again, and can), the others keep working, a session
// with a live stream is never the one ended, and the ending is counted
// (unsay_mcp_sessions_closed_total{reason="evicted"}).
func TestSessions_AtTheCapTheLeastRecentlyUsedIdleSessionMakesRoom(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.MaxSessionsPerPrincipal = 3 })
	tok := h.token("alexa-plus", userScopes)
	ping := func(sid string, id int) int {
		return h.do("POST", "/mcp", tok, map[string]string{"Mcp-Session-Id": sid, "MCP-Protocol-Version": ProtocolVersion},
			fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"ping","params":{}}`, id)).status
	}
	a, b, c := h.rawInit(tok), h.rawInit(tok), h.rawInit(tok)
	_, status, cancel := h.openStream(tok, a, "") // a, the oldest, is live
	if status != http.StatusOK {
		t.Fatalf("GET stream: %d", status)
	}
	defer cancel()
	waitUntil(t, func() bool { return h.srv.sessions.get(a).attached() })
	if st := ping(b, 1); st != http.StatusOK { // b used after c: c is the least recently used idle one
		t.Fatalf("ping b: %d", st)
	}
	before := counterValue(h.srv.metrics.sessionsClosed.WithLabelValues(closedEvicted))
	d := h.rawInit(tok)
	if st := ping(c, 2); st != http.StatusNotFound {
		t.Errorf("c, least recently used and idle: %d after an initialize at the cap, want 404", st)
	}
	for _, tc := range []struct{ name, sid string }{{"a (live stream)", a}, {"b (used later)", b}, {"d (new)", d}} {
		if st := ping(tc.sid, 3); st != http.StatusOK { // in this order: b is now used before d
			t.Errorf("%s: %d, want 200", tc.name, st)
		}
	}
	if got := counterValue(h.srv.metrics.sessionsClosed.WithLabelValues(closedEvicted)); got != before+1 {
		t.Errorf("evicted counter %v → %v, want one more", before, got)
	}
	waitUntil(t, func() bool { return h.srv.sessions.get(c) == nil }) // the SDK closed it too
	// The ended session's client initializes again, and that ends the next
	// least recently used idle one (b), never a, whose stream is open.
	e := h.rawInit(tok)
	if st := ping(b, 4); st != http.StatusNotFound {
		t.Errorf("b after another initialize at the cap: %d, want 404", st)
	}
	for _, tc := range []struct{ name, sid string }{{"a (live stream)", a}, {"d", d}, {"e", e}} {
		if st := ping(tc.sid, 5); st != http.StatusOK {
			t.Errorf("%s: %d, want 200", tc.name, st)
		}
	}
}

// TestLogs_AbandonedSessionsWriteAFewLinesNotOnePerSession: forty sessions
// whose clients hold their streams open and never answer a ping are all
// closed by keep-alive, and the log says so in at most a few lines (the
// SDK's keep-alive wrote three lines per session: 20,000 abandoned sessions
// wrote 60,000 warnings). Twin: the limiter itself passes DefaultLogBurst
// records of one line per window, then reports how many it dropped.
func TestLogs_AbandonedSessionsWriteAFewLinesNotOnePerSession(t *testing.T) {
	var buf syncBuffer
	h := newHarness(t, func(c *Config) {
		c.KeepAlive = 40 * time.Millisecond
		c.SessionTimeout = -1
		c.MaxSessionsPerPrincipal = -1
		c.Logger = slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))
	})
	tok := h.token("host", userScopes)
	const n = 40
	for range n {
		_, _, cancel := h.openStream(tok, h.rawInit(tok), "")
		defer cancel()
	}
	waitUntilWithin(t, 30*time.Second, func() bool { return h.srv.sessions.len() == 0 })
	lines := strings.Count(buf.String(), "\n")
	if lines > 2*DefaultLogBurst {
		t.Errorf("%d abandoned sessions wrote %d log lines:\n%s", n, lines, buf.String())
	}
	if !strings.Contains(buf.String(), "keep-alive") {
		t.Errorf("the closures were not logged at all:\n%s", buf.String())
	}

	lim := newLineLimiter(DefaultLogBurst, time.Minute)
	now := time.Unix(0, 0)
	lim.now = func() time.Time { return now }
	passed := 0
	for range 60000 {
		if ok, _ := lim.allow(slog.LevelWarn, "keepalive ping failed"); ok {
			passed++
		}
	}
	if passed != DefaultLogBurst {
		t.Errorf("%d of 60,000 identical lines passed in one window, want %d", passed, DefaultLogBurst)
	}
	if ok, _ := lim.allow(slog.LevelWarn, "another line"); !ok {
		t.Error("a different line was dropped")
	}
	now = now.Add(time.Minute)
	if ok, suppressed := lim.allow(slog.LevelWarn, "keepalive ping failed"); !ok || suppressed != 60000-DefaultLogBurst {
		t.Errorf("next window: ok %v, suppressed %d; want true, %d", ok, suppressed, 60000-DefaultLogBurst)
	}
}

// TestClose_AStreamOpenedAfterTheSessionsWereClosedDoesNotHoldShutdown:
// once Close has begun, /mcp answers 503 (no session or stream can be
// opened behind it), and a stream still being served is ended, so
// http.Server.Shutdown completes well within its limit instead of waiting
// out a stream opened after the sessions were closed. Twin: before Close
// the same initialize and stream are served.
func TestClose_AStreamOpenedAfterTheSessionsWereClosedDoesNotHoldShutdown(t *testing.T) {
	h := newHarness(t)
	tok := h.token("host", userScopes)
	sid := h.rawInit(tok) // twin: served before Close
	_, status, cancel := h.openStream(tok, sid, "")
	defer cancel()
	if status != http.StatusOK {
		t.Fatalf("GET before Close: %d", status)
	}
	h.srv.Close()
	init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`
	if r := h.do("POST", "/mcp", tok, nil, init); r.status != http.StatusServiceUnavailable {
		t.Errorf("initialize after Close: %d, want 503", r.status)
	}
	ctx, stop := context.WithTimeout(context.Background(), 5*time.Second)
	defer stop()
	if err := h.ts.Config.Shutdown(ctx); err != nil {
		t.Errorf("Shutdown: %v (a stream held it to its limit)", err)
	}
}

// TestEventLog_BoundsPurgeAndPOSTStreams: the event log knows where each
// stream starts and ends: an index past the end is ErrReplayPastEnd, one
// before the oldest retained is mcp.ErrEventsPurged; when full it drops
// the oldest frames of any stream first; each session keeps only its most
// recent POST streams. Twin: indices in range replay exactly the frames
// after them.
func TestEventLog_BoundsPurgeAndPOSTStreams(t *testing.T) {
	l := newEventLog(100, 2)
	frame := func(s string) []byte { return []byte(fmt.Sprintf("%-10s", s)) } // 10 bytes
	for i := range 5 {
		l.append("a", "", frame(fmt.Sprintf("a%d", i)))
		l.append("b", "", frame(fmt.Sprintf("b%d", i)))
	}
	if got, err := l.after("a", "", 2); err != nil || len(got) != 2 || string(got[0][:2]) != "a3" {
		t.Errorf("after(a, 2) = %q, %v", got, err)
	}
	if _, err := l.after("a", "", 4); err != nil {
		t.Errorf("after the last event: %v, want nothing to replay", err)
	}
	if _, err := l.after("a", "", 5); !errors.Is(err, ErrReplayPastEnd) {
		t.Errorf("after(a, 5): %v, want ErrReplayPastEnd", err)
	}
	if _, err := l.after("c", "", 0); !errors.Is(err, ErrReplayUnknown) {
		t.Errorf("unknown session: %v", err)
	}
	// Full at 100 bytes: the next frame drops the oldest (a0).
	l.append("b", "", frame("b5"))
	if _, err := l.after("a", "", -1); !errors.Is(err, mcp.ErrEventsPurged) {
		t.Errorf("after a0 was purged: %v, want ErrEventsPurged", err)
	}
	if first, next, _ := l.bounds("a", ""); first != 1 || next != 5 {
		t.Errorf("bounds(a) = %d, %d; want 1, 5", first, next)
	}
	if got, err := l.after("b", "", -1); err != nil || len(got) != 6 {
		t.Errorf("b lost frames to a's purge: %d, %v", len(got), err)
	}
	// POST streams: only the two most recent are kept.
	for _, id := range []string{"p1", "p2", "p3"} {
		l.append("a", id, frame(id))
	}
	if _, err := l.after("a", "p1", -1); !errors.Is(err, ErrReplayUnknown) {
		t.Errorf("the oldest POST stream: %v, want dropped", err)
	}
	if got, err := l.after("a", "p3", -1); err != nil || len(got) != 1 {
		t.Errorf("the newest POST stream: %q, %v", got, err)
	}
	if l.size() > 100 {
		t.Errorf("log holds %d bytes, bound 100", l.size())
	}
	l.closeSession("a")
	l.closeSession("b")
	if l.size() != 0 {
		t.Errorf("%d bytes left after every session closed", l.size())
	}
}
