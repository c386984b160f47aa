package auth

import (
	"crypto/sha256"
	"sync"
	"time"
)

// Signature cache limits.
const (
	// sigCacheMax bounds the cache: 4,096 tokens (32-byte keys); a full
	// cache is emptied and refilled.
	sigCacheMax = 4096
	// sigCacheTTL is the longest a verified signature is reused: 1 minute,
	// so a key withdrawn from a key set stops verifying within a minute.
	sigCacheTTL = time.Minute
)

// sigCache remembers, by the SHA-256 of its exact bytes, a token whose
// signature, algorithm, audience and issuer verified, for up to
// sigCacheTTL and never past its "exp": an MCP host sends the same token
// on every request, and ES256 verification is most of a request's auth
// cost. Everything that can change between two requests — expiry on the
// verifier's clock, the grant's revocation — is still checked every time.
type sigCache struct {
	mu sync.Mutex
	m  map[[32]byte]sigEntry
}

type sigEntry struct {
	c          claims
	fromKeySet bool
	until      time.Time
}

func (sc *sigCache) get(token string, now time.Time) (claims, bool, bool) {
	k := sha256.Sum256([]byte(token))
	sc.mu.Lock()
	defer sc.mu.Unlock()
	e, ok := sc.m[k]
	if !ok || !now.Before(e.until) {
		if ok {
			delete(sc.m, k)
		}
		return claims{}, false, false
	}
	return e.c, e.fromKeySet, true
}

func (sc *sigCache) put(token string, c claims, fromKeySet bool, now time.Time) {
	until := now.Add(sigCacheTTL)
	if c.ExpiresAt == nil {
		return
	}
	if exp := c.ExpiresAt.Time; exp.Before(until) {
		until = exp
	}
	k := sha256.Sum256([]byte(token))
	sc.mu.Lock()
	defer sc.mu.Unlock()
	if sc.m == nil || len(sc.m) >= sigCacheMax {
		sc.m = make(map[[32]byte]sigEntry, 64)
	}
	sc.m[k] = sigEntry{c: c, fromKeySet: fromKeySet, until: until}
}
