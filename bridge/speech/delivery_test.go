package speech

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/unsay/unsay/models"
)

var t10 = time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)

func at(min int) time.Time { return t10.Add(time.Duration(min) * time.Minute) }

// The clinician's story: v1 heard on the Echo Show at 10:00; v2 written,
// queued, a notification at 10:14, offered and heard by the open card at
// 10:16. The delivery log keeps each step with its time and device, and
// Timeline reads it back as heard / withdrawn.
func TestLedger_DeliveryLogRecordsWhenAndHowEachVersionReachedRay(t *testing.T) {
	l := newTestLedger(t, tempDBPath(t))
	clock := t10
	l.now = func() time.Time { return clock }
	ctx := context.Background()
	var writes atomic.Int64
	fn := func() { writes.Add(1) }
	l.onWrite.Store(&fn)

	if err := l.MarkHeard(ctx, "ray", wb, 1, models.Hearing{At: at(0), Device: models.DeviceScreen, Via: models.ViaAsked}); err != nil {
		t.Fatal(err)
	}
	clock = at(12)
	observe(t, l, 2, false)
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
	clock = at(16)
	if err := l.Offered(ctx, "ray", []offer{{ID: rows[0].ID, URI: rows[0].URI, Version: rows[0].To}}); err != nil {
		t.Fatal(err)
	}
	if tl = models.Timeline(2, delivery(t, l)); !tl[1].Offered || !tl[1].OfferedAt.Equal(at(16)) {
		t.Fatalf("offered, not yet confirmed: %+v", tl[1])
	}
	if err := l.MarkHeard(ctx, "ray", wb, 2, models.Hearing{At: at(16), Device: models.DeviceScreen, Via: models.ViaCard}); err != nil {
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
	if err := l.MarkHeard(ctx, "ray", wb, 2, models.Hearing{At: at(20), Device: models.DeviceVoice}); err != nil {
		t.Fatal(err)
	}
	if rec = delivery(t, l); len(rec.Events) != before {
		t.Fatalf("a repeat was logged: %+v", rec.Events)
	}
	if writes.Load() == 0 {
		t.Error("onWrite was never called")
	}
}

func TestLedger_DeliveryLogMarksUnchangedWordsAndKeepsFactsApart(t *testing.T) {
	l := newTestLedger(t, tempDBPath(t))
	ctx := context.Background()
	markHeard(t, l, 1)
	observe(t, l, 2, true) // the same words: nothing to say
	tl := models.Timeline(2, delivery(t, l))
	if tl[1].State != models.StateUnchanged {
		t.Fatalf("unchanged words: %+v", tl[1])
	}
	// Twin: changed words are pending, and another fact's log is its own.
	other := "care://ray/exercise"
	if _, err := l.Observe(ctx, "ray", other, heardState{}, 1, false, false); err != nil {
		t.Fatal(err)
	}
	rec, err := l.Delivery(ctx, "ray", other)
	if err != nil {
		t.Fatal(err)
	}
	if tl := models.Timeline(1, rec); tl[0].State != models.StatePending || len(rec.Events) != 1 {
		t.Fatalf("the other fact: %+v, events %+v", tl, rec.Events)
	}
	if rec, _ := l.Delivery(ctx, "bob", wb); rec.Heard != 0 || len(rec.Events) != 0 || rec.Pending != nil {
		t.Fatalf("bob sees ray's log: %+v", rec)
	}
}

func TestLedger_DeliveryChangesFollowTheLogFromACursor(t *testing.T) {
	l := newTestLedger(t, tempDBPath(t))
	ctx := context.Background()
	cur, err := l.DeliveryCursor(ctx)
	if err != nil || cur != 0 {
		t.Fatalf("empty log cursor = %d, %v", cur, err)
	}
	markHeard(t, l, 1)
	from, _ := l.DeliveryCursor(ctx)
	observe(t, l, 2, false)
	if _, err := l.Observe(ctx, "ray", "care://ray/exercise", heardState{}, 1, false, false); err != nil {
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
	if !slices.Equal(uris, []string{wb, "care://ray/exercise"}) || got[0].ID <= from || got[1].ID <= got[0].ID {
		t.Fatalf("changes after %d = %+v", from, got)
	}
	// Twin: from the latest cursor, nothing.
	last, _ := l.DeliveryCursor(ctx)
	if got, err := l.DeliveryChanges(ctx, last, 10); err != nil || len(got) != 0 {
		t.Fatalf("changes after the last = %+v, %v", got, err)
	}
}

// The delivery log holds versions, times and device kinds — no text.
func TestLedger_DeliveryLogHoldsNoClinicalText(t *testing.T) {
	l := newTestLedger(t, tempDBPath(t))
	rows, err := l.db.Query("SELECT name FROM pragma_table_info('speech_delivery')")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var got []string
	for rows.Next() {
		var c string
		if err := rows.Scan(&c); err != nil {
			t.Fatal(err)
		}
		got = append(got, c)
	}
	if want := []string{"id", "patient", "uri", "version", "event", "at_ms", "device", "via"}; !slices.Equal(got, want) {
		t.Errorf("speech_delivery columns = %v, want %v", got, want)
	}
}

// Two instances on one Postgres database: a change one commits is seen by
// the other's DeliveryChanges (the clinician's session may be on either).
func TestLedger_PostgresDeliveryChangesAreSharedAcrossInstances(t *testing.T) {
	db, open := openPostgres(t)
	ctx := context.Background()
	a, err := newLedger(ctx, db, DialectPostgres)
	if err != nil {
		t.Fatal(err)
	}
	b, err := newLedger(ctx, open(), DialectPostgres)
	if err != nil {
		t.Fatal(err)
	}
	cur, err := b.DeliveryCursor(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.MarkHeard(ctx, "ray", wb, 1, models.Hearing{At: at(1), Device: models.DeviceVoice, Via: models.ViaAsked}); err != nil {
		t.Fatal(err)
	}
	got, err := b.DeliveryChanges(ctx, cur, 10)
	if err != nil || len(got) != 1 || got[0].URI != wb {
		t.Fatalf("instance b sees %+v, %v", got, err)
	}
	rec, err := b.Delivery(ctx, "ray", wb)
	if err != nil {
		t.Fatal(err)
	}
	if tl := models.Timeline(1, rec); tl[0].State != models.StateHeard || tl[0].Device != models.DeviceVoice || !tl[0].At.Equal(at(1)) {
		t.Fatalf("instance b reads %+v", tl)
	}
}

func delivery(t *testing.T, l *ledger) models.DeliveryRecord {
	t.Helper()
	rec, err := l.Delivery(context.Background(), "ray", wb)
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

// BenchmarkDeliveryTurn measures one revision's way through the ledger as
// the clinician's timeline records it — queued (Observe), heard
// (MarkHeard, with its delivery event) — then one Delivery read of the
// fact's whole log, as the timeline reads it on every update.
func BenchmarkDeliveryTurn(b *testing.B) {
	db := openDB(b, tempDBPath(b))
	b.Cleanup(func() { db.Close() })
	l, err := newLedger(context.Background(), db, DialectSQLite)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	how := models.Hearing{Device: models.DeviceScreen, Via: models.ViaAsked}
	if err := l.MarkHeard(ctx, "ray", wb, 1, how); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		v := i + 2
		if _, err := l.Observe(ctx, "ray", wb, heardState{Heard: v - 1}, v, false, false); err != nil {
			b.Fatal(err)
		}
		if err := l.MarkHeard(ctx, "ray", wb, v, how); err != nil {
			b.Fatal(err)
		}
		if _, err := l.Delivery(ctx, "ray", wb); err != nil {
			b.Fatal(err)
		}
	}
}
