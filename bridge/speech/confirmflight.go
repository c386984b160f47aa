package speech

import (
	"context"
	"slices"
	"sync"

	"github.com/unsay/unsay/models"
)

// Turns that confirm the same patient's facts at the same moment share one
// round of reads (P-24 unchanged: every turn's facts are read from the
// server by reads that began after the turn asked). A round that is under
// way began before a turn arriving now, so that turn waits for the next
// round, which every turn arriving meanwhile joins, and which begins as
// soon as the one under way ends. At most two rounds per patient exist
// at a time: busy Alexa traffic for one patient costs about one round
// trip of reads per round trip, not one per request.

// confirmRound is one round of reads of a patient's current facts.
type confirmRound struct {
	done  chan struct{}
	facts []models.Version // set before done closes
	err   error
}

// confirmRounds holds each patient's round under way and the next one.
type confirmRounds struct {
	mu      sync.Mutex
	running map[string]*confirmRound
	next    map[string]*confirmRound
}

// confirmCurrent returns the current version of each of patient's facts
// as the principal knows them, each read afresh over the current
// connection by a round that began after this call. A fact the server no
// longer serves is left out (logged); any other failure of the round is
// returned, and so is ctx's end while waiting.
func (p *Principal) confirmCurrent(ctx context.Context, patient string) ([]models.Version, error) {
	c := &p.rounds
	c.mu.Lock()
	if c.running == nil {
		c.running, c.next = map[string]*confirmRound{}, map[string]*confirmRound{}
	}
	r := c.running[patient]
	if r == nil {
		r = &confirmRound{done: make(chan struct{})}
		c.running[patient] = r
		c.mu.Unlock()
		go p.runRound(patient, r)
	} else {
		if r = c.next[patient]; r == nil {
			r = &confirmRound{done: make(chan struct{})}
			c.next[patient] = r
		}
		c.mu.Unlock()
	}
	select {
	case <-r.done:
		return slices.Clone(r.facts), r.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// runRound reads, within ConfirmTimeout, the current version of every fact
// of patient the principal knows, concurrently, then starts the next
// round if turns joined it meanwhile.
func (p *Principal) runRound(patient string, r *confirmRound) {
	for r != nil {
		r.facts, r.err = p.readRound(patient)
		close(r.done)
		c := &p.rounds
		c.mu.Lock()
		r = c.next[patient]
		delete(c.next, patient)
		if r != nil {
			c.running[patient] = r
		} else {
			delete(c.running, patient)
		}
		c.mu.Unlock()
	}
}

// readRound is one round: with the connection and the facts of patient
// the principal knows when it begins, it reads each one's current version
// and the list of resources concurrently, then reads the facts the list
// names that are not yet known.
func (p *Principal) readRound(patient string) ([]models.Version, error) {
	ctx, cancel := context.WithTimeout(context.Background(), p.cfg.ConfirmTimeout)
	defer cancel()
	var up upstream
	var known []models.Version
	p.do(func(st *state) {
		if st.connected {
			up = st.up
		}
		known = st.factsOf(patient)
	})
	if up == nil {
		return nil, ErrNotConnected
	}
	targets := make([]models.URI, 0, len(known))
	isKnown := make(map[string]bool, len(known))
	for _, v := range known {
		targets = append(targets, v.FactURI())
		isKnown[v.FactURI().String()] = true
	}
	type listed struct {
		uris []string
		err  error
	}
	lists := make(chan listed, 1)
	go func() {
		uris, err := up.List(ctx)
		lists <- listed{uris, err}
	}()
	facts, err := p.readAll(ctx, up, targets)
	l := <-lists
	if err != nil {
		return nil, err
	}
	if l.err != nil {
		return nil, l.err
	}
	var fresh []models.URI
	for _, s := range l.uris {
		u, err := models.ParseURI(s)
		if err != nil || u.Audience() != models.AudienceUser || u.Version != 0 || u.Patient != patient || isKnown[s] {
			continue
		}
		fresh = append(fresh, u)
	}
	if len(fresh) > 0 {
		more, err := p.readAll(ctx, up, fresh)
		if err != nil {
			return nil, err
		}
		facts = append(facts, more...)
		// The worker watches them too (list_changed may be on its way).
		p.do(func(st *state) { st.work.relist = true })
	}
	sortByURI(facts)
	return facts, nil
}
