package speech

import (
	"context"
	"slices"
	"sync"
)

// ledgerView is the principal's in-memory view in front of the durable
// heard ledger, which stays the truth: every write goes to the ledger
// first and is acknowledged only once it is committed. It spares the
// ledger queries a turn would otherwise make on every Alexa request:
//
//   - Pending: a patient's pending announcements, as last read, while no
//     ledger write of this process has happened since (a generation
//     counter moves on after every write commits, and after every Observe
//     whether it changed anything or not). Only where this process is the
//     ledger's only writer (SQLite: one process serves a database file); on
//     Postgres every instance writes the shared ledger, so Pending is read
//     from it each time.
//   - MarkHeard: a version Ray is known to have heard durably. The ledger's
//     heard version only moves forward, and a pending announcement always
//     starts at or after it (decide queues and extends from Heard;
//     MarkHeard advances every earlier start), so once MarkHeard(v)
//     returned nil, MarkHeard(v' ≤ v) would change nothing on any instance
//     and is answered from memory.
//
// It never answers a question the ledger has not answered since its last
// write: a stale view could only repeat an announcement, never lose one.
type ledgerView struct {
	*ledger
	cachePending bool

	mu      sync.Mutex
	gen     uint64                    // moves on after each ledger write this process makes
	pending map[string]pendingRows    // patient → his pending rows, read at gen
	heard   map[string]map[string]int // patient → fact URI → a version he durably heard
}

type pendingRows struct {
	gen  uint64
	rows []row
}

func newLedgerView(l *ledger, dialect string) *ledgerView {
	return &ledgerView{ledger: l, cachePending: dialect == DialectSQLite,
		pending: map[string]pendingRows{}, heard: map[string]map[string]int{}}
}

// wrote records that a ledger write committed (or may have): the
// pending rows read before it are no longer an answer.
func (v *ledgerView) wrote() {
	v.mu.Lock()
	v.gen++
	clear(v.pending)
	v.mu.Unlock()
}

// Pending returns the patient's pending announcements, oldest first.
func (v *ledgerView) Pending(ctx context.Context, patient string) ([]row, error) {
	if !v.cachePending {
		return v.ledger.Pending(ctx, patient)
	}
	v.mu.Lock()
	if e, ok := v.pending[patient]; ok && e.gen == v.gen {
		v.mu.Unlock()
		return slices.Clone(e.rows), nil
	}
	gen := v.gen
	v.mu.Unlock()
	rows, err := v.ledger.Pending(ctx, patient)
	if err != nil {
		return nil, err
	}
	v.mu.Lock()
	if v.gen == gen { // no write committed while it was read
		v.pending[patient] = pendingRows{gen: gen, rows: slices.Clone(rows)}
	}
	v.mu.Unlock()
	return rows, nil
}

// heardAtLeast reports whether Ray is known to have heard version of uri
// or newer: MarkHeard of it would change nothing.
func (v *ledgerView) heardAtLeast(patient, uri string, version int) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.heard[patient][uri] >= version
}

// MarkHeard is ledger.MarkHeard, answered from memory when Ray is known to
// have heard version or newer (see ledgerView).
func (v *ledgerView) MarkHeard(ctx context.Context, patient, uri string, version int) error {
	v.mu.Lock()
	known := v.heard[patient][uri]
	v.mu.Unlock()
	if known >= version {
		return nil
	}
	err := v.ledger.MarkHeard(ctx, patient, uri, version)
	v.wrote()
	if err != nil {
		return err
	}
	v.mu.Lock()
	m := v.heard[patient]
	if m == nil {
		m = map[string]int{}
		v.heard[patient] = m
	}
	m[uri] = max(m[uri], version)
	v.mu.Unlock()
	return nil
}

// Observe is ledger.Observe; the pending rows are read afresh after it,
// changed or not (another instance may have queued what it found pending).
func (v *ledgerView) Observe(ctx context.Context, patient, uri string, expectHeard, latest int, same bool) (bool, error) {
	changed, err := v.ledger.Observe(ctx, patient, uri, expectHeard, latest, same)
	v.wrote()
	return changed, err
}

// Offered is ledger.Offered.
func (v *ledgerView) Offered(ctx context.Context, ids []int64) error {
	err := v.ledger.Offered(ctx, ids)
	if len(ids) > 0 {
		v.wrote()
	}
	return err
}

// Drop is ledger.Drop.
func (v *ledgerView) Drop(ctx context.Context, id int64) error {
	err := v.ledger.Drop(ctx, id)
	v.wrote()
	return err
}
