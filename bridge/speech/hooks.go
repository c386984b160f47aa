package speech

import (
	"context"
	"fmt"

	"github.com/unsay/unsay/models"
)

// OnQueued sets fn to be called, on the goroutine that reconciled the
// revision, each time an announcement is queued or extended for a patient
// this principal speaks for (the out-of-session notifier, P-23). fn must
// not block (the notifier's Revision only signals). A later call replaces fn.
func (p *Principal) OnQueued(fn func(patient string)) {
	p.do(func(st *state) { st.hook = fn })
}

// tellQueued tells OnQueued of uri's pending announcement when this
// principal speaks for patient and has not told it of that version yet.
func (p *Principal) tellQueued(ctx context.Context, patient string, uri models.URI) {
	var speaks bool
	p.do(func(st *state) { speaks = !st.passive[patient] && st.hook != nil })
	if !speaks {
		return
	}
	_, pendingTo, err := p.ledger.Status(ctx, patient, uri.String())
	if err != nil || pendingTo == 0 {
		return
	}
	var fn func(string)
	p.do(func(st *state) {
		if st.notified[uri.String()] >= pendingTo {
			return
		}
		st.notified[uri.String()] = pendingTo
		fn = st.hook
	})
	if fn != nil {
		fn(patient)
	}
}

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
	p.do(func(st *state) {
		was := !st.passive[patient]
		if on {
			delete(st.passive, patient)
			if !was {
				st.work.full = true
			}
		} else {
			st.passive[patient] = true
		}
	})
	return nil
}

// Speaking returns the followed patients this principal speaks for, sorted.
func (p *Principal) Speaking() []string {
	var out []string
	p.do(func(st *state) {
		for _, id := range st.patientList() {
			if !st.passive[id] {
				out = append(out, id)
			}
		}
	})
	return out
}
