package store

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/unsay/unsay/models"
)

// writerLoad runs, at once, n revisions through Publish on pub, n ledger
// writes and n budget reservations with refunds on other, and returns the
// first error each of the three met.
func writerLoad(ctx context.Context, pub, other *Store, n int) []error {
	errs := make([]error, 3)
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 0; i < n && errs[0] == nil; i++ {
			_, errs[0] = pub.Publish(ctx, writer, PublishInput{Patient: "ray", Domain: "weight_bearing", Audience: models.AudienceUser,
				Value: fmt.Sprintf("Full weight as tolerated, revision %d.", i), AuthorID: "okafor", AuthorLabel: "Sarah Okafor, physio"})
		}
	})
	wg.Go(func() {
		for i := 0; i < n && errs[1] == nil; i++ {
			errs[1] = other.HeardLedger().Follow(ctx, "ray", map[string]int{fmt.Sprintf("care://ray/f%d", i): 1})
		}
	})
	wg.Go(func() {
		for i := 0; i < n && errs[2] == nil; i++ {
			var id int64
			if id, _, errs[2] = other.AlertBudget().ReserveSlot(ctx, "ray", 1<<20, time.Unix(0, 0), time.Now()); errs[2] == nil {
				errs[2] = other.AlertBudget().RefundSlot(ctx, id)
			}
		}
	})
	wg.Wait()
	return errs
}

func openShortBusy(t *testing.T, path string) *Store {
	t.Helper()
	s, err := Open(context.Background(), Options{DSN: path, AuditKey: []byte("test-audit-key"), busyTimeoutMS: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// With a 1 ms busy timeout, a writer that met another's SQLite write lock
// instead of queuing on writeMu would fail with "database is locked".
func TestWriters_TheLedgerAndBudgetQueueBehindPublishInsteadOfSpinningOnSQLitesLock(t *testing.T) {
	if onPostgres() {
		t.Skip("SQLite's one write lock per file; Postgres locks rows and tables")
	}
	s := openShortBusy(t, filepath.Join(t.TempDir(), "unsay.db"))
	for i, err := range writerLoad(context.Background(), s, s, 150) {
		if err != nil {
			t.Errorf("writer %d (0 Publish, 1 ledger, 2 budget): %v", i, err)
		}
	}
}

// The twin: the same load from two stores on one file (as two processes
// would be: writeMu is per store) does meet SQLite's lock, so the test
// above would fail if the ledger or the budget bypassed writeMu.
func TestWriters_TwoStoresOnOneFileDoMeetSQLitesLockUnderTheSameLoad(t *testing.T) {
	if onPostgres() {
		t.Skip("SQLite's one write lock per file")
	}
	path := filepath.Join(t.TempDir(), "unsay.db")
	a, b := openShortBusy(t, path), openShortBusy(t, path)
	for round := 0; round < 20; round++ {
		for _, err := range writerLoad(context.Background(), a, b, 150) {
			var ue *UnavailableError
			if err != nil && (strings.Contains(err.Error(), "database is locked") || errors.As(err, &ue)) {
				return // met the lock
			}
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
		}
	}
	t.Fatal("two stores on one file never met each other's write lock: the load does not make writers collide")
}
