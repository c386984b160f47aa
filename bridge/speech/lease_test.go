package speech

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

// startLeased runs a Leased principal over db for ray, counting OnQueued calls.
func startLeased(t *testing.T, f *fakeCare, path string, told *atomic.Int32) *testPrincipal {
	t.Helper()
	db := openDB(t, path)
	pr, err := New(Config{MCPURL: f.url(), Token: f.clientToken, Patients: []string{"ray"}, DB: db, Leased: true,
		Backoff: Backoff{Min: 20 * time.Millisecond, Max: 200 * time.Millisecond}, RequestTimeout: 5 * time.Second, KeepAlive: f.keepAlive})
	if err != nil {
		t.Fatal(err)
	}
	pr.OnQueued(func(string) { told.Add(1) })
	ctx, cancel := context.WithCancel(context.Background())
	p := &testPrincipal{Principal: pr, db: db, cancel: cancel, done: make(chan error, 1)}
	go func() { p.done <- pr.Run(ctx) }()
	t.Cleanup(p.stop)
	waitConnected(t, p)
	return p
}

func TestLeased_EveryInstanceQueuesOnceButOnlyTheSpeakerTellsRayUnasked(t *testing.T) {
	f := newFakeCare(t)
	seedRay(f)
	path := tempDBPath(t)
	var toldA, toldB atomic.Int32
	a := startLeased(t, f, path, &toldA)
	b := startLeased(t, f, path, &toldB)
	if got := a.Speaking(); len(got) != 0 {
		t.Fatalf("a Leased principal speaks for %v before taking a lease", got)
	}
	if err := a.SetSpeaking("ray", true); err != nil {
		t.Fatal(err)
	}
	hearAll(t, b, "ray") // Ray hears everything through instance b's skill

	n := f.publish(wb, "Full weight-bearing as tolerated.")
	waitPending(t, a, wb, n)
	eventually(t, "b to see the announcement", func() bool { return len(pendingOf(t, b, "ray")) == 1 })
	if toldA.Load() != 1 || toldB.Load() != 0 {
		t.Fatalf("OnQueued told a %d and b %d times, want 1 and 0", toldA.Load(), toldB.Load())
	}

	// The speaker dies (its lease lapses): a revision while nobody speaks is
	// still queued — once — by the survivor, so Ray's next turn withdraws it.
	a.stop()
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
	if err := b.SetSpeaking("ray", true); err != nil {
		t.Fatal(err)
	}
	n3 := f.publish(wb, "Full weight-bearing again.")
	waitPending(t, b, wb, n3)
	if as := pendingOf(t, b, "ray"); len(as) != 1 || as[0].Current.N != n3 {
		t.Fatalf("after the takeover pending = %+v, want ONE retraction reaching v%d", as, n3)
	}
	if toldB.Load() != 1 {
		t.Fatalf("b told %d times after taking over, want 1", toldB.Load())
	}
}
