package store

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/unsay/unsay/models"
)

// seeded opens a store holding the demo seed at DemoNow.
func seeded(t *testing.T) *Store {
	t.Helper()
	s, _ := openTest(t, nil)
	if ok, err := Seed(context.Background(), s, demoNow(t)); err != nil || !ok {
		t.Fatalf("Seed = %v, %v", ok, err)
	}
	return s
}

func TestRead_P1_UserPrincipalCannotReachAssistantRecordsByEitherScheme(t *testing.T) {
	s := seeded(t)
	ctx := context.Background()
	for _, uri := range []string{
		"care-internal://ray/risk",    // the scheme's scope (first check)
		"care-internal://ray/risk/v1", // versioned form
		"care://ray/risk",             // the record's own audience (second check)
		"care://ray/risk/v1",
		"care://ray/gait_note",
	} {
		if r, err := s.Read(ctx, userRay, uri); !errors.Is(err, ErrNotFound) {
			t.Errorf("user Read(%s) = %+v, %v; want ErrNotFound", uri, r.Version.Value, err)
		}
		if _, err := s.History(ctx, userRay, uri); !errors.Is(err, ErrNotFound) {
			t.Errorf("user History(%s): %v; want ErrNotFound", uri, err)
		}
		if _, err := s.Verify(ctx, userRay, uri); !errors.Is(err, ErrNotFound) {
			t.Errorf("user Verify(%s): %v; want ErrNotFound", uri, err)
		}
		if _, _, err := s.Staleness(ctx, userRay, uri, demoNow(t)); !errors.Is(err, ErrNotFound) {
			t.Errorf("user Staleness(%s): %v; want ErrNotFound", uri, err)
		}
	}
}

// The second check alone: even a dual-scope principal cannot read an
// assistant record through the care:// scheme, nor a user record through
// care-internal://.
func TestRead_P1_SchemeMustMatchTheRecordsOwnAudience(t *testing.T) {
	s := seeded(t)
	ctx := context.Background()
	for _, uri := range []string{"care://ray/risk", "care-internal://ray/weight_bearing", "care-internal://ray/weight_bearing/v1"} {
		if _, err := s.Read(ctx, dualRay, uri); !errors.Is(err, ErrNotFound) {
			t.Errorf("dual Read(%s): %v; want ErrNotFound", uri, err)
		}
	}
}

func TestRead_P1_AssistantScopeReadsAssistantRecords(t *testing.T) {
	s := seeded(t)
	ctx := context.Background()
	r, err := s.Read(ctx, dualRay, "care-internal://ray/risk")
	if err != nil || r.Version.Audience != models.AudienceAssistant || r.Version.Value == "" {
		t.Fatalf("dual Read(care-internal://ray/risk) = %+v, %v", r, err)
	}
	if _, err := s.Read(ctx, userRay, "care://ray/weight_bearing"); err != nil {
		t.Fatalf("user Read(care://ray/weight_bearing): %v", err)
	}
}

func TestList_P1_FiltersByScopeBeforeAnythingElse(t *testing.T) {
	s := seeded(t)
	ctx := context.Background()
	uris := func(p models.Principal) []string {
		fs, err := s.List(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, f := range fs {
			out = append(out, f.Current.FactURI().String())
		}
		return out
	}
	user := uris(userRay)
	want := []string{"care://ray/anticoagulant", "care://ray/contact", "care://ray/exercise", "care://ray/exercise_clip", "care://ray/weight_bearing"}
	if !slices.Equal(user, want) {
		t.Fatalf("user list = %v, want %v", user, want)
	}
	dual := uris(dualRay)
	if len(dual) != 8 || !slices.IsSorted(dual) {
		t.Fatalf("dual list = %v, want 8 sorted URIs", dual)
	}
	if got := uris(models.Principal{Scopes: []models.Scope{models.ScopeWrite}, Patients: []string{"ray"}}); len(got) != 0 {
		t.Fatalf("write-only principal lists %v", got)
	}
	since, err := s.Since(ctx, userRay, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range since {
		if v.Audience != models.AudienceUser {
			t.Fatalf("Since for a user principal returned %s", v.URI())
		}
	}
	if len(since) != 7 { // five user facts, weight_bearing and exercise_clip twice
		t.Fatalf("Since(zero) for user = %d versions, want 7", len(since))
	}
	sinceDual, _ := s.Since(ctx, dualRay, time.Time{})
	if len(sinceDual) != 11 {
		t.Fatalf("Since(zero) for dual = %d versions, want 11", len(sinceDual))
	}
}

func TestRead_P2_ForbiddenAbsentMalformedAndMissingVersionAreIndistinguishable(t *testing.T) {
	s := seeded(t)
	ctx := context.Background()
	for name, uri := range map[string]string{
		"forbidden":       "care-internal://ray/risk",
		"wrong scheme":    "care://ray/risk",
		"absent":          "care://ray/nonexistent",
		"absent patient":  "care://nobody/weight_bearing",
		"malformed":       "care://ray/weight_bearing/3",
		"trailing slash":  "care://ray/weight_bearing/",
		"unknown scheme":  "file:///etc/passwd",
		"missing version": "care://ray/weight_bearing/v3",
		"other patient":   "care://sue/weight_bearing",
		"empty":           "",
	} {
		_, err := s.Read(ctx, userRay, uri)
		if err != ErrNotFound { // the very same error value, same message
			t.Errorf("%s: Read(%q) err = %v, want exactly ErrNotFound", name, uri, err)
		}
		if _, err := s.History(ctx, userRay, uri); err != ErrNotFound {
			t.Errorf("%s: History(%q) err = %v, want exactly ErrNotFound", name, uri, err)
		}
		if _, err := s.Verify(ctx, userRay, uri); err != ErrNotFound {
			t.Errorf("%s: Verify(%q) err = %v, want exactly ErrNotFound", name, uri, err)
		}
	}
	// Positive twin: the same reader gets an existing version.
	if _, err := s.Read(ctx, userRay, "care://ray/weight_bearing/v2"); err != nil {
		t.Fatalf("existing version: %v", err)
	}
}

func TestRead_P21_AnotherPatientsFactsAreNotFound(t *testing.T) {
	s := seeded(t)
	ctx := context.Background()
	sue := models.Principal{Subject: "w", Scopes: []models.Scope{models.ScopeWrite}, Patients: []string{"sue"}}
	pi := in("weight_bearing", models.AudienceUser, "Sue's instruction.")
	pi.Patient = "sue"
	mustPublish(t, s, sue, pi)

	if _, err := s.Read(ctx, dualOther, "care://ray/weight_bearing"); err != ErrNotFound {
		t.Fatalf("sue-bound principal read ray: %v", err)
	}
	if fs, _ := s.List(ctx, dualOther); len(fs) != 1 || fs[0].Current.Patient != "sue" {
		t.Fatalf("sue-bound list = %+v", fs)
	}
	if vs, _ := s.Since(ctx, dualOther, time.Time{}); len(vs) != 1 || vs[0].Patient != "sue" {
		t.Fatalf("sue-bound since = %+v", vs)
	}
	// Positive twin.
	if r, err := s.Read(ctx, dualOther, "care://sue/weight_bearing"); err != nil || r.Version.Value != "Sue's instruction." {
		t.Fatalf("bound patient: %+v, %v", r, err)
	}
	if fs, _ := s.List(ctx, dualRay); len(fs) != 8 {
		t.Fatalf("ray-bound list has %d facts, want 8 (sue's excluded)", len(fs))
	}
}

func TestPublish_P21_WriterMustBeBoundToThePatient(t *testing.T) {
	s, _ := openTest(t, newClock())
	pi := in("weight_bearing", models.AudienceUser, "x")
	pi.Patient = "sue"
	if _, err := s.Publish(context.Background(), writer, pi); !errors.Is(err, ErrForbidden) {
		t.Fatalf("ray-bound writer wrote sue: %v", err)
	}
	if _, err := s.Publish(context.Background(), userRay, in("weight_bearing", models.AudienceUser, "x")); !errors.Is(err, ErrForbidden) {
		t.Fatalf("principal without care.write wrote: %v", err)
	}
	if last, _ := s.LastSeq(context.Background()); last != 0 {
		t.Fatalf("a forbidden write left seq %d", last)
	}
	mustPublish(t, s, writer, in("weight_bearing", models.AudienceUser, "x")) // twin
}

func TestPublish_P3_AudienceChangeRefusedBeforeAnyStateChanges(t *testing.T) {
	s := seeded(t)
	ctx := context.Background()
	before, _ := s.LastSeq(ctx)
	for _, pi := range []PublishInput{
		in("weight_bearing", models.AudienceAssistant, "Moved to internal."),
		in("risk", models.AudienceUser, "Fall risk, say it aloud."),
	} {
		pi.IdempotencyKey = "k-" + pi.Domain
		if _, err := s.Publish(ctx, system, pi); !errors.Is(err, ErrAudienceChange) {
			t.Fatalf("Publish(%s as %s) = %v, want ErrAudienceChange", pi.Domain, pi.Audience, err)
		}
	}
	if after, _ := s.LastSeq(ctx); after != before {
		t.Fatalf("seq moved from %d to %d after refused writes", before, after)
	}
	if r, _ := s.Read(ctx, dualRay, "care://ray/weight_bearing"); r.Latest != 2 {
		t.Fatalf("weight_bearing latest = %d, want 2", r.Latest)
	}
	if _, err := s.Read(ctx, dualRay, "care-internal://ray/weight_bearing"); err != ErrNotFound {
		t.Fatalf("the refused audience is readable: %v", err)
	}
	// The idempotency key of a refused write was not consumed.
	pi := StagedRevision()
	pi.IdempotencyKey = "k-weight_bearing"
	r, err := s.Publish(ctx, system, pi)
	if err != nil || r.Replayed || r.Version.N != 3 {
		t.Fatalf("same-audience write after refusal = %+v, %v; want v3, not replayed", r, err)
	}
}
