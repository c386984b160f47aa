package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/unsay/unsay/models"
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

// commitTogether runs jobs in one write transaction and commits it, in
// three steps whose statement count does not grow with the batch (on
// Postgres each statement is a round trip made under the write lock):
//
//  1. read, for all jobs at once, the idempotency keys they carry and the
//     heads of their facts;
//  2. decide each job in arrival order exactly as a lone Publish would
//     (replay, head moved, audience change, unchanged, else the next
//     version: its number, chain link, hash, signed head and audit row,
//     chained in memory);
//  3. write every new version, fact head, key and audit row with one
//     multi-row statement per table, sign the audit head once, notify,
//     commit.
//
// A job's own refusal (errHeadMoved, ErrAudienceChange, a sealer outage
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
	now := s.clock().UTC().Truncate(time.Millisecond)

	// 1. Reads.
	var keys []string
	var facts [][2]string
	for _, j := range jobs {
		if j.in.IdempotencyKey != "" {
			keys = append(keys, j.in.IdempotencyKey)
		}
		if !j.underLock {
			facts = append(facts, [2]string{j.in.Patient, j.in.Domain})
		}
	}
	seen := map[string]int64{} // idempotency key → seq of its first result
	if len(keys) > 0 {
		cutoff := now.Add(-replayWindow).UnixMilli()
		if _, err := s.execPrepared(ctx, tx, s.d.rebind(`DELETE FROM idempotency WHERE at_ms <= ?`), cutoff); err != nil {
			return fmt.Errorf("store: publish: %w", err)
		}
		if seen, err = s.keysSeen(ctx, tx, keys); err != nil {
			return err
		}
	}
	heads, err := s.headsOf(ctx, tx, facts)
	if err != nil {
		return err
	}

	// 2. Decisions.
	var (
		w       batchWrites
		nextSeq int64
		audit   auditTail // read with nextSeq
		outs    = make([]PublishResult, len(jobs))
		errs    = make([]error, len(jobs))
		inBatch = map[string]PublishResult{} // key → result of an earlier job of this batch
	)
	for i, j := range jobs {
		in, pl := j.in, j.pl
		if k := in.IdempotencyKey; k != "" {
			if r, ok := inBatch[k]; ok {
				r.Replayed, r.Audited = true, false
				outs[i] = r
				continue
			}
			if seq, ok := seen[k]; ok {
				r, err := s.replayedSeq(ctx, tx, seq)
				if err != nil {
					return err
				}
				outs[i] = r
				continue
			}
		}
		if j.underLock {
			if pl, err = s.planVersion(ctx, tx, in, true); err != nil {
				if isJobRefusal(err) {
					errs[i] = err
					continue
				}
				return err
			}
		} else if err := checkPlannedHead(in, pl, heads); err != nil {
			errs[i] = err
			continue
		}
		var entry *AuditEntry
		if in.Audit != nil { // validated before anything of this job is kept
			e := *in.Audit
			e.URI, e.Outcome, e.Reason = "", OutcomeAccepted, ReasonOK
			e, err := sanitizeAudit(e)
			if err != nil {
				errs[i] = err
				continue
			}
			entry = &e
		}
		if pl.unchanged {
			if in.IdempotencyKey != "" {
				w.keys = append(w.keys, keyRow{in.IdempotencyKey, now.UnixMilli(), pl.head.seq})
			}
			outs[i] = PublishResult{Version: pl.head.v, Unchanged: true, Seq: pl.head.seq}
			if in.IdempotencyKey != "" {
				inBatch[in.IdempotencyKey] = outs[i]
			}
			continue
		}
		if nextSeq == 0 { // with the audit head: one round trip
			if err := s.queryRowPrepared(ctx, tx, `SELECT (SELECT COALESCE(MAX(seq), 0) + 1 FROM versions),
				(SELECT count FROM audit_head WHERE id = 1), (SELECT last_mac FROM audit_head WHERE id = 1)`).
				Scan(&nextSeq, &audit.count, &audit.last); err != nil {
				return fmt.Errorf("store: publish: %w", err)
			}
		}
		seq := nextSeq
		nextSeq++
		v := s.nextVersion(in, now, pl)
		w.versions = append(w.versions, versionRow{seq: seq, v: v, stored: pl.stored, sealed: pl.sealed, audio: audioColumnsOf(v, pl)}) // signed below
		if v.N == 1 {
			w.newFacts = append(w.newFacts, v)
		} else {
			w.moved = append(w.moved, v)
		}
		heads[[2]string{v.Patient, v.Domain}] = headRow{audience: v.Audience, latest: v.N, hash: v.Hash}
		if in.IdempotencyKey != "" {
			w.keys = append(w.keys, keyRow{in.IdempotencyKey, now.UnixMilli(), seq})
		}
		audited := false
		if entry != nil {
			e := *entry
			e.URI = v.URI().String()
			e.Seq, e.At = audit.count+1, s.clock().UTC().Truncate(time.Millisecond)
			e.MAC = s.auditMAC(e, audit.last)
			audit.count, audit.last = e.Seq, e.MAC
			w.audits = append(w.audits, e)
			audited = true
		}
		outs[i] = PublishResult{Version: v, Created: v.N == 1, Seq: seq, Audited: audited}
		if in.IdempotencyKey != "" {
			inBatch[in.IdempotencyKey] = outs[i]
		}
	}

	// 3. Writes: each new head signed (P-26), on every core at once.
	s.signHeads(w.versions)
	if err := s.writeBatch(ctx, tx, w); err != nil {
		return err
	}
	if len(w.audits) > 0 {
		if err := s.signAuditHead(ctx, tx, audit.count, audit.last); err != nil {
			return err
		}
	}
	if len(w.versions) > 0 {
		if err := s.d.notify(ctx, tx); err != nil {
			return fmt.Errorf("store: publish: notify: %w", err)
		}
	}
	if err := s.commit(tx); err != nil {
		return fmt.Errorf("store: publish: commit: %w", err)
	}
	if len(w.versions) > 0 {
		s.wakeWatchers()
	}
	for i, j := range jobs {
		j.res, j.err = outs[i], errs[i]
	}
	return nil
}

// isJobRefusal reports whether err refuses one write without saying
// anything about the others in its batch.
func isJobRefusal(err error) bool {
	return errors.Is(err, errHeadMoved) || errors.Is(err, ErrAudienceChange) || errors.Is(err, ErrSealerUnavailable)
}

// headRow is a fact's head as the batch reads it: its audience, latest
// version and that version's hash.
type headRow struct {
	audience models.Audience
	latest   int
	hash     string
}

// checkPlannedHead confirms that in's fact still has the head pl was
// planned against, in heads read for the batch (and
// moved on by its earlier jobs).
func checkPlannedHead(in PublishInput, pl plan, heads map[[2]string]headRow) error {
	h, ok := heads[[2]string{in.Patient, in.Domain}]
	switch {
	case !ok:
		if pl.found {
			return errHeadMoved
		}
		return nil
	case h.audience != in.Audience:
		return ErrAudienceChange
	case !pl.found || h.latest != pl.head.v.N || h.hash != pl.head.v.Hash:
		return errHeadMoved
	}
	return nil
}

// batchChunk bounds the rows of one multi-row statement.
const batchChunk = 32

// headsOf reads the head (audience, latest, its hash) of each fact.
func (s *Store) headsOf(ctx context.Context, tx *sql.Tx, facts [][2]string) (map[[2]string]headRow, error) {
	heads := map[[2]string]headRow{}
	err := s.chunked(len(facts), func(lo, hi int) error {
		var (
			query string
			args  []any
		)
		if s.arrays() {
			ps, ds := make([]string, hi-lo), make([]string, hi-lo)
			for i, f := range facts[lo:hi] {
				ps[i], ds[i] = f[0], f[1]
			}
			query = `SELECT f.patient, f.domain, f.audience, f.latest, v.hash FROM unnest($1::text[], $2::text[]) AS q(patient, domain)
			JOIN facts f ON f.patient = q.patient AND f.domain = q.domain ` + s.d.latestJoin()
			args = []any{ps, ds}
		} else {
			var cond strings.Builder
			for i, f := range facts[lo:hi] {
				if i > 0 {
					cond.WriteString(" OR ")
				}
				cond.WriteString("(f.patient = ? AND f.domain = ?)")
				args = append(args, f[0], f[1])
			}
			query = `SELECT f.patient, f.domain, f.audience, f.latest, v.hash FROM facts f ` + s.d.latestJoin() + ` WHERE ` + cond.String()
		}
		rows, err := s.queryTxPrepared(ctx, tx, query, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var (
				k   [2]string
				aud string
				h   headRow
			)
			if err := rows.Scan(&k[0], &k[1], &aud, &h.latest, &h.hash); err != nil {
				return err
			}
			h.audience = models.Audience(aud)
			heads[k] = h
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("store: publish: %w", err)
	}
	return heads, nil
}

// keysSeen returns which of keys were used within the replay window (the
// expired ones are pruned already), with the seq of their first result.
func (s *Store) keysSeen(ctx context.Context, tx *sql.Tx, keys []string) (map[string]int64, error) {
	seen := map[string]int64{}
	err := s.chunked(len(keys), func(lo, hi int) error {
		query, args := `SELECT key, seq FROM idempotency WHERE key = ANY($1::text[])`, []any{keys[lo:hi]}
		if !s.arrays() {
			query, args = `SELECT key, seq FROM idempotency WHERE key IN (`+placeholders(hi-lo)+`)`, nil
			for _, k := range keys[lo:hi] {
				args = append(args, k)
			}
		}
		rows, err := s.queryTxPrepared(ctx, tx, query, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var (
				k   string
				seq int64
			)
			if err := rows.Scan(&k, &seq); err != nil {
				return err
			}
			seen[k] = seq
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("store: publish: %w", err)
	}
	return seen, nil
}

// replayedSeq is the first result of a replayed idempotency key: the
// version with seq.
func (s *Store) replayedSeq(ctx context.Context, tx *sql.Tx, seq int64) (PublishResult, error) {
	row := s.queryRowPrepared(ctx, tx, s.d.rebind(`SELECT `+versionCols+` FROM versions v JOIN facts f
		ON f.patient = v.patient AND f.domain = v.domain WHERE v.seq = ?`), seq)
	r, err := s.scanVersion(ctx, row)
	if err != nil {
		return PublishResult{}, fmt.Errorf("store: publish: replay: %w", err)
	}
	return PublishResult{Version: r.v, Created: r.v.N == 1, Replayed: true, Seq: seq}, nil
}

// signHeads signs the chain head of each new version (P-26), spreading
// the signatures of a large batch over the cores: they are most of the
// CPU a batch spends holding the write lock.
func (s *Store) signHeads(rows []versionRow) {
	sign := func(r *versionRow) { r.headSig, r.headKey = s.sign(chainHeadPreimage(r.v.URI(), r.v.Hash)) }
	workers := min(runtime.GOMAXPROCS(0), len(rows)/4)
	if workers < 2 {
		for i := range rows {
			sign(&rows[i])
		}
		return
	}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < len(rows); i += workers {
				sign(&rows[i])
			}
		}()
	}
	wg.Wait()
}

type versionRow struct {
	seq              int64
	v                models.Version
	stored           []byte
	sealed           bool
	audio            audioColumns
	headSig, headKey string
}

type keyRow struct {
	key string
	at  int64
	seq int64
}

type auditTail struct {
	count int64
	last  string
}

// batchWrites is everything a batch writes, table by table.
type batchWrites struct {
	versions []versionRow
	newFacts []models.Version // version 1: a new facts row
	moved    []models.Version // facts whose latest moves to v.N
	keys     []keyRow
	audits   []AuditEntry
}

// writeBatch writes w: on Postgres one statement per table, the rows
// passed as arrays (unnest); on SQLite multi-row VALUES statements.
func (s *Store) writeBatch(ctx context.Context, tx *sql.Tx, w batchWrites) error {
	exec := func(what, arrays, values string, n, cols int, row func(i int) []any) error {
		err := s.chunked(n, func(lo, hi int) error {
			if s.arrays() {
				cs := make([][]any, cols)
				for i := lo; i < hi; i++ {
					for c, v := range row(i) {
						cs[c] = append(cs[c], v)
					}
				}
				args := make([]any, cols)
				for c := range cs {
					args[c] = typedArray(cs[c])
				}
				_, err := s.execPrepared(ctx, tx, arrays, args...)
				return err
			}
			args := make([]any, 0, cols*(hi-lo))
			for i := lo; i < hi; i++ {
				args = append(args, row(i)...)
			}
			_, err := s.execPrepared(ctx, tx, strings.Replace(values, "VALUES", "VALUES "+rowsOf(hi-lo, cols), 1), args...)
			return err
		})
		if err != nil {
			return fmt.Errorf("store: publish: %s: %w", what, err)
		}
		return nil
	}
	if err := exec("versions", `INSERT INTO versions
		(seq, patient, domain, n, audience, value, sealed, author_id, author_label, written_at, stale_after, priority, prev_hash, hash, head_sig, head_key,
		 audio_type, audio_size, audio_ms, audio_alexa, audio_sha256, audio)
		SELECT * FROM unnest($1::bigint[], $2::text[], $3::text[], $4::integer[], $5::text[], $6::bytea[], $7::integer[], $8::text[], $9::text[],
		$10::bigint[], $11::bigint[], $12::float8[], $13::text[], $14::text[], $15::text[], $16::text[],
		$17::text[], $18::bigint[], $19::bigint[], $20::bigint[], $21::text[], $22::bytea[])`,
		`INSERT INTO versions
		(seq, patient, domain, n, audience, value, sealed, author_id, author_label, written_at, stale_after, priority, prev_hash, hash, head_sig, head_key,
		 audio_type, audio_size, audio_ms, audio_alexa, audio_sha256, audio)
		VALUES`, len(w.versions), 22, func(i int) []any {
			r := w.versions[i]
			v, a := r.v, r.audio
			return []any{r.seq, v.Patient, v.Domain, v.N, string(v.Audience), r.stored, sqlBool(r.sealed), v.AuthorID, v.AuthorLabel,
				v.WrittenAt.UnixMilli(), msOrZero(v.StaleAfter), v.Priority, v.PrevHash, v.Hash, r.headSig, r.headKey,
				a.mimeType, a.size, a.ms, int64(sqlBool(a.alexa)), a.sha256, a.stored}
		}); err != nil {
		return err
	}
	if err := exec("facts", `INSERT INTO facts (patient, domain, audience, latest)
		SELECT p, d, a, 1 FROM unnest($1::text[], $2::text[], $3::text[]) AS t(p, d, a)`,
		`INSERT INTO facts (patient, domain, audience, latest) SELECT column1, column2, column3, 1 FROM (VALUES)`,
		len(w.newFacts), 3, func(i int) []any {
			v := w.newFacts[i]
			return []any{v.Patient, v.Domain, string(v.Audience)}
		}); err != nil {
		return err
	}
	if err := exec("facts", `UPDATE facts SET latest = m.n FROM unnest($1::text[], $2::text[], $3::integer[]) AS m(patient, domain, n)
		WHERE facts.patient = m.patient AND facts.domain = m.domain`,
		`UPDATE facts SET latest = m.column3 FROM (VALUES) AS m WHERE facts.patient = m.column1 AND facts.domain = m.column2`,
		len(w.moved), 3, func(i int) []any {
			v := w.moved[i]
			return []any{v.Patient, v.Domain, v.N}
		}); err != nil {
		return err
	}
	if err := exec("idempotency key", `INSERT INTO idempotency (key, at_ms, seq) SELECT * FROM unnest($1::text[], $2::bigint[], $3::bigint[])`,
		`INSERT INTO idempotency (key, at_ms, seq) VALUES`, len(w.keys), 3, func(i int) []any {
			k := w.keys[i]
			return []any{k.key, k.at, k.seq}
		}); err != nil {
		return err
	}
	return exec("audit", `INSERT INTO audit (seq, at, actor, uri, outcome, reason, via, author, count, last_at, mac)
		SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[],
		$9::bigint[], $10::bigint[], $11::text[])`,
		`INSERT INTO audit (seq, at, actor, uri, outcome, reason, via, author, count, last_at, mac) VALUES`,
		len(w.audits), 11, func(i int) []any {
			e := w.audits[i]
			return []any{e.Seq, e.At.UnixMilli(), e.Actor, e.URI, e.Outcome, string(e.Reason), e.Via, e.Author, e.Count, msOrZero(e.LastAt), e.MAC}
		})
}

// arrays reports whether the backend takes a batch's rows as arrays
// (Postgres: unnest) rather than as multi-row VALUES (SQLite).
func (s *Store) arrays() bool { return s.d.name() == "postgres" }

// typedArray turns one column of values into a slice of their type, which
// the Postgres driver sends as an array.
func typedArray(col []any) any {
	if len(col) == 0 {
		return []string{}
	}
	switch col[0].(type) {
	case int64:
		return collect[int64](col)
	case int:
		return collect[int](col)
	case float64:
		return collect[float64](col)
	case []byte:
		return collect[[]byte](col)
	default:
		return collect[string](col)
	}
}

func collect[T any](col []any) []T {
	out := make([]T, len(col))
	for i, v := range col {
		out[i] = v.(T)
	}
	return out
}

// chunked calls f on consecutive ranges covering [0, n): on Postgres one
// range (arrays carry any number of rows); on SQLite ranges of 32, 16, 8,
// 4, 2 or 1 rows, largest first, so a statement comes in six shapes only
// and the prepared-statement cache stays small.
func (s *Store) chunked(n int, f func(lo, hi int) error) error {
	if n == 0 {
		return nil
	}
	if s.arrays() {
		return f(0, n)
	}
	for lo := 0; lo < n; {
		size := batchChunk
		for size > n-lo {
			size /= 2
		}
		if err := f(lo, lo+size); err != nil {
			return err
		}
		lo += size
	}
	return nil
}

// rowsOf is n rows of cols placeholders: "(?, ?), (?, ?)".
func rowsOf(n, cols int) string { return rowsOfWith(n, "("+placeholders(cols)+")") }

func rowsOfWith(n int, row string) string {
	return strings.TrimSuffix(strings.Repeat(row+", ", n), ", ")
}
