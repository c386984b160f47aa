package speech

import (
	"context"

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
	p.do(func(st *state) { speaks = st.speaksFor(patient) && st.hook != nil })
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
