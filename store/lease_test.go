package store

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Lease tests run on SQLite and, in the Postgres pass, on Postgres.

func TestLease_OneHolderAtATimeUntilItExpires(t *testing.T) {
	clock := newClock()
	s, _ := openTest(t, clock)
	ctx := context.Background()
	const name, ttl = "speech/ray", 10 * time.Second
	if ok, err := s.AcquireLease(ctx, name, "a", ttl); err != nil || !ok {
		t.Fatalf("a acquires a free lease = %v, %v; want true", ok, err)
	}
	if ok, err := s.AcquireLease(ctx, name, "b", ttl); err != nil || ok {
		t.Fatalf("b acquires a's live lease = %v, %v; want false", ok, err)
	}
	holder, exp, err := s.LeaseHolder(ctx, name)
	if err != nil || holder != "a" || !exp.Equal(clock.Now().Add(ttl).Truncate(time.Millisecond)) {
		t.Fatalf("LeaseHolder = %q, %v, %v; want a until now+ttl", holder, exp, err)
	}
	clock.Advance(ttl - time.Millisecond)
	if ok, _ := s.AcquireLease(ctx, name, "b", ttl); ok {
		t.Fatal("b took the lease 1 ms before it expired")
	}
	clock.Advance(time.Millisecond)
	if holder, _, _ := s.LeaseHolder(ctx, name); holder != "" {
		t.Fatalf("an expired lease still has holder %q", holder)
	}
	if ok, err := s.AcquireLease(ctx, name, "b", ttl); err != nil || !ok {
		t.Fatalf("b acquires the expired lease = %v, %v; want true", ok, err)
	}
	if ok, err := s.RenewLease(ctx, name, "a", ttl); err != nil || ok {
		t.Fatalf("a renews a lease b took = %v, %v; want false", ok, err)
	}
	if holder, _, _ := s.LeaseHolder(ctx, name); holder != "b" {
		t.Fatalf("holder = %q, want b", holder)
	}
}

func TestLease_RenewExtendsOnlyTheHoldersLiveLease(t *testing.T) {
	clock := newClock()
	s, _ := openTest(t, clock)
	ctx := context.Background()
	const name, ttl = "speech/ray", 10 * time.Second
	if ok, _ := s.AcquireLease(ctx, name, "a", ttl); !ok {
		t.Fatal("acquire")
	}
	clock.Advance(ttl / 2)
	if ok, err := s.RenewLease(ctx, name, "a", ttl); err != nil || !ok {
		t.Fatalf("holder renews = %v, %v; want true", ok, err)
	}
	clock.Advance(ttl - time.Millisecond) // past the first expiry, before the renewed one
	if holder, _, _ := s.LeaseHolder(ctx, name); holder != "a" {
		t.Fatalf("after renewal holder = %q, want a", holder)
	}
	if ok, _ := s.RenewLease(ctx, name, "b", ttl); ok {
		t.Fatal("a non-holder renewed the lease")
	}
	clock.Advance(time.Millisecond)
	if ok, err := s.RenewLease(ctx, name, "a", ttl); err != nil || ok {
		t.Fatalf("holder renews an expired lease = %v, %v; want false (treat it as lost)", ok, err)
	}
	if ok, _ := s.AcquireLease(ctx, name, "a", ttl); !ok {
		t.Fatal("the former holder cannot re-acquire a free lease")
	}
}

func TestLease_ReleaseFreesItAtOnceAndOnlyForTheHolder(t *testing.T) {
	s, _ := openTest(t, newClock())
	ctx := context.Background()
	const name, ttl = "speech/ray", 10 * time.Second
	s.AcquireLease(ctx, name, "a", ttl)
	if err := s.ReleaseLease(ctx, name, "b"); err != nil {
		t.Fatal(err)
	}
	if holder, _, _ := s.LeaseHolder(ctx, name); holder != "a" {
		t.Fatalf("a non-holder's release freed the lease (holder %q)", holder)
	}
	if err := s.ReleaseLease(ctx, name, "a"); err != nil {
		t.Fatal(err)
	}
	if ok, _ := s.AcquireLease(ctx, name, "b", ttl); !ok {
		t.Fatal("a released lease was not free at once")
	}
}

func TestLease_BadInputIsRefusedAndWritesNothing(t *testing.T) {
	s, _ := openTest(t, newClock())
	ctx := context.Background()
	long := string(make([]byte, 257))
	for _, tc := range []struct {
		name, holder string
		ttl          time.Duration
	}{
		{"", "a", time.Second}, {"n", "", time.Second}, {"n", "a", 0}, {"n", "a", -time.Second}, {long, "a", time.Second}, {"n", long, time.Second},
	} {
		if ok, err := s.AcquireLease(ctx, tc.name, tc.holder, tc.ttl); ok || !errors.Is(err, ErrLeaseInput) || !errors.Is(err, ErrInvalid) {
			t.Errorf("AcquireLease(%.8q, %.8q, %v) = %v, %v; want ErrLeaseInput", tc.name, tc.holder, tc.ttl, ok, err)
		}
	}
	if holder, _, _ := s.LeaseHolder(ctx, "n"); holder != "" {
		t.Fatalf("a refused acquire left holder %q", holder)
	}
	if ok, err := s.AcquireLease(ctx, "n", "a", time.Second); !ok || err != nil {
		t.Fatalf("valid AcquireLease = %v, %v", ok, err)
	}
}

// Of many instances racing for a free lease, exactly one wins. On the
// Postgres pass the racers use two Store handles (two instances).
func TestLease_RacingAcquirersExactlyOneWins(t *testing.T) {
	clock := newClock()
	a, dsn := openTest(t, clock)
	b, err := Open(context.Background(), Options{DSN: dsn, AuditKey: []byte("test-audit-key"), Clock: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	for round := range 5 {
		name := "speech/p" + string(rune('a'+round))
		var wins atomic.Int32
		var wg sync.WaitGroup
		for i := range 8 {
			s := a
			if i%2 == 1 {
				s = b
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				ok, err := s.AcquireLease(context.Background(), name, "holder"+string(rune('0'+i)), 10*time.Second)
				if err != nil {
					t.Error(err)
				}
				if ok {
					wins.Add(1)
				}
			}()
		}
		wg.Wait()
		if n := wins.Load(); n != 1 {
			t.Fatalf("round %d: %d racers acquired the lease, want exactly 1", round, n)
		}
	}
}

// A LeaseKeeper on a dead instance (its store gone, so it can no longer
// renew) loses the lease, and a keeper on another instance takes it within
// 15 s; the keeper that holds it reports it in Held.
func TestLeaseKeeper_HandsOverWhenTheHolderDies(t *testing.T) {
	a, dsn := openTest(t, nil)
	b, err := Open(context.Background(), Options{DSN: dsn, AuditKey: []byte("test-audit-key")})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	const ttl = 600 * time.Millisecond
	names := []string{"speech/ray", "speech/sue"}
	events := make(chan string, 16)
	ka := &LeaseKeeper{Store: a, Holder: "instance-a", TTL: ttl}
	kb := &LeaseKeeper{Store: b, Holder: "instance-b", TTL: ttl}
	ctxA, stopA := context.WithCancel(context.Background())
	defer stopA()
	doneA := make(chan error, 1)
	go func() {
		doneA <- ka.Run(ctxA, names, func(n string) { events <- "a+" + n }, func(n string) { events <- "a-" + n })
	}()
	for range names {
		if e := <-events; e[:2] != "a+" {
			t.Fatalf("first event %q, want a acquiring", e)
		}
	}
	if got := ka.Held(); len(got) != 2 {
		t.Fatalf("a holds %v, want both", got)
	}
	ctxB, stopB := context.WithCancel(context.Background())
	defer stopB()
	doneB := make(chan error, 1)
	go func() {
		doneB <- kb.Run(ctxB, names, func(n string) { events <- "b+" + n }, func(n string) { events <- "b-" + n })
	}()
	time.Sleep(2 * ttl)
	if got := kb.Held(); len(got) != 0 {
		t.Fatalf("b holds %v while a is alive and renewing", got)
	}
	a.Close() // instance a dies: its keeper can no longer renew
	died := time.Now()
	gained, lost := map[string]bool{}, map[string]bool{}
	deadline := time.After(15 * time.Second)
	for len(gained) < 2 || len(lost) < 2 {
		select {
		case e := <-events:
			switch e[:2] {
			case "b+":
				gained[e[2:]] = true
			case "a-":
				lost[e[2:]] = true
			default:
				t.Fatalf("unexpected event %q", e)
			}
		case <-deadline:
			t.Fatalf("15 s after a died: b gained %v, a lost %v", gained, lost)
		}
	}
	t.Logf("handover of 2 leases took %v (ttl %v)", time.Since(died).Round(time.Millisecond), ttl)
	if got := kb.Held(); len(got) != 2 {
		t.Fatalf("b holds %v, want both", got)
	}
	if got := ka.Held(); len(got) != 0 {
		t.Fatalf("dead a still believes it holds %v", got)
	}
	stopB()
	if err := <-doneB; err != nil {
		t.Fatal(err)
	}
	if holder, _, _ := b.LeaseHolder(context.Background(), names[0]); holder != "" {
		t.Fatalf("after b stopped, the lease is still held by %q (want released)", holder)
	}
	stopA()
	<-doneA
}

func TestLeaseKeeper_RefusesAnUnusableKeeper(t *testing.T) {
	s, _ := openTest(t, nil)
	for _, k := range []*LeaseKeeper{{Holder: "a", TTL: time.Second}, {Store: s, TTL: time.Second}, {Store: s, Holder: "a"}} {
		if err := k.Run(context.Background(), []string{"x"}, nil, nil); !errors.Is(err, ErrLeaseInput) {
			t.Errorf("Run(%+v) = %v, want ErrLeaseInput", k, err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	ok := &LeaseKeeper{Store: s, Holder: "a", TTL: time.Second}
	if err := ok.Run(ctx, []string{"x"}, nil, nil); err != nil {
		t.Fatalf("a usable keeper: %v", err)
	}
}
