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

	queued time.Time // when it joined the queue (real clock)

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
	j.done, j.lead, j.queued = make(chan struct{}), make(chan struct{}), time.Now()
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
	// A job queued while another writer waited out the busy timeout for
	// the database's lock is refused with that, not made to wait again.
	waiting := live[:0:0]
	for _, j := range live {
		if ue := s.lockTimedOutSince(j.queued); ue != nil {
			j.err = ue
			continue
		}
		waiting = append(waiting, j)
	}
	if live = waiting; len(live) == 0 {
		return
	}
	err := s.commitTogether(live)
	if err == nil || len(live) == 1 || lockTimedOut(err) {
		// A batch that could not take the database's write lock (another
		// process held it for the whole busy timeout) fails as one: each
		// write alone would wait the busy timeout again, one after the
		// other, and answer its client past its deadline (T4).
		for _, j := range live {
			if err != nil {
				j.res, j.err = PublishResult{}, err
			}
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
// Postgres each statement is a round trip made under the write lock, and
// a batch makes five: BEGIN, the advisory lock, one read, one write,
// COMMIT):
//
//  1. read, for all jobs at once, the idempotency keys they carry, the
//     heads of their facts, the next seq and the audit head (readBatch);
//  2. decide each job in arrival order exactly as a lone Publish would
//     (replay, head moved, audience change, unchanged, else the next
//     version: its number, chain link, hash, signed head and audit row,
//     chained in memory);
//  3. write every new version, fact head, key and audit row, and the
//     signed audit head, and notify (writeBatch), then commit.
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
	signed := s.signAhead(jobs, now) // while the reads run

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
	st, err := s.readBatch(ctx, tx, keys, facts, now.Add(-replayWindow).UnixMilli())
	if err != nil {
		return err
	}
	seen, heads := st.seen, st.heads

	// 2. Decisions.
	var (
		w       batchWrites
		nextSeq = st.nextSeq
		audit   = st.audit
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
		seq := nextSeq
		nextSeq++
		v := s.nextVersion(in, now, pl)
		w.versions = append(w.versions, versionRow{job: i, seq: seq, v: v, stored: pl.stored, sealed: pl.sealed, audio: audioColumnsOf(v, pl)}) // signed below
		w.moveFact(v)
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

	// 3. Writes: each new head signed (P-26): signed ahead, or now.
	s.signHeads(w.versions, signed())
	if len(w.audits) > 0 {
		w.auditHead = &audit
	}
	if err := s.writeBatch(ctx, tx, w); err != nil {
		return err
	}
	s.feedCommitting(w.versions)
	if err := s.commit(tx); err != nil {
		s.feedCommitting(nil)
		return fmt.Errorf("store: publish: commit: %w", err)
	}
	s.keepHeads(w.versions)
	if len(w.versions) > 0 {
		s.feedCommitted(w.versions)
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

// batchState is what a batch reads under the write lock before deciding.
type batchState struct {
	seen    map[string]int64      // idempotency key → seq of its first result, within the replay window
	heads   map[[2]string]headRow // the heads of the facts asked for that exist
	nextSeq int64                 // MAX(seq) + 1
	audit   auditTail             // the audit head
}

// readBatch prunes the idempotency keys written at or before cutoff (ms)
// when keys is not empty, and reads which of keys are remembered, the
// heads of facts, the next seq and the audit head: on Postgres in one
// statement, on SQLite (where a statement is no round trip) in one per
// table.
func (s *Store) readBatch(ctx context.Context, tx *sql.Tx, keys []string, facts [][2]string, cutoff int64) (batchState, error) {
	st := batchState{seen: map[string]int64{}, heads: map[[2]string]headRow{}}
	if s.arrays() {
		err := s.readBatchPostgres(ctx, tx, keys, facts, cutoff, &st)
		if err != nil {
			return batchState{}, fmt.Errorf("store: publish: %w", err)
		}
		return st, nil
	}
	if len(keys) > 0 {
		if _, err := s.execPrepared(ctx, tx, `DELETE FROM idempotency WHERE at_ms <= ?`, cutoff); err != nil {
			return batchState{}, fmt.Errorf("store: publish: %w", err)
		}
		if err := s.keysSeen(ctx, tx, keys, st.seen); err != nil {
			return batchState{}, fmt.Errorf("store: publish: %w", err)
		}
	}
	if err := s.headsOf(ctx, tx, facts, st.heads); err != nil {
		return batchState{}, fmt.Errorf("store: publish: %w", err)
	}
	if err := s.queryRowPrepared(ctx, tx, `SELECT (SELECT COALESCE(MAX(seq), 0) + 1 FROM versions),
		(SELECT count FROM audit_head WHERE id = 1), (SELECT last_mac FROM audit_head WHERE id = 1)`).
		Scan(&st.nextSeq, &st.audit.count, &st.audit.last); err != nil {
		return batchState{}, fmt.Errorf("store: publish: %w", err)
	}
	return st, nil
}

// readBatchPostgres is readBatch's one statement: the rows of its three
// reads, tagged. The prune is a data-modifying CTE, which the statement's
// own reads do not see (they share its snapshot), so the keys read skips
// the pruned ones itself; the batch's later statements see them gone.
// The statement runs after pg_advisory_xact_lock returned, so its snapshot
// holds every write committed under the lock before.
func (s *Store) readBatchPostgres(ctx context.Context, tx *sql.Tx, keys []string, facts [][2]string, cutoff int64, st *batchState) error {
	ps, ds := make([]string, len(facts)), make([]string, len(facts))
	for i, f := range facts {
		ps[i], ds[i] = f[0], f[1]
	}
	if keys == nil {
		keys = []string{}
	}
	rows, err := s.queryTxPrepared(ctx, tx, `WITH pruned AS (DELETE FROM idempotency WHERE at_ms <= $1 AND cardinality($4::text[]) > 0)
		SELECT 'head', f.patient, f.domain, f.audience, f.latest, v.hash, 0::bigint, 0::bigint
			FROM unnest($2::text[], $3::text[]) AS q(patient, domain)
			JOIN facts f ON f.patient = q.patient AND f.domain = q.domain `+s.d.latestJoin()+`
		UNION ALL SELECT 'key', key, '', '', 0, '', seq, 0 FROM idempotency WHERE key = ANY($4::text[]) AND at_ms > $1
		UNION ALL SELECT 'tail', '', '', '', 0, last_mac, count, (SELECT COALESCE(MAX(seq), 0) + 1 FROM versions)
			FROM audit_head WHERE id = 1`, cutoff, ps, ds, keys)
	if err != nil {
		return err
	}
	defer rows.Close()
	tail := false
	for rows.Next() {
		var (
			kind, a, b, aud, hash string
			latest                int
			n1, n2                int64
		)
		if err := rows.Scan(&kind, &a, &b, &aud, &latest, &hash, &n1, &n2); err != nil {
			return err
		}
		switch kind {
		case "head":
			st.heads[[2]string{a, b}] = headRow{audience: models.Audience(aud), latest: latest, hash: hash}
		case "key":
			st.seen[a] = n1
		case "tail":
			st.audit, st.nextSeq, tail = auditTail{count: n1, last: hash}, n2, true
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if !tail {
		return errors.New("the audit head is missing")
	}
	return nil
}

// headsOf reads into heads the head (audience, latest, its hash) of each
// of facts that exists (SQLite).
func (s *Store) headsOf(ctx context.Context, tx *sql.Tx, facts [][2]string, heads map[[2]string]headRow) error {
	return s.chunked(len(facts), func(lo, hi int) error {
		var (
			cond strings.Builder
			args []any
		)
		for i, f := range facts[lo:hi] {
			if i > 0 {
				cond.WriteString(" OR ")
			}
			cond.WriteString("(f.patient = ? AND f.domain = ?)")
			args = append(args, f[0], f[1])
		}
		rows, err := s.queryTxPrepared(ctx, tx, `SELECT f.patient, f.domain, f.audience, f.latest, v.hash FROM facts f `+
			s.d.latestJoin()+` WHERE `+cond.String(), args...)
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
}

// keysSeen reads into seen which of keys were used within the replay
// window (the expired ones are pruned already), with the seq of their
// first result (SQLite).
func (s *Store) keysSeen(ctx context.Context, tx *sql.Tx, keys []string, seen map[string]int64) error {
	return s.chunked(len(keys), func(lo, hi int) error {
		var args []any
		for _, k := range keys[lo:hi] {
			args = append(args, k)
		}
		rows, err := s.queryTxPrepared(ctx, tx, `SELECT key, seq FROM idempotency WHERE key IN (`+placeholders(hi-lo)+`)`, args...)
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
}

// replayedSeq is the first result of a replayed idempotency key: the
// version with seq, read through q (the batch's transaction, or the
// database: ReplayOf).
func (s *Store) replayedSeq(ctx context.Context, q queryRower, seq int64) (PublishResult, error) {
	row := s.queryRowPrepared(ctx, q, s.d.rebind(`SELECT `+versionCols+` FROM versions v JOIN facts f
		ON f.patient = v.patient AND f.domain = v.domain WHERE v.seq = ?`), seq)
	r, err := s.scanVersion(ctx, row)
	if err != nil {
		return PublishResult{}, fmt.Errorf("store: publish: replay: %w", err)
	}
	return PublishResult{Version: r.v, Created: r.v.N == 1, Replayed: true, Seq: seq}, nil
}

// headSig is a chain head's signature (P-26) made ahead of the batch's
// decisions: the hash it covers, the signature and its key's id.
type headSig struct{ hash, sig, key string }

// signAhead signs, on other goroutines while the batch reads, the chain
// head each job planned outside the lock will commit if the reads confirm
// its plan: its next version written at now (nextVersion), which depends on
// nothing the reads return. Signing was most of the CPU a batch spent
// holding the write lock; ahead, it overlaps the round trip of the reads.
// The returned wait gives the signatures by job index (zero where none was
// made); a job the reads refuse or replay leaves its signature unused, and
// signHeads signs whatever was not signed ahead.
func (s *Store) signAhead(jobs []*publishJob, now time.Time) (wait func() []headSig) {
	sigs := make([]headSig, len(jobs))
	var todo []int
	for i, j := range jobs {
		if !j.underLock && !j.pl.unchanged {
			todo = append(todo, i)
		}
	}
	if len(todo) == 0 {
		return func() []headSig { return sigs }
	}
	signed := spread(len(todo), func(k int) {
		j := jobs[todo[k]]
		v := s.nextVersion(j.in, now, j.pl)
		sig, key := s.sign(chainHeadPreimage(v.URI(), v.Hash))
		sigs[todo[k]] = headSig{hash: v.Hash, sig: sig, key: key}
	})
	return func() []headSig {
		signed()
		return sigs
	}
}

// spread runs fn(k) for every k in [0, n) on other goroutines — one per
// 4 items, at most GOMAXPROCS, each taking every workers-th k — and
// returns a wait that returns once every call has.
func spread(n int, fn func(k int)) (wait func()) {
	workers := max(1, min(runtime.GOMAXPROCS(0), n/4))
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for k := w; k < n; k += workers {
				fn(k)
			}
		})
	}
	return wg.Wait
}

// signHeads sets the chain head signature of each new version (P-26):
// the one signAhead made for its job when it covers the version's hash,
// else a new one, spreading the signatures of many over the cores.
func (s *Store) signHeads(rows []versionRow, ahead []headSig) {
	var todo []int
	for i := range rows {
		if a := ahead[rows[i].job]; a.sig != "" && a.hash == rows[i].v.Hash {
			rows[i].headSig, rows[i].headKey = a.sig, a.key
		} else {
			todo = append(todo, i)
		}
	}
	sign := func(r *versionRow) { r.headSig, r.headKey = s.sign(chainHeadPreimage(r.v.URI(), r.v.Hash)) }
	if min(runtime.GOMAXPROCS(0), len(todo)/4) < 2 { // too few to be worth goroutines
		for _, i := range todo {
			sign(&rows[i])
		}
		return
	}
	spread(len(todo), func(k int) { sign(&rows[todo[k]]) })()
}

type versionRow struct {
	job              int // the index of its job in the batch
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
	versions  []versionRow
	facts     []factRow         // the facts whose head moves, in the order they first do
	factAt    map[[2]string]int // (patient, domain) → its index in facts
	keys      []keyRow
	audits    []AuditEntry
	auditHead *auditTail // the audit head after audits; nil when there are none
}

// factRow is a fact's head after its batch: a new facts row when the fact
// was created in the batch, else its latest moved.
type factRow struct {
	patient, domain string
	audience        models.Audience
	latest          int
	created         bool
}

// moveFact records that v is its fact's head. A fact moved twice in one
// batch keeps one row, with the later version, so no statement writes a
// fact twice (Postgres runs a statement's CTEs on one snapshot: an update
// would not see the same statement's insert).
func (w *batchWrites) moveFact(v models.Version) {
	k := [2]string{v.Patient, v.Domain}
	if i, ok := w.factAt[k]; ok {
		w.facts[i].latest = v.N
		return
	}
	if w.factAt == nil {
		w.factAt = map[[2]string]int{}
	}
	w.factAt[k] = len(w.facts)
	w.facts = append(w.facts, factRow{patient: v.Patient, domain: v.Domain, audience: v.Audience, latest: v.N, created: v.N == 1})
}

// batchTable is one table's rows of a batch: given to Postgres as one
// array per column (unnest), to SQLite as multi-row VALUES.
type batchTable struct {
	name    string // names the rows in errors and the Postgres CTE
	arrays  string // the Postgres statement, one ?::type[] array per column
	values  string // the SQLite statement; the rows follow its "VALUES"
	n, cols int
	row     func(i int) []any
}

// tables is w as one batchTable per statement, in the order SQLite runs them.
func (w batchWrites) tables() []batchTable {
	var created, moved []factRow
	for _, f := range w.facts {
		if f.created {
			created = append(created, f)
		} else {
			moved = append(moved, f)
		}
	}
	const versionColumns = `(seq, patient, domain, n, audience, value, sealed, author_id, author_label, written_at, stale_after, priority,
		prev_hash, hash, head_sig, head_key, audio_type, audio_size, audio_ms, audio_alexa, audio_sha256, audio)`
	const auditColumns = `(seq, at, actor, uri, outcome, reason, via, author, count, last_at, mac)`
	return []batchTable{{
		name: "new_versions",
		arrays: `INSERT INTO versions ` + versionColumns + `
			SELECT * FROM unnest(?::bigint[], ?::text[], ?::text[], ?::integer[], ?::text[], ?::bytea[], ?::integer[], ?::text[], ?::text[],
			?::bigint[], ?::bigint[], ?::float8[], ?::text[], ?::text[], ?::text[], ?::text[],
			?::text[], ?::bigint[], ?::bigint[], ?::bigint[], ?::text[], ?::bytea[])`,
		values: `INSERT INTO versions ` + versionColumns + ` VALUES`,
		n:      len(w.versions), cols: 22,
		row: func(i int) []any {
			r := w.versions[i]
			v, a := r.v, r.audio
			return []any{r.seq, v.Patient, v.Domain, v.N, string(v.Audience), r.stored, sqlBool(r.sealed), v.AuthorID, v.AuthorLabel,
				v.WrittenAt.UnixMilli(), msOrZero(v.StaleAfter), v.Priority, v.PrevHash, v.Hash, r.headSig, r.headKey,
				a.mimeType, a.size, a.ms, int64(sqlBool(a.alexa)), a.sha256, a.stored}
		},
	}, {
		name:   "new_facts",
		arrays: `INSERT INTO facts (patient, domain, audience, latest) SELECT * FROM unnest(?::text[], ?::text[], ?::text[], ?::integer[])`,
		values: `INSERT INTO facts (patient, domain, audience, latest) VALUES`,
		n:      len(created), cols: 4,
		row: func(i int) []any {
			f := created[i]
			return []any{f.patient, f.domain, string(f.audience), f.latest}
		},
	}, {
		name: "moved_facts",
		arrays: `UPDATE facts SET latest = m.n FROM unnest(?::text[], ?::text[], ?::integer[]) AS m(patient, domain, n)
			WHERE facts.patient = m.patient AND facts.domain = m.domain`,
		values: `UPDATE facts SET latest = m.column3 FROM (VALUES) AS m WHERE facts.patient = m.column1 AND facts.domain = m.column2`,
		n:      len(moved), cols: 3,
		row: func(i int) []any {
			f := moved[i]
			return []any{f.patient, f.domain, f.latest}
		},
	}, {
		name:   "new_keys",
		arrays: `INSERT INTO idempotency (key, at_ms, seq) SELECT * FROM unnest(?::text[], ?::bigint[], ?::bigint[])`,
		values: `INSERT INTO idempotency (key, at_ms, seq) VALUES`,
		n:      len(w.keys), cols: 3,
		row: func(i int) []any {
			k := w.keys[i]
			return []any{k.key, k.at, k.seq}
		},
	}, {
		name: "new_audit",
		arrays: `INSERT INTO audit ` + auditColumns + `
			SELECT * FROM unnest(?::bigint[], ?::bigint[], ?::text[], ?::text[], ?::text[], ?::text[], ?::text[], ?::text[], ?::bigint[], ?::bigint[], ?::text[])`,
		values: `INSERT INTO audit ` + auditColumns + ` VALUES`,
		n:      len(w.audits), cols: 11,
		row: func(i int) []any {
			e := w.audits[i]
			return []any{e.Seq, e.At.UnixMilli(), e.Actor, e.URI, e.Outcome, string(e.Reason), e.Via, e.Author, e.Count, msOrZero(e.LastAt), e.MAC}
		},
	}}
}

// writeBatch writes w and signs the audit head (when w.auditHead is set):
// on Postgres in one statement (writeBatchPostgres), on SQLite a
// multi-row statement per table.
func (s *Store) writeBatch(ctx context.Context, tx *sql.Tx, w batchWrites) error {
	if s.arrays() {
		if err := s.writeBatchPostgres(ctx, tx, w); err != nil {
			return fmt.Errorf("store: publish: write: %w", err)
		}
		return nil
	}
	// The audit head's signature (P-26) depends only on the head the
	// decisions left, so it is made on another core while the rows are
	// written: an Ed25519 signature was a tenth of the CPU a lone write
	// spent holding the write lock (issue 17).
	var auditSig func() (sig, kid string)
	if h := w.auditHead; h != nil {
		done := make(chan struct{})
		var sig, kid string
		go func() {
			defer close(done)
			sig, kid = s.sign(auditHeadPreimage(h.count, h.last))
		}()
		auditSig = func() (string, string) { <-done; return sig, kid }
	}
	for _, t := range w.tables() {
		err := s.chunked(t.n, func(lo, hi int) error {
			args := make([]any, 0, t.cols*(hi-lo))
			for i := lo; i < hi; i++ {
				args = append(args, t.row(i)...)
			}
			_, err := s.execPrepared(ctx, tx, strings.Replace(t.values, "VALUES", "VALUES "+rowsOf(hi-lo, t.cols), 1), args...)
			return err
		})
		if err != nil {
			return fmt.Errorf("store: publish: %s: %w", t.name, err)
		}
	}
	if h := w.auditHead; h != nil {
		sig, kid := auditSig()
		return s.storeAuditHead(ctx, tx, h.count, h.last, sig, kid)
	}
	return nil
}

// writeBatchPostgres writes w in one statement: each table's rows a
// data-modifying CTE taking one array per column, then the audit head's
// update and signature, and NOTIFY (delivered on commit) naming the batch's
// last version — the highest seq, as the write lock is held. No two CTEs
// touch one row (moveFact), which Postgres leaves unordered.
func (s *Store) writeBatchPostgres(ctx context.Context, tx *sql.Tx, w batchWrites) error {
	var (
		q    strings.Builder
		args []any
	)
	cte := func(name, stmt string) {
		if q.Len() == 0 {
			q.WriteString("WITH ")
		} else {
			q.WriteString(",\n")
		}
		q.WriteString(name + " AS (" + stmt + ")")
	}
	for _, t := range w.tables() {
		if t.n == 0 {
			continue
		}
		cs := make([][]any, t.cols)
		for i := range t.n {
			for c, v := range t.row(i) {
				cs[c] = append(cs[c], v)
			}
		}
		for _, c := range cs {
			args = append(args, typedArray(c))
		}
		cte(t.name, t.arrays)
	}
	if h := w.auditHead; h != nil {
		sig, kid := s.sign(auditHeadPreimage(h.count, h.last))
		cte("audit_head_moved", `UPDATE audit_head SET count = ?, last_mac = ?, sig = ?, key_id = ? WHERE id = 1`)
		args = append(args, h.count, h.last, sig, kid)
	}
	if q.Len() == 0 {
		return nil
	}
	if n := len(w.versions); n > 0 {
		payload, err := changeNotice(w.versions[n-1])
		if err != nil {
			return fmt.Errorf("notify: %w", err)
		}
		q.WriteString("\nSELECT pg_notify(?, ?)")
		args = append(args, s.d.(postgresDialect).channel, payload)
	} else {
		q.WriteString("\nSELECT 1")
	}
	_, err := s.execPrepared(ctx, tx, s.rebound(q.String()), args...)
	return err
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
