package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Group commit: Publishes that reach the write lock while another batch
// is committing wait for it and then commit together, in one transaction
// and one fsync. Each is decided exactly as it would be alone — replay,
// head and audience checks, its own version number, chain link, signed
// head and audit row, in arrival order — and none is acknowledged before
// the transaction holding it is durable. If the shared transaction fails,
// every write in it is retried alone, so one write's failure never fails
// another; a write that fails alone fails with nothing written.
//
// The first writer to find no batch under way leads: it takes every write
// queued so far (up to maxBatch), commits them, and hands the lead to the
// first writer queued meanwhile. A lone writer commits at once, as before.

// maxBatch bounds the writes of one transaction.
const maxBatch = 256

// publishJob is one Publish attempt waiting for, or committed by, a batch.
type publishJob struct {
	ctx       context.Context // the caller's; checked when its batch begins
	in        PublishInput
	pl        plan
	underLock bool

	res  PublishResult
	err  error
	done chan struct{} // closed when res, err are set
	lead chan struct{} // closed when this job's writer is to lead the next batch
}

// committer is the queue of Publishes waiting for the write lock.
type committer struct {
	mu      sync.Mutex
	queue   []*publishJob
	leading bool
}

// publishGrouped commits j with whatever other Publishes are queued with
// it, and returns when j's batch has committed (or j failed).
func (s *Store) publishGrouped(j *publishJob) (PublishResult, error) {
	j.done, j.lead = make(chan struct{}), make(chan struct{})
	g := &s.group
	g.mu.Lock()
	g.queue = append(g.queue, j)
	if g.leading {
		g.mu.Unlock()
		select {
		case <-j.done:
			return j.res, j.err
		case <-j.lead: // the previous leader left j at the head of the queue
		}
		g.mu.Lock()
	}
	g.leading = true
	batch := g.queue[:min(len(g.queue), maxBatch)]
	g.queue = append([]*publishJob(nil), g.queue[len(batch):]...)
	g.mu.Unlock()

	s.commitBatch(batch)

	g.mu.Lock()
	if len(g.queue) > 0 {
		close(g.queue[0].lead) // it leads the next batch
	} else {
		g.leading = false
	}
	g.mu.Unlock()
	for _, b := range batch {
		if b != j {
			close(b.done)
		}
	}
	return j.res, j.err
}

// commitBatch commits the jobs of batch, setting each one's res and err.
// A job whose caller gave up before the batch began is abandoned unwritten.
func (s *Store) commitBatch(batch []*publishJob) {
	live := batch[:0:0]
	for _, j := range batch {
		if err := j.ctx.Err(); err != nil {
			j.err = fmt.Errorf("store: write lock: %w", err)
			continue
		}
		live = append(live, j)
	}
	if len(live) == 0 {
		return
	}
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	err := s.commitTogether(live)
	if err == nil || len(live) == 1 {
		if err != nil {
			live[0].res, live[0].err = PublishResult{}, err
		}
		return
	}
	// The shared transaction failed: nothing of it was written. Each write
	// is tried again alone, so the failure stays with the write that caused it.
	for _, j := range live {
		if err := s.commitTogether([]*publishJob{j}); err != nil {
			j.res, j.err = PublishResult{}, err
		}
	}
}

// batchState is what a batch's writes share inside their transaction: the
// next version sequence number and the audit chain's head, read once and
// moved on in memory as each write is inserted.
type batchState struct {
	nextSeq    int64 // 0: not read yet
	auditCount int64
	auditLast  string
	auditRead  bool
	audited    bool // the audit head must be signed before commit
	inserted   bool // a version was inserted: notify and wake watchers
	pruned     bool // expired idempotency keys were deleted
}

// commitTogether runs jobs in one write transaction and commits it. A
// job's own refusal (errHeadMoved, ErrAudienceChange, a sealer outage
// while planning under the lock) is its err and the others go on; any
// other error aborts the transaction, returned with nothing written and
// no job's res set.
func (s *Store) commitTogether(jobs []*publishJob) error {
	ctx := context.WithoutCancel(jobs[0].ctx) // the lock is held: commit whatever the callers do
	tx, err := s.beginWrite(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	var bs batchState
	type outcome struct {
		res PublishResult
		err error
	}
	outs := make([]outcome, len(jobs))
	for i, j := range jobs {
		res, jerr, fatal := s.publishInBatch(context.WithoutCancel(j.ctx), tx, j, &bs)
		if fatal != nil {
			return fatal
		}
		outs[i] = outcome{res, jerr}
	}
	if bs.audited {
		if err := s.signAuditHead(ctx, tx, bs.auditCount, bs.auditLast); err != nil {
			return err
		}
	}
	if bs.inserted {
		if err := s.d.notify(ctx, tx); err != nil {
			return fmt.Errorf("store: publish: notify: %w", err)
		}
	}
	if err := s.commit(tx); err != nil {
		return fmt.Errorf("store: publish: commit: %w", err)
	}
	if bs.inserted {
		s.wakeWatchers()
	}
	for i, j := range jobs {
		j.res, j.err = outs[i].res, outs[i].err
	}
	return nil
}

// publishInBatch is one job of a batch, inside tx: as publishOnce was
// alone. jerr is the job's own refusal (nothing of it written); fatal
// aborts the batch.
func (s *Store) publishInBatch(ctx context.Context, tx *sql.Tx, j *publishJob, bs *batchState) (res PublishResult, jerr, fatal error) {
	in, pl := j.in, j.pl
	now := s.clock().UTC().Truncate(time.Millisecond)
	if in.IdempotencyKey != "" {
		if !bs.pruned {
			cutoff := now.Add(-replayWindow).UnixMilli()
			if _, err := s.execPrepared(ctx, tx, s.d.rebind(`DELETE FROM idempotency WHERE at_ms <= ?`), cutoff); err != nil {
				return res, nil, fmt.Errorf("store: publish: %w", err)
			}
			bs.pruned = true
		}
		r, ok, err := s.replayedKey(ctx, tx, in.IdempotencyKey)
		if err != nil {
			return res, nil, err
		}
		if ok {
			return r, nil, nil
		}
	}
	if j.underLock {
		var err error
		if pl, err = s.planVersion(ctx, tx, in, true); err != nil {
			if isJobRefusal(err) {
				return res, err, nil
			}
			return res, nil, err
		}
	} else if err := s.checkHead(ctx, tx, in, pl); err != nil {
		if isJobRefusal(err) {
			return res, err, nil
		}
		return res, nil, err
	}
	if pl.unchanged {
		if in.IdempotencyKey != "" {
			if err := s.rememberKey(ctx, tx, in.IdempotencyKey, now, pl.head.seq); err != nil {
				return res, nil, err
			}
		}
		return PublishResult{Version: pl.head.v, Unchanged: true, Seq: pl.head.seq}, nil, nil
	}
	var entry *AuditEntry
	if in.Audit != nil { // validated before anything of this job is written
		e := *in.Audit
		e.URI, e.Outcome, e.Reason = "", OutcomeAccepted, ReasonOK
		e, err := sanitizeAudit(e)
		if err != nil {
			return res, err, nil
		}
		entry = &e
	}
	if bs.nextSeq == 0 {
		if err := s.queryRowPrepared(ctx, tx, `SELECT COALESCE(MAX(seq), 0) + 1 FROM versions`).Scan(&bs.nextSeq); err != nil {
			return res, nil, fmt.Errorf("store: publish: %w", err)
		}
	}
	seq := bs.nextSeq
	v, err := s.insertVersionAt(ctx, tx, in, now, pl, seq)
	if err != nil {
		return res, nil, err
	}
	bs.nextSeq++
	bs.inserted = true
	if in.IdempotencyKey != "" {
		if err := s.rememberKey(ctx, tx, in.IdempotencyKey, now, seq); err != nil {
			return res, nil, err
		}
	}
	audited := false
	if entry != nil {
		entry.URI = v.URI().String()
		if err := s.appendAcceptedAudit(ctx, tx, *entry, bs); err != nil {
			return res, nil, err
		}
		audited = true
	}
	return PublishResult{Version: v, Created: v.N == 1, Seq: seq, Audited: audited}, nil, nil
}

// isJobRefusal reports whether err refuses one write without saying
// anything about the others in its batch.
func isJobRefusal(err error) bool {
	return errors.Is(err, errHeadMoved) || errors.Is(err, ErrAudienceChange) || errors.Is(err, ErrSealerUnavailable)
}

// appendAcceptedAudit appends e, an accepted write's row (never collapsed
// into another), chained to the batch's audit head; the head is signed
// once, before the batch commits.
func (s *Store) appendAcceptedAudit(ctx context.Context, tx *sql.Tx, e AuditEntry, bs *batchState) error {
	if !bs.auditRead {
		if err := s.queryRowPrepared(ctx, tx, `SELECT count, last_mac FROM audit_head WHERE id = 1`).Scan(&bs.auditCount, &bs.auditLast); err != nil {
			return fmt.Errorf("store: audit: head: %w", err)
		}
		bs.auditRead = true
	}
	e.Seq = bs.auditCount + 1
	e.At = s.clock().UTC().Truncate(time.Millisecond)
	e.MAC = s.auditMAC(e, bs.auditLast)
	if _, err := s.execPrepared(ctx, tx, s.d.rebind(`INSERT INTO audit (seq, at, actor, uri, outcome, reason, via, author, count, last_at, mac)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`),
		e.Seq, e.At.UnixMilli(), e.Actor, e.URI, e.Outcome, string(e.Reason), e.Via, e.Author, e.Count, msOrZero(e.LastAt), e.MAC); err != nil {
		return fmt.Errorf("store: audit: %w", err)
	}
	bs.auditCount, bs.auditLast, bs.audited = e.Seq, e.MAC, true
	return nil
}
