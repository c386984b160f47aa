package speech

import (
	"context"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/unsay/unsay/models"
)

func readsSoFar(f *fakeCare) int {
	reads, _ := f.recorded()
	return len(reads)
}

// listsSoFar counts the whole lists the fake has begun serving.
func listsSoFar(f *fakeCare) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lists
}

// nextRoundWaits reports whether a turn of patient waits for the round
// after the one under way (confirmCurrent made it for that turn).
func nextRoundWaits(p *testPrincipal, patient string) bool {
	c := &p.rounds
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.next[patient] != nil
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
	before := listsSoFar(f)
	first := make(chan error, 1)
	go func() { _, err := p.Turn(context.Background(), "ray"); first <- err }()
	eventually(t, "the first turn's round has begun listing the facts", func() bool { return listsSoFar(f) >= before+1 })
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
	// It has asked once it waits for the next round (had it wrongly joined
	// the round under way, it would speak v1).
	eventually(t, "the second turn waits for the next round", func() bool { return nextRoundWaits(p, "ray") })
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
// cost a few rounds, not twenty, and every one of them is answered with the
// four facts confirmed — whether a round confirms from the list's
// description of each version (the bridge: one list, no reads) or by
// reading every fact (a server that does not describe them).
func TestTurn_ConcurrentTurnsShareRoundsOfReads(t *testing.T) {
	for _, described := range []bool{true, false} {
		t.Run(map[bool]string{true: "described list", false: "undescribed list"}[described], func(t *testing.T) {
			f := newFakeCare(t)
			f.undescribedList.Store(!described)
			seedRay(f)
			p := startPrincipal(t, f, newTestDB(t), "ray")
			waitConnected(t, p)
			hearAll(t, p, "ray")
			f.readDelay.Store(int64(100 * time.Millisecond))
			reads0, lists0 := readsSoFar(f), listsSoFar(f)
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
			reads, rounds := readsSoFar(f)-reads0, listsSoFar(f)-lists0
			if rounds > 3 || rounds < 1 {
				t.Fatalf("%d concurrent turns made %d rounds; want them to share at most three", turns, rounds)
			}
			if want := map[bool]int{true: 0, false: 4 * rounds}[described]; reads != want {
				t.Fatalf("%d rounds made %d reads; want %d", rounds, reads, want)
			}
		})
	}
}

// readsOf counts the fake's reads of uri (any version).
func readsOf(f *fakeCare, uri string) int {
	reads, _ := f.recorded()
	n := 0
	for _, r := range reads {
		if r == uri || strings.HasPrefix(r, uri+"/v") {
			n++
		}
	}
	return n
}

// P-24 from a described list: a fact held at the listed version and hash is
// confirmed without a read, and carries the list's judgement of its review
// date at speak time — a review date that passes between two turns is said
// in the second, and one that has not passed is not.
func TestTurn_AListedVersionHeldIsConfirmedWithTheListsStaleness(t *testing.T) {
	f := newFakeCare(t)
	seedRay(f)
	p := startPrincipal(t, f, newTestDB(t), "ray")
	waitConnected(t, p)
	hearAll(t, p, "ray")
	now := time.Now()
	if v, _ := factOf(turnOf(t, p, "ray"), "weight_bearing"); v.IsStale(now) {
		t.Fatalf("walking stale before its review date: %+v", v)
	}
	before := readsOf(f, wb)
	f.setStale(wb, true)
	s := turnOf(t, p, "ray")
	if v, ok := factOf(s, "weight_bearing"); !ok || !v.IsStale(now) || v.N != 1 {
		t.Fatalf("walking after its review date passed = %+v, want v1 stale", v)
	}
	if c, _ := factOf(s, "contact"); c.IsStale(now) {
		t.Fatalf("contact stale too: %+v", c)
	}
	if n := readsOf(f, wb) - before; n != 0 {
		t.Fatalf("walking read %d times to confirm a version held; want 0 (the list describes it)", n)
	}
}

// The twin: a list entry that describes another version — or the same
// version number with other words (another hash: a server restored from
// elsewhere) — is not confirmation; the fact is read afresh, and what is
// confirmed is what the read served.
func TestTurn_AListedVersionNotHeldIsReadAfresh(t *testing.T) {
	f := newFakeCare(t)
	seedRay(f)
	p := startPrincipal(t, f, newTestDB(t), "ray")
	waitConnected(t, p)
	hearAll(t, p, "ray")

	before := readsOf(f, wb)
	f.mu.Lock()
	f.facts[wb][0].value = "Non-weight-bearing for six weeks." // v1, other words
	f.mu.Unlock()
	if v, _ := factOf(turnOf(t, p, "ray"), "weight_bearing"); v.Value != "Non-weight-bearing for six weeks." {
		t.Fatalf("walking confirmed as %q, want the words the server serves now", v.Value)
	}
	if readsOf(f, wb) == before {
		t.Fatal("a version whose hash changed was confirmed without a read")
	}

	f.publishSilently(wb, "Full weight-bearing as tolerated.") // v2; nobody is told
	s := turnOf(t, p, "ray")
	if v, _ := factOf(s, "weight_bearing"); v.N != 2 {
		t.Fatalf("walking confirmed at v%d, want v2", v.N)
	}
	if len(s.Pending) != 1 || s.Pending[0].Current.N != 2 {
		t.Fatalf("pending = %+v, want the announcement of v2", s.Pending)
	}
}

// An audio fact confirmed from a list keeps a signed URL Alexa can still
// fetch: one that ends within audioURLMargin is read afresh instead.
func TestAudioURLLasts(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	clip := func(url string, expires time.Time) models.Version {
		return models.Version{Audio: &models.Audio{URL: url, URLExpires: expires}}
	}
	tests := []struct {
		name string
		v    models.Version
		want bool
	}{
		{"no audio", models.Version{}, true},
		{"audio without a URL (not Alexa-playable over http)", clip("", time.Time{}), true},
		{"URL served for five more minutes", clip("https://x/audio/t", now.Add(5*time.Minute)), true},
		{"URL served for exactly the margin", clip("https://x/audio/t", now.Add(audioURLMargin)), true},
		{"URL ending in 30 s", clip("https://x/audio/t", now.Add(30*time.Second)), false},
		{"URL already ended", clip("https://x/audio/t", now.Add(-time.Second)), false},
	}
	for _, tt := range tests {
		if got := audioURLLasts(tt.v, now); got != tt.want {
			t.Errorf("%s: audioURLLasts = %v, want %v", tt.name, got, tt.want)
		}
	}
}

// Snapshot.Heard is what the ledger says he heard when Turn returns: an
// announcement the turn drops because its words did not change (Drop:
// heard moves to its to_version) is reflected in it, so the skill's
// not-played marks start from what he heard for certain.
func TestTurn_HeardIsWhatTheLedgerHoldsWhenItReturnsEvenAfterADrop(t *testing.T) {
	f := newFakeCare(t)
	seedRay(f)
	p := startPrincipal(t, f, newTestDB(t), "ray")
	waitConnected(t, p)
	hearAll(t, p, "ray")
	u, _ := models.ParseURI(wb)
	f.publishSilently(wb, "Partial weight-bearing with crutches.") // v2, the same words (a review-date refresh)
	turnOf(t, p, "ray")                                            // settles: heard v2
	// Alexa did not play a response that told v2 when he had heard v1:
	// heard back to v1, v2 offered, 1 → 2 owed again (same words).
	if n, err := p.NotPlayed(context.Background(), "ray", []models.Marked{{URI: u, HeardBefore: 1, From: 1, Version: 2}}); err != nil || n != 1 {
		t.Fatalf("NotPlayed = %d, %v; want the one fact re-opened", n, err) // the count the skill logs (T14)
	}
	s := turnOf(t, p, "ray") // renders 1 → 2: ErrUnchanged, dropped: heard v2
	if len(s.Pending) != 0 {
		t.Fatalf("pending = %+v, want the unchanged announcement dropped", s.Pending)
	}
	h, err := p.ledger.Heard(context.Background(), "ray", wb)
	if err != nil {
		t.Fatal(err)
	}
	if s.Heard[u] != h {
		t.Fatalf("Snapshot.Heard[%s] = v%d, but the ledger says he heard v%d when Turn returned", wb, s.Heard[u], h)
	}
}

// Issue 17: a round's connections are kept for the next round. The SDK
// hands a result over before it has read the end of its response; ending
// the round's context at once closed each such connection, so every round
// dialled anew. Here every response's end comes 20 ms after its answer:
// quiet turns, one after another, dial nothing after the first, and each
// is still confirmed by its own round (lists begun, facts current).
func TestTurn_QuietTurnsReuseTheRoundsConnections(t *testing.T) {
	f := newDualFakeCare(t)
	seedRay(f)
	var dials atomic.Int64
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 32 // as bridge/app's speech transport
	dial := tr.DialContext
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		dials.Add(1)
		return dial(ctx, network, addr)
	}
	p, err := New(Config{MCPURL: f.url(), Token: f.clientToken, Patients: []string{"ray"}, Ledger: openDB(t, newTestDB(t)),
		Backoff: Backoff{Min: 20 * time.Millisecond, Max: 200 * time.Millisecond}, RequestTimeout: 5 * time.Second,
		KeepAlive: -1, HTTPClient: &http.Client{Transport: tr}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	tp := &testPrincipal{Principal: p}
	waitConnected(t, tp)
	hearAll(t, tp, "ray")
	f.endHold.Store(int64(20 * time.Millisecond))
	turnOf(t, tp, "ray") // the round's connections exist
	time.Sleep(100 * time.Millisecond)
	before, lists := dials.Load(), listsSoFar(f)
	const turns = 10
	for range turns {
		s := turnOf(t, tp, "ray")
		if len(s.Facts) == 0 || len(s.Pending) != 0 {
			t.Fatalf("quiet turn = %+v", s)
		}
		time.Sleep(50 * time.Millisecond) // the last response's end has come
	}
	if got := listsSoFar(f) - lists; got != turns {
		t.Errorf("%d turns began %d lists, want one each", turns, got)
	}
	if got := dials.Load() - before; got > 1 {
		t.Errorf("%d quiet turns dialled %d connections, want their rounds' connections reused", turns, got)
	}
}
