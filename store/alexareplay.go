package store

import (
	"context"
	"crypto/sha256"
	"fmt"
	"time"
)

// The replay memory the instances serving the Alexa skill share
// (alexa_request_seen, migration 066; P-22). Each instance's verifier
// remembers the request ids it accepted, in memory, until their
// timestamps leave the window; behind a load balancer a captured request
// replayed to another instance than the one that accepted it would pass
// that memory, and a replayed turn could use up the retraction Ray is
// owed. So when the instances share a Postgres database the verifier also
// records each accepted id here (skill.SharedReplayMemory), and a digest
// another instance recorded is refused.

// alexaReplayPruneEvery: one RememberAlexaRequest in this many first
// deletes the digests whose window has passed.
const alexaReplayPruneEvery = 256

// RememberAlexaRequest records digest — the SHA-256 of a verified Alexa
// request's request.requestId — until until (its window's end, kept to the
// millisecond), and reports whether it was recorded for the first time
// (false: an instance recorded it before, a replay). Every
// alexaReplayPruneEvery calls it first deletes the digests whose until is
// before now. On SQLite it takes the store's write lock (writeMu). Errors
// are the database's, wrapped; nothing is recorded then.
func (s *Store) RememberAlexaRequest(ctx context.Context, digest [sha256.Size]byte, now, until time.Time) (first bool, err error) {
	if s.d.name() == "sqlite" {
		s.writeMu.Lock()
		defer s.writeMu.Unlock()
	}
	if s.replayCalls.Add(1)%alexaReplayPruneEvery == 0 {
		if _, err := s.db.ExecContext(ctx, s.rebound(`DELETE FROM alexa_request_seen WHERE until_ms < ?`), now.UnixMilli()); err != nil {
			return false, fmt.Errorf("store: alexa replay memory: forget: %w", err)
		}
	}
	res, err := s.db.ExecContext(ctx, s.rebound(`INSERT INTO alexa_request_seen (digest, until_ms) VALUES (?, ?) ON CONFLICT (digest) DO NOTHING`),
		digest[:], until.UnixMilli())
	if err != nil {
		return false, fmt.Errorf("store: alexa replay memory: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("store: alexa replay memory: %w", err)
	}
	return n == 1, nil
}
