package speech

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/unsay/unsay/models"
)

//go:embed migrations
var migrations embed.FS

// Dialects understood by New.
const (
	DialectSQLite   = "sqlite"
	DialectPostgres = "postgres"
)

// Announcement states as stored in speech_announcements.state.
const (
	statePending = "pending" // Ray has yet to hear it
	stateHeard   = "heard"   // MarkHeard reached its to_version
	stateDropped = "dropped" // the latest words equal the heard words: nothing to say
)

// ledger is the durable heard ledger (speech_heard: what Ray heard for
// certain; speech_offered_version: what he may have heard) and the
// announcement queue (speech_announcements). It stores only (patient, uri,
// fromVersion, toVersion, state) and versions — never clinical text (P-19).
//
// Every write runs in one transaction that first takes the dialect's write
// lock, so a read-then-write decision cannot interleave with another
// writer (another instance on Postgres, or the store on the same SQLite
// file). mu serializes this process's writers.
type ledger struct {
	db      *sql.DB
	dialect string
	mu      sync.Mutex
	// now stamps the delivery log (delivery.go); the principal's clock.
	now func() time.Time
	// onWrite, when set, is called after every committed write (the
	// delivery log may have moved): OnDelivery.
	onWrite atomic.Pointer[func()]
	// stmts caches prepared read statements by query (stmt.go).
	stmts sync.Map
}

// row is one announcement as stored.
type row struct {
	ID      int64
	Patient string
	URI     string
	From    int
	To      int
	State   string
	Offered bool // an offer of the fact is unconfirmed: he may have heard it, so it is said again saying so (P-24)
}

func newLedger(ctx context.Context, db *sql.DB, dialect string) (*ledger, error) {
	l := &ledger{db: db, dialect: dialect, now: time.Now}
	if err := l.migrate(ctx); err != nil {
		return nil, err
	}
	return l, nil
}

// migrate applies the embedded migrations of the dialect, in file-name
// order. Every statement is idempotent (IF NOT EXISTS).
func (l *ledger) migrate(ctx context.Context) error {
	dir := "migrations/" + l.dialect
	entries, err := fs.ReadDir(migrations, dir)
	if err != nil {
		return fmt.Errorf("speech: migrations for %q: %w", l.dialect, err)
	}
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".sql") {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	for _, name := range names {
		b, err := fs.ReadFile(migrations, dir+"/"+name)
		if err != nil {
			return fmt.Errorf("speech: read migration %s: %w", name, err)
		}
		for _, stmt := range splitSQL(string(b)) {
			if _, err := l.db.ExecContext(ctx, stmt); err != nil {
				return fmt.Errorf("speech: migration %s: %w", name, err)
			}
		}
	}
	return nil
}

// splitSQL splits a migration file into statements on ";" at line end and
// drops "--" comment lines.
func splitSQL(src string) []string {
	var out []string
	var cur strings.Builder
	for _, line := range strings.Split(src, "\n") {
		t := strings.TrimSpace(line)
		if t == "" || strings.HasPrefix(t, "--") {
			continue
		}
		cur.WriteString(line)
		cur.WriteByte('\n')
		if strings.HasSuffix(t, ";") {
			out = append(out, strings.TrimSpace(cur.String()))
			cur.Reset()
		}
	}
	if s := strings.TrimSpace(cur.String()); s != "" {
		out = append(out, s)
	}
	return out
}

// q rewrites "?" placeholders to "$1, $2…" for Postgres.
func (l *ledger) q(query string) string {
	if l.dialect != DialectPostgres {
		return query
	}
	var b strings.Builder
	n := 0
	for i := 0; i < len(query); i++ {
		if query[i] == '?' {
			n++
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(n))
			continue
		}
		b.WriteByte(query[i])
	}
	return b.String()
}

// lockStmt takes the write lock at the start of a transaction: on SQLite a
// write statement (matching no row) upgrades the transaction to a writer at
// once, so busy_timeout applies and no stale snapshot is read; on Postgres
// a table lock that conflicts with itself serializes ledger writers across
// instances.
func (l *ledger) lockStmt() string {
	if l.dialect == DialectPostgres {
		return "LOCK TABLE speech_heard, speech_announcements, speech_offered_version, speech_delivery IN SHARE ROW EXCLUSIVE MODE"
	}
	return "UPDATE speech_heard SET version = version WHERE 1 = 0"
}

// write runs fn in a locked transaction and commits it.
func (l *ledger) write(ctx context.Context, fn func(tx *sql.Tx) error) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	tx, err := l.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("speech: ledger: begin: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // after Commit it is a no-op
	if _, err := tx.ExecContext(ctx, l.lockStmt()); err != nil {
		return fmt.Errorf("speech: ledger: lock: %w", err)
	}
	if err := fn(tx); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("speech: ledger: commit: %w", err)
	}
	if fn := l.onWrite.Load(); fn != nil {
		(*fn)()
	}
	return nil
}

type querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// heardIn returns the version Ray last heard of uri, 0 if never.
func (l *ledger) heardIn(ctx context.Context, db querier, patient, uri string) (int, error) {
	var v int
	err := l.queryRow(ctx, db, l.q("SELECT version FROM speech_heard WHERE patient = ? AND uri = ?"), patient, uri).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("speech: ledger: heard: %w", err)
	}
	return v, nil
}

// Heard returns the version Ray last heard of uri, 0 if never.
func (l *ledger) Heard(ctx context.Context, patient, uri string) (int, error) {
	return l.heardIn(ctx, l.db, patient, uri)
}

func (l *ledger) pendingIn(ctx context.Context, db querier, patient, uri string) (row, bool, error) {
	r := row{Patient: patient, URI: uri, State: statePending}
	err := l.queryRow(ctx, db, l.q("SELECT id, from_version, to_version FROM speech_announcements WHERE patient = ? AND uri = ? AND state = 'pending'"), patient, uri).
		Scan(&r.ID, &r.From, &r.To)
	if errors.Is(err, sql.ErrNoRows) {
		return row{}, false, nil
	}
	if err != nil {
		return row{}, false, fmt.Errorf("speech: ledger: pending: %w", err)
	}
	return r, true, nil
}

func (l *ledger) setHeard(ctx context.Context, tx *sql.Tx, patient, uri string, version int) error {
	_, err := tx.ExecContext(ctx, l.q(`INSERT INTO speech_heard (patient, uri, version) VALUES (?, ?, ?)
ON CONFLICT (patient, uri) DO UPDATE SET version = excluded.version WHERE excluded.version > speech_heard.version`), patient, uri, version)
	if err != nil {
		return fmt.Errorf("speech: ledger: set heard: %w", err)
	}
	return l.clearOffered(ctx, tx, patient, uri, version)
}

// setHeardExactly records version as the one he last heard, even when the
// ledger held a newer one: what a confirmed delivery carried is what he
// heard (P-19), whatever was written meanwhile.
func (l *ledger) setHeardExactly(ctx context.Context, tx *sql.Tx, patient, uri string, version int) error {
	_, err := tx.ExecContext(ctx, l.q(`INSERT INTO speech_heard (patient, uri, version) VALUES (?, ?, ?)
ON CONFLICT (patient, uri) DO UPDATE SET version = excluded.version`), patient, uri, version)
	if err != nil {
		return fmt.Errorf("speech: ledger: set heard: %w", err)
	}
	return l.clearOffered(ctx, tx, patient, uri, version)
}

// clearOffered forgets an unconfirmed offer of version or older: he heard
// version, so it is no longer in doubt.
func (l *ledger) clearOffered(ctx context.Context, tx *sql.Tx, patient, uri string, version int) error {
	if _, err := tx.ExecContext(ctx, l.q("DELETE FROM speech_offered_version WHERE patient = ? AND uri = ? AND version <= ?"), patient, uri, version); err != nil {
		return fmt.Errorf("speech: ledger: clear offered: %w", err)
	}
	return nil
}

// offeredIn returns the version of uri he may have heard — offered in a
// response whose delivery was never confirmed — 0 if none.
func (l *ledger) offeredIn(ctx context.Context, db querier, patient, uri string) (int, error) {
	var v int
	err := l.queryRow(ctx, db, l.q("SELECT version FROM speech_offered_version WHERE patient = ? AND uri = ?"), patient, uri).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("speech: ledger: offered: %w", err)
	}
	return v, nil
}

// errHeardMoved: the heard or offered version changed between the
// caller's read and its write; the caller re-reads and decides again.
var errHeardMoved = errors.New("speech: heard version moved")

// heardState is what Ray heard of one fact: for certain (Heard) and maybe
// (Offered: put in a response whose delivery is unconfirmed), 0 for none.
type heardState struct{ Heard, Offered int }

// HeardState returns what Ray heard of uri: the version he heard for
// certain and the one he may have heard (0 for none).
func (l *ledger) HeardState(ctx context.Context, patient, uri string) (heardState, error) {
	h, err := l.heardIn(ctx, l.db, patient, uri)
	if err != nil {
		return heardState{}, err
	}
	o, err := l.offeredIn(ctx, l.db, patient, uri)
	if err != nil {
		return heardState{}, err
	}
	return heardState{Heard: h, Offered: o}, nil
}

// Observe records that latest is the fact's current version, given that
// the caller read the heard state expect and compared the words of latest
// with those of expect.Heard (sameHeard) and expect.Offered (sameOffered).
// Inside one locked transaction it reads the heard state, the patient's
// baseline and the pending announcement, and applies decide (P-19, P-24):
// nothing, queue one announcement, extend or rewrite the pending one
// (stacked revisions collapse into one), or settle (unchanged words: drop
// the pending one and move heard to latest).
//
// It reports whether it changed anything, and errHeardMoved when the heard
// state is no longer expect (the caller re-reads and decides again).
func (l *ledger) Observe(ctx context.Context, patient, uri string, expect heardState, latest int, sameHeard, sameOffered bool) (changed bool, err error) {
	err = l.write(ctx, func(tx *sql.Tx) error {
		h, err := l.heardIn(ctx, tx, patient, uri)
		if err != nil {
			return err
		}
		off, err := l.offeredIn(ctx, tx, patient, uri)
		if err != nil {
			return err
		}
		if h != expect.Heard || off != expect.Offered {
			return errHeardMoved
		}
		base, err := l.baselineIn(ctx, tx, patient, uri)
		if err != nil {
			return err
		}
		p, ok, err := l.pendingIn(ctx, tx, patient, uri)
		if err != nil {
			return err
		}
		o := observation{Latest: latest, Heard: h, Offered: off, Baseline: base, SameAsHeard: sameHeard, SameAsOffered: sameOffered}
		if ok {
			o.Pending = &window{From: p.From, To: p.To}
		}
		v := decide(o)
		switch v.Kind {
		case keep:
			return nil
		case settle:
			if ok {
				if _, err := tx.ExecContext(ctx, l.q("UPDATE speech_announcements SET state = 'dropped' WHERE id = ?"), p.ID); err != nil {
					return fmt.Errorf("speech: ledger: drop: %w", err)
				}
			}
			changed = true
			if err := l.setHeard(ctx, tx, patient, uri, v.At.To); err != nil {
				return err
			}
			return l.logDelivery(ctx, tx, patient, uri, v.At.To, models.Hearing{}, models.DeliveryUnchanged)
		case extend:
			if _, err := tx.ExecContext(ctx, l.q("UPDATE speech_announcements SET from_version = ?, to_version = ? WHERE id = ?"), v.At.From, v.At.To, p.ID); err != nil {
				return fmt.Errorf("speech: ledger: update pending: %w", err)
			}
			changed = true
			return l.logDelivery(ctx, tx, patient, uri, v.At.To, models.Hearing{}, models.DeliveryQueued)
		case queue:
			if _, err := tx.ExecContext(ctx, l.q("INSERT INTO speech_announcements (patient, uri, from_version, to_version, state) VALUES (?, ?, ?, ?, 'pending')"), patient, uri, v.At.From, v.At.To); err != nil {
				return fmt.Errorf("speech: ledger: queue: %w", err)
			}
			changed = true
			return l.logDelivery(ctx, tx, patient, uri, v.At.To, models.Hearing{}, models.DeliveryQueued)
		}
		return nil
	})
	return changed, err
}

// offer is one announcement put in a response about to be written: its id
// and the version of its fact it speaks — or, with Told, a version of a
// fact the response tells plainly (ID 0).
type offer struct {
	ID      int64
	URI     string
	Version int
	Told    bool
}

// Offered records, in one transaction, that offers were put in a response
// about to be written: until MarkHeard (an announcement) or MarkTold (a
// fact told) confirms the delivery he may have heard each one's version —
// a later revision withdraws it too — and they are spoken again saying so
// (P-24). Offers of announcements no longer pending are ignored. A fact
// told is offered only when the ledger does not already hold that version
// or a newer one as heard (then nothing is written: the fast path of every
// turn that repeats what he heard), and never while a retraction of it is
// pending — MarkTold never touches that one either (P-19).
func (l *ledger) Offered(ctx context.Context, patient string, offers []offer) error {
	if len(offers) == 0 {
		return nil
	}
	heard, err := l.heardOf(ctx, patient)
	if err != nil {
		return err
	}
	need := offers[:0:0]
	for _, o := range offers {
		if o.Told && heard[o.URI] >= o.Version {
			continue
		}
		need = append(need, o)
	}
	if len(need) == 0 {
		return nil
	}
	return l.write(ctx, func(tx *sql.Tx) error {
		at := l.now().UnixMilli()
		for _, o := range need {
			if o.Told {
				if err := l.offerTold(ctx, tx, patient, o); err != nil {
					return err
				}
				continue
			}
			if _, err := tx.ExecContext(ctx, l.q(`INSERT INTO speech_offered_version (patient, uri, version)
SELECT patient, uri, ? FROM speech_announcements WHERE id = ? AND patient = ? AND uri = ? AND state = 'pending'
ON CONFLICT (patient, uri) DO UPDATE SET version = excluded.version WHERE excluded.version > speech_offered_version.version`), o.Version, o.ID, patient, o.URI); err != nil {
				return fmt.Errorf("speech: ledger: offered: %w", err)
			}
			if _, err := tx.ExecContext(ctx, l.q(`INSERT INTO speech_delivery (patient, uri, version, event, at_ms)
SELECT patient, uri, ?, 'offered', ? FROM speech_announcements WHERE id = ? AND patient = ? AND uri = ? AND state = 'pending'
ON CONFLICT (patient, uri, version, event) DO NOTHING`), o.Version, at, o.ID, patient, o.URI); err != nil {
				return fmt.Errorf("speech: ledger: offered: %w", err)
			}
		}
		return nil
	})
}

// offerTold records that version o.Version of the fact o.URI is told in a
// response about to be written, unless he heard it or newer, or a
// retraction of the fact is pending.
func (l *ledger) offerTold(ctx context.Context, tx *sql.Tx, patient string, o offer) error {
	h, err := l.heardIn(ctx, tx, patient, o.URI)
	if err != nil {
		return err
	}
	if h >= o.Version {
		return nil
	}
	if p, ok, err := l.pendingIn(ctx, tx, patient, o.URI); err != nil || ok && p.From > 0 {
		return err
	}
	if _, err := tx.ExecContext(ctx, l.q(`INSERT INTO speech_offered_version (patient, uri, version) VALUES (?, ?, ?)
ON CONFLICT (patient, uri) DO UPDATE SET version = excluded.version WHERE excluded.version > speech_offered_version.version`), patient, o.URI, o.Version); err != nil {
		return fmt.Errorf("speech: ledger: offered told: %w", err)
	}
	return nil
}

// heardOf returns, per fact URI of patient, the version he heard for certain.
func (l *ledger) heardOf(ctx context.Context, patient string) (map[string]int, error) {
	rows, err := l.db.QueryContext(ctx, l.q("SELECT uri, version FROM speech_heard WHERE patient = ?"), patient)
	if err != nil {
		return nil, fmt.Errorf("speech: ledger: heard: %w", err)
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var uri string
		var v int
		if err := rows.Scan(&uri, &v); err != nil {
			return nil, fmt.Errorf("speech: ledger: heard: %w", err)
		}
		out[uri] = v
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("speech: ledger: heard: %w", err)
	}
	return out, nil
}

// MarkHeard records that a response carrying the announcement of uri at
// version was delivered: version is what he last heard — even when the
// ledger held a newer heard version, or a newer version was written
// meanwhile (P-19) — an offer up to version is confirmed, a pending
// announcement that reaches no further than version is heard, and one that
// reaches further now starts from version. The delivery log records the
// first hearing of version and how (how.At zero: the ledger's clock).
func (l *ledger) MarkHeard(ctx context.Context, patient, uri string, version int, how models.Hearing) error {
	// Fast path, no write transaction (no fsync): nothing would change.
	if h, err := l.heardIn(ctx, l.db, patient, uri); err == nil && h == version {
		if off, err := l.offeredIn(ctx, l.db, patient, uri); err == nil && off == 0 {
			if p, ok, err := l.pendingIn(ctx, l.db, patient, uri); err == nil && (!ok || p.From == version && p.To > version) {
				return nil
			}
		}
	}
	return l.write(ctx, func(tx *sql.Tx) error {
		if err := l.setHeardExactly(ctx, tx, patient, uri, version); err != nil {
			return err
		}
		if err := l.logDelivery(ctx, tx, patient, uri, version, how, models.DeliveryHeard); err != nil {
			return err
		}
		return l.advancePending(ctx, tx, patient, uri, version)
	})
}

// advancePending marks the pending announcement of uri heard when it
// reaches no further than version, and otherwise starts it from version.
func (l *ledger) advancePending(ctx context.Context, tx *sql.Tx, patient, uri string, version int) error {
	if _, err := tx.ExecContext(ctx, l.q("UPDATE speech_announcements SET state = 'heard' WHERE patient = ? AND uri = ? AND state = 'pending' AND to_version <= ?"), patient, uri, version); err != nil {
		return fmt.Errorf("speech: ledger: mark heard: %w", err)
	}
	if _, err := tx.ExecContext(ctx, l.q("UPDATE speech_announcements SET from_version = ? WHERE patient = ? AND uri = ? AND state = 'pending' AND from_version <> ?"), version, patient, uri, version); err != nil {
		return fmt.Errorf("speech: ledger: advance pending: %w", err)
	}
	return nil
}

// MarkTold records that version of uri was spoken as a plain fact — an
// answer, not an announcement — confirming its offer (Offered, Told). It
// never settles a pending retraction: he heard the new words but not that
// they withdraw the ones he was told before, so the retraction stays owed
// and nothing moves (P-19, P-24) — unless what was told is no newer than
// what that retraction withdraws (a turn told it before the revision was
// read): then heard moves forward to it and its offer is confirmed, and
// the retraction still withdraws it. Otherwise the heard version moves
// forward to version (never back), a pending first hearing it covers is
// heard, and one that reaches further now withdraws version; the delivery
// log records how.
func (l *ledger) MarkTold(ctx context.Context, patient, uri string, version int, how models.Hearing) error {
	_, err := l.markTold(ctx, patient, uri, version, how)
	return err
}

// markTold is MarkTold, reporting whether it changed the ledger (false
// when he heard this version or newer, or a retraction stays owed).
func (l *ledger) markTold(ctx context.Context, patient, uri string, version int, how models.Hearing) (bool, error) {
	p, ok, err := l.pendingIn(ctx, l.db, patient, uri)
	if err != nil {
		return false, err
	}
	if ok && p.From > 0 && version > p.From {
		return false, nil // the retraction stays owed; the write below would re-check it anyway
	}
	if h, err := l.heardIn(ctx, l.db, patient, uri); err == nil && h >= version {
		return false, nil // fast path: he heard this version or newer (its offer was never written)
	}
	wrote := false
	err = l.write(ctx, func(tx *sql.Tx) error {
		p, ok, err := l.pendingIn(ctx, tx, patient, uri)
		if err != nil {
			return err
		}
		retraction := ok && p.From > 0
		if retraction && version > p.From {
			return nil
		}
		h, err := l.heardIn(ctx, tx, patient, uri)
		if err != nil {
			return err
		}
		if version <= h {
			return nil
		}
		if err := l.setHeard(ctx, tx, patient, uri, version); err != nil {
			return err
		}
		if err := l.logDelivery(ctx, tx, patient, uri, version, how, models.DeliveryHeard); err != nil {
			return err
		}
		wrote = true
		if retraction {
			return nil // it already withdraws version or what he may have heard after it
		}
		return l.advancePending(ctx, tx, patient, uri, version)
	})
	return wrote && err == nil, err
}

// marked is what one response marked of one fact (models.Marked).
type marked struct {
	URI                        string
	HeardBefore, From, Version int
}

// NotPlayed re-opens, in one transaction, what responses Alexa reported
// not played had marked (P-24): for each fact whose heard version is still
// the one marked — a later confirmed delivery that moved it is never
// undone, and a second call finds nothing to do — heard goes back to
// HeardBefore, Version becomes offered (he may have heard it), and unless
// an announcement is already pending for the fact (a later revision,
// which now withdraws Version, said again) the announcement from From to
// Version is owed again, said saying so. It reports how many facts it
// re-opened.
func (l *ledger) NotPlayed(ctx context.Context, patient string, ms []marked) (int, error) {
	n := 0
	err := l.write(ctx, func(tx *sql.Tx) error {
		n = 0
		for _, m := range ms {
			h, err := l.heardIn(ctx, tx, patient, m.URI)
			if err != nil {
				return err
			}
			if h != m.Version {
				continue
			}
			if m.HeardBefore == 0 {
				_, err = tx.ExecContext(ctx, l.q("DELETE FROM speech_heard WHERE patient = ? AND uri = ?"), patient, m.URI)
			} else {
				_, err = tx.ExecContext(ctx, l.q("UPDATE speech_heard SET version = ? WHERE patient = ? AND uri = ?"), m.HeardBefore, patient, m.URI)
			}
			if err != nil {
				return fmt.Errorf("speech: ledger: not played: %w", err)
			}
			if _, err := tx.ExecContext(ctx, l.q(`INSERT INTO speech_offered_version (patient, uri, version) VALUES (?, ?, ?)
ON CONFLICT (patient, uri) DO UPDATE SET version = excluded.version WHERE excluded.version > speech_offered_version.version`), patient, m.URI, m.Version); err != nil {
				return fmt.Errorf("speech: ledger: not played: %w", err)
			}
			_, ok, err := l.pendingIn(ctx, tx, patient, m.URI)
			if err != nil {
				return err
			}
			if !ok {
				if _, err := tx.ExecContext(ctx, l.q("INSERT INTO speech_announcements (patient, uri, from_version, to_version, state) VALUES (?, ?, ?, ?, 'pending')"), patient, m.URI, m.From, m.Version); err != nil {
					return fmt.Errorf("speech: ledger: not played: %w", err)
				}
				if err := l.logDelivery(ctx, tx, patient, m.URI, m.Version, models.Hearing{}, models.DeliveryQueued); err != nil {
					return err
				}
			}
			n++
		}
		return nil
	})
	return n, err
}

// Drop marks the pending announcement id as dropped (its words did not
// change) and moves the heard version to its to_version. It is a no-op
// when the announcement is no longer pending.
func (l *ledger) Drop(ctx context.Context, id int64) error {
	return l.write(ctx, func(tx *sql.Tx) error {
		r := row{ID: id}
		err := l.queryRow(ctx, tx, l.q("SELECT patient, uri, to_version FROM speech_announcements WHERE id = ? AND state = 'pending'"), id).Scan(&r.Patient, &r.URI, &r.To)
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("speech: ledger: drop: %w", err)
		}
		if _, err := tx.ExecContext(ctx, l.q("UPDATE speech_announcements SET state = 'dropped' WHERE id = ?"), id); err != nil {
			return fmt.Errorf("speech: ledger: drop: %w", err)
		}
		if err := l.setHeard(ctx, tx, r.Patient, r.URI, r.To); err != nil {
			return err
		}
		return l.logDelivery(ctx, tx, r.Patient, r.URI, r.To, models.Hearing{}, models.DeliveryUnchanged)
	})
}

// Pending returns the patient's pending announcements, oldest first (by
// id), each with Offered set while an offer of its fact is unconfirmed.
func (l *ledger) Pending(ctx context.Context, patient string) ([]row, error) {
	rows, err := l.query(ctx, l.q(`SELECT a.id, a.uri, a.from_version, a.to_version, o.version IS NOT NULL
FROM speech_announcements a LEFT JOIN speech_offered_version o ON o.patient = a.patient AND o.uri = a.uri
WHERE a.patient = ? AND a.state = 'pending' ORDER BY a.id`), patient)
	if err != nil {
		return nil, fmt.Errorf("speech: ledger: list pending: %w", err)
	}
	defer rows.Close()
	var out []row
	for rows.Next() {
		r := row{Patient: patient, State: statePending}
		if err := rows.Scan(&r.ID, &r.URI, &r.From, &r.To, &r.Offered); err != nil {
			return nil, fmt.Errorf("speech: ledger: list pending: %w", err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("speech: ledger: list pending: %w", err)
	}
	return out, nil
}

// factLedger is what the ledger holds about one fact of a patient, for a
// turn to find what it must reconcile before it speaks.
type factLedger struct{ Heard, Offered, Baseline int }

// Facts returns, per fact URI of patient, the version he heard for
// certain, the one he may have heard and his baseline (0 for none); a fact
// the ledger knows nothing of is absent.
func (l *ledger) Facts(ctx context.Context, patient string) (map[string]factLedger, error) {
	out := map[string]factLedger{}
	for _, t := range []struct {
		table string
		set   func(*factLedger, int)
	}{
		{"speech_heard", func(f *factLedger, v int) { f.Heard = v }},
		{"speech_offered_version", func(f *factLedger, v int) { f.Offered = v }},
		{"speech_baseline", func(f *factLedger, v int) { f.Baseline = v }},
	} {
		rows, err := l.query(ctx, l.q("SELECT uri, version FROM "+t.table+" WHERE patient = ?"), patient)
		if err != nil {
			return nil, fmt.Errorf("speech: ledger: facts: %w", err)
		}
		for rows.Next() {
			var uri string
			var v int
			if err := rows.Scan(&uri, &v); err != nil {
				rows.Close()
				return nil, fmt.Errorf("speech: ledger: facts: %w", err)
			}
			f := out[uri]
			t.set(&f, v)
			out[uri] = f
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return nil, fmt.Errorf("speech: ledger: facts: %w", err)
		}
	}
	return out, nil
}

// Status returns the heard version of uri and the to_version of its
// pending announcement (0 when none).
func (l *ledger) Status(ctx context.Context, patient, uri string) (heard, pendingTo int, err error) {
	heard, err = l.Heard(ctx, patient, uri)
	if err != nil {
		return 0, 0, err
	}
	p, ok, err := l.pendingIn(ctx, l.db, patient, uri)
	if err != nil || !ok {
		return heard, 0, err
	}
	return heard, p.To, nil
}

// Backlog counts pending announcements for every patient.
func (l *ledger) Backlog(ctx context.Context) (int, error) {
	var n int
	if err := l.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM speech_announcements WHERE state = 'pending'").Scan(&n); err != nil {
		return 0, fmt.Errorf("speech: ledger: backlog: %w", err)
	}
	return n, nil
}
