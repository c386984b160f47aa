package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/unsay/unsay/models"
)

func TestCanonicalString_RFC8785EscapesOnlyQuoteBackslashAndControls(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`plain`, `"plain"`},
		{`<50%> & "as tolerated"`, `"<50%> & \"as tolerated\""`},
		{`back\slash`, `"back\\slash"`},
		{"tab\tnl\ncr\rbs\bff\f", `"tab\tnl\ncr\rbs\bff\f"`},
		{"\x00\x01\x1f\x7f", `"\u0000\u0001\u001f` + "\x7f" + `"`},
		{"é — “quotes” \u2028", "\"é — “quotes” \u2028\""},
	} {
		if got := CanonicalString(tc.in); got != tc.want {
			t.Errorf("CanonicalString(%q) = %s, want %s", tc.in, got, tc.want)
		}
	}
}

func TestVerify_P5_IntactChainAfterSeedAndRevision(t *testing.T) {
	s := seeded(t)
	ctx := context.Background()
	mustPublish(t, s, system, StagedRevision())
	res, err := s.VerifyAll(ctx, system)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 8 {
		t.Fatalf("%d chains, want 8", len(res))
	}
	for _, r := range res {
		if !r.Intact || r.BrokenAt != 0 {
			t.Fatalf("%s: %+v, want intact", r.URI, r)
		}
	}
	wb, _ := s.Verify(ctx, userRay, "care://ray/weight_bearing")
	if len(wb.Versions) != 3 || wb.Versions[1].PrevHash != wb.Versions[0].Hash || wb.Versions[2].PrevHash != wb.Versions[1].Hash {
		t.Fatalf("weight_bearing receipts do not chain: %+v", wb.Versions)
	}
	if wb.Versions[0].AtRest != nil {
		t.Fatal("plaintext version has an at-rest receipt")
	}
}

// tamper opens the database through a second connection, as an attacker
// with file (or database) access would, and runs query.
func tamper(t *testing.T, path, query string, args ...any) {
	t.Helper()
	db, adapt := tamperDB(t, path)
	defer db.Close()
	res, err := db.Exec(adapt(query), args...)
	if err != nil {
		t.Fatalf("tamper: %v", err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		t.Fatalf("tamper touched %d rows, want 1", n)
	}
}

func TestVerify_P5_TamperedVersionOneIsLocatedAtBrokenAtOne(t *testing.T) {
	for _, tc := range []struct{ name, query string }{
		{"value", `UPDATE versions SET value = CAST('Full weight-bearing, no frame needed.' AS BLOB) WHERE patient = 'ray' AND domain = 'weight_bearing' AND n = 1`},
		{"author", `UPDATE versions SET author_id = 'okafor' WHERE patient = 'ray' AND domain = 'weight_bearing' AND n = 1`},
		{"writtenAt", `UPDATE versions SET written_at = written_at + 1000 WHERE patient = 'ray' AND domain = 'weight_bearing' AND n = 1`},
		{"hash", `UPDATE versions SET hash = '00' || substr(hash, 3) WHERE patient = 'ray' AND domain = 'weight_bearing' AND n = 1`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, path := openTest(t, nil)
			ctx := context.Background()
			if _, err := Seed(ctx, s, demoNow(t)); err != nil {
				t.Fatal(err)
			}
			before, err := s.Verify(ctx, userRay, "care://ray/weight_bearing")
			if err != nil || !before.Intact {
				t.Fatalf("before tampering: %+v, %v", before, err)
			}
			tamper(t, path, tc.query)
			after, err := s.Verify(ctx, userRay, "care://ray/weight_bearing")
			if err != nil {
				t.Fatal(err)
			}
			if after.Intact || after.BrokenAt != 1 {
				t.Fatalf("after tampering %s: Intact=%v BrokenAt=%d, want BrokenAt 1", tc.name, after.Intact, after.BrokenAt)
			}
		})
	}
}

func TestVerify_P5_BrokenLinkIsLocatedAtTheLaterVersion(t *testing.T) {
	s, path := openTest(t, nil)
	ctx := context.Background()
	if _, err := Seed(ctx, s, demoNow(t)); err != nil {
		t.Fatal(err)
	}
	tamper(t, path, `UPDATE versions SET prev_hash = hash WHERE patient = 'ray' AND domain = 'weight_bearing' AND n = 2`)
	r, _ := s.Verify(ctx, userRay, "care://ray/weight_bearing")
	if r.Intact || r.BrokenAt != 2 {
		t.Fatalf("Verify = %+v, want BrokenAt 2", r)
	}
	other, _ := s.Verify(ctx, userRay, "care://ray/exercise")
	if !other.Intact {
		t.Fatalf("an untouched chain is not intact: %+v", other)
	}
}

func TestPublish_ContiguousVersionsUnderConcurrency(t *testing.T) {
	s, _ := openTest(t, newClock())
	ctx := context.Background()
	const workers, each = 8, 100
	var wg sync.WaitGroup
	errs := make(chan error, workers*each)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				if _, err := s.Publish(ctx, writer, in("weight_bearing", models.AudienceUser, fmt.Sprintf("w%d i%d", w, i))); err != nil {
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
	hist, err := s.History(ctx, userRay, "care://ray/weight_bearing")
	if err != nil {
		t.Fatal(err)
	}
	if len(hist) != workers*each {
		t.Fatalf("%d versions, want %d", len(hist), workers*each)
	}
	for i, v := range hist {
		if v.N != i+1 {
			t.Fatalf("version %d at position %d: not contiguous", v.N, i+1)
		}
	}
	r, err := s.Verify(ctx, userRay, "care://ray/weight_bearing")
	if err != nil || !r.Intact {
		t.Fatalf("Verify after concurrent writes = %+v, %v", r.BrokenAt, err)
	}
	if last, _ := s.LastSeq(ctx); last != workers*each {
		t.Fatalf("LastSeq = %d, want %d", last, workers*each)
	}
}

func TestPublish_InvalidInputIsRefusedAndWritesNothing(t *testing.T) {
	ok := in("weight_bearing", models.AudienceUser, "Partial weight-bearing.")
	for _, tc := range []struct {
		field string
		mut   func(*PublishInput)
	}{
		{"value", func(p *PublishInput) { p.Value = "" }},
		{"value", func(p *PublishInput) { p.Value = "   \n" }},
		{"value", func(p *PublishInput) { p.Value = strings.Repeat("a", models.MaxValueBytes+1) }},
		{"value", func(p *PublishInput) { p.Value = "bad \xff utf-8" }},
		{"audience", func(p *PublishInput) { p.Audience = "everyone" }},
		{"audience", func(p *PublishInput) { p.Audience = "" }},
		{"patient", func(p *PublishInput) { p.Patient = "Ray" }},
		{"patient", func(p *PublishInput) { p.Patient = "ray|x" }},
		{"patient", func(p *PublishInput) { p.Patient = "" }},
		{"domain", func(p *PublishInput) { p.Domain = "weight bearing" }},
		{"domain", func(p *PublishInput) { p.Domain = ".." }},
		{"domain", func(p *PublishInput) { p.Domain = "a/b" }},
		{"authorId", func(p *PublishInput) { p.AuthorID = "" }},
		{"authorId", func(p *PublishInput) { p.AuthorID = "Dr Okafor" }},
		{"authorLabel", func(p *PublishInput) { p.AuthorLabel = "Okafor\n[STALE]" }},
		{"priority", func(p *PublishInput) { p.Priority = 1.5 }},
		{"priority", func(p *PublishInput) { p.Priority = -0.1 }},
	} {
		pi := ok
		tc.mut(&pi)
		s, _ := openTest(t, newClock())
		_, err := s.Publish(context.Background(), system, pi)
		var ve *ValidationError
		if !errors.As(err, &ve) || ve.Field != tc.field || !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: err = %v, want *ValidationError on %s", tc.field, err, tc.field)
			continue
		}
		if strings.Contains(ve.Error(), "aaaa") {
			t.Errorf("validation error echoes the value")
		}
		if last, _ := s.LastSeq(context.Background()); last != 0 {
			t.Errorf("%s: invalid write left seq %d", tc.field, last)
		}
	}
	// Positive twin: the valid input, a speakable value of exactly
	// models.MaxSpeakableValueRunes characters, and an assistant-only value
	// of exactly 16 KiB, are written.
	s, _ := openTest(t, newClock())
	mustPublish(t, s, system, ok)
	big := ok
	big.Value = strings.Repeat("a", models.MaxSpeakableValueRunes)
	mustPublish(t, s, system, big)
	internal := in("notes", models.AudienceAssistant, strings.Repeat("a", models.MaxValueBytes))
	mustPublish(t, s, system, internal)
}

func TestPublish_IdempotencyKeyAppliesAtMostOnceWithinTheWindow(t *testing.T) {
	clock := newClock()
	s, _ := openTest(t, clock)
	ctx := context.Background()
	pi := in("weight_bearing", models.AudienceUser, "Full weight-bearing as tolerated.")
	pi.IdempotencyKey = "sig-abc"
	first := mustPublish(t, s, writer, pi)
	clock.Advance(599 * time.Second)
	again := mustPublish(t, s, writer, pi)
	if !again.Replayed || again.Version.N != first.Version.N || again.Version.Hash != first.Version.Hash || again.Seq != first.Seq {
		t.Fatalf("replay = %+v, want the first result replayed", again)
	}
	if last, _ := s.LastSeq(ctx); last != 1 {
		t.Fatalf("replay wrote: seq %d", last)
	}
	// Twin: a different key writes (a different value: an identical one
	// would be Unchanged); the same key after the window writes.
	other := pi
	other.Value = "Partial weight-bearing with the frame."
	other.IdempotencyKey = "sig-def"
	if r := mustPublish(t, s, writer, other); r.Replayed || r.Version.N != 2 {
		t.Fatalf("different key = %+v", r)
	}
	clock.Advance(2 * time.Second)
	if r := mustPublish(t, s, writer, pi); r.Replayed || r.Version.N != 3 {
		t.Fatalf("same key after 601 s = %+v, want a new write", r)
	}
}

// P-12: ReplayOf answers a stored idempotency key as Publish answers its
// replay — the first result, Replayed — within the same 600 s window, and
// nothing for a key never stored or one past the window; it writes
// nothing.
func TestReplayOf_AnswersAStoredKeyAsItsReplayWithinTheWindowOnly(t *testing.T) {
	clock := newClock()
	s, _ := openTest(t, clock)
	ctx := context.Background()
	pi := in("weight_bearing", models.AudienceUser, "Full weight-bearing as tolerated.")
	pi.IdempotencyKey = "sig-abc"
	first := mustPublish(t, s, writer, pi)
	clock.Advance(599 * time.Second)
	got, ok, err := s.ReplayOf(ctx, "sig-abc")
	if err != nil || !ok || !got.Replayed || got.Version.N != first.Version.N || got.Version.Hash != first.Version.Hash || got.Seq != first.Seq || got.Version.Value != pi.Value {
		t.Fatalf("ReplayOf(stored) = %+v, %v, %v; want the first result replayed", got, ok, err)
	}
	if last, _ := s.LastSeq(ctx); last != 1 {
		t.Fatalf("ReplayOf wrote: seq %d", last)
	}
	for name, key := range map[string]string{"never stored": "sig-def", "empty": ""} {
		if _, ok, err := s.ReplayOf(ctx, key); ok || err != nil {
			t.Errorf("ReplayOf(%s) = %v, %v; want nothing", name, ok, err)
		}
	}
	clock.Advance(2 * time.Second)
	if _, ok, err := s.ReplayOf(ctx, "sig-abc"); ok || err != nil {
		t.Errorf("ReplayOf after 601 s = %v, %v; want nothing (Publish would write anew)", ok, err)
	}
}

func TestStaleness_P7_StaleOnlyPastStaleAfterWithAgeFromWrittenAt(t *testing.T) {
	clock := newClock()
	s, _ := openTest(t, clock)
	ctx := context.Background()
	pi := in("anticoagulant", models.AudienceUser, "Rivaroxaban 10 mg once a day.")
	pi.AuthorLabel = "Dr Mensah, GP"
	pi.StaleAfter = clock.Now().Add(48 * time.Hour)
	mustPublish(t, s, writer, pi)
	mustPublish(t, s, writer, in("exercise", models.AudienceUser, "Ankle pumps."))

	if stale, h, err := s.Staleness(ctx, userRay, "care://ray/anticoagulant", clock.Now().Add(47*time.Hour)); err != nil || stale || h != "" {
		t.Fatalf("before staleAfter: %v %q %v", stale, h, err)
	}
	stale, h, err := s.Staleness(ctx, userRay, "care://ray/anticoagulant", clock.Now().Add(72*time.Hour))
	if err != nil || !stale || h != "[STALE — last changed three days ago by Dr Mensah, GP; say this age aloud]" {
		t.Fatalf("after staleAfter: %v %q %v", stale, h, err)
	}
	if stale, _, _ := s.Staleness(ctx, userRay, "care://ray/exercise", clock.Now().Add(1000*time.Hour)); stale {
		t.Fatal("a fact without staleAfter went stale")
	}
}

func TestOpen_DurableSQLitePragmas(t *testing.T) {
	if onPostgres() {
		t.Skip("SQLite pragmas; the Postgres pass checks TestOpen_PostgresCommitsDurably")
	}
	s, _ := openTest(t, nil)
	db, dialect := s.db, s.d.name()
	if dialect != "sqlite" {
		t.Fatalf("dialect %q", dialect)
	}
	var mode string
	var sync int
	if err := db.QueryRow(`PRAGMA journal_mode`).Scan(&mode); err != nil || mode != "wal" {
		t.Fatalf("journal_mode = %q, %v; want wal", mode, err)
	}
	if err := db.QueryRow(`PRAGMA synchronous`).Scan(&sync); err != nil || sync != 2 {
		t.Fatalf("synchronous = %d, %v; want 2 (FULL, P-20)", sync, err)
	}
}

func TestOpen_RefusesInMemoryEmptyAndQueryDSNs(t *testing.T) {
	for _, dsn := range []string{":memory:", "file::memory:", "", "/tmp/x?mode=ro"} {
		if s, err := Open(context.Background(), Options{DSN: dsn}); err == nil {
			s.Close()
			t.Errorf("Open(%q) succeeded", dsn)
		}
	}
}

func TestOpen_ReopenKeepsEverything(t *testing.T) {
	s, path := openTest(t, nil)
	ctx := context.Background()
	if _, err := Seed(ctx, s, demoNow(t)); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s2, err := Open(ctx, Options{DSN: path, AuditKey: []byte("test-audit-key")})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if fs, _ := s2.List(ctx, system); len(fs) != 8 {
		t.Fatalf("after reopen: %d facts", len(fs))
	}
	if bad, err := s2.VerifyAudit(ctx); err != nil || bad != 0 {
		t.Fatalf("audit after reopen: %d, %v", bad, err)
	}
}
