package speech

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/unsay/unsay/models"
)

// The speech-safety failures found by attacking the running product, each
// as a property of the principal (P-19, P-24: losing or distorting a
// retraction is worse than repeating one).

const anti = "care://ray/anticoagulant"

// heardThenOffered leaves Ray having heard the blood thinner's first
// version for certain, then a turn offering him the retraction of
// revision to it: the response is on its way to Alexa, its delivery not
// yet confirmed. It returns the announcement the turn spoke.
func heardThenOffered(t *testing.T, p *testPrincipal, f *fakeCare, revision string) models.Announcement {
	t.Helper()
	hearAll(t, p, "ray")
	n := f.publish(anti, revision)
	waitPending(t, p, anti, n)
	s := turnOf(t, p, "ray")
	if len(s.Pending) != 1 || !s.Pending[0].IsRetraction() || s.Pending[0].Current.N != n {
		t.Fatalf("the turn offers %+v, want the retraction v1 → v%d", s.Pending, n)
	}
	if err := p.Offered(context.Background(), "ray", []models.Offer{offerOf(s.Pending[0])}); err != nil {
		t.Fatal(err)
	}
	return s.Pending[0]
}

// spoken renders the turn's only announcement.
func spoken(t *testing.T, s models.Snapshot) string {
	t.Helper()
	if len(s.Pending) != 1 {
		t.Fatalf("pending = %+v, want one announcement", s.Pending)
	}
	text, err := s.Pending[0].Render(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return text
}

// Finding 1: the clinician reverts "STOP taking rivaroxaban today." to
// the old dose while Ray's turn is speaking the stop. The turn's delivery
// is then confirmed: the next turn withdraws what that turn told him —
// never "nothing has changed" — and only once.
func TestRevert_DuringHisTurnTheNextTurnWithdrawsWhatTheTurnSaid(t *testing.T) {
	f := newFakeCare(t)
	seedRay(f)
	p := startPrincipal(t, f, newTestDB(t), "ray")
	waitConnected(t, p)
	const stop = "STOP taking rivaroxaban today."
	said := heardThenOffered(t, p, f, stop)

	n := f.publish(anti, "Take rivaroxaban 10 mg once a day.") // the revert, during the turn
	waitPending(t, p, anti, n)                                 // today's code settled it: ErrNotAnnounced
	if err := p.MarkHeard(context.Background(), "ray", mustURI(t, anti), said.Current.N, models.Hearing{}); err != nil {
		t.Fatal(err) // the turn's response was written in full
	}

	s := turnOf(t, p, "ray")
	got := spoken(t, s)
	a := s.Pending[0]
	if a.Heard == nil || a.Heard.Value != stop || a.Current.N != n || a.Again {
		t.Fatalf("next turn = %+v, want the retraction of %q by v%d, not said again", a, stop, n)
	}
	if !strings.HasPrefix(got, "Stop — your blood thinner instruction has changed. I told you: “"+stop+"”") || !strings.Contains(got, "“Take rivaroxaban 10 mg once a day.”") {
		t.Errorf("spoken %q", got)
	}
	if err := p.MarkHeard(context.Background(), "ray", mustURI(t, anti), n, models.Hearing{}); err != nil {
		t.Fatal(err)
	}
	if s := turnOf(t, p, "ray"); len(s.Pending) != 0 {
		t.Errorf("after it was heard pending = %+v: none twice", s.Pending)
	}
}

// Finding 1 across a crash: the process dies (kill -9) after writing the
// response but before the heard ledger's commit, and the revert arrives:
// the next life withdraws the words he may have heard, saying so.
func TestRevert_AfterACrashBeforeTheLedgersCommitTheOfferedWordsAreWithdrawnSayingSo(t *testing.T) {
	f := newFakeCare(t)
	seedRay(f)
	db := newTestDB(t)
	p := startPrincipal(t, f, db, "ray")
	waitConnected(t, p)
	const stop = "STOP taking rivaroxaban today."
	heardThenOffered(t, p, f, stop)
	p.stop() // no MarkHeard: the ledger never heard of the delivery

	n := f.publishSilently(anti, "Take rivaroxaban 10 mg once a day.")
	p = startPrincipal(t, f, db, "ray")
	waitConnected(t, p)
	s := turnOf(t, p, "ray")
	got := spoken(t, s)
	if a := s.Pending[0]; a.Heard == nil || a.Heard.Value != stop || a.Current.N != n || !a.Again || !a.HeardUnsure {
		t.Fatalf("after the crash = %+v, want the retraction of %q (words he may have heard), said again", a, stop)
	}
	if !strings.HasPrefix(got, "Stop — "+models.RedeliveryPhrase+": your blood thinner instruction has changed. I may have told you: “"+stop+"”") {
		t.Errorf("spoken %q", got)
	}
}

// Finding 4: a new revision during the turn — the retraction that follows
// quotes what the turn said ("TWO tablets"), not what he heard before it.
func TestOvertaken_ATurnOvertakenByARevisionIsQuotedByTheNextRetraction(t *testing.T) {
	f := newFakeCare(t)
	seedRay(f)
	p := startPrincipal(t, f, newTestDB(t), "ray")
	waitConnected(t, p)
	const two = "Take TWO tablets of apixaban today."
	said := heardThenOffered(t, p, f, two)
	n := f.publish(anti, "Take ONE tablet of apixaban today.")
	waitPending(t, p, anti, n)

	// Twin first: while the delivery is unconfirmed he may have heard TWO,
	// so it is TWO that is withdrawn, saying so.
	if a := turnOf(t, p, "ray").Pending[0]; a.Heard == nil || a.Heard.Value != two || !a.Again {
		t.Fatalf("unconfirmed = %+v, want TWO withdrawn, said again", a)
	}
	if err := p.MarkHeard(context.Background(), "ray", mustURI(t, anti), said.Current.N, models.Hearing{}); err != nil {
		t.Fatal(err)
	}
	a := turnOf(t, p, "ray").Pending[0]
	if a.Heard == nil || a.Heard.Value != two || a.Current.N != n || a.Again {
		t.Fatalf("confirmed = %+v, want TWO withdrawn by v%d", a, n)
	}
}

// Finding 2: the principal has read a revision (its notification came)
// but not yet queued its retraction when Ray's turn confirms the fact: the
// turn reconciles first, so the revision is a retraction in this very turn
// — never a plain answer that then swallows it.
func TestTurn_ARevisionReadButNotYetQueuedIsARetractionInThisTurn(t *testing.T) {
	f := newFakeCare(t)
	seedRay(f)
	p := startPrincipal(t, f, newTestDB(t), "ray")
	waitConnected(t, p)
	hearAll(t, p, "ray")
	n := f.publishSilently(wb, "Walking K1.")
	// The worker's read of the notified revision, stopped before its
	// ledger work: the window a turn fell into.
	var up upstream
	p.do(func(st *state) { up = st.up })
	if _, err := p.read(context.Background(), up, mustURI(t, wb), true); err != nil {
		t.Fatal(err)
	}

	s := turnOf(t, p, "ray")
	if len(s.Pending) != 1 || !s.Pending[0].IsRetraction() || s.Pending[0].Heard.N != 1 || s.Pending[0].Current.N != n {
		t.Fatalf("pending = %+v, want the retraction v1 → v%d in this turn", s.Pending, n)
	}
	// And a plain answer of that version, told, never settles it.
	if err := p.MarkTold(context.Background(), "ray", mustURI(t, wb), n, models.Hearing{}); err != nil {
		t.Fatal(err)
	}
	if s := turnOf(t, p, "ray"); len(s.Pending) != 1 || !s.Pending[0].IsRetraction() {
		t.Fatalf("after a plain answer pending = %+v: the retraction was swallowed", s.Pending)
	}
	// Twin: the retraction delivered settles it.
	if err := p.MarkHeard(context.Background(), "ray", mustURI(t, wb), n, models.Hearing{}); err != nil {
		t.Fatal(err)
	}
	if s := turnOf(t, p, "ray"); len(s.Pending) != 0 {
		t.Fatalf("after the retraction was heard pending = %+v", s.Pending)
	}
}

// Finding 8: a fact created just before a turn (its list_changed not yet
// read) is found by the turn's own list and heard in it as news.
func TestTurn_AFactCreatedJustBeforeTheTurnIsAnnouncedInIt(t *testing.T) {
	f := newFakeCare(t)
	seedRay(f)
	p := startPrincipal(t, f, newTestDB(t), "ray")
	waitConnected(t, p)
	hearAll(t, p, "ray")
	// Twin first: nothing new, nothing said.
	if s := turnOf(t, p, "ray"); len(s.Pending) != 0 {
		t.Fatalf("quiet turn owes %+v", s.Pending)
	}
	const wound = "care://ray/wound"
	f.createSilently(wound, "Keep the dressing dry until Friday.")
	s := turnOf(t, p, "ray")
	if len(s.Pending) != 1 || s.Pending[0].IsRetraction() || s.Pending[0].URI().String() != wound {
		t.Fatalf("pending = %+v, want the first hearing of %s", s.Pending, wound)
	}
	if _, ok := factOf(s, "wound"); !ok {
		t.Errorf("facts %+v lack the new one", s.Facts)
	}
	eventually(t, "the worker to watch it", func() bool {
		_, subs := f.recorded()
		return contains(subs, wound)
	})
}

// Finding 3: a fact the server serves stale is stale at the skill's "now",
// which the skill reads before the confirming read — the real server's
// judgement, through the read contract, with no fake clock.
func TestTurn_AFactServedStaleIsStaleAtTheTurnsNowTakenBeforeTheRead(t *testing.T) {
	f := newFakeCare(t)
	seedRay(f)
	p := startPrincipal(t, f, newTestDB(t), "ray")
	waitConnected(t, p)
	f.setStale(anti, true)
	hearAll(t, p, "ray")
	n := f.publish(wb, "Full weight-bearing as tolerated.")
	waitPending(t, p, wb, n)
	f.setStale(wb, true)

	now := time.Now() // the skill's turn starts
	s := turnOf(t, p, "ray")
	v, _ := factOf(s, "anticoagulant")
	if !v.IsStale(now) {
		t.Errorf("blood thinner served stale is not stale at the turn's now: %+v", v)
	}
	if got, _ := models.RenderFact(v, now); !strings.Contains(got, models.CheckWithTeam) {
		t.Errorf("spoken as %q", got)
	}
	if len(s.Pending) != 1 || !s.Pending[0].Current.IsStale(now) {
		t.Fatalf("retraction's new sentence not stale at the turn's now: %+v", s.Pending)
	}
	// Twin: a fact served fresh is fresh.
	if v, _ := factOf(s, "exercise"); v.IsStale(now) || v.IsStale(now.Add(24*time.Hour)) {
		t.Errorf("exercise served fresh is stale: %+v", v)
	}
}

// P-24: a pending announcement the server will not confirm current (the
// fact is being revised under the turn faster than it can re-read) is not
// spoken from a superseded read; with a read that agrees, it is.
func TestTurn_APendingAnnouncementAheadOfTheTurnsReadIsReadAgain(t *testing.T) {
	f := newFakeCare(t)
	seedRay(f)
	p := startPrincipal(t, f, newTestDB(t), "ray")
	waitConnected(t, p)
	hearAll(t, p, "ray")
	n := f.publish(wb, "Full weight-bearing as tolerated.")
	waitPending(t, p, wb, n)
	// The ledger knows v3 (observed by another instance) before this
	// principal has read it.
	n3 := f.publishSilently(wb, "Non-weight-bearing.")
	hs, err := p.ledger.HeardState(context.Background(), "ray", wb)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.ledger.Observe(context.Background(), "ray", wb, hs, n3, false, 0); err != nil {
		t.Fatal(err)
	}
	s := turnOf(t, p, "ray")
	if len(s.Pending) != 1 || s.Pending[0].Current.N != n3 {
		t.Fatalf("pending = %+v, want the retraction to v%d", s.Pending, n3)
	}
	if v, _ := factOf(s, "weight_bearing"); v.N != n3 {
		t.Errorf("facts give walking v%d, want v%d", v.N, n3)
	}
}

// The principal's side of a crash after a plain answer: Ray was told his
// walking instruction (his starting point) and the process died before
// MarkTold; the physio's revision is then a retraction of what he was
// told, said again — not a first hearing of the new words.
func TestTold_ACrashAfterAPlainAnswerLeavesItOfferedSoTheRevisionIsARetraction(t *testing.T) {
	for _, confirmed := range []bool{false, true} {
		t.Run(map[bool]string{false: "crash before MarkTold", true: "confirmed"}[confirmed], func(t *testing.T) {
			f := newFakeCare(t)
			seedRay(f)
			db := newTestDB(t)
			p := startPrincipal(t, f, db, "ray")
			waitConnected(t, p)
			s := turnOf(t, p, "ray")
			v, ok := factOf(s, "weight_bearing")
			if !ok || len(s.Pending) != 0 {
				t.Fatalf("turn = %+v", s)
			}
			ctx := context.Background()
			if err := p.Offered(ctx, "ray", []models.Offer{{URI: v.FactURI(), Version: v.N, Told: true}}); err != nil {
				t.Fatal(err)
			}
			if confirmed {
				if err := p.MarkTold(ctx, "ray", v.FactURI(), v.N, models.Hearing{}); err != nil {
					t.Fatal(err)
				}
			}
			p.stop()
			n := f.publishSilently(wb, "Full weight-bearing as tolerated.")
			p = startPrincipal(t, f, db, "ray")
			waitConnected(t, p)
			s = turnOf(t, p, "ray")
			if len(s.Pending) != 1 || !s.Pending[0].IsRetraction() || s.Pending[0].Heard.N != v.N || s.Pending[0].Current.N != n || s.Pending[0].Again == confirmed {
				t.Fatalf("pending = %+v, want the retraction v%d → v%d, Again %v", s.Pending, v.N, n, !confirmed)
			}
			want := "Stop — your walking instruction has changed. I told you: “Partial weight-bearing with crutches.”"
			if !confirmed {
				want = "Stop — " + models.RedeliveryPhrase + ": your walking instruction has changed. I may have told you: “Partial weight-bearing with crutches.”"
			}
			if got := spoken(t, s); !strings.HasPrefix(got, want) {
				t.Errorf("spoken %q, want it to open %q", got, want)
			}
		})
	}
}

// The principal's side: a retraction Ray was marked as having heard is
// reported not played; the next turn says it again, saying so. Twin: a
// malformed report changes nothing.
func TestNotPlayed_TheRetractionIsSpokenAgainSayingSo(t *testing.T) {
	f := newFakeCare(t)
	seedRay(f)
	p := startPrincipal(t, f, newTestDB(t), "ray")
	waitConnected(t, p)
	hearAll(t, p, "ray")
	n := f.publish(wb, "Full weight-bearing as tolerated.")
	waitPending(t, p, wb, n)
	s := turnOf(t, p, "ray")
	if len(s.Pending) != 1 || s.Heard[mustURI(t, wb)] != n-1 {
		t.Fatalf("turn = %+v, want one retraction and heard v%d", s, n-1)
	}
	a := s.Pending[0]
	ctx := context.Background()
	if err := p.MarkHeard(ctx, "ray", a.URI(), n, models.Hearing{}); err != nil {
		t.Fatal(err)
	}
	bad := []models.Marked{{URI: a.URI(), HeardBefore: n, From: n - 1, Version: n}}
	if _, err := p.NotPlayed(ctx, "ray", bad); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("NotPlayed(heard before = version) = %v, want ErrInvalidArgument", err)
	}
	if s := turnOf(t, p, "ray"); len(s.Pending) != 0 {
		t.Fatalf("a refused report re-opened %+v", s.Pending)
	}
	if _, err := p.NotPlayed(ctx, "ray", []models.Marked{{URI: a.URI(), HeardBefore: n - 1, From: n - 1, Version: n}}); err != nil {
		t.Fatal(err)
	}
	s = turnOf(t, p, "ray")
	if got := spoken(t, s); !s.Pending[0].Again || !strings.HasPrefix(got, "Stop — "+models.RedeliveryPhrase+": your walking instruction has changed. I told you: “Partial weight-bearing with crutches.”") {
		t.Errorf("after the report: %q (Again %v)", got, s.Pending[0].Again)
	}
}

// The double failure through the principal (P-24): S1's retraction is
// marked heard, S2 tells the new words plainly (MarkTold), and both are
// reported not played. S1's report first already owes the retraction
// again — a plain telling never delivered it (finding U2; before U2 it was
// held back by S2's confirmation) — and S2's report then changes nothing
// more: the next turn says the retraction again, saying so, once. Twin: a
// Confirmed entry carrying a heard-before or from version is refused and
// changes nothing.
func TestNotPlayed_BothResponsesReportedNotPlayedLeaveTheRetractionOwed(t *testing.T) {
	f := newFakeCare(t)
	seedRay(f)
	p := startPrincipal(t, f, newTestDB(t), "ray")
	waitConnected(t, p)
	hearAll(t, p, "ray")
	n := f.publish(wb, "Full weight-bearing as tolerated.")
	waitPending(t, p, wb, n)
	s := turnOf(t, p, "ray")
	if len(s.Pending) != 1 {
		t.Fatalf("turn = %+v, want one retraction", s)
	}
	u := s.Pending[0].URI()
	ctx := context.Background()
	if err := p.MarkHeard(ctx, "ray", u, n, models.Hearing{}); err != nil { // S1
		t.Fatal(err)
	}
	if err := p.MarkTold(ctx, "ray", u, n, models.Hearing{}); err != nil { // S2
		t.Fatal(err)
	}
	if _, err := p.NotPlayed(ctx, "ray", []models.Marked{{URI: u, HeardBefore: n - 1, From: n - 1, Version: n}}); err != nil {
		t.Fatal(err)
	}
	const again = "Stop — " + models.RedeliveryPhrase + ": your walking instruction has changed. I told you: “Partial weight-bearing with crutches.”"
	if s := turnOf(t, p, "ray"); len(s.Pending) != 1 || !s.Pending[0].Again || !strings.HasPrefix(spoken(t, s), again) {
		t.Fatalf("after S1's report: %+v, want the retraction owed again past S2's plain telling", s.Pending)
	}
	bad := []models.Marked{{URI: u, HeardBefore: n - 1, Version: n, Confirmed: true}}
	if _, err := p.NotPlayed(ctx, "ray", bad); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("NotPlayed(confirmed with heard before) = %v, want ErrInvalidArgument", err)
	}
	if s := turnOf(t, p, "ray"); len(s.Pending) != 1 || s.Pending[0].Heard == nil || s.Pending[0].Heard.N != n-1 {
		t.Fatalf("a refused report changed the owed retraction: %+v", s.Pending)
	}
	if _, err := p.NotPlayed(ctx, "ray", []models.Marked{{URI: u, Version: n, Confirmed: true}}); err != nil { // S2's report
		t.Fatal(err)
	}
	s = turnOf(t, p, "ray")
	if len(s.Pending) != 1 {
		t.Fatalf("after both reports: %+v, want the retraction owed", s.Pending)
	}
	if got := spoken(t, s); !s.Pending[0].Again || !strings.HasPrefix(got, again) {
		t.Errorf("after both reports: %q (Again %v)", got, s.Pending[0].Again)
	}
}

// Finding F14 through the principal (P-24): S1's retraction is reported
// not played and said again (S3, delivered); Alexa then delivers S1's
// report a second time — same marks, same response id. The repeat
// re-opens nothing: the next turn does not say the retraction again.
// Twins: S3's own report (another id) re-opens it; a report whose
// response id is malformed is refused and changes nothing.
func TestNotPlayed_ARepeatedReportOfOneResponseReopensNothingDeliveredSince(t *testing.T) {
	for _, tt := range []struct {
		name    string
		second  string // the second report's response id
		reOwned bool
	}{
		{"S1's report again", "s1", false},
		{"twin: S3's own report", "s3", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeCare(t)
			seedRay(f)
			p := startPrincipal(t, f, newTestDB(t), "ray")
			waitConnected(t, p)
			hearAll(t, p, "ray")
			n := f.publish(wb, "Full weight-bearing as tolerated.")
			waitPending(t, p, wb, n)
			s := turnOf(t, p, "ray")
			if len(s.Pending) != 1 {
				t.Fatalf("turn = %+v, want one retraction", s)
			}
			u := s.Pending[0].URI()
			ctx := context.Background()
			mark := models.Marked{URI: u, HeardBefore: n - 1, From: n - 1, Version: n, Response: "s1"}
			if err := p.MarkHeard(ctx, "ray", u, n, models.Hearing{}); err != nil { // S1
				t.Fatal(err)
			}
			if _, err := p.NotPlayed(ctx, "ray", []models.Marked{mark}); err != nil {
				t.Fatal(err)
			}
			if s := turnOf(t, p, "ray"); len(s.Pending) != 1 {
				t.Fatalf("S1's report: %+v, want the retraction owed", s.Pending)
			}
			if err := p.MarkHeard(ctx, "ray", u, n, models.Hearing{}); err != nil { // S3 said it again
				t.Fatal(err)
			}
			bad := mark
			bad.Response = "S1 again!"
			if _, err := p.NotPlayed(ctx, "ray", []models.Marked{bad}); !errors.Is(err, ErrInvalidArgument) {
				t.Fatalf("NotPlayed(malformed response id) = %v, want ErrInvalidArgument", err)
			}
			if s := turnOf(t, p, "ray"); len(s.Pending) != 0 {
				t.Fatalf("a refused report re-opened %+v", s.Pending)
			}
			second := mark
			second.Response = tt.second
			if _, err := p.NotPlayed(ctx, "ray", []models.Marked{second}); err != nil {
				t.Fatal(err)
			}
			if s := turnOf(t, p, "ray"); (len(s.Pending) == 1) != tt.reOwned {
				t.Fatalf("after the second report: pending %+v, want owed again = %v", s.Pending, tt.reOwned)
			}
		})
	}
}
