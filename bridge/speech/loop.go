package speech

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"
)

// do runs f on the state's owner: the loop of Run while it is active, else
// the caller itself, having taken the parked state for the instant f
// takes. f must not block or do I/O.
func (p *Principal) do(f func(st *state)) {
	done := make(chan struct{})
	call := func(st *state) { f(st); close(done) }
	select {
	case p.calls <- call:
		<-done
	case st := <-p.parked:
		call(st)
		p.parked <- st
	}
}

// lagCheckInterval is how often the loop compares the lag with MaxLag.
const lagCheckInterval = time.Second

// runner is one Run: the loop that owns the state, the session's worker,
// and the dialer. Its fields are the loop goroutine's own.
type runner struct {
	p   *Principal
	st  *state
	ctx context.Context

	events  chan event     // from the connection's notifications
	dialed  chan dialed    // from the dialer
	results chan jobResult // from the worker
	stop    chan struct{}  // closed when Run ends
	wg      sync.WaitGroup // the dialer and the workers

	jobs      chan job    // the current session's worker; nil when none
	retry     *time.Timer // the backoff before the next dial; nil while connecting or connected
	attempt   int         // failed attempts since the last session that synced
	dialing   bool
	lagClosed int // the session generation closed for lagging, so it is closed once
}

type dialed struct {
	up       upstream
	err      error
	tokenGen int
	patients []string
}

// Run connects to the MCP server and keeps the principal subscribed until
// ctx is done, when it returns ctx.Err(). Each connection (at 2026-07-28
// when the server offers it, else a 2025-11-25 session: see upstream):
// list every page with the bearer token, watch every care:// fact of every
// patient (one subscriptions/listen stream, or resources/subscribe each),
// read each and reconcile it with the heard ledger (so a revision
// published while disconnected is announced), then serve notifications:
// updated → read → reconcile; list_changed → re-list and watch new facts.
// When the connection is lost (its listen stream ended — the token
// expired, the server shut down, the stream broke or fell silent — or
// ErrSessionMissing after a server restart or DELETE, a failed ping, a
// transport error, a failed confirmation at speak time, or a lag behind
// the store over MaxLag while idle) it reconnects after Config.Backoff,
// with a fresh token, and does it all again. It returns ErrRunning if
// another Run is active.
//
// Run's goroutine owns the principal's state and never does I/O: a worker
// goroutine per session reads and reconciles, a dialer connects, and the
// skill's turns confirm facts on their own goroutines, each reporting back
// over channels.
func (p *Principal) Run(ctx context.Context) error {
	if !p.running.CompareAndSwap(false, true) {
		return ErrRunning
	}
	defer p.running.Store(false)
	r := &runner{p: p, ctx: ctx, events: make(chan event), dialed: make(chan dialed), results: make(chan jobResult), stop: make(chan struct{})}
	r.st = <-p.parked
	p.startCompeting(ctx, r.st.patientList())
	err := r.loop()
	r.endSession()
	close(r.stop)
	p.parked <- r.st // the worker may still settle what it was doing through do
	r.wg.Wait()
	p.stopCompeting() // leases given up (through do, on the parked state)
	return err
}

func (r *runner) loop() error {
	tick := time.NewTicker(lagCheckInterval)
	defer tick.Stop()
	r.startDial()
	for {
		var upDone <-chan struct{}
		if r.st.up != nil {
			upDone = r.st.up.Done()
		}
		var retry <-chan time.Time
		if r.retry != nil {
			retry = r.retry.C
		}
		select {
		case <-r.ctx.Done():
			if r.retry != nil {
				r.retry.Stop()
			}
			return r.ctx.Err()
		case f := <-r.p.calls:
			f(r.st)
		case e := <-r.events:
			r.st.lastEventAt = r.p.cfg.Clock()
			if e.listChanged {
				r.st.work.relist = true
			} else {
				r.st.work.uris[e.uri] = true
				r.p.revs.updated(e.uri)
			}
		case d := <-r.dialed:
			r.dialing = false
			r.connected(d)
		case <-upDone:
			err := r.st.up.Err()
			if r.st.connected {
				r.attempt = 0
			}
			r.p.log.Warn("speech: MCP connection ended; reconnecting", "session", r.st.up.ID(), "err", err)
			r.endSession()
			r.backoff()
		case <-retry:
			r.retry = nil
			r.startDial()
		case res := <-r.results:
			r.finished(res)
		case <-tick.C:
			r.checkLag()
		}
		r.dispatch()
	}
}

// startDial mints a token for the patients followed now and connects, on
// the dialer's goroutine.
func (r *runner) startDial() {
	if r.dialing {
		return
	}
	r.dialing = true
	p := r.p
	patients, tokenGen := r.st.patientList(), r.st.tokenGen
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		d := dialed{tokenGen: tokenGen, patients: patients}
		d.up, d.err = p.connect(r.ctx, patients, r.events, r.stop)
		select {
		case r.dialed <- d:
		case <-r.stop:
			if d.up != nil {
				_ = d.up.Close()
			}
		}
	}()
}

// connect refreshes the token (TokenSource) and dials.
func (p *Principal) connect(ctx context.Context, patients []string, events chan<- event, stop <-chan struct{}) (upstream, error) {
	if p.cfg.TokenSource != nil {
		tok, err := p.cfg.TokenSource(ctx, patients)
		if err != nil {
			return nil, fmt.Errorf("speech: token: %w", err)
		}
		p.token.Store(&tok)
	}
	cctx, cancel := context.WithTimeout(ctx, p.cfg.RequestTimeout)
	defer cancel()
	return dial(cctx, dialConfig{url: p.cfg.MCPURL, http: p.httpClient(), keepAlive: p.cfg.KeepAlive, listenIdle: p.cfg.ListenIdle,
		events: events, stop: stop, era: &p.era})
}

// connected takes a new connection, or schedules the next attempt.
func (r *runner) connected(d dialed) {
	if d.err != nil {
		if exp := r.p.cfg.TokenExpiry; r.p.cfg.TokenSource == nil && !exp.IsZero() && !r.p.cfg.Clock().Before(exp) {
			r.p.log.Error("speech: cannot connect: the speech principal's token (--speech-token) expired; give a new one and restart",
				"expired", exp.UTC().Format(time.RFC3339), "err", d.err, "attempt", r.attempt+1)
			r.backoff()
			return
		}
		r.p.log.Warn("speech: cannot connect; retrying", "err", d.err, "attempt", r.attempt+1)
		r.backoff()
		return
	}
	if r.ctx.Err() != nil {
		_ = d.up.Close()
		return
	}
	st := r.st
	st.gen++
	st.up, st.upGen, st.connected = d.up, d.tokenGen, false
	st.upFor = nil
	if r.p.cfg.TokenSource != nil {
		st.upFor = d.patients
	}
	st.work.initial = true
	r.startWorker(d.up, st.gen)
}

// backoff schedules the next dial after Config.Backoff.
func (r *runner) backoff() {
	d := r.p.cfg.Backoff.Delay(r.attempt)
	r.attempt++
	r.retry = time.NewTimer(d)
}

// endSession closes the current connection and its worker, and forgets it.
func (r *runner) endSession() {
	r.p.revs.lost.Add(1) // a revision may go unnotified meanwhile (Revisions)
	if r.jobs != nil {
		close(r.jobs)
		r.jobs = nil
	}
	if up := r.st.up; up != nil {
		go func() { _ = up.Close() }() // a DELETE over the network: not on the loop
	}
	r.st.endSession()
}

// dispatch gives the worker its next job when it is idle, and wakes
// whoever waits for the session to be idle.
func (r *runner) dispatch() {
	st := r.st
	if st.up != nil && !st.busy && r.jobs != nil && !st.work.empty() {
		j := job{
			initial:     st.work.initial,
			relist:      st.work.relist,
			full:        st.work.full,
			listWaiters: st.work.listWaiters,
			patients:    st.patientList(),
		}
		for u := range st.work.uris {
			j.uris = append(j.uris, u)
		}
		slices.Sort(j.uris)
		st.work = work{uris: map[string]bool{}}
		st.busy = true
		r.jobs <- j // capacity 1 and the worker is idle: never blocks
	}
	st.wake()
}

// finished takes a job's result.
func (r *runner) finished(res jobResult) {
	st := r.st
	for _, w := range res.job.listWaiters {
		w <- res.err
	}
	if res.gen != st.gen || st.up == nil {
		return // an earlier session's worker
	}
	st.busy = false
	if res.err != nil {
		r.p.log.Warn("speech: sync failed; reconnecting", "session", st.up.ID(), "err", res.err)
		up := st.up
		go func() { _ = up.Close() }()
		return
	}
	if res.job.initial {
		st.connected = true
		st.confirmFailing = false
		st.lastEventAt = r.p.cfg.Clock()
		r.p.log.Info("speech: subscribed", "session", st.up.ID(), "patients", len(res.job.patients))
		// A patient followed since this session's token was minted needs a
		// token bound to him: a new session.
		if r.p.cfg.TokenSource != nil && st.upGen != st.tokenGen {
			up := st.up
			go func() { _ = up.Close() }()
		}
	}
}

// checkLag closes an idle session that has not seen a change the store
// committed more than MaxLag ago (its event stream is stalled): the next
// session reads every fact afresh.
func (r *runner) checkLag() {
	st := r.st
	lag := st.lag(r.p.cfg.Clock())
	if lag <= r.p.cfg.MaxLag || !st.connected || st.busy || !st.work.empty() || r.lagClosed == st.gen {
		return
	}
	r.lagClosed = st.gen
	r.p.log.Warn("speech: behind the store; reconnecting", "session", st.up.ID(), "lag", lag)
	up := st.up
	go func() { _ = up.Close() }()
}
