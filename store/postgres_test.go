package store

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/unsay/unsay/models"
)

// The store's suite runs on both backends. `go test ./store/` runs every
// test on SQLite; then, when UNSAY_TEST_POSTGRES names a database
// (postgres://user:pass@127.0.0.1:5432/unsay_test?sslmode=disable), TestMain
// runs the same test binary a second time with storeTestBackendEnv=postgres,
// in which openTest gives each test a fresh schema of that database.

const (
	// testPostgresEnv names the Postgres database the suite may use.
	testPostgresEnv = "UNSAY_TEST_POSTGRES"
	// storeTestBackendEnv is "postgres" in the second pass.
	storeTestBackendEnv = "UNSAY_STORE_TEST_BACKEND"
	// requireAllEnv=1 turns a skipped Postgres pass into a failure.
	requireAllEnv = "UNSAY_REQUIRE_ALL"
)

const postgresSkipLine = "SKIPPED: Postgres backend — set UNSAY_TEST_POSTGRES=postgres://… (apt-get install postgresql)"

// onPostgres reports whether this process is the Postgres pass.
func onPostgres() bool { return os.Getenv(storeTestBackendEnv) == "postgres" }

// runBackends runs the suite on SQLite, then again on Postgres in a child
// process when UNSAY_TEST_POSTGRES is set, and returns the exit code.
func runBackends(m *testing.M) int {
	code := m.Run()
	if onPostgres() || os.Getenv(testPostgresEnv) == "" {
		return code
	}
	fmt.Println("=== store suite, second pass: Postgres backend (" + storeTestBackendEnv + "=postgres)")
	// Benchmarks run once, in the first pass (BenchmarkPublishPostgres
	// covers Postgres), and so do the Postgres-only tests (their names say
	// Postgres); flags after the original ones win, and the empty profile
	// flags keep the child from overwriting the first pass's profiles.
	cmd := exec.Command(os.Args[0], append(os.Args[1:], "-test.bench=^$", "-test.skip=Postgres",
		"-test.cpuprofile=", "-test.memprofile=", "-test.blockprofile=", "-test.mutexprofile=", "-test.trace=")...)
	cmd.Env = append(os.Environ(), storeTestBackendEnv+"=postgres")
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		fmt.Println("--- FAIL: store suite on Postgres:", err)
		return 1
	}
	return code
}

// TestPostgresBackend_SuiteRunsOnPostgresToo reports — loudly — whether the
// store suite also runs on Postgres, and fails under UNSAY_REQUIRE_ALL=1
// when it cannot.
func TestPostgresBackend_SuiteRunsOnPostgresToo(t *testing.T) {
	dsn := os.Getenv(testPostgresEnv)
	if dsn == "" {
		if os.Getenv(requireAllEnv) == "1" {
			t.Fatal(postgresSkipLine + " (UNSAY_REQUIRE_ALL=1)")
		}
		t.Skip(postgresSkipLine)
	}
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.PingContext(context.Background()); err != nil {
		t.Fatalf("%s=%s is not reachable: %v", testPostgresEnv, dsn, err)
	}
}

// testDSN returns a DSN for one test's own empty store: a SQLite file in
// t.TempDir(), or on the Postgres pass a fresh schema (dropped at cleanup)
// of the UNSAY_TEST_POSTGRES database.
func testDSN(t testing.TB) string {
	t.Helper()
	if !onPostgres() {
		return filepath.Join(t.TempDir(), "unsay.db")
	}
	return freshSchemaDSN(t)
}

// freshSchemaDSN creates an empty schema in the UNSAY_TEST_POSTGRES
// database, drops it at cleanup, and returns a DSN whose search_path is it.
// It skips (or fails, under UNSAY_REQUIRE_ALL=1) without the variable.
func freshSchemaDSN(t testing.TB) string {
	t.Helper()
	base := os.Getenv(testPostgresEnv)
	if base == "" {
		if os.Getenv(requireAllEnv) == "1" {
			t.Fatal(postgresSkipLine + " (UNSAY_REQUIRE_ALL=1)")
		}
		t.Skip(postgresSkipLine)
	}
	admin, err := sql.Open("pgx", base)
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 8)
	rand.Read(b)
	schema := "unsay_t_" + hex.EncodeToString(b)
	if _, err := admin.Exec(`CREATE SCHEMA ` + schema); err != nil {
		admin.Close()
		t.Fatalf("create schema in %s: %v", testPostgresEnv, err)
	}
	t.Cleanup(func() {
		defer admin.Close()
		if _, err := admin.Exec(`DROP SCHEMA ` + schema + ` CASCADE`); err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
	})
	sep := "?"
	if strings.Contains(base, "?") {
		sep = "&"
	}
	return base + sep + "search_path=" + schema
}

// tamperDB opens the database behind dsn directly, as an attacker with
// access to the database would (SQLite file path or postgres:// DSN).
// Queries written for SQLite get "AS BLOB" rewritten to "AS BYTEA".
func tamperDB(t *testing.T, dsn string) (*sql.DB, func(string) string) {
	t.Helper()
	if IsPostgresDSN(dsn) {
		db, err := sql.Open("pgx", dsn)
		if err != nil {
			t.Fatal(err)
		}
		return db, func(q string) string { return strings.ReplaceAll(q, " AS BLOB)", " AS BYTEA)") }
	}
	db, err := sql.Open("sqlite", "file:"+dsn+"?_busy_timeout=5000")
	if err != nil {
		t.Fatal(err)
	}
	return db, func(q string) string { return q }
}

// pgOnlyDSN is freshSchemaDSN for a test that exercises the Postgres
// backend itself; it runs in the first pass (the second would repeat it).
func pgOnlyDSN(t *testing.T) string {
	t.Helper()
	if onPostgres() {
		t.Skip("Postgres-only test: ran in the first pass")
	}
	return freshSchemaDSN(t)
}

func openDSN(t *testing.T, dsn string) *Store {
	t.Helper()
	s, err := Open(context.Background(), Options{DSN: dsn, AuditKey: []byte("test-audit-key")})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestRebindDollar_NumbersPlaceholdersOutsideQuotesAndComments(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`SELECT 1`, `SELECT 1`},
		{`a = ? AND b IN (?, ?)`, `a = $1 AND b IN ($2, $3)`},
		{`x = '?' AND y = ? AND "q?" = ?`, `x = '?' AND y = $1 AND "q?" = $2`},
		{"-- why?\nSELECT ?", "-- why?\nSELECT $1"},
		{`'it''s ?' || ?`, `'it''s ?' || $1`},
		// Each of these was rewritten inside the literal by the old rewriter.
		{`E'it\'s ?' || ?`, `E'it\'s ?' || $1`},     // a backslash-escaped quote in an escape string
		{`e'\\' || ? || '\'`, `e'\\' || $1 || '\'`}, // E'\\' ends at its second quote; a plain '\' ends at once
		{`"a""?" = ?`, `"a""?" = $1`},               // a doubled quote inside an identifier
		{`/* why? */ SELECT ?`, `/* why? */ SELECT $1`},
		{`/* a /* nested? */ still? */ ?`, `/* a /* nested? */ still? */ $1`},
		{`$$ what? $$ || ?`, `$$ what? $$ || $1`},
		{`$q$ it's $$ ? $q$ || ?`, `$q$ it's $$ ? $q$ || $1`},
		{`SELECT $1, ?`, `SELECT $1, $1`}, // a positional parameter is no dollar quote (and is left alone)
		{`name$x$ = ?`, `name$x$ = $1`},   // $ inside an identifier starts nothing
		{`x = ? -- trailing?`, `x = $1 -- trailing?`},
		{`'unterminated ?`, `'unterminated ?`},
	} {
		if got := rebindDollar(tc.in); got != tc.want {
			t.Errorf("rebindDollar(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// P-20 on Postgres: a commit is acknowledged only once it is durable.
func TestOpen_PostgresCommitsDurably(t *testing.T) {
	s := openDSN(t, pgOnlyDSN(t))
	db, dialect := s.db, s.d.name()
	if dialect != "postgres" {
		t.Fatalf("dialect %q, want postgres", dialect)
	}
	for setting, want := range map[string]string{"synchronous_commit": "on", "fsync": "on"} {
		var got string
		if err := db.QueryRow(`SELECT current_setting($1)`, setting).Scan(&got); err != nil || got != want {
			t.Errorf("%s = %q, %v; want %q", setting, got, err, want)
		}
	}
}

func TestOpen_PostgresRefusesASearchPathWithoutSchema(t *testing.T) {
	base := pgOnlyDSN(t)
	bad := base[:strings.LastIndex(base, "search_path=")] + "search_path=no_such_schema_here"
	if s, err := Open(context.Background(), Options{DSN: bad}); err == nil {
		s.Close()
		t.Fatal("Open with a search_path naming no schema succeeded")
	}
	openDSN(t, base) // its positive twin
}

// Several instances starting at once on an empty schema: every Open
// succeeds and each migration is applied exactly once.
func TestOpen_PostgresInstancesStartingAtOnceMigrateOnce(t *testing.T) {
	dsn := pgOnlyDSN(t)
	const n = 4
	stores := make([]*Store, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			stores[i], errs[i] = Open(context.Background(), Options{DSN: dsn, AuditKey: []byte("test-audit-key")})
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("instance %d: %v", i, err)
		}
		defer stores[i].Close()
	}
	ms, _ := postgresDialect{}.migrations()
	db := stores[0].db
	var applied, heads int
	if err := db.QueryRow(`SELECT COUNT(*) FROM schema_migrations`).Scan(&applied); err != nil || applied != len(ms) {
		t.Fatalf("schema_migrations has %d rows (%v), want %d", applied, err, len(ms))
	}
	if err := db.QueryRow(`SELECT COUNT(*) FROM audit_head`).Scan(&heads); err != nil || heads != 1 {
		t.Fatalf("audit_head has %d rows (%v), want 1", heads, err)
	}
}

// A commit on instance A wakes instance B's watchers through NOTIFY (not
// B's 1 s poll: only a wakeup closes the wake channel), and B's watcher
// delivers it.
func TestFeed_PostgresCommitOnOneInstanceWakesAnother(t *testing.T) {
	dsn := pgOnlyDSN(t)
	a, b := openDSN(t, dsn), openDSN(t, dsn)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch := b.Watch(ctx, 0)
	wake := b.wakeChan()
	r := mustPublish(t, a, writer, in("weight_bearing", models.AudienceUser, "Full weight-bearing as tolerated."))
	select {
	case <-wake:
	case <-time.After(5 * time.Second):
		t.Fatal("B was not woken by A's commit")
	}
	select {
	case c := <-ch:
		if c.Seq != r.Seq || c.URI.String() != "care://ray/weight_bearing" || c.Version != 1 {
			t.Fatalf("B's watcher got %+v, want seq %d care://ray/weight_bearing v1", c, r.Seq)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("B's watcher did not deliver A's commit")
	}
}

// The NOTIFY payload is {seq, uri, version}: never the value (P-9).
func TestFeed_PostgresNotifyCarriesSeqURIVersionNeverTheValue(t *testing.T) {
	dsn := pgOnlyDSN(t)
	s := openDSN(t, dsn)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := listen(ctx, cfg, s.d.(postgresDialect).channel)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	const secret = "Fall risk HIGH; lives alone."
	mustPublish(t, s, writer, in("risk", models.AudienceAssistant, secret))
	r := mustPublish(t, s, writer, in("risk", models.AudienceAssistant, secret+" v2"))
	var last *pgconn.Notification
	for range 2 {
		if last, err = conn.WaitForNotification(ctx); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(last.Payload, "Fall risk") {
			t.Fatalf("NOTIFY payload carries the value: %s", last.Payload)
		}
	}
	var got ChangeNotice
	if err := json.Unmarshal([]byte(last.Payload), &got); err != nil {
		t.Fatal(err)
	}
	want := ChangeNotice{Seq: r.Seq, URI: "care-internal://ray/risk", Version: 2}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("payload %s (-want +got):\n%s", last.Payload, d)
	}
}

// Eight writers split across two instances: versions 1…800 contiguous,
// the chain intact, the feed's seq gap-free and in commit order, the audit
// chain intact.
func TestPublish_PostgresEightWritersOnTwoInstancesStayContiguous(t *testing.T) {
	dsn := pgOnlyDSN(t)
	a, b := openDSN(t, dsn), openDSN(t, dsn)
	ctx := context.Background()
	const workers, each = 8, 100
	var wg sync.WaitGroup
	errs := make(chan error, workers*each)
	for w := range workers {
		s := a
		if w%2 == 1 {
			s = b
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				r, err := s.Publish(ctx, writer, in("weight_bearing", models.AudienceUser, fmt.Sprintf("w%d i%d", w, i)))
				if err == nil {
					err = s.Audit(ctx, AuditEntry{Actor: "okafor", URI: r.Version.URI().String(), Outcome: "accepted", Reason: ReasonOK, Via: "bearer"})
				}
				if err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	hist, err := b.History(ctx, userRay, "care://ray/weight_bearing")
	if err != nil || len(hist) != workers*each {
		t.Fatalf("History: %d versions, %v; want %d", len(hist), err, workers*each)
	}
	for i, v := range hist {
		if v.N != i+1 {
			t.Fatalf("version %d at position %d: not contiguous", v.N, i+1)
		}
	}
	if r, err := a.Verify(ctx, userRay, "care://ray/weight_bearing"); err != nil || !r.Intact {
		t.Fatalf("Verify = %+v, %v", r.BrokenAt, err)
	}
	changes, err := a.changesAfter(ctx, 0, workers*each+1)
	if err != nil || len(changes) != workers*each {
		t.Fatalf("feed: %d changes, %v", len(changes), err)
	}
	for i, c := range changes {
		if c.Seq != int64(i+1) || c.Version != i+1 {
			t.Fatalf("feed position %d = seq %d v%d: not gap-free in commit order", i+1, c.Seq, c.Version)
		}
	}
	if bad, err := b.VerifyAudit(ctx); err != nil || bad != 0 {
		t.Fatalf("VerifyAudit = %d, %v", bad, err)
	}
}

// When an instance's LISTEN connection is killed, it reconnects (with
// backoff), its watchers catch up on what was committed meanwhile, and
// later commits wake it again.
func TestFeed_PostgresListenerReconnectsAndWatchersMissNothing(t *testing.T) {
	dsn := pgOnlyDSN(t)
	a, b := openDSN(t, dsn), openDSN(t, dsn)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch := b.Watch(ctx, 0)
	channel := b.d.(postgresDialect).channel
	db := a.db
	listeners := func() []int {
		rows, err := db.Query(`SELECT pid FROM pg_stat_activity WHERE query = $1`, `LISTEN `+pgx.Identifier{channel}.Sanitize())
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var pids []int
		for rows.Next() {
			var pid int
			rows.Scan(&pid)
			pids = append(pids, pid)
		}
		return pids
	}
	before := listeners()
	if len(before) != 2 {
		t.Fatalf("%d LISTEN connections, want 2 (one per instance)", len(before))
	}
	for _, pid := range before {
		if _, err := db.Exec(`SELECT pg_terminate_backend($1)`, pid); err != nil {
			t.Fatal(err)
		}
	}
	// Committed while nobody listens.
	for i := range 3 {
		mustPublish(t, a, writer, in("exercise", models.AudienceUser, fmt.Sprintf("while deaf %d", i)))
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		now := listeners()
		if len(now) == 2 && !slices.Contains(before, now[0]) && !slices.Contains(before, now[1]) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("LISTEN connections not re-opened: before %v, now %v", before, now)
		}
		time.Sleep(20 * time.Millisecond)
	}
	for i := 1; i <= 3; i++ {
		select {
		case c := <-ch:
			if c.Seq != int64(i) {
				t.Fatalf("change %+v, want seq %d", c, i)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("change %d committed while B was not listening never arrived", i)
		}
	}
	wake := b.wakeChan()
	mustPublish(t, a, writer, in("exercise", models.AudienceUser, "after reconnect"))
	select {
	case <-wake:
	case <-time.After(5 * time.Second):
		t.Fatal("after reconnecting, B is not woken by A's commits")
	}
	if c := <-ch; c.Seq != 4 {
		t.Fatalf("change %+v, want seq 4", c)
	}
}

// BenchmarkPublishPostgres is BenchmarkPublish on Postgres (synchronous
// commit): publishes/s = 1e9 / ns/op.
func BenchmarkPublishPostgres(b *testing.B) {
	if os.Getenv(testPostgresEnv) == "" {
		b.Skip(postgresSkipLine)
	}
	s, err := Open(context.Background(), Options{DSN: freshSchemaDSN(b), AuditKey: []byte("test-audit-key")})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	if _, err := SeedBench(ctx, s, time.Now()); err != nil {
		b.Fatal(err)
	}
	pi := PublishInput{Patient: "bench", Domain: "weight_bearing", Audience: models.AudienceUser,
		Value: "Full weight-bearing as tolerated.", AuthorID: "okafor", AuthorLabel: "Sarah Okafor, physio", Priority: 0.9}
	b.ResetTimer()
	for b.Loop() {
		if _, err := s.Publish(ctx, benchWriter, pi); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "publishes/s")
}

// Two instances creating the same tables at once: without the
// migration lock one can fail; under WithMigrationLock both succeed.
func TestWithMigrationLock_PostgresSerializesTableCreationAcrossInstances(t *testing.T) {
	ddl := []string{
		`CREATE TABLE IF NOT EXISTS ext_a (id BIGINT PRIMARY KEY, v TEXT NOT NULL)`,
		`CREATE TABLE IF NOT EXISTS ext_b (id BIGINT PRIMARY KEY, v TEXT NOT NULL)`,
		`CREATE INDEX IF NOT EXISTS ext_b_v ON ext_b (v)`,
	}
	for round := range 5 {
		dsn := pgOnlyDSN(t)
		a, b := openDSN(t, dsn), openDSN(t, dsn)
		var wg sync.WaitGroup
		errs := make(chan error, 2)
		for _, s := range []*Store{a, b} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs <- s.WithMigrationLock(context.Background(), func(ctx context.Context) error {
					db := s.db
					for _, q := range ddl {
						if _, err := db.ExecContext(ctx, q); err != nil {
							return err
						}
					}
					return nil
				})
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
		}
	}
}

func TestWithMigrationLock_ReturnsTheFunctionsError(t *testing.T) {
	s, _ := openTest(t, nil)
	want := errors.New("boom")
	if err := s.WithMigrationLock(context.Background(), func(context.Context) error { return want }); !errors.Is(err, want) {
		t.Fatalf("WithMigrationLock = %v, want %v", err, want)
	}
	if err := s.WithMigrationLock(context.Background(), func(context.Context) error { return nil }); err != nil {
		t.Fatal(err)
	}
}
