package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/unsay/unsay/models"
)

// HeardLedger is the speech principal's durable heard ledger (it
// implements bridge/speech's LedgerStore; P-19, P-24): speech_heard (what
// Ray heard for certain; its standing against not-played reports —
// reopenable, deferred_heard/deferred_from, settled_from: migrations 050,
// 051, 064), speech_offered_version (every version he may
// have heard, one row each; migration 061),
// the announcement queue (speech_announcements), his baseline
// (speech_followed, speech_baseline; baseline.go's part below) and the
// delivery log (speech_delivery, delivery.go), all created by migration
// 040. It stores only patients, fact URIs, versions, announcement ids,
// states, times and device kinds — never clinical text (P-19).
//
// Every write runs in one transaction that first takes the ledger's write
// lock (lockLedger), so a read-then-write decision cannot interleave with
// another writer (another instance on Postgres, or the store on the same
// SQLite file); mu serializes this process's ledger writers in front of
// it. The delivery-log rows a change writes are written in its
// transaction. The ledger's reads go through the store's prepared
// statements (stmt.go): a turn reads it several times.
//
// Its methods are safe for concurrent use. Get it with Store.HeardLedger.
type HeardLedger struct {
	s  *Store
	mu sync.Mutex
	// onWrite, when set, is called after every committed write (the
	// delivery log may have moved): OnWrite.
	onWrite atomic.Pointer[func()]
}

// HeardLedger returns the store's heard ledger (one per Store).
func (s *Store) HeardLedger() *HeardLedger { return &s.heard }

// Announcement states as stored in speech_announcements.state.
const (
	statePending = "pending" // Ray has yet to hear it
	stateHeard   = "heard"   // MarkHeard reached its to_version
	stateDropped = "dropped" // the latest words equal the heard words: nothing to say
)

// OnWrite sets fn to be called after every write this ledger commits, on
// the committing goroutine (the delivery log may have grown). fn must not
// block. A later call replaces fn; nil removes it.
func (l *HeardLedger) OnWrite(fn func()) {
	if fn == nil {
		l.onWrite.Store(nil)
		return
	}
	l.onWrite.Store(&fn)
}

// q is query in the dialect's placeholder style.
func (l *HeardLedger) q(query string) string { return l.s.rebound(query) }

// exec runs a write statement in tx, the ledger's locked transaction. On
// SQLite through its cached prepared statement (parsing was a tenth of a
// turn's CPU); on Postgres as is: preparing opens the target table on
// another pooled connection, which waits for the very lock tx holds
// (lockLedger: SHARE ROW EXCLUSIVE conflicts with the parse's ROW
// EXCLUSIVE), and tx would wait for the prepare.
func (l *HeardLedger) exec(ctx context.Context, tx *sql.Tx, query string, args ...any) (sql.Result, error) {
	if _, ok := l.s.d.(postgresDialect); ok {
		return tx.ExecContext(ctx, query, args...)
	}
	return l.s.execPrepared(ctx, tx, query, args...)
}

// queryIn runs query on db — the *sql.DB, or the ledger's transaction —
// through its cached prepared statement.
func (l *HeardLedger) queryIn(ctx context.Context, db queryRower, query string, args ...any) (*sql.Rows, error) {
	if tx, ok := db.(*sql.Tx); ok {
		return l.s.queryTxPrepared(ctx, tx, query, args...)
	}
	return l.s.queryPrepared(ctx, query, args...)
}

// stamp is at, or the store's clock when at is zero.
func (l *HeardLedger) stamp(at time.Time) time.Time {
	if at.IsZero() {
		return l.s.clock()
	}
	return at
}

// lockLedger takes the ledger's write lock at the start of tx: on SQLite a
// write statement (matching no row) makes the transaction a writer at
// once, so busy_timeout applies and no stale snapshot is read; on Postgres
// a table lock that conflicts with itself serializes ledger writers across
// instances.
func (l *HeardLedger) lockLedger(ctx context.Context, tx *sql.Tx) error {
	if _, ok := l.s.d.(postgresDialect); ok {
		_, err := tx.ExecContext(ctx, "LOCK TABLE speech_heard, speech_announcements, speech_offered_version, speech_delivery IN SHARE ROW EXCLUSIVE MODE")
		return err
	}
	_, err := l.exec(ctx, tx, "UPDATE speech_heard SET version = version WHERE 1 = 0")
	return err
}

// write runs fn in a locked transaction and commits it, then calls the
// OnWrite callback (outside the store's writer lock).
func (l *HeardLedger) write(ctx context.Context, fn func(tx *sql.Tx) error) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.commit(ctx, fn); err != nil {
		return err
	}
	if fn := l.onWrite.Load(); fn != nil {
		(*fn)()
	}
	return nil
}

// commit runs fn in a transaction holding the store's writer lock
// (lockFileWriters) and the ledger's lock (lockLedger), and commits it.
func (l *HeardLedger) commit(ctx context.Context, fn func(tx *sql.Tx) error) error {
	defer l.s.lockFileWriters()()
	tx, err := l.s.beginTx(ctx)
	if err != nil {
		return fmt.Errorf("store: heard ledger: begin: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // after Commit it is a no-op
	if err := l.lockLedger(ctx, tx); err != nil {
		return fmt.Errorf("store: heard ledger: lock: %w", err)
	}
	if err := fn(tx); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("store: heard ledger: commit: %w", err)
	}
	return nil
}

// heardIn returns the version Ray last heard of uri, 0 if never.
func (l *HeardLedger) heardIn(ctx context.Context, db queryRower, patient, uri string) (int, error) {
	var v int
	err := l.s.queryRowPrepared(ctx, db, l.q("SELECT version FROM speech_heard WHERE patient = ? AND uri = ?"), patient, uri).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("store: heard ledger: heard: %w", err)
	}
	return v, nil
}

// Heard returns the version Ray last heard of uri, 0 if never.
func (l *HeardLedger) Heard(ctx context.Context, patient, uri string) (int, error) {
	return l.heardIn(ctx, l.s.db, patient, uri)
}

func (l *HeardLedger) pendingIn(ctx context.Context, db queryRower, patient, uri string) (models.QueuedAnnouncement, bool, error) {
	r := models.QueuedAnnouncement{Patient: patient, URI: uri}
	err := l.s.queryRowPrepared(ctx, db, l.q("SELECT id, from_version, to_version FROM speech_announcements WHERE patient = ? AND uri = ? AND state = 'pending'"), patient, uri).
		Scan(&r.ID, &r.From, &r.To)
	if errors.Is(err, sql.ErrNoRows) {
		return models.QueuedAnnouncement{}, false, nil
	}
	if err != nil {
		return models.QueuedAnnouncement{}, false, fmt.Errorf("store: heard ledger: pending: %w", err)
	}
	return r, true, nil
}

// setHeard moves the heard version of uri forward to version (never
// back): a delivery. A new heard version is reopenable, with no rollback
// deferred and nothing settled: no later response has confirmed it yet.
func (l *HeardLedger) setHeard(ctx context.Context, tx *sql.Tx, patient, uri string, version int) error {
	_, err := l.exec(ctx, tx, l.q(`INSERT INTO speech_heard (patient, uri, version) VALUES (?, ?, ?)
ON CONFLICT (patient, uri) DO UPDATE SET version = excluded.version, reopenable = 1, deferred_heard = NULL, deferred_from = NULL, settled_from = NULL
WHERE excluded.version > speech_heard.version`), patient, uri, version)
	if err != nil {
		return fmt.Errorf("store: heard ledger: set heard: %w", err)
	}
	return l.onDelivery(ctx, tx, patient, uri, version)
}

// onDelivery is what every delivery of version does besides moving heard:
// the record that an earlier delivery of version was not played is
// forgotten (this one carried its words; speech_unplayed) and the offers
// up to version are cleared.
func (l *HeardLedger) onDelivery(ctx context.Context, tx *sql.Tx, patient, uri string, version int) error {
	if _, err := l.exec(ctx, tx, l.q("DELETE FROM speech_unplayed WHERE patient = ? AND uri = ? AND version = ?"), patient, uri, version); err != nil {
		return fmt.Errorf("store: heard ledger: on delivery: %w", err)
	}
	return l.clearOffered(ctx, tx, patient, uri, version)
}

// settleHeard moves the heard version of uri forward to version (never
// back) because version says the words he heard (Observe's settle, Drop):
// no delivery, so the row keeps the delivered version's standing —
// reopenable and the rollback held back (deferred_heard, deferred_from) —
// and remembers that version (settled_from, once): a report that a
// response marking it was not played still rolls back past the settle
// (NotPlayed; finding T8). Offers up to version are settled too.
func (l *HeardLedger) settleHeard(ctx context.Context, tx *sql.Tx, patient, uri string, version int) error {
	_, err := l.exec(ctx, tx, l.q(`INSERT INTO speech_heard (patient, uri, version) VALUES (?, ?, ?)
ON CONFLICT (patient, uri) DO UPDATE SET version = excluded.version, settled_from = COALESCE(speech_heard.settled_from, speech_heard.version)
WHERE excluded.version > speech_heard.version`), patient, uri, version)
	if err != nil {
		return fmt.Errorf("store: heard ledger: settle heard: %w", err)
	}
	return l.clearOffered(ctx, tx, patient, uri, version)
}

// setHeardExactly records version as the one he last heard, even when the
// ledger held a newer one: what a confirmed delivery carried is what he
// heard (P-19), whatever was written meanwhile. At the version heard
// already the row is kept as it is.
func (l *HeardLedger) setHeardExactly(ctx context.Context, tx *sql.Tx, patient, uri string, version int) error {
	_, err := l.exec(ctx, tx, l.q(`INSERT INTO speech_heard (patient, uri, version) VALUES (?, ?, ?)
ON CONFLICT (patient, uri) DO UPDATE SET version = excluded.version,
reopenable = CASE WHEN speech_heard.version = excluded.version THEN speech_heard.reopenable ELSE 1 END,
deferred_heard = CASE WHEN speech_heard.version = excluded.version THEN speech_heard.deferred_heard END,
deferred_from = CASE WHEN speech_heard.version = excluded.version THEN speech_heard.deferred_from END,
settled_from = CASE WHEN speech_heard.version = excluded.version THEN speech_heard.settled_from END`), patient, uri, version)
	if err != nil {
		return fmt.Errorf("store: heard ledger: set heard: %w", err)
	}
	return l.onDelivery(ctx, tx, patient, uri, version)
}

// clearOffered forgets every unconfirmed offer of version or older: he
// heard version, so they are no longer in doubt. They are kept aside as
// cleared by version (speech_offered_cleared, for models.NotPlayedMemory;
// the fact's older ones go now): if the delivery of version is reported
// not played, its rollback puts them back (reopen; finding G5).
func (l *HeardLedger) clearOffered(ctx context.Context, tx *sql.Tx, patient, uri string, version int) error {
	now := l.s.clock().UnixMilli()
	if _, err := l.exec(ctx, tx, l.q("DELETE FROM speech_offered_cleared WHERE patient = ? AND uri = ? AND at_ms < ?"), patient, uri, now-models.NotPlayedMemory.Milliseconds()); err != nil {
		return fmt.Errorf("store: heard ledger: clear offered: forget old: %w", err)
	}
	if _, err := l.exec(ctx, tx, l.q(`INSERT INTO speech_offered_cleared (patient, uri, version, cleared_by, at_ms)
SELECT patient, uri, version, ?, ? FROM speech_offered_version WHERE patient = ? AND uri = ? AND version <= ?
ON CONFLICT (patient, uri, cleared_by, version) DO UPDATE SET at_ms = excluded.at_ms`), version, now, patient, uri, version); err != nil {
		return fmt.Errorf("store: heard ledger: clear offered: keep aside: %w", err)
	}
	if _, err := l.exec(ctx, tx, l.q("DELETE FROM speech_offered_version WHERE patient = ? AND uri = ? AND version <= ?"), patient, uri, version); err != nil {
		return fmt.Errorf("store: heard ledger: clear offered: %w", err)
	}
	return nil
}

// offeredIn returns every version of uri he may have heard — each offered
// in a response whose delivery was never confirmed — ascending; nil if
// none.
func (l *HeardLedger) offeredIn(ctx context.Context, db queryRower, patient, uri string) ([]int, error) {
	rows, err := l.queryIn(ctx, db, l.q("SELECT version FROM speech_offered_version WHERE patient = ? AND uri = ? ORDER BY version"), patient, uri)
	if err != nil {
		return nil, fmt.Errorf("store: heard ledger: offered: %w", err)
	}
	defer rows.Close()
	var out []int
	for rows.Next() {
		var v int
		if err := rows.Scan(&v); err != nil {
			return nil, fmt.Errorf("store: heard ledger: offered: %w", err)
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: heard ledger: offered: %w", err)
	}
	return out, nil
}

// HeardState returns what Ray heard of uri: the version he heard for
// certain (0 for none) and every version he may have heard (ascending; nil
// for none).
func (l *HeardLedger) HeardState(ctx context.Context, patient, uri string) (models.HeardState, error) {
	h, err := l.heardIn(ctx, l.s.db, patient, uri)
	if err != nil {
		return models.HeardState{}, err
	}
	o, err := l.offeredIn(ctx, l.s.db, patient, uri)
	if err != nil {
		return models.HeardState{}, err
	}
	return models.HeardState{Heard: h, Offered: o}, nil
}

// Observe records that latest is the fact's current version, given that
// the caller read the heard state expect and compared the words of latest
// with those of expect.Heard (sameHeard) and of each of expect.Offered:
// unlike is the newest of them whose words differ from latest's, 0 when
// none does (models.Observation.Unlike; an unlike that is not one of them
// is an error).
// Inside one locked transaction it reads the heard state, the patient's
// baseline and the pending announcement, and applies models.Decide (P-19,
// P-24): nothing, queue one announcement, extend or rewrite the pending
// one (stacked revisions collapse into one), or settle (unchanged words:
// drop the pending one and move heard to latest). The delivery log's
// queued or unchanged event is stamped at (zero: the store's clock).
//
// It reports whether it changed anything, and models.ErrHeardMoved when
// the heard state is no longer expect (the caller re-reads and decides
// again).
func (l *HeardLedger) Observe(ctx context.Context, patient, uri string, expect models.HeardState, latest int, sameHeard bool, unlike int, at time.Time) (changed bool, err error) {
	if unlike != 0 && !slices.Contains(expect.Offered, unlike) {
		return false, fmt.Errorf("store: heard ledger: observe: v%d is not among the offered %v", unlike, expect.Offered)
	}
	err = l.write(ctx, func(tx *sql.Tx) error {
		h, err := l.heardIn(ctx, tx, patient, uri)
		if err != nil {
			return err
		}
		off, err := l.offeredIn(ctx, tx, patient, uri)
		if err != nil {
			return err
		}
		if hs := (models.HeardState{Heard: h, Offered: off}); !hs.Equal(expect) {
			return models.ErrHeardMoved
		}
		base, err := l.baselineIn(ctx, tx, patient, uri)
		if err != nil {
			return err
		}
		p, ok, err := l.pendingIn(ctx, tx, patient, uri)
		if err != nil {
			return err
		}
		o := models.Observation{Latest: latest, Heard: h, Offered: expect.LastOffered(), Baseline: base, SameAsHeard: sameHeard, Unlike: unlike}
		if ok {
			o.Pending = &models.Window{From: p.From, To: p.To}
		}
		how := models.Hearing{At: l.stamp(at)}
		v := models.Decide(o)
		switch v.Kind {
		case models.Keep:
			return nil
		case models.Settle:
			if ok {
				if _, err := l.exec(ctx, tx, l.q("UPDATE speech_announcements SET state = '"+stateDropped+"' WHERE id = ?"), p.ID); err != nil {
					return fmt.Errorf("store: heard ledger: drop: %w", err)
				}
			}
			changed = true
			if err := l.settleHeard(ctx, tx, patient, uri, v.At.To); err != nil {
				return err
			}
			return l.logDelivery(ctx, tx, patient, uri, v.At.To, how, models.DeliveryUnchanged)
		case models.Extend:
			if _, err := l.exec(ctx, tx, l.q("UPDATE speech_announcements SET from_version = ?, to_version = ? WHERE id = ?"), v.At.From, v.At.To, p.ID); err != nil {
				return fmt.Errorf("store: heard ledger: update pending: %w", err)
			}
			changed = true
			return l.logDelivery(ctx, tx, patient, uri, v.At.To, how, models.DeliveryQueued)
		case models.Queue:
			if _, err := l.exec(ctx, tx, l.q("INSERT INTO speech_announcements (patient, uri, from_version, to_version, state) VALUES (?, ?, ?, ?, '"+statePending+"')"), patient, uri, v.At.From, v.At.To); err != nil {
				return fmt.Errorf("store: heard ledger: queue: %w", err)
			}
			changed = true
			return l.logDelivery(ctx, tx, patient, uri, v.At.To, how, models.DeliveryQueued)
		}
		return nil
	})
	return changed, err
}

// Offered records, in one transaction, that offers were put in a response
// about to be written (stamped at; zero: the store's clock): until
// MarkHeard (an announcement) or MarkTold (a fact told) confirms the
// delivery he may have heard each one's version — a later revision
// withdraws it too — and they are spoken again saying so (P-24). Every
// version offered is kept, one row each: a later unconfirmed offer never
// replaces an earlier one, whose words he may have heard as well (finding
// F10). Offers of
// announcements no longer pending are ignored. A fact told is offered only
// when the ledger does not already hold that version or a newer one as
// heard (then nothing is written: the fast path of every turn that repeats
// what he heard), and never while a retraction of it is pending — MarkTold
// never touches that one either (P-19).
func (l *HeardLedger) Offered(ctx context.Context, patient string, offers []models.LedgerOffer, at time.Time) error {
	return l.offered(ctx, patient, offers, nil, at)
}

// offered is Offered, writing sent (when not nil) in its transaction
// (recordSent; OfferedResponse).
func (l *HeardLedger) offered(ctx context.Context, patient string, offers []models.LedgerOffer, sent *models.LedgerSent, at time.Time) error {
	if len(offers) == 0 {
		return nil
	}
	heard, err := l.HeardOf(ctx, patient)
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
		if alone, err := l.recordAlone(ctx, patient, sent); err != nil || !alone {
			return err
		}
	}
	atMS := l.stamp(at).UnixMilli()
	return l.write(ctx, func(tx *sql.Tx) error {
		for _, o := range need {
			if o.Told {
				if err := l.offerTold(ctx, tx, patient, o); err != nil {
					return err
				}
				continue
			}
			if _, err := l.exec(ctx, tx, l.q(`INSERT INTO speech_offered_version (patient, uri, version)
SELECT patient, uri, ? FROM speech_announcements WHERE id = ? AND patient = ? AND uri = ? AND state = 'pending'
ON CONFLICT (patient, uri, version) DO NOTHING`), o.Version, o.ID, patient, o.URI); err != nil {
				return fmt.Errorf("store: heard ledger: offered: %w", err)
			}
			if _, err := l.exec(ctx, tx, l.q(`INSERT INTO speech_delivery (patient, uri, version, event, at_ms)
SELECT patient, uri, ?, 'offered', ? FROM speech_announcements WHERE id = ? AND patient = ? AND uri = ? AND state = 'pending'
ON CONFLICT (patient, uri, version, event) DO NOTHING`), o.Version, atMS, o.ID, patient, o.URI); err != nil {
				return fmt.Errorf("store: heard ledger: offered: %w", err)
			}
		}
		return l.recordSent(ctx, tx, patient, sent, atMS)
	})
}

// offerTold records that version o.Version of the fact o.URI is told in a
// response about to be written, unless he heard it or newer, or a
// retraction of the fact is pending.
func (l *HeardLedger) offerTold(ctx context.Context, tx *sql.Tx, patient string, o models.LedgerOffer) error {
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
	if _, err := l.exec(ctx, tx, l.q(`INSERT INTO speech_offered_version (patient, uri, version) VALUES (?, ?, ?)
ON CONFLICT (patient, uri, version) DO NOTHING`), patient, o.URI, o.Version); err != nil {
		return fmt.Errorf("store: heard ledger: offered told: %w", err)
	}
	return nil
}

// HeardOf returns, per fact URI of patient, the version he heard for
// certain (a fact he never heard is absent).
func (l *HeardLedger) HeardOf(ctx context.Context, patient string) (map[string]int, error) {
	rows, err := l.s.queryPrepared(ctx, l.q("SELECT uri, version FROM speech_heard WHERE patient = ?"), patient)
	if err != nil {
		return nil, fmt.Errorf("store: heard ledger: heard: %w", err)
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var uri string
		var v int
		if err := rows.Scan(&uri, &v); err != nil {
			return nil, fmt.Errorf("store: heard ledger: heard: %w", err)
		}
		out[uri] = v
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: heard ledger: heard: %w", err)
	}
	return out, nil
}

// MarkHeard records that a response carrying the announcement of uri at
// version was delivered: version is what he last heard — even when the
// ledger held a newer heard version, or a newer version was written
// meanwhile (P-19) — every offer up to version is confirmed, a pending
// announcement that reaches no further than version is heard, and one that
// reaches further now starts from version. The delivery log records the
// first hearing of version and how (how.At zero: the store's clock).
func (l *HeardLedger) MarkHeard(ctx context.Context, patient, uri string, version int, how models.Hearing) error {
	// Fast path, no write transaction (no fsync): nothing would change.
	if h, err := l.heardIn(ctx, l.s.db, patient, uri); err == nil && h == version {
		if off, err := l.offeredIn(ctx, l.s.db, patient, uri); err == nil && len(off) == 0 {
			if p, ok, err := l.pendingIn(ctx, l.s.db, patient, uri); err == nil && (!ok || p.From == version && p.To > version) {
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
func (l *HeardLedger) advancePending(ctx context.Context, tx *sql.Tx, patient, uri string, version int) error {
	if _, err := l.exec(ctx, tx, l.q("UPDATE speech_announcements SET state = '"+stateHeard+"' WHERE patient = ? AND uri = ? AND state = 'pending' AND to_version <= ?"), patient, uri, version); err != nil {
		return fmt.Errorf("store: heard ledger: mark heard: %w", err)
	}
	if _, err := l.exec(ctx, tx, l.q("UPDATE speech_announcements SET from_version = ? WHERE patient = ? AND uri = ? AND state = 'pending' AND from_version <> ?"), version, patient, uri, version); err != nil {
		return fmt.Errorf("store: heard ledger: advance pending: %w", err)
	}
	return nil
}

// MarkTold records that version of uri was spoken as a plain fact — an
// answer, not an announcement — confirming its offer (Offered, Told), and
// reports whether it changed the ledger (false when he heard a newer
// version, or a retraction stays owed). It never settles a pending
// retraction: he heard the new words but not that they withdraw the ones
// he was told before, so the retraction stays owed and nothing moves
// (P-19, P-24) — unless what was told is no newer than what that
// retraction withdraws (a turn told it before the revision was read): then
// heard moves forward to it and its offer is confirmed, and the retraction
// still withdraws it. Otherwise the heard version moves forward to version
// (never back), a pending first hearing it covers is heard, and one that
// reaches further now withdraws version; the delivery log records how
// (how.At zero: the store's clock). Told at the version he heard, it is a
// later confirmed delivery of it: the first such telling after the heard
// version was set makes it no longer reopenable by the report of an
// earlier response that withdrew nothing, a first hearing (NotPlayed;
// finding B1; a retraction's report still rolls back: the telling never
// said the old words were withdrawn, finding U2) — one write, reported as a change; every
// telling after that takes the fast path and writes nothing. A telling
// whose own report (NotPlayed, Confirmed) arrived first confirms nothing:
// its write only clears the void (reopenable 2 to 1).
func (l *HeardLedger) MarkTold(ctx context.Context, patient, uri string, version int, how models.Hearing) (bool, error) {
	// Fast path, one read and no write transaction (no fsync): the
	// retraction stays owed (the write below would re-check it anyway), he
	// heard a newer version, or this one and a later delivery confirmed it
	// already (its offer was never written).
	var heard, pendingFrom, reopenable int
	err := l.s.queryRowPrepared(ctx, l.s.db, l.q(`SELECT COALESCE(h.version, 0), COALESCE(h.reopenable, 0),
COALESCE((SELECT from_version FROM speech_announcements WHERE patient = ? AND uri = ? AND state = 'pending'), 0)
FROM (SELECT 1) AS one LEFT JOIN speech_heard h ON h.patient = ? AND h.uri = ?`), patient, uri, patient, uri).Scan(&heard, &reopenable, &pendingFrom)
	if err != nil {
		return false, fmt.Errorf("store: heard ledger: told: %w", err)
	}
	if pendingFrom > 0 && version > pendingFrom || heard > version || heard == version && reopenable == 0 {
		return false, nil
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
		if version == h {
			// A later response carried the words he heard, written in
			// full: a confirmed delivery of them, which an earlier
			// response's report (NotPlayed) never rolls back (B1).
			// reopenable 2: this telling's own report overtook it (NotPlayed),
			// so it confirms nothing.
			res, err := l.exec(ctx, tx, l.q("UPDATE speech_heard SET reopenable = CASE WHEN reopenable = 2 THEN 1 ELSE 0 END WHERE patient = ? AND uri = ? AND version = ? AND reopenable <> 0"), patient, uri, version)
			if err != nil {
				return fmt.Errorf("store: heard ledger: told: confirm: %w", err)
			}
			n, err := res.RowsAffected()
			wrote = err == nil && n > 0
			return nil
		}
		if version < h {
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

// NotPlayed re-opens, in one transaction, what responses Alexa reported
// not played had marked (P-24): for each fact whose heard version is still
// the one marked and reopenable, heard goes back to HeardBefore, Version
// becomes offered (he may have heard it), and unless an announcement is
// already pending for the fact (a later revision, which now withdraws
// Version, said again) the announcement from From to Version is owed
// again, said saying so, its queued event stamped at (zero: the store's
// clock). A second call finds nothing to do.
//
// A later confirmed delivery is never undone when it moved heard (a newer
// version's announcement or telling: a retraction after it withdraws
// from that version, heard for certain) — but the report is remembered
// (rememberUnplayed): if that later delivery is reported not played too,
// its rollback goes on past the version this one delivered (reopen;
// finding G8). A rollback puts back the offers the rolled-back delivery
// cleared (finding G5). A later response that told the
// same version plainly (MarkTold: not reopenable; finding B1) confirms it
// only against the report of a response that withdrew nothing — a first
// hearing, or a fact's first plain telling (HeardBefore and From 0): it
// says all that one said, so that rollback is not done but remembered
// (deferred_heard, deferred_from; the first one refused is kept). A
// response that moved him off words he had heard or may have heard — a
// retraction, or new words told plainly (models.LedgerMark.Withdrew) — is
// rolled back at once however many plain tellings of Version followed it:
// they gave him the new words, never that they withdraw the old ones
// (finding U2, P-24). The ledger then ends as if those tellings had not
// been: heard is HeardBefore (the words the retraction quotes as told),
// Version is offered, and the announcement From→Version (to heard when a
// revision with Version's words settled heard forward) is owed — or the
// later revision already pending, which now withdraws Version too — so
// the next turn says "Stop — as I may not have told you properly: … I
// told you: “…” … changed it: “…”"; until then a plain telling of the
// fact confirms nothing (a retraction of it is pending: Offered, MarkTold).
// A later delivery of that retraction itself moves heard up again, and
// the same report delivered again then changes nothing (F14); a later
// report of a response that withdrew from what the rollback left heard
// (a retraction of a newer version, delivered and then reported) rolls
// back to it again, so the words quoted as told stay the ones he last
// heard for certain. An entry with Confirmed
// is the report of such a later telling — it may have confirmed the
// version, so the confirmation is undone: a deferred rollback is done now,
// and otherwise the version is reopenable again, so an earlier response's
// report that arrives later still rolls it back. Either order of the two
// reports ends with the announcement owed. Several responses may have told
// the version: any one's report undoes the confirmation (erring toward a
// repeat). A Confirmed entry for a version still reopenable — its report
// overtook its own marking, or another's report undid the confirmation —
// voids the next confirmation (reopenable 2: MarkTold then makes it 1);
// one for a version no longer heard changes nothing. A revision saying
// the words he heard moves heard forward without a delivery (Observe's
// settle, Drop; settleHeard): the row keeps its standing — reopenable
// and the deferred rollback — and "the version marked" is then any
// version from the one last delivered (settled_from) up to heard, so a
// revision landing between a response and its report, or between two
// reports, never loses the rollback (finding T8); the retraction then
// owed runs from From to heard. The marks of a
// response whose report was applied already (the same report delivered
// again; heardreports.go, finding F14) change nothing. It reports how
// many facts it re-opened.
func (l *HeardLedger) NotPlayed(ctx context.Context, patient string, ms []models.LedgerMark, at time.Time) (int, error) {
	n := 0
	how := models.Hearing{At: l.stamp(at)}
	err := l.write(ctx, func(tx *sql.Tx) error {
		n = 0
		applied, err := l.reportsApplied(ctx, tx, patient, ms, how.At)
		if err != nil {
			return err
		}
		for _, m := range ms {
			if applied[m.Response] {
				continue // this response's report was applied already
			}
			var h, reopenable int
			var dHeard, dFrom, settled sql.NullInt64
			err := l.s.queryRowPrepared(ctx, tx, l.q("SELECT version, reopenable, deferred_heard, deferred_from, settled_from FROM speech_heard WHERE patient = ? AND uri = ?"), patient, m.URI).
				Scan(&h, &reopenable, &dHeard, &dFrom, &settled)
			if err != nil && !errors.Is(err, sql.ErrNoRows) {
				return fmt.Errorf("store: heard ledger: not played: %w", err)
			}
			// What heard rests on: the version last delivered, and every
			// version a revision with its words settled it forward to since
			// (finding T8).
			delivered := h
			if settled.Valid {
				delivered = int(settled.Int64)
			}
			if m.Version > h {
				continue // rolled back past it already
			}
			if m.Version < delivered {
				// A later delivery moved heard: nothing to roll back now, but
				// if that one is reported not played too, its rollback goes
				// on past m.Version to the words before it (reopen; finding
				// G8). A confirmed telling's report has nothing to add.
				if !m.Confirmed {
					if err := l.rememberUnplayed(ctx, tx, patient, m, how.At); err != nil {
						return err
					}
				}
				continue
			}
			switch {
			case m.Confirmed && reopenable != 0:
				// Nothing confirmed yet: the report overtook the telling's
				// marking (a turn owing nothing runs without the turn lock, or
				// on another instance), so the next confirmation is void.
				if _, err := l.exec(ctx, tx, l.q("UPDATE speech_heard SET reopenable = 2 WHERE patient = ? AND uri = ? AND version = ? AND reopenable = 1"), patient, m.URI, h); err != nil {
					return fmt.Errorf("store: heard ledger: not played: void: %w", err)
				}
				continue
			case m.Confirmed && !dHeard.Valid:
				if _, err := l.exec(ctx, tx, l.q("UPDATE speech_heard SET reopenable = 1 WHERE patient = ? AND uri = ? AND version = ?"), patient, m.URI, h); err != nil {
					return fmt.Errorf("store: heard ledger: not played: unconfirm: %w", err)
				}
				continue
			case m.Confirmed:
				m = models.LedgerMark{URI: m.URI, HeardBefore: int(dHeard.Int64), From: int(dFrom.Int64), Version: delivered}
			case reopenable == 0 && !m.Withdrew():
				// A later response carried these words again, written in
				// full: all a first hearing says, so remember the rollback
				// in case that one was not played either (B1). A response
				// that moved him off words he had heard (m.Withdrew) is
				// rolled back now: a plain telling never said they were
				// withdrawn (finding U2).
				if _, err := l.exec(ctx, tx, l.q("UPDATE speech_heard SET deferred_heard = ?, deferred_from = ? WHERE patient = ? AND uri = ? AND version = ? AND deferred_heard IS NULL"), m.HeardBefore, m.From, patient, m.URI, h); err != nil {
					return fmt.Errorf("store: heard ledger: not played: defer: %w", err)
				}
				continue
			}
			if err := l.reopen(ctx, tx, patient, m, h, how); err != nil {
				return err
			}
			n++
		}
		return l.recordReports(ctx, tx, patient, ms, how.At)
	})
	return n, err
}

// rememberUnplayed records that m's delivery of m.Version, whose words
// before were m.HeardBefore's, was not played (speech_unplayed; the first
// report of it is kept), and forgets the records older than
// models.NotPlayedMemory before at.
func (l *HeardLedger) rememberUnplayed(ctx context.Context, tx *sql.Tx, patient string, m models.LedgerMark, at time.Time) error {
	if _, err := l.exec(ctx, tx, l.q("DELETE FROM speech_unplayed WHERE at_ms < ?"), at.Add(-models.NotPlayedMemory).UnixMilli()); err != nil {
		return fmt.Errorf("store: heard ledger: not played: forget old: %w", err)
	}
	if _, err := l.exec(ctx, tx, l.q(`INSERT INTO speech_unplayed (patient, uri, version, heard_before, at_ms) VALUES (?, ?, ?, ?, ?)
ON CONFLICT (patient, uri, version) DO NOTHING`), patient, m.URI, m.Version, m.HeardBefore, at.UnixMilli()); err != nil {
		return fmt.Errorf("store: heard ledger: not played: remember: %w", err)
	}
	return nil
}

// reopen rolls heard of m.URI — now heard, which rests on m.Version —
// back to m.HeardBefore (reopenable, nothing deferred or settled), offers
// m.Version and, unless an announcement of the fact is pending, owes the
// one from m.From to heard (m.Version, or the version a revision with its
// words settled it forward to; finding T8) again. When the delivery of
// m.HeardBefore was itself reported not played (speech_unplayed: its
// report came while this delivery stood), the rollback goes on to the
// words before that, offering m.HeardBefore too, and so on (finding G8).
// The offers the rolled-back deliveries cleared are put back
// (speech_offered_cleared; finding G5): he may have heard every one.
func (l *HeardLedger) reopen(ctx context.Context, tx *sql.Tx, patient string, m models.LedgerMark, heard int, how models.Hearing) error {
	before, offers := m.HeardBefore, []int{m.Version}
	for before > 0 {
		var earlier int
		err := l.s.queryRowPrepared(ctx, tx, l.q("SELECT heard_before FROM speech_unplayed WHERE patient = ? AND uri = ? AND version = ?"), patient, m.URI, before).Scan(&earlier)
		if errors.Is(err, sql.ErrNoRows) {
			break
		}
		if err != nil {
			return fmt.Errorf("store: heard ledger: not played: unplayed: %w", err)
		}
		if _, err := l.exec(ctx, tx, l.q("DELETE FROM speech_unplayed WHERE patient = ? AND uri = ? AND version = ?"), patient, m.URI, before); err != nil {
			return fmt.Errorf("store: heard ledger: not played: unplayed: %w", err)
		}
		offers = append(offers, before)
		before = earlier
	}
	var err error
	if before == 0 {
		_, err = l.exec(ctx, tx, l.q("DELETE FROM speech_heard WHERE patient = ? AND uri = ?"), patient, m.URI)
	} else {
		_, err = l.exec(ctx, tx, l.q("UPDATE speech_heard SET version = ?, reopenable = 1, deferred_heard = NULL, deferred_from = NULL, settled_from = NULL WHERE patient = ? AND uri = ?"), before, patient, m.URI)
	}
	if err != nil {
		return fmt.Errorf("store: heard ledger: not played: %w", err)
	}
	for _, v := range offers {
		if _, err := l.exec(ctx, tx, l.q(`INSERT INTO speech_offered_version (patient, uri, version) VALUES (?, ?, ?)
ON CONFLICT (patient, uri, version) DO NOTHING`), patient, m.URI, v); err != nil {
			return fmt.Errorf("store: heard ledger: not played: %w", err)
		}
		// Alexa says that delivery was not played: its heard event is
		// not history (the clinician's timeline), and the delivery that
		// is heard next records its own time (breakit9).
		if _, err := l.exec(ctx, tx, l.q("DELETE FROM speech_delivery WHERE patient = ? AND uri = ? AND version = ? AND event = 'heard'"), patient, m.URI, v); err != nil {
			return fmt.Errorf("store: heard ledger: not played: delivery log: %w", err)
		}
	}
	if _, err := l.exec(ctx, tx, l.q(`INSERT INTO speech_offered_version (patient, uri, version)
SELECT patient, uri, version FROM speech_offered_cleared WHERE patient = ? AND uri = ? AND cleared_by > ? AND cleared_by <= ? AND version > ?
ON CONFLICT (patient, uri, version) DO NOTHING`), patient, m.URI, before, heard, before); err != nil {
		return fmt.Errorf("store: heard ledger: not played: put back offers: %w", err)
	}
	if _, err := l.exec(ctx, tx, l.q("DELETE FROM speech_offered_cleared WHERE patient = ? AND uri = ? AND cleared_by > ? AND cleared_by <= ?"), patient, m.URI, before, heard); err != nil {
		return fmt.Errorf("store: heard ledger: not played: put back offers: %w", err)
	}
	_, ok, err := l.pendingIn(ctx, tx, patient, m.URI)
	if err != nil {
		return err
	}
	if !ok {
		to := max(m.Version, heard)
		if _, err := l.exec(ctx, tx, l.q("INSERT INTO speech_announcements (patient, uri, from_version, to_version, state) VALUES (?, ?, ?, ?, '"+statePending+"')"), patient, m.URI, m.From, to); err != nil {
			return fmt.Errorf("store: heard ledger: not played: %w", err)
		}
		if err := l.logDelivery(ctx, tx, patient, m.URI, to, how, models.DeliveryQueued); err != nil {
			return err
		}
	}
	return nil
}

// Drop marks the pending announcement id as dropped (its words did not
// change) and moves the heard version to its to_version, logging it
// unchanged at at (zero: the store's clock). It is a no-op when the
// announcement is no longer pending.
func (l *HeardLedger) Drop(ctx context.Context, id int64, at time.Time) error {
	how := models.Hearing{At: l.stamp(at)}
	return l.write(ctx, func(tx *sql.Tx) error {
		r := models.QueuedAnnouncement{ID: id}
		err := l.s.queryRowPrepared(ctx, tx, l.q("SELECT patient, uri, to_version FROM speech_announcements WHERE id = ? AND state = 'pending'"), id).Scan(&r.Patient, &r.URI, &r.To)
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("store: heard ledger: drop: %w", err)
		}
		if _, err := l.exec(ctx, tx, l.q("UPDATE speech_announcements SET state = '"+stateDropped+"' WHERE id = ?"), id); err != nil {
			return fmt.Errorf("store: heard ledger: drop: %w", err)
		}
		if err := l.settleHeard(ctx, tx, r.Patient, r.URI, r.To); err != nil {
			return err
		}
		return l.logDelivery(ctx, tx, r.Patient, r.URI, r.To, how, models.DeliveryUnchanged)
	})
}

// Pending returns the patient's pending announcements, oldest first (by
// id), each with Offered set while an offer of its fact is unconfirmed.
func (l *HeardLedger) Pending(ctx context.Context, patient string) ([]models.QueuedAnnouncement, error) {
	rows, err := l.s.queryPrepared(ctx, l.q(`SELECT a.id, a.uri, a.from_version, a.to_version,
EXISTS (SELECT 1 FROM speech_offered_version o WHERE o.patient = a.patient AND o.uri = a.uri)
FROM speech_announcements a WHERE a.patient = ? AND a.state = 'pending' ORDER BY a.id`), patient)
	if err != nil {
		return nil, fmt.Errorf("store: heard ledger: list pending: %w", err)
	}
	defer rows.Close()
	var out []models.QueuedAnnouncement
	for rows.Next() {
		r := models.QueuedAnnouncement{Patient: patient}
		if err := rows.Scan(&r.ID, &r.URI, &r.From, &r.To, &r.Offered); err != nil {
			return nil, fmt.Errorf("store: heard ledger: list pending: %w", err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: heard ledger: list pending: %w", err)
	}
	return out, nil
}

// Facts returns, per fact URI of patient, the version he heard for
// certain, every version he may have heard (ascending) and his baseline
// (0 or nil for none); a fact the ledger knows nothing of is absent. One statement reads all three
// tables (every turn runs it): one snapshot, one round trip.
func (l *HeardLedger) Facts(ctx context.Context, patient string) (map[string]models.FactLedger, error) {
	rows, err := l.s.queryPrepared(ctx, l.q(`SELECT 0, uri, version FROM speech_heard WHERE patient = ?
UNION ALL SELECT 1, uri, version FROM speech_offered_version WHERE patient = ?
UNION ALL SELECT 2, uri, version FROM speech_baseline WHERE patient = ?`), patient, patient, patient)
	if err != nil {
		return nil, fmt.Errorf("store: heard ledger: facts: %w", err)
	}
	defer rows.Close()
	out := map[string]models.FactLedger{}
	for rows.Next() {
		var table, v int
		var uri string
		if err := rows.Scan(&table, &uri, &v); err != nil {
			return nil, fmt.Errorf("store: heard ledger: facts: %w", err)
		}
		f := out[uri]
		switch table {
		case 0:
			f.Heard = v
		case 1:
			f.Offered = append(f.Offered, v)
		default:
			f.Baseline = v
		}
		out[uri] = f
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: heard ledger: facts: %w", err)
	}
	for uri, f := range out {
		if len(f.Offered) > 1 {
			slices.Sort(f.Offered)
			out[uri] = f
		}
	}
	return out, nil
}

// Status returns the heard version of uri and the to_version of its
// pending announcement (0 when none).
func (l *HeardLedger) Status(ctx context.Context, patient, uri string) (heard, pendingTo int, err error) {
	heard, err = l.Heard(ctx, patient, uri)
	if err != nil {
		return 0, 0, err
	}
	p, ok, err := l.pendingIn(ctx, l.s.db, patient, uri)
	if err != nil || !ok {
		return heard, 0, err
	}
	return heard, p.To, nil
}

// Backlog counts pending announcements for every patient.
func (l *HeardLedger) Backlog(ctx context.Context) (int, error) {
	var n int
	if err := l.s.queryRowPrepared(ctx, l.s.db, "SELECT COUNT(*) FROM speech_announcements WHERE state = 'pending'").Scan(&n); err != nil {
		return 0, fmt.Errorf("store: heard ledger: backlog: %w", err)
	}
	return n, nil
}

// ---- The baseline: where each patient was first followed ----

// Followed reports which of patients the principal has followed before
// (their baseline is recorded).
func (l *HeardLedger) Followed(ctx context.Context, patients []string) (map[string]bool, error) {
	out := make(map[string]bool, len(patients))
	for _, p := range patients {
		var one int
		err := l.s.queryRowPrepared(ctx, l.s.db, l.q("SELECT 1 FROM speech_followed WHERE patient = ?"), p).Scan(&one)
		switch {
		case errors.Is(err, sql.ErrNoRows):
		case err != nil:
			return nil, fmt.Errorf("store: heard ledger: followed: %w", err)
		default:
			out[p] = true
		}
	}
	return out, nil
}

// Follow records patient's starting point: the current version of each of
// his facts (uri → version), and that he is followed from now on. Facts at
// or below their baseline are never announced; the first sync of a patient
// therefore reads him nothing he has not been told is new (P-19). A
// baseline once recorded is never moved.
func (l *HeardLedger) Follow(ctx context.Context, patient string, facts map[string]int) error {
	return l.write(ctx, func(tx *sql.Tx) error {
		for uri, v := range facts {
			if _, err := l.exec(ctx, tx, l.q(`INSERT INTO speech_baseline (patient, uri, version) VALUES (?, ?, ?)
ON CONFLICT (patient, uri) DO NOTHING`), patient, uri, v); err != nil {
				return fmt.Errorf("store: heard ledger: baseline: %w", err)
			}
		}
		if _, err := l.exec(ctx, tx, l.q(`INSERT INTO speech_followed (patient) VALUES (?) ON CONFLICT (patient) DO NOTHING`), patient); err != nil {
			return fmt.Errorf("store: heard ledger: follow: %w", err)
		}
		return nil
	})
}

func (l *HeardLedger) baselineIn(ctx context.Context, db queryRower, patient, uri string) (int, error) {
	var v int
	err := l.s.queryRowPrepared(ctx, db, l.q("SELECT version FROM speech_baseline WHERE patient = ? AND uri = ?"), patient, uri).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("store: heard ledger: baseline: %w", err)
	}
	return v, nil
}
