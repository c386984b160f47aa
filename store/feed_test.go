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

// TestWatch_DeliversThisProcesssCommitsAsTheDatabaseHoldsThem: a commit of
// this process reaches the watchers from memory (feedCommitted, issue 17);
// each change so delivered is the one the versions table holds for its
// seq, field for field.
func TestWatch_DeliversThisProcesssCommitsAsTheDatabaseHoldsThem(t *testing.T) {
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
	stored, err := s.changesAfter(ctx, start, 10)
	if err != nil || len(stored) != 3 {
		t.Fatalf("changesAfter = %v, %v", stored, err)
	}
	for i, w := range stored {
		select {
		case c := <-ch:
			if c != w {
				t.Fatalf("change %d delivered as %+v, stored as %+v", i, c, w)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("change %d not delivered", i)
		}
	}
}

// TestWatch_ACommitOfAnotherProcessBetweenTwoOfOursIsDeliveredInOrder: the
// memory of this process's commits never hides one another process (or
// instance) made on the same database in between: the watcher delivers every seq once, in
// order, gap-free.
func TestWatch_ACommitOfAnotherProcessBetweenTwoOfOursIsDeliveredInOrder(t *testing.T) {
	s, path := openTest(t, newClock())
	other, err := Open(context.Background(), Options{DSN: path, AuditKey: []byte("test-audit-key")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	start, err := s.LastSeq(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ch := s.Watch(ctx, start)
	next := func(want int64, domain string) {
		t.Helper()
		select {
		case c := <-ch:
			if c.Seq != want || c.URI.Domain != domain {
				t.Fatalf("change = seq %d %s, want seq %d %s", c.Seq, c.URI.Domain, want, domain)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("seq %d not delivered", want)
		}
	}
	mustPublish(t, s, writer, in("a", models.AudienceUser, "x"))
	next(start+1, "a")
	mustPublish(t, other, writer, in("b", models.AudienceUser, "y")) // no wakeup here
	mustPublish(t, s, writer, in("c", models.AudienceUser, "z"))
	next(start+2, "b")
	next(start+3, "c")
}

// TestRecentFeed_HoldsOnlyAContiguousRunAndAnswersOnlyFromItsStart: the
// memory answers a cursor only when it holds the change right after it,
// starts again when a batch does not follow on from the last one, and
// keeps at least recentFeedSize changes and at most twice that.
func TestRecentFeed_HoldsOnlyAContiguousRunAndAnswersOnlyFromItsStart(t *testing.T) {
	seqs := func(cs []Change) (out []int64) {
		for _, c := range cs {
			out = append(out, c.Seq)
		}
		return out
	}
	run := func(from, to int64) (cs []Change) {
		for q := from; q <= to; q++ {
			cs = append(cs, Change{Seq: q})
		}
		return cs
	}
	var f recentFeed
	if _, ok := f.after(0, 10); ok {
		t.Fatal("an empty memory answered")
	}
	f.add(run(5, 7))
	for _, tc := range []struct {
		cursor int64
		ok     bool
		want   []int64
	}{
		{3, false, nil}, // seq 4 is not held: read the database
		{4, true, []int64{5, 6, 7}},
		{6, true, []int64{7}},
		{7, false, nil}, // nothing after: read the database
	} {
		got, ok := f.after(tc.cursor, 10)
		if ok != tc.ok || fmt.Sprint(seqs(got)) != fmt.Sprint(tc.want) {
			t.Errorf("after(%d) = %v, %v; want %v, %v", tc.cursor, seqs(got), ok, tc.want, tc.ok)
		}
	}
	if got, _ := f.after(4, 2); fmt.Sprint(seqs(got)) != "[5 6]" {
		t.Errorf("after(4) limited to 2 = %v", seqs(got))
	}
	f.add(run(9, 9)) // seq 8 was written elsewhere
	if _, ok := f.after(6, 10); ok {
		t.Error("a cursor before the gap answered from memory")
	}
	if got, ok := f.after(8, 10); !ok || fmt.Sprint(seqs(got)) != "[9]" {
		t.Errorf("after(8) = %v, %v; want [9]", seqs(got), ok)
	}
	for q := int64(10); q <= 10+3*recentFeedSize; q++ {
		f.add(run(q, q))
		if len(f.changes) > 2*recentFeedSize {
			t.Fatalf("holds %d changes, more than twice %d", len(f.changes), recentFeedSize)
		}
	}
	if last := f.changes[len(f.changes)-1].Seq; len(f.changes) < recentFeedSize || last != 10+3*recentFeedSize {
		t.Errorf("holds %d changes up to seq %d, want at least %d up to %d", len(f.changes), last, recentFeedSize, 10+3*recentFeedSize)
	}
}

// Issue 17, on Postgres: this process's own commits come back to its
// LISTEN connection as NOTIFY; they are not wakeups from elsewhere, so its
// watchers keep delivering them from memory — while another instance's
// commit on the same database still wakes them to read it.
func TestWatch_OnPostgresOurOwnNotifyIsNoForeignWakeupButAnotherInstancesIs(t *testing.T) {
	dsn := freshSchemaDSN(t) // NOTIFY is Postgres's: skips without UNSAY_TEST_POSTGRES
	s, other := openDSN(t, dsn), openDSN(t, dsn)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	start, err := s.LastSeq(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ch := s.Watch(ctx, start)
	foreign := func() uint64 {
		s.wakeMu.Lock()
		defer s.wakeMu.Unlock()
		return s.feed.foreign
	}
	next := func(want int64) {
		t.Helper()
		select {
		case c := <-ch:
			if c.Seq != want {
				t.Fatalf("change seq %d, want %d", c.Seq, want)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("seq %d not delivered", want)
		}
	}
	time.Sleep(200 * time.Millisecond) // LISTEN is up
	before := foreign()
	for i := range 5 {
		mustPublish(t, s, writer, in("a", models.AudienceUser, fmt.Sprintf("x%d", i)))
		next(start + int64(i) + 1)
	}
	time.Sleep(300 * time.Millisecond) // their NOTIFYs are back
	if n := foreign() - before; n != 0 {
		t.Errorf("our own 5 commits counted as %d foreign wakeups, want 0", n)
	}
	mustPublish(t, other, writer, in("b", models.AudienceUser, "y"))
	next(start + 6) // delivered: its NOTIFY woke the watcher to read it
	if foreign() == before {
		t.Error("another instance's commit was no foreign wakeup")
	}
}
