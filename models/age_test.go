package models

import (
	"testing"
	"time"
)

func TestSpokenAge(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{
		{-time.Hour, "just now"},
		{0, "just now"},
		{9*time.Second + 999*time.Millisecond, "just now"},
		{10 * time.Second, "ten seconds ago"},
		{11 * time.Second, "11 seconds ago"},
		{59 * time.Second, "59 seconds ago"},
		{time.Minute, "a minute ago"},
		{time.Minute + 59*time.Second, "a minute ago"},
		{2 * time.Minute, "two minutes ago"},
		{59 * time.Minute, "59 minutes ago"},
		{time.Hour, "an hour ago"},
		{2 * time.Hour, "two hours ago"},
		{23*time.Hour + 59*time.Minute, "23 hours ago"},
		{24 * time.Hour, "yesterday"},
		{47 * time.Hour, "yesterday"},
		{48 * time.Hour, "two days ago"},
		{9 * 24 * time.Hour, "nine days ago"},
		{10 * 24 * time.Hour, "ten days ago"},
		{11 * 24 * time.Hour, "11 days ago"},
	} {
		if got := SpokenAge(tc.d); got != tc.want {
			t.Errorf("SpokenAge(%v) = %q, want %q", tc.d, got, tc.want)
		}
	}
}

func TestStaleHeader_SaysAgeAndAuthorLabel(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 10, 8, 9, 14, 0, 0, time.UTC)
	v := Version{AuthorLabel: "Dr Mensah, GP", WrittenAt: now.Add(-9 * 24 * time.Hour)}
	want := "[STALE — last changed nine days ago by Dr Mensah, GP; say this age aloud]"
	if got := StaleHeader(v, now); got != want {
		t.Fatalf("StaleHeader = %q, want %q", got, want)
	}
}

func TestVersion_P7_IsStaleOnlyPastStaleAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 10, 8, 9, 14, 0, 0, time.UTC)
	for _, tc := range []struct {
		name       string
		staleAfter time.Time
		want       bool
	}{
		{"no staleAfter is never stale", time.Time{}, false},
		{"staleAfter in the future", now.Add(time.Second), false},
		{"staleAfter exactly now", now, true},
		{"staleAfter in the past", now.Add(-4 * 24 * time.Hour), true},
	} {
		if got := (Version{StaleAfter: tc.staleAfter}).IsStale(now); got != tc.want {
			t.Errorf("%s: IsStale = %v, want %v", tc.name, got, tc.want)
		}
	}
}
