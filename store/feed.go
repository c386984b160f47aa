package store

import (
	"context"
	"fmt"
	"time"

	"github.com/unsay/unsay/models"
)

// feedPollInterval is how often an idle watcher re-queries the feed even
// without a wakeup (writes by another process on the same file): 1 s.
const feedPollInterval = time.Second

// feedBatch is how many changes a watcher reads per query.
const feedBatch = 256

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
	rows, err := s.queryPrepared(ctx, s.d.rebind(`SELECT seq, patient, domain, n, audience, written_at
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
