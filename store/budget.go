package store

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"time"
)

// AlertBudget keeps the audible budget's slots (alert_budget, migration
// 041; it implements skill/proactive's BudgetStore, P-23): one row per
// unasked notification reserved for a patient, charged unless refunded,
// shared by every instance on the database. The policy — how many per
// window, quiet hours — is the caller's; this is the atomic count-and-take.
// Its methods are safe for concurrent use. Get it with Store.AlertBudget.
type AlertBudget struct {
	s  *Store
	mu sync.Mutex // serializes this process's reservations; the database lock serializes instances
}

// AlertBudget returns the store's audible-budget slots (one per Store).
func (s *Store) AlertBudget() *AlertBudget { return &s.budget }

// ReserveSlot takes one slot for patient at at, atomically — two racing
// callers, in this process or another instance, with one slot left get one
// between them — unless max slots are already charged after since: then it
// reserves nothing, and id is 0 and oldest is when the oldest of them was
// reserved (the window frees a slot once it leaves). It holds the
// database's write lock (SQLite: BEGIN IMMEDIATE) or, on Postgres, a
// transaction advisory lock per patient, while it counts and inserts.
func (b *AlertBudget) ReserveSlot(ctx context.Context, patient string, max int, since, at time.Time) (id int64, oldest time.Time, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	defer b.s.lockFileWriters()()
	tx, err := b.s.beginTx(ctx)
	if err != nil {
		return 0, time.Time{}, fmt.Errorf("store: budget: reserve: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // after Commit it is a no-op
	if _, ok := b.s.d.(postgresDialect); ok {
		if _, err := tx.ExecContext(ctx, "SELECT pg_advisory_xact_lock(hashtext($1))", "alert_budget/"+patient); err != nil {
			return 0, time.Time{}, fmt.Errorf("store: budget: reserve lock: %w", err)
		}
	}
	var count int
	var first sql.NullInt64
	if err := tx.QueryRowContext(ctx, b.s.d.rebind(`SELECT COUNT(*), MIN(reserved_at) FROM alert_budget
		WHERE patient = ? AND reserved_at > ? AND state <> 'refunded'`), patient, since.UnixMilli()).Scan(&count, &first); err != nil {
		return 0, time.Time{}, fmt.Errorf("store: budget: reserve count: %w", err)
	}
	if count >= max {
		return 0, time.UnixMilli(first.Int64), nil
	}
	if err := tx.QueryRowContext(ctx, b.s.d.rebind(`INSERT INTO alert_budget (patient, reserved_at, state) VALUES (?, ?, 'charged') RETURNING id`),
		patient, at.UnixMilli()).Scan(&id); err != nil {
		return 0, time.Time{}, fmt.Errorf("store: budget: reserve insert: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return 0, time.Time{}, fmt.Errorf("store: budget: reserve commit: %w", err)
	}
	return id, time.Time{}, nil
}

// RefundSlot gives slot id back: it no longer counts against the budget.
func (b *AlertBudget) RefundSlot(ctx context.Context, id int64) error {
	defer b.s.lockFileWriters()()
	if _, err := b.s.db.ExecContext(ctx, b.s.d.rebind(`UPDATE alert_budget SET state = 'refunded' WHERE id = ?`), id); err != nil {
		return fmt.Errorf("store: budget: refund: %w", err)
	}
	return nil
}

// SlotsUsed counts patient's slots charged (reserved and not refunded)
// after since.
func (b *AlertBudget) SlotsUsed(ctx context.Context, patient string, since time.Time) (int, error) {
	var n int
	err := b.s.db.QueryRowContext(ctx, b.s.d.rebind(`SELECT COUNT(*) FROM alert_budget WHERE patient = ? AND reserved_at > ? AND state <> 'refunded'`),
		patient, since.UnixMilli()).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("store: budget: used: %w", err)
	}
	return n, nil
}
