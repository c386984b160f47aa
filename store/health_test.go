package store

import (
	"context"
	"database/sql"
	"errors"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
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

// holdWriteLock takes the SQLite file's write lock at path on a connection
// of its own (BEGIN EXCLUSIVE), as another process — `sqlite3 unsay.db
// 'BEGIN EXCLUSIVE;'` — would, until the returned release is called.
func holdWriteLock(t *testing.T, path string) (release func()) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(context.Background(), "BEGIN EXCLUSIVE"); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	release = func() {
		once.Do(func() {
			if _, err := conn.ExecContext(context.Background(), "ROLLBACK"); err != nil {
				t.Error(err)
			}
			conn.Close()
			db.Close()
		})
	}
	t.Cleanup(release)
	return release
}

// healthWithin asks WriteHealthState with a 1 s context and fails unless it
// answers within 2 s (the writers' busy timeout is 10 s).
func healthWithin(t *testing.T, s *Store) WriteHealthReport {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	start := time.Now()
	rep := s.WriteHealthState(ctx)
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("WriteHealthState with a 1 s context answered after %s", d)
	}
	return rep
}

// T5: readiness learnt of a database locked by another process only from a
// failed commit or its 15 s probe, and the probe held the asking request
// for the whole 10 s busy timeout. Now WriteHealthState answers within its
// context while the lock is held, says "the database is busy" within
// seconds of the lock being taken (its lock check waits 500 ms for it),
// and healthy again once the lock is released.
func TestWriteHealth_AnswersWithinItsContextAndSaysBusyWhileAnotherProcessHoldsTheLock(t *testing.T) {
	if onPostgres() {
		t.Skip("SQLite's file lock, held by another connection")
	}
	s, path := openTest(t, newClock()) // writers wait the default 10 s busy timeout
	mustPublish(t, s, writer, in("weight_bearing", models.AudienceUser, "Partial weight-bearing."))
	if rep := healthWithin(t, s); rep.Err != nil || rep.CheckedAt.IsZero() {
		t.Fatalf("WriteHealthState before the lock = %+v, want healthy with a time", rep)
	}

	release := holdWriteLock(t, path)
	deadline := time.Now().Add(5 * time.Second)
	for {
		rep := healthWithin(t, s)
		if rep.Err != nil {
			wantUnavailable(t, rep.Err, "the database is busy")
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("WriteHealthState still healthy 5 s after another connection took the write lock")
		}
		time.Sleep(100 * time.Millisecond)
	}
	for range 3 { // and it stays answered within its context, busy, while the lock is held
		wantUnavailable(t, healthWithin(t, s).Err, "the database is busy")
		time.Sleep(300 * time.Millisecond)
	}

	// Positive twin: released → healthy again within seconds, and writes commit.
	release()
	deadline = time.Now().Add(5 * time.Second)
	for healthWithin(t, s).Err != nil {
		if time.Now().After(deadline) {
			t.Fatal("WriteHealthState still busy 5 s after the lock was released")
		}
		time.Sleep(100 * time.Millisecond)
	}
	mustPublish(t, s, writer, in("weight_bearing", models.AudienceUser, "Full weight-bearing as tolerated."))
}

// T5: a writer of this process waiting for a lock held by another process
// makes WriteHealthState say busy after lockWaitBound, without a probe of
// its own (the probe would queue behind that writer).
func TestWriteHealth_SaysBusyWhileAWriterWaitsForTheLockPastItsBound(t *testing.T) {
	if onPostgres() {
		t.Skip("SQLite's file lock, held by another connection")
	}
	s, path := openTest(t, newClock())
	mustPublish(t, s, writer, in("weight_bearing", models.AudienceUser, "Partial weight-bearing."))
	if rep := healthWithin(t, s); rep.Err != nil {
		t.Fatalf("before the lock: %v", rep.Err)
	}
	// Hold the probes still, so only the waiting writer can tell.
	s.health.mu.Lock()
	s.health.lockEvery, s.health.healthyEvery = time.Hour, time.Hour
	s.health.mu.Unlock()
	release := holdWriteLock(t, path)
	done := make(chan error, 1)
	go func() {
		_, err := s.Publish(context.Background(), writer, in("weight_bearing", models.AudienceUser, "Full weight-bearing as tolerated."))
		done <- err
	}()
	time.Sleep(lockWaitBound + 200*time.Millisecond)
	wantUnavailable(t, healthWithin(t, s).Err, "the database is busy")
	// Positive twin: once the lock is released the waiting write commits
	// (it never gave up: it was not answered 503) and health is good again.
	release()
	if err := <-done; err != nil {
		t.Fatalf("the write waiting for the lock = %v, want it committed once the lock was released", err)
	}
	if rep := healthWithin(t, s); rep.Err != nil {
		t.Fatalf("after the write committed: %v", rep.Err)
	}
}

// T4: writes queued behind one that waited out the busy timeout for a lock
// held by another process were each made to wait it again (and a failed
// batch retried each write alone, one timeout after another), so a client
// could wait several timeouts, past its deadline. Now they are refused
// with the same "the database is busy" within about one timeout, nothing
// written; the twin: released, the same writes commit.
func TestPublish_WritesQueuedBehindALockTimeoutAreRefusedWithinOneBusyTimeout(t *testing.T) {
	if onPostgres() {
		t.Skip("SQLite's file lock and busy timeout")
	}
	const busy = 2 * time.Second
	path := filepath.Join(t.TempDir(), "unsay.db")
	s, err := Open(context.Background(), Options{DSN: path, AuditKey: []byte("test-audit-key"), BusyTimeout: busy})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	mustPublish(t, s, writer, in("weight_bearing", models.AudienceUser, "Partial weight-bearing."))
	before, _ := s.LastSeq(context.Background())
	release := holdWriteLock(t, path)

	publishAll := func(value string) []error {
		var wg sync.WaitGroup
		errs := make([]error, 4)
		for i := range errs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				start := time.Now()
				_, errs[i] = s.Publish(context.Background(), writer, in("notes"+strconv.Itoa(i), models.AudienceAssistant, value))
				if d := time.Since(start); d > busy*3/2 {
					t.Errorf("write %d answered after %s; the busy timeout is %s", i, d, busy)
				}
			}()
		}
		wg.Wait()
		return errs
	}
	for i, err := range publishAll("While locked.") {
		if err == nil {
			t.Fatalf("write %d committed while another connection held the lock", i)
		}
		wantUnavailable(t, err, "the database is busy")
	}
	if last, _ := s.LastSeq(context.Background()); last != before {
		t.Fatalf("refused writes moved seq %d → %d", before, last)
	}
	// Positive twin: released, the same writes commit.
	release()
	for i, err := range publishAll("Released.") {
		if err != nil {
			t.Fatalf("write %d after the lock was released: %v", i, err)
		}
	}
}
