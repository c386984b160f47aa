package proactive

import (
	"context"
	"crypto/rand"
	"database/sql"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"
)

// openPostgres returns two handles (two "instances") on a fresh schema of
// the database UNSAY_TEST_POSTGRES names, or skips loudly without it.
func openPostgres(t *testing.T) (*sql.DB, *sql.DB) {
	t.Helper()
	base := os.Getenv("UNSAY_TEST_POSTGRES")
	if base == "" {
		msg := "SKIPPED: audible budget on Postgres — set UNSAY_TEST_POSTGRES=postgres://… (apt-get install postgresql)"
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
	schema := "budget_test_" + strings.ToLower(rand.Text()[:10])
	if _, err := admin.Exec("CREATE SCHEMA " + schema); err != nil {
		t.Fatal(err)
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
	return open(), open()
}

func TestBudget_OnPostgresTwoInstancesRacingForTheLastSlotGetOne(t *testing.T) {
	dbA, dbB := openPostgres(t)
	clk := &fakeClock{t: time.Date(2026, 10, 8, 12, 0, 0, 0, time.UTC)}
	ctx := context.Background()
	newPG := func(db *sql.DB) *Budget {
		b, err := NewBudget(ctx, BudgetConfig{DB: db, Dialect: "postgres", Max: 3, Clock: clk.Now})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	a, b := newPG(dbA), newPG(dbB)
	for i := 0; i < 2; i++ {
		if _, err := a.Reserve(ctx, "ray"); err != nil {
			t.Fatal(err)
		}
	}
	var ok atomic.Int32
	var wg sync.WaitGroup
	for _, bud := range []*Budget{a, b, a, b, a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := bud.Reserve(ctx, "ray"); err == nil {
				ok.Add(1)
			}
		}()
	}
	wg.Wait()
	if ok.Load() != 1 {
		t.Fatalf("%d racing reservations succeeded with one slot left, want 1", ok.Load())
	}
	// Twin: the window slides and a slot frees.
	clk.Advance(time.Hour + time.Second)
	if _, err := b.Reserve(ctx, "ray"); err != nil {
		t.Fatalf("after the window: %v", err)
	}
}
