package speech

import (
	"context"
	"testing"
)

// The in-memory view answers Pending from memory only until the next
// ledger write of this process: every Observe, MarkHeard, Offered and
// Drop is seen by the next Pending, in both directions (queued, heard,
// queued again, offered, dropped).
func TestLedgerView_PendingIsReadAgainAfterEveryWrite(t *testing.T) {
	ctx := context.Background()
	v := newLedgerView(newTestLedger(t, tempDBPath(t)), DialectSQLite)
	pending := func() []row {
		t.Helper()
		rows, err := v.Pending(ctx, "ray")
		if err != nil {
			t.Fatal(err)
		}
		return rows
	}
	if err := v.MarkHeard(ctx, "ray", wb, 1); err != nil {
		t.Fatal(err)
	}
	for range 2 { // the second answer comes from memory
		if rows := pending(); len(rows) != 0 {
			t.Fatalf("pending before any revision: %+v", rows)
		}
	}
	if _, err := v.Observe(ctx, "ray", wb, 1, 2, false); err != nil {
		t.Fatal(err)
	}
	rows := pending()
	if len(rows) != 1 || rows[0].From != 1 || rows[0].To != 2 || rows[0].Offered {
		t.Fatalf("after Observe(v2): %+v, want one pending 1 → 2", rows)
	}
	if err := v.Offered(ctx, []int64{rows[0].ID}); err != nil {
		t.Fatal(err)
	}
	if rows := pending(); len(rows) != 1 || !rows[0].Offered {
		t.Fatalf("after Offered: %+v, want it offered", rows)
	}
	if err := v.MarkHeard(ctx, "ray", wb, 2); err != nil {
		t.Fatal(err)
	}
	if rows := pending(); len(rows) != 0 {
		t.Fatalf("after MarkHeard(v2): %+v, want none", rows)
	}
	if _, err := v.Observe(ctx, "ray", wb, 2, 3, false); err != nil {
		t.Fatal(err)
	}
	rows = pending()
	if len(rows) != 1 || rows[0].From != 2 || rows[0].To != 3 {
		t.Fatalf("after Observe(v3): %+v, want one pending 2 → 3", rows)
	}
	if err := v.Drop(ctx, rows[0].ID); err != nil {
		t.Fatal(err)
	}
	if rows := pending(); len(rows) != 0 {
		t.Fatalf("after Drop: %+v, want none", rows)
	}
	// MarkHeard of a version he heard already is answered from memory and
	// changes nothing; of a newer one it reaches the ledger.
	if err := v.MarkHeard(ctx, "ray", wb, 2); err != nil {
		t.Fatal(err)
	}
	if h, err := v.Heard(ctx, "ray", wb); err != nil || h != 3 {
		t.Fatalf("heard = %d, %v; want 3 (Drop moved it)", h, err)
	}
	if err := v.MarkHeard(ctx, "ray", wb, 4); err != nil {
		t.Fatal(err)
	}
	if h, _ := v.Heard(ctx, "ray", wb); h != 4 {
		t.Fatalf("heard = %d after MarkHeard(v4), want 4", h)
	}
}

// On Postgres every instance writes the shared ledger: the view never
// answers Pending from memory there.
func TestLedgerView_PendingIsNotKeptWhereOtherInstancesWrite(t *testing.T) {
	ctx := context.Background()
	l := newTestLedger(t, tempDBPath(t))
	v := newLedgerView(l, DialectPostgres) // a shared ledger, as on Postgres
	if rows, err := v.Pending(ctx, "ray"); err != nil || len(rows) != 0 {
		t.Fatalf("pending: %+v, %v", rows, err)
	}
	// Another instance queues an announcement (straight to the ledger).
	if _, err := l.Observe(ctx, "ray", wb, 0, 2, false); err != nil {
		t.Fatal(err)
	}
	if rows, err := v.Pending(ctx, "ray"); err != nil || len(rows) != 1 {
		t.Fatalf("pending after another instance queued: %+v, %v; want it", rows, err)
	}
}
