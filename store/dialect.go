package store

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"strings"
	"time"

	"modernc.org/sqlite" // registers the "sqlite" database/sql driver
	sqlite3 "modernc.org/sqlite/lib"
)

// dialect isolates what differs between database backends. The store's
// logic (validation, chaining, sealing, the partition checks, the audit
// chain, the seed) is written once against database/sql with "?" placeholders; a dialect
// supplies the rest. There are two: sqliteDialect (below) and
// postgresDialect (dialect_postgres.go: pgx through its database/sql
// driver), each with its own migrations/<name>/NNN_*.sql — the same tables
// (BLOB → BYTEA, REAL → DOUBLE PRECISION, INTEGER ms → BIGINT), applied in
// order and recorded in schema_migrations. On Postgres:
//
//   - rebind is rebindDollar: "?" → "$1", "$2", … outside quotes,
//     comments and dollar quotes;
//   - lockWrites is a store-wide advisory transaction lock. It must be
//     store-wide, not per domain: versions.seq is allocated as MAX(seq)+1
//     under it, which is what makes the change feed gap-free and in commit
//     order across instances;
//   - a batch of Publishes sends NOTIFY inside its write transaction
//     (delivered on commit; writeBatchPostgres), with a LISTEN connection
//     per instance that calls Store.wakeWatchers, so every instance's
//     watchers catch up;
//   - transactions run at READ COMMITTED (the locks serialize writers).
type dialect interface {
	// name is "sqlite" or "postgres" (Store.Backend).
	name() string
	// migrations returns the ordered migration scripts (name, SQL).
	migrations() ([]migration, error)
	// rebind rewrites "?" placeholders into the backend's style.
	rebind(query string) string
	// lockWrites takes the store-wide write lock inside tx.
	lockWrites(ctx context.Context, tx *sql.Tx) error
	// latestJoin joins each row of facts f to its current version v (the
	// row of versions with n = f.latest), for "FROM facts f "+latestJoin()
	// queries: always the lookup of the unique (patient, domain, n) index,
	// whatever the planner's statistics.
	latestJoin() string
	// unavailable reports whether err says writes cannot commit right now
	// (a full or read-only disk, an unreachable or busy database), with a
	// reason safe to show and a sensible wait before retrying.
	unavailable(err error) (reason string, retryAfter time.Duration, ok bool)
}

type migration struct {
	version int
	name    string
	sql     string
}

//go:embed migrations/sqlite/*.sql
var sqliteMigrations embed.FS

// sqliteDialect is the embedded default: modernc.org/sqlite, WAL,
// synchronous=FULL (a commit is durable once acknowledged, P-20), every
// transaction BEGIN IMMEDIATE (the database write lock is taken at BEGIN,
// so lockWrites is a no-op), and an in-process feed wakeup only (Publish
// wakes watchers directly after commit).
type sqliteDialect struct{}

func (sqliteDialect) name() string { return "sqlite" }

func (sqliteDialect) migrations() ([]migration, error) {
	return readMigrations(sqliteMigrations, "migrations/sqlite")
}

func (sqliteDialect) rebind(q string) string                    { return q }
func (sqliteDialect) lockWrites(context.Context, *sql.Tx) error { return nil }

// latestJoin is the plain join: SQLite looks up the (patient, domain, n)
// index for it with or without statistics.
func (sqliteDialect) latestJoin() string {
	return `JOIN versions v ON v.patient = f.patient AND v.domain = f.domain AND v.n = f.latest`
}

// unavailable classifies SQLite's primary result codes: SQLITE_FULL (the
// disk, or max_page_count), SQLITE_READONLY, SQLITE_IOERR, SQLITE_CANTOPEN,
// and SQLITE_BUSY/LOCKED once the busy timeout (10 s) has passed.
func (sqliteDialect) unavailable(err error) (string, time.Duration, bool) {
	var se *sqlite.Error
	if !errors.As(err, &se) {
		return "", 0, false
	}
	switch se.Code() & 0xff {
	case sqlite3.SQLITE_FULL:
		return "the disk is full", retryAfterFull, true
	case sqlite3.SQLITE_READONLY:
		return "the database is read-only", retryAfterFull, true
	case sqlite3.SQLITE_IOERR:
		return "the disk reported an I/O error", retryAfterFull, true
	case sqlite3.SQLITE_CANTOPEN:
		return "the database file cannot be opened", retryAfterFull, true
	case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED:
		return "the database is busy", retryAfterTransient, true
	}
	return "", 0, false
}

// lockTimedOut reports whether err is SQLite's SQLITE_BUSY or
// SQLITE_LOCKED: the write lock was not had within the busy timeout, so
// nothing of the transaction was written.
func lockTimedOut(err error) bool {
	var se *sqlite.Error
	if !errors.As(err, &se) {
		return false
	}
	c := se.Code() & 0xff
	return c == sqlite3.SQLITE_BUSY || c == sqlite3.SQLITE_LOCKED
}

// sqliteBusyTimeout is how long (ms) a connection waits for another
// writer's lock before failing with SQLITE_BUSY.
const sqliteBusyTimeout = 10000

// openSQLite opens the SQLite database file at path with the store's
// pragmas, waiting up to busyTimeoutMS (ms) for another process's write
// lock. A path containing '?' or '#', or ":memory:", is refused.
func openSQLite(path string, busyTimeoutMS int) (*sql.DB, error) {
	if path == "" {
		return nil, errors.New("store: empty DSN")
	}
	if path == ":memory:" || strings.HasPrefix(path, "file::memory:") {
		return nil, errors.New("store: in-memory SQLite is not supported (the change feed and durability need a file)")
	}
	path = strings.TrimPrefix(path, "file:")
	if strings.ContainsAny(path, "?#") {
		return nil, fmt.Errorf("store: SQLite path %q must not contain '?' or '#'", path)
	}
	q := url.Values{}
	q.Set("_busy_timeout", fmt.Sprint(busyTimeoutMS))
	q.Set("_journal_mode", "WAL")
	q.Set("_synchronous", "FULL")
	q.Set("_txlock", "immediate")
	q.Set("_foreign_keys", "1")
	db, err := sql.Open("sqlite", "file:"+path+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("store: open sqlite: %w", err)
	}
	db.SetMaxOpenConns(16)
	db.SetMaxIdleConns(16)
	db.SetConnMaxIdleTime(0)
	return db, nil
}

// readMigrations reads NNN_name.sql files under dir, in version order.
func readMigrations(fsys fs.FS, dir string) ([]migration, error) {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, err
	}
	var out []migration
	for _, e := range entries {
		var v int
		if _, err := fmt.Sscanf(e.Name(), "%03d_", &v); err != nil || v < 1 {
			return nil, fmt.Errorf("store: migration %q: want NNN_name.sql", e.Name())
		}
		b, err := fs.ReadFile(fsys, dir+"/"+e.Name())
		if err != nil {
			return nil, err
		}
		if len(out) > 0 && out[len(out)-1].version >= v {
			return nil, fmt.Errorf("store: migration %q out of order", e.Name())
		}
		out = append(out, migration{version: v, name: e.Name(), sql: string(b)})
	}
	return out, nil
}

// migrate applies every migration newer than the database's, each in its
// own write transaction, recording it in schema_migrations.
func migrate(ctx context.Context, db *sql.DB, d dialect) error {
	ms, err := d.migrations()
	if err != nil {
		return err
	}
	if _, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL)`); err != nil {
		return fmt.Errorf("store: migrate: %w", err)
	}
	for _, m := range ms {
		if err := applyMigration(ctx, db, d, m); err != nil {
			return err
		}
	}
	return nil
}

func applyMigration(ctx context.Context, db *sql.DB, d dialect, m migration) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("store: migrate %s: %w", m.name, err)
	}
	defer tx.Rollback()
	if err := d.lockWrites(ctx, tx); err != nil {
		return fmt.Errorf("store: migrate %s: %w", m.name, err)
	}
	var n int
	if err := tx.QueryRowContext(ctx, d.rebind(`SELECT COUNT(*) FROM schema_migrations WHERE version = ?`), m.version).Scan(&n); err != nil {
		return fmt.Errorf("store: migrate %s: %w", m.name, err)
	}
	if n > 0 {
		return nil
	}
	if _, err := tx.ExecContext(ctx, m.sql); err != nil {
		return fmt.Errorf("store: migrate %s: %w", m.name, err)
	}
	if _, err := tx.ExecContext(ctx, d.rebind(`INSERT INTO schema_migrations (version, name) VALUES (?, ?)`), m.version, m.name); err != nil {
		return fmt.Errorf("store: migrate %s: %w", m.name, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("store: migrate %s: %w", m.name, err)
	}
	return nil
}
