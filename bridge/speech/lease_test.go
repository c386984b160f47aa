package speech

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// leaseRing stands for the store's leases: each instance's competition
// registers, and the test decides who holds the lease (grant), as expiry
// and renewal would.
type leaseRing struct {
	mu     sync.Mutex
	won    map[string]func() // instance → its competition's won
	lost   map[string]func()
	holder string
	leases []string // the lease names competed for
	gaveUp []string // instances whose competition ended holding the lease
}

func newLeaseRing() *leaseRing {
	return &leaseRing{won: map[string]func(){}, lost: map[string]func(){}}
}

func (r *leaseRing) compete(id string) CompeteFunc {
	return func(ctx context.Context, lease string, ttl time.Duration, won, lost func()) error {
		r.mu.Lock()
		r.won[id], r.lost[id] = won, lost
		r.leases = append(r.leases, lease+"/"+ttl.String())
		r.mu.Unlock()
		<-ctx.Done()
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.holder == id {
			r.holder = ""
			r.gaveUp = append(r.gaveUp, id)
			lost()
		}
		return nil
	}
}

// grant hands the lease to id: the holder before loses it, id wins it.
func (r *leaseRing) grant(t *testing.T, id string) {
	t.Helper()
	eventually(t, id+" to compete", func() bool { r.mu.Lock(); defer r.mu.Unlock(); return r.won[id] != nil })
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.holder != "" && r.holder != id {
		r.lost[r.holder]()
	}
	r.holder = id
	r.won[id]()
}

// startLeased runs a competing principal over the ledger database db for ray, counting OnQueued calls.
func startLeased(t *testing.T, f *fakeCare, db *memDB, ring *leaseRing, id string, told *atomic.Int32) *testPrincipal {
	t.Helper()
	pr, err := New(Config{MCPURL: f.url(), Token: f.clientToken, Patients: []string{"ray"}, Ledger: openDB(t, db), Compete: ring.compete(id),
		Backoff: Backoff{Min: 20 * time.Millisecond, Max: 200 * time.Millisecond}, RequestTimeout: 5 * time.Second, KeepAlive: f.keepAlive})
	if err != nil {
		t.Fatal(err)
	}
	pr.OnQueued(func(string) { told.Add(1) })
	ctx, cancel := context.WithCancel(context.Background())
	p := &testPrincipal{Principal: pr, cancel: cancel, done: make(chan error, 1)}
	go func() { p.done <- pr.Run(ctx) }()
	t.Cleanup(p.stop)
	waitConnected(t, p)
	return p
}

func TestLeased_EveryInstanceQueuesOnceButOnlyTheSpeakerTellsRayUnasked(t *testing.T) {
	f := newFakeCare(t)
	seedRay(f)
	db := newTestDB(t)
	ring := newLeaseRing()
	var toldA, toldB atomic.Int32
	a := startLeased(t, f, db, ring, "a", &toldA)
	b := startLeased(t, f, db, ring, "b", &toldB)
	if got := a.SpeaksFor(); len(got) != 0 {
		t.Fatalf("a competing principal speaks for %v before winning a lease", got)
	}
	ring.grant(t, "a")
	if got := a.SpeaksFor(); !slices.Equal(got, []string{"ray"}) {
		t.Fatalf("a speaks for %v after winning Ray's lease", got)
	}
	ring.mu.Lock()
	if want := []string{SpeakerLease("ray") + "/" + SpeakerLeaseTTL.String()}; !slices.Equal(ring.leases, append(want, want...)) {
		t.Errorf("competed for %v, want Ray's speaker lease once per instance", ring.leases)
	}
	ring.mu.Unlock()
	hearAll(t, b, "ray") // Ray hears everything through instance b's skill

	n := f.publish(wb, "Full weight-bearing as tolerated.")
	waitPending(t, a, wb, n)
	eventually(t, "b to see the announcement", func() bool { return len(pendingOf(t, b, "ray")) == 1 })
	// WaitPending returns once either instance's commit is visible; a tells
	// OnQueued after its own reconcile, which may come later (b may commit
	// first under load).
	eventually(t, "a to tell Ray unasked", func() bool { return toldA.Load() >= 1 })
	if toldA.Load() != 1 || toldB.Load() != 0 {
		t.Fatalf("OnQueued told a %d and b %d times, want 1 and 0", toldA.Load(), toldB.Load())
	}

	// The speaker dies (its lease lapses): a revision while nobody speaks is
	// still queued — once — by the survivor, so Ray's next turn withdraws it.
	a.stop()
	ring.mu.Lock()
	if !slices.Equal(ring.gaveUp, []string{"a"}) {
		t.Errorf("competitions that gave the lease up when Run ended: %v, want a's", ring.gaveUp)
	}
	ring.mu.Unlock()
	n2 := f.publish(wb, "Toe-touch weight-bearing only.")
	waitPending(t, b, wb, n2)
	as := pendingOf(t, b, "ray")
	if len(as) != 1 || as[0].Current.N != n2 || as[0].Heard == nil {
		t.Fatalf("with no speaker pending = %+v, want ONE retraction reaching v%d", as, n2)
	}
	if toldB.Load() != 0 {
		t.Fatalf("b told Ray unasked %d times without the lease", toldB.Load())
	}
	// b takes the lease: nothing is queued twice, and later news is told.
	ring.grant(t, "b")
	n3 := f.publish(wb, "Full weight-bearing again.")
	waitPending(t, b, wb, n3)
	if as := pendingOf(t, b, "ray"); len(as) != 1 || as[0].Current.N != n3 {
		t.Fatalf("after the takeover pending = %+v, want ONE retraction reaching v%d", as, n3)
	}
	// The commit WaitPending sees comes just before b tells OnQueued.
	eventually(t, "b to tell Ray unasked", func() bool { return toldB.Load() >= 1 })
	if toldB.Load() != 1 {
		t.Fatalf("b told %d times after taking over, want 1", toldB.Load())
	}
}
