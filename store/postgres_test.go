package store

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
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
	// covers Postgres); "-test.bench=^$" after the original flags wins.
	cmd := exec.Command(os.Args[0], append(os.Args[1:], "-test.bench=^$")...)
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
