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
