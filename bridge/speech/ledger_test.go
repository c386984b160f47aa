package speech

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/unsay/unsay/models"
)

const wb = "care://ray/weight_bearing"

func newTestLedger(t *testing.T, path string) *ledger {
	t.Helper()
	db := openDB(t, path)
	t.Cleanup(func() { db.Close() })
	l, err := newLedger(context.Background(), db, DialectSQLite)
	if err != nil {
		t.Fatalf("newLedger: %v", err)
	}
	return l
}

type span struct{ from, to int }

func pendingSpans(t *testing.T, l *ledger, patient string) []span {
	t.Helper()
	rows, err := l.Pending(context.Background(), patient)
	if err != nil {
		t.Fatal(err)
	}
	var out []span
	for _, r := range rows {
		out = append(out, span{r.From, r.To})
	}
	return out
}

func observe(t *testing.T, l *ledger, latest int, same bool) {
	t.Helper()
	ctx := context.Background()
	h, err := l.Heard(ctx, "ray", wb)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Observe(ctx, "ray", wb, heardState{Heard: h}, latest, same, false); err != nil {
		t.Fatalf("Observe(v%d): %v", latest, err)
	}
}

func markHeard(t *testing.T, l *ledger, v int) {
	t.Helper()
	if err := l.MarkHeard(context.Background(), "ray", wb, v, models.Hearing{}); err != nil {
		t.Fatal(err)
	}
}

func markTold(t *testing.T, l *ledger, v int) {
	t.Helper()
	if err := l.MarkTold(context.Background(), "ray", wb, v, models.Hearing{}); err != nil {
		t.Fatal(err)
	}
}

// offered records that the pending announcement of wb was put in a
// response speaking version v.
func offered(t *testing.T, l *ledger, v int) {
	t.Helper()
	rows, err := l.Pending(context.Background(), "ray")
	if err != nil || len(rows) != 1 {
		t.Fatalf("pending = %v, %v: want one to offer", rows, err)
	}
	if err := l.Offered(context.Background(), "ray", []offer{{ID: rows[0].ID, URI: wb, Version: v}}); err != nil {
		t.Fatal(err)
	}
}

// observeWords observes latest with the words compared against what he
// heard (sameHeard) and what he may have heard (sameOffered).
func observeWords(t *testing.T, l *ledger, latest int, sameHeard, sameOffered bool) {
	t.Helper()
	ctx := context.Background()
	hs, err := l.HeardState(ctx, "ray", wb)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Observe(ctx, "ray", wb, hs, latest, sameHeard, sameOffered); err != nil {
		t.Fatalf("Observe(v%d): %v", latest, err)
	}
}

// P-19: the ledger's decisions, each step against the previous state.
func TestLedger_AnnouncementSemantics(t *testing.T) {
	tests := []struct {
		name  string
		steps func(t *testing.T, l *ledger)
		want  []span
		heard int
	}{
		{"stacked revisions become one announcement from heard to latest", func(t *testing.T, l *ledger) {
			markHeard(t, l, 1)
			observe(t, l, 2, false)
			observe(t, l, 3, false)
			observe(t, l, 4, false)
		}, []span{{1, 4}}, 1},
		{"a fact never heard is a first hearing (from 0), creation included", func(t *testing.T, l *ledger) {
			observe(t, l, 1, false)
		}, []span{{0, 1}}, 0},
		{"a never-heard fact revised is still one first hearing of the latest", func(t *testing.T, l *ledger) {
			observe(t, l, 1, false)
			observe(t, l, 2, false)
		}, []span{{0, 2}}, 0},
		{"none twice: the version he heard is not announced again", func(t *testing.T, l *ledger) {
			observe(t, l, 2, false)
			markHeard(t, l, 2)
			observe(t, l, 2, false)
		}, nil, 2},
		{"positive twin of none twice: a later revision is announced from what he heard", func(t *testing.T, l *ledger) {
			observe(t, l, 2, false)
			markHeard(t, l, 2)
			observe(t, l, 3, false)
		}, []span{{2, 3}}, 2},
		{"unchanged words queue nothing and the ledger moves on", func(t *testing.T, l *ledger) {
			markHeard(t, l, 1)
			observe(t, l, 2, true)
		}, nil, 2},
		{"positive twin of unchanged: changed words are announced", func(t *testing.T, l *ledger) {
			markHeard(t, l, 1)
			observe(t, l, 2, false)
		}, []span{{1, 2}}, 1},
		{"words changed back to what he heard drop the pending announcement", func(t *testing.T, l *ledger) {
			markHeard(t, l, 1)
			observe(t, l, 2, false)
			observe(t, l, 3, true)
		}, nil, 3},
		{"an older version observed late does not shrink the announcement", func(t *testing.T, l *ledger) {
			markHeard(t, l, 1)
			observe(t, l, 3, false)
			observe(t, l, 2, false)
		}, []span{{1, 3}}, 1},
		{"hearing part-way moves the announcement's start", func(t *testing.T, l *ledger) {
			markHeard(t, l, 1)
			observe(t, l, 3, false)
			markHeard(t, l, 2)
		}, []span{{2, 3}}, 2},
		{"hearing the latest clears the announcement", func(t *testing.T, l *ledger) {
			markHeard(t, l, 1)
			observe(t, l, 3, false)
			markHeard(t, l, 3)
		}, nil, 3},
		{"telling an older version as a fact never moves the ledger back", func(t *testing.T, l *ledger) {
			markHeard(t, l, 3)
			markTold(t, l, 1)
			observe(t, l, 3, false)
		}, nil, 3},
		{"an announcement delivered after a newer one is what he heard last", func(t *testing.T, l *ledger) {
			markHeard(t, l, 3)
			markHeard(t, l, 1) // a slower turn's delivery, confirmed last
			observe(t, l, 3, false)
		}, []span{{1, 3}}, 1},
		// P-19, P-24: a plain fact answer never swallows a retraction.
		{"a fact told never settles a pending retraction", func(t *testing.T, l *ledger) {
			markHeard(t, l, 1)
			observe(t, l, 2, false)
			markTold(t, l, 2)
		}, []span{{1, 2}}, 1},
		{"positive twin: the retraction delivered settles it", func(t *testing.T, l *ledger) {
			markHeard(t, l, 1)
			observe(t, l, 2, false)
			markHeard(t, l, 2)
		}, nil, 2},
		{"a fact told settles a first hearing it covers", func(t *testing.T, l *ledger) {
			observe(t, l, 1, false)
			markTold(t, l, 1)
		}, nil, 1},
		{"a fact told part-way turns a first hearing into a retraction of it", func(t *testing.T, l *ledger) {
			observe(t, l, 2, false)
			markTold(t, l, 1)
		}, []span{{1, 2}}, 1},
		// What he may have heard: an offer whose delivery is unconfirmed.
		{"a revert during the turn withdraws what the turn told him", func(t *testing.T, l *ledger) {
			markHeard(t, l, 1)
			observe(t, l, 2, false)
			offered(t, l, 2)
			observeWords(t, l, 3, true, false) // v3 has v1's words
			markHeard(t, l, 2)                 // the turn's response was delivered
		}, []span{{2, 3}}, 2},
		{"a revert after a crash before the ledger's commit withdraws the offered words", func(t *testing.T, l *ledger) {
			markHeard(t, l, 1)
			observe(t, l, 2, false)
			offered(t, l, 2)
			observeWords(t, l, 3, true, false) // and the process dies: no markHeard
		}, []span{{2, 3}}, 1},
		{"positive twin of the revert: with no offer, changed back to what he heard is nothing", func(t *testing.T, l *ledger) {
			markHeard(t, l, 1)
			observe(t, l, 2, false)
			observeWords(t, l, 3, true, false)
		}, nil, 3},
		{"an offer not confirmed, then the same words again: from what he heard, said again", func(t *testing.T, l *ledger) {
			markHeard(t, l, 1)
			observe(t, l, 2, false)
			offered(t, l, 2)
			observeWords(t, l, 3, false, true)
		}, []span{{1, 3}}, 1},
		{"a delivered announcement overtaken by a new revision withdraws what it said", func(t *testing.T, l *ledger) {
			markHeard(t, l, 1)
			observe(t, l, 2, false)
			offered(t, l, 2)
			observeWords(t, l, 3, false, false)
			markHeard(t, l, 2)
		}, []span{{2, 3}}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := newTestLedger(t, tempDBPath(t))
			tt.steps(t, l)
			if got := pendingSpans(t, l, "ray"); !slices.Equal(got, tt.want) {
				t.Errorf("pending = %v, want %v", got, tt.want)
			}
			h, err := l.Heard(context.Background(), "ray", wb)
			if err != nil {
				t.Fatal(err)
			}
			if h != tt.heard {
				t.Errorf("heard = %d, want %d", h, tt.heard)
			}
		})
	}
}

func TestLedger_ObserveRefusesADecisionMadeOnAStaleHeardVersion(t *testing.T) {
	l := newTestLedger(t, tempDBPath(t))
	ctx := context.Background()
	markHeard(t, l, 2)
	if _, err := l.Observe(ctx, "ray", wb, heardState{Heard: 1}, 3, false, false); !errors.Is(err, errHeardMoved) {
		t.Fatalf("Observe with heard 1 after MarkHeard(2) = %v, want errHeardMoved", err)
	}
	if got := pendingSpans(t, l, "ray"); got != nil {
		t.Fatalf("a refused Observe queued %v", got)
	}
	// Twin: with the right heard version it queues.
	if _, err := l.Observe(ctx, "ray", wb, heardState{Heard: 2}, 3, false, false); err != nil {
		t.Fatal(err)
	}
	if got := pendingSpans(t, l, "ray"); !slices.Equal(got, []span{{2, 3}}) {
		t.Fatalf("pending = %v", got)
	}
}

func TestLedger_SurvivesReopeningTheDatabase(t *testing.T) {
	path := tempDBPath(t)
	l := newTestLedger(t, path)
	markHeard(t, l, 1)
	observe(t, l, 3, false)
	other := "care://ray/anticoagulant"
	if _, err := l.Observe(context.Background(), "ray", other, heardState{}, 1, false, false); err != nil {
		t.Fatal(err)
	}
	l.db.Close()

	l2 := newTestLedger(t, path) // migrations run again over existing tables
	rows, err := l2.Pending(context.Background(), "ray")
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 || rows[0].URI != wb || rows[0].From != 1 || rows[0].To != 3 || rows[1].URI != other || rows[1].From != 0 {
		t.Fatalf("after reopen pending = %+v", rows)
	}
	if err := l2.MarkHeard(context.Background(), "ray", wb, 3, models.Hearing{}); err != nil {
		t.Fatal(err)
	}
	l2.db.Close()

	l3 := newTestLedger(t, path)
	if got := pendingSpans(t, l3, "ray"); !slices.Equal(got, []span{{0, 1}}) {
		t.Fatalf("after hearing and reopening, pending = %v, want only the anticoagulant first hearing", got)
	}
	if n, err := l3.Backlog(context.Background()); err != nil || n != 1 {
		t.Fatalf("backlog = %d, %v", n, err)
	}
}

func TestLedger_KeepsPatientsApart(t *testing.T) {
	l := newTestLedger(t, tempDBPath(t))
	ctx := context.Background()
	if _, err := l.Observe(ctx, "bob", "care://bob/weight_bearing", heardState{}, 2, false, false); err != nil {
		t.Fatal(err)
	}
	if got := pendingSpans(t, l, "ray"); got != nil {
		t.Fatalf("ray sees bob's announcement: %v", got)
	}
	if got := pendingSpans(t, l, "bob"); !slices.Equal(got, []span{{0, 2}}) {
		t.Fatalf("bob's pending = %v", got)
	}
}

// P-19: the tables hold (patient, uri, versions, state) and no text.
func TestLedger_TablesHoldNoClinicalText(t *testing.T) {
	l := newTestLedger(t, tempDBPath(t))
	want := map[string][]string{
		"speech_heard":         {"patient", "uri", "version"},
		"speech_announcements": {"id", "patient", "uri", "from_version", "to_version", "state"},
	}
	for table, cols := range want {
		rows, err := l.db.Query("SELECT name FROM pragma_table_info(?)", table)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for rows.Next() {
			var c string
			if err := rows.Scan(&c); err != nil {
				t.Fatal(err)
			}
			got = append(got, c)
		}
		rows.Close()
		if !slices.Equal(got, cols) {
			t.Errorf("%s columns = %v, want %v", table, got, cols)
		}
	}
}

func TestLedger_PostgresPlaceholders(t *testing.T) {
	pg := &ledger{dialect: DialectPostgres}
	if got := pg.q("a = ? AND b = ? AND c = ?"); got != "a = $1 AND b = $2 AND c = $3" {
		t.Errorf("postgres q = %q", got)
	}
	lite := &ledger{dialect: DialectSQLite}
	if got := lite.q("a = ? AND b = ?"); got != "a = ? AND b = ?" {
		t.Errorf("sqlite q = %q", got)
	}
	for _, d := range []string{DialectSQLite, DialectPostgres} {
		b, err := migrations.ReadFile("migrations/" + d + "/001_speech.sql")
		if err != nil {
			t.Fatalf("%s migration: %v", d, err)
		}
		if n := len(splitSQL(string(b))); n != 4 {
			t.Errorf("%s migration splits into %d statements, want 4", d, n)
		}
	}
}

// An offer recorded by announcement id before migration 004 is still an
// offer after it: the announcement is said again, saying so, and a revert
// withdraws what it offered (P-24).
func TestLedger_MigrationKeepsOffersRecordedByAnnouncementID(t *testing.T) {
	path := tempDBPath(t)
	db := openDB(t, path)
	ctx := context.Background()
	for _, name := range []string{"001_speech.sql", "002_baseline.sql", "003_offered.sql"} {
		b, err := migrations.ReadFile("migrations/sqlite/" + name)
		if err != nil {
			t.Fatal(err)
		}
		for _, stmt := range splitSQL(string(b)) {
			if _, err := db.ExecContext(ctx, stmt); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, stmt := range []string{
		"INSERT INTO speech_heard (patient, uri, version) VALUES ('ray', '" + wb + "', 1)",
		"INSERT INTO speech_announcements (id, patient, uri, from_version, to_version, state) VALUES (1, 'ray', '" + wb + "', 1, 2, 'pending')",
		"INSERT INTO speech_announcements (id, patient, uri, from_version, to_version, state) VALUES (2, 'ray', 'care://ray/exercise', 0, 1, 'pending')",
		"INSERT INTO speech_offered (announcement_id) VALUES (1)",
	} {
		if _, err := db.ExecContext(ctx, stmt); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	l := newTestLedger(t, path) // migrates to 004
	rows, err := l.Pending(ctx, "ray")
	if err != nil || len(rows) != 2 || !rows[0].Offered || rows[1].Offered {
		t.Fatalf("after the migration pending = %+v, %v; want the walking one offered, the other not", rows, err)
	}
	if hs, err := l.HeardState(ctx, "ray", wb); err != nil || hs != (heardState{Heard: 1, Offered: 2}) {
		t.Fatalf("heard state = %+v, %v", hs, err)
	}
	// Idempotent: migrating again changes nothing.
	l2 := newTestLedger(t, path)
	if rows, _ := l2.Pending(ctx, "ray"); len(rows) != 2 || !rows[0].Offered {
		t.Fatalf("after a second migration pending = %+v", rows)
	}
}
