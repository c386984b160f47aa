package bridge

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/unsay/unsay/bridge/httpapi"
	"github.com/unsay/unsay/models"
	"github.com/unsay/unsay/store"
)

func isEvent(prefix string) func(string) bool {
	return func(e string) bool { return e == prefix }
}

func TestUpdated_DeliveredToSubscriberAndRereadCarriesRetraction(t *testing.T) {
	h := newHarness(t)
	c := h.connect(h.token("host", userScopes))
	ctx := context.Background()
	const uri = "care://ray/weight_bearing"
	first, err := c.cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.cs.Subscribe(ctx, &mcp.SubscribeParams{URI: uri}); err != nil {
		t.Fatal(err)
	}
	heardValue := strings.TrimSpace(first.Contents[0].Text)

	res := h.publish("weight_bearing", models.AudienceUser, "Full weight-bearing as tolerated.")
	c.waitFor(t, isEvent("updated "+uri))

	again, err := c.cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
	if err != nil {
		t.Fatal(err)
	}
	rc := again.Contents[0]
	if rc.Text != "Full weight-bearing as tolerated." || rc.Meta[MetaVersion] != float64(res.Version.N) {
		t.Fatalf("re-read: %q v%v", rc.Text, rc.Meta[MetaVersion])
	}
	retraction, _ := rc.Meta[MetaRetraction].(string)
	if !strings.HasPrefix(retraction, "Stop — your walking instruction has changed.") ||
		!strings.Contains(retraction, models.Quote(heardValue)) ||
		!strings.Contains(retraction, "Sarah Okafor, physio, changed it") ||
		!strings.Contains(retraction, "“Full weight-bearing as tolerated.”") {
		t.Errorf("retraction %q does not withdraw %q in favour of v%d", retraction, heardValue, res.Version.N)
	}
	// Never twice: the next read of the same version carries none.
	third, err := c.cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
	if err != nil {
		t.Fatal(err)
	}
	if r, ok := third.Contents[0].Meta[MetaRetraction]; ok {
		t.Errorf("second read of v%d carries a retraction again: %v", res.Version.N, r)
	}
	// A session that never read the fact gets no retraction on its first read.
	fresh := h.connect(h.token("other-host", userScopes))
	fr, err := fresh.cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
	if err != nil {
		t.Fatal(err)
	}
	if r, ok := fr.Contents[0].Meta[MetaRetraction]; ok {
		t.Errorf("first read by a new session carries a retraction: %v", r)
	}
}

func TestRetraction_WithdrawsTheVersionThisSessionReadNotTheOneBefore(t *testing.T) {
	h := newHarness(t)
	c := h.connect(h.token("host", userScopes))
	ctx := context.Background()
	const uri = "care://ray/weight_bearing"
	if _, err := c.cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri}); err != nil { // reads v2
		t.Fatal(err)
	}
	h.publish("weight_bearing", models.AudienceUser, "Partial weight-bearing, three quarters of your weight.") // v3, unread
	h.publish("weight_bearing", models.AudienceUser, "Full weight-bearing as tolerated.")                      // v4
	res, err := c.cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
	if err != nil {
		t.Fatal(err)
	}
	r, _ := res.Contents[0].Meta[MetaRetraction].(string)
	if !strings.Contains(r, "about half your body weight") || strings.Contains(r, "three quarters") {
		t.Errorf("retraction %q should withdraw v2 (read), not v3 (never read)", r)
	}
}

func TestRetraction_NoneWhenTheWordsAreUnchanged(t *testing.T) {
	h := newHarness(t)
	c := h.connect(h.token("host", userScopes))
	ctx := context.Background()
	const uri = "care://ray/contact"
	first, err := c.cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
	if err != nil {
		t.Fatal(err)
	}
	h.publish("contact", models.AudienceUser, first.Contents[0].Text)
	res, err := c.cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
	if err != nil {
		t.Fatal(err)
	}
	if res.Contents[0].Meta[MetaVersion] != float64(2) {
		t.Fatalf("version %v, want 2", res.Contents[0].Meta[MetaVersion])
	}
	if r, ok := res.Contents[0].Meta[MetaRetraction]; ok {
		t.Errorf("unchanged words carry a retraction: %v", r)
	}
}

// TestNotifications_UserSessionNeverSeesAnInternalURI drives every live
// channel — updated, list_changed and the revision log — with a user-scoped
// and a dual-scope session side by side; the dual session is the control
// that shows the internal notifications were really sent.
func TestNotifications_UserSessionNeverSeesAnInternalURI(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	user := h.connect(h.token("host", userScopes))
	dual := h.connect(h.token("reasoner", dualScopes))
	for _, c := range []*client{user, dual} {
		c.listAll(t) // arms list_changed
		//lint:ignore SA1019 the test drives the 2025-11-25 logging channel the server keeps
		if err := c.cs.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "info"}); err != nil {
			t.Fatal(err)
		}
		if err := c.cs.Subscribe(ctx, &mcp.SubscribeParams{URI: "care://ray/weight_bearing"}); err != nil {
			t.Fatal(err)
		}
	}
	if err := dual.cs.Subscribe(ctx, &mcp.SubscribeParams{URI: "care-internal://ray/risk"}); err != nil {
		t.Fatal(err)
	}

	h.publish("risk", models.AudienceAssistant, "Fall risk HIGH; a second fall on the ward.") // internal v2
	dual.waitFor(t, isEvent("updated care-internal://ray/risk"))
	h.publish("mood", models.AudienceAssistant, "Low mood on the evening round.") // internal v1
	dual.waitForAll(t, "list_changed", "log care-internal://ray/mood")
	h.publish("weight_bearing", models.AudienceUser, "Full weight-bearing as tolerated.") // user v3: the sync point
	seen := user.waitFor(t, isEvent("log care://ray/weight_bearing"))
	seen = append(seen, user.drain(100*time.Millisecond)...)

	wantUser := []string{"updated care://ray/weight_bearing"}
	for _, e := range seen {
		if strings.Contains(e, "care-internal") || e == "list_changed" {
			t.Errorf("user session received %q", e)
		}
	}
	for _, w := range wantUser {
		if !contains(seen, w) {
			t.Errorf("user session did not receive %q; got %q", w, seen)
		}
	}
	user.mu.Lock()
	defer user.mu.Unlock()
	for _, l := range user.logs {
		if u, _ := l["uri"].(string); strings.HasPrefix(u, "care-internal://") {
			t.Errorf("user log %v", l)
		}
		if _, has := l["value"]; has || len(l) != 2 {
			t.Errorf("revision log must carry only uri and version: %v", l)
		}
	}
}

func TestListChanged_SilentForTheSeedAndUntilAListIsServed(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	c := h.connect(h.token("host", userScopes))
	//lint:ignore SA1019 the test drives the 2025-11-25 logging channel the server keeps
	if err := c.cs.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "info"}); err != nil {
		t.Fatal(err)
	}
	// The seed is already stored: nothing fires for it. A creation before any
	// list was served is silent too (P-8).
	h.publish("diet", models.AudienceUser, "Normal diet; plenty of fluids.")
	got := c.waitFor(t, isEvent("log care://ray/diet"))
	got = append(got, c.drain(100*time.Millisecond)...)
	if contains(got, "list_changed") {
		t.Fatalf("list_changed before any list was served: %q", got)
	}
	// Twin: once a list is served, the next creation fires list_changed.
	c.listAll(t)
	h.publish("sleep", models.AudienceUser, "Sleep on your back with a pillow between your knees.")
	c.waitFor(t, isEvent("list_changed"))
	// A revision (v2) of a fact fires updated for subscribers, not list_changed.
	if err := c.cs.Subscribe(ctx, &mcp.SubscribeParams{URI: "care://ray/sleep"}); err != nil {
		t.Fatal(err)
	}
	h.publish("sleep", models.AudienceUser, "Sleep on either side with a pillow between your knees.")
	got = c.waitFor(t, isEvent("updated care://ray/sleep"))
	got = append(got, c.drain(100*time.Millisecond)...)
	if contains(got, "list_changed") {
		t.Errorf("a revision fired list_changed: %q", got)
	}
}

func TestRevisionLog_OnlyForSessionsThatSetALevel(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	quiet := h.connect(h.token("quiet", userScopes))
	loud := h.connect(h.token("loud", userScopes))
	for _, c := range []*client{quiet, loud} {
		if err := c.cs.Subscribe(ctx, &mcp.SubscribeParams{URI: "care://ray/exercise"}); err != nil {
			t.Fatal(err)
		}
	}
	//lint:ignore SA1019 the test drives the 2025-11-25 logging channel the server keeps
	if err := loud.cs.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "notice"}); err != nil {
		t.Fatal(err)
	}
	h.publish("exercise", models.AudienceUser, "Ankle pumps every hour while awake.")
	loud.waitFor(t, isEvent("log care://ray/exercise"))
	got := quiet.waitFor(t, isEvent("updated care://ray/exercise"))
	got = append(got, quiet.drain(100*time.Millisecond)...)
	for _, e := range got {
		if strings.HasPrefix(e, "log ") {
			t.Errorf("session without a log level received %q", e)
		}
	}
	loud.mu.Lock()
	defer loud.mu.Unlock()
	if len(loud.logs) != 1 || loud.logs[0]["version"] != float64(2) {
		t.Errorf("logs %v, want one {uri, version: 2}", loud.logs)
	}
}

// TestUpdated_AUserTokenCannotListenOnADualScopeSession is the
// attack: a user-scoped token of the dual-scope host's own subject and
// patients names the host's session and opens its GET stream. It is
// refused 403, and the host's session keeps its stream and its internal
// notifications. Twin: the host receives the internal update before and
// after the attempt.
func TestUpdated_AUserTokenCannotListenOnADualScopeSession(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	host := h.connect(h.token("dev", dualScopes))
	for _, u := range []string{"care-internal://ray/risk", "care://ray/weight_bearing"} {
		if err := host.cs.Subscribe(ctx, &mcp.SubscribeParams{URI: u}); err != nil {
			t.Fatal(err)
		}
	}
	h.publish("risk", models.AudienceAssistant, "Fall risk HIGH; a second fall on the ward.")
	host.waitFor(t, isEvent("updated care-internal://ray/risk"))

	user := h.token("dev", userScopes)
	ch, status, cancel := h.openStream(user, host.cs.ID(), "")
	defer cancel()
	if status != http.StatusForbidden {
		t.Fatalf("a user token on the dual-scope session's GET stream: %d, want 403", status)
	}
	if r := h.do("POST", "/mcp", user, map[string]string{"Mcp-Session-Id": host.cs.ID(), "MCP-Protocol-Version": ProtocolVersion}, pingBody); r.status != http.StatusForbidden {
		t.Errorf("a user token on the dual-scope session's POST: %d, want 403", r.status)
	}
	for ev := range ch {
		t.Errorf("the refused stream carried %s", ev.data)
	}
	h.publish("risk", models.AudienceAssistant, "Fall risk HIGH; walking aid at all times.")
	host.waitFor(t, isEvent("updated care-internal://ray/risk"))
}

// TestSendFilter_AuthorizesFramesAgainstTheStreamOpenersPrincipal: what is
// written to the standalone stream is authorized against the principal of
// the request that opened that stream too, not only the session's: with a
// narrower stream principal (which binding makes impossible over HTTP, so
// the test sets it), the internal update is withheld and the speakable one
// delivered. Twin: with the stream opened by the session's own principal,
// both arrive.
func TestSendFilter_AuthorizesFramesAgainstTheStreamOpenersPrincipal(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	c := h.connect(h.token("reasoner", dualScopes))
	for _, u := range []string{"care-internal://ray/risk", "care://ray/weight_bearing"} {
		if err := c.cs.Subscribe(ctx, &mcp.SubscribeParams{URI: u}); err != nil {
			t.Fatal(err)
		}
	}
	st := h.srv.sessions.get(c.cs.ID())
	waitUntil(t, st.attached)
	h.publish("risk", models.AudienceAssistant, "Fall risk HIGH; a second fall on the ward.")
	c.waitFor(t, isEvent("updated care-internal://ray/risk"))

	st.mu.Lock()
	st.stream.principal = models.Principal{Subject: "reasoner", Scopes: userScopes, Patients: []string{"ray"}}
	st.mu.Unlock()
	h.publish("risk", models.AudienceAssistant, "Fall risk HIGH; walking aid at all times.")
	h.publish("weight_bearing", models.AudienceUser, "Full weight-bearing as tolerated.")
	got := c.waitFor(t, isEvent("updated care://ray/weight_bearing"))
	got = append(got, c.drain(100*time.Millisecond)...)
	for _, e := range got {
		if strings.Contains(e, "care-internal") {
			t.Errorf("a stream opened by a user-scoped principal carried %q", e)
		}
	}
}

func TestRecordPrincipal_IgnoresATokenOfAnotherPrincipal(t *testing.T) {
	h := newHarness(t)
	sid := h.rawInit(h.token("alice", dualScopes))
	exp := time.Now().Add(2 * time.Hour)
	for _, p := range []models.Principal{
		{Subject: "mallory", Scopes: dualScopes, Patients: []string{"ray"}},
		{Subject: "alice", Scopes: dualScopes, Patients: []string{"bob"}},
		{Subject: "alice", Scopes: dualScopes, Patients: []string{"ray", "bob"}},
		{Subject: "alice", Scopes: userScopes, Patients: []string{"ray"}},
	} {
		if h.srv.sessions.record(sid, p, exp) {
			t.Errorf("a token of %+v was recorded for alice's session", p)
		}
	}
	if _, got := h.srv.sessions.get(sid).current(); got.Equal(exp) {
		t.Error("a refused token's expiry became the session's")
	}
	// Twin: the same principal (scopes in another order) is recorded.
	if !h.srv.sessions.record(sid, models.Principal{Subject: "alice", Scopes: []models.Scope{models.ScopeReadAssistant, models.ScopeReadUser}, Patients: []string{"ray"}}, exp) {
		t.Fatal("a token of the session's own principal was not recorded")
	}
	if _, got := h.srv.sessions.get(sid).current(); !got.Equal(exp) {
		t.Errorf("expiry %v, want %v", got, exp)
	}
}

func TestSignedWrite_CountsAuthorizedSubscribersAndDeliversUpdated(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	user := h.connect(h.token("host", userScopes))
	if _, err := user.cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "care://ray/weight_bearing"}); err != nil {
		t.Fatal(err)
	}
	if err := user.cs.Subscribe(ctx, &mcp.SubscribeParams{URI: "care://ray/weight_bearing"}); err != nil {
		t.Fatal(err)
	}
	dual := h.connect(h.token("reasoner", dualScopes))
	if err := dual.cs.Subscribe(ctx, &mcp.SubscribeParams{URI: "care://ray/weight_bearing"}); err != nil {
		t.Fatal(err)
	}
	body := []byte(`{"patient":"ray","domain":"weight_bearing","audience":"user","value":"Full weight-bearing as tolerated.","authorId":"okafor","authorLabel":"Sarah Okafor, physio"}`)
	ts := time.Now().Unix()
	r := h.do("POST", "/write", "", map[string]string{
		httpapi.HeaderTimestamp: strconv.FormatInt(ts, 10),
		httpapi.HeaderSignature: httpapi.SignWrite(h.writeSecret, ts, body),
	}, string(body))
	if r.status != http.StatusCreated {
		t.Fatalf("/write: %d %s", r.status, r.body)
	}
	var wr httpapi.WriteResponse
	if err := json.Unmarshal(r.body, &wr); err != nil {
		t.Fatal(err)
	}
	if wr.Subscribers != 2 || wr.URI != "care://ray/weight_bearing/v3" {
		t.Errorf("write answer %+v, want 2 subscribers for v3", wr)
	}
	user.waitFor(t, isEvent("updated care://ray/weight_bearing"))
	res, err := user.cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "care://ray/weight_bearing"})
	if err != nil {
		t.Fatal(err)
	}
	if r, _ := res.Contents[0].Meta[MetaRetraction].(string); !strings.HasPrefix(r, "Stop — ") {
		t.Errorf("re-read after the signed write carries no retraction: %v", res.Contents[0].Meta)
	}
}

// TestWatch_StartsAfterTheSeed: the seed's nine versions are already in the
// store when New runs, so the change feed fans none of them out (P-8); the
// first publish afterwards is fanned out exactly once (the positive twin).
func TestWatch_StartsAfterTheSeed(t *testing.T) {
	h := newHarness(t)
	c := h.connect(h.token("host", userScopes))
	c.listAll(t)
	//lint:ignore SA1019 the test drives the 2025-11-25 logging channel the server keeps
	if err := c.cs.SetLoggingLevel(context.Background(), &mcp.SetLoggingLevelParams{Level: "debug"}); err != nil {
		t.Fatal(err)
	}
	if got := c.drain(200 * time.Millisecond); len(got) != 0 {
		t.Errorf("notifications for the seed: %q", got)
	}
	if n := histogramCount(h.srv.metrics.fanOut); n != 0 {
		t.Errorf("%d seed changes fanned out, want 0", n)
	}
	h.publish("diet", models.AudienceUser, "Normal diet.")
	c.waitForAll(t, "list_changed", "log care://ray/diet")
	if n := histogramCount(h.srv.metrics.fanOut); n != 1 {
		t.Errorf("%d changes fanned out after one publish, want 1", n)
	}
}

// Breakit8 G6, the host's side: a version that only renewed the words
// (the same words, another author) is not named as the change — the
// retraction a host is handed names who changed the words, as the voice
// does. Twin: a version with new words is named, whoever wrote the one
// before it.
func TestRetraction_NamesWhoChangedTheWordsNotWhoRenewedThem(t *testing.T) {
	h := newHarness(t)
	c := h.connect(h.token("host", userScopes))
	ctx := context.Background()
	const uri = "care://ray/weight_bearing"
	byMensah := func(value string) {
		t.Helper()
		p := models.Principal{Subject: "mensah", Scopes: []models.Scope{models.ScopeWrite}, Patients: []string{"ray"}}
		if _, err := h.st.Publish(ctx, p, store.PublishInput{Patient: "ray", Domain: "weight_bearing", Audience: models.AudienceUser,
			Value: value, AuthorID: "mensah", AuthorLabel: "Dr Mensah, GP"}); err != nil {
			t.Fatal(err)
		}
	}
	read := func() string {
		t.Helper()
		res, err := c.cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
		if err != nil {
			t.Fatal(err)
		}
		r, _ := res.Contents[0].Meta[MetaRetraction].(string)
		return r
	}
	read()                                                                                // v2, the seed's
	h.publish("weight_bearing", models.AudienceUser, "Full weight-bearing as tolerated.") // v3: Sarah Okafor changes the words
	byMensah("Full weight-bearing as tolerated.")                                         // v4: Dr Mensah renews them
	if r := read(); !strings.Contains(r, "Sarah Okafor") || strings.Contains(r, "Mensah") {
		t.Errorf("retraction %q should name Sarah Okafor, who changed the words, not Dr Mensah, who renewed them", r)
	}
	byMensah("Walk with one crutch, full weight as tolerated.") // v5: Dr Mensah changes them
	if r := read(); !strings.Contains(r, "Dr Mensah") || strings.Contains(r, "Sarah Okafor") {
		t.Errorf("twin: retraction %q should name Dr Mensah, who changed the words", r)
	}
}
