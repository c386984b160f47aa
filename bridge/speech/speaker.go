package speech

import (
	"context"
	"fmt"
	"time"

	"github.com/unsay/unsay/models"
)

// Who speaks for a patient. Every instance sharing one heard ledger
// follows the patients, reads each revision and queues its announcement
// (the ledger keeps one per fact: none twice, and a dead instance loses
// nothing), but only the instance that speaks for a patient tells him
// unasked (OnQueued, the out-of-session notifier): exactly one at a time
// (P-23). With Config.Compete the instances settle it with one lease per
// patient (SpeakerLease), held while Run runs; without it this instance
// speaks for every patient it follows.

// SpeakerLease names the lease whose holder speaks for patient.
func SpeakerLease(patient string) string { return "speech/" + patient }

// SpeakerLeaseTTL is how long the lease lives without renewal; it is
// renewed every third of it, so a dead instance's patients are spoken for
// again within 15 s.
const SpeakerLeaseTTL = 9 * time.Second

// CompeteFunc holds the lease named lease, with lifetime ttl, for this
// instance among every instance sharing the database, for as long as it
// can: it calls won when this instance gains the lease and lost when it
// loses it (before the lease could lapse, so two instances never both
// believe they hold it); when ctx ends it gives the lease up, calls lost,
// and returns. bridge/app runs store.LeaseKeeper with it. won and lost do
// not block.
type CompeteFunc func(ctx context.Context, lease string, ttl time.Duration, won, lost func()) error

// speaksFor reports whether this instance speaks for patient now.
func (st *state) speaksFor(patient string) bool {
	return st.speaker == nil || st.speaker[patient]
}

// setSpeaksFor makes this principal speak for patient (tell OnQueued when
// one of his announcements is queued) or stop: the competition calls it
// when this instance wins or loses the patient's lease. Starting to speak
// for him re-reads every fact against the shared ledger, so a revision
// the previous speaker had not yet queued is not lost; the ledger's
// one-pending-per-fact rule keeps it from being queued twice (P-19).
func (p *Principal) setSpeaksFor(patient string, on bool) error {
	if !models.ValidID(patient) {
		return fmt.Errorf("%w: patient id", ErrInvalidArgument)
	}
	p.do(func(st *state) {
		if st.speaker == nil {
			return // no competition: it speaks for every patient
		}
		was := st.speaksFor(patient)
		if on {
			st.speaker[patient] = true
			if !was {
				st.work.full = true
			}
		} else {
			delete(st.speaker, patient)
		}
	})
	return nil
}

// SpeaksFor returns the followed patients this instance speaks for, sorted
// (/readyz: speech.speaksFor).
func (p *Principal) SpeaksFor() []string {
	var out []string
	p.do(func(st *state) {
		for _, id := range st.patientList() {
			if st.speaksFor(id) {
				out = append(out, id)
			}
		}
	})
	return out
}

// compete starts competing for patient's lease until Run ends (with
// Config.Compete; once per patient per Run). It does nothing while no Run
// is active: Run competes for every followed patient when it starts.
func (p *Principal) compete(patient string) {
	if p.cfg.Compete == nil {
		return
	}
	p.leaseMu.Lock()
	defer p.leaseMu.Unlock()
	if p.leaseCtx == nil || p.competing[patient] {
		return
	}
	p.competing[patient] = true
	set := func(on bool) func() {
		return func() {
			if err := p.setSpeaksFor(patient, on); err != nil {
				p.log.Warn("speech: speaker lease", "patient", patient, "err", err)
			}
			p.log.Info("speech: speaker lease", "patient", patient, "speaksFor", on)
		}
	}
	ctx := p.leaseCtx
	p.leases.Add(1)
	go func() {
		defer p.leases.Done()
		if err := p.cfg.Compete(ctx, SpeakerLease(patient), SpeakerLeaseTTL, set(true), set(false)); err != nil && ctx.Err() == nil {
			p.log.Error("speech: speaker lease competition stopped", "patient", patient, "err", err)
		}
	}()
}

// startCompeting competes for every patient followed (patients) until ctx
// ends (Run; patients followed later compete from AddPatient).
func (p *Principal) startCompeting(ctx context.Context, patients []string) {
	if p.cfg.Compete == nil {
		return
	}
	p.leaseMu.Lock()
	p.leaseCtx, p.competing = ctx, map[string]bool{}
	p.leaseMu.Unlock()
	for _, id := range patients {
		p.compete(id)
	}
}

// stopCompeting waits, after ctx ended, for every competition to give its
// lease up, so another instance speaks for the patients at once.
func (p *Principal) stopCompeting() {
	p.leaseMu.Lock()
	p.leaseCtx, p.competing = nil, nil
	p.leaseMu.Unlock()
	p.leases.Wait()
}
