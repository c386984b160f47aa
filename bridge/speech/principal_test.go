package speech

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/unsay/unsay/models"
)

// seedRay gives the fake Ray's four speakable facts, an assistant-only
// note, and another patient's fact: enough to page (3 per page).
func seedRay(f *fakeCare) {
	f.seed("care://ray/anticoagulant", "Take rivaroxaban 10 mg once a day.")
	f.seed("care://ray/contact", "Call the ward on 0161 555 0100.")
	f.seed("care://ray/exercise", "Hip flexion exercises twice a day.")
	f.seed(wb, "Partial weight-bearing with crutches.")
	f.publishAs("care-internal://ray/risk", "Falls risk: high.", models.AudienceAssistant, false, false)
	f.seed("care://bob/weight_bearing", "Non-weight-bearing.")
}

func pendingOf(t *testing.T, p *testPrincipal, patient string) []models.Announcement {
	t.Helper()
	// Pending refuses while a session is being re-established or synced
	// (ErrNotConnected); the tests ask once it has settled.
	var as []models.Announcement
	var err error
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		as, err = p.Pending(context.Background(), patient)
		if !errors.Is(err, ErrNotConnected) || time.Now().After(deadline) {
			break
		}
	}
	if err != nil {
		t.Fatalf("Pending: %v", err)
	}
	return as
}

// hearAll marks every pending announcement heard, as the skill does after
// speaking them.
func hearAll(t *testing.T, p *testPrincipal, patient string) {
	t.Helper()
	facts, err := p.Facts(context.Background(), patient)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range facts {
		if err := p.MarkHeard(context.Background(), patient, v.FactURI(), v.N, models.Hearing{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, a := range pendingOf(t, p, patient) {
		if err := p.MarkHeard(context.Background(), patient, a.URI(), a.Current.N, models.Hearing{}); err != nil {
			t.Fatal(err)
		}
	}
}

func TestRun_SubscribesToEveryCareFactOfItsPatientsAcrossPages(t *testing.T) {
	f := newFakeCare(t)
	seedRay(f)
	p := startPrincipal(t, f, newTestDB(t), "ray")
	waitConnected(t, p)

	reads, subs := f.recorded()
	want := []string{"care://ray/anticoagulant", "care://ray/contact", "care://ray/exercise", wb}
	slices.Sort(subs)
	if !slices.Equal(subs, want) {
		t.Errorf("subscribed %v, want %v", subs, want)
	}
	for _, r := range reads {
		if !strings.HasPrefix(r, "care://ray/") {
			t.Errorf("read %s: only Ray's care:// facts may be read", r)
		}
	}
	facts, err := p.Facts(context.Background(), "ray")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, v := range facts {
		got = append(got, v.FactURI().String())
		if v.Audience != models.AudienceUser || v.AuthorLabel == "" || v.WrittenAt.IsZero() {
			t.Errorf("fact %s lacks record fields: %+v", v.FactURI(), v)
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("Facts = %v, want %v (sorted by URI)", got, want)
	}
}

// P-1/P-18 on this side: a care:// URI served with audience assistant is
// never held, and care-internal:// is never read even when listed.
func TestRun_NeverHoldsAnAssistantRecord(t *testing.T) {
	f := newFakeCare(t)
	seedRay(f)
	f.mu.Lock()
	f.extra = append(f.extra, "care-internal://ray/risk") // a server that lists too much
	f.mu.Unlock()
	f.publishAs("care://ray/mislabelled", "Assistant-only words.", models.AudienceAssistant, false, false)
	p := startPrincipal(t, f, newTestDB(t), "ray")
	waitConnected(t, p)

	reads, subs := f.recorded()
	if got := hasPrefixAny(append(reads, subs...), "care-internal://"); len(got) > 0 {
		t.Errorf("asked the server for assistant URIs: %v", got)
	}
	facts, _ := p.Facts(context.Background(), "ray")
	for _, v := range facts {
		if v.Domain == "mislabelled" || strings.Contains(v.Value, "Assistant-only") {
			t.Errorf("Facts holds an assistant record: %+v", v)
		}
	}
	for _, a := range pendingOf(t, p, "ray") {
		if a.Current.Domain == "mislabelled" {
			t.Errorf("announcement of an assistant record: %+v", a)
		}
	}
	// Twin: the speakable facts are all there.
	if len(facts) != 4 {
		t.Errorf("Facts = %d facts, want Ray's 4", len(facts))
	}
}

func TestRun_RevisionQueuesARetractionOfTheVersionHeard(t *testing.T) {
	f := newFakeCare(t)
	seedRay(f)
	p := startPrincipal(t, f, newTestDB(t), "ray")
	waitConnected(t, p)
	hearAll(t, p, "ray") // Launch: Ray hears everything once
	if got := pendingOf(t, p, "ray"); len(got) != 0 {
		t.Fatalf("after hearing all, pending = %d", len(got))
	}

	n := f.publish(wb, "Full weight-bearing as tolerated.")
	waitPending(t, p, wb, n)
	as := pendingOf(t, p, "ray")
	if len(as) != 1 {
		t.Fatalf("pending = %d, want 1", len(as))
	}
	a := as[0]
	if a.Heard == nil || a.Heard.N != 1 || a.Current.N != 2 {
		t.Fatalf("announcement %+v, want heard v1 → current v2", a)
	}
	if a.Heard.Value != "Partial weight-bearing with crutches." {
		t.Errorf("heard text read back = %q (SUPERSEDED header must be stripped)", a.Heard.Value)
	}
	s, err := a.Render(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Stop — your walking instruction has changed.", "I told you: “Partial weight-bearing with crutches.”", "Sarah Okafor, physio", "“Full weight-bearing as tolerated.”"} {
		if !strings.Contains(s, want) {
			t.Errorf("retraction %q lacks %q", s, want)
		}
	}

	// Heard: none twice, and the facts now say v2.
	if err := p.MarkHeard(context.Background(), "ray", a.URI(), a.Current.N, models.Hearing{}); err != nil {
		t.Fatal(err)
	}
	if got := pendingOf(t, p, "ray"); len(got) != 0 {
		t.Fatalf("after MarkHeard, pending = %+v", got)
	}
	facts, _ := p.Facts(context.Background(), "ray")
	if i := slices.IndexFunc(facts, func(v models.Version) bool { return v.Domain == "weight_bearing" }); i < 0 || facts[i].N != 2 {
		t.Errorf("Facts does not hold weight_bearing v2: %+v", facts)
	}
}

func TestRun_StackedRevisionsBecomeOneAnnouncementFromHeardToLatest(t *testing.T) {
	f := newFakeCare(t)
	seedRay(f)
	p := startPrincipal(t, f, newTestDB(t), "ray")
	waitConnected(t, p)
	hearAll(t, p, "ray")

	f.publish(wb, "Full weight-bearing as tolerated.")
	f.publish(wb, "Partial weight-bearing, 50 percent.")
	n := f.publish(wb, "Toe-touch weight-bearing only.")
	waitPending(t, p, wb, n)
	as := pendingOf(t, p, "ray")
	if len(as) != 1 || as[0].Heard == nil || as[0].Heard.N != 1 || as[0].Current.N != 4 {
		t.Fatalf("pending = %+v, want one announcement v1 → v4", as)
	}
	if as[0].Current.Value != "Toe-touch weight-bearing only." {
		t.Errorf("current = %q", as[0].Current.Value)
	}
}

func TestRun_AFactNeverHeardIsAFirstHearing(t *testing.T) {
	f := newFakeCare(t)
	seedRay(f)
	p := startPrincipal(t, f, newTestDB(t), "ray")
	waitConnected(t, p)
	hearAll(t, p, "ray")

	created := "care://ray/wound_care"
	f.publish(created, "Keep the dressing dry for ten days.") // v1: list_changed
	waitPending(t, p, created, 1)
	as := pendingOf(t, p, "ray")
	if len(as) != 1 || as[0].Heard != nil || as[0].IsRetraction() || as[0].Current.N != 1 {
		t.Fatalf("pending = %+v, want one first hearing of v1", as)
	}
	s, err := as[0].Render(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(s, "I told you") || !strings.HasPrefix(s, "Your wound care instruction from Sarah Okafor, physio") {
		t.Errorf("first hearing = %q", s)
	}
	_, subs := f.recorded()
	if !contains(subs, created) {
		t.Errorf("the created fact was not subscribed: %v", subs)
	}
}

func TestRun_UnchangedWordsAreNotAnnounced(t *testing.T) {
	f := newFakeCare(t)
	seedRay(f)
	p := startPrincipal(t, f, newTestDB(t), "ray")
	waitConnected(t, p)
	hearAll(t, p, "ray")

	n := f.publish(wb, "  Partial weight-bearing with crutches. ") // same words, new author time
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.WaitPending(ctx, "ray", mustURI(t, wb), n); !errors.Is(err, ErrNotAnnounced) {
		t.Fatalf("WaitPending = %v, want ErrNotAnnounced", err)
	}
	if got := pendingOf(t, p, "ray"); len(got) != 0 {
		t.Fatalf("pending = %+v, want none", got)
	}
	// Twin: changed words after it are announced, from the version whose
	// words he heard.
	n = f.publish(wb, "Full weight-bearing as tolerated.")
	waitPending(t, p, wb, n)
	if got := pendingOf(t, p, "ray"); len(got) != 1 || got[0].Current.N != 3 {
		t.Fatalf("pending = %+v, want v3", got)
	}
}

func TestPending_DropsAnAnnouncementWhoseWordsDidNotChange(t *testing.T) {
	f := newFakeCare(t)
	seedRay(f)
	p := startPrincipal(t, f, newTestDB(t), "ray")
	waitConnected(t, p)
	hearAll(t, p, "ray")
	// A queue entry made before its words were compared (an older build, or
	// a race): the render-time check still drops it.
	f.publishSilently(wb, "Partial weight-bearing with crutches.")
	if _, err := p.ledger.Observe(context.Background(), "ray", wb, heardState{Heard: 1}, 2, false, 0); err != nil {
		t.Fatal(err)
	}
	if got := pendingOf(t, p, "ray"); len(got) != 0 {
		t.Fatalf("pending = %+v, want the unchanged one dropped", got)
	}
	heard, pendingTo, err := p.ledger.Status(context.Background(), "ray", wb)
	if err != nil || heard != 2 || pendingTo != 0 {
		t.Fatalf("after drop heard=%d pendingTo=%d err=%v, want heard 2 and nothing pending", heard, pendingTo, err)
	}
}

func TestRun_ReconnectsAfterServerRestartAndAnnouncesWhatChangedMeanwhile(t *testing.T) {
	f := newFakeCare(t)
	seedRay(f)
	p := startPrincipal(t, f, newTestDB(t), "ray")
	waitConnected(t, p)
	hearAll(t, p, "ray")
	before := f.sessionIDs()

	f.restart()
	n := f.publishSilently(wb, "Full weight-bearing as tolerated.") // no one is told
	waitPending(t, p, wb, n)

	after := f.sessionIDs()
	if len(after) != 1 || slices.Contains(before, after[0]) {
		t.Errorf("sessions before %v, after %v: want one new session", before, after)
	}
	as := pendingOf(t, p, "ray")
	if len(as) != 1 || as[0].Heard == nil || as[0].Heard.N != 1 || as[0].Current.N != 2 {
		t.Fatalf("pending = %+v, want v1 → v2", as)
	}
	// The new session is subscribed: a notified revision arrives too.
	waitConnected(t, p)
	n = f.publish("care://ray/exercise", "Hip flexion exercises three times a day.")
	waitPending(t, p, "care://ray/exercise", n)
}

func TestRun_ReconnectsAfterSessionDeleteAndAnnouncesWhatChangedMeanwhile(t *testing.T) {
	f := newFakeCare(t)
	seedRay(f)
	p := startPrincipal(t, f, newTestDB(t), "ray")
	waitConnected(t, p)
	hearAll(t, p, "ray")

	f.deleteSessions()
	n := f.publishSilently(wb, "Full weight-bearing as tolerated.")
	waitPending(t, p, wb, n)
	as := pendingOf(t, p, "ray")
	if len(as) != 1 || as[0].Heard == nil || as[0].Heard.N != 1 || as[0].Current.N != 2 {
		t.Fatalf("pending = %+v, want v1 → v2", as)
	}
}

// P-19 across a restart of our own process: nothing lost, nothing repeated.
func TestRestart_NothingLostAndNothingRepeated(t *testing.T) {
	f := newFakeCare(t)
	seedRay(f)
	db := newTestDB(t)

	p1 := startPrincipal(t, f, db, "ray")
	waitConnected(t, p1)
	hearAll(t, p1, "ray")
	n := f.publish(wb, "Full weight-bearing as tolerated.")
	waitPending(t, p1, wb, n)
	p1.stop()

	// A second life: the queued retraction is still there, its heard text
	// read back over MCP (nothing kept in memory across the restart).
	p2 := startPrincipal(t, f, db, "ray")
	waitConnected(t, p2)
	as := pendingOf(t, p2, "ray")
	if len(as) != 1 || as[0].Heard == nil || as[0].Heard.N != 1 || as[0].Current.N != 2 {
		t.Fatalf("after restart pending = %+v, want v1 → v2", as)
	}
	if as[0].Heard.Value != "Partial weight-bearing with crutches." {
		t.Errorf("heard text = %q", as[0].Heard.Value)
	}
	if err := p2.MarkHeard(context.Background(), "ray", as[0].URI(), as[0].Current.N, models.Hearing{}); err != nil {
		t.Fatal(err)
	}
	p2.stop()

	// A third life: what he heard is not repeated.
	p3 := startPrincipal(t, f, db, "ray")
	waitConnected(t, p3)
	if got := pendingOf(t, p3, "ray"); len(got) != 0 {
		t.Fatalf("after hearing and restarting, pending = %+v", got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := p3.WaitPending(ctx, "ray", mustURI(t, wb), n); !errors.Is(err, ErrNotAnnounced) {
		t.Fatalf("WaitPending(heard version) = %v, want ErrNotAnnounced", err)
	}
}

func TestAddPatient_SubscribesTheNewlyLinkedPatient(t *testing.T) {
	f := newFakeCare(t)
	seedRay(f)
	p := startPrincipal(t, f, newTestDB(t), "ray")
	waitConnected(t, p)
	if _, subs := f.recorded(); contains(subs, "care://bob/weight_bearing") {
		t.Fatal("subscribed to bob before he was linked")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.AddPatient(ctx, "bob"); err != nil {
		t.Fatal(err)
	}
	if _, subs := f.recorded(); !contains(subs, "care://bob/weight_bearing") {
		t.Fatalf("bob not subscribed: %v", subs)
	}
	if err := p.MarkHeard(ctx, "bob", mustURI(t, "care://bob/weight_bearing"), 1, models.Hearing{}); err != nil {
		t.Fatal(err)
	}
	n := f.publish("care://bob/weight_bearing", "Partial weight-bearing.")
	waitPending(t, p, "care://bob/weight_bearing", n)
	if st := p.State(); !slices.Equal(st.Patients, []string{"bob", "ray"}) {
		t.Errorf("State.Patients = %v", st.Patients)
	}
	if err := p.AddPatient(ctx, "Bob!"); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("AddPatient(bad id) = %v", err)
	}
}

func TestRun_SendsTheBearerTokenAndRetriesWhenRefused(t *testing.T) {
	f := newFakeCare(t)
	seedRay(f)
	f.mu.Lock()
	good := f.token
	f.token = "something else" // the server now refuses our token
	f.mu.Unlock()
	p := startPrincipal(t, f, newTestDB(t), "ray")
	eventually(t, "two refused attempts", func() bool { return f.unauthorized.Load() >= 2 })
	if p.State().Connected {
		t.Fatal("connected with a refused token")
	}
	if _, err := p.Facts(context.Background(), "ray"); !errors.Is(err, ErrNotConnected) {
		t.Errorf("Facts while refused = %v, want ErrNotConnected", err)
	}
	// Twin: the server accepts the token again; the principal gets in.
	f.mu.Lock()
	f.token = good
	f.mu.Unlock()
	waitConnected(t, p)
}

func TestState_AndMetricsReportConnectionAndBacklog(t *testing.T) {
	f := newFakeCare(t)
	seedRay(f)
	db := openDB(t, newTestDB(t))
	idle, err := New(Config{MCPURL: f.url(), Token: f.clientToken, Patients: []string{"ray"}, Ledger: db})
	if err != nil {
		t.Fatal(err)
	}
	if st := idle.State(); st.Connected || !st.LastEventAt.IsZero() || st.Backlog != 0 || !slices.Equal(st.Patients, []string{"ray"}) {
		t.Errorf("before Run: %+v", st)
	}
	p := startPrincipal(t, f, newTestDB(t), "ray")
	waitConnected(t, p)
	reg := prometheus.NewRegistry()
	for _, c := range p.Collectors() {
		if err := reg.Register(c); err != nil {
			t.Fatal(err)
		}
	}
	gauges := func() map[string]float64 {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]float64{}
		for _, mf := range mfs {
			out[mf.GetName()] = mf.GetMetric()[0].GetGauge().GetValue()
		}
		return out
	}
	g := gauges()
	if g["unsay_speech_connected"] != 1 {
		t.Errorf("unsay_speech_connected = %v", g["unsay_speech_connected"])
	}
	if g["unsay_speech_backlog"] != 0 || p.State().Backlog != 0 {
		t.Errorf("backlog = %v / %d after the first sync, want 0 (his starting point is not news)", g["unsay_speech_backlog"], p.State().Backlog)
	}
	n := f.publish(wb, "Full weight-bearing as tolerated.")
	waitPending(t, p, wb, n)
	// The gauge is refreshed after the waiters are woken.
	eventually(t, "the backlog gauge counts the revision", func() bool {
		return gauges()["unsay_speech_backlog"] == 1 && p.State().Backlog == 1
	})
	if ts := g["unsay_speech_last_event_timestamp_seconds"]; ts < float64(time.Now().Add(-time.Minute).Unix()) {
		t.Errorf("last event timestamp = %v", ts)
	}
	hearAll(t, p, "ray")
	if g := gauges(); g["unsay_speech_backlog"] != 0 {
		t.Errorf("backlog after hearing = %v", g["unsay_speech_backlog"])
	}
	p.stop()
	if g := gauges(); g["unsay_speech_connected"] != 0 || p.State().Connected {
		t.Errorf("after stop connected = %v", g["unsay_speech_connected"])
	}
}

func TestNew_RejectsBadConfiguration(t *testing.T) {
	db := openDB(t, newTestDB(t))
	good := Config{MCPURL: "http://127.0.0.1:1/mcp", Token: "t", Patients: []string{"ray"}, Ledger: db}
	tests := []struct {
		name string
		edit func(c *Config)
	}{
		{"no URL", func(c *Config) { c.MCPURL = "" }},
		{"relative URL", func(c *Config) { c.MCPURL = "/mcp" }},
		{"ftp URL", func(c *Config) { c.MCPURL = "ftp://x/mcp" }},
		{"no token", func(c *Config) { c.Token = "" }},
		{"bad patient", func(c *Config) { c.Patients = []string{"Ray Smith"} }},
		{"no ledger", func(c *Config) { c.Ledger = nil }},
		{"client timeout", func(c *Config) { c.HTTPClient = &httpClientWithTimeout }},
		{"backoff inverted", func(c *Config) { c.Backoff = Backoff{Min: time.Second, Max: time.Millisecond} }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := good
			tt.edit(&c)
			if _, err := New(c); !errors.Is(err, ErrConfig) {
				t.Fatalf("New = %v, want ErrConfig", err)
			}
		})
	}
	// Twin: the good configuration, and the token source alternative.
	if _, err := New(good); err != nil {
		t.Fatalf("New(good) = %v", err)
	}
	c := good
	c.Token = ""
	c.TokenSource = func(context.Context, []string) (string, error) { return "t", nil }
	if _, err := New(c); err != nil {
		t.Fatalf("New(TokenSource) = %v", err)
	}
}

func TestMarkHeard_RejectsMalformedArguments(t *testing.T) {
	f := newFakeCare(t)
	p := startPrincipal(t, f, newTestDB(t), "ray")
	ctx := context.Background()
	tests := []struct {
		name    string
		patient string
		uri     models.URI
		version int
	}{
		{"bad patient", "Ray", mustURI(t, wb), 1},
		{"another patient's fact", "bob", mustURI(t, wb), 1},
		{"assistant fact", "ray", mustURI(t, "care-internal://ray/risk"), 1},
		{"versioned URI", "ray", mustURI(t, wb+"/v2"), 2},
		{"version 0", "ray", mustURI(t, wb), 0},
		{"zero URI", "ray", models.URI{}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := p.MarkHeard(ctx, tt.patient, tt.uri, tt.version, models.Hearing{}); !errors.Is(err, ErrInvalidArgument) {
				t.Fatalf("MarkHeard = %v, want ErrInvalidArgument", err)
			}
		})
	}
	h, _ := p.ledger.Heard(ctx, "ray", wb)
	if h != 0 {
		t.Fatalf("a refused MarkHeard moved the ledger to %d", h)
	}
	// Twin.
	if err := p.MarkHeard(ctx, "ray", mustURI(t, wb), 2, models.Hearing{}); err != nil {
		t.Fatal(err)
	}
	if h, _ := p.ledger.Heard(ctx, "ray", wb); h != 2 {
		t.Fatalf("heard = %d, want 2", h)
	}
}

func TestRun_RefusesASecondConcurrentRun(t *testing.T) {
	f := newFakeCare(t)
	p := startPrincipal(t, f, newTestDB(t), "ray")
	waitConnected(t, p)
	if err := p.Run(context.Background()); !errors.Is(err, ErrRunning) {
		t.Fatalf("second Run = %v, want ErrRunning", err)
	}
}

var httpClientWithTimeout = http.Client{Timeout: time.Second}

func TestFacts_ServesAStaleFactWithoutItsHeaderButStale(t *testing.T) {
	f := newFakeCare(t)
	seedRay(f)
	f.publishAs("care://ray/diet", "Eat normally.", models.AudienceUser, false, true)
	p := startPrincipal(t, f, newTestDB(t), "ray")
	waitConnected(t, p)
	facts, err := p.Facts(context.Background(), "ray")
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(facts, func(v models.Version) bool { return v.Domain == "diet" })
	if i < 0 {
		t.Fatalf("no diet fact in %+v", facts)
	}
	d := facts[i]
	if d.Value != "Eat normally." || !d.IsStale(time.Now()) || d.AuthorID != "okafor" || d.AuthorLabel != "Sarah Okafor, physio" {
		t.Errorf("stale fact = %+v", d)
	}
	// Twin: a fresh fact is not stale.
	j := slices.IndexFunc(facts, func(v models.Version) bool { return v.Domain == "weight_bearing" })
	if facts[j].IsStale(time.Now()) {
		t.Errorf("fresh fact reads as stale: %+v", facts[j])
	}
}

func TestFacts_ReadsOverMCPForAPatientNotFollowed(t *testing.T) {
	f := newFakeCare(t)
	seedRay(f)
	p := startPrincipal(t, f, newTestDB(t), "ray")
	waitConnected(t, p)
	facts, err := p.Facts(context.Background(), "bob")
	if err != nil {
		t.Fatal(err)
	}
	if len(facts) != 1 || facts[0].FactURI().String() != "care://bob/weight_bearing" || facts[0].Value != "Non-weight-bearing." {
		t.Fatalf("Facts(bob) = %+v", facts)
	}
	if _, err := p.Facts(context.Background(), "Bob"); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("Facts(bad id) = %v", err)
	}
}

// careSource is skill.CareSource, restated here because this package may
// not import skill: the principal must satisfy it exactly.
type careSource interface {
	Turn(ctx context.Context, patient string) (models.Snapshot, error)
	Offered(ctx context.Context, patient string, offers []models.Offer) error
	MarkHeard(ctx context.Context, patient string, uri models.URI, version int, how models.Hearing) error
	MarkTold(ctx context.Context, patient string, uri models.URI, version int, how models.Hearing) error
}

var _ careSource = (*Principal)(nil)

func TestRun_KeepAliveNoticesASessionTheServerForgot(t *testing.T) {
	f := newFakeCare(t)
	f.keepAlive = 50 * time.Millisecond
	seedRay(f)
	p := startPrincipal(t, f, newTestDB(t), "ray")
	waitConnected(t, p)
	hearAll(t, p, "ray")

	f.forgetSessions() // no stream breaks; only a request can tell
	n := f.publishSilently(wb, "Full weight-bearing as tolerated.")
	waitPending(t, p, wb, n)
	if ids := f.sessionIDs(); len(ids) != 1 {
		t.Fatalf("new server sessions = %v, want the principal's new one", ids)
	}
}

func TestFirstSync_AnnouncesNothingButLaterRevisionsAndNewFactsAreNews(t *testing.T) {
	f := newFakeCare(t)
	seedRay(f)
	db := newTestDB(t)
	p := startPrincipal(t, f, db, "ray")
	waitConnected(t, p)
	if got := pendingOf(t, p, "ray"); len(got) != 0 {
		t.Fatalf("first sync queued %d announcements, want 0: the facts he was discharged with are not news", len(got))
	}
	// Twin: a revision of a fact he never heard through Unsay is news, told
	// as a first hearing (no "I told you").
	n := f.publish(wb, "Full weight-bearing as tolerated.")
	waitPending(t, p, wb, n)
	as := pendingOf(t, p, "ray")
	if len(as) != 1 || as[0].Heard != nil || as[0].Current.N != n {
		t.Fatalf("pending = %+v, want one first hearing of v%d", as, n)
	}
}

func TestOnQueued_IsToldOfEachNewAnnouncementAndNotOfTheFirstSync(t *testing.T) {
	f := newFakeCare(t)
	seedRay(f)
	var mu sync.Mutex
	var told []string
	db := openDB(t, newTestDB(t))
	pr, err := New(Config{MCPURL: f.url(), Token: f.clientToken, Patients: []string{"ray"}, Ledger: db,
		Backoff: Backoff{Min: 20 * time.Millisecond, Max: 200 * time.Millisecond}, RequestTimeout: 5 * time.Second, KeepAlive: f.keepAlive})
	if err != nil {
		t.Fatal(err)
	}
	pr.OnQueued(func(patient string) { mu.Lock(); told = append(told, patient); mu.Unlock() })
	ctx, cancel := context.WithCancel(context.Background())
	p := &testPrincipal{Principal: pr, cancel: cancel, done: make(chan error, 1)}
	go func() { p.done <- pr.Run(ctx) }()
	t.Cleanup(p.stop)
	waitConnected(t, p)
	mu.Lock()
	if len(told) != 0 {
		t.Fatalf("told %v during the first sync, want nothing", told)
	}
	mu.Unlock()
	n := f.publish(wb, "Full weight-bearing as tolerated.")
	waitPending(t, p, wb, n)
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(told, []string{"ray"}) {
		t.Fatalf("told %v after a revision, want [ray]", told)
	}
}

func TestPending_RefusesToAnswerWhileDisconnectedRatherThanSayNothingChanged(t *testing.T) {
	f := newFakeCare(t)
	seedRay(f)
	p := startPrincipal(t, f, newTestDB(t), "ray")
	waitConnected(t, p)
	hearAll(t, p, "ray")
	if _, err := p.Pending(context.Background(), "ray"); err != nil {
		t.Fatalf("connected Pending = %v, want nil", err)
	}
	// The session is lost and a revision lands before it is re-established:
	// an empty answer would tell Ray nothing changed.
	f.deleteSessions()
	f.publishSilently(wb, "Non-weight-bearing again.")
	eventually(t, "the principal to notice the lost session", func() bool {
		_, err := p.Pending(context.Background(), "ray")
		return errors.Is(err, ErrNotConnected)
	})
	// Twin: once reconnected, the revision is there.
	eventually(t, "the retraction after reconnecting", func() bool {
		as, err := p.Pending(context.Background(), "ray")
		return err == nil && len(as) == 1
	})
}

func TestPending_PutsEveryRetractionBeforeNewsHeNeverHeard(t *testing.T) {
	f := newFakeCare(t)
	seedRay(f)
	p := startPrincipal(t, f, newTestDB(t), "ray")
	waitConnected(t, p)
	// He heard the walking instruction only.
	if err := p.MarkHeard(context.Background(), "ray", mustURI(t, wb), 1, models.Hearing{}); err != nil {
		t.Fatal(err)
	}
	ex := "care://ray/exercise"
	n1 := f.publish(ex, "Heel slides twenty times.") // news, queued first
	waitPending(t, p, ex, n1)
	n2 := f.publish(wb, "Full weight-bearing as tolerated.") // a withdrawal, queued second
	waitPending(t, p, wb, n2)
	as := pendingOf(t, p, "ray")
	if len(as) != 2 || !as[0].IsRetraction() || as[0].URI().String() != wb || as[1].IsRetraction() {
		t.Fatalf("pending order %+v, want the retraction of the walking instruction first", as)
	}
}
