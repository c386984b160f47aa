package store

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/unsay/unsay/models"
)

func TestWatch_DeliversEveryCommitInOrderWithGapFreeSeq(t *testing.T) {
	s, _ := openTest(t, newClock())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	start, err := s.LastSeq(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ch := s.Watch(ctx, start)
	mustPublish(t, s, writer, in("weight_bearing", models.AudienceUser, "a"))
	mustPublish(t, s, writer, in("risk", models.AudienceAssistant, "b"))
	mustPublish(t, s, writer, in("weight_bearing", models.AudienceUser, "c"))
	want := []struct {
		uri     string
		n       int
		created bool
	}{
		{"care://ray/weight_bearing", 1, true},
		{"care-internal://ray/risk", 1, true},
		{"care://ray/weight_bearing", 2, false},
	}
	for i, w := range want {
		select {
		case c := <-ch:
			if c.Seq != start+int64(i)+1 || c.URI.String() != w.uri || c.Version != w.n || c.Created != w.created {
				t.Fatalf("change %d = %+v, want seq %d %s v%d created=%v", i, c, start+int64(i)+1, w.uri, w.n, w.created)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("change %d not delivered", i)
		}
	}
	cancel()
	for range ch { // the channel closes when ctx ends
	}
}

func TestWatch_SlowWatcherNeverBlocksPublishAndMissesNothing(t *testing.T) {
	s, _ := openTest(t, newClock())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch := s.Watch(ctx, 0) // never read until all writes are done
	done := make(chan struct{})
	go func() {
		for i := 0; i < 50; i++ {
			if _, err := s.Publish(context.Background(), writer, in("exercise", models.AudienceUser, fmt.Sprintf("x%d", i))); err != nil {
				t.Error(err)
			}
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("Publish blocked behind a watcher that is not reading")
	}
	for i := 1; i <= 50; i++ {
		select {
		case c := <-ch:
			if c.Seq != int64(i) || c.Version != i {
				t.Fatalf("change = %+v, want seq %d v%d", c, i, i)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("change %d not delivered", i)
		}
	}
}

func TestWatch_ResumesAfterAGivenSeqAndClosesWithTheStore(t *testing.T) {
	s, _ := openTest(t, newClock())
	for _, d := range []string{"a", "b", "c"} {
		mustPublish(t, s, writer, in(d, models.AudienceUser, "x"))
	}
	ch := s.Watch(context.Background(), 2)
	select {
	case c := <-ch:
		if c.Seq != 3 || c.URI.Domain != "c" {
			t.Fatalf("first change after seq 2 = %+v, want seq 3 (c)", c)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no change after seq 2")
	}
	s.Close()
	select {
	case _, open := <-ch:
		if open {
			t.Fatal("a change arrived after Close")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Watch channel not closed by Close")
	}
}

func TestSince_ReturnsOnlyVersionsStrictlyAfterT(t *testing.T) {
	clock := newClock()
	s, _ := openTest(t, clock)
	first := mustPublish(t, s, writer, in("a", models.AudienceUser, "x"))
	clock.Advance(time.Second)
	second := mustPublish(t, s, writer, in("b", models.AudienceUser, "y"))
	got, err := s.Since(context.Background(), userRay, first.Version.WrittenAt)
	if err != nil || len(got) != 1 || got[0].Hash != second.Version.Hash {
		t.Fatalf("Since(first.WrittenAt) = %+v, %v; want only the second", got, err)
	}
	all, _ := s.Since(context.Background(), userRay, first.Version.WrittenAt.Add(-time.Millisecond))
	if len(all) != 2 || all[0].Domain != "a" {
		t.Fatalf("Since(before first) = %+v, want both, oldest first", all)
	}
}
