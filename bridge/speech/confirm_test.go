package speech

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/unsay/unsay/models"
)

func turnOf(t *testing.T, p *testPrincipal, patient string) models.Snapshot {
	t.Helper()
	s, err := p.Turn(context.Background(), patient)
	if err != nil {
		t.Fatalf("Turn: %v", err)
	}
	return s
}

func factOf(s models.Snapshot, domain string) (models.Version, bool) {
	i := slices.IndexFunc(s.Facts, func(v models.Version) bool { return v.Domain == domain })
	if i < 0 {
		return models.Version{}, false
	}
	return s.Facts[i], true
}

// P-24: a revision whose notification never arrives (a frozen stream) is
// found by the confirmation at speak time: the turn carries its
// retraction, never the superseded sentence as current.
func TestTurn_ConfirmsAtSpeakTimeSoAFrozenStreamCannotMakeItStale(t *testing.T) {
	f := newFakeCare(t)
	seedRay(f)
	p := startPrincipal(t, f, newTestDB(t), "ray")
	waitConnected(t, p)
	hearAll(t, p, "ray")
	// Twin first: with nothing changed, the turn owes nothing.
	if s := turnOf(t, p, "ray"); len(s.Pending) != 0 || len(s.Facts) != 4 {
		t.Fatalf("quiet turn = %d announcements, %d facts", len(s.Pending), len(s.Facts))
	}

	f.publishSilently(wb, "Full weight-bearing as tolerated.") // nobody is told
	s := turnOf(t, p, "ray")
	if len(s.Pending) != 1 || !s.Pending[0].IsRetraction() || s.Pending[0].Heard.N != 1 || s.Pending[0].Current.N != 2 {
		t.Fatalf("pending = %+v, want the retraction v1 → v2", s.Pending)
	}
	if v, _ := factOf(s, "weight_bearing"); v.N != 2 || v.Value != "Full weight-bearing as tolerated." {
		t.Errorf("facts give walking v%d %q, want the confirmed v2", v.N, v.Value)
	}
	// Durable: the ledger queued it, so a turn on another instance would
	// speak it too.
	if _, to, _ := p.ledger.Status(context.Background(), "ray", wb); to != 2 {
		t.Errorf("ledger pending to v%d, want v2", to)
	}
}

// P-24, staleness at speak time: a review date that passes between two
// turns turns the ordinary form into the stale one, with no restart and no
// notification.
func TestTurn_AReviewDatePassingBetweenTwoTurnsIsSeenOnTheSecond(t *testing.T) {
	f := newFakeCare(t)
	seedRay(f)
	p := startPrincipal(t, f, newTestDB(t), "ray")
	waitConnected(t, p)
	ex := "care://ray/exercise"
	first, _ := factOf(turnOf(t, p, "ray"), "exercise")
	if first.IsStale(time.Now()) {
		t.Fatalf("exercise stale before its review date: %+v", first)
	}
	f.setStale(ex, true) // the review date passes
	second, _ := factOf(turnOf(t, p, "ray"), "exercise")
	if !second.IsStale(time.Now()) {
		t.Fatalf("exercise not stale after its review date: %+v", second)
	}
	if got, _ := models.RenderFact(second, time.Now()); !strings.Contains(got, models.PastReviewSentence) {
		t.Errorf("spoken as %q", got)
	}
}

// The new sentence of a retraction is judged at speak time too.
func TestTurn_AStaleNewSentenceInsideARetraction(t *testing.T) {
	f := newFakeCare(t)
	seedRay(f)
	p := startPrincipal(t, f, newTestDB(t), "ray")
	waitConnected(t, p)
	hearAll(t, p, "ray")
	n := f.publish(wb, "Full weight-bearing as tolerated.")
	waitPending(t, p, wb, n)
	// Twin: not yet past its review date.
	s := turnOf(t, p, "ray")
	if len(s.Pending) != 1 || s.Pending[0].Current.IsStale(time.Now()) {
		t.Fatalf("fresh retraction = %+v", s.Pending)
	}
	f.setStale(wb, true)
	s = turnOf(t, p, "ray")
	if len(s.Pending) != 1 || !s.Pending[0].Current.IsStale(time.Now()) {
		t.Fatalf("retraction after the review date = %+v, want its new sentence stale", s.Pending)
	}
	r, err := s.Pending[0].Render(time.Now())
	if err != nil || !strings.Contains(r, "changed it to: “Full weight-bearing as tolerated.” "+models.PastReviewSentence) {
		t.Errorf("rendered %q, %v", r, err)
	}
}

// P-24: when the server does not answer within ConfirmTimeout nothing is
// said as current: Turn fails with ErrUnconfirmed, tells which facts Ray
// heard are withdrawn, and the principal is not ready until a new session
// has synced.
func TestTurn_UnconfirmedWhenTheServerIsTooSlowAndReadyAgainAfter(t *testing.T) {
	f := newFakeCare(t)
	seedRay(f)
	db := openDB(t, newTestDB(t))
	pr, err := New(Config{MCPURL: f.url(), Token: f.clientToken, Patients: []string{"ray"}, Ledger: db,
		Backoff: Backoff{Min: 20 * time.Millisecond, Max: 200 * time.Millisecond}, RequestTimeout: 5 * time.Second,
		KeepAlive: -1, ConfirmTimeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &testPrincipal{Principal: pr, cancel: cancel, done: make(chan error, 1)}
	go func() { p.done <- pr.Run(ctx) }()
	t.Cleanup(p.stop)
	waitConnected(t, p)
	hearAll(t, p, "ray")
	n := f.publish(wb, "Full weight-bearing as tolerated.")
	waitPending(t, p, wb, n)
	if st := p.State(); !st.Ready {
		t.Fatalf("ready before the slow server: %+v", st)
	}

	f.readDelay.Store(int64(time.Second))
	s, err := p.Turn(context.Background(), "ray")
	if !errors.Is(err, ErrUnconfirmed) {
		t.Fatalf("Turn = %v, want ErrUnconfirmed", err)
	}
	if len(s.Facts) != 0 || len(s.Pending) != 0 || len(s.Withdrawn) != 1 || s.Withdrawn[0].String() != wb {
		t.Fatalf("unconfirmed snapshot = %+v, want only the withdrawn walking instruction", s)
	}
	if st := p.State(); st.Ready {
		t.Errorf("ready right after a failed confirmation: %+v", st)
	}
	f.readDelay.Store(0)
	eventually(t, "ready again", func() bool { return p.State().Ready })
	if s := turnOf(t, p, "ray"); len(s.Pending) != 1 {
		t.Fatalf("after recovering pending = %+v", s.Pending)
	}
}

// A broken server (every read an internal error) is not confirmation
// either — and not a fact to leave out quietly.
func TestTurn_UnconfirmedWhenReadsFail(t *testing.T) {
	f := newFakeCare(t)
	seedRay(f)
	p := startPrincipal(t, f, newTestDB(t), "ray")
	waitConnected(t, p)
	f.readFail.Store(true)
	if _, err := p.Turn(context.Background(), "ray"); !errors.Is(err, ErrUnconfirmed) {
		t.Fatalf("Turn = %v, want ErrUnconfirmed", err)
	}
	f.readFail.Store(false)
	eventually(t, "a confirmed turn", func() bool { _, err := p.Turn(context.Background(), "ray"); return err == nil })
}

// P-19 after a reconnect: the facts Ray was discharged with (the baseline,
// never heard through Unsay) are not announced as new by the next
// session's sync, nor by a restart; a revision made meanwhile is.
func TestReconnect_TheBaselineIsNeverAnnouncedAsNew(t *testing.T) {
	f := newFakeCare(t)
	seedRay(f)
	db := newTestDB(t)
	p := startPrincipal(t, f, db, "ray")
	waitConnected(t, p)
	before := f.sessionIDs()
	f.restart()
	eventually(t, "a new session", func() bool {
		ids := f.sessionIDs()
		return len(ids) == 1 && !slices.Contains(before, ids[0]) && p.State().Connected
	})
	if got := pendingOf(t, p, "ray"); len(got) != 0 {
		t.Fatalf("after a reconnect pending = %+v: the facts he was discharged with are not news", got)
	}
	if s := turnOf(t, p, "ray"); len(s.Pending) != 0 {
		t.Fatalf("after a reconnect the turn owes %+v", s.Pending)
	}
	p.stop()
	p2 := startPrincipal(t, f, db, "ray")
	waitConnected(t, p2)
	if got := pendingOf(t, p2, "ray"); len(got) != 0 {
		t.Fatalf("after a restart pending = %+v", got)
	}
	// Twin: a revision while disconnected is news (a first hearing: he
	// never heard the version he was discharged with from us).
	f.restart()
	n := f.publishSilently(wb, "Full weight-bearing as tolerated.")
	waitPending(t, p2, wb, n)
	if got := pendingOf(t, p2, "ray"); len(got) != 1 || got[0].IsRetraction() || got[0].Current.N != n {
		t.Fatalf("pending = %+v, want one first hearing of v%d", got, n)
	}
}

// P-24: an announcement put in a response whose delivery was never
// confirmed stays owed and comes back marked Again; MarkHeard settles it.
func TestOffered_StaysOwedAndComesBackAgainUntilHeard(t *testing.T) {
	f := newFakeCare(t)
	seedRay(f)
	db := newTestDB(t)
	p := startPrincipal(t, f, db, "ray")
	waitConnected(t, p)
	hearAll(t, p, "ray")
	n := f.publish(wb, "Full weight-bearing as tolerated.")
	waitPending(t, p, wb, n)
	s := turnOf(t, p, "ray")
	if len(s.Pending) != 1 || s.Pending[0].Again {
		t.Fatalf("first offer = %+v", s.Pending)
	}
	if err := p.Offered(context.Background(), "ray", []models.Offer{offerOf(s.Pending[0])}); err != nil {
		t.Fatal(err)
	}
	// The process dies before the ledger's commit: a new life owes it, again.
	p.stop()
	p = startPrincipal(t, f, db, "ray")
	waitConnected(t, p)
	s = turnOf(t, p, "ray")
	if len(s.Pending) != 1 || !s.Pending[0].Again || s.Pending[0].Current.N != n {
		t.Fatalf("after a lost delivery pending = %+v, want the same retraction, Again", s.Pending)
	}
	if err := p.MarkHeard(context.Background(), "ray", s.Pending[0].URI(), n, models.Hearing{}); err != nil {
		t.Fatal(err)
	}
	if s := turnOf(t, p, "ray"); len(s.Pending) != 0 {
		t.Fatalf("after MarkHeard pending = %+v", s.Pending)
	}
	if err := p.Offered(context.Background(), "Ray!", nil); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("Offered(bad id) = %v", err)
	}
}

// Readiness tells the truth: a change the store committed that the
// principal has not read within MaxLag makes it not ready; being idle, it
// reconnects and reads it, and is ready again. A change it has already
// read, or of a patient it does not follow, does not count.
func TestReadiness_NotReadyWhileBehindTheStoreThenCatchesUp(t *testing.T) {
	f := newFakeCare(t)
	seedRay(f)
	p := startPrincipal(t, f, newTestDB(t), "ray")
	waitConnected(t, p)
	now := time.Now()
	p.Committed(mustURI(t, wb), 1, now.Add(-time.Minute))                          // read already
	p.Committed(mustURI(t, "care://bob/weight_bearing"), 2, now.Add(-time.Minute)) // not followed
	p.Committed(mustURI(t, "care-internal://ray/risk"), 2, now.Add(-time.Minute))  // never ours
	if st := p.State(); !st.Ready || st.LagSeconds != 0 {
		t.Fatalf("state = %+v, want ready with no lag", st)
	}

	before := f.sessionIDs()
	n := f.publishSilently(wb, "Full weight-bearing as tolerated.") // the stream never tells
	p.Committed(mustURI(t, wb), n, now.Add(-10*time.Second))
	if st := p.State(); st.Ready || st.LagSeconds < 10 {
		t.Fatalf("state = %+v, want not ready, lagging at least 10 s", st)
	}
	eventually(t, "ready again", func() bool { return p.State().Ready })
	if ids := f.sessionIDs(); len(ids) != 1 || slices.Contains(before, ids[0]) {
		t.Errorf("sessions %v (before %v): want the lagging one replaced", ids, before)
	}
	if got := pendingOf(t, p, "ray"); len(got) != 1 || got[0].Current.N != n {
		t.Fatalf("pending = %+v, want the revision it caught up with", got)
	}
}

// P-19: a revision the worker has read but not yet reconciled (its read
// cached, its Observe not committed) when a turn starts is reconciled by
// the turn itself: the turn carries the retraction, never the new words
// alone as a fact (which would mark them heard and lose the retraction).
func TestTurn_AVersionReadButNotYetReconciledStillCarriesItsRetraction(t *testing.T) {
	f := newFakeCare(t)
	seedRay(f)
	p := startPrincipal(t, f, newTestDB(t), "ray")
	waitConnected(t, p)
	hearAll(t, p, "ray")
	f.publishSilently(wb, "Full weight-bearing as tolerated.")
	// What the worker's refresh does first: read v2 as the fact's current
	// version into memory; its reconcile has not run yet.
	var up upstream
	p.do(func(st *state) { up = st.up })
	if _, err := p.read(context.Background(), up, mustURI(t, wb), true); err != nil {
		t.Fatal(err)
	}
	s := turnOf(t, p, "ray")
	if len(s.Pending) != 1 || !s.Pending[0].IsRetraction() || s.Pending[0].Heard.N != 1 || s.Pending[0].Current.N != 2 {
		t.Fatalf("pending = %+v, want the retraction v1 → v2", s.Pending)
	}
	// Twin: once reconciled, the next turn does not reconcile again and
	// still owes exactly that one retraction.
	if s := turnOf(t, p, "ray"); len(s.Pending) != 1 || s.Pending[0].Current.N != 2 {
		t.Fatalf("second turn pending = %+v", s.Pending)
	}
}

// offerOf is the offer of announcement a, as the skill records it before
// writing the response that carries it.
func offerOf(a models.Announcement) models.Offer {
	return models.Offer{ID: a.ID, URI: a.URI(), Version: a.Current.N}
}

// A turn confirms its patient's facts with a list of his facts alone
// (the "unsay/patient" _meta on every page), so its cost does not grow
// with the other patients the principal follows: here Ray's four facts
// are two pages while the principal follows 30 more patients' 90 facts
// (31 pages unfiltered). Twin: the list that syncs every followed patient
// still lists everyone, unfiltered.
func TestTurn_ConfirmsWithAListOfThePatientsOwnFactsAlone(t *testing.T) {
	f := newFakeCare(t)
	seedRay(f)
	followed := []string{"ray"}
	for i := range 30 {
		id := fmt.Sprintf("p%02d", i)
		followed = append(followed, id)
		for _, d := range []string{"contact", "diet", "exercise"} {
			f.seed("care://"+id+"/"+d, "Instruction "+d+" for "+id+".")
		}
	}
	p := startPrincipal(t, f, newTestDB(t), followed...)
	waitConnected(t, p)
	f.mu.Lock()
	synced := slices.Clone(f.listPages)
	f.listPages = nil
	f.mu.Unlock()
	if !slices.Contains(synced, "") {
		t.Errorf("the sync's list pages %q: want the unfiltered list of every followed patient", synced)
	}
	if s := turnOf(t, p, "ray"); len(s.Facts) != 4 {
		t.Fatalf("turn = %d facts, want Ray's 4", len(s.Facts))
	}
	f.mu.Lock()
	pages := slices.Clone(f.listPages)
	f.mu.Unlock()
	if len(pages) != 2 || pages[0] != "ray" || pages[1] != "ray" {
		t.Errorf("the turn's list pages %q: want Ray's two pages, each asked with unsay/patient ray", pages)
	}
}
