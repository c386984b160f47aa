package store

import (
	"bytes"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	_ "modernc.org/sqlite" // the attacker's own connection to the file

	"github.com/unsay/unsay/models"
)

// outage is a key-service failure as store/envelope reports one: Temporary.
type outage struct{}

func (outage) Error() string   { return "fake key service: unavailable" }
func (outage) Temporary() bool { return true }

// fakeSealer is a concurrency-safe test Sealer (AES-256-GCM, nonce ‖
// ciphertext ‖ tag) that records the AAD of every Seal, can fail Open or
// Seal with a temporary outage, and can run a hook inside Seal.
type fakeSealer struct {
	aead     cipher.AEAD
	openDown atomic.Bool
	sealDown atomic.Bool
	onSeal   func(aad string) // called at the start of every Seal, when set

	mu   sync.Mutex
	aads []string
}

func newFakeSealer(t testing.TB) *fakeSealer {
	t.Helper()
	block, err := aes.NewCipher(bytes.Repeat([]byte{7}, 32))
	if err != nil {
		t.Fatal(err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		t.Fatal(err)
	}
	return &fakeSealer{aead: aead}
}

func (f *fakeSealer) Seal(_ context.Context, aad, pt []byte) ([]byte, error) {
	if f.onSeal != nil {
		f.onSeal(string(aad))
	}
	if f.sealDown.Load() {
		return nil, fmt.Errorf("seal: %w", outage{})
	}
	f.mu.Lock()
	f.aads = append(f.aads, string(aad))
	f.mu.Unlock()
	nonce := make([]byte, f.aead.NonceSize())
	rand.Read(nonce)
	return f.aead.Seal(nonce, nonce, pt, aad), nil
}

func (f *fakeSealer) Open(_ context.Context, aad, sealed []byte) ([]byte, error) {
	if f.openDown.Load() {
		return nil, fmt.Errorf("open: %w", outage{})
	}
	n := f.aead.NonceSize()
	if len(sealed) < n {
		return nil, errors.New("short")
	}
	return f.aead.Open(nil, sealed[:n], sealed[n:], aad)
}

func (f *fakeSealer) Receipt(aad, _ []byte) (*AtRestReceipt, error) {
	return &AtRestReceipt{Provider: "fake", KeyID: "k", AAD: string(aad)}, nil
}

func (f *fakeSealer) Name() string { return "fake" }

func (f *fakeSealer) sealedAADs() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.aads...)
}

// syncBuffer is a bytes.Buffer safe for a concurrent slog handler.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// openSQLiteWith opens the SQLite store at path with sl (nil: plaintext),
// logging into the returned buffer.
func openSQLiteWith(t *testing.T, path string, sl Sealer) (*Store, *syncBuffer) {
	t.Helper()
	logs := &syncBuffer{}
	s, err := Open(context.Background(), Options{DSN: path, AuditKey: []byte("test-audit-key"), Sealer: sl,
		Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, logs
}

// attackerExec runs query on the SQLite file through the attacker's own
// database/sql connection (driver "sqlite"), as someone with write access
// to the file would.
func attackerExec(t *testing.T, path, query string, args ...any) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	res, err := db.Exec(query, args...)
	if err != nil {
		t.Fatalf("attacker: %v", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		t.Fatalf("attacker: %q changed no row", query)
	}
}

// forgedValue is what the attacker writes: a speakable instruction nobody gave.
const forgedValue = "Full weight through the operated leg; no frame needed."

// forgePlaintext rewrites weight_bearing v2 as plaintext (sealed = 0) and
// recomputes its hash over the forged value, so that the chain itself is
// intact and only the seal can betray the forgery.
func forgePlaintext(t *testing.T, s *Store, path string) {
	t.Helper()
	h, err := s.History(context.Background(), system, "care://ray/weight_bearing")
	if err != nil || len(h) != 2 {
		t.Fatalf("History before the forgery = %d versions, %v", len(h), err)
	}
	v2 := h[1]
	attackerExec(t, path, `UPDATE versions SET value = ?, sealed = 0, hash = ? WHERE patient = 'ray' AND domain = 'weight_bearing' AND n = 2`,
		[]byte(forgedValue), VersionHash(v2.PrevHash, forgedValue, v2.WrittenAt, v2.AuthorID))
}

func TestRead_P6_PlaintextRowInASealedStoreFailsClosedAndVerifyLocatesIt(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sealed.db")
	s, logs := openSQLiteWith(t, path, newFakeSealer(t))
	ctx := context.Background()
	if _, err := Seed(ctx, s, demoNow(t)); err != nil {
		t.Fatal(err)
	}
	forgePlaintext(t, s, path)

	for _, uri := range []string{"care://ray/weight_bearing", "care://ray/weight_bearing/v2"} {
		if r, err := s.Read(ctx, userRay, uri); !errors.Is(err, ErrNotFound) || r.Version.Value != "" {
			t.Fatalf("Read %s = %q, %v; want ErrNotFound (fail closed)", uri, r.Version.Value, err)
		}
	}
	if _, err := s.History(ctx, userRay, "care://ray/weight_bearing"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("History = %v, want ErrNotFound", err)
	}
	facts, err := s.List(ctx, userRay)
	if err != nil {
		t.Fatal(err)
	}
	since, err := s.Since(ctx, userRay, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	var served []string
	for _, f := range facts {
		served = append(served, f.Current.Value)
	}
	for _, v := range since {
		served = append(served, v.Value)
	}
	if len(facts) != 4 || len(since) != 6 {
		t.Fatalf("List = %d facts, Since = %d versions; want 4 and 6 (only the forged version left out)", len(facts), len(since))
	}
	for _, v := range served {
		if v == forgedValue {
			t.Fatal("the forged plaintext was served")
		}
	}
	// The reason is logged, with where — never the value.
	out := logs.String()
	if !strings.Contains(out, "plaintext") || !strings.Contains(out, "care://ray/weight_bearing/v2") || strings.Contains(out, "operated leg") {
		t.Fatalf("log = %s", out)
	}
	r, err := s.Verify(ctx, userRay, "care://ray/weight_bearing")
	if err != nil || r.Intact || r.BrokenAt != 2 {
		t.Fatalf("Verify = %+v, %v; want BrokenAt 2", r, err)
	}
	// Twins: the untouched version of the same fact, and another fact, still read and verify.
	if r, err := s.Read(ctx, userRay, "care://ray/weight_bearing/v1"); err != nil || !strings.HasPrefix(r.Version.Value, "No weight") {
		t.Fatalf("Read v1 = %+v, %v", r, err)
	}
	if r, err := s.Verify(ctx, userRay, "care://ray/exercise"); err != nil || !r.Intact {
		t.Fatalf("Verify exercise = %+v, %v", r, err)
	}
}

func TestRead_PlaintextStoreWithoutASealerServesPlaintext(t *testing.T) {
	path := filepath.Join(t.TempDir(), "plain.db")
	s, logs := openSQLiteWith(t, path, nil)
	ctx := context.Background()
	if _, err := Seed(ctx, s, demoNow(t)); err != nil {
		t.Fatal(err)
	}
	r, err := s.Read(ctx, userRay, "care://ray/weight_bearing")
	if err != nil || !strings.HasPrefix(r.Version.Value, "Partial weight-bearing") {
		t.Fatalf("Read = %+v, %v", r, err)
	}
	if facts, err := s.List(ctx, userRay); err != nil || len(facts) != 5 {
		t.Fatalf("List = %d facts, %v; want 5", len(facts), err)
	}
	if h, err := s.History(ctx, userRay, "care://ray/weight_bearing"); err != nil || len(h) != 2 {
		t.Fatalf("History = %d, %v", len(h), err)
	}
	if v, err := s.Verify(ctx, userRay, "care://ray/weight_bearing"); err != nil || !v.Intact || v.Versions[1].AtRest != nil {
		t.Fatalf("Verify = %+v, %v", v, err)
	}
	if strings.Contains(logs.String(), "plaintext") {
		t.Fatalf("a plaintext store logged a refusal: %s", logs.String())
	}
}

func TestRekey_SealsAPlaintextStoreWhoseRowsFailClosedUntilThen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "migrate.db")
	ctx := context.Background()
	plain, _ := openSQLiteWith(t, path, nil)
	if _, err := Seed(ctx, plain, demoNow(t)); err != nil {
		t.Fatal(err)
	}
	before := seededHashesOf(t, plain)
	plain.Close()

	sl := newFakeSealer(t)
	s, logs := openSQLiteWith(t, path, sl)
	// Before rekey, plaintext rows are not served by a sealed store.
	if _, err := s.Read(ctx, userRay, "care://ray/exercise"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Read before rekey = %v, want ErrNotFound", err)
	}
	n, err := s.Rekey(ctx)
	if err != nil || n != 11 {
		t.Fatalf("Rekey = %d, %v; want 11", n, err)
	}
	if !strings.Contains(logs.String(), "count=11") {
		t.Fatalf("rekey did not log the plaintext versions it sealed: %s", logs.String())
	}
	if got := seededHashesOf(t, s); !equalStrings(got, before) {
		t.Fatalf("hashes changed by rekey: %v", got)
	}
	if r, err := s.Read(ctx, userRay, "care://ray/exercise"); err != nil || !strings.HasPrefix(r.Version.Value, "Ankle pumps") {
		t.Fatalf("Read after rekey = %+v, %v", r, err)
	}
	res, err := s.VerifyAll(ctx, system)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if !r.Intact {
			t.Fatalf("%s broken at %d after rekey", r.URI, r.BrokenAt)
		}
	}
}

func TestVerify_SealerOutageIsAnErrorNotABrokenChain(t *testing.T) {
	path := filepath.Join(t.TempDir(), "outage.db")
	sl := newFakeSealer(t)
	s, _ := openSQLiteWith(t, path, sl)
	ctx := context.Background()
	if _, err := Seed(ctx, s, demoNow(t)); err != nil {
		t.Fatal(err)
	}
	sl.openDown.Store(true)
	r, err := s.Verify(ctx, userRay, "care://ray/weight_bearing")
	var tmp interface{ Temporary() bool }
	if !errors.Is(err, ErrSealerUnavailable) || !errors.As(err, &tmp) || !tmp.Temporary() || errors.Is(err, ErrNotFound) {
		t.Fatalf("Verify during outage = %+v, %v; want an error wrapping ErrSealerUnavailable", r, err)
	}
	if r.BrokenAt != 0 || len(r.Versions) != 0 {
		t.Fatalf("Verify during outage gave a verdict: %+v", r)
	}
	if _, err := s.VerifyAll(ctx, system); !errors.Is(err, ErrSealerUnavailable) {
		t.Fatalf("VerifyAll during outage = %v", err)
	}
	// Twin: the outage over, the same chain is intact.
	sl.openDown.Store(false)
	if r, err := s.Verify(ctx, userRay, "care://ray/weight_bearing"); err != nil || !r.Intact {
		t.Fatalf("Verify after outage = %+v, %v", r, err)
	}
}

func TestRead_SealerOutageFailsWithAnErrorThatIsNotNotFound(t *testing.T) {
	path := filepath.Join(t.TempDir(), "outage.db")
	sl := newFakeSealer(t)
	s, _ := openSQLiteWith(t, path, sl)
	ctx := context.Background()
	if _, err := Seed(ctx, s, demoNow(t)); err != nil {
		t.Fatal(err)
	}
	sl.openDown.Store(true)
	calls := map[string]func() (any, error){
		"Read":    func() (any, error) { return s.Read(ctx, userRay, "care://ray/weight_bearing") },
		"History": func() (any, error) { return s.History(ctx, userRay, "care://ray/weight_bearing") },
		"List":    func() (any, error) { return s.List(ctx, userRay) },
		"Since":   func() (any, error) { return s.Since(ctx, userRay, time.Time{}) },
	}
	for name, call := range calls {
		got, err := call()
		if err == nil || errors.Is(err, ErrNotFound) || !errors.Is(err, ErrSealerUnavailable) {
			t.Errorf("%s during outage: err = %v; want ErrSealerUnavailable, not ErrNotFound", name, err)
		}
		if strings.Contains(fmt.Sprint(got), "weight-bearing") {
			t.Errorf("%s during outage served a value: %v", name, got)
		}
	}
	sl.openDown.Store(false)
	for name, call := range calls {
		if _, err := call(); err != nil {
			t.Errorf("%s after the outage: %v", name, err)
		}
	}
}

func TestPublish_SealerOutageWritesNothing(t *testing.T) {
	sl := newFakeSealer(t)
	s, _ := openSQLiteWith(t, filepath.Join(t.TempDir(), "outage.db"), sl)
	ctx := context.Background()
	mustPublish(t, s, writer, in("weight_bearing", models.AudienceUser, "Partial weight-bearing."))
	sl.sealDown.Store(true)
	if _, err := s.Publish(ctx, writer, in("weight_bearing", models.AudienceUser, "Full weight-bearing.")); !errors.Is(err, ErrSealerUnavailable) {
		t.Fatalf("Publish during a Seal outage = %v, want ErrSealerUnavailable", err)
	}
	// An outage while opening the current version to compare it also refuses.
	sl.sealDown.Store(false)
	sl.openDown.Store(true)
	if _, err := s.Publish(ctx, writer, in("weight_bearing", models.AudienceUser, "Partial weight-bearing.")); !errors.Is(err, ErrSealerUnavailable) {
		t.Fatalf("Publish during an Open outage = %v, want ErrSealerUnavailable", err)
	}
	sl.openDown.Store(false)
	if last, _ := s.LastSeq(ctx); last != 1 {
		t.Fatalf("LastSeq = %d after refused publishes, want 1", last)
	}
	// Twin: the outage over, the write commits.
	if r := mustPublish(t, s, writer, in("weight_bearing", models.AudienceUser, "Full weight-bearing.")); r.Version.N != 2 || r.Unchanged {
		t.Fatalf("Publish after the outage = %+v", r)
	}
}

func TestPublish_SealsOutsideTheWriteLock(t *testing.T) {
	sl := newFakeSealer(t)
	entered, release := make(chan struct{}), make(chan struct{})
	sl.onSeal = func(aad string) {
		if strings.HasPrefix(aad, "ray|slow|") {
			close(entered)
			<-release
		}
	}
	s, _ := openSQLiteWith(t, filepath.Join(t.TempDir(), "lock.db"), sl)
	ctx := context.Background()
	slow := make(chan error, 1)
	go func() {
		_, err := s.Publish(ctx, writer, in("slow", models.AudienceUser, "Sealed slowly, as over a network."))
		slow <- err
	}()
	<-entered
	// While one Seal is in flight, another fact commits and the audit log
	// (which needs the write lock) appends.
	fast := make(chan error, 1)
	go func() {
		_, err := s.Publish(ctx, writer, in("fast", models.AudienceUser, "Not queued behind the slow seal."))
		if err == nil {
			err = s.Audit(ctx, AuditEntry{Actor: "okafor", Outcome: "accepted", Reason: ReasonOK, Via: "cli"})
		}
		fast <- err
	}()
	select {
	case err := <-fast:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		close(release)
		t.Fatal("a publish of another fact waited for an in-flight Seal: the write lock is held across Seal")
	}
	close(release)
	if err := <-slow; err != nil {
		t.Fatal(err)
	}
	if r, err := s.Read(ctx, userRay, "care://ray/slow"); err != nil || r.Version.N != 1 {
		t.Fatalf("Read slow = %+v, %v", r, err)
	}
}

func TestPublish_RetriesWhenAnotherProcessTakesTheVersionWhileSealing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "race.db")
	sl := newFakeSealer(t)
	s, _ := openSQLiteWith(t, path, sl)
	other, _ := openSQLiteWith(t, path, newFakeSealer(t)) // another process on the same file, same key
	ctx := context.Background()
	mustPublish(t, s, writer, in("weight_bearing", models.AudienceUser, "v1"))

	// The other writer races every Seal of ours for its version number.
	// Optimistic attempts lose; the last attempt seals under the write
	// lock, so the other writer cannot commit until ours has (it is given
	// a moment to try; it finishes after our commit).
	var (
		races      []chan error // one per Seal of ours
		otherValue = func(i int) string { return fmt.Sprintf("other %d", i) }
	)
	sl.onSeal = func(aad string) {
		done := make(chan error, 1)
		races = append(races, done)
		go func(i int) {
			_, err := other.Publish(ctx, writer, in("weight_bearing", models.AudienceUser, otherValue(i)))
			done <- err
		}(len(races))
		select {
		case err := <-done:
			done <- err
		case <-time.After(500 * time.Millisecond): // blocked behind our write lock
		}
	}
	r, err := s.Publish(ctx, writer, in("weight_bearing", models.AudienceUser, "ours"))
	if err != nil {
		t.Fatalf("Publish while raced on every attempt: %v", err)
	}
	for _, done := range races {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	sl.onSeal = nil
	if len(races) != publishAttempts {
		t.Fatalf("sealed %d times, want %d", len(races), publishAttempts)
	}
	if want := 2 + publishAttempts - 1; r.Version.N != want {
		t.Fatalf("our version = %d, want %d", r.Version.N, want)
	}
	wantAADs := []string{"ray|weight_bearing|v1|user"}
	for n := 2; n <= 2+publishAttempts-1; n++ {
		wantAADs = append(wantAADs, fmt.Sprintf("ray|weight_bearing|v%d|user", n))
	}
	if got := sl.sealedAADs(); !equalStrings(got, wantAADs) {
		t.Fatalf("sealed under %v, want %v", got, wantAADs)
	}
	got, err := s.Read(ctx, userRay, fmt.Sprintf("care://ray/weight_bearing/v%d", r.Version.N))
	if err != nil || got.Version.Value != "ours" || got.Latest != r.Version.N+1 {
		t.Fatalf("Read = %+v, %v; want ours, then the other writer's last", got, err)
	}
	if last, err := s.Read(ctx, userRay, "care://ray/weight_bearing"); err != nil || last.Version.Value != otherValue(publishAttempts) {
		t.Fatalf("Read latest = %+v, %v", last, err)
	}
	if v, err := s.Verify(ctx, userRay, "care://ray/weight_bearing"); err != nil || !v.Intact || len(v.Versions) != r.Version.N+1 {
		t.Fatalf("Verify = %+v, %v", v, err)
	}
}

func TestPublish_ContiguousVersionsUnderConcurrencyWithASealer(t *testing.T) {
	path := filepath.Join(t.TempDir(), "concurrent.db")
	s, _ := openSQLiteWith(t, path, newFakeSealer(t))
	other, _ := openSQLiteWith(t, path, newFakeSealer(t)) // a second writer process on the same file
	ctx := context.Background()
	const workers, each = 8, 100
	var wg sync.WaitGroup
	errs := make(chan error, workers*each)
	for w := range workers {
		st := s
		if w%4 == 3 { // two of the eight write through the other store: cross-process races
			st = other
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				if _, err := st.Publish(ctx, writer, in("weight_bearing", models.AudienceUser, fmt.Sprintf("w%d i%d", w, i))); err != nil {
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
	if r, err := s.Verify(ctx, userRay, "care://ray/weight_bearing"); err != nil || !r.Intact {
		t.Fatalf("Verify after concurrent sealed writes = %+v, %v", r.BrokenAt, err)
	}
}

func TestPublish_UnchangedWriteReturnsTheCurrentVersionAndWritesNothing(t *testing.T) {
	stale := time.Date(2026, 10, 20, 0, 0, 0, 0, time.UTC)
	base := in("weight_bearing", models.AudienceUser, "Partial weight-bearing.")
	base.StaleAfter = stale
	for _, sealed := range []bool{false, true} {
		t.Run(fmt.Sprintf("sealed=%v", sealed), func(t *testing.T) {
			var sl Sealer
			if sealed {
				sl = newFakeSealer(t)
			}
			s, _ := openSQLiteWith(t, filepath.Join(t.TempDir(), "unchanged.db"), sl)
			ctx := context.Background()
			first := mustPublish(t, s, writer, base)
			again := base
			again.AuthorLabel = "  Sarah Okafor, physio " // normalized to the same label
			again.StaleAfter = stale.Add(400 * time.Microsecond).In(time.FixedZone("BST", 3600))
			r := mustPublish(t, s, writer, again)
			if !r.Unchanged || r.Created || r.Replayed || r.Version.N != 1 || r.Version.Hash != first.Version.Hash ||
				r.Seq != first.Seq || r.Version.Value != base.Value {
				t.Fatalf("identical write = %+v, want Unchanged v1", r)
			}
			if last, _ := s.LastSeq(ctx); last != 1 {
				t.Fatalf("an unchanged write wrote: LastSeq = %d", last)
			}
			// Twins: any one field different writes a new version.
			n := 1
			for _, tc := range []struct {
				field string
				mut   func(*PublishInput)
			}{
				{"value", func(p *PublishInput) { p.Value = "Full weight-bearing." }},
				{"authorLabel", func(p *PublishInput) { p.AuthorLabel = "S. Okafor" }},
				{"authorId", func(p *PublishInput) { p.AuthorID = "mensah" }},
				{"staleAfter", func(p *PublishInput) { p.StaleAfter = stale.Add(time.Millisecond) }},
				{"staleAfter cleared", func(p *PublishInput) { p.StaleAfter = time.Time{} }},
				{"priority", func(p *PublishInput) { p.Priority = 0.75 }},
			} {
				next := base
				tc.mut(&next)
				r := mustPublish(t, s, system, next)
				n++
				if r.Unchanged || r.Version.N != n {
					t.Fatalf("%s changed: %+v, want v%d", tc.field, r, n)
				}
				// Back to base: a change again, not unchanged.
				if r := mustPublish(t, s, system, base); r.Unchanged || r.Version.N != n+1 {
					t.Fatalf("%s restored: %+v, want v%d", tc.field, r, n+1)
				}
				n++
			}
			if _, err := s.Publish(ctx, writer, in("weight_bearing", models.AudienceAssistant, base.Value)); !errors.Is(err, ErrAudienceChange) {
				t.Fatalf("same value, other audience = %v, want ErrAudienceChange", err)
			}
		})
	}
}

func TestPublish_UnchangedWriteRemembersItsIdempotencyKey(t *testing.T) {
	s, _ := openTest(t, newClock())
	pi := in("weight_bearing", models.AudienceUser, "Partial weight-bearing.")
	first := mustPublish(t, s, writer, pi)
	pi.IdempotencyKey = "sig-1"
	if r := mustPublish(t, s, writer, pi); !r.Unchanged || r.Version.N != 1 {
		t.Fatalf("unchanged with a key = %+v", r)
	}
	mustPublish(t, s, writer, in("weight_bearing", models.AudienceUser, "Full weight-bearing."))
	// A replay of the keyed request does not re-apply it over the later change.
	r := mustPublish(t, s, writer, pi)
	if !r.Replayed || r.Version.N != 1 || r.Version.Hash != first.Version.Hash {
		t.Fatalf("replay of an unchanged write = %+v, want Replayed v1", r)
	}
	// Twin: the same value without the key is a change from v2.
	pi.IdempotencyKey = ""
	if r := mustPublish(t, s, writer, pi); r.Replayed || r.Unchanged || r.Version.N != 3 {
		t.Fatalf("same value, no key = %+v, want v3", r)
	}
}

func TestPublish_ACorrectionSupersedesAForgedPlaintextVersion(t *testing.T) {
	path := filepath.Join(t.TempDir(), "forged.db")
	s, _ := openSQLiteWith(t, path, newFakeSealer(t))
	ctx := context.Background()
	if _, err := Seed(ctx, s, demoNow(t)); err != nil {
		t.Fatal(err)
	}
	forgePlaintext(t, s, path)
	// Even the forged value itself, written by a clinician, is a new sealed version.
	fix := StagedRevision()
	fix.Value = forgedValue
	r, err := s.Publish(ctx, system, fix)
	if err != nil || r.Unchanged || r.Version.N != 3 {
		t.Fatalf("correction over a forged version = %+v, %v; want v3", r, err)
	}
	if got, err := s.Read(ctx, userRay, "care://ray/weight_bearing"); err != nil || got.Version.N != 3 {
		t.Fatalf("Read = %+v, %v", got, err)
	}
}
