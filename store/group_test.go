package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"

	"github.com/unsay/unsay/models"
)

// Concurrent Publishes commit in shared transactions (group commit); each
// is decided as it would be alone. 24 writers over 12 facts — two per
// fact, so same-fact writers queue while other facts' writes group —
// every write carrying an idempotency key and an audit entry, each key
// sent twice, and writers trying to turn a user fact into an assistant
// one: afterwards every fact's versions run 1…n with each acknowledged
// write present once, the change feed's sequence numbers run 1…N without
// a gap, every replay answered the first write's version, every audience
// change was refused with nothing written, each accepted write has
// exactly one audit row, and every chain and the audit log verify.
func TestPublish_ConcurrentWritesCommitTogetherEachDecidedAsAlone(t *testing.T) {
	s, _ := openTest(t, nil)
	ctx := context.Background()
	const facts, perFact, writes = 12, 2, 15
	for f := range facts {
		mustPublish(t, s, writer, in("g"+strconv.Itoa(f), models.AudienceUser, "first"))
	}
	type ack struct {
		domain string
		n      int
		hash   string
	}
	var (
		mu        sync.Mutex
		acks      []ack
		refused   int
		replayBad []string
		wg        sync.WaitGroup
	)
	for f := range facts {
		for w := range perFact {
			wg.Add(1)
			go func() {
				defer wg.Done()
				domain := "g" + strconv.Itoa(f)
				for i := range writes {
					pi := in(domain, models.AudienceUser, fmt.Sprintf("writer %d revision %d", w, i))
					pi.IdempotencyKey = fmt.Sprintf("key-%d-%d-%d", f, w, i)
					pi.Audit = &AuditEntry{Actor: "hmac", Via: "hmac", Author: "okafor"}
					r, err := s.Publish(ctx, writer, pi)
					if err != nil {
						t.Errorf("%s: %v", domain, err)
						return
					}
					again, err := s.Publish(ctx, writer, pi) // the same signed request, replayed
					if err != nil || !again.Replayed || again.Version.N != r.Version.N || again.Version.Hash != r.Version.Hash {
						mu.Lock()
						replayBad = append(replayBad, fmt.Sprintf("%s v%d: replay %+v, %v", domain, r.Version.N, again.Version, err))
						mu.Unlock()
					}
					bad := in(domain, models.AudienceAssistant, "an audience change")
					if _, err := s.Publish(ctx, writer, bad); !errors.Is(err, ErrAudienceChange) {
						t.Errorf("%s: audience change: %v, want ErrAudienceChange", domain, err)
					}
					mu.Lock()
					acks = append(acks, ack{domain, r.Version.N, r.Version.Hash})
					refused++
					mu.Unlock()
				}
			}()
		}
	}
	wg.Wait()
	if len(replayBad) > 0 {
		t.Fatalf("%d replays not answered with the first write: %v", len(replayBad), replayBad[0])
	}
	if want := facts * perFact * writes; len(acks) != want || refused != want {
		t.Fatalf("%d acknowledged, %d refused; want %d of each", len(acks), refused, want)
	}
	byFact := map[string]map[int]string{}
	for _, a := range acks {
		if byFact[a.domain] == nil {
			byFact[a.domain] = map[int]string{}
		}
		if _, dup := byFact[a.domain][a.n]; dup {
			t.Fatalf("%s v%d acknowledged twice", a.domain, a.n)
		}
		byFact[a.domain][a.n] = a.hash
	}
	for f := range facts {
		uri := "care://ray/g" + strconv.Itoa(f)
		hist, err := s.History(ctx, userRay, uri)
		if err != nil {
			t.Fatal(err)
		}
		if len(hist) != 1+perFact*writes {
			t.Fatalf("%s has %d versions, want %d", uri, len(hist), 1+perFact*writes)
		}
		for i, v := range hist {
			if v.N != len(hist)-i && v.N != i+1 {
				t.Fatalf("%s: versions not contiguous at %d: v%d", uri, i, v.N)
			}
			if v.Audience != models.AudienceUser {
				t.Fatalf("%s v%d has audience %s", uri, v.N, v.Audience)
			}
			if h, ok := byFact["g"+strconv.Itoa(f)][v.N]; v.N > 1 && (!ok || h != v.Hash) {
				t.Fatalf("%s v%d: stored %s, acknowledged %q", uri, v.N, v.Hash, h)
			}
		}
		if r, err := s.Verify(ctx, userRay, uri); err != nil || !r.Intact {
			t.Fatalf("%s chain: %+v, %v", uri, r, err)
		}
	}
	changes, err := s.changesAfter(ctx, 0, 10000)
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range changes {
		if c.Seq != int64(i+1) {
			t.Fatalf("change %d has seq %d: the feed has a gap", i, c.Seq)
		}
	}
	rows, err := s.AuditRows(ctx, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	accepted := 0
	for _, e := range rows {
		if e.Outcome == OutcomeAccepted && e.Actor == "hmac" {
			accepted++
		}
	}
	if accepted != len(acks) {
		t.Fatalf("%d accepted audit rows for %d acknowledged writes", accepted, len(acks))
	}
	if v, err := s.VerifyAuditLog(ctx); err != nil || v.BadRow != 0 || v.Head == nil || !v.Head.Valid {
		t.Fatalf("audit log: %+v, %v", v, err)
	}
}

// TestPublish_AHeadKeptByThisStoreButMovedByAnotherIsPlannedAgain: a
// Publish plans against the head its store last committed (planCached)
// without reading it; when another store on the same database moved the
// fact meanwhile, the write is still chained to the real head, and a write
// that repeats the real head is still Unchanged.
func TestPublish_AHeadKeptByThisStoreButMovedByAnotherIsPlannedAgain(t *testing.T) {
	ctx := context.Background()
	s1, dsn := openTest(t, nil)
	s2, err := Open(ctx, Options{DSN: dsn, AuditKey: []byte("test-audit-key")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s2.Close() })
	mustPublish(t, s1, writer, in("weight_bearing", models.AudienceUser, "Partial weight-bearing."))
	v2 := mustPublish(t, s1, writer, in("weight_bearing", models.AudienceUser, "Full weight-bearing as tolerated."))
	if h, ok := s1.heads.Get([2]string{"ray", "weight_bearing"}); !ok || h.v.N != 2 || h.v.Hash != v2.Version.Hash {
		t.Fatalf("s1 keeps %+v, %v; want v2 %s", h.v, ok, v2.Version.Hash)
	}

	v3 := mustPublish(t, s2, writer, in("weight_bearing", models.AudienceUser, "No weight on the leg."))
	v4 := mustPublish(t, s1, writer, in("weight_bearing", models.AudienceUser, "Touch-down weight-bearing."))
	if v4.Version.N != 4 || v4.Version.PrevHash != v3.Version.Hash || v4.Unchanged {
		t.Fatalf("s1's write after s2's v3 = v%d chained to %s; want v4 chained to %s", v4.Version.N, v4.Version.PrevHash, v3.Version.Hash)
	}

	// s1 keeps v4; s2 writes v5; s1 repeats v5 exactly: s1's kept head
	// says it changes the fact, the head read under the lock says not.
	v5 := mustPublish(t, s2, writer, in("weight_bearing", models.AudienceUser, "Full weight-bearing as tolerated."))
	again := mustPublish(t, s1, writer, in("weight_bearing", models.AudienceUser, "Full weight-bearing as tolerated."))
	if !again.Unchanged || again.Version.N != 5 || again.Seq != v5.Seq {
		t.Fatalf("s1 repeating s2's v5 = %+v (unchanged %v, seq %d); want v5 unchanged, seq %d", again.Version, again.Unchanged, again.Seq, v5.Seq)
	}
	if _, ok := s1.heads.Get([2]string{"ray", "weight_bearing"}); ok {
		t.Fatal("s1 still keeps the head s2 moved")
	}
	// Positive twin: unmoved, the head s1 keeps (v6) is the one its next write (v7) chains to.
	v6 := mustPublish(t, s1, writer, in("weight_bearing", models.AudienceUser, "Partial weight-bearing."))
	if v6.Version.N != 6 || v6.Version.PrevHash != v5.Version.Hash {
		t.Fatalf("next write = v%d chained to %s; want v6 chained to %s", v6.Version.N, v6.Version.PrevHash, v5.Version.Hash)
	}
	if h, ok := s1.heads.Get([2]string{"ray", "weight_bearing"}); !ok || h.v.Hash != v6.Version.Hash {
		t.Fatalf("s1 keeps %+v, %v; want v6", h.v, ok)
	}
	if v7 := mustPublish(t, s1, writer, in("weight_bearing", models.AudienceUser, "Touch-down weight-bearing.")); v7.Version.N != 7 || v7.Version.PrevHash != v6.Version.Hash {
		t.Fatalf("next write = v%d chained to %s; want v7 chained to %s", v7.Version.N, v7.Version.PrevHash, v6.Version.Hash)
	}
	if err := s1.CheckStartup(ctx); err != nil {
		t.Fatalf("the chain after writes from two stores: %v", err)
	}
}
