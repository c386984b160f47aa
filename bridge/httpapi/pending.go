package httpapi

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/unsay/unsay/store"
)

const (
	// maxPendingAudit bounds the kinds of attempt (actor, via, URI, author,
	// outcome, reason) pendingAudit holds: past it, an attempt of a new
	// kind is not recorded (logged and counted as lost).
	maxPendingAudit = 1000
	// pendingAuditRetry is how often pendingAudit asks the store whether it
	// can commit again: once a second.
	pendingAuditRetry = time.Second
	// pendingAuditCheck bounds each of those questions (store.WriteHealthState).
	pendingAuditCheck = time.Second
)

// pendingAudit keeps the audit rows of /write attempts that the store could
// not record when they happened because it could not commit (a full or
// read-only disk, a database locked by another process), collapsed by
// kind with a count (store.AuditEntry.Count), and appends them once the
// store reports it can commit again — in the background, so a 503 is
// never held up by its own audit row (T4), and the row is not lost while
// the fault passes by itself (P-14: every attempt appends a row). A row
// so appended carries the time it was appended, not the attempts' own
// times (each attempt's log line has those). What cannot be kept — a new
// kind past maxPendingAudit, or rows still pending when the API closes
// and the store still cannot commit — is logged at ERROR with its count
// and counted (Config.OnAuditLost).
type pendingAudit struct {
	st     *store.Store
	log    *slog.Logger
	onLost func(n int64)

	mu      sync.Mutex
	rows    []store.AuditEntry // oldest kind first, each with its Count
	running bool               // run is under way
	closed  bool
	stop    chan struct{} // closed by close: run returns
	done    chan struct{} // closed when run returns
}

func newPendingAudit(st *store.Store, log *slog.Logger, onLost func(int64)) *pendingAudit {
	return &pendingAudit{st: st, log: log, onLost: onLost, stop: make(chan struct{})}
}

// add keeps e (Count attempts; 0 means 1) until the store can record it.
func (p *pendingAudit) add(e store.AuditEntry) {
	n := max(e.Count, 1)
	e.Count = 0
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		p.lost(e, n, "the API has closed")
		return
	}
	p.merge(e, n)
	if !p.running {
		p.running, p.done = true, make(chan struct{})
		go p.run(p.done)
	}
}

// merge adds n attempts of kind e (Count zero) to rows; the caller holds mu.
func (p *pendingAudit) merge(e store.AuditEntry, n int64) {
	for i := range p.rows {
		k := p.rows[i]
		k.Count = 0
		if k == e {
			p.rows[i].Count += n
			return
		}
	}
	if len(p.rows) >= maxPendingAudit {
		p.lost(e, n, "too many kinds of attempt are waiting")
		return
	}
	e.Count = n
	p.rows = append(p.rows, e)
}

// lost logs and counts n attempts of kind e that get no audit row.
func (p *pendingAudit) lost(e store.AuditEntry, n int64, why string) {
	p.log.Error("write: audit rows lost: the store could not record them and "+why,
		"count", n, "reason", string(e.Reason), "outcome", e.Outcome, "actor", e.Actor, "via", e.Via, "uri", e.URI)
	if p.onLost != nil {
		p.onLost(n)
	}
}

// run appends the pending rows whenever the store says it can commit,
// until none is left or close stops it.
func (p *pendingAudit) run(done chan struct{}) {
	defer close(done)
	for {
		if p.writable() {
			p.flush()
		}
		p.mu.Lock()
		if len(p.rows) == 0 {
			p.running = false
			p.mu.Unlock()
			return
		}
		p.mu.Unlock()
		select {
		case <-p.stop:
			return
		case <-time.After(pendingAuditRetry):
		}
	}
}

// writable reports whether the store says it can commit, asking it for at
// most pendingAuditCheck.
func (p *pendingAudit) writable() bool {
	ctx, cancel := context.WithTimeout(context.Background(), pendingAuditCheck)
	defer cancel()
	return p.st.WriteHealthState(ctx).Err == nil
}

// flush appends every pending row in order; one the store cannot commit
// is kept (with those after it) for the next try.
func (p *pendingAudit) flush() {
	p.mu.Lock()
	rows := p.rows
	p.rows = nil
	p.mu.Unlock()
	for i, e := range rows {
		err := p.st.Audit(context.Background(), e)
		if errors.Is(err, store.ErrUnavailable) {
			p.mu.Lock()
			for _, r := range rows[i:] {
				n := r.Count
				r.Count = 0
				p.merge(r, n)
			}
			p.mu.Unlock()
			return
		}
		if err != nil {
			p.lost(e, e.Count, "appending them failed: "+err.Error())
		}
	}
}

// close stops the retries, makes one last attempt (which waits the busy
// timeout at most once: it stops at the first row the store cannot
// commit), and logs and counts as lost what is left.
func (p *pendingAudit) close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	close(p.stop)
	done := p.done
	p.mu.Unlock()
	if done != nil {
		<-done
	}
	p.mu.Lock()
	left := len(p.rows)
	p.mu.Unlock()
	if left == 0 {
		return
	}
	p.flush() // stops at the first row the store cannot commit: one busy timeout at most
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, e := range p.rows {
		p.lost(e, e.Count, "the API closed before it could")
	}
	p.rows = nil
}
