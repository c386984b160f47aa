package ledgertest

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/unsay/unsay/models"
)

// The record of the responses written on each Alexa session (P-24,
// finding U8): OfferedResponse and SentResponses.

const session1, session2 = "amzn1.echo-api.session.s1", "amzn1.echo-api.session.s2"

// respID is the n-th response's id (32 hex digits, as the skill's).
func respID(n int) string { return fmt.Sprintf("%032x", n) }

// sentTold records, with an offer of v of WB told plainly (he has not
// heard it: the offer is written), response n on session as marking WB
// heard before → v, at when.
func sentTold(t *testing.T, l Ledger, patient, session string, n, before, v int, when time.Time, replaces string) {
	t.Helper()
	uri := "care://" + patient + "/weight_bearing"
	sent := models.LedgerSent{Session: session, Response: respID(n), At: when, Replaces: replaces,
		Marks: []models.LedgerMark{{URI: uri, HeardBefore: before, From: before, Version: v, Response: respID(n)}}}
	if err := l.OfferedResponse(context.Background(), patient, []models.LedgerOffer{{URI: uri, Version: v, Told: true}}, sent, when); err != nil {
		t.Fatal(err)
	}
}

// sentIDs are the response ids SentResponses gives for session at when,
// the last first.
func sentIDs(t *testing.T, l Ledger, patient, session string, when time.Time) []string {
	t.Helper()
	recs, err := l.SentResponses(context.Background(), patient, session, when)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range recs {
		out = append(out, r.Response)
	}
	return out
}

// AResponsesRecordIsReadOnAnotherInstanceWithItsMarks: the record written
// with a response's offers is read, marks and all, through another handle
// (another instance, or this one after a restart); a response whose offers
// write nothing (a fact told at the version he heard) is recorded only when
// it will confirm that version (the first telling after the marking: its
// report must undo the confirmation on any instance), else not — no
// transaction of its own.
func AResponsesRecordIsReadOnAnotherInstanceWithItsMarks(t *testing.T, newDB NewDB) {
	open := newDB(t)
	a, b := open(), open()
	ctx := context.Background()
	sentTold(t, a, "ray", session1, 1, 0, 2, at(0), "")
	recs, err := b.SentResponses(ctx, "ray", session1, at(1))
	if err != nil {
		t.Fatal(err)
	}
	want := []models.LedgerMark{{URI: WB, HeardBefore: 0, From: 0, Version: 2, Response: respID(1)}}
	if len(recs) != 1 || recs[0].Response != respID(1) || recs[0].Session != session1 || !slices.Equal(recs[0].Marks, want) || !recs[0].At.Equal(at(0)) {
		t.Fatalf("another instance reads %+v; want response 1 of session 1 at %v marking %+v", recs, at(0), want)
	}
	t.Run("confirmed marks keep their kind", func(t *testing.T) {
		sent := models.LedgerSent{Session: session2, Response: respID(2), At: at(2), Marks: []models.LedgerMark{
			{URI: WB, HeardBefore: 0, From: 0, Version: 3, Response: respID(2)},
			{URI: "care://ray/pain_plan", Version: 1, Confirmed: true, Response: respID(2)}}}
		if err := a.OfferedResponse(ctx, "ray", []models.LedgerOffer{{URI: WB, Version: 3, Told: true}}, sent, at(2)); err != nil {
			t.Fatal(err)
		}
		recs, err := b.SentResponses(ctx, "ray", session2, at(2))
		if err != nil || len(recs) != 1 || !slices.Equal(recs[0].Marks, sent.Marks) {
			t.Fatalf("read %+v, %v; want %+v", recs, err, sent.Marks)
		}
	})
	t.Run("kept apart per patient and session", func(t *testing.T) {
		if got := sentIDs(t, b, "bob", session1, at(1)); got != nil {
			t.Fatalf("bob's session 1 has %v", got)
		}
		if got := sentIDs(t, b, "ray", "amzn1.echo-api.session.other", at(1)); got != nil {
			t.Fatalf("another session has %v", got)
		}
	})
	t.Run("a telling that will confirm the version he heard is recorded though its offers write nothing", func(t *testing.T) {
		markTold(t, a, 3) // heard v3, not yet confirmed by a later telling
		tell := func(n int) models.LedgerSent {
			sent := models.LedgerSent{Session: "amzn1.echo-api.session.s3", Response: respID(n), At: at(n),
				Marks: []models.LedgerMark{{URI: WB, Version: 3, Confirmed: true, Response: respID(n)}}}
			if err := a.OfferedResponse(ctx, "ray", []models.LedgerOffer{{URI: WB, Version: 3, Told: true}}, sent, at(n)); err != nil {
				t.Fatal(err)
			}
			return sent
		}
		first := tell(3)
		if got := sentIDs(t, b, "ray", first.Session, at(3)); !slices.Equal(got, []string{respID(3)}) {
			t.Fatalf("the first telling after the marking: recorded %v; want it (its report undoes its confirmation)", got)
		}
		markTold(t, a, 3) // that telling delivered: the version is confirmed
		tell(4)
		if got := sentIDs(t, b, "ray", first.Session, at(4)); !slices.Equal(got, []string{respID(3)}) {
			t.Fatalf("twin: a telling of a version already confirmed, whose offers write nothing, was recorded: %v (no transaction of its own)", got)
		}
	})
}

// TheRecordKeepsTheLastTwoResponsesOfEachSession: a third response drops
// the first; an attempt overtaken before its write is replaced by the one
// built again (Replaces), never counted as a response of its own.
func TheRecordKeepsTheLastTwoResponsesOfEachSession(t *testing.T, newDB NewDB) {
	open := newDB(t)
	l := open()
	sentTold(t, l, "ray", session1, 1, 0, 1, at(0), "")
	sentTold(t, l, "ray", session1, 2, 0, 2, at(1), "")
	if got, want := sentIDs(t, open(), "ray", session1, at(1)), []string{respID(2), respID(1)}; !slices.Equal(got, want) {
		t.Fatalf("after two: %v; want %v (the last first)", got, want)
	}
	sentTold(t, l, "ray", session2, 9, 0, 3, at(2), "")
	sentTold(t, l, "ray", session1, 3, 0, 4, at(3), "")
	if got, want := sentIDs(t, open(), "ray", session1, at(3)), []string{respID(3), respID(2)}; !slices.Equal(got, want) {
		t.Fatalf("after three: %v; want %v", got, want)
	}
	if got, want := sentIDs(t, open(), "ray", session2, at(3)), []string{respID(9)}; !slices.Equal(got, want) {
		t.Fatalf("the other session: %v; want %v", got, want)
	}
	sentTold(t, l, "ray", session1, 4, 0, 5, at(4), respID(3))
	if got, want := sentIDs(t, open(), "ray", session1, at(4)), []string{respID(4), respID(2)}; !slices.Equal(got, want) {
		t.Fatalf("after an attempt built again: %v; want %v (the attempt replaced)", got, want)
	}
}

// TheRecordOfAResponseExpiresAfterADay: read within models.SentMemory of
// its write it is there; after, it is not, and the next write deletes it.
func TheRecordOfAResponseExpiresAfterADay(t *testing.T, newDB NewDB) {
	open := newDB(t)
	l := open()
	sentTold(t, l, "ray", session1, 1, 0, 1, at(0), "")
	if got := sentIDs(t, l, "ray", session1, at(0).Add(models.SentMemory-time.Minute)); !slices.Equal(got, []string{respID(1)}) {
		t.Fatalf("within a day: %v; want response 1", got)
	}
	if got := sentIDs(t, l, "ray", session1, at(0).Add(models.SentMemory+time.Minute)); got != nil {
		t.Fatalf("after a day: %v; want none", got)
	}
	sentTold(t, l, "ray", session2, 2, 0, 2, at(0).Add(models.SentMemory+time.Minute), "")
	if got := sentIDs(t, l, "ray", session1, at(0)); got != nil {
		t.Fatalf("a write a day later left the old record: %v", got)
	}
}
