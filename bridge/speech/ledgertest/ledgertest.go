// Package ledgertest is the contract of the speech principal's heard
// ledger (bridge/speech's LedgerStore; P-19, P-24) as one test suite, run
// against every implementation: the store's SQL on SQLite and Postgres
// (store.HeardLedger) and the speech package's in-memory fake, so the fake
// the principal's tests run on behaves as the real ledger does.
//
// It imports only models and the standard library, so both the store's
// tests and the speech package's own tests can import it (P-18).
package ledgertest

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/unsay/unsay/models"
)

// Ledger is bridge/speech's LedgerStore, method for method (the speech
// package asserts that its fake satisfies both).
type Ledger interface {
	Heard(ctx context.Context, patient, uri string) (int, error)
	HeardState(ctx context.Context, patient, uri string) (models.HeardState, error)
	HeardOf(ctx context.Context, patient string) (map[string]int, error)
	Facts(ctx context.Context, patient string) (map[string]models.FactLedger, error)
	Pending(ctx context.Context, patient string) ([]models.QueuedAnnouncement, error)
	Status(ctx context.Context, patient, uri string) (heard, pendingTo int, err error)
	Backlog(ctx context.Context) (int, error)
	Followed(ctx context.Context, patients []string) (map[string]bool, error)
	Follow(ctx context.Context, patient string, facts map[string]int) error
	Observe(ctx context.Context, patient, uri string, expect models.HeardState, latest int, sameHeard bool, unlike int, at time.Time) (bool, error)
	Offered(ctx context.Context, patient string, offers []models.LedgerOffer, at time.Time) error
	OfferedResponse(ctx context.Context, patient string, offers []models.LedgerOffer, sent models.LedgerSent, at time.Time) error
	SentResponses(ctx context.Context, patient, session string, at time.Time) ([]models.LedgerSent, error)
	MarkHeard(ctx context.Context, patient, uri string, version int, how models.Hearing) error
	MarkTold(ctx context.Context, patient, uri string, version int, how models.Hearing) (bool, error)
	NotPlayed(ctx context.Context, patient string, ms []models.LedgerMark, at time.Time) (int, error)
	Drop(ctx context.Context, id int64, at time.Time) error
	Notified(ctx context.Context, patient string, at time.Time) error
	Delivery(ctx context.Context, patient, uri string) (models.DeliveryRecord, error)
	DeliveryChanges(ctx context.Context, after int64, limit int) ([]models.DeliveryChange, error)
	DeliveryCursor(ctx context.Context) (int64, error)
	OnWrite(fn func())
}

// NewDB makes one empty database for one test and returns the function
// that opens a handle on it: every call is another instance (or the same
// one after a restart) on the same durable data. Handles are closed at t's
// cleanup.
type NewDB func(t *testing.T) (open func() Ledger)

// Run runs the whole contract, one subtest per property.
func Run(t *testing.T, newDB NewDB) {
	for _, c := range []struct {
		name string
		fn   func(*testing.T, NewDB)
	}{
		{"AnnouncementSemantics", AnnouncementSemantics},
		{"ObserveRefusesADecisionMadeOnAStaleHeardVersion", ObserveRefusesADecisionMadeOnAStaleHeardVersion},
		{"SurvivesReopeningTheDatabase", SurvivesReopeningTheDatabase},
		{"KeepsPatientsApart", KeepsPatientsApart},
		{"OfferAndRevertAcrossInstances", OfferAndRevertAcrossInstances},
		{"AFactToldAndNeverConfirmedIsWithdrawnByTheNextRevision", AFactToldAndNeverConfirmedIsWithdrawnByTheNextRevision},
		{"TwoUnconfirmedOffersInARowAreBothKeptToWithdraw", TwoUnconfirmedOffersInARowAreBothKeptToWithdraw},
		{"AConfirmedOfferClearsTheOffersUpToIt", AConfirmedOfferClearsTheOffersUpToIt},
		{"NotPlayedReopensWhatTheResponseMarked", NotPlayedReopensWhatTheResponseMarked},
		{"OneReportOfTheLastAndAnEarlierResponseRollsBackPastBothInEitherOrder", OneReportOfTheLastAndAnEarlierResponseRollsBackPastBothInEitherOrder},
		{"UnplayedRetractionsReportedInTheirOwnOrderRollBackToWhatHeLastHeardForCertain", UnplayedRetractionsReportedInTheirOwnOrderRollBackToWhatHeLastHeardForCertain},
		{"EveryWordingOfSeveralUnplayedRetractionsInARowStaysWithdrawn", EveryWordingOfSeveralUnplayedRetractionsInARowStaysWithdrawn},
		{"AConfirmationIsWrittenOnce", AConfirmationIsWrittenOnce},
		{"ADoubleFailureInEitherOrderLeavesTheRetractionOwed", ADoubleFailureInEitherOrderLeavesTheRetractionOwed},
		{"ARepeatedReportOfAResponseChangesNothingALaterDeliveryConfirmed", ARepeatedReportOfAResponseChangesNothingALaterDeliveryConfirmed},
		{"ARevisionBetweenNotPlayedReportsStillRollsBackToWhatHeLastHeardForCertain", ARevisionBetweenNotPlayedReportsStillRollsBackToWhatHeLastHeardForCertain},
		{"ARetractionToldOnlyPlainlySinceIsOwedAgainWhenReportedNotPlayed", ARetractionToldOnlyPlainlySinceIsOwedAgainWhenReportedNotPlayed},
		{"DropSettlesAPendingAnnouncementOnce", DropSettlesAPendingAnnouncementOnce},
		{"FollowRecordsTheBaselineOnce", FollowRecordsTheBaselineOnce},
		{"DeliveryLogRecordsWhenAndHowEachVersionReachedRay", DeliveryLogRecordsWhenAndHowEachVersionReachedRay},
		{"DeliveryLogMarksUnchangedWordsAndKeepsFactsApart", DeliveryLogMarksUnchangedWordsAndKeepsFactsApart},
		{"TheTimelineNeverShowsAsHeardAVersionWhoseDeliveriesWereAllReportedNotPlayed", TheTimelineNeverShowsAsHeardAVersionWhoseDeliveriesWereAllReportedNotPlayed},
		{"DeliveryChangesFollowTheLogFromACursor", DeliveryChangesFollowTheLogFromACursor},
		{"DeliveryChangesAreSharedAcrossInstances", DeliveryChangesAreSharedAcrossInstances},
		{"AResponsesRecordIsReadOnAnotherInstanceWithItsMarks", AResponsesRecordIsReadOnAnotherInstanceWithItsMarks},
		{"TheRecordKeepsTheLastTwoResponsesOfEachSession", TheRecordKeepsTheLastTwoResponsesOfEachSession},
		{"TheRecordOfAResponseExpiresAfterADay", TheRecordOfAResponseExpiresAfterADay},
	} {
		t.Run(c.name, func(t *testing.T) { c.fn(t, newDB) })
	}
}

// WB is the fact most steps use: Ray's walking instruction.
const WB = "care://ray/weight_bearing"

var t10 = time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)

func at(min int) time.Time { return t10.Add(time.Duration(min) * time.Minute) }

// Span is a pending announcement's versions.
type Span struct{ From, To int }

func pendingSpans(t *testing.T, l Ledger, patient string) []Span {
	t.Helper()
	rows, err := l.Pending(context.Background(), patient)
	if err != nil {
		t.Fatal(err)
	}
	var out []Span
	for _, r := range rows {
		out = append(out, Span{r.From, r.To})
	}
	return out
}

// observe reads WB's latest version as latest, its words compared with
// what he heard only (same).
func observe(t *testing.T, l Ledger, latest int, same bool) {
	t.Helper()
	ctx := context.Background()
	h, err := l.Heard(ctx, "ray", WB)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Observe(ctx, "ray", WB, models.HeardState{Heard: h}, latest, same, 0, time.Time{}); err != nil {
		t.Fatalf("Observe(v%d): %v", latest, err)
	}
}

// observeWords observes latest with the words compared against what he
// heard (sameHeard) and every version he may have heard (sameOffered: all
// of them say latest's words; otherwise the newest does not).
func observeWords(t *testing.T, l Ledger, latest int, sameHeard, sameOffered bool) {
	t.Helper()
	hs, err := l.HeardState(context.Background(), "ray", WB)
	if err != nil {
		t.Fatal(err)
	}
	unlike := hs.LastOffered()
	if sameOffered {
		unlike = 0
	}
	observeUnlike(t, l, latest, sameHeard, unlike)
}

// observeUnlike observes latest with the words compared against what he
// heard (sameHeard) and what he may have heard: unlike is the newest
// offered version whose words differ from latest's (0: none).
func observeUnlike(t *testing.T, l Ledger, latest int, sameHeard bool, unlike int) {
	t.Helper()
	ctx := context.Background()
	hs, err := l.HeardState(ctx, "ray", WB)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Observe(ctx, "ray", WB, hs, latest, sameHeard, unlike, time.Time{}); err != nil {
		t.Fatalf("Observe(v%d): %v", latest, err)
	}
}

// sameFact reports whether a and b hold the same versions (a nil and an
// empty offered list alike).
func sameFact(a, b models.FactLedger) bool {
	return a.Heard == b.Heard && a.Baseline == b.Baseline && slices.Equal(a.Offered, b.Offered)
}

// offeredList is the offered versions a case expects: n alone, none for 0.
func offeredList(n int) []int {
	if n == 0 {
		return nil
	}
	return []int{n}
}

func markHeard(t *testing.T, l Ledger, v int) {
	t.Helper()
	if err := l.MarkHeard(context.Background(), "ray", WB, v, models.Hearing{}); err != nil {
		t.Fatal(err)
	}
}

func markTold(t *testing.T, l Ledger, v int) {
	t.Helper()
	if _, err := l.MarkTold(context.Background(), "ray", WB, v, models.Hearing{}); err != nil {
		t.Fatal(err)
	}
}

// offered records that the pending announcement of WB was put in a
// response speaking version v.
func offered(t *testing.T, l Ledger, v int) {
	t.Helper()
	rows, err := l.Pending(context.Background(), "ray")
	if err != nil || len(rows) != 1 {
		t.Fatalf("pending = %v, %v: want one to offer", rows, err)
	}
	if err := l.Offered(context.Background(), "ray", []models.LedgerOffer{{ID: rows[0].ID, URI: WB, Version: v}}, time.Time{}); err != nil {
		t.Fatal(err)
	}
}

// offeredTold records that version v of WB is told plainly in a response
// about to be written.
func offeredTold(t *testing.T, l Ledger, v int) {
	t.Helper()
	if err := l.Offered(context.Background(), "ray", []models.LedgerOffer{{URI: WB, Version: v, Told: true}}, time.Time{}); err != nil {
		t.Fatal(err)
	}
}

// notPlayed re-opens what a response marked of WB: heard before, from, version.
func notPlayed(t *testing.T, l Ledger, before, from, version int) int {
	t.Helper()
	n, err := l.NotPlayed(context.Background(), "ray", []models.LedgerMark{{URI: WB, HeardBefore: before, From: from, Version: version}}, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// notPlayedConfirmed reports not played a response that told version of
// WB plainly at the version he had heard (a confirmation, MarkTold).
func notPlayedConfirmed(t *testing.T, l Ledger, version int) int {
	t.Helper()
	n, err := l.NotPlayed(context.Background(), "ray", []models.LedgerMark{{URI: WB, Version: version, Confirmed: true}}, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// report is one not-played report of the response id (its marks'
// Response) at when: what it marked of WB (heard before, from, version),
// or with confirmed its plain telling of version.
func report(t *testing.T, l Ledger, id string, when time.Time, confirmed bool, before, from, version int) int {
	t.Helper()
	n, err := l.NotPlayed(context.Background(), "ray", []models.LedgerMark{{URI: WB, HeardBefore: before, From: from, Version: version, Confirmed: confirmed, Response: id}}, when)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func heard(t *testing.T, l Ledger) int {
	t.Helper()
	h, err := l.Heard(context.Background(), "ray", WB)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func delivery(t *testing.T, l Ledger) models.DeliveryRecord {
	t.Helper()
	rec, err := l.Delivery(context.Background(), "ray", WB)
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

// AnnouncementSemantics: P-19, the ledger's decisions, each step against
// the previous state.
func AnnouncementSemantics(t *testing.T, newDB NewDB) {
	tests := []struct {
		name  string
		steps func(t *testing.T, l Ledger)
		want  []Span
		heard int
	}{
		{"stacked revisions become one announcement from heard to latest", func(t *testing.T, l Ledger) {
			markHeard(t, l, 1)
			observe(t, l, 2, false)
			observe(t, l, 3, false)
			observe(t, l, 4, false)
		}, []Span{{1, 4}}, 1},
		{"a fact never heard is a first hearing (from 0), creation included", func(t *testing.T, l Ledger) {
			observe(t, l, 1, false)
		}, []Span{{0, 1}}, 0},
		{"a never-heard fact revised is still one first hearing of the latest", func(t *testing.T, l Ledger) {
			observe(t, l, 1, false)
			observe(t, l, 2, false)
		}, []Span{{0, 2}}, 0},
		{"none twice: the version he heard is not announced again", func(t *testing.T, l Ledger) {
			observe(t, l, 2, false)
			markHeard(t, l, 2)
			observe(t, l, 2, false)
		}, nil, 2},
		{"positive twin of none twice: a later revision is announced from what he heard", func(t *testing.T, l Ledger) {
			observe(t, l, 2, false)
			markHeard(t, l, 2)
			observe(t, l, 3, false)
		}, []Span{{2, 3}}, 2},
		{"unchanged words queue nothing and the ledger moves on", func(t *testing.T, l Ledger) {
			markHeard(t, l, 1)
			observe(t, l, 2, true)
		}, nil, 2},
		{"positive twin of unchanged: changed words are announced", func(t *testing.T, l Ledger) {
			markHeard(t, l, 1)
			observe(t, l, 2, false)
		}, []Span{{1, 2}}, 1},
		{"words changed back to what he heard drop the pending announcement", func(t *testing.T, l Ledger) {
			markHeard(t, l, 1)
			observe(t, l, 2, false)
			observe(t, l, 3, true)
		}, nil, 3},
		{"an older version observed late does not shrink the announcement", func(t *testing.T, l Ledger) {
			markHeard(t, l, 1)
			observe(t, l, 3, false)
			observe(t, l, 2, false)
		}, []Span{{1, 3}}, 1},
		{"hearing part-way moves the announcement's start", func(t *testing.T, l Ledger) {
			markHeard(t, l, 1)
			observe(t, l, 3, false)
			markHeard(t, l, 2)
		}, []Span{{2, 3}}, 2},
		{"hearing the latest clears the announcement", func(t *testing.T, l Ledger) {
			markHeard(t, l, 1)
			observe(t, l, 3, false)
			markHeard(t, l, 3)
		}, nil, 3},
		{"telling an older version as a fact never moves the ledger back", func(t *testing.T, l Ledger) {
			markHeard(t, l, 3)
			markTold(t, l, 1)
			observe(t, l, 3, false)
		}, nil, 3},
		{"an announcement delivered after a newer one is what he heard last", func(t *testing.T, l Ledger) {
			markHeard(t, l, 3)
			markHeard(t, l, 1) // a slower turn's delivery, confirmed last
			observe(t, l, 3, false)
		}, []Span{{1, 3}}, 1},
		// P-19, P-24: a plain fact answer never swallows a retraction.
		{"a fact told never settles a pending retraction", func(t *testing.T, l Ledger) {
			markHeard(t, l, 1)
			observe(t, l, 2, false)
			markTold(t, l, 2)
		}, []Span{{1, 2}}, 1},
		{"positive twin: the retraction delivered settles it", func(t *testing.T, l Ledger) {
			markHeard(t, l, 1)
			observe(t, l, 2, false)
			markHeard(t, l, 2)
		}, nil, 2},
		{"a fact told settles a first hearing it covers", func(t *testing.T, l Ledger) {
			observe(t, l, 1, false)
			markTold(t, l, 1)
		}, nil, 1},
		{"a fact told part-way turns a first hearing into a retraction of it", func(t *testing.T, l Ledger) {
			observe(t, l, 2, false)
			markTold(t, l, 1)
		}, []Span{{1, 2}}, 1},
		// What he may have heard: an offer whose delivery is unconfirmed.
		{"a revert during the turn withdraws what the turn told him", func(t *testing.T, l Ledger) {
			markHeard(t, l, 1)
			observe(t, l, 2, false)
			offered(t, l, 2)
			observeWords(t, l, 3, true, false) // v3 has v1's words
			markHeard(t, l, 2)                 // the turn's response was delivered
		}, []Span{{2, 3}}, 2},
		{"a revert after a crash before the ledger's commit withdraws the offered words", func(t *testing.T, l Ledger) {
			markHeard(t, l, 1)
			observe(t, l, 2, false)
			offered(t, l, 2)
			observeWords(t, l, 3, true, false) // and the process dies: no markHeard
		}, []Span{{2, 3}}, 1},
		{"positive twin of the revert: with no offer, changed back to what he heard is nothing", func(t *testing.T, l Ledger) {
			markHeard(t, l, 1)
			observe(t, l, 2, false)
			observeWords(t, l, 3, true, false)
		}, nil, 3},
		{"an offer not confirmed, then the same words again: from what he heard, said again", func(t *testing.T, l Ledger) {
			markHeard(t, l, 1)
			observe(t, l, 2, false)
			offered(t, l, 2)
			observeWords(t, l, 3, false, true)
		}, []Span{{1, 3}}, 1},
		{"a delivered announcement overtaken by a new revision withdraws what it said", func(t *testing.T, l Ledger) {
			markHeard(t, l, 1)
			observe(t, l, 2, false)
			offered(t, l, 2)
			observeWords(t, l, 3, false, false)
			markHeard(t, l, 2)
		}, []Span{{2, 3}}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := newDB(t)()
			tt.steps(t, l)
			if got := pendingSpans(t, l, "ray"); !slices.Equal(got, tt.want) {
				t.Errorf("pending = %v, want %v", got, tt.want)
			}
			if h := heard(t, l); h != tt.heard {
				t.Errorf("heard = %d, want %d", h, tt.heard)
			}
		})
	}
}

// ObserveRefusesADecisionMadeOnAStaleHeardVersion: a decision made on a
// heard version that moved since is refused with models.ErrHeardMoved.
func ObserveRefusesADecisionMadeOnAStaleHeardVersion(t *testing.T, newDB NewDB) {
	l := newDB(t)()
	ctx := context.Background()
	markHeard(t, l, 2)
	if _, err := l.Observe(ctx, "ray", WB, models.HeardState{Heard: 1}, 3, false, 0, time.Time{}); !errors.Is(err, models.ErrHeardMoved) {
		t.Fatalf("Observe with heard 1 after MarkHeard(2) = %v, want ErrHeardMoved", err)
	}
	if got := pendingSpans(t, l, "ray"); got != nil {
		t.Fatalf("a refused Observe queued %v", got)
	}
	// Twin: with the right heard version it queues.
	if changed, err := l.Observe(ctx, "ray", WB, models.HeardState{Heard: 2}, 3, false, 0, time.Time{}); err != nil || !changed {
		t.Fatalf("Observe = %v, %v; want a change", changed, err)
	}
	if got := pendingSpans(t, l, "ray"); !slices.Equal(got, []Span{{2, 3}}) {
		t.Fatalf("pending = %v", got)
	}
	// And reading it again changes nothing.
	if changed, err := l.Observe(ctx, "ray", WB, models.HeardState{Heard: 2}, 3, false, 0, time.Time{}); err != nil || changed {
		t.Fatalf("Observe again = %v, %v; want no change", changed, err)
	}
}

// SurvivesReopeningTheDatabase: P-19 across a restart.
func SurvivesReopeningTheDatabase(t *testing.T, newDB NewDB) {
	open := newDB(t)
	ctx := context.Background()
	l := open()
	markHeard(t, l, 1)
	observe(t, l, 3, false)
	other := "care://ray/anticoagulant"
	if _, err := l.Observe(ctx, "ray", other, models.HeardState{}, 1, false, 0, time.Time{}); err != nil {
		t.Fatal(err)
	}

	l2 := open()
	rows, err := l2.Pending(ctx, "ray")
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 || rows[0].URI != WB || rows[0].From != 1 || rows[0].To != 3 || rows[1].URI != other || rows[1].From != 0 || rows[0].ID >= rows[1].ID {
		t.Fatalf("after reopen pending = %+v", rows)
	}
	if err := l2.MarkHeard(ctx, "ray", WB, 3, models.Hearing{}); err != nil {
		t.Fatal(err)
	}

	l3 := open()
	if got := pendingSpans(t, l3, "ray"); !slices.Equal(got, []Span{{0, 1}}) {
		t.Fatalf("after hearing and reopening, pending = %v, want only the anticoagulant first hearing", got)
	}
	if n, err := l3.Backlog(ctx); err != nil || n != 1 {
		t.Fatalf("backlog = %d, %v", n, err)
	}
	if h, to, err := l3.Status(ctx, "ray", other); err != nil || h != 0 || to != 1 {
		t.Fatalf("status of the anticoagulant = heard %d, pending to %d, %v; want 0 and 1", h, to, err)
	}
	if h, to, err := l3.Status(ctx, "ray", WB); err != nil || h != 3 || to != 0 {
		t.Fatalf("status of walking = heard %d, pending to %d, %v; want 3 and 0", h, to, err)
	}
}

// KeepsPatientsApart: one patient's ledger is never another's.
func KeepsPatientsApart(t *testing.T, newDB NewDB) {
	l := newDB(t)()
	ctx := context.Background()
	if _, err := l.Observe(ctx, "bob", "care://bob/weight_bearing", models.HeardState{}, 2, false, 0, time.Time{}); err != nil {
		t.Fatal(err)
	}
	if got := pendingSpans(t, l, "ray"); got != nil {
		t.Fatalf("ray sees bob's announcement: %v", got)
	}
	if got := pendingSpans(t, l, "bob"); !slices.Equal(got, []Span{{0, 2}}) {
		t.Fatalf("bob's pending = %v", got)
	}
	markHeard(t, l, 1)
	if h, err := l.HeardOf(ctx, "bob"); err != nil || len(h) != 0 {
		t.Fatalf("bob's heard = %v, %v; want none", h, err)
	}
	if h, err := l.HeardOf(ctx, "ray"); err != nil || len(h) != 1 || h[WB] != 1 {
		t.Fatalf("ray's heard = %v, %v; want walking v1", h, err)
	}
}

// OfferAndRevertAcrossInstances: two handles on one database see one
// ledger — an announcement, stacked revisions, unchanged words, an offer,
// a revert and the delivery, written through either.
func OfferAndRevertAcrossInstances(t *testing.T, newDB NewDB) {
	open := newDB(t)
	ctx := context.Background()
	l := open()
	markHeard(t, l, 1)
	observe(t, l, 2, false)
	observe(t, l, 3, false) // stacked
	if _, err := l.Observe(ctx, "ray", "care://ray/exercise", models.HeardState{}, 1, false, 0, time.Time{}); err != nil {
		t.Fatal(err)
	}
	if got := pendingSpans(t, l, "ray"); len(got) != 2 || got[0] != (Span{1, 3}) || got[1] != (Span{0, 1}) {
		t.Fatalf("pending = %v, want [{1 3} {0 1}]", got)
	}
	observe(t, l, 4, true) // the words went back to what he heard
	if got := pendingSpans(t, l, "ray"); len(got) != 1 || got[0] != (Span{0, 1}) {
		t.Fatalf("after unchanged words pending = %v", got)
	}

	l2 := open()
	if h := heard(t, l2); h != 4 {
		t.Fatalf("the other instance reads heard %d; want 4", h)
	}
	if err := l2.MarkHeard(ctx, "ray", "care://ray/exercise", 1, models.Hearing{}); err != nil {
		t.Fatal(err)
	}
	if n, err := l.Backlog(ctx); err != nil || n != 0 {
		t.Fatalf("backlog = %d, %v; want 0", n, err)
	}

	// What he may have heard: an offer, a revert, the delivery.
	observe(t, l2, 5, false)
	offered(t, l2, 5)
	if rows, err := l.Pending(ctx, "ray"); err != nil || len(rows) != 1 || !rows[0].Offered {
		t.Fatalf("offered pending = %+v, %v", rows, err)
	}
	if f, err := l.Facts(ctx, "ray"); err != nil || !sameFact(f[WB], models.FactLedger{Heard: 4, Offered: []int{5}}) || !sameFact(f["care://ray/exercise"], models.FactLedger{Heard: 1}) {
		t.Fatalf("facts = %+v, %v", f, err)
	}
	observeWords(t, l, 6, true, false) // v6 has v4's words
	markHeard(t, l2, 5)
	rows, err := l.Pending(ctx, "ray")
	if err != nil || len(rows) != 1 || rows[0].From != 5 || rows[0].To != 6 || rows[0].Offered {
		t.Fatalf("after the revert and the delivery pending = %+v, %v; want 5 → 6, not again", rows, err)
	}
}

// twoUnconfirmed: Ray heard v1 for certain; v2's retraction was offered
// and the process died before MarkHeard; v3's (withdrawing v2) was
// offered and it died again.
func twoUnconfirmed(t *testing.T, l Ledger) {
	t.Helper()
	markHeard(t, l, 1)
	observe(t, l, 2, false)
	offered(t, l, 2)
	observeUnlike(t, l, 3, false, 2)
	offered(t, l, 3)
}

func heardState(t *testing.T, l Ledger) models.HeardState {
	t.Helper()
	hs, err := l.HeardState(context.Background(), "ray", WB)
	if err != nil {
		t.Fatal(err)
	}
	return hs
}

// TwoUnconfirmedOffersInARowAreBothKeptToWithdraw: finding F10 (P-19,
// P-24). After two unconfirmed deliveries in a row (v2, then v3) the
// ledger holds both as versions he may have heard — the second offer
// never replaces the first — on every instance and after a restart, so
// the next revision's retraction can withdraw v2's words as well as v3's
// and v1's. It withdraws from the newest offer whose words differ from
// the latest: v3, or v2 when v3 says the latest's words (never from v1,
// which would leave v2 standing); with every offer and v1 saying the
// latest's words there is nothing to say.
func TwoUnconfirmedOffersInARowAreBothKeptToWithdraw(t *testing.T, newDB NewDB) {
	ctx := context.Background()
	for _, tt := range []struct {
		name      string
		sameHeard bool
		unlike    int // the newest offer whose words differ from v4's
		want      []Span
		heard     int
	}{
		{"v4 unlike all: from v3", false, 3, []Span{{3, 4}}, 1},
		{"v4 says v3's words: from v2", false, 2, []Span{{2, 4}}, 1},
		{"v4 says v3's and v1's words: still from v2", true, 2, []Span{{2, 4}}, 1},
		{"twin: v4 says the words of both offers and of v1: nothing to say", true, 0, nil, 4},
	} {
		t.Run(tt.name, func(t *testing.T) {
			open := newDB(t)
			l := open()
			twoUnconfirmed(t, l)
			for _, h := range []Ledger{l, open()} { // another instance, or after a restart
				if hs := heardState(t, h); !hs.Equal(models.HeardState{Heard: 1, Offered: []int{2, 3}}) {
					t.Fatalf("heard state %+v, want heard 1 and both offers, 2 and 3", hs)
				}
				if f, err := h.Facts(ctx, "ray"); err != nil || !sameFact(f[WB], models.FactLedger{Heard: 1, Offered: []int{2, 3}}) {
					t.Fatalf("facts %+v, %v: want heard 1 and both offers", f, err)
				}
				if rows, err := h.Pending(ctx, "ray"); err != nil || len(rows) != 1 || rows[0].From != 2 || rows[0].To != 3 || !rows[0].Offered {
					t.Fatalf("pending %+v, %v: want 2 → 3, said again", rows, err)
				}
			}
			observeUnlike(t, open(), 4, tt.sameHeard, tt.unlike)
			if got := pendingSpans(t, l, "ray"); !slices.Equal(got, tt.want) {
				t.Errorf("after v4 pending = %v, want %v", got, tt.want)
			}
			hs := heardState(t, l)
			if tt.want == nil {
				if !hs.Equal(models.HeardState{Heard: 4}) {
					t.Errorf("settled: heard state %+v, want heard 4 and no offer", hs)
				}
				return
			}
			if !hs.Equal(models.HeardState{Heard: tt.heard, Offered: []int{2, 3}}) {
				t.Errorf("heard state %+v, want heard %d and offers 2 and 3 still", hs, tt.heard)
			}
			if rows, err := l.Pending(ctx, "ray"); err != nil || len(rows) != 1 || !rows[0].Offered {
				t.Errorf("pending %+v, %v: want it said again", rows, err)
			}
		})
	}
	t.Run("an unlike that was never offered is refused", func(t *testing.T) {
		l := newDB(t)()
		twoUnconfirmed(t, l)
		hs := heardState(t, l)
		if _, err := l.Observe(ctx, "ray", WB, hs, 4, false, 1, time.Time{}); err == nil {
			t.Errorf("Observe with unlike v1 (heard, not offered) succeeded")
		}
		if got := pendingSpans(t, l, "ray"); !slices.Equal(got, []Span{{2, 3}}) {
			t.Errorf("after the refusal pending = %v, want 2 → 3 unchanged", got)
		}
	})
	t.Run("a re-opened response adds its version to the offers", func(t *testing.T) {
		l := newDB(t)()
		markHeard(t, l, 1)
		observe(t, l, 2, false)
		offered(t, l, 2)
		markHeard(t, l, 2) // delivered… then reported not played
		observe(t, l, 3, false)
		offered(t, l, 3) // v3's retraction offered, unconfirmed
		if n := notPlayed(t, l, 1, 1, 2); n != 1 {
			t.Fatalf("re-opened %d, want 1", n)
		}
		if hs := heardState(t, l); !hs.Equal(models.HeardState{Heard: 1, Offered: []int{2, 3}}) {
			t.Errorf("heard state %+v, want heard 1 and offers 2 and 3", hs)
		}
	})
}

// AConfirmedOfferClearsTheOffersUpToIt: the positive twin of
// TwoUnconfirmedOffersInARowAreBothKeptToWithdraw (P-24). A confirmed
// delivery of a version clears every offer up to it — he heard it, so
// they are no longer in doubt — and keeps the newer ones; a confirmed
// delivery of the newest clears them all, and the next revision withdraws
// only what he heard.
func AConfirmedOfferClearsTheOffersUpToIt(t *testing.T, newDB NewDB) {
	for _, tt := range []struct {
		name    string
		confirm func(t *testing.T, l Ledger)
		want    models.HeardState
		next    []Span // after v4, unlike all
	}{
		{"the newest confirmed (MarkHeard): all cleared", func(t *testing.T, l Ledger) { markHeard(t, l, 3) }, models.HeardState{Heard: 3}, []Span{{3, 4}}},
		{"the earlier confirmed (a late MarkHeard): the newer kept", func(t *testing.T, l Ledger) { markHeard(t, l, 2) }, models.HeardState{Heard: 2, Offered: []int{3}}, []Span{{3, 4}}},
		{"the newest told and confirmed (MarkTold) after the retraction was heard: all cleared", func(t *testing.T, l Ledger) {
			markHeard(t, l, 3)
			offeredTold(t, l, 3)
			markTold(t, l, 3)
		}, models.HeardState{Heard: 3}, []Span{{3, 4}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			l := newDB(t)()
			twoUnconfirmed(t, l)
			tt.confirm(t, l)
			if hs := heardState(t, l); !hs.Equal(tt.want) {
				t.Fatalf("heard state %+v, want %+v", hs, tt.want)
			}
			hs := heardState(t, l)
			if _, err := l.Observe(context.Background(), "ray", WB, hs, 4, false, hs.LastOffered(), time.Time{}); err != nil {
				t.Fatal(err)
			}
			if got := pendingSpans(t, l, "ray"); !slices.Equal(got, tt.next) {
				t.Errorf("after v4 pending = %v, want %v", got, tt.next)
			}
		})
	}
}

// AFactToldAndNeverConfirmedIsWithdrawnByTheNextRevision: P-24, a plain
// answer is offered before its write, so a crash before MarkTold leaves it
// offered and the next revision withdraws it, said again. Twins: confirmed
// by MarkTold, the revision withdraws it plainly; never told, it is a
// first hearing; told at a version he heard, nothing is written.
func AFactToldAndNeverConfirmedIsWithdrawnByTheNextRevision(t *testing.T, newDB NewDB) {
	ctx := context.Background()
	for _, tt := range []struct {
		name    string
		steps   func(t *testing.T, l Ledger)
		want    []Span
		offered bool // the pending announcement says it again
		heard   int
	}{
		{"told, crash before MarkTold", func(t *testing.T, l Ledger) { offeredTold(t, l, 1) }, []Span{{1, 2}}, true, 0},
		{"told and confirmed", func(t *testing.T, l Ledger) { offeredTold(t, l, 1); markTold(t, l, 1) }, []Span{{1, 2}}, false, 1},
		{"never told: his starting point, then news", func(t *testing.T, l Ledger) {}, []Span{{0, 2}}, false, 0},
		{"told, the revision read before MarkTold, then confirmed: not said again", func(t *testing.T, l Ledger) {
			offeredTold(t, l, 1)
			observeWords(t, l, 2, false, false)
			markTold(t, l, 1)
		}, []Span{{1, 2}}, false, 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			l := newDB(t)()
			if err := l.Follow(ctx, "ray", map[string]int{WB: 1}); err != nil {
				t.Fatal(err)
			}
			tt.steps(t, l)
			observeWords(t, l, 2, false, false)
			rows, err := l.Pending(ctx, "ray")
			if err != nil {
				t.Fatal(err)
			}
			var got []Span
			for _, r := range rows {
				got = append(got, Span{r.From, r.To})
				if r.Offered != tt.offered {
					t.Errorf("offered = %v, want %v", r.Offered, tt.offered)
				}
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("pending = %v, want %v", got, tt.want)
			}
			if h := heard(t, l); h != tt.heard {
				t.Errorf("heard = %d, want %d", h, tt.heard)
			}
		})
	}
	t.Run("told at a version he heard writes nothing", func(t *testing.T) {
		l := newDB(t)()
		markHeard(t, l, 2)
		markTold(t, l, 2) // a later response confirmed it (AConfirmationIsWrittenOnce): written once
		var writes atomic.Int32
		l.OnWrite(func() { writes.Add(1) })
		offeredTold(t, l, 2)
		offeredTold(t, l, 1)
		if hs, _ := l.HeardState(ctx, "ray", WB); writes.Load() != 0 || len(hs.Offered) != 0 {
			t.Errorf("%d writes, offered %v: want none", writes.Load(), hs.Offered)
		}
		offeredTold(t, l, 3) // twin: a version he has not heard is written
		if hs, _ := l.HeardState(ctx, "ray", WB); writes.Load() != 1 || !slices.Equal(hs.Offered, []int{3}) {
			t.Errorf("%d writes, offered %v: want one, v3", writes.Load(), hs.Offered)
		}
		if changed, err := l.MarkTold(ctx, "ray", WB, 2, models.Hearing{}); err != nil || changed || writes.Load() != 1 {
			t.Errorf("MarkTold of a version he heard = %v, %v after %d writes; want no change, no write", changed, err, writes.Load())
		}
		if changed, err := l.MarkTold(ctx, "ray", WB, 3, models.Hearing{}); err != nil || !changed {
			t.Errorf("MarkTold of the offered version = %v, %v; want a change", changed, err)
		}
	})
	t.Run("told never touches a pending retraction", func(t *testing.T) {
		l := newDB(t)()
		markHeard(t, l, 1)
		observe(t, l, 2, false)
		offeredTold(t, l, 2)
		if hs, _ := l.HeardState(ctx, "ray", WB); len(hs.Offered) != 0 {
			t.Errorf("offered %v while the retraction is pending", hs.Offered)
		}
		if changed, err := l.MarkTold(ctx, "ray", WB, 2, models.Hearing{}); err != nil || changed {
			t.Errorf("MarkTold past the retraction = %v, %v; want no change", changed, err)
		}
	})
}

// NotPlayedReopensWhatTheResponseMarked: P-24, Alexa's report that a
// response was not played re-opens what it marked — heard goes back, the
// version becomes offered and the announcement is owed again, said again —
// once, and never past a later confirmed delivery: one that moved heard,
// or, for a first hearing, a later response that told the version marked
// (finding B1). A later plain telling of a retraction's version delivers
// the new words, not the retraction: that is re-opened (finding U2).
func NotPlayedReopensWhatTheResponseMarked(t *testing.T, newDB NewDB) {
	ctx := context.Background()
	for _, tt := range []struct {
		name     string
		steps    func(t *testing.T, l Ledger) int
		reopened int
		want     []Span
		offered  int // the offered version after
		heard    int
	}{
		{"a retraction delivered, not played: owed again", func(t *testing.T, l Ledger) int {
			markHeard(t, l, 1)
			observe(t, l, 2, false)
			offered(t, l, 2)
			markHeard(t, l, 2)
			return notPlayed(t, l, 1, 1, 2)
		}, 1, []Span{{1, 2}}, 2, 1},
		{"reported twice: re-opened once", func(t *testing.T, l Ledger) int {
			markHeard(t, l, 1)
			observe(t, l, 2, false)
			markHeard(t, l, 2)
			n := notPlayed(t, l, 1, 1, 2)
			return n + notPlayed(t, l, 1, 1, 2)
		}, 1, []Span{{1, 2}}, 2, 1},
		{"a later confirmed delivery is never undone", func(t *testing.T, l Ledger) int {
			markHeard(t, l, 1)
			observe(t, l, 2, false)
			markHeard(t, l, 2)
			observe(t, l, 3, false)
			markHeard(t, l, 3) // the next turn's retraction, delivered
			return notPlayed(t, l, 1, 1, 2)
		}, 0, nil, 0, 3},
		{"a revision queued since withdraws the version not played, said again", func(t *testing.T, l Ledger) int {
			markHeard(t, l, 1)
			observe(t, l, 2, false)
			markHeard(t, l, 2)
			observe(t, l, 3, false)
			return notPlayed(t, l, 1, 1, 2)
		}, 1, []Span{{2, 3}}, 2, 1},
		{"a fact told, not played: a first hearing owed, said again", func(t *testing.T, l Ledger) int {
			offeredTold(t, l, 1)
			markTold(t, l, 1)
			return notPlayed(t, l, 0, 0, 1)
		}, 1, []Span{{0, 1}}, 1, 0},
		// Finding U2 (it was B1's rule): S1's retraction marked v2; a
		// later response (S2) told v2 plainly and was written in full,
		// then S1's late report arrives. He heard v2's words, never that
		// they withdraw v1's: the retraction is owed again.
		{"a later response that told the retraction's version plainly did not deliver the retraction: re-opened", func(t *testing.T, l Ledger) int {
			markHeard(t, l, 1)
			observe(t, l, 2, false)
			markHeard(t, l, 2) // S1's retraction, delivered
			markTold(t, l, 2)  // S2 told v2 plainly, delivered
			return notPlayed(t, l, 1, 1, 2)
		}, 1, []Span{{1, 2}}, 2, 1},
		// Finding B1: S1's first hearing of v1, then S2 told v1 plainly,
		// written in full: all a first hearing says, a confirmed delivery.
		{"twin: a later response that told a first hearing's version is a confirmed delivery: not re-opened", func(t *testing.T, l Ledger) int {
			observe(t, l, 1, false)
			markHeard(t, l, 1) // S1's first hearing, delivered
			markTold(t, l, 1)  // S2 told v1 plainly, delivered
			return notPlayed(t, l, 0, 0, 1)
		}, 0, nil, 0, 1},
		{"twin: a later response that told an older version confirms nothing: re-opened", func(t *testing.T, l Ledger) int {
			markHeard(t, l, 1)
			observe(t, l, 2, false)
			markHeard(t, l, 2)
			markTold(t, l, 1) // a turn that read v1 before v2
			return notPlayed(t, l, 1, 1, 2)
		}, 1, []Span{{1, 2}}, 2, 1},
		{"twin: a confirmation holds for its version only: the next version marked is re-opened", func(t *testing.T, l Ledger) int {
			markHeard(t, l, 1)
			observe(t, l, 2, false)
			markHeard(t, l, 2)
			markTold(t, l, 2) // v2 confirmed by a later response
			observe(t, l, 3, false)
			markHeard(t, l, 3) // v3's retraction, delivered, then reported
			return notPlayed(t, l, 2, 2, 3)
		}, 1, []Span{{2, 3}}, 3, 2},
		{"positive twin: no report, nothing owed", func(t *testing.T, l Ledger) int {
			markHeard(t, l, 1)
			observe(t, l, 2, false)
			markHeard(t, l, 2)
			return 0
		}, 0, nil, 0, 2},
	} {
		t.Run(tt.name, func(t *testing.T) {
			l := newDB(t)()
			if n := tt.steps(t, l); n != tt.reopened {
				t.Errorf("re-opened %d, want %d", n, tt.reopened)
			}
			rows, err := l.Pending(ctx, "ray")
			if err != nil {
				t.Fatal(err)
			}
			var got []Span
			for _, r := range rows {
				got = append(got, Span{r.From, r.To})
				if !r.Offered {
					t.Errorf("pending %+v not said again", r)
				}
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("pending = %v, want %v", got, tt.want)
			}
			if hs, _ := l.HeardState(ctx, "ray", WB); hs.Heard != tt.heard || !slices.Equal(hs.Offered, offeredList(tt.offered)) {
				t.Errorf("heard %d offered %v, want %d and %d", hs.Heard, hs.Offered, tt.heard, tt.offered)
			}
		})
	}
}

// OneReportOfTheLastAndAnEarlierResponseLastFirstRollsBackPastBoth
// OneReportOfTheLastAndAnEarlierResponseRollsBackPastBothInEitherOrder
// (findings T1, G8): one session's P retracted v1→v2 and its L v2→v3,
// both delivered; Alexa's ERROR report is of L but echoes P's attributes,
// and the skill hands both (skill.notPlayed). Then what he heard goes back
// past both — to v1, with v2 and v3 offered and v2→v3 owed again: the
// next retraction withdraws v1 as told and v2 as words he may have heard,
// a repeat if P played, never a loss — whichever of the two marks comes
// first: P's, refused at first because L moved what he heard, is
// remembered and done when L's rolls back to v2.
func OneReportOfTheLastAndAnEarlierResponseRollsBackPastBothInEitherOrder(t *testing.T, newDB NewDB) {
	ctx := context.Background()
	p := models.LedgerMark{URI: WB, HeardBefore: 1, From: 1, Version: 2, Response: "p0000000000000000000000000000000"}
	last := models.LedgerMark{URI: WB, HeardBefore: 2, From: 2, Version: 3, Response: "l0000000000000000000000000000000"}
	for _, tt := range []struct {
		name  string
		marks []models.LedgerMark
	}{
		{"the last response first", []models.LedgerMark{last, p}},
		{"the earlier response first", []models.LedgerMark{p, last}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			l := newDB(t)()
			markHeard(t, l, 1)
			observe(t, l, 2, false)
			offered(t, l, 2)
			markHeard(t, l, 2) // P, delivered
			observe(t, l, 3, false)
			offered(t, l, 3)
			markHeard(t, l, 3) // L, delivered
			if _, err := l.NotPlayed(ctx, "ray", tt.marks, time.Time{}); err != nil {
				t.Fatal(err)
			}
			if got := pendingSpans(t, l, "ray"); !slices.Equal(got, []Span{{2, 3}}) {
				t.Errorf("pending = %v, want v2→v3 owed again", got)
			}
			if hs := heardState(t, l); !hs.Equal(models.HeardState{Heard: 1, Offered: []int{2, 3}}) {
				t.Errorf("heard state %+v, want heard 1 and offers 2 and 3", hs)
			}
		})
	}
}

// retract writes version v of WB (its words unlike every version he heard
// or may have heard), puts its retraction in a response and delivers it.
func retract(t *testing.T, l Ledger, v int) {
	t.Helper()
	observeWords(t, l, v, false, false)
	offered(t, l, v)
	markHeard(t, l, v)
}

// UnplayedRetractionsReportedInTheirOwnOrderRollBackToWhatHeLastHeardForCertain
// (P-24, finding G8): Ray heard v1 for certain; T1 retracted v1→v2 and
// T2 v2→v3, each delivered in its own session; then Alexa reports T1 not
// played, and after it T2. T1's report comes while T2 still counts as
// delivered, so it cannot roll back then — but it is remembered: T2's
// rollback to v2 goes on past v2, whose only delivery was not played, to
// v1. The next retraction then says "I told you: v1 … I may also have told
// you: v2 and v3", never v2 as told for certain and never without v1.
// Three in a row chain alike, on another instance too. Twins: T2 played
// (only T1 reported) leaves v3 heard for certain; a later delivery of v2
// itself, played, stops the chain at v2.
func UnplayedRetractionsReportedInTheirOwnOrderRollBackToWhatHeLastHeardForCertain(t *testing.T, newDB NewDB) {
	at := t10
	for _, tt := range []struct {
		name  string
		steps func(t *testing.T, open func() Ledger)
		want  models.HeardState
	}{
		{"T1's report, then T2's: back to v1", func(t *testing.T, open func() Ledger) {
			l := open()
			retract(t, l, 2)
			retract(t, l, 3)
			report(t, l, "t1", at, false, 1, 1, 2)
			report(t, open(), "t2", at, false, 2, 2, 3)
		}, models.HeardState{Heard: 1, Offered: []int{2, 3}}},
		{"three in their order: back to v1", func(t *testing.T, open func() Ledger) {
			l := open()
			retract(t, l, 2)
			retract(t, l, 3)
			retract(t, l, 4)
			report(t, l, "t1", at, false, 1, 1, 2)
			report(t, l, "t2", at, false, 2, 2, 3)
			report(t, open(), "t3", at, false, 3, 3, 4)
		}, models.HeardState{Heard: 1, Offered: []int{2, 3, 4}}},
		{"twin: the reverse order: back to v1", func(t *testing.T, open func() Ledger) {
			l := open()
			retract(t, l, 2)
			retract(t, l, 3)
			report(t, l, "t2", at, false, 2, 2, 3)
			report(t, l, "t1", at, false, 1, 1, 2)
		}, models.HeardState{Heard: 1, Offered: []int{2, 3}}},
		{"twin: T2 played (only T1 reported): v3 heard for certain", func(t *testing.T, open func() Ledger) {
			l := open()
			retract(t, l, 2)
			retract(t, l, 3)
			report(t, l, "t1", at, false, 1, 1, 2)
		}, models.HeardState{Heard: 3}},
		{"twin: v2 delivered again since, played: T2's report stops at v2", func(t *testing.T, open func() Ledger) {
			l := open()
			retract(t, l, 2)
			retract(t, l, 3)
			report(t, l, "t1", at, false, 1, 1, 2)
			markHeard(t, l, 2) // a response that read v2 before v3, delivered late, played
			retract(t, l, 3)
			report(t, l, "t2", at, false, 2, 2, 3)
		}, models.HeardState{Heard: 2, Offered: []int{3}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			open := newDB(t)
			l := open()
			markHeard(t, l, 1)
			tt.steps(t, open)
			if hs := heardState(t, open()); !hs.Equal(tt.want) {
				t.Errorf("heard state %+v, want %+v", hs, tt.want)
			}
		})
	}
}

// EveryWordingOfSeveralUnplayedRetractionsInARowStaysWithdrawn (P-24,
// finding G5): Ray heard v1; each of v2, v3 and v4 is retracted in a
// response that is delivered and then reported not played. Each
// retraction withdrew every wording before it ("I may also have told
// you: …"), and its delivery cleared those offers; its rollback puts them
// back with its own version, so after the third he may have heard v2, v3
// and v4, all withdrawn by the next retraction — not v4 alone. On another
// instance too. Twin: the last delivery played (no report) leaves v4
// heard for certain and nothing in doubt.
func EveryWordingOfSeveralUnplayedRetractionsInARowStaysWithdrawn(t *testing.T, newDB NewDB) {
	for _, tt := range []struct {
		name       string
		lastReport bool
		want       models.HeardState
		pending    []Span
	}{
		{"every delivery reported not played: v2, v3 and v4 in doubt", true, models.HeardState{Heard: 1, Offered: []int{2, 3, 4}}, []Span{{1, 4}}},
		{"twin: the last delivery played: v4 heard", false, models.HeardState{Heard: 4}, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			open := newDB(t)
			l := open()
			markHeard(t, l, 1)
			for v := 2; v <= 4; v++ {
				retract(t, l, v)
				if v < 4 || tt.lastReport {
					report(t, open(), "r"+string(rune('0'+v)), t10, false, 1, 1, v)
				}
				if want := (models.HeardState{Heard: 1, Offered: offeredUpTo(v)}); v < 4 && !heardState(t, l).Equal(want) {
					t.Fatalf("after v%d's report heard state %+v, want %+v", v, heardState(t, l), want)
				}
			}
			if hs := heardState(t, open()); !hs.Equal(tt.want) {
				t.Errorf("heard state %+v, want %+v", hs, tt.want)
			}
			if got := pendingSpans(t, l, "ray"); !slices.Equal(got, tt.pending) {
				t.Errorf("pending = %v, want %v", got, tt.pending)
			}
		})
	}
}

// TheTimelineNeverShowsAsHeardAVersionWhoseDeliveriesWereAllReportedNotPlayed
// (breakit8, the clinician's side of G5): v2 and then v3 are each
// retracted, delivered and reported not played. The clinician's timeline
// shows v2 as unconfirmed — sent, not known heard, withdrawn by the next
// retraction — never as heard at the second turn, and v3 as owed. Twin:
// with no reports both are heard, v2 withdrawn by v3.
func TheTimelineNeverShowsAsHeardAVersionWhoseDeliveriesWereAllReportedNotPlayed(t *testing.T, newDB NewDB) {
	for _, tt := range []struct {
		name    string
		reports bool
		want    []models.DeliveryState
	}{
		{"both reported not played", true, []models.DeliveryState{models.StateHeard, models.StateUnconfirmed, models.StatePending}},
		{"twin: both played", false, []models.DeliveryState{models.StateHeard, models.StateHeard, models.StateHeard}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			l := newDB(t)()
			markHeard(t, l, 1)
			for v := 2; v <= 3; v++ {
				retract(t, l, v)
				if tt.reports {
					report(t, l, "r"+string(rune('0'+v)), t10, false, 1, 1, v)
				}
			}
			tl := models.Timeline(3, delivery(t, l))
			var got []models.DeliveryState
			for _, d := range tl {
				got = append(got, d.State)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("timeline states %v, want %v", got, tt.want)
			}
			if tt.reports && tl[1].At.IsZero() {
				t.Errorf("the unconfirmed version carries no time it was sent")
			}
			if !tt.reports && tl[1].WithdrawnAt.IsZero() {
				t.Errorf("v2, heard, is not shown withdrawn by v3")
			}
		})
	}
	t.Run("a retraction said again after a not-played report is shown heard when it was heard", func(t *testing.T) {
		l := newDB(t)()
		ctx := context.Background()
		markHeard(t, l, 1)
		observe(t, l, 2, false)
		offered(t, l, 2)
		if err := l.MarkHeard(ctx, "ray", WB, 2, models.Hearing{At: at(1)}); err != nil {
			t.Fatal(err)
		}
		report(t, l, "r1", at(2), false, 1, 1, 2)
		offered(t, l, 2)
		if err := l.MarkHeard(ctx, "ray", WB, 2, models.Hearing{At: at(5)}); err != nil {
			t.Fatal(err)
		}
		if tl := models.Timeline(2, delivery(t, l)); tl[1].State != models.StateHeard || !tl[1].At.Equal(at(5)) {
			t.Errorf("v2 after its second delivery: %+v, want heard at %v (the first delivery was not played)", tl[1], at(5))
		}
	})
}

// offeredUpTo is v2 … v.
func offeredUpTo(v int) []int {
	var out []int
	for i := 2; i <= v; i++ {
		out = append(out, i)
	}
	return out
}

// AConfirmationIsWrittenOnce: a plain telling of the version he heard
// writes to the ledger only while an earlier response's report could
// still re-open it (finding B1), once; every telling after that writes
// nothing (the Launch path's cost, issue 17). Twin: a telling right after
// a marking writes.
func AConfirmationIsWrittenOnce(t *testing.T, newDB NewDB) {
	l := newDB(t)()
	ctx := context.Background()
	markHeard(t, l, 1)
	observe(t, l, 2, false)
	markHeard(t, l, 2)
	writes := 0
	l.OnWrite(func() { writes++ })
	defer l.OnWrite(nil)
	for i, want := range []bool{true, false, false} {
		changed, err := l.MarkTold(ctx, "ray", WB, 2, models.Hearing{})
		if err != nil || changed != want {
			t.Errorf("telling %d: MarkTold = %v, %v; want %v", i+1, changed, err, want)
		}
	}
	if writes != 1 {
		t.Errorf("%d ledger writes for three tellings, want 1 (the first)", writes)
	}
	if h := heard(t, l); h != 2 {
		t.Errorf("heard %d, want 2", h)
	}
}

// ADoubleFailureInEitherOrderLeavesTheRetractionOwed: P-24, losing a
// retraction is worse than repeating one. S1's announcement of v2 is
// marked heard; S2 tells v2 plainly, written in full, which confirms it
// (MarkTold: S1's report no longer re-opens it, finding B1) — and then
// Alexa reports S2 not played as well. Whichever report arrives first,
// the announcement ends owed again, said saying so: S1's report refused
// by the confirmation is remembered and done when S2's report undoes it;
// S2's first makes v2 reopenable again for S1's. S1 here is a first
// hearing: a plain telling confirms only that (it says all a first
// hearing says); a retraction's report is never held back by one, in any
// order (finding U2, ARetractionToldOnlyPlainlySinceIsOwedAgainWhenReportedNotPlayed).
// Twins: S2 played (no report of it) keeps B1's rule; no later telling
// re-opens at S1's report as before; a change of the heard version
// forgets a refused rollback; a report of a telling that confirmed
// nothing re-opens nothing. S2's report may overtake S2's own marking (a
// turn that owes nothing runs without the patient's turn lock, or on
// another instance): it then voids the next confirmation in advance.
func ADoubleFailureInEitherOrderLeavesTheRetractionOwed(t *testing.T, newDB NewDB) {
	ctx := context.Background()
	s1 := func(t *testing.T, l Ledger) {
		observe(t, l, 2, false) // a first hearing of v2
		markHeard(t, l, 2)      // S1's first hearing, written in full
	}
	for _, tt := range []struct {
		name     string
		steps    func(t *testing.T, open func() Ledger) []int // re-opened per report
		reopened []int
		want     []Span
		offered  int
		heard    int
	}{
		{"S1's report, then S2's: owed again", func(t *testing.T, open func() Ledger) []int {
			l := open()
			s1(t, l)
			markTold(t, l, 2) // S2 told v2 plainly, written in full
			return []int{notPlayed(t, l, 0, 0, 2), notPlayedConfirmed(t, l, 2)}
		}, []int{0, 1}, []Span{{0, 2}}, 2, 0},
		{"S2's report, then S1's: owed again", func(t *testing.T, open func() Ledger) []int {
			l := open()
			s1(t, l)
			markTold(t, l, 2)
			return []int{notPlayedConfirmed(t, l, 2), notPlayed(t, l, 0, 0, 2)}
		}, []int{0, 1}, []Span{{0, 2}}, 2, 0},
		{"S1's refused report survives a restart: S2's report on another instance re-opens", func(t *testing.T, open func() Ledger) []int {
			l := open()
			s1(t, l)
			markTold(t, l, 2)
			n := notPlayed(t, l, 0, 0, 2)
			return []int{n, notPlayedConfirmed(t, open(), 2)}
		}, []int{0, 1}, []Span{{0, 2}}, 2, 0},
		{"S2's report, then a later telling confirms again: S1's report refused", func(t *testing.T, open func() Ledger) []int {
			l := open()
			s1(t, l)
			markTold(t, l, 2)
			n := notPlayedConfirmed(t, l, 2)
			markTold(t, l, 2) // S3 told v2, written in full, played
			return []int{n, notPlayed(t, l, 0, 0, 2)}
		}, []int{0, 0}, nil, 0, 2},
		{"S2's report before its confirmation was recorded, then S1's: owed again", func(t *testing.T, open func() Ledger) []int {
			l := open()
			s1(t, l)
			n := notPlayedConfirmed(t, l, 2) // Alexa's report overtook S2's marking
			markTold(t, l, 2)                // S2's marking: the confirmation it undid in advance
			return []int{n, notPlayed(t, l, 0, 0, 2)}
		}, []int{0, 1}, []Span{{0, 2}}, 2, 0},
		{"twin: after that, a later telling confirms: S1's report refused", func(t *testing.T, open func() Ledger) []int {
			l := open()
			s1(t, l)
			n := notPlayedConfirmed(t, l, 2)
			markTold(t, l, 2) // S2's, undone in advance
			markTold(t, l, 2) // S3 told v2, written in full, played
			return []int{n, notPlayed(t, l, 0, 0, 2)}
		}, []int{0, 0}, nil, 0, 2},
		{"twin: S2 played (no report of it): S1's report does not roll back", func(t *testing.T, open func() Ledger) []int {
			l := open()
			s1(t, l)
			markTold(t, l, 2)
			return []int{notPlayed(t, l, 0, 0, 2)}
		}, []int{0}, nil, 0, 2},
		{"twin: no later telling: S1's report rolls back", func(t *testing.T, open func() Ledger) []int {
			l := open()
			s1(t, l)
			return []int{notPlayed(t, l, 0, 0, 2)}
		}, []int{1}, []Span{{0, 2}}, 2, 0},
		{"twin: a change of the heard version forgets the refused rollback", func(t *testing.T, open func() Ledger) []int {
			l := open()
			s1(t, l)
			markTold(t, l, 2)
			n := notPlayed(t, l, 0, 0, 2)
			observe(t, l, 3, false)
			markHeard(t, l, 3) // v2→v3's retraction, delivered
			return []int{n, notPlayedConfirmed(t, l, 2)}
		}, []int{0, 0}, nil, 0, 3},
		{"twin: a report of a telling that confirmed nothing re-opens nothing", func(t *testing.T, open func() Ledger) []int {
			l := open()
			s1(t, l)
			return []int{notPlayedConfirmed(t, l, 2)}
		}, []int{0}, nil, 0, 2},
	} {
		t.Run(tt.name, func(t *testing.T) {
			open := newDB(t)
			if got := tt.steps(t, open); !slices.Equal(got, tt.reopened) {
				t.Errorf("re-opened per report %v, want %v", got, tt.reopened)
			}
			l := open()
			rows, err := l.Pending(ctx, "ray")
			if err != nil {
				t.Fatal(err)
			}
			var got []Span
			for _, r := range rows {
				got = append(got, Span{r.From, r.To})
				if !r.Offered {
					t.Errorf("pending %+v not said again", r)
				}
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("pending = %v, want %v", got, tt.want)
			}
			if hs, _ := l.HeardState(ctx, "ray", WB); hs.Heard != tt.heard || !slices.Equal(hs.Offered, offeredList(tt.offered)) {
				t.Errorf("heard %d offered %v, want %d and %d", hs.Heard, hs.Offered, tt.heard, tt.offered)
			}
		})
	}
}

// ARepeatedReportOfAResponseChangesNothingALaterDeliveryConfirmed: P-24,
// finding F14. Alexa may deliver one response's not-played report twice
// (a retry, a late resend), carrying the same marks and the same response
// id. The first re-opens; the repeat re-opens nothing the first handled
// and never undoes a delivery or a confirmation made after the first —
// on any instance, for a day (models.NotPlayedMemory; later, a repeat is
// applied again: the retraction once more, never lost). Twins: another
// response's first report still re-opens, B1's double failure keeps
// working with ids, and marks without an id (an older build's) are
// applied every time, as before.
func ARepeatedReportOfAResponseChangesNothingALaterDeliveryConfirmed(t *testing.T, newDB NewDB) {
	ctx := context.Background()
	s1 := func(t *testing.T, l Ledger) {
		markHeard(t, l, 1)
		observe(t, l, 2, false)
		markHeard(t, l, 2) // S1's retraction, written in full
	}
	const r1, r3, r4 = "r1", "r3", "r4"
	for _, tt := range []struct {
		name     string
		steps    func(t *testing.T, open func() Ledger) []int // re-opened per report
		reopened []int
		want     []Span
		offered  int
		heard    int
	}{
		{"a repeat after the retraction was said again and delivered re-opens nothing", func(t *testing.T, open func() Ledger) []int {
			l := open()
			s1(t, l)
			n := report(t, l, r1, at(1), false, 1, 1, 2)
			markHeard(t, l, 2) // S3 said it again, written in full
			return []int{n, report(t, l, r1, at(2), false, 1, 1, 2)}
		}, []int{1, 0}, nil, 0, 2},
		{"twin: the later delivery's own first report re-opens", func(t *testing.T, open func() Ledger) []int {
			l := open()
			s1(t, l)
			n := report(t, l, r1, at(1), false, 1, 1, 2)
			markHeard(t, l, 2)
			return []int{n, report(t, l, r3, at(2), false, 1, 1, 2)}
		}, []int{1, 1}, []Span{{1, 2}}, 2, 1},
		{"a repeat on another instance after a restart re-opens nothing", func(t *testing.T, open func() Ledger) []int {
			l := open()
			s1(t, l)
			n := report(t, l, r1, at(1), false, 1, 1, 2)
			markHeard(t, l, 2)
			return []int{n, report(t, open(), r1, at(2), false, 1, 1, 2)}
		}, []int{1, 0}, nil, 0, 2},
		{"a repeat after a later telling confirmed the version is not held back: that telling's report re-opens nothing", func(t *testing.T, open func() Ledger) []int {
			l := open()
			s1(t, l)
			n := report(t, l, r1, at(1), false, 1, 1, 2)
			markHeard(t, l, 2) // S3 said it again, played
			markTold(t, l, 2)  // S4 told v2, confirming it
			return []int{n, report(t, l, r1, at(2), false, 1, 1, 2), report(t, l, r4, at(3), true, 0, 0, 2)}
		}, []int{1, 0, 0}, nil, 0, 2},
		{"twin: the re-delivery's first report re-opens though a telling followed it (U2), and the telling's report then changes nothing", func(t *testing.T, open func() Ledger) []int {
			l := open()
			s1(t, l)
			n := report(t, l, r1, at(1), false, 1, 1, 2)
			markHeard(t, l, 2)
			markTold(t, l, 2)
			return []int{n, report(t, l, r3, at(2), false, 1, 1, 2), report(t, l, r4, at(3), true, 0, 0, 2)}
		}, []int{1, 1, 0}, []Span{{1, 2}}, 2, 1},
		{"a repeated report of a telling does not void a later telling's confirmation", func(t *testing.T, open func() Ledger) []int {
			l := open()
			observe(t, l, 2, false)
			markHeard(t, l, 2) // S1's first hearing of v2 (a retraction's report is never held back by a telling: U2)
			markTold(t, l, 2)  // S2 told v2, confirming it
			n := report(t, l, "r2", at(1), true, 0, 0, 2)
			m := report(t, l, "r2", at(2), true, 0, 0, 2) // the same report again
			markTold(t, l, 2)                             // S3 told v2, played: confirms it
			return []int{n, m, report(t, l, r1, at(3), false, 0, 0, 2)}
		}, []int{0, 0, 0}, nil, 0, 2},
		{"twin: a telling's report that overtook its marking voids that confirmation: S1's report re-opens", func(t *testing.T, open func() Ledger) []int {
			l := open()
			observe(t, l, 2, false)
			markHeard(t, l, 2)                            // S1's first hearing of v2
			n := report(t, l, "r2", at(1), true, 0, 0, 2) // before S2's marking
			markTold(t, l, 2)                             // S2's marking, undone in advance
			return []int{n, report(t, l, r1, at(3), false, 0, 0, 2)}
		}, []int{0, 1}, []Span{{0, 2}}, 2, 0},
		{"marks without a response id (an older build's) are applied every time", func(t *testing.T, open func() Ledger) []int {
			l := open()
			s1(t, l)
			n := report(t, l, "", at(1), false, 1, 1, 2)
			markHeard(t, l, 2)
			return []int{n, report(t, l, "", at(2), false, 1, 1, 2)}
		}, []int{1, 1}, []Span{{1, 2}}, 2, 1},
		{"a repeat within a day re-opens nothing", func(t *testing.T, open func() Ledger) []int {
			l := open()
			s1(t, l)
			n := report(t, l, r1, at(1), false, 1, 1, 2)
			markHeard(t, l, 2)
			return []int{n, report(t, l, r1, at(1).Add(models.NotPlayedMemory-time.Minute), false, 1, 1, 2)}
		}, []int{1, 0}, nil, 0, 2},
		{"twin: a repeat more than a day later is applied again (the safe direction)", func(t *testing.T, open func() Ledger) []int {
			l := open()
			s1(t, l)
			n := report(t, l, r1, at(1), false, 1, 1, 2)
			markHeard(t, l, 2)
			return []int{n, report(t, l, r1, at(1).Add(models.NotPlayedMemory+time.Minute), false, 1, 1, 2)}
		}, []int{1, 1}, []Span{{1, 2}}, 2, 1},
		{"a response's id is its patient's: another patient's report with that id still re-opens his", func(t *testing.T, open func() Ledger) []int {
			l := open()
			s1(t, l)
			bob := "care://bob/weight_bearing"
			if err := l.MarkHeard(ctx, "bob", bob, 1, models.Hearing{}); err != nil {
				t.Fatal(err)
			}
			if _, err := l.NotPlayed(ctx, "bob", []models.LedgerMark{{URI: bob, Version: 1, Response: r1}}, at(1)); err != nil {
				t.Fatal(err)
			}
			return []int{report(t, l, r1, at(2), false, 1, 1, 2)}
		}, []int{1}, []Span{{1, 2}}, 2, 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			open := newDB(t)
			if got := tt.steps(t, open); !slices.Equal(got, tt.reopened) {
				t.Errorf("re-opened per report %v, want %v", got, tt.reopened)
			}
			l := open()
			if got := pendingSpans(t, l, "ray"); !slices.Equal(got, tt.want) {
				t.Errorf("pending = %v, want %v", got, tt.want)
			}
			if hs, _ := l.HeardState(ctx, "ray", WB); hs.Heard != tt.heard || hs.LastOffered() != tt.offered {
				t.Errorf("heard %d offered %d, want %d and %d", hs.Heard, hs.LastOffered(), tt.heard, tt.offered)
			}
		})
	}
}

// ARevisionBetweenNotPlayedReportsStillRollsBackToWhatHeLastHeardForCertain:
// P-24, finding T8. S1's announcement of v2 is marked heard and S2 tells
// v2 plainly, confirming it (B1); Alexa reports both not played — and a
// revision lands between the two reports. Whatever the revision did, the
// rollback the first report asked for is done by the second: what he
// heard for certain goes back to what it was before S1 (here nothing: S1
// is a first hearing, the one kind of response whose report a plain
// telling holds back — a retraction's is done at once, finding U2, and
// ARetractionToldOnlyPlainlySinceIsOwedAgainWhenReportedNotPlayed holds
// its revision cases) and the owed announcement withdraws v2's words as
// words he may have heard. A revision whose words are those he heard
// (the ledger settles: heard moves to it, Observe or Drop) is no delivery:
// it carries the delivered version's standing — its confirmation and the
// rollback held back — and a report of the version it settled from still
// rolls back past it, also with no later telling (a single report).
// Twins: a delivery of a newer version after the revision, or S2 played
// (no report of it), still make the reports roll nothing back (B1).
func ARevisionBetweenNotPlayedReportsStillRollsBackToWhatHeLastHeardForCertain(t *testing.T, newDB NewDB) {
	s1s2 := func(t *testing.T, l Ledger) {
		observe(t, l, 2, false) // a first hearing of v2
		offered(t, l, 2)
		markHeard(t, l, 2) // S1's first hearing, written in full
		markTold(t, l, 2)  // S2 told v2 plainly, written in full
	}
	for _, tt := range []struct {
		name     string
		steps    func(t *testing.T, open func() Ledger) []int // re-opened per report
		reopened []int
		want     []Span
		offered  []int
		heard    int
	}{
		{"a revision with new words between S1's report and S2's: owed again, nothing heard for certain", func(t *testing.T, open func() Ledger) []int {
			l := open()
			s1s2(t, l)
			n := notPlayed(t, l, 0, 0, 2)
			observe(t, l, 3, false) // v2→v3 queued
			return []int{n, notPlayedConfirmed(t, l, 2)}
		}, []int{0, 1}, []Span{{2, 3}}, []int{2}, 0},
		{"a revision with v2's words (settled) between S1's report and S2's: owed again, nothing heard for certain", func(t *testing.T, open func() Ledger) []int {
			l := open()
			s1s2(t, l)
			n := notPlayed(t, l, 0, 0, 2)
			observe(t, l, 3, true) // v3 says v2's words: heard settles on v3
			return []int{n, notPlayedConfirmed(t, l, 2)}
		}, []int{0, 1}, []Span{{0, 3}}, []int{2}, 0},
		{"the same with S2's report first: owed again, nothing heard for certain", func(t *testing.T, open func() Ledger) []int {
			l := open()
			s1s2(t, l)
			n := notPlayedConfirmed(t, l, 2)
			observe(t, l, 3, true)
			return []int{n, notPlayed(t, l, 0, 0, 2)}
		}, []int{0, 1}, []Span{{0, 3}}, []int{2}, 0},
		{"a revision with new words, then one back to v2's (dropped), between the reports: owed again, nothing heard for certain", func(t *testing.T, open func() Ledger) []int {
			l := open()
			s1s2(t, l)
			n := notPlayed(t, l, 0, 0, 2)
			observe(t, l, 3, false) // v2→v3 queued
			observe(t, l, 4, true)  // v4 says v2's words: v2→v3 dropped, heard settles on v4
			return []int{n, notPlayedConfirmed(t, l, 2)}
		}, []int{0, 1}, []Span{{0, 4}}, []int{2}, 0},
		{"a revision found to say v2's words when spoken (Drop) between the reports: owed again, nothing heard for certain", func(t *testing.T, open func() Ledger) []int {
			l := open()
			s1s2(t, l)
			n := notPlayed(t, l, 0, 0, 2)
			observe(t, l, 3, false) // v2→v3 queued, then found unchanged
			rows, err := l.Pending(context.Background(), "ray")
			if err != nil || len(rows) != 1 {
				t.Fatalf("pending = %v, %v", rows, err)
			}
			if err := l.Drop(context.Background(), rows[0].ID, time.Time{}); err != nil {
				t.Fatal(err)
			}
			return []int{n, notPlayedConfirmed(t, l, 2)}
		}, []int{0, 1}, []Span{{0, 3}}, []int{2}, 0},
		{"a settled revision, then one with new words, between the reports: owed from v3, nothing told", func(t *testing.T, open func() Ledger) []int {
			l := open()
			s1s2(t, l)
			n := notPlayed(t, l, 0, 0, 2)
			observe(t, l, 3, true)
			observe(t, l, 4, false) // v3→v4 queued
			return []int{n, notPlayedConfirmed(t, l, 2)}
		}, []int{0, 1}, []Span{{3, 4}}, []int{2}, 0},
		{"the held-back rollback survives a restart: S2's report on another instance rolls back", func(t *testing.T, open func() Ledger) []int {
			l := open()
			s1s2(t, l)
			n := notPlayed(t, l, 0, 0, 2)
			observe(t, l, 3, true)
			return []int{n, notPlayedConfirmed(t, open(), 2)}
		}, []int{0, 1}, []Span{{0, 3}}, []int{2}, 0},
		{"a single report after a settled revision (no later telling): owed again, nothing heard for certain", func(t *testing.T, open func() Ledger) []int {
			l := open()
			observe(t, l, 2, false) // a first hearing of v2
			offered(t, l, 2)
			markHeard(t, l, 2)     // S1's first hearing, written in full
			observe(t, l, 3, true) // settled on v3
			return []int{notPlayed(t, l, 0, 0, 2)}
		}, []int{1}, []Span{{0, 3}}, []int{2}, 0},
		{"twin: a delivery of a newer version after the revision: the reports roll nothing back", func(t *testing.T, open func() Ledger) []int {
			l := open()
			s1s2(t, l)
			n := notPlayed(t, l, 0, 0, 2)
			observe(t, l, 3, true)
			observe(t, l, 4, false)
			offered(t, l, 4)
			markHeard(t, l, 4) // v3→v4's retraction, delivered
			return []int{n, notPlayedConfirmed(t, l, 2)}
		}, []int{0, 0}, nil, nil, 4},
		{"twin: S2 played (no report of it): S1's report after a settled revision rolls nothing back", func(t *testing.T, open func() Ledger) []int {
			l := open()
			s1s2(t, l)
			observe(t, l, 3, true)
			return []int{notPlayed(t, l, 0, 0, 2)}
		}, []int{0}, nil, nil, 3},
		{"twin: a telling of the settled version after the revision confirms it: S1's report rolls nothing back", func(t *testing.T, open func() Ledger) []int {
			l := open()
			observe(t, l, 2, false) // a first hearing of v2
			offered(t, l, 2)
			markHeard(t, l, 2)
			observe(t, l, 3, true)
			markTold(t, l, 3) // S3 told v3 (v2's words), played
			return []int{notPlayed(t, l, 0, 0, 2)}
		}, []int{0}, nil, nil, 3},
	} {
		t.Run(tt.name, func(t *testing.T) {
			open := newDB(t)
			if got := tt.steps(t, open); !slices.Equal(got, tt.reopened) {
				t.Errorf("re-opened per report %v, want %v", got, tt.reopened)
			}
			l := open()
			rows, err := l.Pending(context.Background(), "ray")
			if err != nil {
				t.Fatal(err)
			}
			var got []Span
			for _, r := range rows {
				got = append(got, Span{r.From, r.To})
				if !r.Offered {
					t.Errorf("pending %+v not said again", r)
				}
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("pending = %v, want %v", got, tt.want)
			}
			if hs := heardState(t, l); hs.Heard != tt.heard || !slices.Equal(hs.Offered, tt.offered) {
				t.Errorf("heard %d offered %v, want %d and %v", hs.Heard, hs.Offered, tt.heard, tt.offered)
			}
		})
	}
}

// ARetractionToldOnlyPlainlySinceIsOwedAgainWhenReportedNotPlayed: P-24,
// finding U2 (losing a retraction is worse than repeating one). S1's
// retraction v1→v2 is marked heard; then a later response (another Echo,
// or a new session) tells v2 plainly, written in full; then Alexa's late
// report says S1 was not played. The plain telling gave him v2's words,
// never that they withdraw v1's, so it is no delivery of the retraction:
// the report rolls back at once, and the ledger ends as if the telling
// had not been — heard v1 (what the retraction quotes as "I told you"),
// v2 offered, v1→v2 owed and said saying so — in either order of the two
// reports, after any number of such tellings, and across a revision that
// says v2's words (settled: owed v1→v3). So is a plain telling of new
// words (heard v1, told v2: it withdrew v1 without saying so). The chain
// T8's fixer found — S1's report, a new-words v3 queued, S3's retraction
// delivered and reported, then S2's report — ends with v1 still the words
// quoted as told. Twins: the retraction played (no report of it), or only
// the telling reported, owe nothing; a later retraction of a newer
// version delivered, or the retraction said again and delivered (a
// repeat of S1's report then changes nothing, F14), still settle it; a
// first hearing told plainly since is held back (B1: the telling says all
// a first hearing says).
func ARetractionToldOnlyPlainlySinceIsOwedAgainWhenReportedNotPlayed(t *testing.T, newDB NewDB) {
	ctx := context.Background()
	s1 := func(t *testing.T, l Ledger) {
		markHeard(t, l, 1)
		observe(t, l, 2, false)
		offered(t, l, 2)
		markHeard(t, l, 2) // S1's retraction v1→v2, written in full
	}
	const r1, r2, r3 = "r1", "r2", "r3"
	for _, tt := range []struct {
		name     string
		steps    func(t *testing.T, open func() Ledger) []int // re-opened per report
		reopened []int
		want     []Span
		offered  []int
		heard    int
	}{
		{"told plainly since, then S1's report: owed again from v1", func(t *testing.T, open func() Ledger) []int {
			l := open()
			s1(t, l)
			markTold(t, l, 2) // S2 told v2 plainly, written in full
			return []int{report(t, l, r1, at(1), false, 1, 1, 2)}
		}, []int{1}, []Span{{1, 2}}, []int{2}, 1},
		{"told plainly twice since: owed again from v1", func(t *testing.T, open func() Ledger) []int {
			l := open()
			s1(t, l)
			markTold(t, l, 2)
			markTold(t, l, 2)
			return []int{report(t, l, r1, at(1), false, 1, 1, 2)}
		}, []int{1}, []Span{{1, 2}}, []int{2}, 1},
		{"S1's report, then the telling's: owed once", func(t *testing.T, open func() Ledger) []int {
			l := open()
			s1(t, l)
			markTold(t, l, 2)
			return []int{report(t, l, r1, at(1), false, 1, 1, 2), report(t, l, r2, at(2), true, 0, 0, 2)}
		}, []int{1, 0}, []Span{{1, 2}}, []int{2}, 1},
		{"the telling's report, then S1's: owed once", func(t *testing.T, open func() Ledger) []int {
			l := open()
			s1(t, l)
			markTold(t, l, 2)
			return []int{report(t, l, r2, at(1), true, 0, 0, 2), report(t, l, r1, at(2), false, 1, 1, 2)}
		}, []int{0, 1}, []Span{{1, 2}}, []int{2}, 1},
		{"S1's report on another instance after a restart: owed again from v1", func(t *testing.T, open func() Ledger) []int {
			l := open()
			s1(t, l)
			markTold(t, l, 2)
			return []int{report(t, open(), r1, at(1), false, 1, 1, 2)}
		}, []int{1}, []Span{{1, 2}}, []int{2}, 1},
		{"told plainly, then a revision with v2's words (settled): owed from v1 to v3", func(t *testing.T, open func() Ledger) []int {
			l := open()
			s1(t, l)
			markTold(t, l, 2)
			observe(t, l, 3, true) // v3 says v2's words: heard settles on v3
			return []int{report(t, l, r1, at(1), false, 1, 1, 2)}
		}, []int{1}, []Span{{1, 3}}, []int{2}, 1},
		{"a revision with v2's words (settled), then v3 told plainly: owed from v1 to v3", func(t *testing.T, open func() Ledger) []int {
			l := open()
			s1(t, l)
			observe(t, l, 3, true)
			markTold(t, l, 3) // S2 told v3 (v2's words) plainly
			return []int{report(t, l, r1, at(1), false, 1, 1, 2)}
		}, []int{1}, []Span{{1, 3}}, []int{2}, 1},
		{"new words told plainly (no retraction pending), then told again: owed from v1", func(t *testing.T, open func() Ledger) []int {
			l := open()
			markHeard(t, l, 1)
			offeredTold(t, l, 2)
			markTold(t, l, 2) // S1 told v2 plainly
			markTold(t, l, 2) // S2 told v2 plainly
			return []int{report(t, l, r1, at(1), false, 1, 1, 2)}
		}, []int{1}, []Span{{1, 2}}, []int{2}, 1},
		{"T8's chain: S1's report, new words v3, S3's retraction delivered and reported, then S2's: v1 still quoted as told", func(t *testing.T, open func() Ledger) []int {
			l := open()
			s1(t, l)
			markTold(t, l, 2) // S2
			n1 := report(t, l, r1, at(1), false, 1, 1, 2)
			observeWords(t, l, 3, false, false) // v3, new words: the owed retraction now withdraws v2 (offered) too
			p := pendingSpans(t, l, "ray")
			if len(p) != 1 || p[0].To != 3 {
				t.Fatalf("pending after v3 = %v, want one reaching v3", p)
			}
			offered(t, l, 3)
			markHeard(t, l, 3) // S3's retraction, written in full
			n3 := report(t, l, r3, at(2), false, 1, p[0].From, 3)
			return []int{n1, n3, report(t, l, r2, at(3), true, 0, 0, 2)}
		}, []int{1, 1, 0}, []Span{{2, 3}}, []int{2, 3}, 1}, // v2→v3 with v1 heard: "I told you: v1 … I may also have told you: v2 and v3" (S3 withdrew v2 and was not played either: G5)
		{"twin: the retraction played (no report of it), told plainly since: nothing owed", func(t *testing.T, open func() Ledger) []int {
			l := open()
			s1(t, l)
			markTold(t, l, 2)
			return nil
		}, nil, nil, nil, 2},
		{"twin: only the telling reported not played (the retraction played): nothing owed", func(t *testing.T, open func() Ledger) []int {
			l := open()
			s1(t, l)
			markTold(t, l, 2)
			return []int{report(t, l, r2, at(1), true, 0, 0, 2)}
		}, []int{0}, nil, nil, 2},
		{"twin: a later retraction of a newer version, delivered: S1's report rolls nothing back", func(t *testing.T, open func() Ledger) []int {
			l := open()
			s1(t, l)
			markTold(t, l, 2)
			observe(t, l, 3, false) // v2→v3 queued
			offered(t, l, 3)
			markHeard(t, l, 3) // its retraction, delivered
			return []int{report(t, l, r1, at(1), false, 1, 1, 2)}
		}, []int{0}, nil, nil, 3},
		{"twin: the retraction said again and delivered, then told plainly: S1's repeated report changes nothing", func(t *testing.T, open func() Ledger) []int {
			l := open()
			s1(t, l)
			n := report(t, l, r1, at(1), false, 1, 1, 2)
			offered(t, l, 2)
			markHeard(t, l, 2) // S3 said the retraction again, written in full
			markTold(t, l, 2)  // S4 told v2 plainly
			return []int{n, report(t, l, r1, at(2), false, 1, 1, 2)}
		}, []int{1, 0}, nil, nil, 2},
		{"twin: a first hearing told plainly since: held back (B1)", func(t *testing.T, open func() Ledger) []int {
			l := open()
			observe(t, l, 2, false) // a first hearing of v2
			offered(t, l, 2)
			markHeard(t, l, 2)
			markTold(t, l, 2)
			return []int{report(t, l, r1, at(1), false, 0, 0, 2)}
		}, []int{0}, nil, nil, 2},
	} {
		t.Run(tt.name, func(t *testing.T) {
			open := newDB(t)
			if got := tt.steps(t, open); !slices.Equal(got, tt.reopened) {
				t.Errorf("re-opened per report %v, want %v", got, tt.reopened)
			}
			l := open()
			rows, err := l.Pending(ctx, "ray")
			if err != nil {
				t.Fatal(err)
			}
			var got []Span
			for _, r := range rows {
				got = append(got, Span{r.From, r.To})
				if !r.Offered {
					t.Errorf("pending %+v not said again", r)
				}
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("pending = %v, want %v", got, tt.want)
			}
			if hs := heardState(t, l); hs.Heard != tt.heard || !slices.Equal(hs.Offered, tt.offered) {
				t.Errorf("heard %d offered %v, want %d and %v", hs.Heard, hs.Offered, tt.heard, tt.offered)
			}
		})
	}
}

// DropSettlesAPendingAnnouncementOnce: an announcement whose words did not
// change is dropped, heard moves to its end and the log says unchanged;
// dropping it again, or an unknown id, changes nothing.
func DropSettlesAPendingAnnouncementOnce(t *testing.T, newDB NewDB) {
	l := newDB(t)()
	ctx := context.Background()
	markHeard(t, l, 1)
	observe(t, l, 3, false)
	rows, err := l.Pending(ctx, "ray")
	if err != nil || len(rows) != 1 {
		t.Fatalf("pending = %+v, %v", rows, err)
	}
	if err := l.Drop(ctx, rows[0].ID, at(5)); err != nil {
		t.Fatal(err)
	}
	if got := pendingSpans(t, l, "ray"); got != nil || heard(t, l) != 3 {
		t.Fatalf("after Drop pending %v, heard %d; want none and 3", got, heard(t, l))
	}
	rec := delivery(t, l)
	last := rec.Events[len(rec.Events)-1]
	if last.Kind != models.DeliveryUnchanged || last.Version != 3 || !last.At.Equal(at(5)) {
		t.Fatalf("the log ends %+v, want v3 unchanged at 10:05", last)
	}
	before := len(rec.Events)
	for _, id := range []int64{rows[0].ID, rows[0].ID + 1000} {
		if err := l.Drop(ctx, id, at(6)); err != nil {
			t.Fatal(err)
		}
	}
	if got := len(delivery(t, l).Events); got != before || heard(t, l) != 3 {
		t.Fatalf("a second Drop logged %d events (had %d), heard %d", got, before, heard(t, l))
	}
}

// FollowRecordsTheBaselineOnce: a patient's starting point is recorded
// once and never moved; facts at or below it are not announced, a later
// revision is.
func FollowRecordsTheBaselineOnce(t *testing.T, newDB NewDB) {
	l := newDB(t)()
	ctx := context.Background()
	if f, err := l.Followed(ctx, []string{"ray", "bob"}); err != nil || len(f) != 0 {
		t.Fatalf("followed before = %v, %v", f, err)
	}
	if err := l.Follow(ctx, "ray", map[string]int{WB: 2}); err != nil {
		t.Fatal(err)
	}
	if err := l.Follow(ctx, "ray", map[string]int{WB: 5}); err != nil { // never moves
		t.Fatal(err)
	}
	if f, err := l.Followed(ctx, []string{"ray", "bob"}); err != nil || !f["ray"] || f["bob"] {
		t.Fatalf("followed = %v, %v; want ray only", f, err)
	}
	if f, err := l.Facts(ctx, "ray"); err != nil || !sameFact(f[WB], models.FactLedger{Baseline: 2}) {
		t.Fatalf("facts = %+v, %v; want baseline 2", f, err)
	}
	observe(t, l, 2, false)
	if got := pendingSpans(t, l, "ray"); got != nil {
		t.Fatalf("his starting point was announced: %v", got)
	}
	observe(t, l, 3, false)
	if got := pendingSpans(t, l, "ray"); !slices.Equal(got, []Span{{0, 3}}) {
		t.Fatalf("after a revision pending = %v, want a first hearing of v3", got)
	}
	if rec := delivery(t, l); rec.Baseline != 2 {
		t.Fatalf("delivery baseline = %d, want 2", rec.Baseline)
	}
}

// DeliveryLogRecordsWhenAndHowEachVersionReachedRay: the clinician's
// story — v1 heard on the Echo Show at 10:00; v2 written, queued at 10:12,
// a notification at 10:14, offered and heard by the open card at 10:16.
// The delivery log keeps each step with its time and device, and Timeline
// reads it back as heard / withdrawn.
func DeliveryLogRecordsWhenAndHowEachVersionReachedRay(t *testing.T, newDB NewDB) {
	l := newDB(t)()
	ctx := context.Background()
	var writes atomic.Int64
	l.OnWrite(func() { writes.Add(1) })

	if err := l.MarkHeard(ctx, "ray", WB, 1, models.Hearing{At: at(0), Device: models.DeviceScreen, Via: models.ViaAsked}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Observe(ctx, "ray", WB, models.HeardState{Heard: 1}, 2, false, 0, at(12)); err != nil {
		t.Fatal(err)
	}
	rec := delivery(t, l)
	if rec.Pending == nil || rec.Pending.From != 1 || rec.Pending.To != 2 || rec.Pending.Offered {
		t.Fatalf("after the revision: pending = %+v", rec.Pending)
	}
	tl := models.Timeline(2, rec)
	if tl[0].State != models.StateHeard || tl[1].State != models.StatePending || !tl[1].QueuedAt.Equal(at(12)) || !tl[1].NotifiedAt.IsZero() {
		t.Fatalf("before the notification: %+v", tl)
	}

	if err := l.Notified(ctx, "ray", at(14)); err != nil {
		t.Fatal(err)
	}
	tl = models.Timeline(2, delivery(t, l))
	if tl[1].State != models.StatePending || !tl[1].NotifiedAt.Equal(at(14)) {
		t.Fatalf("after the notification: %+v", tl[1])
	}
	// A second notification keeps the first time.
	if err := l.Notified(ctx, "ray", at(15)); err != nil {
		t.Fatal(err)
	}
	if tl = models.Timeline(2, delivery(t, l)); !tl[1].NotifiedAt.Equal(at(14)) {
		t.Fatalf("a second notification moved the first: %+v", tl[1])
	}

	rows, err := l.Pending(ctx, "ray")
	if err != nil || len(rows) != 1 {
		t.Fatalf("pending rows %v, %v", rows, err)
	}
	if err := l.Offered(ctx, "ray", []models.LedgerOffer{{ID: rows[0].ID, URI: rows[0].URI, Version: rows[0].To}}, at(16)); err != nil {
		t.Fatal(err)
	}
	if tl = models.Timeline(2, delivery(t, l)); !tl[1].Offered || !tl[1].OfferedAt.Equal(at(16)) {
		t.Fatalf("offered, not yet confirmed: %+v", tl[1])
	}
	if err := l.MarkHeard(ctx, "ray", WB, 2, models.Hearing{At: at(16), Device: models.DeviceScreen, Via: models.ViaCard}); err != nil {
		t.Fatal(err)
	}
	rec = delivery(t, l)
	tl = models.Timeline(2, rec)
	if rec.Pending != nil || rec.Heard != 2 {
		t.Fatalf("after hearing: %+v", rec)
	}
	if tl[1].State != models.StateHeard || !tl[1].At.Equal(at(16)) || tl[1].Device != models.DeviceScreen || tl[1].Via != models.ViaCard {
		t.Fatalf("v2 = %+v, want heard at 10:16 on the Echo Show, unasked by the card", tl[1])
	}
	if tl[0].State != models.StateHeard || !tl[0].At.Equal(at(0)) || !tl[0].WithdrawnAt.Equal(at(16)) {
		t.Fatalf("v1 = %+v, want heard at 10:00, withdrawn at 10:16", tl[0])
	}
	// Hearing v2 again (a repeat) adds nothing.
	before := len(rec.Events)
	if err := l.MarkHeard(ctx, "ray", WB, 2, models.Hearing{At: at(20), Device: models.DeviceVoice}); err != nil {
		t.Fatal(err)
	}
	if rec = delivery(t, l); len(rec.Events) != before {
		t.Fatalf("a repeat was logged: %+v", rec.Events)
	}
	if writes.Load() == 0 {
		t.Error("OnWrite's function was never called")
	}
}

// DeliveryLogMarksUnchangedWordsAndKeepsFactsApart: unchanged words are
// logged unchanged; each fact's log, and each patient's, is its own.
func DeliveryLogMarksUnchangedWordsAndKeepsFactsApart(t *testing.T, newDB NewDB) {
	l := newDB(t)()
	ctx := context.Background()
	markHeard(t, l, 1)
	observe(t, l, 2, true) // the same words: nothing to say
	tl := models.Timeline(2, delivery(t, l))
	if tl[1].State != models.StateUnchanged {
		t.Fatalf("unchanged words: %+v", tl[1])
	}
	// Twin: changed words are pending, and another fact's log is its own.
	other := "care://ray/exercise"
	if _, err := l.Observe(ctx, "ray", other, models.HeardState{}, 1, false, 0, time.Time{}); err != nil {
		t.Fatal(err)
	}
	rec, err := l.Delivery(ctx, "ray", other)
	if err != nil {
		t.Fatal(err)
	}
	if tl := models.Timeline(1, rec); tl[0].State != models.StatePending || len(rec.Events) != 1 {
		t.Fatalf("the other fact: %+v, events %+v", tl, rec.Events)
	}
	if rec, _ := l.Delivery(ctx, "bob", WB); rec.Heard != 0 || len(rec.Events) != 0 || rec.Pending != nil {
		t.Fatalf("bob sees ray's log: %+v", rec)
	}
}

// DeliveryChangesFollowTheLogFromACursor: the log read from a cursor
// returns what grew after it, in order, and nothing from the latest.
func DeliveryChangesFollowTheLogFromACursor(t *testing.T, newDB NewDB) {
	l := newDB(t)()
	ctx := context.Background()
	cur, err := l.DeliveryCursor(ctx)
	if err != nil || cur != 0 {
		t.Fatalf("empty log cursor = %d, %v", cur, err)
	}
	markHeard(t, l, 1)
	from, _ := l.DeliveryCursor(ctx)
	observe(t, l, 2, false)
	if _, err := l.Observe(ctx, "ray", "care://ray/exercise", models.HeardState{}, 1, false, 0, time.Time{}); err != nil {
		t.Fatal(err)
	}
	got, err := l.DeliveryChanges(ctx, from, 10)
	if err != nil {
		t.Fatal(err)
	}
	var uris []string
	for _, c := range got {
		uris = append(uris, c.URI)
	}
	if !slices.Equal(uris, []string{WB, "care://ray/exercise"}) || got[0].ID <= from || got[1].ID <= got[0].ID {
		t.Fatalf("changes after %d = %+v", from, got)
	}
	if lim, err := l.DeliveryChanges(ctx, from, 1); err != nil || len(lim) != 1 || lim[0] != got[0] {
		t.Fatalf("changes after %d, limit 1 = %+v, %v", from, lim, err)
	}
	// Twin: from the latest cursor, nothing.
	last, _ := l.DeliveryCursor(ctx)
	if got, err := l.DeliveryChanges(ctx, last, 10); err != nil || len(got) != 0 {
		t.Fatalf("changes after the last = %+v, %v", got, err)
	}
}

// DeliveryChangesAreSharedAcrossInstances: a change one instance commits is
// seen by the other's DeliveryChanges (the clinician's session may be on
// either).
func DeliveryChangesAreSharedAcrossInstances(t *testing.T, newDB NewDB) {
	open := newDB(t)
	a, b := open(), open()
	ctx := context.Background()
	cur, err := b.DeliveryCursor(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.MarkHeard(ctx, "ray", WB, 1, models.Hearing{At: at(1), Device: models.DeviceVoice, Via: models.ViaAsked}); err != nil {
		t.Fatal(err)
	}
	got, err := b.DeliveryChanges(ctx, cur, 10)
	if err != nil || len(got) != 1 || got[0].URI != WB {
		t.Fatalf("instance b sees %+v, %v", got, err)
	}
	rec, err := b.Delivery(ctx, "ray", WB)
	if err != nil {
		t.Fatal(err)
	}
	if tl := models.Timeline(1, rec); tl[0].State != models.StateHeard || tl[0].Device != models.DeviceVoice || !tl[0].At.Equal(at(1)) {
		t.Fatalf("instance b reads %+v", tl)
	}
}
