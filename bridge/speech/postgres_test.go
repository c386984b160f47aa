package speech

import (
	"context"
	"crypto/rand"
	"database/sql"
	"fmt"
	"net/url"
	"os"
	"testing"

	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/unsay/unsay/models"
)

// postgresEnv names a Postgres URL (postgres://user@host:port/db) for the
// ledger's Postgres tests — the same variable as the store's backend suite;
// without it they are skipped loudly, and with UNSAY_REQUIRE_ALL=1 that is a
// failure. Each test works in its own schema, dropped afterwards.
const postgresEnv = "UNSAY_TEST_POSTGRES"

// openPostgres returns a database whose search_path is a fresh schema.
func openPostgres(t *testing.T) (*sql.DB, func() *sql.DB) {
	t.Helper()
	base := os.Getenv(postgresEnv)
	if base == "" {
		msg := "SKIPPED: speech ledger on Postgres — set " + postgresEnv + "=postgres://… (apt-get install postgresql)"
		if os.Getenv("UNSAY_REQUIRE_ALL") == "1" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	admin, err := sql.Open("pgx", base)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Close() })
	schema := "speech_test_" + fmt.Sprintf("%x", rand.Text()[:8])
	if _, err := admin.Exec("CREATE SCHEMA " + schema); err != nil {
		t.Fatalf("create schema: %v", err)
	}
	t.Cleanup(func() { _, _ = admin.Exec("DROP SCHEMA " + schema + " CASCADE") })
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	open := func() *sql.DB {
		db, err := sql.Open("pgx", u.String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	}
	return open(), open
}

func TestLedger_PostgresAnnouncementSemantics(t *testing.T) {
	db, reopen := openPostgres(t)
	ctx := context.Background()
	l, err := newLedger(ctx, db, DialectPostgres)
	if err != nil {
		t.Fatalf("newLedger: %v", err)
	}
	markHeard(t, l, 1)
	observe(t, l, 2, false)
	observe(t, l, 3, false) // stacked
	if _, err := l.Observe(ctx, "ray", "care://ray/exercise", heardState{}, 1, false, false); err != nil {
		t.Fatal(err)
	}
	if got := pendingSpans(t, l, "ray"); len(got) != 2 || got[0] != (span{1, 3}) || got[1] != (span{0, 1}) {
		t.Fatalf("pending = %v, want [{1 3} {0 1}]", got)
	}
	observe(t, l, 4, true) // the words went back to what he heard
	if got := pendingSpans(t, l, "ray"); len(got) != 1 || got[0] != (span{0, 1}) {
		t.Fatalf("after unchanged words pending = %v", got)
	}

	// Durable, and migrations are idempotent, across a new connection pool.
	l2, err := newLedger(ctx, reopen(), DialectPostgres)
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	if h, err := l2.Heard(ctx, "ray", wb); err != nil || h != 4 {
		t.Fatalf("heard after reopen = %d, %v; want 4", h, err)
	}
	if err := l2.MarkHeard(ctx, "ray", "care://ray/exercise", 1, models.Hearing{}); err != nil {
		t.Fatal(err)
	}
	if n, err := l2.Backlog(ctx); err != nil || n != 0 {
		t.Fatalf("backlog = %d, %v; want 0", n, err)
	}

	// What he may have heard, on Postgres: an offer, a revert, the delivery.
	observe(t, l2, 5, false)
	offered(t, l2, 5)
	if rows, err := l2.Pending(ctx, "ray"); err != nil || len(rows) != 1 || !rows[0].Offered {
		t.Fatalf("offered pending = %+v, %v", rows, err)
	}
	observeWords(t, l2, 6, true, false) // v6 has v4's words
	markHeard(t, l2, 5)
	rows, err := l2.Pending(ctx, "ray")
	if err != nil || len(rows) != 1 || rows[0].From != 5 || rows[0].To != 6 || rows[0].Offered {
		t.Fatalf("after the revert and the delivery pending = %+v, %v; want 5 → 6, not again", rows, err)
	}
}

func TestRun_OnPostgresNothingLostAndNothingRepeated(t *testing.T) {
	_, reopen := openPostgres(t)
	f := newFakeCare(t)
	seedRay(f)
	p1 := startPrincipalOn(t, f, reopen(), DialectPostgres, "ray")
	waitConnected(t, p1)
	hearAll(t, p1, "ray")
	n := f.publish(wb, "Full weight-bearing as tolerated.")
	waitPending(t, p1, wb, n)
	p1.stop()

	p2 := startPrincipalOn(t, f, reopen(), DialectPostgres, "ray")
	waitConnected(t, p2)
	as := pendingOf(t, p2, "ray")
	if len(as) != 1 || as[0].Heard == nil || as[0].Heard.N != 1 || as[0].Current.N != n {
		t.Fatalf("after restart pending = %+v, want v1 → v%d", as, n)
	}
	if err := p2.MarkHeard(context.Background(), "ray", as[0].URI(), n, models.Hearing{}); err != nil {
		t.Fatal(err)
	}
	p2.stop()

	p3 := startPrincipalOn(t, f, reopen(), DialectPostgres, "ray")
	waitConnected(t, p3)
	if got := pendingOf(t, p3, "ray"); len(got) != 0 {
		t.Fatalf("after hearing and restarting, pending = %+v", got)
	}
}
