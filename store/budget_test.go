package store

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

var budgetNoon = time.Date(2026, 10, 8, 12, 0, 0, 0, time.UTC)

// reserveRace has each of budgets reserve one of max slots at once, after
// max-1 are taken, and returns how many succeeded.
func reserveRace(t *testing.T, max int, budgets ...*AlertBudget) int32 {
	t.Helper()
	ctx := context.Background()
	since := budgetNoon.Add(-time.Hour)
	for i := 0; i < max-1; i++ {
		if id, _, err := budgets[0].ReserveSlot(ctx, "ray", max, since, budgetNoon); err != nil || id == 0 {
			t.Fatalf("reservation %d = %d, %v", i, id, err)
		}
	}
	var ok atomic.Int32
	var wg sync.WaitGroup
	for _, b := range budgets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id, _, err := b.ReserveSlot(ctx, "ray", max, since, budgetNoon)
			if err != nil {
				t.Error(err)
			}
			if id != 0 {
				ok.Add(1)
			}
		}()
	}
	wg.Wait()
	return ok.Load()
}

// P-23: two instances (two stores on one database) racing for the last
// slot get one between them.
func TestAlertBudget_TwoInstancesRacingForTheLastSlotGetOne(t *testing.T) {
	dsn := testDSN(t)
	a, b := openDSN(t, dsn).AlertBudget(), openDSN(t, dsn).AlertBudget()
	if n := reserveRace(t, 3, a, b, a, b, a, b); n != 1 {
		t.Fatalf("%d racing reservations succeeded with one slot left, want 1", n)
	}
}

// The same race on Postgres, in the first pass, for the invariant list.
func TestBudget_OnPostgresTwoInstancesRacingForTheLastSlotGetOne(t *testing.T) {
	dsn := pgOnlyDSN(t)
	a, b := openDSN(t, dsn).AlertBudget(), openDSN(t, dsn).AlertBudget()
	if n := reserveRace(t, 3, a, b, a, b, a, b); n != 1 {
		t.Fatalf("%d racing reservations succeeded with one slot left, want 1", n)
	}
	// Twin: the window slides past them and a slot frees.
	later := budgetNoon.Add(time.Hour + time.Second)
	if id, _, err := b.ReserveSlot(context.Background(), "ray", 3, later.Add(-time.Hour), later); err != nil || id == 0 {
		t.Fatalf("after the window: %d, %v", id, err)
	}
}

// A full budget reserves nothing and names its oldest slot; a refunded slot
// and one older than since no longer count; patients are apart.
func TestAlertBudget_CountsChargedSlotsInTheWindowOnly(t *testing.T) {
	s, _ := openTest(t, nil)
	b := s.AlertBudget()
	ctx := context.Background()
	since := budgetNoon.Add(-time.Hour)
	var first int64
	for i := range 2 {
		id, _, err := b.ReserveSlot(ctx, "ray", 2, since, budgetNoon.Add(time.Duration(i)*time.Minute))
		if err != nil || id == 0 {
			t.Fatalf("reservation %d = %d, %v", i, id, err)
		}
		if i == 0 {
			first = id
		}
	}
	id, oldest, err := b.ReserveSlot(ctx, "ray", 2, since, budgetNoon.Add(2*time.Minute))
	if err != nil || id != 0 || !oldest.Equal(budgetNoon) {
		t.Fatalf("a full budget reserved %d (oldest %v), %v; want none, oldest at noon", id, oldest, err)
	}
	if id, _, err := b.ReserveSlot(ctx, "sue", 2, since, budgetNoon); err != nil || id == 0 {
		t.Fatalf("another patient's budget = %d, %v; want a slot", id, err)
	}
	if err := b.RefundSlot(ctx, first); err != nil {
		t.Fatal(err)
	}
	if n, err := b.SlotsUsed(ctx, "ray", since); err != nil || n != 1 {
		t.Fatalf("after a refund used = %d, %v; want 1", n, err)
	}
	if n, err := b.SlotsUsed(ctx, "ray", budgetNoon); err != nil || n != 1 {
		t.Fatalf("used after noon = %d, %v; want the 12:01 slot only", n, err)
	}
	if id, _, err := b.ReserveSlot(ctx, "ray", 2, since, budgetNoon.Add(3*time.Minute)); err != nil || id == 0 {
		t.Fatalf("after a refund = %d, %v; want a slot", id, err)
	}
}
