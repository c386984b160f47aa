package store

import (
	"context"
	"testing"

	"github.com/unsay/unsay/models"
)

// listedVersion is the version List answers for ray's fact domain (0: not listed).
func listedVersion(t *testing.T, s *Store, p models.Principal, domain string) int {
	t.Helper()
	facts, err := s.List(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range facts {
		if f.Current.Patient == "ray" && f.Current.Domain == domain {
			return f.Current.N
		}
	}
	return 0
}

// List keeps its answer only until the next commit — this instance's or
// another's on the same database (SQLite file, or Postgres schema in the
// second pass) — so the list a speech principal confirms a turn from
// never lags a committed revision (P-24): a revision, a new fact and a
// second instance's revision are each listed on the very next call, and
// the answer for one principal is never another's (P-1).
func TestList_ANewCommitIsListedAtOnceEvenFromAnotherInstance(t *testing.T) {
	a, dsn := openTest(t, nil)
	b := openDSN(t, dsn) // a second instance on the same database
	mustPublish(t, a, writer, in("weight_bearing", models.AudienceUser, "Partial weight-bearing with crutches."))
	mustPublish(t, a, writer, in("risk", models.AudienceAssistant, "Falls risk: high."))
	if n := listedVersion(t, a, userRay, "weight_bearing"); n != 1 {
		t.Fatalf("listed v%d, want v1", n)
	}
	// Twin: nothing committed, the same answer.
	if n := listedVersion(t, a, userRay, "weight_bearing"); n != 1 {
		t.Fatalf("listed v%d again, want v1", n)
	}

	mustPublish(t, a, writer, in("weight_bearing", models.AudienceUser, "Full weight-bearing as tolerated."))
	if n := listedVersion(t, a, userRay, "weight_bearing"); n != 2 {
		t.Fatalf("after this instance's revision listed v%d, want v2", n)
	}
	mustPublish(t, b, writer, in("weight_bearing", models.AudienceUser, "Non-weight-bearing for six weeks."))
	if n := listedVersion(t, a, userRay, "weight_bearing"); n != 3 {
		t.Fatalf("after another instance's revision listed v%d, want v3", n)
	}
	mustPublish(t, b, writer, in("exercise", models.AudienceUser, "Hip flexion twice a day."))
	if n := listedVersion(t, a, userRay, "exercise"); n != 1 {
		t.Fatalf("another instance's new fact listed at v%d, want v1", n)
	}

	// Kept answers are per principal: the speakable list never holds the
	// assistant-only fact a dual-scope principal's list does.
	if n := listedVersion(t, a, dualRay, "risk"); n != 1 {
		t.Fatalf("dual-scope list has risk at v%d, want v1", n)
	}
	if n := listedVersion(t, a, userRay, "risk"); n != 0 {
		t.Fatalf("the speakable list holds the assistant-only fact (v%d)", n)
	}
}

// A database restored under a running instance (an older backup, then new
// writes) reuses seq numbers: List never answers with what it kept from
// before the restore when the highest seq comes back to the same number
// with another version (found in review).
func TestList_ARestoredDatabaseThatReachesTheSameSeqAgainIsListedAfresh(t *testing.T) {
	s, dsn := openTest(t, nil)
	mustPublish(t, s, writer, in("weight_bearing", models.AudienceUser, "Partial weight-bearing with crutches."))
	mustPublish(t, s, writer, in("weight_bearing", models.AudienceUser, "Full weight-bearing as tolerated."))
	if n := listedVersion(t, s, userRay, "weight_bearing"); n != 2 {
		t.Fatalf("listed v%d, want v2", n)
	}
	// Restore the backup taken after v1 (what a restore leaves: v1 latest).
	db, _ := tamperDB(t, dsn)
	defer db.Close()
	for _, q := range []string{
		`DELETE FROM versions WHERE n = 2`,
		`UPDATE facts SET latest = 1`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(q, err)
		}
	}
	// A new v2, other words: it takes seq 2 again.
	r := mustPublish(t, s, writer, in("weight_bearing", models.AudienceUser, "Non-weight-bearing for six weeks."))
	facts, err := s.List(context.Background(), userRay)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range facts {
		if f.Current.Domain == "weight_bearing" && f.Current.Hash != r.Version.Hash {
			t.Fatalf("List answers v%d %q (hash %.8s) kept from before the restore; the store holds %q (hash %.8s), seq %d",
				f.Current.N, f.Current.Value, f.Current.Hash, r.Version.Value, r.Version.Hash, r.Seq)
		}
	}
}
