package speech

import (
	"context"
	"os"
	"slices"
	"strconv"
	"sync"
	"time"

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
//
// At moderate rates turns rarely meet a round under way, so a round for a
// busy patient — one whose last round ended less than gatherBusy ago —
// first gathers: it waits gatherWindow before its first request, and every
// turn asking meanwhile joins it. Its requests still begin after each of
// its turns asked. A patient's first turn after a quiet spell starts its
// round at once.

// The gathering of a busy patient's round.
const (
	// gatherBusy is how recently, at most, a patient's last round must
	// have ended for his next round to gather (monotonic time).
	gatherBusy = 5 * time.Millisecond
	// gatherWindow is how long a busy patient's round waits before its
	// first request, for the turns asking meanwhile to join it: at most
	// that much latency added to a turn, saving one MCP round trip (about
	// 1 ms of CPU) for every turn that joins.
	gatherWindowC = time.Millisecond
)

var gatherWindow, gatherFull = func() (time.Duration, int) {
	w := gatherWindowC
	if d, err := time.ParseDuration(os.Getenv("GATHERX_W")); err == nil {
		w = d
	}
	n, err := strconv.Atoi(os.Getenv("GATHERX_FULL"))
	if err != nil {
		n = 1 << 30
	}
	return w, n
}()

// confirmRound is one round of reads of a patient's current facts.
type confirmRound struct {
	done    chan struct{}
	facts   []models.Version // set before done closes
	err     error
	started bool          // its first request may have begun: no turn joins it (under confirmRounds.mu)
	turns   int           // the turns that joined it (under confirmRounds.mu)
	first   time.Time     // when its first turn asked
	full    chan struct{} // closed when gatherFull turns have joined it
}

// confirmRounds holds each patient's round under way (or gathering) and
// the next one.
type confirmRounds struct {
	mu      sync.Mutex
	running map[string]*confirmRound
	next    map[string]*confirmRound
	ended   map[string]time.Time // when each patient's last round ended, while none is under way
	// now and after are time.Now and time.After; tests replace them
	// (setClock) to decide, without waiting on wall time, which patient
	// is busy and when a window closes.
	now   func() time.Time
	after func(time.Duration) <-chan time.Time
}

// setClock replaces the clock rounds use to tell a busy patient and to
// close a gathering window (tests).
func (c *confirmRounds) setClock(now func() time.Time, after func(time.Duration) <-chan time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now, c.after = now, after
}

func (c *confirmRounds) clock() (func() time.Time, func(time.Duration) <-chan time.Time) {
	if c.now == nil {
		return time.Now, time.After
	}
	return c.now, c.after
}

// confirmCurrent returns the current version of each of patient's facts
// as the principal knows them, each read afresh over the current
// connection by a round whose first request began after this call. A
// fact the server no longer serves is left out (logged); any other
// failure of the round is returned, and so is ctx's end while waiting.
func (p *Principal) confirmCurrent(ctx context.Context, patient string) ([]models.Version, error) {
	c := &p.rounds
	c.mu.Lock()
	if c.running == nil {
		c.running, c.next, c.ended = map[string]*confirmRound{}, map[string]*confirmRound{}, map[string]time.Time{}
	}
	now, _ := c.clock()
	r := c.running[patient]
	switch {
	case r == nil:
		r = &confirmRound{done: make(chan struct{}), full: make(chan struct{}), first: now()}
		ended, ok := c.ended[patient]
		r.started = !ok || r.first.Sub(ended) >= gatherBusy // a quiet patient's round starts at once
		delete(c.ended, patient)
		c.running[patient] = r
		go p.runRound(patient, r)
	case !r.started:
		// gathering: its first request begins after this turn asked
	default:
		if r = c.next[patient]; r == nil {
			r = &confirmRound{done: make(chan struct{}), full: make(chan struct{}), first: now()}
			c.next[patient] = r
		}
	}
	r.turns++
	if r.turns == gatherFull {
		close(r.full)
	}
	c.mu.Unlock()
	select {
	case <-r.done:
		return slices.Clone(r.facts), r.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// runRound runs r and then each next round of patient while turns join
// one: a round not yet started first gathers (confirmRound.first), then
// reads, within ConfirmTimeout, the current version of every fact of
// patient the principal knows, concurrently.
func (p *Principal) runRound(patient string, r *confirmRound) {
	c := &p.rounds
	for r != nil {
		if !r.started {
			c.mu.Lock()
			now, after := c.clock()
			wait, full := r.first.Add(gatherWindow).Sub(now()), r.turns >= gatherFull
			c.mu.Unlock()
			if wait > 0 && !full {
				select {
				case <-after(wait):
				case <-r.full:
				}
			}
			c.mu.Lock()
			r.started = true // from here on a turn asking waits for the next round
			c.mu.Unlock()
		}
		r.facts, r.err = p.readRound(patient)
		close(r.done)
		c.mu.Lock()
		r = c.next[patient]
		delete(c.next, patient)
		if r != nil {
			c.running[patient] = r
		} else {
			delete(c.running, patient)
			now, _ := c.clock()
			c.ended[patient] = now()
		}
		c.mu.Unlock()
	}
}

// readRound is one round: it lists the resources over the current
// connection, then confirms each of patient's facts the list names. A fact
// the principal holds at the version and hash the list describes
// (models.ListMeta) is confirmed by the list itself — a version never
// changes once written (P-5) — with the list's judgement of its review
// date (P-7, P-24); every other fact (a newer version, a new fact, an entry
// a server does not describe, an audio fact whose signed URL is near its
// end) is read afresh, concurrently. A fact the list no longer names is
// left out, as a read the server refuses would be.
func (p *Principal) readRound(patient string) ([]models.Version, error) {
	ctx, cancel := context.WithTimeout(context.Background(), p.cfg.ConfirmTimeout)
	defer cancel()
	var up upstream
	held := map[string]models.Version{}
	p.do(func(st *state) {
		if st.connected {
			up = st.up
		}
		for _, v := range st.factsOf(patient) {
			held[v.FactURI().String()] = v
		}
	})
	if up == nil {
		return nil, ErrNotConnected
	}
	listed, err := up.List(ctx)
	if err != nil {
		return nil, err
	}
	now := p.cfg.Clock()
	var facts []models.Version
	var toRead []models.URI
	newFact := false
	seen := map[string]bool{}
	for _, r := range listed {
		u, ok := speakableFact(r)
		if !ok || u.Patient != patient || seen[r.URI] {
			continue // a URI listed twice is confirmed once
		}
		seen[r.URI] = true
		v, ok := held[r.URI]
		if !ok {
			newFact = true
		} else if m, err := models.ParseListMeta(r.Meta); err == nil && m.Version == v.N && m.VersionHash == v.Hash && audioURLLasts(v, now) {
			v.ServedStale = m.Stale
			facts = append(facts, v)
			continue
		}
		toRead = append(toRead, u)
	}
	if len(toRead) > 0 {
		more, err := p.readAll(ctx, up, toRead)
		if err != nil {
			return nil, err
		}
		facts = append(facts, more...)
	}
	if newFact {
		// The worker watches them too (list_changed may be on its way).
		p.do(func(st *state) { st.work.relist = true })
	}
	sortByURI(facts)
	return facts, nil
}

// audioURLMargin is how long, at least, the signed URL of an audio fact
// confirmed from a list must still be served (models.Audio.URLExpires):
// Alexa fetches it while it plays the response, seconds after the turn.
const audioURLMargin = time.Minute

// audioURLLasts reports whether v carries no signed audio URL, or one
// served for at least audioURLMargin after now.
func audioURLLasts(v models.Version, now time.Time) bool {
	return v.Audio == nil || v.Audio.URL == "" || v.Audio.URLExpires.Sub(now) >= audioURLMargin
}
