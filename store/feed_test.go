package store

import (
	"context"
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
			if _, err := s.Publish(context.Background(), writer, in("exercise", models.AudienceUser, "x")); err != nil {
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
