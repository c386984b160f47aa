package speech

import (
	"sync"
	"sync/atomic"

	"github.com/unsay/unsay/models"
)

// revisionCounts counts, per patient, the notifications/resources/updated
// the principal has received for his facts, and the sessions it has lost
// (over which notifications may have gone undelivered). Both only grow.
// Written by Run's loop; read by any goroutine without a lock.
type revisionCounts struct {
	lost      atomic.Uint64
	byPatient sync.Map // patient id → *atomic.Uint64
}

// updated counts a notification that the fact uri (a care:// URI) was revised.
func (c *revisionCounts) updated(uri string) {
	u, err := models.ParseURI(uri)
	if err != nil {
		return
	}
	n, ok := c.byPatient.Load(u.Patient)
	if !ok {
		n, _ = c.byPatient.LoadOrStore(u.Patient, new(atomic.Uint64))
	}
	n.(*atomic.Uint64).Add(1)
}

// of is patient's count: his notifications plus the sessions lost.
func (c *revisionCounts) of(patient string) uint64 {
	lost := c.lost.Load()
	if n, ok := c.byPatient.Load(patient); ok {
		return lost + n.(*atomic.Uint64).Load()
	}
	return lost
}

// Revisions returns a number that changes whenever the principal may have
// learnt that one of patient's speakable facts was revised: it counts the
// notifications/resources/updated received for his facts over the
// subscription (one per revision), and every session ended (a revision
// published while it was breaking may never be notified). It is a load of
// two atomic counters, cheap enough for every turn (P-24).
//
// The skill reads it just before a turn's confirmation (Turn) begins and
// again just before the response is written (skill.RevisionCounter): a
// different number means a fact the response speaks as current may have
// been revised since its confirmation began, so the response is built
// again. It does not see a revision whose notification has not reached the
// principal yet — the server notifies after its commit, so there is a
// window of about half a millisecond in process (bridge/app's in-process
// pipes), longer over a network — nor one committed after the response was
// written; those are withdrawn on Ray's next turn, quoting what this one
// said (its offers were recorded before the write, P-24). A fact created
// (notifications/resources/list_changed) does not count: a response
// without it says nothing superseded.
func (p *Principal) Revisions(patient string) uint64 { return p.revs.of(patient) }
