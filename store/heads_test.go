package store

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/unsay/unsay/models"
)

func newSigningKey(t testing.TB) ed25519.PrivateKey {
	t.Helper()
	_, k, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// openSigned opens the store at dsn with a Sealer and a signing key, as a
// production server would.
func openSigned(t *testing.T, dsn string, sl Sealer, key ed25519.PrivateKey) *Store {
	t.Helper()
	s, err := Open(context.Background(), Options{DSN: dsn, AuditKey: []byte("test-audit-key"), Sealer: sl, SigningKey: key, Clock: newClock().Now})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// rewriteChainWithTheDataKey plays the one attack the hash chain cannot
// see (P-26): someone holding the database and the data key re-seals a
// new value into version n of fact u and recomputes the hash of n and of
// every later version, so every stored hash and prevHash agrees again. It
// cannot sign, so the head signatures are left as they were.
func rewriteChainWithTheDataKey(t *testing.T, dsn string, sl Sealer, u models.URI, n int, value string) {
	t.Helper()
	ctx := context.Background()
	db, _ := tamperDB(t, dsn)
	defer db.Close()
	rows, err := db.Query(rebindFor(dsn, `SELECT n, written_at, author_id, hash, value FROM versions WHERE patient = ? AND domain = ? ORDER BY n`), u.Patient, u.Domain)
	if err != nil {
		t.Fatal(err)
	}
	type ver struct {
		n         int
		writtenAt int64
		author    string
		hash      string
		sealed    []byte
	}
	var vs []ver
	for rows.Next() {
		var v ver
		if err := rows.Scan(&v.n, &v.writtenAt, &v.author, &v.hash, &v.sealed); err != nil {
			t.Fatal(err)
		}
		vs = append(vs, v)
	}
	rows.Close()
	prev := ""
	for _, v := range vs {
		aad, _ := AAD(u.Patient, u.Domain, v.n, u.Audience())
		plain, err := sl.Open(ctx, aad, v.sealed)
		if err != nil {
			t.Fatalf("open v%d with the data key: %v", v.n, err)
		}
		sealed := v.sealed
		if v.n == n {
			plain = []byte(value)
			if sealed, err = sl.Seal(ctx, aad, plain); err != nil {
				t.Fatal(err)
			}
		}
		if v.n < n {
			prev = v.hash
			continue
		}
		hash := VersionHash(prev, string(plain), timeOrZero(v.writtenAt), v.author)
		if _, err := db.Exec(rebindFor(dsn, `UPDATE versions SET value = ?, prev_hash = ?, hash = ? WHERE patient = ? AND domain = ? AND n = ?`),
			sealed, prev, hash, u.Patient, u.Domain, v.n); err != nil {
			t.Fatal(err)
		}
		prev = hash
	}
}

func rebindFor(dsn, q string) string {
	if IsPostgresDSN(dsn) {
		return rebindDollar(q)
	}
	return q
}

// TestVerify_P26_RewrittenChainWithRecomputedHashesFailsOnItsHeadSignature:
// with the data key in hand, an attacker rewrites version 2 of a chain and
// every hash after it. The hash chain agrees with itself again (P-5 alone
// calls it intact); the head signatures, made at commit with a key that is
// not in the database, do not.
func TestVerify_P26_RewrittenChainWithRecomputedHashesFailsOnItsHeadSignature(t *testing.T) {
	ctx := context.Background()
	dsn := testDSN(t)
	sl := newGCMSealer(t, 7)
	key := newSigningKey(t)
	s := openSigned(t, dsn, sl, key)
	for _, v := range []string{"No weight through the operated leg.", "Partial weight-bearing.", "Full weight-bearing as tolerated."} {
		mustPublish(t, s, writer, in("weight_bearing", models.AudienceUser, v))
	}
	u, _ := models.ParseURI("care://ray/weight_bearing")

	// Positive twin first: the untouched chain is intact and its head is
	// signed by this key.
	res, err := s.Verify(ctx, userRay, u.String())
	if err != nil || !res.Intact || res.Head == nil || !res.Head.Valid || res.Head.N != 3 || res.Head.KeyID != KeyID(key.Public().(ed25519.PublicKey)) {
		t.Fatalf("untouched chain: %+v (head %+v), %v", res, res.Head, err)
	}
	for _, rec := range res.Versions {
		if rec.Signature == "" || rec.KeyID == "" {
			t.Fatalf("v%d carries no head signature", rec.N)
		}
	}

	rewriteChainWithTheDataKey(t, dsn, sl, u, 2, "Non-weight-bearing for six weeks.")
	res, err = s.Verify(ctx, userRay, u.String())
	if err != nil {
		t.Fatal(err)
	}
	if res.Intact || res.BrokenAt != 2 || res.Problem != ProblemHeadSignature {
		t.Fatalf("rewritten chain: intact %v, broken at v%d (%q); want broken at v2: %q", res.Intact, res.BrokenAt, res.Problem, ProblemHeadSignature)
	}
	if res.Head.Valid {
		t.Fatal("the rewritten head's signature verifies")
	}
	// The hashes alone agree: this is exactly what P-5 cannot see.
	for i, rec := range res.Versions {
		if i > 0 && rec.PrevHash != res.Versions[i-1].Hash {
			t.Fatalf("the attack left a broken link at v%d; the test proves nothing", rec.N)
		}
	}
	// And a server with the key refuses to start on it.
	if err := s.CheckStartup(ctx); !errors.Is(err, ErrStartup) || !strings.Contains(err.Error(), "care://ray/weight_bearing") {
		t.Fatalf("CheckStartup on a rewritten chain = %v, want ErrStartup naming the chain", err)
	}
}

// TestVerify_P26_StrippedHeadSignatureIsNotSigned: removing the signatures
// (instead of forging them) is caught too.
func TestVerify_P26_StrippedHeadSignatureIsNotSigned(t *testing.T) {
	ctx := context.Background()
	s, path := openTest(t, newClock())
	mustPublish(t, s, writer, in("weight_bearing", models.AudienceUser, "Partial weight-bearing."))
	mustPublish(t, s, writer, in("weight_bearing", models.AudienceUser, "Full weight-bearing as tolerated."))
	tamper(t, path, `UPDATE versions SET head_sig = '', head_key = '' WHERE n = 2`)
	res, err := s.Verify(ctx, userRay, "care://ray/weight_bearing")
	if err != nil || res.Intact || res.BrokenAt != 2 || res.Problem != ProblemHeadUnsigned {
		t.Fatalf("stripped head: %+v, %v; want broken at v2: %q", res, err, ProblemHeadUnsigned)
	}
	if err := s.CheckStartup(ctx); !errors.Is(err, ErrStartup) || !strings.Contains(err.Error(), "not signed") {
		t.Fatalf("CheckStartup = %v, want a refusal naming the unsigned head", err)
	}
}

// TestVerifyAudit_P26_RecomputedAuditChainFailsOnItsHeadSignature: with the
// audit key in hand, an attacker rewrites a refusal as accepted and
// recomputes every later MAC and the head; the HMAC chain agrees with
// itself, the signed head does not.
func TestVerifyAudit_P26_RecomputedAuditChainFailsOnItsHeadSignature(t *testing.T) {
	ctx := context.Background()
	s, path := openTest(t, newClock())
	auditN(t, s, 5) // rows 2 and 4 are refusals
	v, err := s.VerifyAuditLog(ctx)
	if err != nil || v.BadRow != 0 || v.Head == nil || !v.Head.Valid || v.Head.N != 5 {
		t.Fatalf("untouched audit log: %+v, %v", v, err)
	}
	rows, _ := s.AuditRows(ctx, 0, 0)
	rows[1].Outcome, rows[1].Reason = OutcomeAccepted, ReasonOK
	prev := ""
	db, adapt := tamperDB(t, path)
	defer db.Close()
	for i := range rows {
		if i > 0 {
			prev = rows[i-1].MAC
		}
		rows[i].MAC = s.auditMAC(rows[i], prev) // the attacker holds the audit key
		if _, err := db.Exec(adapt(rebindFor(path, `UPDATE audit SET outcome = ?, reason = ?, mac = ? WHERE seq = ?`)),
			rows[i].Outcome, string(rows[i].Reason), rows[i].MAC, rows[i].Seq); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.Exec(rebindFor(path, `UPDATE audit_head SET last_mac = ? WHERE id = 1`), rows[4].MAC); err != nil {
		t.Fatal(err)
	}
	v, err = s.VerifyAuditLog(ctx)
	if err != nil || v.BadRow != 5 || v.Problem != ProblemHeadSignature {
		t.Fatalf("recomputed audit log: %+v, %v; want row 5: %q", v, err, ProblemHeadSignature)
	}
}

// TestCheckStartup_P26_RefusesAnotherKeyAndTheDevelopmentKey: heads signed
// by one key do not verify under another; a database run with the public
// development key is not silently adopted by a production key.
func TestCheckStartup_P26_RefusesAnotherKeyAndTheDevelopmentKey(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		first ed25519.PrivateKey // nil: the development key
		want  string
	}{
		{"another key", newSigningKey(t), "signed by key"},
		{"the development key", nil, "development key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dsn := testDSN(t)
			first, err := Open(ctx, Options{DSN: dsn, AuditKey: []byte("test-audit-key"), SigningKey: tc.first})
			if err != nil {
				t.Fatal(err)
			}
			mustPublish(t, first, writer, in("weight_bearing", models.AudienceUser, "Partial weight-bearing."))
			if err := first.CheckStartup(ctx); err != nil {
				t.Fatalf("CheckStartup with the key that signed: %v", err)
			}
			first.Close()
			s := openSigned(t, dsn, nil, newSigningKey(t))
			if err := s.CheckStartup(ctx); !errors.Is(err, ErrStartup) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("CheckStartup under a new key = %v, want ErrStartup saying %q", err, tc.want)
			}
		})
	}
}

// TestCheckStartup_P26_SignsTheHeadsOfADatabaseWrittenBeforeHeadSigning:
// a database from before migration 011 passes CheckStartup (which writes
// nothing) and has its current heads and audit head signed once by
// SignLegacyHeads; after that, an unsigned head is tampering.
func TestCheckStartup_P26_SignsTheHeadsOfADatabaseWrittenBeforeHeadSigning(t *testing.T) {
	ctx := context.Background()
	key := newSigningKey(t)
	s, path := openTest(t, newClock())
	mustPublish(t, s, writer, in("weight_bearing", models.AudienceUser, "Partial weight-bearing."))
	mustPublish(t, s, writer, in("weight_bearing", models.AudienceUser, "Full weight-bearing as tolerated."))
	auditN(t, s, 2)
	s.Close()
	// What migration 011 leaves in a database that held versions: no
	// signatures, and the legacy mark.
	db, _ := tamperDB(t, path)
	for _, q := range []string{`UPDATE versions SET head_sig = '', head_key = ''`, `UPDATE audit_head SET sig = '', key_id = ''`,
		`UPDATE signing_state SET legacy_unsigned = 1`} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()

	s = openSigned(t, path, nil, key)
	res, err := s.Verify(ctx, userRay, "care://ray/weight_bearing")
	if err != nil || !res.Intact || res.Head.Valid {
		t.Fatalf("legacy chain before adoption: %+v, %v; want intact and unsigned", res, err)
	}
	if err := s.CheckStartup(ctx); err != nil {
		t.Fatalf("CheckStartup on a legacy database: %v", err)
	}
	if res, _ := s.Verify(ctx, userRay, "care://ray/weight_bearing"); res.Head.Valid {
		t.Fatal("CheckStartup wrote: it must only check")
	}
	if n, err := s.SignLegacyHeads(ctx); err != nil || n != 1 {
		t.Fatalf("SignLegacyHeads = %d, %v; want the one chain's head", n, err)
	}
	if n, err := s.SignLegacyHeads(ctx); err != nil || n != 0 {
		t.Fatalf("a second SignLegacyHeads = %d, %v; want nothing to do", n, err)
	}
	res, err = s.Verify(ctx, userRay, "care://ray/weight_bearing")
	if err != nil || !res.Intact || !res.Head.Valid || res.Versions[0].Signature != "" {
		t.Fatalf("after adoption: %+v, %v; want the head (only) signed", res, err)
	}
	if v, err := s.VerifyAuditLog(ctx); err != nil || v.BadRow != 0 || !v.Head.Valid {
		t.Fatalf("audit log after adoption: %+v, %v", v, err)
	}
	if err := s.CheckStartup(ctx); err != nil {
		t.Fatalf("second start: %v", err)
	}
	// Adopted once: stripping the head again is tampering, not legacy.
	tamper(t, path, `UPDATE versions SET head_sig = '' WHERE n = 2`)
	if err := s.CheckStartup(ctx); !errors.Is(err, ErrStartup) {
		t.Fatalf("CheckStartup after stripping an adopted head = %v, want ErrStartup", err)
	}
}

func TestSigningKey_ParsesWhatFormatWritesAndRefusesTheRest(t *testing.T) {
	k := newSigningKey(t)
	got, err := ParseSigningKey(FormatSigningKey(k))
	if err != nil || !got.Equal(k) {
		t.Fatalf("round trip: %v", err)
	}
	pub, err := ParsePublicKey(FormatPublicKey(k.Public().(ed25519.PublicKey)))
	if err != nil || !pub.Equal(k.Public()) {
		t.Fatalf("public round trip: %v", err)
	}
	for _, bad := range []string{"", "not base64!", "c2hvcnQ=", FormatPublicKey(k.Public().(ed25519.PublicKey)) + "AAAA"} {
		if _, err := ParseSigningKey(bad); err == nil {
			t.Errorf("ParseSigningKey(%q) accepted", bad)
		}
	}
	if len(KeyID(k.Public().(ed25519.PublicKey))) != 16 {
		t.Fatal("KeyID is not 16 hex digits")
	}
}

// upTo is a dialect whose migrations stop at version max: a database as an
// older Unsay left it.
type upTo struct {
	dialect
	max int
}

func (u upTo) migrations() ([]migration, error) {
	ms, err := u.dialect.migrations()
	var out []migration
	for _, m := range ms {
		if m.version <= u.max {
			out = append(out, m)
		}
	}
	return out, err
}

// TestMigration011_MarksAnOlderDatabaseLegacyAndTheFirstStartSignsItsHeads:
// a database written by an Unsay from before head signing (migrations up to
// 003, one version, one audit row) upgrades in place: migration 011 marks
// it legacy, Verify passes it unsigned, and the first start signs its heads.
func TestMigration011_MarksAnOlderDatabaseLegacyAndTheFirstStartSignsItsHeads(t *testing.T) {
	ctx := context.Background()
	dsn := testDSN(t)
	db, _ := tamperDB(t, dsn)
	var d dialect = sqliteDialect{}
	if IsPostgresDSN(dsn) {
		pd, err := postgresKeys(ctx, db)
		if err != nil {
			t.Fatal(err)
		}
		d = pd
	}
	if err := migrate(ctx, db, upTo{d, 3}); err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 10, 4, 9, 14, 0, 0, time.UTC)
	value := "No weight through the operated leg."
	hash := VersionHash("", value, at, "adeyemi")
	for _, q := range []struct {
		sql  string
		args []any
	}{
		{`INSERT INTO facts (patient, domain, audience, latest) VALUES (?, ?, ?, 1)`, []any{"ray", "weight_bearing", "user"}},
		{`INSERT INTO versions (seq, patient, domain, n, audience, value, sealed, author_id, author_label, written_at, stale_after, priority, prev_hash, hash)
			VALUES (1, 'ray', 'weight_bearing', 1, 'user', ?, 0, 'adeyemi', 'Mr Adeyemi', ?, 0, 0.9, '', ?)`, []any{[]byte(value), at.UnixMilli(), hash}},
	} {
		if _, err := db.Exec(rebindFor(dsn, q.sql), q.args...); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()

	key := newSigningKey(t)
	s := openSigned(t, dsn, nil, key)
	if legacy, err := s.legacyUnsigned(ctx, s.db); err != nil || !legacy {
		t.Fatalf("after migration 011: legacy = %v, %v; want marked", legacy, err)
	}
	res, err := s.Verify(ctx, userRay, "care://ray/weight_bearing")
	if err != nil || !res.Intact || res.Head.Valid {
		t.Fatalf("before the first start: %+v, %v; want intact and unsigned", res, err)
	}
	if err := s.CheckStartup(ctx); err != nil {
		t.Fatalf("first start: %v", err)
	}
	if n, err := s.SignLegacyHeads(ctx); err != nil || n != 1 {
		t.Fatalf("SignLegacyHeads = %d, %v", n, err)
	}
	res, err = s.Verify(ctx, userRay, "care://ray/weight_bearing")
	if err != nil || !res.Intact || !res.Head.Valid {
		t.Fatalf("after the first start: %+v, %v; want the head signed", res, err)
	}
	// A write after the upgrade chains onto the old version and is signed.
	if r := mustPublish(t, s, writer, in("weight_bearing", models.AudienceUser, "Partial weight-bearing.")); r.Version.PrevHash != hash {
		t.Fatalf("v2 chains to %q, want %q", r.Version.PrevHash, hash)
	}
	if res, err := s.Verify(ctx, userRay, "care://ray/weight_bearing"); err != nil || !res.Intact || !res.Head.Valid || res.Head.N != 2 {
		t.Fatalf("after a write: %+v, %v", res, err)
	}
}
