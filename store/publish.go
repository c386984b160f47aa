package store

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"errors"
	"fmt"
	"hash/fnv"
	"sync"
	"time"

	"github.com/unsay/unsay/models"
)

// replayWindow is how long an IdempotencyKey is remembered (P-12): 600 s.
const replayWindow = 600 * time.Second

// publishAttempts bounds how many times Publish seals a value for a
// version number that another writer then takes (a writer in another
// process; in-process writers of one fact queue on its fact lock). The
// last attempt seals under the write lock, so Publish always progresses.
const publishAttempts = 5

// factLocks is the number of stripes of Store.factMu.
const factLocks = 64

// planReadSlots bounds the Publishes reading their fact's head outside the
// write lock at once (Store.planReads): 12, a margin below both backends'
// pools of 16 connections (pgMaxOpenConns, openSQLite), which the leader of
// the next batch and the readers share. With 64 writers and no bound, the
// reads of the writers queued for the next batch held every connection and
// the leader waited 2–2.5 ms of its ~9.4 ms batch on Postgres to begin.
const planReadSlots = 12

// errHeadMoved: the fact's current version changed between planning a
// write (outside the write lock) and committing it; Publish plans again.
var errHeadMoved = errors.New("store: the fact's current version moved")

// Publish validates in (Validate), checks p may write it, refuses an
// audience change before any state changes (P-3), stamps WrittenAt from
// the clock truncated to ms, chains, signs (P-26) and commits version n+1
// durably, appends in.Audit (when set) in the same transaction, and wakes
// the change feed without blocking.
//
// Rights: p needs care.write and to be bound to the patient (ErrForbidden);
// an assistant-only fact — in's audience is assistant, or the domain's is —
// also needs care.write.assistant, and without it every such write is
// ErrNeedsAssistantWrite, decided before the store is read, so the answer
// for an assistant-only domain is the same whether or not it exists.
//
// Errors: *ValidationError (ErrInvalid), ErrForbidden,
// ErrNeedsAssistantWrite, ErrAudienceChange, ErrSealerUnavailable (a
// key-service outage while sealing), *UnavailableError (ErrUnavailable:
// the store cannot commit — a full or read-only disk, an unreachable
// database, a SQLite file another process held locked for the whole busy
// timeout; a write queued behind another writer that waited out that
// timeout is refused with it at once instead of waiting again, and a
// batch that could not take the lock fails as one, not retried write by
// write: T4), ErrAbandoned (ctx ended before the write lock was taken). In
// every error case nothing was written.
//
// Cancellation: ctx bounds the wait for the fact's lock-free planning and
// for the store's write lock. Once the lock is held the write no longer
// depends on ctx and commits (a client that hangs up then has its write
// applied and audited accepted), so a write is never half-done or
// uncertain.
//
// Unchanged writes: when in's Value, Audience, AuthorID, AuthorLabel
// (normalized as Validate does), StaleAfter (to the ms) and Priority all
// equal the fact's current version, nothing is written: the current version
// is returned with Unchanged = true, Created = false and its own Seq, and
// the change feed is not woken. An IdempotencyKey on such a write is still
// remembered, so its replay answers Replayed with that version.
//
// Versions of one fact are contiguous under any concurrency: writers are
// serialized by a process mutex and the database write lock (BEGIN
// IMMEDIATE on SQLite). The value is sealed BEFORE the write lock is taken
// (with KMS, Seal is a network round trip): Publish reads the current
// version number n outside the lock, seals for n+1 (the AAD names the
// version), and under the lock checks that n is still current, planning
// again if another writer took n+1 (at most publishAttempts times; the
// last attempt seals under the lock). The first attempt takes n from the
// head this process last committed for the fact when it kept it and the
// write certainly changes it (planCached: no read), checked under the lock
// the same way. WrittenAt and the hash chain are
// computed under the lock. Writers of the same fact in this process queue
// on a per-fact lock first, so they never race each other for n+1.
//
// With an IdempotencyKey seen within the last 600 s, the first write's
// result is returned with Replayed = true and nothing is written (the key
// is checked in the same transaction as the write).
func (s *Store) Publish(ctx context.Context, p models.Principal, in PublishInput) (PublishResult, error) {
	if !p.Can(models.ScopeWrite) {
		return PublishResult{}, ErrForbidden
	}
	in, err := Validate(in)
	if err != nil {
		return PublishResult{}, err
	}
	if !p.CanAccessPatient(in.Patient) {
		return PublishResult{}, ErrForbidden
	}
	mayAssistant := p.CanWrite(in.Patient, models.AudienceAssistant)
	if !p.CanWrite(in.Patient, in.Audience) {
		return PublishResult{}, ErrNeedsAssistantWrite
	}
	mu := s.factLock(in.Patient, in.Domain)
	mu.Lock()
	defer mu.Unlock()
	for attempt := 1; ; attempt++ {
		res, err := s.publishOnce(ctx, in, attempt == 1, attempt == publishAttempts)
		if errors.Is(err, errHeadMoved) && attempt < publishAttempts {
			s.heads.Remove([2]string{in.Patient, in.Domain}) // planned against a head since moved: read it
			continue
		}
		switch {
		case errors.Is(err, ErrAudienceChange) && !mayAssistant:
			// The domain is assistant-only (in asked for user): the same
			// answer as writing it as assistant without the scope.
			return PublishResult{}, ErrNeedsAssistantWrite
		case err != nil && ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)):
			return PublishResult{}, fmt.Errorf("store: publish: %w: %w", ErrAbandoned, ctx.Err())
		}
		return res, s.writeErr(err)
	}
}

// ReplayOf returns what Publish would answer a replay of the write whose
// IdempotencyKey is key (P-12): that write's first result, Replayed =
// true, nothing written, ok true — when key was stored within the last
// 600 s; ok false when it was not (or is older). A caller that would
// refuse a request before Publish for a reason its stored first attempt
// did not have (a signed /write retried after its own staleAfter passed)
// asks it first, so the retry gets the replay's answer. The version is
// read and checked as every served read is (ErrIntegrity on a mismatch).
func (s *Store) ReplayOf(ctx context.Context, key string) (PublishResult, bool, error) {
	if key == "" {
		return PublishResult{}, false, nil
	}
	var seq int64
	cutoff := s.clock().UTC().Truncate(time.Millisecond).Add(-replayWindow).UnixMilli()
	err := s.queryRowPrepared(ctx, s.db, s.d.rebind(`SELECT seq FROM idempotency WHERE key = ? AND at_ms > ?`), key, cutoff).Scan(&seq)
	if errors.Is(err, sql.ErrNoRows) {
		return PublishResult{}, false, nil
	}
	if err != nil {
		return PublishResult{}, false, fmt.Errorf("store: replay: %w", err)
	}
	res, err := s.replayedSeq(ctx, s.db, seq)
	if err != nil {
		return PublishResult{}, false, err
	}
	return res, true, nil
}

// factLock returns the stripe of factMu serializing this process's
// Publishes of one fact (a stripe may be shared by several facts).
func (s *Store) factLock(patient, domain string) *sync.Mutex {
	h := fnv.New32a()
	h.Write([]byte(patient))
	h.Write([]byte{0})
	h.Write([]byte(domain))
	return &s.factMu[h.Sum32()%factLocks]
}

// publishOnce is one attempt of Publish. Unless underLock, it plans (reads
// the current version, compares, seals) before taking the write lock and
// returns errHeadMoved if the fact moved meanwhile; underLock plans inside
// the write transaction. With cached (Publish's first attempt) it plans
// against the head this process last committed for the fact, when it has
// it and the write certainly changes it (planCached), instead of reading
// it. The write commits in a batch with the Publishes that reach the write
// lock with it (group.go), on a context ctx's end does not cancel once its
// batch began (see Publish).
func (s *Store) publishOnce(ctx context.Context, in PublishInput, cached, underLock bool) (PublishResult, error) {
	var (
		pl  plan
		ok  bool
		err error
	)
	if !underLock {
		if cached {
			if pl, ok, err = s.planCached(ctx, in); err != nil {
				return PublishResult{}, err
			}
		}
		if !ok {
			if pl, err = s.planVersion(ctx, s.db, in, true); err != nil {
				return PublishResult{}, err
			}
		}
	}
	return s.publishGrouped(&publishJob{ctx: ctx, in: in, pl: pl, underLock: underLock})
}

// lockFileWriters takes writeMu on SQLite and returns its unlock; on
// Postgres it takes nothing. SQLite has one write lock for the whole file:
// a transaction that meets another's spins in SQLite's busy handler, which
// sleeps 1, 2, 5, 10… ms between tries — so every in-process writer of any
// table (the heard ledger and the alert budget too, not only the fact
// writers that take writeMu on both backends) queues on writeMu instead.
// Postgres locks rows and tables; the ledger's and the budget's own locks
// suffice there, and a Publish batch holding writeMu does not delay them.
// Callers take their own mutex first and never hold writeMu when calling it.
func (s *Store) lockFileWriters() (unlock func()) {
	if _, ok := s.d.(postgresDialect); ok {
		return func() {}
	}
	s.writeMu.Lock()
	return s.writeMu.Unlock
}

// beginWrite begins a write transaction holding the store-wide write lock.
// The transaction is not bound to ctx (database/sql would roll it back,
// or fail its commit, when ctx ends): ctx bounds only the wait for the
// lock, and if ctx ended meanwhile beginWrite gives the lock back and
// returns ctx's error, so nothing is written. Callers that must commit
// regardless of ctx from here on (Publish) run their statements on
// context.WithoutCancel(ctx).
func (s *Store) beginWrite(ctx context.Context) (*sql.Tx, error) {
	tx, err := s.beginTx(context.WithoutCancel(ctx))
	if err != nil {
		return nil, fmt.Errorf("store: begin: %w", err)
	}
	if err := s.d.lockWrites(ctx, tx); err != nil {
		tx.Rollback()
		return nil, fmt.Errorf("store: write lock: %w", err)
	}
	if err := ctx.Err(); err != nil {
		tx.Rollback()
		return nil, fmt.Errorf("store: write lock: %w", err)
	}
	return tx, nil
}

// plan is a write decided from the fact's current version (its head): the
// head it was decided against, and either "unchanged" or the new value's
// stored bytes, sealed for version head+1.
type plan struct {
	found     bool // the fact exists; head is its current version
	head      row  // head.v.Value is set only when unchanged
	unchanged bool
	stored    []byte
	sealed    bool
	audio     []byte // the clip's stored bytes (sealed with the value's AAD), nil for text only
}

// queryRower is *sql.DB or *sql.Tx.
type queryRower interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// planVersion reads in's fact's current version through q, refuses an
// audience change (P-3), detects an unchanged write when detectUnchanged,
// and otherwise seals in.Value for the next version number. It writes
// nothing. A head whose value cannot be opened (other than a sealer outage,
// which is returned) is treated as changed, so a correction can always
// supersede a damaged version.
//
// Outside the write lock (q is s.db) the read waits for one of
// s.planReads's slots first, and returns ctx's error if ctx ends meanwhile.
func (s *Store) planVersion(ctx context.Context, q queryRower, in PublishInput, detectUnchanged bool) (plan, error) {
	var pl plan
	r, err := s.readHead(ctx, q, in.Patient, in.Domain)
	switch {
	case errors.Is(err, sql.ErrNoRows):
	case err != nil:
		return plan{}, fmt.Errorf("store: publish: %w", err)
	case r.v.Audience != in.Audience:
		return plan{}, ErrAudienceChange
	default:
		pl.found, pl.head = true, r
	}
	if pl.found && detectUnchanged && sameFields(r.v, in) {
		value, err := s.open(ctx, r)
		if err == nil && value == in.Value {
			err = s.loadAudio(ctx, q, &r, false) // audio_read.go; a no-op for text
		}
		switch {
		case errors.Is(err, ErrSealerUnavailable):
			return plan{}, fmt.Errorf("store: publish: %w", err)
		case err != nil:
			s.log.WarnContext(ctx, "store: publish: the current version cannot be opened to compare; writing a new version",
				"uri", r.v.URI().String(), "err", err)
		case value == in.Value && (r.v.Audio == nil || sameAudio(in, r.v.Audio.MIMEType, r.v.Audio.Data)):
			pl.head.v.Value, pl.head.v.Audio, pl.unchanged = value, r.v.Audio, true
			return pl, nil
		}
	}
	return s.sealNext(ctx, in, pl)
}

// sealNext seals in's value (and clip) for the version after pl's head.
func (s *Store) sealNext(ctx context.Context, in PublishInput, pl plan) (plan, error) {
	next := models.Version{Patient: in.Patient, Domain: in.Domain, N: pl.head.v.N + 1, Audience: in.Audience, Value: in.Value}
	var err error
	if pl.stored, pl.sealed, err = s.seal(ctx, next); err != nil {
		return plan{}, err
	}
	if len(in.Audio) > 0 {
		if pl.audio, err = s.sealAudio(ctx, next, in.Audio); err != nil {
			return plan{}, err
		}
	}
	return pl, nil
}

// headCacheSize bounds Store.heads: the heads of the 4,096 facts this
// process committed most recently.
const headCacheSize = 4096

// cachedHead is a fact's head as this process committed it (a head
// without a clip), kept so the fact's next Publish plans without reading
// it: the version without its value, and the value's SHA-256.
type cachedHead struct {
	v     models.Version // Value empty, Audio nil
	value [sha256.Size]byte
}

// planCached plans in against the head this process last committed for
// in's fact, without a read, when it has that head and in certainly
// changes it: the same audience (an audience change is left to
// planVersion, which reads), and another value or another field. ok is
// false otherwise — no head kept, or a write that may be unchanged, which
// planVersion decides from the stored version. The plan is checked under
// the write lock like any other (checkPlannedHead: the head read there
// must have the cached number and hash, and the hash covers the value):
// when another instance, or a Seed, moved the fact meanwhile the write is
// refused errHeadMoved and Publish plans again by reading.
func (s *Store) planCached(ctx context.Context, in PublishInput) (pl plan, ok bool, err error) {
	h, found := s.heads.Get([2]string{in.Patient, in.Domain})
	if !found || h.v.Audience != in.Audience || sameFields(h.v, in) && h.value == sha256.Sum256([]byte(in.Value)) {
		return plan{}, false, nil
	}
	pl, err = s.sealNext(ctx, in, plan{found: true, head: row{v: h.v, latest: h.v.N}})
	return pl, err == nil, err
}

// keepHeads remembers the heads a batch committed, for planCached; a
// head with a clip is forgotten instead (its bytes would be needed to
// compare).
func (s *Store) keepHeads(rows []versionRow) {
	for _, r := range rows {
		k := [2]string{r.v.Patient, r.v.Domain}
		if r.v.Audio != nil {
			s.heads.Remove(k)
			continue
		}
		v := r.v
		v.Value = ""
		s.heads.Add(k, cachedHead{v: v, value: sha256.Sum256([]byte(r.v.Value))})
	}
}

// readHead reads the current version of the fact (patient, domain)
// through q, without opening its value.
func (s *Store) readHead(ctx context.Context, q queryRower, patient, domain string) (row, error) {
	if q == queryRower(s.db) {
		select {
		case s.planReads <- struct{}{}:
			defer func() { <-s.planReads }()
		case <-ctx.Done():
			return row{}, ctx.Err()
		}
	}
	return scanRaw(s.queryRowPrepared(ctx, q, s.d.rebind(`SELECT `+versionCols+` FROM facts f `+s.d.latestJoin()+`
		WHERE f.patient = ? AND f.domain = ?`), patient, domain))
}

// sameFields reports whether a write of in would repeat v in every field
// but the value and the clip's bytes (compared after opening them):
// audience, author id and label, stale-after, priority, and the clip's
// presence, type and size. in is normalized by validate.
func sameFields(v models.Version, in PublishInput) bool {
	sameClip := v.Audio == nil && len(in.Audio) == 0 ||
		v.Audio != nil && v.Audio.MIMEType == in.AudioType && v.Audio.Size == len(in.Audio)
	return v.Audience == in.Audience && v.AuthorID == in.AuthorID && v.AuthorLabel == in.AuthorLabel &&
		v.StaleAfter.Equal(in.StaleAfter) && v.Priority == in.Priority && sameClip
}

// appendVersion chains and inserts version n+1 of in's fact, written at
// writtenAt, inside tx (which holds the write lock), sealing under the
// lock. The audience check comes first, before any statement that changes
// state (P-3). Seed writes through it; Publish plans (and seals) first and
// calls insertVersion.
func (s *Store) appendVersion(ctx context.Context, tx *sql.Tx, in PublishInput, writtenAt time.Time) (models.Version, int64, error) {
	pl, err := s.planVersion(ctx, tx, in, false)
	if err != nil {
		return models.Version{}, 0, err
	}
	return s.insertVersion(ctx, tx, in, writtenAt, pl)
}

// insertVersion inserts version head+1 of in's fact with pl's stored
// bytes, chained to pl's head, written at writtenAt, inside tx (which holds
// the write lock and in which pl's head is current).
func (s *Store) insertVersion(ctx context.Context, tx *sql.Tx, in PublishInput, writtenAt time.Time, pl plan) (models.Version, int64, error) {
	var seq int64
	if err := s.queryRowPrepared(ctx, tx, `SELECT COALESCE(MAX(seq), 0) + 1 FROM versions`).Scan(&seq); err != nil {
		return models.Version{}, 0, fmt.Errorf("store: publish: %w", err)
	}
	v, err := s.insertVersionAt(ctx, tx, in, writtenAt, pl, seq)
	return v, seq, err
}

// insertVersionAt is insertVersion with the version's sequence number seq
// (MAX(seq)+1 under the write lock, allocated by the caller).
func (s *Store) insertVersionAt(ctx context.Context, tx *sql.Tx, in PublishInput, writtenAt time.Time, pl plan, seq int64) (models.Version, error) {
	v := s.nextVersion(in, writtenAt, pl)
	latest := v.N - 1
	headSig, headKey := s.sign(chainHeadPreimage(v.URI(), v.Hash)) // P-26: the new head, signed at commit
	stored, sealed := pl.stored, pl.sealed
	a := audioColumnsOf(v, pl)
	if _, err := s.execPrepared(ctx, tx, s.d.rebind(`INSERT INTO versions
		(seq, patient, domain, n, audience, value, sealed, author_id, author_label, written_at, stale_after, priority, prev_hash, hash, head_sig, head_key,
		 audio_type, audio_size, audio_ms, audio_alexa, audio_sha256, audio)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`),
		seq, v.Patient, v.Domain, v.N, string(v.Audience), stored, sqlBool(sealed), v.AuthorID, v.AuthorLabel,
		v.WrittenAt.UnixMilli(), msOrZero(v.StaleAfter), v.Priority, v.PrevHash, v.Hash, headSig, headKey,
		a.mimeType, a.size, a.ms, sqlBool(a.alexa), a.sha256, a.stored); err != nil {
		return models.Version{}, fmt.Errorf("store: publish: %w", err)
	}
	var err error
	if latest == 0 {
		_, err = s.execPrepared(ctx, tx, s.d.rebind(`INSERT INTO facts (patient, domain, audience, latest) VALUES (?, ?, ?, 1)`),
			v.Patient, v.Domain, string(v.Audience))
	} else {
		_, err = s.execPrepared(ctx, tx, s.d.rebind(`UPDATE facts SET latest = ? WHERE patient = ? AND domain = ?`),
			v.N, v.Patient, v.Domain)
	}
	if err != nil {
		return models.Version{}, fmt.Errorf("store: publish: %w", err)
	}
	return v, nil
}

// nextVersion is version head+1 of in's fact as pl planned it, written at
// writtenAt, chained to pl's head and hashed (P-5).
func (s *Store) nextVersion(in PublishInput, writtenAt time.Time, pl plan) models.Version {
	latest, prevHash := 0, ""
	if pl.found {
		latest, prevHash = pl.head.v.N, pl.head.v.Hash
	}
	v := models.Version{
		Patient:     in.Patient,
		Domain:      in.Domain,
		N:           latest + 1,
		Audience:    in.Audience,
		Value:       in.Value,
		AuthorID:    in.AuthorID,
		AuthorLabel: in.AuthorLabel,
		WrittenAt:   writtenAt.UTC().Truncate(time.Millisecond),
		StaleAfter:  in.StaleAfter,
		Priority:    in.Priority,
		PrevHash:    prevHash,
		Audio:       audioOf(in),
	}
	v.Hash = hashOf(v) // AudioVersionHash over the clip's bytes when it has one (P-5)
	return v
}

// audioColumns are the versions table's audio columns for one version:
// zero values and a NULL clip for a text-only version.
type audioColumns struct {
	mimeType, sha256 string
	size, ms         int64
	alexa            bool
	stored           []byte // the clip sealed with the value's AAD; nil (NULL) for text only
}

func audioColumnsOf(v models.Version, pl plan) audioColumns {
	a := v.Audio
	if a == nil {
		return audioColumns{}
	}
	return audioColumns{mimeType: a.MIMEType, sha256: a.SHA256, size: int64(a.Size), ms: a.Duration.Milliseconds(),
		alexa: a.AlexaPlayable, stored: pl.audio}
}

func msOrZero(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}
