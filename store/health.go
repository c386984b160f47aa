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
	// writeHealthInterval is how often WriteHealth probes a store whose
	// writes succeed, so a disk that fills or turns read-only between
	// writes is noticed: at most once per 15 s.
	writeHealthInterval = 15 * time.Second
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
	checkedAt time.Time         // when the last write or probe finished (real clock)
	probing   bool
	// faultEvery and healthyEvery are writeProbeInterval and
	// writeHealthInterval (tests lengthen them to hold a state still).
	faultEvery, healthyEvery time.Duration
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
	s.health.fault, s.health.checkedAt = ue, time.Now()
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
	s.health.mu.Lock()
	if s.health.fault != nil {
		s.log.Info("store: writes commit again", "after", s.health.fault.Reason)
	}
	s.health.fault, s.health.checkedAt = nil, time.Now()
	s.health.mu.Unlock()
	return nil
}

// WriteHealth reports whether writes can commit now, for readiness
// (/readyz): nil, or an *UnavailableError (errors.Is ErrUnavailable) whose
// Reason says why — "the disk is full", "the database is read-only",
// "the database is unreachable".
//
// After a write failed for such a reason it answers that failure until a
// write commits again, re-probing meanwhile (a one-row write transaction on
// write_probe, never care data) at most once a second; while writes
// succeed it probes at most once per 15 s, so a disk that fills or turns
// read-only between writes is noticed too. Concurrent callers share one
// probe. ctx bounds the probe.
func (s *Store) WriteHealth(ctx context.Context) error {
	s.health.mu.Lock()
	fault, since, probing := s.health.fault, time.Since(s.health.checkedAt), s.health.probing
	interval := s.health.healthyEvery
	if fault != nil {
		interval = s.health.faultEvery
	}
	if probing || (!s.health.checkedAt.IsZero() && since < interval) {
		s.health.mu.Unlock()
		if fault != nil {
			return fault
		}
		return nil
	}
	s.health.probing = true
	s.health.mu.Unlock()
	defer func() {
		s.health.mu.Lock()
		s.health.probing = false
		s.health.mu.Unlock()
	}()
	err := s.probeWrite(ctx)
	if ue := s.unavailable(err); ue != nil {
		return ue
	}
	if err != nil {
		// Not a store fault (ctx ended, say): report what is known.
		s.health.mu.Lock()
		defer s.health.mu.Unlock()
		if s.health.fault != nil {
			return s.health.fault
		}
		return nil
	}
	return nil
}

// probeWrite commits one tiny write (write_probe's row) under the write lock.
func (s *Store) probeWrite(ctx context.Context) error {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	tx, err := s.beginWrite(ctx)
	if err != nil {
		return s.writeErr(err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, s.d.rebind(`UPDATE write_probe SET at_ms = ? WHERE id = 1`), time.Now().UnixMilli()); err != nil {
		return s.writeErr(fmt.Errorf("store: write probe: %w", err))
	}
	return s.commit(tx)
}
