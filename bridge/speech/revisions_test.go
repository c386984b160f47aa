package speech

import (
	"testing"
)

// The skill finds the count by asserting skill.RevisionCounter (which this
// package may not import): the principal must have it exactly.
var _ interface{ Revisions(patient string) uint64 } = (*Principal)(nil)

// P-24, the skill's last-moment check: the count moves with each
// resources/updated of the patient's facts — by the time the revision is
// reconciled — and with each session lost (a revision published while it
// breaks may never be notified). Twin: another patient's revision leaves
// his count where it was.
func TestRevisions_MoveWithEachNotifiedRevisionOfThePatientAndEachSessionLost(t *testing.T) {
	f := newFakeCare(t)
	seedRay(f)
	p := startPrincipal(t, f, newTestDB(t), "ray", "bob")
	waitConnected(t, p)
	hearAll(t, p, "ray")
	hearAll(t, p, "bob")

	ray, bob := p.Revisions("ray"), p.Revisions("bob")
	n := f.publish(wb, "Full weight-bearing as tolerated.")
	waitPending(t, p, wb, n)
	if got := p.Revisions("ray"); got == ray {
		t.Fatalf("Revisions(ray) = %d after his walking instruction was revised and notified, unchanged", got)
	}
	if got := p.Revisions("bob"); got != bob {
		t.Errorf("Revisions(bob) moved from %d to %d on Ray's revision", bob, got)
	}

	ray = p.Revisions("ray")
	n = f.publish("care://bob/weight_bearing", "Full weight-bearing as tolerated.")
	waitPending(t, p, "care://bob/weight_bearing", n)
	if got := p.Revisions("ray"); got != ray {
		t.Errorf("Revisions(ray) moved from %d to %d on Bob's revision", ray, got)
	}
	if got := p.Revisions("bob"); got == bob {
		t.Errorf("Revisions(bob) = %d after his revision, unchanged", got)
	}

	ray = p.Revisions("ray")
	f.restart() // every session ends
	eventually(t, "the lost session to count", func() bool { return p.Revisions("ray") != ray })
	waitConnected(t, p)
}

// BenchmarkRevisions measures the count a turn reads three times (before
// its confirmation, before its offers, before its write), for a patient
// notified before, on every CPU.
func BenchmarkRevisions(b *testing.B) {
	var p Principal
	p.revs.updated("care://ray/weight_bearing")
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			_ = p.Revisions("ray")
		}
	})
}
