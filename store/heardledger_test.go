package store

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/unsay/unsay/bridge/speech/ledgertest"
	"github.com/unsay/unsay/models"
)

// P-19, P-24: the store's heard ledger keeps the speech principal's ledger
// contract — on SQLite in the first pass, on Postgres in the second (every
// open is another instance on one database).
func TestHeardLedger_KeepsTheLedgerContract(t *testing.T) {
	ledgertest.Run(t, func(t *testing.T) func() ledgertest.Ledger {
		dsn := testDSN(t)
		return func() ledgertest.Ledger { return openDSN(t, dsn).HeardLedger() }
	})
}

// tableColumns lists table's columns in order, on either backend.
func tableColumns(t *testing.T, s *Store, table string) []string {
	t.Helper()
	q := "SELECT name FROM pragma_table_info(?)"
	if s.Backend() == "postgres" {
		q = "SELECT column_name FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = ? ORDER BY ordinal_position"
	}
	rows, err := s.db.Query(s.d.rebind(q), table)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var got []string
	for rows.Next() {
		var c string
		if err := rows.Scan(&c); err != nil {
			t.Fatal(err)
		}
		got = append(got, c)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return got
}

// P-19: the ledger's tables hold patients, URIs, versions, states, times
// and device kinds — no clinical text.
func TestHeardLedger_TablesHoldNoClinicalText(t *testing.T) {
	s, _ := openTest(t, nil)
	for table, cols := range map[string][]string{
		"speech_heard":           {"patient", "uri", "version", "reopenable", "deferred_heard", "deferred_from", "settled_from"},
		"speech_announcements":   {"id", "patient", "uri", "from_version", "to_version", "state"},
		"speech_offered_version": {"patient", "uri", "version"},
		"speech_followed":        {"patient"},
		"speech_baseline":        {"patient", "uri", "version"},
		"speech_delivery":        {"id", "patient", "uri", "version", "event", "at_ms", "device", "via"},
		"alert_budget":           {"id", "patient", "reserved_at", "state"},
		"speech_not_played":      {"patient", "response", "at_ms"},
	} {
		if got := tableColumns(t, s, table); !slices.Equal(got, cols) {
			t.Errorf("%s columns = %v, want %v", table, got, cols)
		}
	}
	// The legacy offers table is converted and gone.
	if got := tableColumns(t, s, "speech_offered"); len(got) != 0 {
		t.Errorf("speech_offered still exists: %v", got)
	}
}

// previousBuild makes the database at dsn as a build before migration 040
// left it: the store's migrations before 040, then the speech package's
// own migrations (testdata/speech-migrations: its files as they were, run
// statement by statement as it ran them) up to and including upTo, and the
// audible budget's table as skill/proactive created it. It returns the raw
// database, for the caller to fill, and the placeholder rebinder.
func previousBuild(t *testing.T, dsn, upTo string) (*sql.DB, func(string) string) {
	t.Helper()
	ctx := context.Background()
	db, _ := tamperDB(t, dsn)
	var d dialect = sqliteDialect{}
	if IsPostgresDSN(dsn) {
		pd, err := postgresKeys(ctx, db)
		if err != nil {
			t.Fatal(err)
		}
		d = pd
	}
	ms, err := d.migrations()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if m.version >= 40 {
			break
		}
		if err := applyMigration(ctx, db, d, m); err != nil {
			t.Fatal(err)
		}
	}
	dir := filepath.Join("testdata", "speech-migrations", d.name())
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Name() > upTo {
			break
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		for _, stmt := range strings.SplitAfter(string(b), ";\n") {
			if strings.TrimSpace(stripComments(stmt)) == "" {
				continue
			}
			if _, err := db.ExecContext(ctx, stmt); err != nil {
				t.Fatalf("%s: %v", e.Name(), err)
			}
		}
	}
	idCol := "INTEGER PRIMARY KEY AUTOINCREMENT"
	if d.name() == "postgres" {
		idCol = "BIGSERIAL PRIMARY KEY"
	}
	for _, stmt := range []string{
		`CREATE TABLE IF NOT EXISTS alert_budget (id ` + idCol + `, patient TEXT NOT NULL, reserved_at BIGINT NOT NULL, state TEXT NOT NULL)`,
		`CREATE INDEX IF NOT EXISTS alert_budget_patient ON alert_budget (patient, reserved_at)`,
	} {
		if _, err := db.ExecContext(ctx, stmt); err != nil {
			t.Fatal(err)
		}
	}
	return db, d.rebind
}

func stripComments(s string) string {
	var out []string
	for _, line := range strings.Split(s, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(line), "--") {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}

// A database a previous build created — the ledger's tables made by the
// speech package's own migrations, the budget's by skill/proactive —
// opens with migrations 040 and 041, which keep every row: what he heard,
// what is owed, what he may have heard, his baseline, the delivery log and
// the budget's charged slots; and the ledger goes on writing. Twin: a
// fresh database gets the same tables (TestHeardLedger_TablesHoldNoClinicalText).
func TestHeardLedger_OpensTheLedgerAPreviousBuildCreated(t *testing.T) {
	ctx := context.Background()
	dsn := testDSN(t)
	db, q := previousBuild(t, dsn, "999")
	clock := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	for _, stmt := range []string{
		"INSERT INTO speech_heard (patient, uri, version) VALUES ('ray', 'care://ray/weight_bearing', 1)",
		"INSERT INTO speech_announcements (patient, uri, from_version, to_version, state) VALUES ('ray', 'care://ray/weight_bearing', 1, 2, 'pending')",
		"INSERT INTO speech_offered_version (patient, uri, version) VALUES ('ray', 'care://ray/weight_bearing', 2)",
		"INSERT INTO speech_followed (patient) VALUES ('ray')",
		"INSERT INTO speech_baseline (patient, uri, version) VALUES ('ray', 'care://ray/exercise', 3)",
		"INSERT INTO speech_delivery (patient, uri, version, event, at_ms, device, via) VALUES ('ray', 'care://ray/weight_bearing', 1, 'heard', 1795946400000, 'screen', 'asked')",
		"INSERT INTO alert_budget (patient, reserved_at, state) VALUES ('ray', 1795946400000, 'charged')",
	} {
		if _, err := db.ExecContext(ctx, q(stmt)); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()

	s := openDSN(t, dsn)
	var n int
	if err := s.db.QueryRow("SELECT COUNT(*) FROM schema_migrations WHERE version IN (40, 41)").Scan(&n); err != nil || n != 2 {
		t.Fatalf("migrations 040 and 041 recorded %d times, %v; want both", n, err)
	}
	l := s.HeardLedger()
	rows, err := l.Pending(ctx, "ray")
	if err != nil || len(rows) != 1 || rows[0].From != 1 || rows[0].To != 2 || !rows[0].Offered {
		t.Fatalf("pending after the upgrade = %+v, %v; want the offered retraction 1 → 2", rows, err)
	}
	if f, err := l.Facts(ctx, "ray"); err != nil || !reflect.DeepEqual(f[ledgertest.WB], models.FactLedger{Heard: 1, Offered: []int{2}}) || !reflect.DeepEqual(f["care://ray/exercise"], models.FactLedger{Baseline: 3}) {
		t.Fatalf("facts after the upgrade = %+v, %v", f, err)
	}
	if f, err := l.Followed(ctx, []string{"ray"}); err != nil || !f["ray"] {
		t.Fatalf("followed after the upgrade = %v, %v", f, err)
	}
	rec, err := l.Delivery(ctx, "ray", ledgertest.WB)
	if err != nil || len(rec.Events) != 1 || rec.Events[0].Device != models.DeviceScreen || !rec.Events[0].At.Equal(clock) {
		t.Fatalf("delivery after the upgrade = %+v, %v", rec, err)
	}
	if used, err := s.AlertBudget().SlotsUsed(ctx, "ray", clock.Add(-time.Minute)); err != nil || used != 1 {
		t.Fatalf("budget slots after the upgrade = %d, %v; want the one charged", used, err)
	}
	// It goes on: the retraction delivered, a new revision queued, both logged.
	if err := l.MarkHeard(ctx, "ray", ledgertest.WB, 2, models.Hearing{At: clock.Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Observe(ctx, "ray", ledgertest.WB, models.HeardState{Heard: 2}, 3, false, 0, clock.Add(2*time.Minute)); err != nil {
		t.Fatal(err)
	}
	if rows, _ := l.Pending(ctx, "ray"); len(rows) != 1 || rows[0].From != 2 || rows[0].To != 3 || rows[0].Offered || rows[0].ID <= 1 {
		t.Fatalf("after writing on the upgraded ledger pending = %+v", rows)
	}
	if rec, _ := l.Delivery(ctx, "ray", ledgertest.WB); len(rec.Events) != 3 {
		t.Fatalf("delivery log = %+v, want the old event and two new", rec.Events)
	}
	// Reopening runs nothing again and loses nothing.
	if rows, _ := openDSN(t, dsn).HeardLedger().Pending(ctx, "ray"); len(rows) != 1 || rows[0].To != 3 {
		t.Fatalf("after a second open pending = %+v", rows)
	}
}

// An offer recorded by announcement id before the speech package's
// migration 004 (a build older still) is still an offer after 040: the
// announcement is said again, saying so, and a revert withdraws what it
// offered (P-24).
func TestLedger_MigrationKeepsOffersRecordedByAnnouncementID(t *testing.T) {
	ctx := context.Background()
	dsn := testDSN(t)
	db, q := previousBuild(t, dsn, "003_offered.sql")
	for _, stmt := range []string{
		"INSERT INTO speech_heard (patient, uri, version) VALUES ('ray', 'care://ray/weight_bearing', 1)",
		"INSERT INTO speech_announcements (id, patient, uri, from_version, to_version, state) VALUES (1, 'ray', 'care://ray/weight_bearing', 1, 2, 'pending')",
		"INSERT INTO speech_announcements (id, patient, uri, from_version, to_version, state) VALUES (2, 'ray', 'care://ray/exercise', 0, 1, 'pending')",
		"INSERT INTO speech_offered (announcement_id) VALUES (1)",
	} {
		if _, err := db.ExecContext(ctx, q(stmt)); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	l := openDSN(t, dsn).HeardLedger() // migrates through 040
	rows, err := l.Pending(ctx, "ray")
	if err != nil || len(rows) != 2 || !rows[0].Offered || rows[1].Offered {
		t.Fatalf("after the migration pending = %+v, %v; want the walking one offered, the other not", rows, err)
	}
	if hs, err := l.HeardState(ctx, "ray", ledgertest.WB); err != nil || !hs.Equal(models.HeardState{Heard: 1, Offered: []int{2}}) {
		t.Fatalf("heard state = %+v, %v", hs, err)
	}
	// Idempotent: opening again changes nothing.
	if rows, _ := openDSN(t, dsn).HeardLedger().Pending(ctx, "ray"); len(rows) != 2 || !rows[0].Offered {
		t.Fatalf("after a second open pending = %+v", rows)
	}
}

// BenchmarkHeardLedger_DeliveryTurn measures one revision's way through
// the ledger as the clinician's timeline records it — queued (Observe),
// heard (MarkHeard, with its delivery event) — then one Delivery read of
// the fact's whole log, as the timeline reads it on every update.
func BenchmarkHeardLedger_DeliveryTurn(b *testing.B) {
	s, _ := openTest(b, nil)
	l := s.HeardLedger()
	ctx := context.Background()
	how := models.Hearing{Device: models.DeviceScreen, Via: models.ViaAsked}
	if err := l.MarkHeard(ctx, "ray", ledgertest.WB, 1, how); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		v := i + 2
		if _, err := l.Observe(ctx, "ray", ledgertest.WB, models.HeardState{Heard: v - 1}, v, false, 0, time.Time{}); err != nil {
			b.Fatal(err)
		}
		if err := l.MarkHeard(ctx, "ray", ledgertest.WB, v, how); err != nil {
			b.Fatal(err)
		}
		if _, err := l.Delivery(ctx, "ray", ledgertest.WB); err != nil {
			b.Fatal(err)
		}
	}
}
