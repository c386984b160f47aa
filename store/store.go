package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"math"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/unsay/unsay/models"
)

// Sealer seals and opens values at rest (P-6). The store calls Seal on
// publish and Open on every read and verify; aad is
// "patient|domain|v{n}|audience". Implemented by store/envelope.
type Sealer interface {
	Seal(ctx context.Context, aad, plaintext []byte) ([]byte, error)
	Open(ctx context.Context, aad, sealed []byte) ([]byte, error)
	// Receipt describes sealed bytes for /verify without opening them.
	Receipt(aad, sealed []byte) (*AtRestReceipt, error)
	// Name is "local" or "kms" (the startup line's encryption mode).
	Name() string
}

// Options configure Open.
type Options struct {
	// DSN is a SQLite file path ("./unsay.db", ":memory:" not supported) or,
	// once the Postgres backend exists, a postgres:// URL.
	DSN string
	// Clock is the server clock; nil means time.Now. Tests inject one.
	Clock func() time.Time
	// AuditKey keys the audit log's HMAC chain (UNSAY_AUDIT_KEY). Empty
	// means DevAuditKey, a development default (UsesDevAuditKey reports it).
	AuditKey []byte
	// Sealer seals values at rest; nil stores plaintext (startup says PLAINTEXT).
	Sealer Sealer
	// Logger receives background errors (a watcher's failed query); nil discards.
	Logger *slog.Logger
}

// replayWindow is how long an IdempotencyKey is remembered (P-12): 600 s.
const replayWindow = 600 * time.Second

// feedPollInterval is how often an idle watcher re-queries the feed even
// without a wakeup (writes by another process on the same file): 1 s.
const feedPollInterval = time.Second

// feedBatch is how many changes a watcher reads per query.
const feedBatch = 256

// Store is the live care store. It is safe for concurrent use.
type Store struct {
	db       *sql.DB
	d        dialect
	clock    func() time.Time
	sealer   Sealer
	chainKey []byte
	devKey   bool
	log      *slog.Logger

	// writeMu serializes this process's writers (Publish, Seed, Audit,
	// Rekey, link codes) in front of the database's own write lock, so
	// in-process writers queue on a mutex instead of spinning on SQLITE_BUSY.
	writeMu sync.Mutex
	// factMu stripes serialize this process's Publishes per fact (see
	// Publish), taken before writeMu and never while holding it.
	factMu [factLocks]sync.Mutex

	wakeMu sync.Mutex
	wake   chan struct{} // closed and replaced after every commit
	closed chan struct{}
	once   sync.Once

	readLatest *sql.Stmt
	readN      *sql.Stmt
	stmts      sync.Map // query → *sql.Stmt, the write path's prepared statements (stmt.go)
}

// Open opens (creating and migrating if needed) the store at opts.DSN.
// A DSN beginning postgres:// or postgresql:// opens the Postgres backend
// (dialect_postgres.go). Errors: a bad DSN, an unreadable or corrupt
// database file, an unreachable server, a failed migration.
func Open(ctx context.Context, opts Options) (*Store, error) {
	if IsPostgresDSN(opts.DSN) {
		return openPostgres(ctx, opts)
	}
	db, err := openSQLite(opts.DSN)
	if err != nil {
		return nil, err
	}
	s, err := newStore(ctx, db, sqliteDialect{}, opts)
	if err != nil {
		db.Close()
		return nil, err
	}
	return s, nil
}

// newStore migrates db and prepares the store over it.
func newStore(ctx context.Context, db *sql.DB, d dialect, opts Options) (*Store, error) {
	if err := db.PingContext(ctx); err != nil {
		return nil, fmt.Errorf("store: open: %w", err)
	}
	if err := migrate(ctx, db, d); err != nil {
		return nil, err
	}
	s := &Store{
		db:     db,
		d:      d,
		clock:  opts.Clock,
		sealer: opts.Sealer,
		log:    opts.Logger,
		wake:   make(chan struct{}),
		closed: make(chan struct{}),
	}
	if s.clock == nil {
		s.clock = time.Now
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	key := opts.AuditKey
	if len(key) == 0 {
		key = []byte(DevAuditKey)
		s.devKey = true
	}
	s.chainKey = auditChainKey(key)
	var err error
	if s.readLatest, err = db.PrepareContext(ctx, d.rebind(`SELECT `+versionCols+` FROM facts f JOIN versions v
		ON v.patient = f.patient AND v.domain = f.domain AND v.n = f.latest
		WHERE f.patient = ? AND f.domain = ?`)); err != nil {
		return nil, fmt.Errorf("store: prepare: %w", err)
	}
	if s.readN, err = db.PrepareContext(ctx, d.rebind(`SELECT `+versionCols+` FROM facts f JOIN versions v
		ON v.patient = f.patient AND v.domain = f.domain
		WHERE f.patient = ? AND f.domain = ? AND v.n = ?`)); err != nil {
		return nil, fmt.Errorf("store: prepare: %w", err)
	}
	return s, nil
}

// Close stops every watcher and releases the database.
func (s *Store) Close() error {
	var err error
	s.once.Do(func() {
		close(s.closed)
		s.readLatest.Close()
		s.readN.Close()
		s.closeStatements()
		err = s.db.Close()
	})
	return err
}

// DB is the underlying database handle, for packages that keep their own
// tables through database/sql (the speech ledger, link codes, the audible
// budget). Dialect says "sqlite" or "postgres". On SQLite every
// transaction begins IMMEDIATE (it takes the write lock at BEGIN).
func (s *Store) DB() (*sql.DB, string) { return s.db, s.d.name() }

// Now is the store's clock.
func (s *Store) Now() time.Time { return s.clock() }

// Sealer is the sealer values are sealed with, or nil for plaintext.
func (s *Store) Sealer() Sealer { return s.sealer }

// UsesDevAuditKey reports whether the audit chain is keyed with
// DevAuditKey because Options.AuditKey was empty (announce it at startup).
func (s *Store) UsesDevAuditKey() bool { return s.devKey }

// ---- validation ----

// maxAuthorLabelBytes caps an author label: 200 bytes of UTF-8.
const maxAuthorLabelBytes = 200

// ValidAuthorID reports whether s is an acceptable authorId: 1–64 bytes of
// [a-z0-9_.@:-] (lowercase, no spaces, no '|').
func ValidAuthorID(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || strings.IndexByte("_.@:-", c) >= 0) {
			return false
		}
	}
	return true
}

// validate checks in and returns it normalized (StaleAfter in UTC and
// truncated to ms; an empty AuthorLabel becomes AuthorID). Errors are
// *ValidationError, which never echo the value.
func validate(in PublishInput) (PublishInput, error) {
	bad := func(field, reason string) (PublishInput, error) {
		return PublishInput{}, &ValidationError{Field: field, Reason: reason}
	}
	switch {
	case !models.ValidID(in.Patient):
		return bad("patient", "must be 1–64 characters of [a-z0-9_.-]")
	case !models.ValidID(in.Domain):
		return bad("domain", "must be 1–64 characters of [a-z0-9_.-]")
	case !in.Audience.Valid():
		return bad("audience", `must be "user" or "assistant"`)
	case in.Value == "" || strings.TrimSpace(in.Value) == "":
		return bad("value", "must not be empty")
	case len(in.Value) > models.MaxValueBytes:
		return bad("value", fmt.Sprintf("must be at most %d bytes", models.MaxValueBytes))
	case !utf8.ValidString(in.Value):
		return bad("value", "must be valid UTF-8")
	case !ValidAuthorID(in.AuthorID):
		return bad("authorId", "must be 1–64 characters of [a-z0-9_.@:-]")
	case len(in.AuthorLabel) > maxAuthorLabelBytes:
		return bad("authorLabel", fmt.Sprintf("must be at most %d bytes", maxAuthorLabelBytes))
	case !utf8.ValidString(in.AuthorLabel) || strings.ContainsFunc(in.AuthorLabel, unicode.IsControl):
		return bad("authorLabel", "must be printable UTF-8")
	case math.IsNaN(in.Priority) || in.Priority < 0 || in.Priority > 1:
		return bad("priority", "must be between 0 and 1")
	case !in.StaleAfter.IsZero() && in.StaleAfter.Before(time.UnixMilli(1)):
		return bad("staleAfter", "must be after 1970")
	case len(in.IdempotencyKey) > 256:
		return bad("idempotencyKey", "must be at most 256 bytes")
	}
	in.AuthorLabel = strings.TrimSpace(in.AuthorLabel)
	if in.AuthorLabel == "" {
		in.AuthorLabel = in.AuthorID
	}
	if !in.StaleAfter.IsZero() {
		in.StaleAfter = in.StaleAfter.UTC().Truncate(time.Millisecond)
	}
	return in, nil
}

// ---- publish ----

// publishAttempts bounds how many times Publish seals a value for a
// version number that another writer then takes (a writer in another
// process; in-process writers of one fact queue on its fact lock). The
// last attempt seals under the write lock, so Publish always progresses.
const publishAttempts = 5

// factLocks is the number of stripes of Store.factMu.
const factLocks = 64

// errHeadMoved: the fact's current version changed between planning a
// write (outside the write lock) and committing it; Publish plans again.
var errHeadMoved = errors.New("store: the fact's current version moved")

// Publish validates in, checks p may write it (care.write and bound to the
// patient), refuses an audience change before any state changes (P-3),
// stamps WrittenAt from the clock truncated to ms, chains and commits
// version n+1 durably, appends nothing to the audit log (the caller does,
// with the transport's actor and via), and wakes the change feed without
// blocking. Errors: *ValidationError (ErrInvalid), ErrForbidden,
// ErrAudienceChange, ErrSealerUnavailable (a key-service outage while
// sealing; nothing written).
//
// Unchanged writes: when in's Value, Audience, AuthorID, AuthorLabel
// (normalized as validate does), StaleAfter (to the ms) and Priority all
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
// last attempt seals under the lock). WrittenAt and the hash chain are
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
	in, err := validate(in)
	if err != nil {
		return PublishResult{}, err
	}
	if !p.CanAccessPatient(in.Patient) {
		return PublishResult{}, ErrForbidden
	}
	mu := s.factLock(in.Patient, in.Domain)
	mu.Lock()
	defer mu.Unlock()
	for attempt := 1; ; attempt++ {
		res, err := s.publishOnce(ctx, in, attempt == publishAttempts)
		if errors.Is(err, errHeadMoved) && attempt < publishAttempts {
			continue
		}
		return res, err
	}
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
// the write transaction.
func (s *Store) publishOnce(ctx context.Context, in PublishInput, underLock bool) (PublishResult, error) {
	var (
		pl  plan
		err error
	)
	if !underLock {
		if pl, err = s.planVersion(ctx, s.db, in, true); err != nil {
			return PublishResult{}, err
		}
	}
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	now := s.clock().UTC().Truncate(time.Millisecond)

	tx, err := s.beginWrite(ctx)
	if err != nil {
		return PublishResult{}, err
	}
	defer tx.Rollback()

	if in.IdempotencyKey != "" {
		res, ok, err := s.replayed(ctx, tx, in.IdempotencyKey, now)
		if err != nil {
			return PublishResult{}, err
		}
		if ok {
			return res, nil
		}
	}
	if underLock {
		if pl, err = s.planVersion(ctx, tx, in, true); err != nil {
			return PublishResult{}, err
		}
	} else if err := s.checkHead(ctx, tx, in, pl); err != nil {
		return PublishResult{}, err
	}
	if pl.unchanged {
		if in.IdempotencyKey != "" {
			if err := s.rememberKey(ctx, tx, in.IdempotencyKey, now, pl.head.seq); err != nil {
				return PublishResult{}, err
			}
			if err := tx.Commit(); err != nil {
				return PublishResult{}, fmt.Errorf("store: publish: commit: %w", err)
			}
		}
		return PublishResult{Version: pl.head.v, Unchanged: true, Seq: pl.head.seq}, nil
	}
	v, seq, err := s.insertVersion(ctx, tx, in, now, pl)
	if err != nil {
		return PublishResult{}, err
	}
	if in.IdempotencyKey != "" {
		if err := s.rememberKey(ctx, tx, in.IdempotencyKey, now, seq); err != nil {
			return PublishResult{}, err
		}
	}
	audited := false
	if in.Audit != nil {
		e := *in.Audit
		e.URI, e.Outcome, e.Reason = v.URI().String(), "accepted", ReasonOK
		if e, err = sanitizeAudit(e); err != nil {
			return PublishResult{}, err
		}
		if err := s.appendAudit(ctx, tx, e); err != nil {
			return PublishResult{}, err
		}
		audited = true
	}
	if err := s.d.notify(ctx, tx); err != nil {
		return PublishResult{}, fmt.Errorf("store: publish: notify: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return PublishResult{}, fmt.Errorf("store: publish: commit: %w", err)
	}
	s.wakeWatchers()
	return PublishResult{Version: v, Created: v.N == 1, Seq: seq, Audited: audited}, nil
}

// beginWrite begins a write transaction holding the store-wide write lock.
func (s *Store) beginWrite(ctx context.Context) (*sql.Tx, error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("store: begin: %w", err)
	}
	if err := s.d.lockWrites(ctx, tx); err != nil {
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
func (s *Store) planVersion(ctx context.Context, q queryRower, in PublishInput, detectUnchanged bool) (plan, error) {
	var pl plan
	r, err := scanRaw(s.queryRowPrepared(ctx, q, s.d.rebind(`SELECT `+versionCols+` FROM facts f JOIN versions v
		ON v.patient = f.patient AND v.domain = f.domain AND v.n = f.latest
		WHERE f.patient = ? AND f.domain = ?`), in.Patient, in.Domain))
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
		switch {
		case errors.Is(err, ErrSealerUnavailable):
			return plan{}, fmt.Errorf("store: publish: %w", err)
		case err != nil:
			s.log.WarnContext(ctx, "store: publish: the current version cannot be opened to compare; writing a new version",
				"uri", r.v.URI().String(), "err", err)
		case value == in.Value:
			pl.head.v.Value, pl.unchanged = value, true
			return pl, nil
		}
	}
	next := models.Version{Patient: in.Patient, Domain: in.Domain, N: pl.head.v.N + 1, Audience: in.Audience, Value: in.Value}
	if pl.stored, pl.sealed, err = s.seal(ctx, next); err != nil {
		return plan{}, err
	}
	return pl, nil
}

// sameFields reports whether a write of in would repeat v in every field
// but the value (compared after opening it): audience, author id and label,
// stale-after and priority. in is normalized by validate.
func sameFields(v models.Version, in PublishInput) bool {
	return v.Audience == in.Audience && v.AuthorID == in.AuthorID && v.AuthorLabel == in.AuthorLabel &&
		v.StaleAfter.Equal(in.StaleAfter) && v.Priority == in.Priority
}

// checkHead confirms, inside tx (holding the write lock), that in's fact
// still has the head pl was planned against; errHeadMoved if not. An
// audience change committed meanwhile is ErrAudienceChange (P-3).
func (s *Store) checkHead(ctx context.Context, tx *sql.Tx, in PublishInput, pl plan) error {
	var (
		audience, hash string
		latest         int
	)
	err := s.queryRowPrepared(ctx, tx, s.d.rebind(`SELECT f.audience, f.latest, v.hash FROM facts f JOIN versions v
		ON v.patient = f.patient AND v.domain = f.domain AND v.n = f.latest
		WHERE f.patient = ? AND f.domain = ?`), in.Patient, in.Domain).Scan(&audience, &latest, &hash)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		if pl.found {
			return errHeadMoved
		}
		return nil
	case err != nil:
		return fmt.Errorf("store: publish: %w", err)
	case models.Audience(audience) != in.Audience:
		return ErrAudienceChange
	case !pl.found || latest != pl.head.v.N || hash != pl.head.v.Hash:
		return errHeadMoved
	}
	return nil
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
	}
	v.Hash = VersionHash(v.PrevHash, v.Value, v.WrittenAt, v.AuthorID)
	stored, sealed := pl.stored, pl.sealed
	var seq int64
	if err := s.queryRowPrepared(ctx, tx, `SELECT COALESCE(MAX(seq), 0) + 1 FROM versions`).Scan(&seq); err != nil {
		return models.Version{}, 0, fmt.Errorf("store: publish: %w", err)
	}
	if _, err := s.execPrepared(ctx, tx, s.d.rebind(`INSERT INTO versions
		(seq, patient, domain, n, audience, value, sealed, author_id, author_label, written_at, stale_after, priority, prev_hash, hash)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`),
		seq, v.Patient, v.Domain, v.N, string(v.Audience), stored, sqlBool(sealed), v.AuthorID, v.AuthorLabel,
		v.WrittenAt.UnixMilli(), msOrZero(v.StaleAfter), v.Priority, v.PrevHash, v.Hash); err != nil {
		return models.Version{}, 0, fmt.Errorf("store: publish: %w", err)
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
		return models.Version{}, 0, fmt.Errorf("store: publish: %w", err)
	}
	return v, seq, nil
}

// replayed returns the first result for key if it was used within the
// replay window, pruning expired keys.
func (s *Store) replayed(ctx context.Context, tx *sql.Tx, key string, now time.Time) (PublishResult, bool, error) {
	cutoff := now.Add(-replayWindow).UnixMilli()
	if _, err := s.execPrepared(ctx, tx, s.d.rebind(`DELETE FROM idempotency WHERE at_ms <= ?`), cutoff); err != nil {
		return PublishResult{}, false, fmt.Errorf("store: publish: %w", err)
	}
	var seq int64
	err := s.queryRowPrepared(ctx, tx, s.d.rebind(`SELECT seq FROM idempotency WHERE key = ?`), key).Scan(&seq)
	if errors.Is(err, sql.ErrNoRows) {
		return PublishResult{}, false, nil
	}
	if err != nil {
		return PublishResult{}, false, fmt.Errorf("store: publish: %w", err)
	}
	row := s.queryRowPrepared(ctx, tx, s.d.rebind(`SELECT `+versionCols+` FROM versions v JOIN facts f
		ON f.patient = v.patient AND f.domain = v.domain WHERE v.seq = ?`), seq)
	r, err := s.scanVersion(ctx, row)
	if err != nil {
		return PublishResult{}, false, fmt.Errorf("store: publish: replay: %w", err)
	}
	return PublishResult{Version: r.v, Created: r.v.N == 1, Replayed: true, Seq: seq}, true, nil
}

func (s *Store) rememberKey(ctx context.Context, tx *sql.Tx, key string, now time.Time, seq int64) error {
	_, err := s.execPrepared(ctx, tx, s.d.rebind(`INSERT INTO idempotency (key, at_ms, seq) VALUES (?, ?, ?)`), key, now.UnixMilli(), seq)
	if err != nil {
		return fmt.Errorf("store: publish: idempotency key: %w", err)
	}
	return nil
}

func msOrZero(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

func timeOrZero(ms int64) time.Time {
	if ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms).UTC()
}

// ---- reading ----

// versionCols are the columns scanVersion reads, from versions v joined to facts f.
const versionCols = `v.seq, v.patient, v.domain, v.n, v.audience, v.value, v.sealed, v.author_id, v.author_label,
	v.written_at, v.stale_after, v.priority, v.prev_hash, v.hash, f.latest`

type row struct {
	v      models.Version
	seq    int64
	latest int
	stored []byte // the value column as stored (sealed bytes when sealed)
	sealed bool
}

type scanner interface{ Scan(dest ...any) error }

// scanRaw reads one row of versionCols without opening the value.
func scanRaw(sc scanner) (row, error) {
	var (
		r                 row
		aud               string
		sealed            int
		writtenAt, staleA int64
	)
	if err := sc.Scan(&r.seq, &r.v.Patient, &r.v.Domain, &r.v.N, &aud, &r.stored, &sealed, &r.v.AuthorID, &r.v.AuthorLabel,
		&writtenAt, &staleA, &r.v.Priority, &r.v.PrevHash, &r.v.Hash, &r.latest); err != nil {
		return row{}, err
	}
	r.v.Audience = models.Audience(aud)
	r.sealed = sealed != 0
	r.v.WrittenAt = time.UnixMilli(writtenAt).UTC()
	r.v.StaleAfter = timeOrZero(staleA)
	return r, nil
}

// scanVersion reads one row and opens its value.
func (s *Store) scanVersion(ctx context.Context, sc scanner) (row, error) {
	r, err := scanRaw(sc)
	if err != nil {
		return row{}, err
	}
	if r.v.Value, err = s.open(ctx, r); err != nil {
		return row{}, err
	}
	return r, nil
}

// parseReadable parses rawURI and applies the first check of P-1 (the
// scheme's scope) and the patient binding (P-21). Every failure is ErrNotFound (P-2).
func parseReadable(p models.Principal, rawURI string) (models.URI, error) {
	u, err := models.ParseURI(rawURI)
	if err != nil || !p.CanReadURI(u) {
		return models.URI{}, ErrNotFound
	}
	return u, nil
}

// Read returns the version named by rawURI (its current version when
// unversioned) if p may read it by BOTH the scheme's scope and the record's
// own audience, and is bound to the patient (P-1, P-21). Every failure —
// malformed, unknown scheme, forbidden, absent, missing version — is ErrNotFound (P-2).
// So is a value stored as plaintext in a store with a Sealer: it is forged
// or not yet rekeyed, and fails closed (logged, never served; P-6).
// Other errors (the database, sealed bytes that fail to open, ErrSealed,
// ErrSealerUnavailable for a key-service outage) are wrapped and are not
// ErrNotFound: the MCP server answers them as an internal error rather than
// claiming the fact is absent.
func (s *Store) Read(ctx context.Context, p models.Principal, rawURI string) (ReadResult, error) {
	u, err := parseReadable(p, rawURI)
	if err != nil {
		return ReadResult{}, err
	}
	var sr *sql.Row
	if u.Version == 0 {
		sr = s.readLatest.QueryRowContext(ctx, u.Patient, u.Domain)
	} else {
		sr = s.readN.QueryRowContext(ctx, u.Patient, u.Domain, u.Version)
	}
	r, err := scanRaw(sr)
	if errors.Is(err, sql.ErrNoRows) {
		return ReadResult{}, ErrNotFound
	}
	if err != nil {
		return ReadResult{}, fmt.Errorf("store: read: %w", err)
	}
	// P-1's second check: the stored record's own audience must be the one
	// the URI scheme names. care:// never reaches an assistant record.
	if r.v.Audience != u.Audience() {
		return ReadResult{}, ErrNotFound
	}
	if r.v.Value, err = s.open(ctx, r); err != nil {
		return ReadResult{}, s.failClosed(ctx, "read", r, err)
	}
	return ReadResult{Version: r.v, Latest: r.latest}, nil
}

// readableFilter returns the SQL condition (over facts f) and its args
// restricting rows to what p may read, or ok=false when p may read nothing.
func readableFilter(p models.Principal) (cond string, args []any, ok bool) {
	var auds []any
	for _, part := range models.Partitions() {
		if p.Can(part.Scope) {
			auds = append(auds, string(part.Audience))
		}
	}
	if len(auds) == 0 || len(p.Patients) == 0 {
		return "", nil, false
	}
	cond = "f.audience IN (" + placeholders(len(auds)) + ")"
	args = auds
	if !slices.Contains(p.Patients, models.AllPatients) {
		cond += " AND f.patient IN (" + placeholders(len(p.Patients)) + ")"
		for _, id := range p.Patients {
			args = append(args, id)
		}
	}
	return cond, args, true
}

func placeholders(n int) string {
	return strings.TrimSuffix(strings.Repeat("?, ", n), ", ")
}

// List returns the current version of every fact p may read, sorted by
// unversioned URI string, filtered before anything else (P-1): rows p may
// not read are excluded in the query, and each row's audience is checked
// again against p's scopes before its value is opened. A fact whose current
// value is stored as plaintext in a sealed store is left out, as if absent
// (logged; see Read). Errors as Read's.
func (s *Store) List(ctx context.Context, p models.Principal) ([]models.Fact, error) {
	cond, args, ok := readableFilter(p)
	if !ok {
		return nil, nil
	}
	rows, err := s.db.QueryContext(ctx, s.d.rebind(`SELECT `+versionCols+` FROM facts f JOIN versions v
		ON v.patient = f.patient AND v.domain = f.domain AND v.n = f.latest WHERE `+cond), args...)
	if err != nil {
		return nil, fmt.Errorf("store: list: %w", err)
	}
	var raws []row
	for rows.Next() {
		r, err := scanRaw(rows)
		if err != nil {
			rows.Close()
			return nil, fmt.Errorf("store: list: %w", err)
		}
		if p.CanRead(r.v.Patient, r.v.Audience) {
			raws = append(raws, r)
		}
	}
	if err := rows.Close(); err != nil {
		return nil, fmt.Errorf("store: list: %w", err)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: list: %w", err)
	}
	out := make([]models.Fact, 0, len(raws))
	for _, r := range raws {
		if r.v.Value, err = s.open(ctx, r); err != nil {
			if err = s.failClosed(ctx, "list", r, err); errors.Is(err, ErrNotFound) {
				continue
			}
			return nil, err
		}
		out = append(out, models.Fact{Current: r.v, Versions: r.latest})
	}
	slices.SortFunc(out, func(a, b models.Fact) int {
		return strings.Compare(a.Current.FactURI().String(), b.Current.FactURI().String())
	})
	return out, nil
}

// FactURIs returns the unversioned URI of every fact p may read, sorted by
// URI string, without opening any value (for /verify and `unsay verify`).
func (s *Store) FactURIs(ctx context.Context, p models.Principal) ([]models.URI, error) {
	cond, args, ok := readableFilter(p)
	if !ok {
		return nil, nil
	}
	rows, err := s.db.QueryContext(ctx, s.d.rebind(`SELECT f.patient, f.domain, f.audience FROM facts f WHERE `+cond), args...)
	if err != nil {
		return nil, fmt.Errorf("store: list: %w", err)
	}
	defer rows.Close()
	var out []models.URI
	for rows.Next() {
		var patient, domain, aud string
		if err := rows.Scan(&patient, &domain, &aud); err != nil {
			return nil, fmt.Errorf("store: list: %w", err)
		}
		if a := models.Audience(aud); a.Valid() && p.CanRead(patient, a) {
			out = append(out, models.NewURI(a, patient, domain))
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: list: %w", err)
	}
	slices.SortFunc(out, func(a, b models.URI) int { return strings.Compare(a.String(), b.String()) })
	return out, nil
}

// historyRows returns every stored row of the fact u names, oldest first,
// without opening values, after both P-1 checks; ErrNotFound otherwise.
func (s *Store) historyRows(ctx context.Context, u models.URI) ([]row, error) {
	rows, err := s.db.QueryContext(ctx, s.d.rebind(`SELECT `+versionCols+` FROM facts f JOIN versions v
		ON v.patient = f.patient AND v.domain = f.domain
		WHERE f.patient = ? AND f.domain = ? ORDER BY v.n`), u.Patient, u.Domain)
	if err != nil {
		return nil, fmt.Errorf("store: history: %w", err)
	}
	defer rows.Close()
	var out []row
	for rows.Next() {
		r, err := scanRaw(rows)
		if err != nil {
			return nil, fmt.Errorf("store: history: %w", err)
		}
		if r.v.Audience != u.Audience() {
			return nil, ErrNotFound
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: history: %w", err)
	}
	if len(out) == 0 {
		return nil, ErrNotFound
	}
	return out, nil
}

// History returns every version of the fact named by rawURI, oldest first,
// or ErrNotFound (P-1, P-2, P-21). A versioned URI names its fact's
// history only if that version exists. Any version stored as plaintext in
// a sealed store makes the whole history ErrNotFound (fails closed, logged).
// Other errors as Read's.
func (s *Store) History(ctx context.Context, p models.Principal, rawURI string) ([]models.Version, error) {
	u, err := parseReadable(p, rawURI)
	if err != nil {
		return nil, err
	}
	rs, err := s.historyRows(ctx, u)
	if err != nil {
		return nil, err
	}
	if u.Version > len(rs) {
		return nil, ErrNotFound
	}
	out := make([]models.Version, len(rs))
	for i, r := range rs {
		if r.v.Value, err = s.open(ctx, r); err != nil {
			return nil, s.failClosed(ctx, "history", r, err)
		}
		out[i] = r.v
	}
	return out, nil
}

// Since returns every version written strictly after t that p may read,
// oldest first (by WrittenAt, then commit order), for whats_changed. A
// version stored as plaintext in a sealed store is left out (logged; see
// Read). Errors as Read's.
func (s *Store) Since(ctx context.Context, p models.Principal, t time.Time) ([]models.Version, error) {
	cond, args, ok := readableFilter(p)
	if !ok {
		return nil, nil
	}
	args = append([]any{t.UnixMilli()}, args...)
	// WrittenAt has ms precision: "strictly after t" compares against t
	// truncated to ms, so a version at t+0.5 ms's millisecond is not lost.
	rows, err := s.db.QueryContext(ctx, s.d.rebind(`SELECT `+versionCols+` FROM versions v JOIN facts f
		ON f.patient = v.patient AND f.domain = v.domain
		WHERE v.written_at > ? AND `+cond+` ORDER BY v.written_at, v.seq`), args...)
	if err != nil {
		return nil, fmt.Errorf("store: since: %w", err)
	}
	var raws []row
	for rows.Next() {
		r, err := scanRaw(rows)
		if err != nil {
			rows.Close()
			return nil, fmt.Errorf("store: since: %w", err)
		}
		if p.CanRead(r.v.Patient, r.v.Audience) && r.v.WrittenAt.After(t) {
			raws = append(raws, r)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: since: %w", err)
	}
	out := make([]models.Version, 0, len(raws))
	for _, r := range raws {
		if r.v.Value, err = s.open(ctx, r); err != nil {
			if err = s.failClosed(ctx, "since", r, err); errors.Is(err, ErrNotFound) {
				continue
			}
			return nil, err
		}
		out = append(out, r.v)
	}
	return out, nil
}

// Staleness reports whether the fact is stale at now and, if so, its header (P-7).
// The fact is its current version (or the version rawURI names). ErrNotFound as Read.
func (s *Store) Staleness(ctx context.Context, p models.Principal, rawURI string, now time.Time) (stale bool, header string, err error) {
	r, err := s.Read(ctx, p, rawURI)
	if err != nil {
		return false, "", err
	}
	if !r.Version.IsStale(now) {
		return false, "", nil
	}
	return true, models.StaleHeader(r.Version, now), nil
}

// ---- change feed ----

// wakeWatchers wakes every watcher to catch up from the database. It never blocks.
func (s *Store) wakeWatchers() {
	s.wakeMu.Lock()
	close(s.wake)
	s.wake = make(chan struct{})
	s.wakeMu.Unlock()
}

func (s *Store) wakeChan() <-chan struct{} {
	s.wakeMu.Lock()
	defer s.wakeMu.Unlock()
	return s.wake
}

// Watch streams committed changes with Seq > after, in commit order, until
// ctx ends or the store closes (then the channel closes). A slow watcher
// never blocks Publish: Publish only closes a wakeup channel, and each
// watcher's goroutine catches up from the database by Seq, so it never
// misses a change. Changes are delivered after their commit is durable.
//
// Seeding (Seed) assigns Seq to the seeded versions but does not wake
// watchers; callers that must not notify for the seed (P-8) start from
// LastSeq() taken after seeding.
func (s *Store) Watch(ctx context.Context, after int64) <-chan Change {
	ch := make(chan Change)
	go s.watch(ctx, after, ch)
	return ch
}

func (s *Store) watch(ctx context.Context, cursor int64, ch chan<- Change) {
	defer close(ch)
	backoff := 10 * time.Millisecond
	for {
		wake := s.wakeChan() // taken before the query, so no wakeup is lost
		changes, err := s.changesAfter(ctx, cursor, feedBatch)
		if err != nil {
			if ctx.Err() != nil || s.isClosed() {
				return
			}
			s.log.Error("store: watch", "err", err)
			select {
			case <-ctx.Done():
				return
			case <-s.closed:
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, 5*time.Second)
			continue
		}
		backoff = 10 * time.Millisecond
		for _, c := range changes {
			select {
			case ch <- c:
				cursor = c.Seq
			case <-ctx.Done():
				return
			case <-s.closed:
				return
			}
		}
		if len(changes) == feedBatch {
			continue
		}
		select {
		case <-ctx.Done():
			return
		case <-s.closed:
			return
		case <-wake:
		case <-time.After(feedPollInterval):
		}
	}
}

func (s *Store) isClosed() bool {
	select {
	case <-s.closed:
		return true
	default:
		return false
	}
}

// changesAfter reads up to limit changes with Seq > after, in Seq order.
func (s *Store) changesAfter(ctx context.Context, after int64, limit int) ([]Change, error) {
	rows, err := s.db.QueryContext(ctx, s.d.rebind(`SELECT seq, patient, domain, n, audience, written_at
		FROM versions WHERE seq > ? ORDER BY seq LIMIT ?`), after, limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Change
	for rows.Next() {
		var (
			c                    Change
			patient, domain, aud string
			writtenAt            int64
		)
		if err := rows.Scan(&c.Seq, &patient, &domain, &c.Version, &aud, &writtenAt); err != nil {
			return nil, err
		}
		c.Audience = models.Audience(aud)
		if !c.Audience.Valid() {
			return nil, fmt.Errorf("version seq %d has unknown audience %q", c.Seq, aud)
		}
		c.URI = models.NewURI(c.Audience, patient, domain)
		c.Created = c.Version == 1
		c.At = time.UnixMilli(writtenAt).UTC()
		out = append(out, c)
	}
	return out, rows.Err()
}

// LastSeq is the sequence number of the latest committed change (0 if none).
func (s *Store) LastSeq(ctx context.Context) (int64, error) {
	var seq int64
	if err := s.db.QueryRowContext(ctx, `SELECT COALESCE(MAX(seq), 0) FROM versions`).Scan(&seq); err != nil {
		return 0, fmt.Errorf("store: last seq: %w", err)
	}
	return seq, nil
}
