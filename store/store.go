package store

import (
	"cmp"
	"context"
	"crypto/ed25519"
	"database/sql"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
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
	// DSN is a SQLite file path ("./unsay.db"; ":memory:" is not supported)
	// or a postgres:// URL (dialect_postgres.go).
	DSN string
	// Clock is the server clock; nil means time.Now. Tests inject one.
	Clock func() time.Time
	// AuditKey keys the audit log's HMAC chain (UNSAY_AUDIT_KEY). Empty
	// means DevAuditKey, a development default (UsesDevAuditKey reports it).
	AuditKey []byte
	// Sealer seals values at rest; nil stores plaintext (startup says PLAINTEXT).
	Sealer Sealer
	// SigningKey signs every chain head and the audit log's head at commit
	// (P-26; UNSAY_SIGNING_KEY, from `unsay keygen`). Nil means
	// DevSigningKey, a development default (UsesDevSigningKey reports it).
	SigningKey ed25519.PrivateKey
	// PublicKey verifies head signatures; nil means SigningKey's public key.
	// An offline verifier holding only the public key sets it and leaves
	// SigningKey nil (it never writes; CheckStartup refuses a mismatch).
	PublicKey ed25519.PublicKey
	// Logger receives background errors (a watcher's failed query); nil discards.
	Logger *slog.Logger

	// BusyTimeout is how long a SQLite writer waits for another process's
	// write lock before its write fails as "the database is busy" (503):
	// zero means 10 s (sqliteBusyTimeout). Ignored on Postgres.
	BusyTimeout time.Duration

	// busyTimeoutMS overrides SQLite's busy timeout (ms; 0: BusyTimeout).
	// Tests shorten it to catch writers that meet SQLite's lock instead of writeMu.
	busyTimeoutMS int
}

// Store is the live care store. It is safe for concurrent use.
type Store struct {
	db       *sql.DB
	probeDB  *sql.DB // WriteHealth's probes: SQLite's own handle waiting probeBusyTimeout; Postgres: db
	d        dialect
	clock    func() time.Time
	sealer   Sealer
	chainKey []byte
	devKey   bool
	log      *slog.Logger

	signKey   ed25519.PrivateKey // signs chain heads and the audit head (P-26)
	signKeyID string
	verifyKey ed25519.PublicKey
	devSign   bool

	health writeHealth // whether writes can commit (health.go)

	// writeMu serializes this process's writers (Publish, Seed, Audit,
	// Rekey, link codes, OAuth rows; on SQLite also the heard ledger and
	// the alert budget: lockFileWriters) in front of the database's own
	// write lock, so in-process writers queue on a mutex instead of
	// spinning on SQLITE_BUSY.
	writeMu sync.Mutex
	// planReads holds a slot for each Publish reading its fact's head
	// outside the write lock (planVersion), so those reads hold at most
	// planReadSlots of the pool's connections and a batch's leader never
	// waits behind them for one to begin its transaction.
	planReads chan struct{}
	// factMu stripes serialize this process's Publishes per fact (see
	// Publish), taken before writeMu and never while holding it.
	factMu [factLocks]sync.Mutex
	links  linkCache // LinkedPatient's answers on SQLite (linkcache.go)
	// replayCalls counts RememberAlexaRequest calls, to prune now and then
	// (alexareplay.go).
	replayCalls atomic.Uint64

	// group queues Publishes for the write lock: those that reach it
	// together commit together (group.go), taken before writeMu.
	group committer

	wakeMu sync.Mutex
	wake   chan struct{} // closed and replaced after every commit
	feed   recentFeed    // the changes this process committed last (feed.go); guarded by wakeMu
	closed chan struct{}
	once   sync.Once

	readLatest *sql.Stmt
	readN      *sql.Stmt
	stmts      sync.Map                          // query → *sql.Stmt, the write path's prepared statements (stmt.go)
	rebinds    sync.Map                          // "?" query → the dialect's (rebound, stmt.go)
	lists      *lru.Cache[string, listAnswer]    // List's answers until the next commit (read.go)
	heads      *lru.Cache[[2]string, cachedHead] // (patient, domain) → the head this process committed last (planCached)

	heard  HeardLedger // the speech principal's heard ledger (heardledger.go)
	budget AlertBudget // the audible budget's slots (budget.go)
}

// Open opens (creating and migrating if needed) the store at opts.DSN.
// A DSN beginning postgres:// or postgresql:// opens the Postgres backend
// (dialect_postgres.go). Errors: a bad DSN, an unreadable or corrupt
// database file, an unreachable server, a failed migration.
func Open(ctx context.Context, opts Options) (*Store, error) {
	if IsPostgresDSN(opts.DSN) {
		return openPostgres(ctx, opts)
	}
	db, err := openSQLite(opts.DSN, cmp.Or(opts.busyTimeoutMS, int(opts.BusyTimeout.Milliseconds()), sqliteBusyTimeout))
	if err != nil {
		return nil, err
	}
	s, err := newStore(ctx, db, sqliteDialect{}, opts)
	if err != nil {
		db.Close()
		return nil, err
	}
	if s.probeDB, err = openSQLite(opts.DSN, probeBusyTimeout); err != nil {
		s.Close()
		return nil, err
	}
	s.probeDB.SetMaxOpenConns(1)
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

		planReads: make(chan struct{}, planReadSlots),
	}
	s.lists, _ = lru.New[string, listAnswer](listAnswers) // errors only for a size < 1
	s.heads, _ = lru.New[[2]string, cachedHead](headCacheSize)
	s.heard.s, s.budget.s = s, s
	s.probeDB = db // SQLite's Open replaces it with a handle of its own
	s.health.faultEvery, s.health.healthyEvery, s.health.lockEvery = writeProbeInterval, writeHealthInterval, lockCheckInterval
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
	s.signKey = opts.SigningKey
	if s.signKey == nil {
		s.signKey, s.devSign = DevSigningKey(), true
	}
	s.signKeyID = KeyID(s.signKey.Public().(ed25519.PublicKey))
	s.verifyKey = opts.PublicKey
	if s.verifyKey == nil {
		s.verifyKey = s.signKey.Public().(ed25519.PublicKey)
	}
	var err error
	if s.readLatest, err = db.PrepareContext(ctx, d.rebind(`SELECT `+versionCols+` FROM facts f `+d.latestJoin()+`
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
		if s.probeDB != s.db {
			s.probeDB.Close()
		}
		err = s.db.Close()
	})
	return err
}

// Backend names the database backend: "sqlite" or "postgres".
func (s *Store) Backend() string { return s.d.name() }

// Now is the store's clock.
func (s *Store) Now() time.Time { return s.clock() }

// Sealer is the sealer values are sealed with, or nil for plaintext.
func (s *Store) Sealer() Sealer { return s.sealer }

// UsesDevAuditKey reports whether the audit chain is keyed with
// DevAuditKey because Options.AuditKey was empty (announce it at startup).
func (s *Store) UsesDevAuditKey() bool { return s.devKey }
