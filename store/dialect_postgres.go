package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver

	"github.com/unsay/unsay/models"
)

//go:embed migrations/postgres/*.sql
var postgresMigrations embed.FS

// ChangesChannel is the Postgres NOTIFY channel every commit of a version is
// announced on (for a store in the schema "public"; a store in another
// schema uses ChangesChannel + "_" + schema, so stores sharing a database
// do not wake each other), with a JSON payload {"seq":…, "uri":…, "version":…} and
// never the value (P-9). The payload is a wakeup only: NOTIFY is not
// durable, so every instance's watchers catch up from their last Seq by
// query (Store.Watch), and a notification lost while an instance was
// disconnected costs latency, never a revision.
const ChangesChannel = "unsay_changes"

// ChangeNotice is the payload of one NOTIFY on ChangesChannel.
type ChangeNotice struct {
	Seq     int64  `json:"seq"`
	URI     string `json:"uri"` // unversioned care URI
	Version int    `json:"version"`
}

const (
	// pgMaxOpenConns caps one instance's pool (the LISTEN connection is extra).
	pgMaxOpenConns = 16
	// pgMaxIdleConns connections stay open between bursts: all of them.
	// Fewer, and a burst of concurrent writers closes and re-opens
	// connections at every request — each a TCP handshake and a SCRAM
	// exchange (4,096 PBKDF2 rounds), which was most of a write's CPU.
	pgMaxIdleConns = pgMaxOpenConns
	// pgConnMaxIdleTime closes a connection idle this long (5 minutes), so
	// a quiet instance holds few connections.
	pgConnMaxIdleTime = 5 * time.Minute
	// pgListenBackoffMin and pgListenBackoffMax bound the delay between
	// attempts to re-open the LISTEN connection: 100 ms doubling to 5 s.
	pgListenBackoffMin = 100 * time.Millisecond
	pgListenBackoffMax = 5 * time.Second
)

// postgresDialect is the backend for several instances on one database:
// pgx through database/sql, a store-wide advisory transaction lock that
// serializes writers across instances (so versions are contiguous and the
// feed's seq is gap-free and in commit order), and NOTIFY inside the write
// transaction (delivered on commit).
//
// Both advisory lock keys are derived from the database and schema name, so
// stores in different schemas of one database (as the tests use) do not
// serialize each other, and every instance on the same schema agrees.
type postgresDialect struct {
	writeKey   int64  // pg_advisory_xact_lock key held by every write transaction
	migrateKey int64  // pg_advisory_lock key held while migrating at start
	channel    string // NOTIFY channel: ChangesChannel, suffixed by a non-public schema
}

func (postgresDialect) name() string { return "postgres" }

func (postgresDialect) migrations() ([]migration, error) {
	return readMigrations(postgresMigrations, "migrations/postgres")
}

func (postgresDialect) rebind(q string) string { return rebindDollar(q) }

func (d postgresDialect) lockWrites(ctx context.Context, tx *sql.Tx) error {
	_, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock($1)`, d.writeKey)
	return err
}

// latestJoin looks up each fact's current version in a LATERAL subquery
// (OFFSET 0 keeps the planner from flattening it into a join): a lookup of
// the unique (patient, domain, n) index per fact, 4 buffer hits. The plain
// join, on a schema not yet analyzed — a new database for its first minute,
// until autovacuum's ANALYZE — is planned as an index scan of every version
// of the fact filtered on n, which grows with the fact's history (92 buffer
// hits instead of 4, 158 µs a Publish's planning read, in the concurrent
// publish benchmark).
func (postgresDialect) latestJoin() string {
	return `CROSS JOIN LATERAL (SELECT * FROM versions v
		WHERE v.patient = f.patient AND v.domain = f.domain AND v.n = f.latest OFFSET 0) v`
}

// changeNotice is the NOTIFY payload (ChangeNotice, JSON) announcing r's
// version; the batch that appends it sends it (writeBatchPostgres).
func changeNotice(r versionRow) (string, error) {
	u, err := noticeURI(r.v.Patient, r.v.Domain, string(r.v.Audience))
	if err != nil {
		return "", err
	}
	b, err := json.Marshal(ChangeNotice{Seq: r.seq, URI: u, Version: r.v.N})
	if err != nil {
		return "", err
	}
	return string(b), nil
}

// unavailable classifies Postgres errors: SQLSTATE 53100 disk_full, 25006
// read_only_sql_transaction (a standby, or default_transaction_read_only),
// class 53 insufficient resources, 57P01–57P03 a server shutting down or
// starting, class 08 and failed connections (the server is unreachable).
func (postgresDialect) unavailable(err error) (string, time.Duration, bool) {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch {
		case pe.Code == "53100":
			return "the disk is full", retryAfterFull, true
		case pe.Code == "25006":
			return "the database is read-only", retryAfterFull, true
		case strings.HasPrefix(pe.Code, "53"):
			return "the database is out of resources", retryAfterTransient, true
		case pe.Code == "57P01", pe.Code == "57P02", pe.Code == "57P03":
			return "the database is shutting down or starting", retryAfterTransient, true
		case strings.HasPrefix(pe.Code, "08"):
			return "the database is unreachable", retryAfterTransient, true
		}
		return "", 0, false
	}
	var ce *pgconn.ConnectError
	var ne net.Error
	if errors.As(err, &ce) || errors.As(err, &ne) || errors.Is(err, driver.ErrBadConn) || pgconn.SafeToRetry(err) {
		return "the database is unreachable", retryAfterTransient, true
	}
	return "", 0, false
}

// rebindDollar rewrites "?" placeholders into "$1", "$2", … everywhere
// except inside what Postgres reads as text (PostgreSQL docs §4.1): string
// constants ('…', where two single quotes stand for one), escape strings
// (E'…', where a backslash also escapes the next character), quoted
// identifiers ("…", where two double quotes stand for one), dollar-quoted
// strings ($$…$$, $tag$…$tag$), line comments (-- to the end of the line)
// and block comments (/* … */, which nest). An unterminated construct runs
// to the end of the query, as Postgres reads it. The store's queries are
// written with "?" once, for both backends; this is the store's one
// placeholder rewriter.
func rebindDollar(q string) string {
	if !strings.Contains(q, "?") {
		return q
	}
	var (
		b strings.Builder
		n int
	)
	b.Grow(len(q) + 8)
	for i := 0; i < len(q); {
		if end := skipLiteral(q, i); end > i {
			b.WriteString(q[i:end])
			i = end
			continue
		}
		if q[i] == '?' {
			n++
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(n))
		} else {
			b.WriteByte(q[i])
		}
		i++
	}
	return b.String()
}

// skipLiteral returns the index just past the literal, quoted identifier or
// comment that starts at q[i], or i when none starts there.
func skipLiteral(q string, i int) int {
	c := q[i]
	switch {
	case c == '\'':
		escapes := i > 0 && (q[i-1] == 'E' || q[i-1] == 'e') && (i < 2 || !isIdentChar(q[i-2]))
		return skipQuoted(q, i, '\'', escapes)
	case c == '"':
		return skipQuoted(q, i, '"', false)
	case c == '-' && strings.HasPrefix(q[i:], "--"):
		if j := strings.IndexByte(q[i:], '\n'); j >= 0 {
			return i + j + 1
		}
		return len(q)
	case c == '/' && strings.HasPrefix(q[i:], "/*"):
		depth, j := 0, i
		for j < len(q) {
			switch {
			case strings.HasPrefix(q[j:], "/*"):
				depth, j = depth+1, j+2
			case strings.HasPrefix(q[j:], "*/"):
				depth, j = depth-1, j+2
				if depth == 0 {
					return j
				}
			default:
				j++
			}
		}
		return len(q)
	case c == '$' && (i == 0 || !isIdentChar(q[i-1])):
		tag, ok := dollarTag(q[i:])
		if !ok {
			return i // a positional parameter ($1) or a lone $
		}
		if j := strings.Index(q[i+len(tag):], tag); j >= 0 {
			return i + len(tag) + j + len(tag)
		}
		return len(q)
	}
	return i
}

// skipQuoted returns the index just past the quote-delimited text that
// starts at q[i] (== quote): a doubled quote stays inside, and with
// escapes a backslash takes the next character with it.
func skipQuoted(q string, i int, quote byte, escapes bool) int {
	for j := i + 1; j < len(q); j++ {
		switch {
		case escapes && q[j] == '\\':
			j++
		case q[j] == quote && j+1 < len(q) && q[j+1] == quote:
			j++
		case q[j] == quote:
			return j + 1
		}
	}
	return len(q)
}

// dollarTag returns the dollar-quote delimiter ("$$" or "$tag$") at the
// start of s.
func dollarTag(s string) (string, bool) {
	for j := 1; j < len(s); j++ {
		switch c := s[j]; {
		case c == '$':
			return s[:j+1], true
		case c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= 0x80:
		case c >= '0' && c <= '9' && j > 1:
		default:
			return "", false
		}
	}
	return "", false
}

func isIdentChar(c byte) bool {
	return c == '_' || c == '$' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c >= 0x80
}

// IsPostgresDSN reports whether dsn selects the Postgres backend: it begins
// postgres:// or postgresql://.
func IsPostgresDSN(dsn string) bool {
	return strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://")
}

// openPostgres opens the store on the Postgres database dsn names (a
// postgres:// URL; its query may set search_path to use a schema other than
// public). It applies the embedded migrations holding a session advisory
// lock, so instances starting at once migrate one after the other, and
// opens the LISTEN connection that wakes this instance's watchers (kept
// open, and re-opened when lost, until Close).
// Errors: a DSN pgx cannot parse, an unreachable server, a search_path that
// names no existing schema, a failed migration, a failed LISTEN.
func openPostgres(ctx context.Context, opts Options) (*Store, error) {
	cfg, err := pgx.ParseConfig(opts.DSN)
	if err != nil {
		return nil, fmt.Errorf("store: postgres DSN: %w", err)
	}
	db := stdlib.OpenDB(*cfg)
	db.SetMaxOpenConns(pgMaxOpenConns)
	db.SetMaxIdleConns(pgMaxIdleConns)
	db.SetConnMaxIdleTime(pgConnMaxIdleTime)
	d, err := postgresKeys(ctx, db)
	if err != nil {
		db.Close()
		return nil, err
	}
	s, err := migrateLockedAndOpen(ctx, db, d, opts)
	if err != nil {
		db.Close()
		return nil, err
	}
	conn, err := listen(ctx, cfg, d.channel)
	if err != nil {
		s.Close()
		return nil, fmt.Errorf("store: open postgres: LISTEN: %w", err)
	}
	go s.listenChanges(cfg.Copy(), d.channel, conn)
	return s, nil
}

// postgresKeys derives the dialect's advisory lock keys from the database
// and the schema the connection's search_path resolves to.
func postgresKeys(ctx context.Context, db *sql.DB) (postgresDialect, error) {
	var dbName string
	var schema sql.NullString
	if err := db.QueryRowContext(ctx, `SELECT current_database(), current_schema()`).Scan(&dbName, &schema); err != nil {
		return postgresDialect{}, fmt.Errorf("store: open postgres: %w", err)
	}
	if !schema.Valid {
		return postgresDialect{}, errors.New("store: open postgres: search_path names no existing schema")
	}
	key := func(purpose string) int64 {
		h := fnv.New64a()
		h.Write([]byte("unsay/" + purpose + "\x00" + dbName + "\x00" + schema.String))
		return int64(h.Sum64())
	}
	ch := ChangesChannel
	if schema.String != "public" {
		ch += "_" + schema.String
	}
	return postgresDialect{writeKey: key("write"), migrateKey: key("migrate"), channel: ch}, nil
}

// migrateLockedAndOpen runs newStore (which migrates) while one pooled
// connection holds the session-level migration lock.
func migrateLockedAndOpen(ctx context.Context, db *sql.DB, d postgresDialect, opts Options) (*Store, error) {
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("store: open postgres: %w", err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, `SELECT pg_advisory_lock($1)`, d.migrateKey); err != nil {
		return nil, fmt.Errorf("store: migration lock: %w", err)
	}
	defer conn.ExecContext(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock($1)`, d.migrateKey)
	return newStore(ctx, db, d, opts)
}

// listen opens a connection LISTENing on channel.
func listen(ctx context.Context, cfg *pgx.ConnConfig, channel string) (*pgx.Conn, error) {
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if _, err := conn.Exec(ctx, `LISTEN `+pgx.Identifier{channel}.Sanitize()); err != nil {
		conn.Close(context.WithoutCancel(ctx))
		return nil, err
	}
	return conn, nil
}

// listenChanges waits on conn (LISTENing on channel) until the store
// closes, waking every watcher on each notification. A lost connection is
// re-opened with backoff (100 ms doubling to 5 s), and every watcher is
// woken after each reconnect to catch up, by query, whatever was committed
// while nobody listened.
func (s *Store) listenChanges(cfg *pgx.ConnConfig, channel string, conn *pgx.Conn) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-s.closed
		cancel()
	}()
	backoff := pgListenBackoffMin
	for {
		if conn != nil {
			err := waitNotifications(ctx, conn, s.noticed)
			conn.Close(context.Background())
			conn = nil
			if ctx.Err() != nil {
				return
			}
			s.log.Warn("store: LISTEN connection lost; reconnecting", "channel", channel, "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		c, err := listen(ctx, cfg, channel)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			s.log.Warn("store: LISTEN reconnect failed", "channel", channel, "err", err, "backoff", backoff)
			backoff = min(2*backoff, pgListenBackoffMax)
			continue
		}
		conn, backoff = c, pgListenBackoffMin
		s.wakeWatchers() // catch up what was committed while nobody listened
	}
}

// waitNotifications calls wake with the payload of every notification on
// conn until conn fails or ctx ends.
func waitNotifications(ctx context.Context, conn *pgx.Conn, wake func(payload string)) error {
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		wake(n.Payload)
	}
}

// noticed takes one NOTIFY payload (ChangeNotice): a wakeup from elsewhere
// (wakeWatchers: every watcher reads the database) unless it announces a
// Seq of this process's own — held in the in-memory feed, or in the batch
// committing now (feedCommitting) — whose NOTIFY comes back to its own
// LISTEN connection: feedCommitted wakes the watchers to deliver those from
// memory. Counting those as foreign made every watcher read the database
// after every commit on Postgres, as if the memory were not there (issue
// 17). A payload that does not parse, or any other Seq (another
// instance's commit), wakes them all as before.
func (s *Store) noticed(payload string) {
	var n ChangeNotice
	if json.Unmarshal([]byte(payload), &n) == nil && n.Seq > 0 {
		s.wakeMu.Lock()
		ours := s.feed.ours(n.Seq)
		s.wakeMu.Unlock()
		if ours {
			return
		}
	}
	s.wakeWatchers()
}

// noticeURI is the unversioned care URI a notice names.
func noticeURI(patient, domain, audience string) (string, error) {
	a := models.Audience(audience)
	if !a.Valid() {
		return "", fmt.Errorf("version of %s/%s has unknown audience %q", patient, domain, audience)
	}
	return models.NewURI(a, patient, domain).String(), nil
}

// sqlBool is b as the 0/1 an INTEGER flag column holds (versions.sealed):
// SQLite's driver converts a Go bool itself, pgx does not.
func sqlBool(b bool) int {
	if b {
		return 1
	}
	return 0
}

// WithMigrationLock runs fn while this instance holds the store's
// migration lock, for start-up work that must not race another instance
// starting at once (bridge/app builds its token verification under it): on
// Postgres the first instance runs fn while the others wait (a session
// advisory lock, the same one Open migrates under). On SQLite the database's own write lock already
// serializes DDL and fn simply runs. It returns fn's error, or the error
// taking the lock.
func (s *Store) WithMigrationLock(ctx context.Context, fn func(ctx context.Context) error) error {
	d, ok := s.d.(postgresDialect)
	if !ok {
		return fn(ctx)
	}
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("store: migration lock: %w", err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, `SELECT pg_advisory_lock($1)`, d.migrateKey); err != nil {
		return fmt.Errorf("store: migration lock: %w", err)
	}
	defer conn.ExecContext(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock($1)`, d.migrateKey)
	return fn(ctx)
}
