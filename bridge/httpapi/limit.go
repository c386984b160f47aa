package httpapi

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/unsay/unsay/store"
)

// Refused, unauthenticated attempts are limited per source so that a flood
// of forged writes can neither fill the audit log (its rows are chained and
// never pruned) nor the server's log.
const (
	// RefusalBurst is how many refused, unauthenticated attempts (no or an
	// invalid bearer token, a bad or stale signature) one source may make at
	// once before it is answered 429.
	RefusalBurst = 10
	// RefusalEvery is how often a source earns one more such attempt: one
	// per 6 s (10 a minute, once the burst is spent).
	RefusalEvery = 6 * time.Second
	// maxSources bounds the limiter's memory: past it, sources whose bucket
	// is full again are forgotten, and new ones share one bucket.
	maxSources = 10000
	// rateLimitedFlush is how long 429 answers are counted in memory before
	// their one audit row (with the count) is written: 1 s.
	rateLimitedFlush = time.Second
)

// refusalLimiter is a token bucket per source (golang.org/x/time/rate):
// RefusalBurst attempts, one more per RefusalEvery. It is consulted only
// for attempts that have already failed authentication, so a source that
// also sends good requests — a clinician behind the same proxy as an
// attacker — is never refused what it is entitled to.
type refusalLimiter struct {
	mu       sync.Mutex
	sources  map[string]*rate.Limiter
	overflow *rate.Limiter // shared by new sources once maxSources are tracked
}

func newRefusalLimiter() *refusalLimiter {
	return &refusalLimiter{sources: map[string]*rate.Limiter{}, overflow: rate.NewLimiter(rate.Every(RefusalEvery), RefusalBurst)}
}

// take spends one refused attempt of source at now. It returns ok = false
// and how long until the next one is allowed when the source's budget is
// spent (the attempt is then not counted against it).
func (l *refusalLimiter) take(source string, now time.Time) (ok bool, retryAfter time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	lim, found := l.sources[source]
	if !found {
		if len(l.sources) >= maxSources {
			for k, v := range l.sources {
				if v.TokensAt(now) >= RefusalBurst {
					delete(l.sources, k)
				}
			}
		}
		if len(l.sources) >= maxSources {
			lim = l.overflow
		} else {
			lim = rate.NewLimiter(rate.Every(RefusalEvery), RefusalBurst)
			l.sources[source] = lim
		}
	}
	r := lim.ReserveN(now, 1)
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return false, d
	}
	return true, 0
}

// sourceOf is the limiter's key for r: the peer's IP address (the port
// dropped). Behind a reverse proxy every request shares the proxy's
// address, so the limit then applies to all refused attempts together.
func sourceOf(r *http.Request) string {
	if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		return host
	}
	return r.RemoteAddr
}

// retryAfterSeconds is d rounded up to whole seconds, at least 1, as the
// Retry-After header carries it.
func retryAfterSeconds(d time.Duration) string {
	return strconv.Itoa(max(1, int(math.Ceil(d.Seconds()))))
}

// rateLimitedAudit counts 429 answers and writes them as one audit row per
// kind of attempt and flush (store.AuditEntry.Count), at most once per
// rateLimitedFlush; the store collapses consecutive flushes of the same
// kind into one row. A flood thus costs a few rows and a few commits, not
// one of each per request.
type rateLimitedAudit struct {
	st    *store.Store
	log   *slog.Logger
	later *pendingAudit // keeps what the store cannot commit now

	mu      sync.Mutex
	pending map[store.AuditEntry]int64 // Count zero in the key
	timer   *time.Timer
}

// add counts one rate-limited attempt described by e.
func (b *rateLimitedAudit) add(e store.AuditEntry) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.pending == nil {
		b.pending = map[store.AuditEntry]int64{}
	}
	b.pending[e]++
	if b.timer == nil {
		b.timer = time.AfterFunc(rateLimitedFlush, b.flush)
	}
}

// flush writes what add counted.
func (b *rateLimitedAudit) flush() {
	b.mu.Lock()
	pending := b.pending
	if b.timer != nil {
		b.timer.Stop()
	}
	b.pending, b.timer = nil, nil
	b.mu.Unlock()
	for e, n := range pending {
		e.Count = n
		err := b.st.Audit(context.Background(), e)
		switch {
		case errors.Is(err, store.ErrUnavailable):
			b.later.add(e) // appended once the store commits again
		case err != nil:
			b.log.Warn("write: audit of rate-limited attempts failed", "count", n, "err", err)
		}
	}
}
