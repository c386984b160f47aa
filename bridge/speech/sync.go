package speech

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/unsay/unsay/models"
)

// job is one batch of work for a session's worker.
type job struct {
	initial, relist, full bool
	uris                  []string // facts notified as updated, sorted
	patients              []string // followed when the job was given
	listWaiters           []chan error
}

type jobResult struct {
	gen int // the session generation of the worker
	job job
	err error // a session-level failure; the session is then closed
}

// worker does one session's reads, subscriptions and ledger work, one job
// at a time, on its own goroutine.
type worker struct {
	p          *Principal
	up         upstream
	gen        int
	subscribed map[string]bool // this session's subscriptions
}

func (r *runner) startWorker(up upstream, gen int) {
	jobs := make(chan job, 1)
	r.jobs = jobs
	w := &worker{p: r.p, up: up, gen: gen, subscribed: map[string]bool{}}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		for j := range jobs {
			err := w.run(r.ctx, j)
			select {
			case r.results <- jobResult{gen: gen, job: j, err: err}:
			case <-r.stop:
				for _, ch := range j.listWaiters {
					ch <- r.ctx.Err()
				}
				return
			}
		}
	}()
}

func (w *worker) run(ctx context.Context, j job) error {
	if j.initial || j.relist || j.full {
		if err := w.sync(ctx, j.patients, j.initial || j.full); err != nil {
			return err
		}
	}
	for _, s := range j.uris {
		u, err := models.ParseURI(s)
		if err != nil {
			continue
		}
		var follows bool
		w.p.do(func(st *state) { follows = st.follows(u) })
		if !follows {
			continue // never read what is not ours to speak (P-18)
		}
		if err := w.p.refresh(ctx, w.up, u); err != nil {
			if isResourceError(err) {
				w.p.log.Warn("speech: cannot read updated fact", "uri", s, "err", err)
				continue
			}
			return err
		}
	}
	return nil
}

// sync lists every page, subscribes to each care:// fact of patients not
// yet subscribed on this session (one Watch for all of them), then reads
// and reconciles them (all of them when full). Subscribing before reading means a revision published
// in between is either read or notified. A patient followed for the first
// time starts from what his facts say now: his baseline is recorded and
// nothing is announced (P-19).
func (w *worker) sync(ctx context.Context, patients []string, full bool) error {
	p := w.p
	lctx, cancel := context.WithTimeout(ctx, p.cfg.RequestTimeout)
	listed, err := w.up.List(lctx, "") // every followed patient
	cancel()
	if err != nil {
		return err
	}
	var readable []string
	p.do(func(st *state) {
		for _, id := range patients {
			if st.patients[id] && st.canRead(id) {
				readable = append(readable, id)
			}
		}
	})
	var fresh, all []models.URI
	var toWatch []string
	for _, r := range listed {
		s := r.URI
		u, ok := speakableFact(r)
		if !ok || !slices.Contains(readable, u.Patient) {
			continue
		}
		all = append(all, u)
		if !w.subscribed[s] {
			toWatch = append(toWatch, s)
		}
	}
	sctx, cancel := context.WithTimeout(ctx, p.cfg.RequestTimeout)
	refused, err := w.up.Watch(sctx, toWatch)
	cancel()
	if err != nil {
		return err
	}
	for _, s := range toWatch {
		if slices.Contains(refused, s) {
			p.log.Warn("speech: subscribe refused", "uri", s)
			continue
		}
		w.subscribed[s] = true
		fresh = append(fresh, mustParse(s))
	}
	toRead := fresh
	if full {
		toRead = all
	}
	followed, err := p.ledger.Followed(ctx, readable)
	if err != nil {
		return err
	}
	baseline := map[string]map[string]int{}
	for _, u := range toRead {
		if followed[u.Patient] {
			if err := p.refresh(ctx, w.up, u); err != nil {
				if isResourceError(err) {
					p.log.Warn("speech: cannot read fact", "uri", u.String(), "err", err)
					continue
				}
				return err
			}
			continue
		}
		v, err := p.read(ctx, w.up, u, true)
		if err != nil {
			if isResourceError(err) {
				p.log.Warn("speech: cannot read fact", "uri", u.String(), "err", err)
				continue
			}
			return err
		}
		if baseline[u.Patient] == nil {
			baseline[u.Patient] = map[string]int{}
		}
		baseline[u.Patient][u.String()] = v.N
	}
	for _, id := range readable {
		if !followed[id] {
			if err := p.ledger.Follow(ctx, id, baseline[id]); err != nil {
				return err
			}
		}
	}
	// The listed set is now the truth for these patients.
	keep := map[string]bool{}
	seen := map[string]int{}
	for _, u := range all {
		keep[u.String()] = true
		seen[u.Patient]++
	}
	for _, id := range readable {
		if seen[id] == 0 {
			p.log.Warn("speech: no speakable facts visible for patient (is the token bound to it?)", "patient", id)
		}
	}
	p.do(func(st *state) {
		for s, v := range st.current {
			if slices.Contains(readable, v.Patient) && !keep[s] {
				delete(st.current, s)
			}
		}
		if st.gen == w.gen {
			for _, id := range readable {
				st.synced[id] = true
			}
		}
	})
	return nil
}

// mustParse parses a URI already parsed once.
func mustParse(s string) models.URI {
	u, _ := models.ParseURI(s)
	return u
}

// read reads u (versioned or not) over up within RequestTimeout and
// caches it; current says it was read as the fact's current version.
func (p *Principal) read(ctx context.Context, up upstream, u models.URI, current bool) (models.Version, error) {
	if u.Audience() != models.AudienceUser {
		return models.Version{}, fmt.Errorf("%w: %s is not speakable", ErrInvalidArgument, u)
	}
	rctx, cancel := context.WithTimeout(ctx, p.cfg.RequestTimeout)
	defer cancel()
	return p.readAt(rctx, up, u, current)
}

// readAt is read within ctx's own deadline.
func (p *Principal) readAt(ctx context.Context, up upstream, u models.URI, current bool) (models.Version, error) {
	res, err := up.Read(ctx, u.String())
	if err != nil {
		return models.Version{}, err
	}
	v, latest, err := parseRead(u, res)
	fact := u.Unversioned().String()
	p.do(func(st *state) {
		if err != nil {
			st.sawVersion(fact, latest)
			return
		}
		st.remember(v, latest, current && st.follows(u.Unversioned()))
	})
	return v, err
}

// refresh reads the current version of u, caches it and reconciles it
// with the ledger.
func (p *Principal) refresh(ctx context.Context, up upstream, u models.URI) error {
	v, err := p.read(ctx, up, u.Unversioned(), true)
	if err != nil {
		return err
	}
	return p.reconcile(ctx, up, v)
}

// reconcile applies P-19 to the latest version v (decide, in the ledger's
// transaction): compare its words with those of the version Ray heard and
// of those he may have heard (offered, delivery unconfirmed) — read back
// over MCP or from memory — and queue, extend, rewrite or drop the one
// pending announcement. The instance that speaks for the patient then
// tells OnQueued, once per revision.
func (p *Principal) reconcile(ctx context.Context, up upstream, v models.Version) error {
	u := v.FactURI()
	for range 5 {
		hs, err := p.ledger.HeardState(ctx, v.Patient, u.String())
		if err != nil {
			return err
		}
		if v.N <= hs.Heard {
			return nil
		}
		sameHeard, err := p.sameWords(ctx, up, u, hs.Heard, v)
		if err != nil {
			return err
		}
		unlike, err := p.unlike(ctx, up, u, hs.Offered, v)
		if err != nil {
			return err
		}
		changed, err := p.ledger.Observe(ctx, v.Patient, u.String(), hs, v.N, sameHeard, unlike)
		if errors.Is(err, errHeardMoved) {
			continue
		}
		if err != nil {
			return err
		}
		same := sameHeard && unlike == 0
		if changed {
			p.log.Info("speech: announcement", "uri", u.String(), "from", hs.Heard, "offered", hs.LastOffered(), "unlike", unlike, "to", v.N, "dropped", same)
		}
		// Another instance may have queued it first: refresh the gauge and
		// wake WaitPending callers either way, and let the instance that
		// speaks for him tell Ray unasked, once per revision.
		if !same {
			p.tellQueued(ctx, v.Patient, u)
		}
		p.ledgerChanged(ctx)
		return nil
	}
	return fmt.Errorf("speech: %s: heard version kept moving", u)
}

// unlike returns the newest of offered (versions of fact u he may have
// heard, ascending) whose words differ from v's — sameWords — or 0 when
// every one says v's words (models.Observation.Unlike).
func (p *Principal) unlike(ctx context.Context, up upstream, u models.URI, offered []int, v models.Version) (int, error) {
	for i := len(offered) - 1; i >= 0; i-- {
		same, err := p.sameWords(ctx, up, u, offered[i], v)
		if err != nil {
			return 0, err
		}
		if !same {
			return offered[i], nil
		}
	}
	return 0, nil
}

// sameWords reports whether version n of fact u (0: none — false) has the
// words of v — and, for an audio fact, the same sound: a clip re-recorded
// under the same words is a change (P-17). A version that cannot be read
// back counts as different: announce rather than stay silent (P-24).
func (p *Principal) sameWords(ctx context.Context, up upstream, u models.URI, n int, v models.Version) (bool, error) {
	if n <= 0 {
		return false, nil
	}
	if n == v.N {
		return true, nil
	}
	hv, err := p.versionAt(ctx, up, u, n)
	switch {
	case err == nil:
		return strings.TrimSpace(hv.Value) == strings.TrimSpace(v.Value) && models.SameSound(hv.Audio, v.Audio), nil
	case isResourceError(err):
		p.log.Warn("speech: heard version unreadable", "uri", u.String(), "version", n, "err", err)
		return false, nil
	}
	return false, err
}

// versionAt returns version n of fact u: from memory when it was read
// before (versions are immutable), else over up, else over the current
// connection. It returns ErrNotConnected when it must read and none is up.
func (p *Principal) versionAt(ctx context.Context, up upstream, u models.URI, n int) (models.Version, error) {
	key := u.WithVersion(n).String()
	var v models.Version
	var ok bool
	p.do(func(st *state) {
		if v, ok = st.versions[key]; ok {
			return
		}
		if c, cur := st.current[u.Unversioned().String()]; cur && c.N == n {
			v, ok = c, true
		}
		if up == nil {
			up = st.up
		}
	})
	if ok {
		return v, nil
	}
	if up == nil {
		return models.Version{}, fmt.Errorf("%w: reading %s", ErrNotConnected, key)
	}
	return p.read(ctx, up, u.WithVersion(n), false)
}

// ledgerChanged wakes WaitPending callers, then refreshes the backlog
// gauge: a waiter re-reads the ledger itself, so it need not wait for the
// count (one query over every patient's announcements, about a tenth of a
// millisecond of the write → speech path).
func (p *Principal) ledgerChanged(ctx context.Context) {
	p.do(func(st *state) { st.ledgerChanged() })
	if n, err := p.ledger.Backlog(ctx); err == nil {
		p.do(func(st *state) { st.backlog = n })
	}
}
