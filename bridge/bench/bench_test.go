package bench

import (
	"testing"
	"time"
)

func TestSummarize_TakesSortedIndexFloorPNAndCountsRunsOutsideTheSpeechWindow(t *testing.T) {
	// 1…100 ms, shuffled: p50 is sorted[50] = 51 ms, p95 sorted[95] = 96 ms,
	// p99 sorted[99] = 100 ms (the peer's rule: index floor(p·n), capped at n-1).
	var s []time.Duration
	for i := 100; i >= 1; i-- {
		s = append(s, time.Duration(i)*time.Millisecond)
	}
	got := Summarize("x", s)
	if got.N != 100 || got.P50 != 51 || got.P95 != 96 || got.P99 != 100 || got.Max != 100 {
		t.Fatalf("Summarize = %+v", got)
	}
	if got.OutsideWindow != 0 {
		t.Fatalf("%d runs outside the window, want 0", got.OutsideWindow)
	}
	s = append(s, SpeechWindow+time.Millisecond)
	if got := Summarize("x", s); got.OutsideWindow != 1 {
		t.Fatalf("a run past %s not counted: %+v", SpeechWindow, got)
	}
	if got := Summarize("empty", nil); got.N != 0 || got.Max != 0 {
		t.Fatalf("empty series = %+v", got)
	}
}
