package envelope_test

// Integration: the envelope under the real SQLite store, attacked through
// the database file itself: a value pasted into another record, another
// audience or another version fails (P-6).

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	_ "modernc.org/sqlite" // the attacker's own connection to the file

	"github.com/unsay/unsay/models"
	"github.com/unsay/unsay/store"
	"github.com/unsay/unsay/store/envelope"
)

var (
	system  = models.System("envelope-test", models.ScopeReadUser, models.ScopeReadAssistant, models.ScopeWrite)
	userRay = models.Principal{Subject: "speech", Scopes: []models.Scope{models.ScopeReadUser}, Patients: []string{"ray"}}
	dualRay = models.Principal{Subject: "host", Scopes: []models.Scope{models.ScopeReadUser, models.ScopeReadAssistant}, Patients: []string{"ray"}}
)

// The seeded never-speakable records' distinctive words (store.Seed).
var assistantOnlyWords = []string{"Fall risk HIGH", "family disputes the discharge plan", "Lives alone Monday", "over-report exercise", "gait cadence"}

func demoNow(t testing.TB) time.Time {
	t.Helper()
	now, err := time.Parse(time.RFC3339, store.DemoNow)
	if err != nil {
		t.Fatal(err)
	}
	return now
}

// openStore opens (or reopens) the SQLite store at path with sealer s (nil: plaintext).
func openStore(t testing.TB, path string, s store.Sealer) *store.Store {
	t.Helper()
	clock := demoNow(t)
	st, err := store.Open(context.Background(), store.Options{DSN: path, AuditKey: []byte("envelope-test-audit-key"), Sealer: s,
		Clock: func() time.Time { return clock }})
	if err != nil {
		t.Fatalf("store.Open: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func seededStore(t testing.TB, s store.Sealer) (*store.Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "unsay.db")
	st := openStore(t, path, s)
	if seeded, err := store.Seed(context.Background(), st, demoNow(t)); err != nil || !seeded {
		t.Fatalf("Seed = %v, %v", seeded, err)
	}
	return st, path
}

// attacker opens its own connection to the database file.
func attacker(t testing.TB, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func storedValue(t testing.TB, db *sql.DB, domain string, n int) []byte {
	t.Helper()
	var v []byte
	if err := db.QueryRow(`SELECT value FROM versions WHERE patient = 'ray' AND domain = ? AND n = ?`, domain, n).Scan(&v); err != nil {
		t.Fatalf("select %s v%d: %v", domain, n, err)
	}
	return v
}

// chainHashes is every version hash of every fact, in URI and version order.
func chainHashes(t testing.TB, st *store.Store) []string {
	t.Helper()
	res, err := st.VerifyAll(context.Background(), system)
	if err != nil {
		t.Fatal(err)
	}
	var hs []string
	for _, r := range res {
		if !r.Intact {
			t.Fatalf("%s broken at v%d", r.URI, r.BrokenAt)
		}
		for _, v := range r.Versions {
			hs = append(hs, r.URI+"/v"+strconv.Itoa(v.N)+" "+v.PrevHash+" "+v.Hash)
		}
	}
	return hs
}

func TestStore_PublishesSealedAndReadsBack(t *testing.T) {
	k := randomKey(t)
	st, path := seededStore(t, newLocal(t, k))
	ctx := context.Background()

	r, err := st.Read(ctx, userRay, "care://ray/weight_bearing")
	if err != nil || r.Version.Value != "Partial weight-bearing, about half your body weight, with the frame." || r.Version.N != 2 {
		t.Fatalf("Read = %+v, %v", r, err)
	}
	pub, err := st.Publish(ctx, system, store.StagedRevision())
	if err != nil || pub.Version.N != 3 {
		t.Fatalf("Publish = %+v, %v", pub, err)
	}
	if r, err := st.Read(ctx, userRay, "care://ray/weight_bearing"); err != nil || r.Version.Value != store.StagedRevision().Value {
		t.Fatalf("Read after publish = %+v, %v", r, err)
	}
	// Every stored value is an envelope bound to its own row.
	rows, err := attacker(t, path).Query(`SELECT patient, domain, n, audience, value, sealed FROM versions`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	count := 0
	for rows.Next() {
		var patient, domain, aud string
		var n, sealed int
		var value []byte
		if err := rows.Scan(&patient, &domain, &n, &aud, &value, &sealed); err != nil {
			t.Fatal(err)
		}
		count++
		if sealed != 1 || !envelope.IsSealed(value) {
			t.Fatalf("%s v%d stored unsealed", domain, n)
		}
		aad := mustAAD(t, patient, domain, n, models.Audience(aud))
		rc, err := st.Sealer().Receipt(aad, value)
		if err != nil || rc.Provider != "local" || rc.KeyID != envelope.LocalKeyID(k) {
			t.Fatalf("%s v%d receipt %+v, %v", domain, n, rc, err)
		}
	}
	if count != 12 {
		t.Fatalf("%d versions stored, want 12 (the seed's eleven and this write)", count)
	}
	vr, err := st.Verify(ctx, system, "care://ray/weight_bearing")
	if err != nil || !vr.Intact || len(vr.Versions) != 3 || vr.Versions[2].AtRest == nil || vr.Versions[2].AtRest.AAD != "ray|weight_bearing|v3|user" {
		t.Fatalf("Verify = %+v, %v", vr, err)
	}
}

func TestStore_DefeatsCrossRecordPasteInTheDatabaseFile(t *testing.T) {
	st, path := seededStore(t, newLocal(t, randomKey(t)))
	ctx := context.Background()
	db := attacker(t, path)

	// Positive twin first: untouched, the speakable record reads and verifies.
	if r, err := st.Read(ctx, userRay, "care://ray/weight_bearing"); err != nil || !strings.HasPrefix(r.Version.Value, "Partial weight-bearing") {
		t.Fatalf("before paste: %+v, %v", r, err)
	}
	if vr, err := st.Verify(ctx, system, "care://ray/weight_bearing"); err != nil || !vr.Intact {
		t.Fatalf("before paste: Verify = %+v, %v", vr, err)
	}

	// The attacker copies care-internal://ray/risk's ciphertext into
	// care://ray/weight_bearing's current version (v2).
	risk := storedValue(t, db, "risk", 1)
	if _, err := db.Exec(`UPDATE versions SET value = ? WHERE patient = 'ray' AND domain = 'weight_bearing' AND n = 2`, risk); err != nil {
		t.Fatal(err)
	}

	r, err := st.Read(ctx, userRay, "care://ray/weight_bearing")
	if err == nil || r.Version.Value != "" {
		t.Fatalf("Read after paste = %+v, %v; want a failure and no value", r, err)
	}
	if !errors.Is(err, envelope.ErrAuthentication) || strings.Contains(err.Error(), "Fall risk") {
		t.Fatalf("Read after paste: err = %v, want ErrAuthentication without plaintext", err)
	}
	vr, err := st.Verify(ctx, system, "care://ray/weight_bearing")
	if err != nil || vr.Intact || vr.BrokenAt != 2 {
		t.Fatalf("Verify after paste = intact %v broken at %d, %v; want broken at 2", vr.Intact, vr.BrokenAt, err)
	}
	// The untouched version still reads.
	if r, err := st.Read(ctx, userRay, "care://ray/weight_bearing/v1"); err != nil || !strings.HasPrefix(r.Version.Value, "No weight") {
		t.Fatalf("v1 after paste: %+v, %v", r, err)
	}
	// Speakable-only listing never yields the assistant record's words either.
	facts, _ := st.List(ctx, userRay)
	for _, f := range facts {
		for _, w := range assistantOnlyWords {
			if strings.Contains(f.Current.Value, w) {
				t.Fatalf("List served %q", w)
			}
		}
	}
}

func TestStore_DefeatsAudienceRelabelInTheDatabaseFile(t *testing.T) {
	st, path := seededStore(t, newLocal(t, randomKey(t)))
	ctx := context.Background()
	if _, err := st.Read(ctx, userRay, "care://ray/risk"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("before relabel: %v, want ErrNotFound", err)
	}
	if r, err := st.Read(ctx, dualRay, "care-internal://ray/risk"); err != nil || !strings.HasPrefix(r.Version.Value, "Fall risk HIGH") {
		t.Fatalf("assistant read before relabel: %+v, %v", r, err)
	}
	// The attacker declares the risk record speakable.
	db := attacker(t, path)
	for _, q := range []string{
		`UPDATE facts SET audience = 'user' WHERE patient = 'ray' AND domain = 'risk'`,
		`UPDATE versions SET audience = 'user' WHERE patient = 'ray' AND domain = 'risk'`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	r, err := st.Read(ctx, userRay, "care://ray/risk")
	if err == nil || r.Version.Value != "" || !errors.Is(err, envelope.ErrAuthentication) {
		t.Fatalf("relabelled read = %+v, %v; want ErrAuthentication and no value", r, err)
	}
}

func TestStore_NeverSpeakableWordsAreNotInTheDatabaseFile(t *testing.T) {
	for _, tc := range []struct {
		name   string
		sealer func(t *testing.T) store.Sealer
		found  bool
	}{
		{"plaintext store shows them (the grep works)", func(*testing.T) store.Sealer { return nil }, true},
		{"local envelope hides them", func(t *testing.T) store.Sealer { return newLocal(t, randomKey(t)) }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, path := seededStore(t, tc.sealer(t))
			db := attacker(t, path)
			if _, err := db.Exec(`PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
				t.Fatal(err)
			}
			var files [][]byte
			for _, p := range []string{path, path + "-wal"} {
				b, err := os.ReadFile(p)
				if err != nil && !os.IsNotExist(err) {
					t.Fatal(err)
				}
				files = append(files, b)
			}
			if len(files[0]) == 0 {
				t.Fatal("database file empty")
			}
			all := bytes.Join(files, nil)
			for _, w := range assistantOnlyWords {
				if got := bytes.Contains(all, []byte(w)); got != tc.found {
					t.Errorf("%q in database bytes = %v, want %v", w, got, tc.found)
				}
			}
		})
	}
}

func TestStore_RotationThenRekeyKeepsRecordsReadableAndHashesUnchanged(t *testing.T) {
	ctx := context.Background()
	k1, k2 := randomKey(t), randomKey(t)
	st, path := seededStore(t, newLocal(t, k1))
	before := chainHashes(t, st)
	st.Close()

	// Rotate: k2 seals, k1 still opens.
	st = openStore(t, path, newLocal(t, k2, k1))
	if r, err := st.Read(ctx, dualRay, "care-internal://ray/risk"); err != nil || !strings.HasPrefix(r.Version.Value, "Fall risk HIGH") {
		t.Fatalf("old record through rotated keys: %+v, %v", r, err)
	}
	n, err := st.Rekey(ctx)
	if err != nil || n != 11 {
		t.Fatalf("Rekey = %d, %v; want 11", n, err)
	}
	if after := chainHashes(t, st); strings.Join(after, "\n") != strings.Join(before, "\n") {
		t.Fatalf("hashes changed by rekey:\n%s\nvs\n%s", before, after)
	}
	st.Close()

	// k1 retired: everything still reads, every seal names k2.
	st = openStore(t, path, newLocal(t, k2))
	facts, err := st.List(ctx, system)
	if err != nil || len(facts) != 8 {
		t.Fatalf("List after rekey = %d facts, %v", len(facts), err)
	}
	res, err := st.VerifyAll(ctx, system)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if !r.Intact {
			t.Fatalf("%s broken at %d after rekey", r.URI, r.BrokenAt)
		}
		for _, v := range r.Versions {
			if v.AtRest == nil || v.AtRest.KeyID != envelope.LocalKeyID(k2) {
				t.Fatalf("%s v%d at rest %+v, want key %s", r.URI, v.N, v.AtRest, envelope.LocalKeyID(k2))
			}
		}
	}
	// Refusal twin: a store opened with k1 alone can no longer read.
	st.Close()
	st = openStore(t, path, newLocal(t, k1))
	if _, err := st.Read(ctx, userRay, "care://ray/weight_bearing"); !errors.Is(err, envelope.ErrUnknownKey) {
		t.Fatalf("k1 alone after rekey: %v, want ErrUnknownKey", err)
	}
}

func TestStore_RekeyMigratesAPlaintextStoreToKMS(t *testing.T) {
	ctx := context.Background()
	plain, path := seededStore(t, nil)
	before := chainHashes(t, plain)
	plain.Close()

	f := newFakeKMS(t)
	arn := f.addKey(t, "unsay")
	st := openStore(t, path, newKMSSealer(t, f, arn))
	n, err := st.Rekey(ctx)
	if err != nil || n != 11 {
		t.Fatalf("Rekey = %d, %v", n, err)
	}
	if after := chainHashes(t, st); strings.Join(after, "\n") != strings.Join(before, "\n") {
		t.Fatal("hashes changed by migrating to kms")
	}
	vr, err := st.Verify(ctx, system, "care-internal://ray/risk")
	if err != nil || !vr.Intact || vr.Versions[0].AtRest == nil || vr.Versions[0].AtRest.Provider != "kms" || vr.Versions[0].AtRest.KeyID != arn {
		t.Fatalf("Verify = %+v, %v", vr, err)
	}
	if r, err := st.Read(ctx, dualRay, "care-internal://ray/risk"); err != nil || !strings.HasPrefix(r.Version.Value, "Fall risk HIGH") {
		t.Fatalf("Read through kms = %+v, %v", r, err)
	}
	// A KMS outage fails the read: nothing is served.
	f.failing.Store(true)
	if r, err := st.Read(ctx, userRay, "care://ray/weight_bearing"); err == nil || r.Version.Value != "" || !errors.Is(err, envelope.ErrKeyUnavailable) {
		t.Fatalf("Read during KMS outage = %+v, %v; want ErrKeyUnavailable", r, err)
	}
}

func TestStore_ChainHashesIdenticalWithAndWithoutEncryption(t *testing.T) {
	plain, _ := seededStore(t, nil)
	local, _ := seededStore(t, newLocal(t, randomKey(t)))
	f := newFakeKMS(t)
	kms, _ := seededStore(t, newKMSSealer(t, f, f.addKey(t, "unsay")))
	want := chainHashes(t, plain)
	if len(want) != 11 {
		t.Fatalf("%d versions, want 11", len(want))
	}
	for name, st := range map[string]*store.Store{"local": local, "kms": kms} {
		if got := chainHashes(t, st); strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Fatalf("%s hashes differ from plaintext:\n%s\nvs\n%s", name, got, want)
		}
	}
}

// BenchmarkStore_Publish and BenchmarkStore_Read measure what the envelope
// adds to a durable publish and to a read through the real SQLite store.
func BenchmarkStore_Publish(b *testing.B) {
	for _, bc := range storeBenchSealers(b) {
		b.Run(bc.name, func(b *testing.B) {
			st, _ := seededStore(b, bc.s)
			in := store.StagedRevision()
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				i++ // a new value each time: an identical one is Unchanged and writes nothing
				in.Value = "Full weight-bearing as tolerated, revision " + strconv.Itoa(i) + "."
				if _, err := st.Publish(context.Background(), system, in); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkStore_Read(b *testing.B) {
	for _, bc := range storeBenchSealers(b) {
		b.Run(bc.name, func(b *testing.B) {
			st, _ := seededStore(b, bc.s)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := st.Read(context.Background(), userRay, "care://ray/weight_bearing"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func storeBenchSealers(b *testing.B) []benchSealer {
	return append([]benchSealer{{"none", nil}}, benchSealers(b)...)
}
