package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"syscall"
	"time"
)

// Write health: a full or read-only disk, or an unreachable database, is a
// fault an operator must be told about, not a bare internal error. Every
// write that fails for such a reason is answered with an *UnavailableError
// (POST /write: 503 with Retry-After), and WriteHealth reports the fault
// (/readyz: not ready) until a write commits again.

const (
	// writeProbeInterval is how often WriteHealth re-probes a store whose
	// last write failed: at most once per second.
	writeProbeInterval = time.Second
	// writeHealthInterval is how often WriteHealth probes with a write a
	// store whose writes succeed, so a disk that fills or turns read-only
	// between writes is noticed: at most once per 15 s.
	writeHealthInterval = 15 * time.Second
	// lockCheckInterval is how often, between those write probes,
	// WriteHealth checks that the database's write lock can be taken (BEGIN
	// IMMEDIATE, then ROLLBACK: nothing written, no fsync), so a lock held
	// by another process is noticed within seconds (T5): at most once per second.
	lockCheckInterval = time.Second
	// probeBusyTimeout is how long (ms) a probe waits for another
	// process's write lock before it reports the database busy: 500 ms
	// (writers wait the full busy timeout, 10 s).
	probeBusyTimeout = 500
	// probeTimeout bounds one probe on Postgres (and the probe's wait for
	// this process's own writers): 5 s.
	probeTimeout = 5 * time.Second
	// lockWaitBound is how long a writer may wait for the database's write
	// lock (its BEGIN) before WriteHealth reports the database busy without
	// waiting for a probe: 1 s. (In-process writers queue on writeMu, so a
	// BEGIN waits only for another process's transaction.)
	lockWaitBound = time.Second
	// retryAfterFull and retryAfterTransient are the RetryAfter of an
	// UnavailableError: 60 s for a fault that needs an operator (a full or
	// read-only disk), 5 s for one that may pass by itself (a busy or
	// restarting database).
	retryAfterFull      = 60 * time.Second
	retryAfterTransient = 5 * time.Second
)

// writeHealth is what the store knows of whether writes can commit.
type writeHealth struct {
	mu        sync.Mutex
	fault     *UnavailableError // the last write's or probe's failure; nil when it committed
	checkedAt time.Time         // when the last write, probe or lock check finished (real clock)
	wroteAt   time.Time         // when the last write or write probe finished (real clock)
	probe     chan struct{}     // while a probe runs: closed when it ends
	// begins holds when each writer now waiting for the database's write
	// lock (its BEGIN) started waiting, by a token of its own.
	begins    map[uint64]time.Time
	nextBegin uint64
	// lockTimedOut is when a BEGIN last failed for want of the write lock
	// (SQLITE_BUSY after the whole busy timeout).
	lockTimedOut time.Time
	// faultEvery, healthyEvery and lockEvery are writeProbeInterval,
	// writeHealthInterval and lockCheckInterval (tests lengthen them to
	// hold a state still).
	faultEvery, healthyEvery, lockEvery time.Duration
}

// WriteHealthReport is what WriteHealthState answers.
type WriteHealthReport struct {
	// Err is nil when writes can commit, else an *UnavailableError
	// (errors.Is ErrUnavailable) saying why.
	Err error
	// CheckedAt is when what Err says was last learnt: the last write,
	// probe or lock check to finish, or now when a writer has been waiting
	// for the database's lock past lockWaitBound. Zero before the first.
	CheckedAt time.Time
}

// unavailable classifies err: an *UnavailableError when it says the store
// cannot commit (the dialect's judgement, or ENOSPC/EROFS/EDQUOT anywhere
// in the chain), nil otherwise. An *UnavailableError is returned as is.
func (s *Store) unavailable(err error) *UnavailableError {
	if err == nil {
		return nil
	}
	var ue *UnavailableError
	if errors.As(err, &ue) {
		return ue
	}
	switch {
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT):
		return &UnavailableError{Reason: "the disk is full", RetryAfter: retryAfterFull, Err: err}
	case errors.Is(err, syscall.EROFS):
		return &UnavailableError{Reason: "the database is read-only", RetryAfter: retryAfterFull, Err: err}
	}
	if reason, retry, ok := s.d.unavailable(err); ok {
		return &UnavailableError{Reason: reason, RetryAfter: retry, Err: err}
	}
	return nil
}

// writeErr records the outcome of a write that failed with err and returns
// the error its caller should return: an *UnavailableError (wrapping err)
// when the store cannot commit, err itself otherwise. nil stays nil.
func (s *Store) writeErr(err error) error {
	ue := s.unavailable(err)
	if ue == nil {
		return err
	}
	s.health.mu.Lock()
	first := s.health.fault == nil
	now := time.Now()
	s.health.fault, s.health.checkedAt, s.health.wroteAt = ue, now, now
	s.health.mu.Unlock()
	if first {
		s.log.Error("store: writes cannot commit", "reason", ue.Reason, "err", ue.Err)
	}
	return ue
}

// commit commits tx and records the outcome for WriteHealth: a commit that
// succeeds clears a recorded fault; one that fails is classified (writeErr).
func (s *Store) commit(tx *sql.Tx) error {
	if err := tx.Commit(); err != nil {
		return s.writeErr(err)
	}
	s.healthy(true)
	return nil
}

// healthy records that a write committed (wrote) or the write lock was
// taken, clearing a recorded fault.
func (s *Store) healthy(wrote bool) {
	s.health.mu.Lock()
	defer s.health.mu.Unlock()
	if s.health.fault != nil {
		s.log.Info("store: writes commit again", "after", s.health.fault.Reason)
	}
	now := time.Now()
	s.health.fault, s.health.checkedAt = nil, now
	if wrote {
		s.health.wroteAt = now
	}
}

// beginTx begins a transaction on the store's pool, recording for
// WriteHealth, on SQLite, how long it waits for the database's write lock
// (every SQLite transaction is BEGIN IMMEDIATE, and this process's
// writers queue on writeMu before it, so a BEGIN that waits is waiting
// for another process).
func (s *Store) beginTx(ctx context.Context) (*sql.Tx, error) {
	if _, ok := s.d.(sqliteDialect); !ok {
		// Postgres: a BEGIN waits for a pooled connection, not for a lock
		// (writers lock after BEGIN), so its wait says nothing of one.
		return s.db.BeginTx(ctx, nil)
	}
	s.health.mu.Lock()
	if s.health.begins == nil {
		s.health.begins = map[uint64]time.Time{}
	}
	s.health.nextBegin++
	token := s.health.nextBegin
	s.health.begins[token] = time.Now()
	s.health.mu.Unlock()
	tx, err := s.db.BeginTx(ctx, nil)
	s.health.mu.Lock()
	delete(s.health.begins, token)
	if lockTimedOut(err) {
		s.health.lockTimedOut = time.Now()
	}
	s.health.mu.Unlock()
	return tx, err
}

// lockTimedOutSince returns the busy fault of a BEGIN that waited the whole
// busy timeout for the database's write lock and failed after t, or nil:
// a writer queued in this process since t has waited through that timeout
// already and is refused with it instead of waiting a second one (T4).
func (s *Store) lockTimedOutSince(t time.Time) *UnavailableError {
	s.health.mu.Lock()
	at := s.health.lockTimedOut
	s.health.mu.Unlock()
	if at.IsZero() || !at.After(t) {
		return nil
	}
	return &UnavailableError{Reason: "the database is busy", RetryAfter: retryAfterTransient,
		Err: fmt.Errorf("another writer waited the whole busy timeout for the database's write lock, until %s, while this write queued", at.UTC().Format(time.RFC3339Nano))}
}

// lockWaitLocked is the busy fault WriteHealth reports while a writer has
// waited past lockWaitBound for the database's write lock, or nil. The
// caller holds s.health.mu.
func (s *Store) lockWaitLocked(now time.Time) *UnavailableError {
	var oldest time.Time
	for _, at := range s.health.begins {
		if oldest.IsZero() || at.Before(oldest) {
			oldest = at
		}
	}
	if oldest.IsZero() || now.Sub(oldest) < lockWaitBound {
		return nil
	}
	return &UnavailableError{Reason: "the database is busy", RetryAfter: retryAfterTransient,
		Err: fmt.Errorf("a write has waited %s for the database's write lock", now.Sub(oldest).Round(time.Millisecond))}
}

// WriteHealth reports whether writes can commit now, for readiness
// (/readyz): nil, or an *UnavailableError (errors.Is ErrUnavailable) whose
// Reason says why — "the disk is full", "the database is read-only",
// "the database is busy", "the database is unreachable". It is
// WriteHealthState's Err.
func (s *Store) WriteHealth(ctx context.Context) error {
	return s.WriteHealthState(ctx).Err
}

// WriteHealthState reports whether writes can commit now and when that was
// learnt. It waits at most until ctx ends, never for a write to the
// database itself (T5): it answers from the last write, probe or lock
// check, starting a probe in the background when that is due and waiting
// for its result while ctx lasts — so a caller that gives it 1 s is
// answered within 1 s even while another process holds the database's
// write lock.
//
//   - A writer of this process that has waited past lockWaitBound (1 s)
//     for the database's write lock makes it "the database is busy" at once.
//   - After a write failed for a store fault it answers that failure until
//     a write commits again, re-probing (a one-row write transaction on
//     write_probe, never care data) at most once a second.
//   - While writes succeed it checks at most once a second that the write
//     lock can be taken (BEGIN IMMEDIATE and ROLLBACK on SQLite, waiting
//     probeBusyTimeout, 500 ms, for another process's lock) and probes
//     with a write at most once per 15 s, so a lock held by another
//     process is noticed within about a second of being asked and a disk
//     that fills or turns read-only between writes within 15 s.
//
// Concurrent callers share one probe; a probe outlives the ctx of the
// caller that started it (its result is kept for the next).
func (s *Store) WriteHealthState(ctx context.Context) WriteHealthReport {
	now := time.Now()
	s.health.mu.Lock()
	if ue := s.lockWaitLocked(now); ue != nil {
		s.health.mu.Unlock()
		return WriteHealthReport{Err: ue, CheckedAt: now}
	}
	h := &s.health
	if h.probe == nil {
		var full, due bool
		if h.fault != nil {
			full, due = true, h.checkedAt.IsZero() || now.Sub(h.checkedAt) >= h.faultEvery
		} else {
			full = h.wroteAt.IsZero() || now.Sub(h.wroteAt) >= h.healthyEvery
			due = full || h.checkedAt.IsZero() || now.Sub(h.checkedAt) >= h.lockEvery
		}
		select {
		case <-s.closed:
			due = false
		default:
		}
		if due {
			h.probe = make(chan struct{})
			go s.runProbe(h.probe, full)
		}
	}
	probe := h.probe
	s.health.mu.Unlock()
	if probe != nil {
		select {
		case <-probe:
		case <-ctx.Done():
		}
	}
	s.health.mu.Lock()
	defer s.health.mu.Unlock()
	if ue := s.lockWaitLocked(time.Now()); ue != nil {
		return WriteHealthReport{Err: ue, CheckedAt: time.Now()}
	}
	if h.fault != nil {
		return WriteHealthReport{Err: h.fault, CheckedAt: h.checkedAt}
	}
	return WriteHealthReport{CheckedAt: h.checkedAt}
}

// runProbe runs one probe (a write when full, else a lock check), records
// its outcome and closes done. It is bounded by probeTimeout and the
// store's life, not by any request.
func (s *Store) runProbe(done chan struct{}, full bool) {
	defer func() {
		s.health.mu.Lock()
		s.health.probe = nil
		s.health.mu.Unlock()
		close(done)
	}()
	ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
	defer cancel()
	go func() {
		select {
		case <-s.closed:
			cancel()
		case <-ctx.Done():
		}
	}()
	err := s.probeWrite(ctx, full)
	select {
	case <-s.closed:
		return // closed under the probe: nothing to report
	default:
	}
	if err != nil && s.unavailable(err) == nil && ctx.Err() == nil {
		s.log.Warn("store: write probe failed", "err", err)
	}
}

// probeWrite takes the database's write lock on the probe's own handle
// (SQLite: waiting at most probeBusyTimeout for another process) under this
// process's writer lock, and either commits one tiny write (write_probe's
// row; full) or rolls back at once (a lock check: nothing written).
func (s *Store) probeWrite(ctx context.Context, full bool) error {
	if !lockWithin(ctx, &s.writeMu) {
		return ctx.Err() // this process's own writers hold the lock: they report
	}
	defer s.writeMu.Unlock()
	tx, err := s.probeDB.BeginTx(ctx, nil)
	if err != nil {
		return s.writeErr(fmt.Errorf("store: write probe: %w", err))
	}
	defer tx.Rollback()
	if !full {
		// SQLite's BEGIN IMMEDIATE took the write lock; on Postgres the
		// check is the round trip (the write probe takes the lock).
		if err := tx.Rollback(); err != nil {
			return s.writeErr(fmt.Errorf("store: lock check: %w", err))
		}
		s.health.mu.Lock()
		fault := s.health.fault
		s.health.mu.Unlock()
		if fault == nil || fault.Reason == "the database is busy" {
			s.healthy(false)
		}
		return nil
	}
	if err := s.d.lockWrites(ctx, tx); err != nil {
		return s.writeErr(fmt.Errorf("store: write probe: %w", err))
	}
	if _, err := tx.ExecContext(ctx, s.d.rebind(`UPDATE write_probe SET at_ms = ? WHERE id = 1`), time.Now().UnixMilli()); err != nil {
		return s.writeErr(fmt.Errorf("store: write probe: %w", err))
	}
	return s.commit(tx)
}

// lockWithin takes mu unless ctx ends first (then mu is not held).
func lockWithin(ctx context.Context, mu *sync.Mutex) bool {
	for {
		if mu.TryLock() {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(5 * time.Millisecond):
		}
	}
}
