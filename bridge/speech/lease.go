package speech

import (
	"fmt"
	"sort"

	"github.com/unsay/unsay/models"
)

// SetSpeaking makes this principal speak for patient (tell OnQueued when
// one of his announcements is queued) or stop. With Config.Leased the caller
// turns it on when this instance takes the patient's speech lease and off
// when it loses it. Turning it on re-reads every fact against the shared
// ledger, so a revision the previous holder had not yet queued is not
// lost; the ledger's one-pending-per-fact rule keeps it from being queued
// twice (P-19).
func (p *Principal) SetSpeaking(patient string, on bool) error {
	if !models.ValidID(patient) {
		return fmt.Errorf("%w: patient id", ErrInvalidArgument)
	}
	p.mu.Lock()
	was := !p.passive[patient]
	if on {
		delete(p.passive, patient)
		if !was {
			p.fullSync = true
		}
	} else {
		p.passive[patient] = true
	}
	p.mu.Unlock()
	if on && !was {
		p.poke()
	}
	return nil
}

// Speaking returns the followed patients this principal speaks for, sorted.
func (p *Principal) Speaking() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for id := range p.patients {
		if !p.passive[id] {
			out = append(out, id)
		}
	}
	sort.Strings(out)
	return out
}

// speaksFor reports whether this principal tells OnQueued of patient's announcements.
func (p *Principal) speaksFor(patient string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return !p.passive[patient]
}
