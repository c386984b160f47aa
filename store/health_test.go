package store

import (
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/unsay/unsay/models"
)

// onOneConnection makes every later statement of s run on one pooled
// connection and runs setup on it (SQLite pragmas and Postgres session
// settings are per connection). It first writes a creation, a revision and
// audit rows, so the write path's statements are prepared while the
// pool still has room (preparing needs a connection of its own).
func onOneConnection(t *testing.T, s *Store, setup ...string) {
	t.Helper()
	mustPublish(t, s, writer, in("warm_up", models.AudienceAssistant, "one"))
	mustPublish(t, s, writer, in("warm_up", models.AudienceAssistant, "two"))
	for _, r := range []AuditReason{ReasonInvalid, ReasonTooLarge, ReasonTooLarge} { // an append, then a collapse
		if err := s.Audit(context.Background(), AuditEntry{Actor: "anonymous", Outcome: OutcomeRefused, Reason: r, Via: "hmac"}); err != nil {
			t.Fatal(err)
		}
	}
	s.db.SetMaxOpenConns(1)
	for _, q := range setup {
		if _, err := s.db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

// setProbeEvery sets how often WriteHealth re-probes a faulty store.
func setProbeEvery(s *Store, d time.Duration) {
	s.health.mu.Lock()
	s.health.faultEvery = d
	s.health.mu.Unlock()
}

// waitWriteHealth polls WriteHealth until ok(err), failing after 30 s.
func waitWriteHealth(t *testing.T, s *Store, ok func(error) bool) error {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := s.WriteHealth(context.Background())
		if ok(err) {
			return err
		}
		if time.Now().After(deadline) {
			t.Fatalf("WriteHealth stayed %v for 30 s", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func wantUnavailable(t *testing.T, err error, reason string) {
	t.Helper()
	var ue *UnavailableError
	if !errors.Is(err, ErrUnavailable) || !errors.As(err, &ue) || ue.Reason != reason || ue.RetryAfter <= 0 {
		t.Fatalf("err = %v, want an UnavailableError %q with a RetryAfter", err, reason)
	}
}

// TestPublish_FullDiskIsUnavailableAndWriteHealthSaysSoUntilItClears: a full
// disk once made every write a bare internal error while readiness said
// all was well. Now Publish answers an UnavailableError naming the disk,
// nothing is written, and WriteHealth reports it until writes commit again.
// (SQLite's max_page_count stands in for the disk: the same SQLITE_FULL.)
func TestPublish_FullDiskIsUnavailableAndWriteHealthSaysSoUntilItClears(t *testing.T) {
	if onPostgres() {
		t.Skip("SQLite's max_page_count; the read-only test covers Postgres")
	}
	ctx := context.Background()
	s, _ := openTest(t, newClock())
	mustPublish(t, s, writer, in("weight_bearing", models.AudienceUser, "Partial weight-bearing."))
	if err := s.WriteHealth(ctx); err != nil {
		t.Fatalf("WriteHealth before the disk fills = %v", err)
	}
	var pages int
	if err := s.db.QueryRow(`PRAGMA page_count`).Scan(&pages); err != nil {
		t.Fatal(err)
	}
	onOneConnection(t, s, "PRAGMA max_page_count = "+strconv.Itoa(pages))
	// Hold the fault still while it is asserted: max_page_count refuses
	// only growth, so a probe (which rewrites one row in place) would pass.
	setProbeEvery(s, time.Hour)
	before, _ := s.LastSeq(ctx)
	_, err := s.Publish(ctx, writer, in("notes", models.AudienceAssistant, strings.Repeat("n", models.MaxValueBytes)))
	wantUnavailable(t, err, "the disk is full")
	if last, _ := s.LastSeq(ctx); last != before {
		t.Fatalf("a write on a full disk moved seq %d → %d", before, last)
	}
	wantUnavailable(t, s.WriteHealth(ctx), "the disk is full")

	// Positive twin: room again → the next probe clears it, and writes commit.
	if _, err := s.db.Exec(`PRAGMA max_page_count = 1073741823`); err != nil {
		t.Fatal(err)
	}
	setProbeEvery(s, writeProbeInterval)
	waitWriteHealth(t, s, func(err error) bool { return err == nil })
	mustPublish(t, s, writer, in("notes", models.AudienceAssistant, strings.Repeat("n", models.MaxValueBytes)))
}

// TestPublish_ReadOnlyDatabaseIsUnavailableOnBothBackends: a database that
// turned read-only answers an UnavailableError naming it, on SQLite
// (query_only) and on Postgres (a read-only session, as on a standby).
func TestPublish_ReadOnlyDatabaseIsUnavailableOnBothBackends(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t, newClock())
	mustPublish(t, s, writer, in("weight_bearing", models.AudienceUser, "Partial weight-bearing."))
	readOnly, writable := "PRAGMA query_only = 1", "PRAGMA query_only = 0"
	if onPostgres() {
		readOnly, writable = "SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY", "SET SESSION CHARACTERISTICS AS TRANSACTION READ WRITE"
	}
	onOneConnection(t, s, readOnly)
	_, err := s.Publish(ctx, writer, in("weight_bearing", models.AudienceUser, "Full weight-bearing as tolerated."))
	wantUnavailable(t, err, "the database is read-only")
	err = s.Audit(ctx, AuditEntry{Actor: "anonymous", Outcome: OutcomeRefused, Reason: ReasonBadSignature, Via: "hmac"})
	wantUnavailable(t, err, "the database is read-only")
	wantUnavailable(t, s.WriteHealth(ctx), "the database is read-only")
	if r, err := s.Read(ctx, userRay, "care://ray/weight_bearing"); err != nil || r.Version.N != 1 {
		t.Fatalf("reads on a read-only database: %+v, %v; want v1", r.Version, err)
	}

	// Positive twin: writable again → healthy after a probe, and writes commit.
	if _, err := s.db.Exec(writable); err != nil {
		t.Fatal(err)
	}
	waitWriteHealth(t, s, func(err error) bool { return err == nil })
	if r := mustPublish(t, s, writer, in("weight_bearing", models.AudienceUser, "Full weight-bearing as tolerated.")); r.Version.N != 2 {
		t.Fatalf("write after recovery = v%d", r.Version.N)
	}
}

// TestPublish_RealFullDiskIsUnavailable fills a real 1 MiB tmpfs (root with
// CAP_SYS_ADMIN only; skipped elsewhere), as an operator would meet it.
func TestPublish_RealFullDiskIsUnavailable(t *testing.T) {
	if onPostgres() || testing.Short() {
		t.Skip("SQLite on a real filesystem; not in -short")
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs here (needs root): %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", "-l", dir).Run() })
	ctx := context.Background()
	s, err := Open(ctx, Options{DSN: filepath.Join(dir, "unsay.db"), AuditKey: []byte("test-audit-key"), Clock: newClock().Now})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	acked := 0
	for i := 0; ; i++ {
		_, err := s.Publish(ctx, writer, in("notes"+strconv.Itoa(i), models.AudienceAssistant, strings.Repeat("n", models.MaxValueBytes)))
		if err != nil {
			wantUnavailable(t, err, "the disk is full")
			break
		}
		acked++
		if i > 1000 {
			t.Fatal("a 1 MiB tmpfs never filled")
		}
	}
	wantUnavailable(t, s.WriteHealth(ctx), "the disk is full")
	if last, _ := s.LastSeq(ctx); int(last) != acked {
		t.Fatalf("LastSeq = %d, want the %d acknowledged writes", last, acked)
	}
	// A second store opened on the full disk still reads what was
	// acknowledged, and the chain verifies.
	res, err := s.Verify(ctx, dualRay, "care-internal://ray/notes0")
	if err != nil || !res.Intact {
		t.Fatalf("Verify on the full disk: %+v, %v", res, err)
	}
}

// TestPublish_AbandonedBeforeTheLockWritesNothing: a write whose client has
// hung up before it took the write lock is ErrAbandoned (not a store
// failure) and leaves nothing behind.
func TestPublish_AbandonedBeforeTheLockWritesNothing(t *testing.T) {
	s, _ := openTest(t, newClock())
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	pi := in("weight_bearing", models.AudienceUser, "Full weight-bearing as tolerated.")
	pi.Audit = &AuditEntry{Actor: "okafor", Via: "bearer"}
	_, err := s.Publish(ctx, writer, pi)
	if !errors.Is(err, ErrAbandoned) || !errors.Is(err, context.Canceled) || errors.Is(err, ErrUnavailable) {
		t.Fatalf("Publish with a cancelled context = %v, want ErrAbandoned", err)
	}
	if last, _ := s.LastSeq(context.Background()); last != 0 {
		t.Fatalf("an abandoned write left seq %d", last)
	}
	if rows, _ := s.AuditRows(context.Background(), 0, 0); len(rows) != 0 {
		t.Fatalf("an abandoned write left audit rows: %+v", rows)
	}
	if err := s.WriteHealth(context.Background()); err != nil {
		t.Fatalf("an abandoned write made the store unhealthy: %v", err)
	}
	// Positive twin: the same write with a live context commits, audited.
	if r := mustPublish(t, s, writer, pi); !r.Audited || r.Version.N != 1 {
		t.Fatalf("live write = %+v", r)
	}
}
