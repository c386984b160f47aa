package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/unsay/unsay/models"
)

// openLogged opens a store on dsn (nil sealer: plaintext) logging into the
// returned buffer.
func openLogged(t *testing.T, dsn string, sl Sealer) (*Store, *syncBuffer) {
	t.Helper()
	logs := &syncBuffer{}
	s, err := Open(context.Background(), Options{DSN: dsn, AuditKey: []byte("test-audit-key"), Sealer: sl,
		Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, logs
}

// seedWithRevision seeds s and publishes the staged revision:
// care://ray/weight_bearing then has v1, v2 and its head v3.
func seedWithRevision(t *testing.T, s *Store) {
	t.Helper()
	if _, err := Seed(context.Background(), s, demoNow(t)); err != nil {
		t.Fatal(err)
	}
	mustPublish(t, s, system, StagedRevision())
}

// wantIntegrity fails unless err is ErrIntegrity (and not ErrNotFound: the
// fact exists, it cannot be vouched for) and logs name the version at ERROR.
func wantIntegrity(t *testing.T, what string, err error, logs *syncBuffer, uri string) {
	t.Helper()
	if !errors.Is(err, ErrIntegrity) || errors.Is(err, ErrNotFound) {
		t.Fatalf("%s = %v, want ErrIntegrity (not ErrNotFound)", what, err)
	}
	if l := logs.String(); !strings.Contains(l, "level=ERROR") || !strings.Contains(l, uri) {
		t.Fatalf("%s: logs do not name %s at ERROR:\n%s", what, uri, l)
	}
}

// TestRead_P5_AVersionChangedInTheDatabaseIsNeverServedNorQuoted: a value,
// time or author edited in the database without recomputing the hash (F12)
// makes every read that would serve that version — the version itself, the
// history holding it, and (for the head) the list and whats_changed — fail
// with ErrIntegrity; the untouched versions of the chain are still served.
func TestRead_P5_AVersionChangedInTheDatabaseIsNeverServedNorQuoted(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct{ name, set string }{
		{"value", `value = CAST('You may now run and jump freely.' AS BLOB)`},
		{"author", `author_id = 'someone-else'`},
		{"writtenAt", `written_at = written_at + 1000`},
	} {
		for _, n := range []int{2, 3} { // a quoted non-head version, and the head
			t.Run(fmt.Sprintf("%s v%d", tc.name, n), func(t *testing.T) {
				dsn := testDSN(t)
				s, logs := openLogged(t, dsn, nil)
				seedWithRevision(t, s)
				tamper(t, dsn, fmt.Sprintf(`UPDATE versions SET %s WHERE patient = 'ray' AND domain = 'weight_bearing' AND n = %d`, tc.set, n))
				bad := fmt.Sprintf("care://ray/weight_bearing/v%d", n)
				_, err := s.Read(ctx, userRay, bad)
				wantIntegrity(t, "Read "+bad, err, logs, bad)
				_, err = s.History(ctx, userRay, "care://ray/weight_bearing")
				wantIntegrity(t, "History", err, logs, bad)
				if n == 3 {
					_, err = s.Read(ctx, userRay, "care://ray/weight_bearing")
					wantIntegrity(t, "Read of the current version", err, logs, bad)
					_, err = s.List(ctx, userRay)
					wantIntegrity(t, "List", err, logs, bad)
					_, err = s.SinceAtMost(ctx, userRay, time.Time{}, 0)
					wantIntegrity(t, "SinceAtMost", err, logs, bad)
				}
				good := "care://ray/weight_bearing/v1"
				if r, err := s.Read(ctx, userRay, good); err != nil || r.Version.N != 1 {
					t.Fatalf("Read %s (untouched) = %+v, %v", good, r, err)
				}
				if _, err := s.Read(ctx, userRay, "care://ray/exercise"); err != nil {
					t.Fatalf("Read of an untouched fact = %v", err)
				}
			})
		}
	}
}

// TestRead_P5_AnUntouchedChainIsServedInFull is the positive twin: every
// read of an intact store succeeds and logs no ERROR.
func TestRead_P5_AnUntouchedChainIsServedInFull(t *testing.T) {
	ctx := context.Background()
	dsn := testDSN(t)
	s, logs := openLogged(t, dsn, nil)
	seedWithRevision(t, s)
	for n := 1; n <= 3; n++ {
		uri := fmt.Sprintf("care://ray/weight_bearing/v%d", n)
		if r, err := s.Read(ctx, userRay, uri); err != nil || r.Version.N != n || r.Version.Value == "" {
			t.Fatalf("Read %s = %+v, %v", uri, r, err)
		}
	}
	if h, err := s.History(ctx, system, "care://ray/weight_bearing"); err != nil || len(h) != 3 {
		t.Fatalf("History = %d versions, %v; want 3", len(h), err)
	}
	if fs, err := s.List(ctx, system); err != nil || len(fs) != 8 {
		t.Fatalf("List = %d facts, %v; want 8", len(fs), err)
	}
	if w, err := s.SinceAtMost(ctx, system, time.Time{}, 0); err != nil || len(w.Versions) == 0 {
		t.Fatalf("SinceAtMost = %+v, %v", w, err)
	}
	if err := s.CheckStartup(ctx); err != nil {
		t.Fatalf("CheckStartup on intact chains = %v", err)
	}
	if l := logs.String(); strings.Contains(l, "level=ERROR") {
		t.Fatalf("an intact store logged an ERROR:\n%s", l)
	}
}

// TestRead_P5_ASealedVersionWhoseAuthorWasChangedIsNotServed: with an
// envelope, the sealed value still opens (its AAD does not cover the
// author) but the version no longer matches its hash: refused.
func TestRead_P5_ASealedVersionWhoseAuthorWasChangedIsNotServed(t *testing.T) {
	ctx := context.Background()
	dsn := testDSN(t)
	s, logs := openLogged(t, dsn, newGCMSealer(t, 5))
	seedWithRevision(t, s)
	if r, err := s.Read(ctx, userRay, "care://ray/weight_bearing/v2"); err != nil || r.Version.Value == "" {
		t.Fatalf("Read before tampering = %+v, %v", r, err)
	}
	tamper(t, dsn, `UPDATE versions SET author_id = 'someone-else' WHERE patient = 'ray' AND domain = 'weight_bearing' AND n = 2`)
	_, err := s.Read(ctx, userRay, "care://ray/weight_bearing/v2")
	wantIntegrity(t, "Read", err, logs, "care://ray/weight_bearing/v2")
}

// TestCheckStartup_P5_RefusesAChainWhoseVersionNoLongerMatchesItsHash: a
// non-head version edited in the database (its signed head untouched, so
// the P-26 head check alone passes) is refused at startup, naming the
// version; so is a broken prevHash link. Twin: TestRead_P5_AnUntouchedChainIsServedInFull.
func TestCheckStartup_P5_RefusesAChainWhoseVersionNoLongerMatchesItsHash(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct{ name, set, want string }{
		{"value", `value = CAST('You may now run and jump freely.' AS BLOB)`, "does not match its hash chain (its value, time or author was changed"},
		{"prevHash", `prev_hash = hash`, "its prevHash is not the hash of the version before it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dsn := testDSN(t)
			s, _ := openLogged(t, dsn, nil)
			seedWithRevision(t, s)
			tamper(t, dsn, `UPDATE versions SET `+tc.set+` WHERE patient = 'ray' AND domain = 'weight_bearing' AND n = 2`)
			err := s.CheckStartup(ctx)
			if !errors.Is(err, ErrStartup) || !errors.Is(err, ErrIntegrity) ||
				!strings.Contains(err.Error(), "care://ray/weight_bearing/v2") || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("CheckStartup = %v, want ErrStartup and ErrIntegrity naming care://ray/weight_bearing/v2 and %q", err, tc.want)
			}
		})
	}
}

// TestCheckStartup_P26_ATamperedHeadUnderTheSameKeySaysItsSignatureDoesNotMatch:
// an audience edited in the database (F13) breaks the head signature; the
// refusal says so, and does not blame the development key the store is
// itself running with.
func TestCheckStartup_P26_ATamperedHeadUnderTheSameKeySaysItsSignatureDoesNotMatch(t *testing.T) {
	ctx := context.Background()
	dsn := testDSN(t)
	s, _ := openLogged(t, dsn, nil) // the development key
	if _, err := Seed(ctx, s, demoNow(t)); err != nil {
		t.Fatal(err)
	}
	if err := s.CheckStartup(ctx); err != nil {
		t.Fatalf("CheckStartup before tampering = %v", err)
	}
	db, adapt := tamperDB(t, dsn)
	defer db.Close()
	for _, q := range []string{`UPDATE versions SET audience = 'user' WHERE domain = 'gait_note'`, `UPDATE facts SET audience = 'user' WHERE domain = 'gait_note'`} {
		if _, err := db.Exec(adapt(q)); err != nil {
			t.Fatal(err)
		}
	}
	err := s.CheckStartup(ctx)
	if !errors.Is(err, ErrStartup) || !strings.Contains(err.Error(), "head signature of care://ray/gait_note/v2 does not match") ||
		strings.Contains(err.Error(), "development key") {
		t.Fatalf("CheckStartup = %v, want the head signature of care://ray/gait_note/v2 not matching, not the development key", err)
	}
}

// BenchmarkCheckChains measures CheckStartup's chain check (checkChains)
// over 10,000 plaintext versions: 64 facts of about 156 versions each.
func BenchmarkCheckChains(b *testing.B) {
	s, _ := openTest(b, nil)
	ctx := context.Background()
	const facts, each = 64, 157
	var wg sync.WaitGroup
	errs := make(chan error, facts)
	for f := range facts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				if _, err := s.Publish(ctx, writer, in(fmt.Sprintf("topic_%d", f), models.AudienceUser, fmt.Sprintf("Instruction %d of topic %d.", i, f))); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		if err := s.checkChains(ctx); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(facts*each), "versions")
}
