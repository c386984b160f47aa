package store

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/unsay/unsay/models"
)

// feedPollInterval is how often an idle watcher re-queries the feed even
// without a wakeup (writes by another process on the same file): 1 s.
const feedPollInterval = time.Second

// feedBatch is how many changes a watcher reads per query.
const feedBatch = 256

// recentFeedSize bounds recentFeed: the last 1,024 changes this process
// committed.
const recentFeedSize = 1024

// recentFeed is what a watcher needs to catch up without a query after a
// commit of this process (issue 17: each watcher — the MCP fan-out, the
// delivery log, the speech principal's readiness — read the versions
// table after every commit, on the path of every notification): the
// changes this process committed last, contiguous in Seq, and a count of
// the wakeups that came from elsewhere (another process's commit, a
// Postgres NOTIFY, a reconnected LISTEN), after which a watcher reads the
// database again whatever the memory holds.
type recentFeed struct {
	changes []Change // contiguous in Seq, at least the last recentFeedSize (at most twice that), oldest first
	foreign uint64   // wakeWatchers calls so far
	// committing is the Seq range of the batch being committed now (lo 0:
	// none): its NOTIFY may come back before feedCommitted notes it.
	committing struct{ lo, hi int64 }
}

// after returns the changes with Seq > cursor, at most limit, when the
// memory holds the one right after cursor (and so every later one this
// process committed since, up to the last commit it noted); ok is false
// otherwise — the database must be read.
func (f *recentFeed) after(cursor int64, limit int) (out []Change, ok bool) {
	if len(f.changes) == 0 {
		return nil, false
	}
	i := cursor + 1 - f.changes[0].Seq
	if i < 0 || i >= int64(len(f.changes)) {
		return nil, false
	}
	return slices.Clone(f.changes[i:min(int64(len(f.changes)), i+int64(limit))]), true
}

// ours reports whether seq is this process's: among the changes held, or
// in the batch being committed.
func (f *recentFeed) ours(seq int64) bool {
	if f.committing.lo > 0 && f.committing.lo <= seq && seq <= f.committing.hi {
		return true
	}
	n := len(f.changes)
	return n > 0 && f.changes[0].Seq <= seq && seq <= f.changes[n-1].Seq
}

// add notes changes (contiguous in Seq), committed after every change
// noted before; when they do not follow on from the last one noted (a Seed
// or another process wrote in between) the memory starts again from them.
func (f *recentFeed) add(changes []Change) {
	if len(changes) == 0 {
		return
	}
	if n := len(f.changes); n > 0 && f.changes[n-1].Seq+1 != changes[0].Seq {
		f.changes = f.changes[:0]
	}
	f.changes = append(f.changes, changes...)
	// Trimmed only past twice the bound, so the copy is paid once per
	// recentFeedSize changes, not on every commit.
	if len(f.changes) > 2*recentFeedSize {
		f.changes = append(make([]Change, 0, 2*recentFeedSize), f.changes[len(f.changes)-recentFeedSize:]...)
	}
}

// wakeWatchers wakes every watcher to catch up from the database: a
// change may have been committed that this process did not note
// (feedCommitted). It never blocks.
func (s *Store) wakeWatchers() {
	s.wakeMu.Lock()
	s.feed.foreign++
	s.wakeLocked()
	s.wakeMu.Unlock()
}

// wakeLocked closes the wakeup channel every watcher waits on and makes
// the next one; the caller holds wakeMu.
func (s *Store) wakeLocked() {
	close(s.wake)
	s.wake = make(chan struct{})
}

// feedCommitting notes, under the write lock, the Seqs of the batch about
// to commit (rows, in Seq order; nil: the commit failed, none), so that its
// NOTIFY, which Postgres may deliver to this process's LISTEN connection
// before the commit returns, is known as ours (noticed). A commit that
// failed here but took effect there is then found by the watchers' next
// poll (feedPollInterval): latency, never a lost change.
func (s *Store) feedCommitting(rows []versionRow) {
	s.wakeMu.Lock()
	defer s.wakeMu.Unlock()
	if len(rows) == 0 {
		s.feed.committing.lo, s.feed.committing.hi = 0, 0
		return
	}
	s.feed.committing.lo, s.feed.committing.hi = rows[0].seq, rows[len(rows)-1].seq
}

// feedCommitted notes the versions a batch has just committed durably,
// under the write lock (so in Seq order), and wakes every watcher to
// deliver them from memory. It never blocks.
func (s *Store) feedCommitted(rows []versionRow) {
	changes := make([]Change, len(rows))
	for i, r := range rows {
		v := r.v
		changes[i] = newChange(r.seq, v.Patient, v.Domain, v.N, v.Audience, v.WrittenAt.UnixMilli())
	}
	s.wakeMu.Lock()
	s.feed.add(changes)
	s.feed.committing.lo, s.feed.committing.hi = 0, 0
	s.wakeLocked()
	s.wakeMu.Unlock()
}

// feedNext is a watcher's next step from cursor: the wakeup channel to
// wait on afterwards, taken first so no wakeup is lost, and the changes
// after cursor from memory (ok) unless the database must be read — query
// is set, another wakeup came from elsewhere since the watcher's last
// read (seen, which feedNext advances), or the memory does not hold the
// change right after cursor.
func (s *Store) feedNext(cursor int64, query bool, seen *uint64) (wake <-chan struct{}, changes []Change, ok bool) {
	s.wakeMu.Lock()
	defer s.wakeMu.Unlock()
	wake = s.wake
	if !query && *seen == s.feed.foreign {
		if changes, ok = s.feed.after(cursor, feedBatch); ok {
			return wake, changes, true
		}
	}
	*seen = s.feed.foreign
	return wake, nil, false
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
	query := true // the first step reads the database
	var seen uint64
	for {
		// The wakeup channel is taken before the read, so no wakeup is lost;
		// a commit of this process is read from memory (feedNext).
		wake, changes, fromMemory := s.feedNext(cursor, query, &seen)
		var err error
		if !fromMemory {
			changes, err = s.changesAfter(ctx, cursor, feedBatch)
		}
		query = false
		if err != nil {
			query = true
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
			query = true // another process may have written the file
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
	rows, err := s.queryPrepared(ctx, s.d.rebind(`SELECT seq, patient, domain, n, audience, written_at
		FROM versions WHERE seq > ? ORDER BY seq LIMIT ?`), after, limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Change
	for rows.Next() {
		var (
			seq, writtenAt       int64
			n                    int
			patient, domain, aud string
		)
		if err := rows.Scan(&seq, &patient, &domain, &n, &aud, &writtenAt); err != nil {
			return nil, err
		}
		if !models.Audience(aud).Valid() {
			return nil, fmt.Errorf("version seq %d has unknown audience %q", seq, aud)
		}
		out = append(out, newChange(seq, patient, domain, n, models.Audience(aud), writtenAt))
	}
	return out, rows.Err()
}

// newChange is the Change of version n of (patient, domain) of audience
// aud, committed as seq at writtenAt (Unix milliseconds, the versions
// table's precision): as changesAfter reads it and as feedCommitted notes
// it, so a watcher gets the same Change either way.
func newChange(seq int64, patient, domain string, n int, aud models.Audience, writtenAt int64) Change {
	return Change{Seq: seq, URI: models.NewURI(aud, patient, domain), Version: n, Audience: aud,
		Created: n == 1, At: time.UnixMilli(writtenAt).UTC()}
}

// LastSeq is the sequence number of the latest committed change (0 if none).
func (s *Store) LastSeq(ctx context.Context) (int64, error) {
	var seq int64
	if err := s.db.QueryRowContext(ctx, `SELECT COALESCE(MAX(seq), 0) FROM versions`).Scan(&seq); err != nil {
		return 0, fmt.Errorf("store: last seq: %w", err)
	}
	return seq, nil
}
