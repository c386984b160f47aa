package speech

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/unsay/unsay/models"
)

func readsSoFar(f *fakeCare) int {
	reads, _ := f.recorded()
	return len(reads)
}

// P-24 with shared rounds: a turn that asks while a round of reads is
// under way is not answered by it — it waits for the next round, which
// began after it asked — so a revision written meanwhile is what it
// speaks (a retraction), even when no notification ever arrives.
func TestTurn_ARoundUnderWayWhenATurnAsksDoesNotConfirmIt(t *testing.T) {
	f := newFakeCare(t)
	seedRay(f)
	p := startPrincipal(t, f, newTestDB(t), "ray")
	waitConnected(t, p)
	hearAll(t, p, "ray")
	// Twin: a turn alone, nothing changed, owes nothing.
	if s := turnOf(t, p, "ray"); len(s.Pending) != 0 {
		t.Fatalf("quiet turn owes %d announcements", len(s.Pending))
	}

	hold := make(chan struct{})
	f.readHold.Store(&hold)
	before := readsSoFar(f)
	first := make(chan error, 1)
	go func() { _, err := p.Turn(context.Background(), "ray"); first <- err }()
	eventually(t, "the first turn's round has read every fact", func() bool { return readsSoFar(f) >= before+4 })
	f.publishSilently(wb, "Full weight-bearing as tolerated.") // v2; nobody is told
	type answer struct {
		s   models.Snapshot
		err error
	}
	second := make(chan answer, 1)
	go func() { // asks while the first round's answers are in flight
		s, err := p.Turn(context.Background(), "ray")
		second <- answer{s, err}
	}()
	time.Sleep(50 * time.Millisecond) // let it ask (if it wrongly joined the round under way, it would speak v1)
	f.readHold.Store(nil)
	close(hold)
	a := <-second
	s, err := a.s, a.err
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Pending) != 1 || !s.Pending[0].IsRetraction() || s.Pending[0].Current.N != 2 {
		t.Fatalf("pending = %+v, want the retraction v1 → v2 found by a round that began after the turn asked", s.Pending)
	}
	if v, _ := factOf(s, "weight_bearing"); v.N != 2 {
		t.Fatalf("walking confirmed at v%d, want v2", v.N)
	}
	if err := <-first; err != nil {
		t.Fatal(err)
	}
}

// Turns that ask at the same moment share rounds: twenty concurrent turns
// cost a few rounds of four reads, not twenty, and every one of them is
// answered with the four facts confirmed.
func TestTurn_ConcurrentTurnsShareRoundsOfReads(t *testing.T) {
	f := newFakeCare(t)
	seedRay(f)
	p := startPrincipal(t, f, newTestDB(t), "ray")
	waitConnected(t, p)
	hearAll(t, p, "ray")
	f.readDelay.Store(int64(100 * time.Millisecond))
	before := readsSoFar(f)
	const turns = 20
	var wg sync.WaitGroup
	errs := make(chan error, turns)
	for range turns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := p.Turn(context.Background(), "ray")
			if err == nil && len(s.Facts) != 4 {
				t.Errorf("a turn was confirmed %d facts, want 4", len(s.Facts))
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	reads := readsSoFar(f) - before
	if reads > 3*4 || reads < 4 {
		t.Fatalf("%d concurrent turns made %d reads; want them to share at most three rounds of 4", turns, reads)
	}
}
