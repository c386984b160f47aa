package store

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/unsay/unsay/models"
)

// testClock is a settable clock, safe for concurrent use.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *testClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *testClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func newClock() *testClock {
	return &testClock{now: time.Date(2026, 10, 8, 9, 14, 0, 0, time.UTC)}
}

func openTest(t testing.TB, clock *testClock) (*Store, string) {
	t.Helper()
	path := testDSN(t) // SQLite in t.TempDir(), or a fresh Postgres schema (postgres_test.go)
	opts := Options{DSN: path, AuditKey: []byte("test-audit-key")}
	if clock != nil {
		opts.Clock = clock.Now
	}
	s, err := Open(context.Background(), opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s, path
}

var (
	// writer is a clinician system: it writes both audiences of ray's facts.
	writer = models.Principal{Subject: "okafor", Scopes: []models.Scope{models.ScopeWrite, models.ScopeWriteAssistant}, Patients: []string{"ray"}}
	// userWriter holds care.write only: speakable facts only.
	userWriter = models.Principal{Subject: "carer", Scopes: []models.Scope{models.ScopeWrite}, Patients: []string{"ray"}}
	userRay    = models.Principal{Subject: "speech", Scopes: []models.Scope{models.ScopeReadUser}, Patients: []string{"ray"}}
	dualRay    = models.Principal{Subject: "host", Scopes: []models.Scope{models.ScopeReadUser, models.ScopeReadAssistant}, Patients: []string{"ray"}}
	dualOther  = models.Principal{Subject: "host2", Scopes: []models.Scope{models.ScopeReadUser, models.ScopeReadAssistant}, Patients: []string{"sue"}}
	system     = models.System("test", models.ScopeReadUser, models.ScopeReadAssistant, models.ScopeWrite, models.ScopeWriteAssistant)
)

func in(domain string, a models.Audience, value string) PublishInput {
	return PublishInput{Patient: "ray", Domain: domain, Audience: a, Value: value,
		AuthorID: "okafor", AuthorLabel: "Sarah Okafor, physio", Priority: 0.5}
}

func mustPublish(t testing.TB, s *Store, p models.Principal, pi PublishInput) PublishResult {
	t.Helper()
	r, err := s.Publish(context.Background(), p, pi)
	if err != nil {
		t.Fatalf("Publish(%s/%s): %v", pi.Patient, pi.Domain, err)
	}
	return r
}

func TestPublish_ReadBack_StampsServerClockInMilliseconds(t *testing.T) {
	clock := newClock()
	clock.Advance(1234567 * time.Nanosecond) // 1.234567 ms
	s, _ := openTest(t, clock)
	ctx := context.Background()
	r := mustPublish(t, s, writer, in("weight_bearing", models.AudienceUser, "Full weight-bearing as tolerated."))
	if r.Version.N != 1 || !r.Created || r.Replayed || r.Seq != 1 {
		t.Fatalf("first publish = %+v, want v1 created seq 1", r)
	}
	want := time.Date(2026, 10, 8, 9, 14, 0, 1_000_000, time.UTC)
	if !r.Version.WrittenAt.Equal(want) {
		t.Fatalf("WrittenAt = %v, want %v (clock truncated to ms)", r.Version.WrittenAt, want)
	}
	got, err := s.Read(ctx, userRay, "care://ray/weight_bearing")
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	if got.Version.Value != "Full weight-bearing as tolerated." || got.Latest != 1 || got.Version.Hash != r.Version.Hash {
		t.Fatalf("Read = %+v", got)
	}
	if !got.Version.WrittenAt.Equal(want) {
		t.Fatalf("read WrittenAt = %v, want %v", got.Version.WrittenAt, want)
	}
	r2 := mustPublish(t, s, writer, in("weight_bearing", models.AudienceUser, "Partial weight-bearing."))
	if r2.Version.N != 2 || r2.Created || r2.Version.PrevHash != r.Version.Hash {
		t.Fatalf("second publish = %+v, want v2 chained to v1", r2)
	}
	old, err := s.Read(ctx, userRay, "care://ray/weight_bearing/v1")
	if err != nil || old.Version.N != 1 || old.Latest != 2 {
		t.Fatalf("Read v1 = %+v, %v; want v1 with Latest 2", old, err)
	}
}

func TestVersionHash_PinnedTestVectors(t *testing.T) {
	v1 := VersionHash("", "No weight through the operated leg; transfers with the frame only.",
		time.Date(2026, 10, 4, 9, 14, 0, 0, time.UTC), "adeyemi")
	if v1 != "50f603064ba04940394dc5b584b3921c4f2158cd10b22bf95a322c8f9eba4de2" {
		t.Fatalf("v1 hash = %s", v1)
	}
	v2 := VersionHash(v1, `Partial weight-bearing <50%> & "as tolerated".`,
		time.Date(2026, 10, 6, 9, 14, 0, 0, time.UTC), "adeyemi")
	if v2 != "b8bfc8772b6952ddc76d6bc0ceef5b34047d1b0613afe1e7bbfb8a564b42d7c2" {
		t.Fatalf("v2 hash = %s", v2)
	}
}

func TestRead_P1_HidesAssistantRecordFromUserPrincipal(t *testing.T) {
	s, _ := openTest(t, newClock())
	ctx := context.Background()
	mustPublish(t, s, writer, in("risk", models.AudienceAssistant, "Fall risk HIGH."))
	if _, err := s.Read(ctx, userRay, "care-internal://ray/risk"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("user principal read internal: err = %v, want ErrNotFound", err)
	}
	if _, err := s.Read(ctx, dualRay, "care-internal://ray/risk"); err != nil {
		t.Fatalf("dual principal read internal: %v", err)
	}
}
