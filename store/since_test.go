package store

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/unsay/unsay/models"
)

// sinceFixture writes, one millisecond apart after a window start: five
// revisions of weight_bearing (v2…v6, v1 before the window), three of
// exercise (v1…v3), one of contact, and two assistant-only revisions of
// risk that a care.read.user principal never sees — nine speakable
// versions in the window, of three facts. It returns the window's start.
func sinceFixture(t *testing.T, s *Store, clock *testClock) time.Time {
	t.Helper()
	mustPublish(t, s, writer, in("weight_bearing", models.AudienceUser, "Walk with a frame, v1."))
	clock.Advance(time.Second)
	start := clock.Now()
	write := func(domain string, a models.Audience, value string) {
		clock.Advance(time.Millisecond)
		mustPublish(t, s, writer, in(domain, a, value))
	}
	for i := 2; i <= 6; i++ {
		write("weight_bearing", models.AudienceUser, fmt.Sprintf("Walk with a frame, v%d.", i))
		if i <= 4 {
			write("exercise", models.AudienceUser, fmt.Sprintf("Ankle pumps, v%d.", i-1))
		}
	}
	write("risk", models.AudienceAssistant, "Fall risk high.")
	write("contact", models.AudienceUser, "Call the ward.")
	write("risk", models.AudienceAssistant, "Fall risk moderate.")
	return start
}

// TestSince_AWindowOverTheLimitIsEachFactsLatestWithItsFirstAndACount:
// Since loaded every version of the window into memory although
// whats_changed answers at most 200. With a limit, a window of more
// versions than the limit comes back as each fact's latest version only
// (oldest first), each fact's first version in the window, and the count
// of the versions left out; one in which more facts changed than the limit
// comes back as the count of facts alone. Twin: a window within the limit
// is every version, nothing omitted. Assistant-only versions count for
// nobody without care.read.assistant (P-1).
func TestSince_AWindowOverTheLimitIsEachFactsLatestWithItsFirstAndACount(t *testing.T) {
	clock := newClock()
	s, _ := openTest(t, clock)
	ctx := context.Background()
	start := sinceFixture(t, s, clock)
	wantFirst := map[models.URI]int{
		models.NewURI(models.AudienceUser, "ray", "weight_bearing"): 2,
		models.NewURI(models.AudienceUser, "ray", "exercise"):       1,
		models.NewURI(models.AudienceUser, "ray", "contact"):        1,
	}
	uris := func(vs []models.Version) []string {
		out := []string{}
		for _, v := range vs {
			out = append(out, v.URI().String())
		}
		return out
	}
	for _, tc := range []struct {
		name     string
		limit    int
		versions []string
		facts    int
		omitted  int
	}{
		{"within the limit (twin)", 10, []string{
			"care://ray/weight_bearing/v2", "care://ray/exercise/v1", "care://ray/weight_bearing/v3", "care://ray/exercise/v2",
			"care://ray/weight_bearing/v4", "care://ray/exercise/v3", "care://ray/weight_bearing/v5", "care://ray/weight_bearing/v6",
			"care://ray/contact/v1",
		}, 3, 0},
		{"no limit", 0, nil, 3, 0}, // the same nine versions, checked below
		{"over the limit", 4, []string{"care://ray/exercise/v3", "care://ray/weight_bearing/v6", "care://ray/contact/v1"}, 3, 6},
		{"just over the limit", 8, []string{"care://ray/exercise/v3", "care://ray/weight_bearing/v6", "care://ray/contact/v1"}, 3, 6},
		{"more facts than the limit", 2, nil, 3, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, err := s.SinceAtMost(ctx, userRay, start, tc.limit)
			if err != nil {
				t.Fatal(err)
			}
			want := tc.versions
			if tc.limit == 0 {
				want = []string{
					"care://ray/weight_bearing/v2", "care://ray/exercise/v1", "care://ray/weight_bearing/v3", "care://ray/exercise/v2",
					"care://ray/weight_bearing/v4", "care://ray/exercise/v3", "care://ray/weight_bearing/v5", "care://ray/weight_bearing/v6",
					"care://ray/contact/v1",
				}
			}
			if want == nil {
				want = []string{}
			}
			if got := uris(w.Versions); !slices.Equal(got, want) {
				t.Errorf("versions %v, want %v", got, want)
			}
			if w.Facts != tc.facts || w.Omitted != tc.omitted {
				t.Errorf("facts %d, omitted %d; want %d, %d", w.Facts, w.Omitted, tc.facts, tc.omitted)
			}
			if len(w.Versions) > 0 {
				if !maps.Equal(w.First, wantFirst) {
					t.Errorf("first in the window %v, want %v", w.First, wantFirst)
				}
			}
			for _, v := range w.Versions {
				if v.Value == "" || v.Audience != models.AudienceUser {
					t.Errorf("%s: value %q audience %s", v.URI(), v.Value, v.Audience)
				}
			}
		})
	}
	// A dual-scope reader sees the two assistant-only versions too: eleven
	// versions of four facts; over a limit of 4, the four latest, seven
	// omitted.
	w, err := s.SinceAtMost(ctx, dualRay, start, 4)
	want := []string{"care://ray/exercise/v3", "care://ray/weight_bearing/v6", "care://ray/contact/v1", "care-internal://ray/risk/v2"}
	if got := uris(w.Versions); err != nil || w.Facts != 4 || w.Omitted != 7 || !slices.Equal(got, want) {
		t.Errorf("dual reader over the limit: %v, facts %d, omitted %d, versions %v; want 4, 7, %v", err, w.Facts, w.Omitted, got, want)
	}
}

// TestSince_MemoryIsBoundedByTheAnswerNotTheWindow: with a limit, what
// Since allocates does not grow with the window. Two facts each revised
// many times: reading a window eleven times longer allocates about the
// same (it reads limit+1 rows, a count, and each fact's latest), where
// reading every version allocated about eleven times as much.
func TestSince_MemoryIsBoundedByTheAnswerNotTheWindow(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 550 versions")
	}
	clock := newClock()
	s, _ := openTest(t, clock)
	ctx := context.Background()
	start := clock.Now()
	write := func(n int) {
		for i := range n {
			clock.Advance(time.Millisecond)
			mustPublish(t, s, writer, in([]string{"weight_bearing", "exercise"}[i%2], models.AudienceUser,
				fmt.Sprintf("Walk with a frame; revision %d, with a sentence long enough to be a real instruction.", i)))
		}
	}
	const limit = 20
	allocs := func() float64 {
		return testing.AllocsPerRun(3, func() {
			w, err := s.SinceAtMost(ctx, userRay, start, limit)
			if err != nil || len(w.Versions) != 2 || w.Omitted == 0 {
				t.Fatalf("Since: %v, %d versions, %d omitted", err, len(w.Versions), w.Omitted)
			}
		})
	}
	write(50)
	short := allocs()
	write(500)
	long := allocs()
	if long > 2*short {
		t.Fatalf("a window of 550 versions allocated %.0f times, one of 50 %.0f: memory grows with the window", long, short)
	}
	t.Logf("allocations per Since with limit %d: %.0f for 50 versions, %.0f for 550", limit, short, long)
}
