package store

import (
	"bytes"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"slices"
	"testing"

	"github.com/unsay/unsay/models"
)

// gcmSealer is a test Sealer: AES-256-GCM, nonce ‖ ciphertext ‖ tag, AAD
// as given. It records the AADs it was asked to seal under.
type gcmSealer struct {
	aead cipher.AEAD
	aads [][]byte
}

func newGCMSealer(t testing.TB, key byte) *gcmSealer {
	block, err := aes.NewCipher(bytes.Repeat([]byte{key}, 32))
	if err != nil {
		t.Fatal(err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		t.Fatal(err)
	}
	return &gcmSealer{aead: aead}
}

func (g *gcmSealer) Seal(_ context.Context, aad, pt []byte) ([]byte, error) {
	g.aads = append(g.aads, bytes.Clone(aad))
	nonce := make([]byte, g.aead.NonceSize())
	rand.Read(nonce)
	return g.aead.Seal(nonce, nonce, pt, aad), nil
}

func (g *gcmSealer) Open(_ context.Context, aad, sealed []byte) ([]byte, error) {
	n := g.aead.NonceSize()
	if len(sealed) < n {
		return nil, errors.New("short")
	}
	return g.aead.Open(nil, sealed[:n], sealed[n:], aad)
}

func (g *gcmSealer) Receipt(aad, sealed []byte) (*AtRestReceipt, error) {
	n := g.aead.NonceSize()
	return &AtRestReceipt{Provider: "test", KeyID: "k", AAD: string(aad), Nonce: hex.EncodeToString(sealed[:n]),
		Tag: hex.EncodeToString(sealed[len(sealed)-16:])}, nil
}

func (g *gcmSealer) Name() string { return "test" }

func openSealed(t *testing.T, path string, sl Sealer) *Store {
	t.Helper()
	s, err := Open(context.Background(), Options{DSN: path, AuditKey: []byte("test-audit-key"), Sealer: sl})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestSeal_P6_ValuesSealedUnderTheirRecordsAADAndHashesOverPlaintext(t *testing.T) {
	path := t.TempDir() + "/sealed.db"
	sl := newGCMSealer(t, 1)
	s := openSealed(t, path, sl)
	ctx := context.Background()
	if _, err := Seed(ctx, s, demoNow(t)); err != nil {
		t.Fatal(err)
	}
	if string(sl.aads[0]) != "ray|anticoagulant|v1|user" {
		t.Fatalf("first AAD = %q", sl.aads[0])
	}
	// The same hashes as the plaintext seed: the chain is over plaintext.
	if got := seededHashesOf(t, s); !equalStrings(got, goldenDemoHashes) {
		t.Fatalf("sealed seed hashes differ from the plaintext golden hashes:\n%v", got)
	}
	db := s.db
	var raw []byte
	var sealed int
	if err := db.QueryRow(`SELECT value, sealed FROM versions WHERE domain = 'risk'`).Scan(&raw, &sealed); err != nil {
		t.Fatal(err)
	}
	if sealed != 1 || bytes.Contains(raw, []byte("Fall risk")) {
		t.Fatalf("value stored in the clear (sealed=%d)", sealed)
	}
	r, err := s.Verify(ctx, dualRay, "care-internal://ray/risk")
	if err != nil || !r.Intact || r.Versions[0].AtRest == nil || r.Versions[0].AtRest.AAD != "ray|risk|v1|assistant" {
		t.Fatalf("Verify sealed = %+v, %v", r, err)
	}
}

func TestSeal_P6_BytesMovedToAnotherRecordFailToOpenAndBreakTheChain(t *testing.T) {
	path := t.TempDir() + "/sealed.db"
	s := openSealed(t, path, newGCMSealer(t, 1))
	ctx := context.Background()
	if _, err := Seed(ctx, s, demoNow(t)); err != nil {
		t.Fatal(err)
	}
	// Paste the assistant-only risk ciphertext over a speakable record.
	tamper(t, path, `UPDATE versions SET value = (SELECT value FROM versions WHERE domain = 'risk') WHERE domain = 'contact'`)
	if _, err := s.Read(ctx, userRay, "care://ray/contact"); err == nil {
		t.Fatal("pasted ciphertext opened under another record's AAD")
	}
	r, err := s.Verify(ctx, userRay, "care://ray/contact")
	if err != nil || r.Intact || r.BrokenAt != 1 {
		t.Fatalf("Verify after paste = %+v, %v; want BrokenAt 1", r, err)
	}
	// Twin: an untouched record still reads.
	if _, err := s.Read(ctx, userRay, "care://ray/exercise"); err != nil {
		t.Fatal(err)
	}
}

func TestAAD_RefusesTheReservedBar(t *testing.T) {
	if _, err := AAD("ray|x", "d", 1, models.AudienceUser); !errors.Is(err, ErrInvalid) {
		t.Fatalf("AAD with '|' = %v", err)
	}
	if a, err := AAD("ray", "weight_bearing", 3, models.AudienceUser); err != nil || string(a) != "ray|weight_bearing|v3|user" {
		t.Fatalf("AAD = %q, %v", a, err)
	}
}

func TestRekey_ResealsEveryVersionWithoutChangingHashes(t *testing.T) {
	path := t.TempDir() + "/rekey.db"
	ctx := context.Background()
	plain := openSealed(t, path, nil)
	if _, err := Seed(ctx, plain, demoNow(t)); err != nil {
		t.Fatal(err)
	}
	plain.Close()

	s := openSealed(t, path, newGCMSealer(t, 2))
	n, err := s.Rekey(ctx)
	if err != nil || n != 11 {
		t.Fatalf("Rekey = %d, %v; want 11", n, err)
	}
	if got := seededHashesOf(t, s); !equalStrings(got, goldenDemoHashes) {
		t.Fatalf("hashes changed by rekey: %v", got)
	}
	r, err := s.Read(ctx, userRay, "care://ray/weight_bearing/v1")
	if err != nil || r.Version.Value != "No weight through the operated leg; transfers with the frame only." {
		t.Fatalf("Read after rekey = %q, %v", r.Version.Value, err)
	}
	s.Close()
	// Without the key, the sealed values cannot be read.
	none := openSealed(t, path, nil)
	if _, err := none.Read(ctx, userRay, "care://ray/weight_bearing"); !errors.Is(err, ErrSealed) {
		t.Fatalf("Read without a sealer = %v, want ErrSealed", err)
	}
	if _, err := none.Rekey(ctx); err == nil {
		t.Fatal("Rekey without a sealer succeeded")
	}
}

func seededHashesOf(t *testing.T, s *Store) []string {
	t.Helper()
	var out []string
	fs, err := s.List(context.Background(), system)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fs {
		h, err := s.History(context.Background(), system, f.Current.FactURI().String())
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range h {
			out = append(out, v.URI().String()+" "+v.Hash)
		}
	}
	return out
}

func equalStrings(a, b []string) bool { return slices.Equal(a, b) }
