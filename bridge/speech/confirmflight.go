package speech

import (
	"context"
	"slices"
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
	defer releaseAfterDrain(cancel)
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
	listed, err := up.List(ctx, patient)
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

// drainGrace is how long the context of a finished round of reads
// outlives it. The SDK hands each result over as soon as its message is
// read and drains the rest of the response (the stream's end) on its own
// goroutine; a request whose context ends before that drain is done has
// its connection closed instead of kept idle, so the next round dials
// anew — at 500 Launches/s about one MCP request in three did, each dial a
// new connection, server goroutine and buffers on both sides (issue 17).
// Nothing the round returned depends on it: every read it asked for was
// answered or failed before it returned (pager.list, readAll wait for
// them), and the round's deadline (ConfirmTimeout) still ends it.
const drainGrace = time.Second

// releaseAfterDrain calls cancel drainGrace from now, so the requests
// that used its context are drained and their connections kept idle.
func releaseAfterDrain(cancel context.CancelFunc) { time.AfterFunc(drainGrace, cancel) }

// audioURLMargin is how long, at least, the signed URL of an audio fact
// confirmed from a list must still be served (models.Audio.URLExpires):
// Alexa fetches it while it plays the response, seconds after the turn.
const audioURLMargin = time.Minute

// audioURLLasts reports whether v carries no signed audio URL, or one
// served for at least audioURLMargin after now.
func audioURLLasts(v models.Version, now time.Time) bool {
	return v.Audio == nil || v.Audio.URL == "" || v.Audio.URLExpires.Sub(now) >= audioURLMargin
}
