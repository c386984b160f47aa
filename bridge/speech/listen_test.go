package speech

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

// TestListen_OnA2026ServerOneListenStreamCarriesTheRevisions: against a
// server that offers 2026-07-28 the principal opens no session (no
// initialize), watches all of Ray's care:// facts on one
// subscriptions/listen stream — never a care-internal:// URI, never
// another patient's — and a revision becomes the retraction of the version
// Ray heard, as on 2025-11-25.
func TestListen_OnA2026ServerOneListenStreamCarriesTheRevisions(t *testing.T) {
	f := newDualFakeCare(t)
	seedRay(f)
	p := startPrincipal(t, f, newTestDB(t), "ray")
	waitConnected(t, p)
	hearAll(t, p, "ray")

	if n := f.initializes.Load(); n != 0 {
		t.Errorf("%d initialize requests to a 2026-07-28 server, want none", n)
	}
	if ids := f.sessionIDs(); len(ids) != 0 {
		t.Errorf("sessions %v on the stateful side, want none", ids)
	}
	f.mu.Lock()
	listens := slices.Clone(f.listens)
	f.mu.Unlock()
	want := []string{"care://ray/anticoagulant", "care://ray/contact", "care://ray/exercise", wb}
	if len(listens) != 1 || !slices.Equal(listens[0], want) {
		t.Fatalf("listens %v, want one for %v", listens, want)
	}
	n := f.publish(wb, "Full weight-bearing as tolerated.")
	waitPending(t, p, wb, n)
	as := pendingOf(t, p, "ray")
	if len(as) != 1 || as[0].Heard == nil || as[0].Heard.N != 1 || as[0].Current.N != 2 {
		t.Fatalf("pending = %+v, want v1 → v2", as)
	}
}

// TestListen_ANewFactIsWatchedOnANewStreamWithNoGap: a fact created while
// listening (list_changed) is added by a new listen stream for the whole
// set; the old one closes only once the new one is acknowledged, and a
// revision of an old fact made afterwards still arrives.
func TestListen_ANewFactIsWatchedOnANewStreamWithNoGap(t *testing.T) {
	f := newDualFakeCare(t)
	seedRay(f)
	p := startPrincipal(t, f, newTestDB(t), "ray")
	waitConnected(t, p)
	hearAll(t, p, "ray")

	f.publish("care://ray/diet", "Eat little and often.") // version 1: list_changed
	eventually(t, "a second listen naming the new fact", func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		return len(f.listens) == 2 && slices.Contains(f.listens[1], "care://ray/diet") && slices.Contains(f.listens[1], wb)
	})
	waitPending(t, p, "care://ray/diet", 1) // news he never heard
	n := f.publish("care://ray/diet", "Eat three meals a day.")
	waitPending(t, p, "care://ray/diet", n)
	n = f.publish(wb, "Full weight-bearing as tolerated.")
	waitPending(t, p, wb, n)
	eventually(t, "the replaced stream to be gone", func() bool { return len(f.modernSessions()) == 1 })
}

// TestListen_AStreamThatEndsIsListenedAgainAndWhatChangedMeanwhileIsAnnounced:
// when the server ends the listen stream (a restart closes it), the
// principal re-connects and re-reads every fact, so a revision made while
// it was not listening is announced; the new stream carries the next one.
func TestListen_AStreamThatEndsIsListenedAgainAndWhatChangedMeanwhileIsAnnounced(t *testing.T) {
	f := newDualFakeCare(t)
	seedRay(f)
	p := startPrincipal(t, f, newTestDB(t), "ray")
	waitConnected(t, p)
	hearAll(t, p, "ray")

	f.restart()
	n := f.publishSilently(wb, "Full weight-bearing as tolerated.")
	waitPending(t, p, wb, n)
	eventually(t, "a second listen", func() bool { return f.listenCount() >= 2 })
	waitConnected(t, p)
	n = f.publish("care://ray/exercise", "Hip flexion exercises three times a day.")
	waitPending(t, p, "care://ray/exercise", n)
}

// TestListen_ASilentStreamIsTakenForDead: a stream on which nothing
// arrives for ListenIdle (the fake writes no keep-alive comments) is cut
// and the connection re-established — a half-open connection is not
// listened to for ever. Twin: with the default ListenIdle (45 s) the
// stream is still the first one after the same wait.
func TestListen_ASilentStreamIsTakenForDead(t *testing.T) {
	for _, tc := range []struct {
		idle time.Duration
		cut  bool
	}{{300 * time.Millisecond, true}, {0, false}} {
		f := newDualFakeCare(t)
		seedRay(f)
		f.listenIdle = tc.idle
		p := startPrincipal(t, f, newTestDB(t), "ray")
		waitConnected(t, p)
		if tc.cut {
			eventually(t, "a silent stream to be replaced", func() bool { return f.listenCount() >= 2 })
		} else {
			time.Sleep(time.Second)
			if n := f.listenCount(); n != 1 {
				t.Errorf("with ListenIdle 45 s, %d listens after 1 s, want 1", n)
			}
		}
		p.stop()
	}
}

// TestListen_AURIThatIsNotAcknowledgedIsNotCountedAsWatched: a listed fact
// the server leaves out of the acknowledgement is logged as refused and
// asked for again at the next sync; the facts it did acknowledge work.
func TestListen_AURIThatIsNotAcknowledgedIsNotCountedAsWatched(t *testing.T) {
	f := newDualFakeCare(t)
	seedRay(f)
	f.mu.Lock()
	f.refuse["care://ray/contact"] = true
	f.mu.Unlock()
	p := startPrincipal(t, f, newTestDB(t), "ray")
	waitConnected(t, p)
	hearAll(t, p, "ray")
	n := f.publish(wb, "Full weight-bearing as tolerated.")
	waitPending(t, p, wb, n)

	f.mu.Lock()
	delete(f.refuse, "care://ray/contact")
	f.mu.Unlock()
	f.publish("care://ray/diet", "Eat little and often.") // list_changed: a sync
	eventually(t, "a listen asking for the refused fact again", func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		last := f.listens[len(f.listens)-1]
		return len(f.listens) >= 2 && slices.Contains(last, "care://ray/contact")
	})
	n = f.publish("care://ray/contact", "Call the ward on 0161 555 0199.")
	waitPending(t, p, "care://ray/contact", n)
}

// TestDial_FallsBackTo2025AgainstALegacyServerAndRemembersIt: against a
// legacy-only server (a remote Unsay that predates 2026-07-28) the
// principal probes 2026-07-28 once, falls back to a 2025-11-25 session,
// and after the server restarts re-connects without probing again.
func TestDial_FallsBackTo2025AgainstALegacyServerAndRemembersIt(t *testing.T) {
	f := newFakeCare(t)
	seedRay(f)
	p := startPrincipal(t, f, newTestDB(t), "ray")
	waitConnected(t, p)
	probes := f.probes.Load()
	if probes == 0 {
		t.Fatal("the principal never probed 2026-07-28")
	}
	if ids := f.sessionIDs(); len(ids) != 1 {
		t.Fatalf("sessions %v, want the one 2025-11-25 session", ids)
	}
	hearAll(t, p, "ray")
	f.restart()
	n := f.publishSilently(wb, "Full weight-bearing as tolerated.")
	waitPending(t, p, wb, n)
	if got := f.probes.Load(); got != probes {
		t.Errorf("%d probes after the restart, want still %d (the era is remembered)", got, probes)
	}
}

// modernSessions lists the open sessions of a dual fake's 2026-07-28
// side (one per request in flight: the listen streams).
func (f *fakeCare) modernSessions() []string {
	f.mu.Lock()
	s := f.modern
	f.mu.Unlock()
	var out []string
	for ss := range s.Sessions() {
		out = append(out, ss.ID())
	}
	return out
}

// Finding G10: the facts are spread over listens of at most n URIs each,
// in order, none lost or repeated; no facts is still one (empty) listen,
// which hears resources/list_changed.
func TestListenChunks_SplitsIntoRunsOfAtMostNAndKeepsOneForNone(t *testing.T) {
	uris := func(k int) []string {
		out := make([]string, k)
		for i := range out {
			out[i] = fmt.Sprintf("care://ray/t%03d", i)
		}
		return out
	}
	for _, tc := range []struct{ k, n, chunks int }{{0, 256, 1}, {1, 256, 1}, {256, 256, 1}, {257, 256, 2}, {600, 256, 3}, {5, 2, 3}} {
		want := uris(tc.k)
		got := listenChunks(want, tc.n)
		var joined []string
		for _, c := range got {
			if len(c) > tc.n {
				t.Errorf("k=%d n=%d: a chunk of %d", tc.k, tc.n, len(c))
			}
			joined = append(joined, c...)
		}
		if len(got) != tc.chunks || !slices.Equal(joined, want) {
			t.Errorf("k=%d n=%d: %d chunks joining to %d URIs, want %d chunks of all %d in order", tc.k, tc.n, len(got), len(joined), tc.chunks, tc.k)
		}
	}
}
