package envelope_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/unsay/unsay/models"
	"github.com/unsay/unsay/store"
	"github.com/unsay/unsay/store/envelope"
)

// Ray's records from the demo seed's shape: one speakable, one never speakable.
const (
	weightBearing = "Full weight-bearing as tolerated. Use the frame for the first week."
	riskValue     = "Fall-risk assessment: high. Do not mention the score to the patient."
)

func randomKey(t testing.TB) []byte {
	t.Helper()
	k := make([]byte, 32)
	if _, err := rand.Read(k); err != nil {
		t.Fatal(err)
	}
	return k
}

func sha256Sum(b []byte) []byte { s := sha256.Sum256(b); return s[:] }

func b64(k []byte) string { return base64.StdEncoding.EncodeToString(k) }

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func mustAAD(t testing.TB, patient, domain string, n int, a models.Audience) []byte {
	t.Helper()
	b, err := envelope.AAD(patient, domain, n, a)
	if err != nil {
		t.Fatalf("AAD(%q, %q, %d, %q): %v", patient, domain, n, a, err)
	}
	return b
}

func newLocal(t testing.TB, master []byte, previous ...[]byte) store.Sealer {
	t.Helper()
	var prev []string
	for _, p := range previous {
		prev = append(prev, b64(p))
	}
	s, err := envelope.New(context.Background(), envelope.Config{Mode: "local", Getenv: env(map[string]string{
		"UNSAY_MASTER_KEY":           b64(master),
		"UNSAY_MASTER_KEYS_PREVIOUS": strings.Join(prev, ","),
	})})
	if err != nil {
		t.Fatalf("New(local): %v", err)
	}
	return s
}

func seal(t testing.TB, s store.Sealer, aad []byte, value string) []byte {
	t.Helper()
	b, err := s.Seal(context.Background(), aad, []byte(value))
	if err != nil {
		t.Fatalf("Seal: %v", err)
	}
	return b
}

// layout returns the offsets of the nonce and of the tag in a sealed value,
// from the documented format (magic, version, provider, key id, material).
func layout(t testing.TB, sealed []byte) (nonceAt, tagAt int) {
	t.Helper()
	k := int(binary.BigEndian.Uint16(sealed[6:]))
	m := int(binary.BigEndian.Uint16(sealed[8+k:]))
	return 10 + k + m, len(sealed) - envelope.TagSize
}

func TestAAD_FormatsRecordIdentity(t *testing.T) {
	got, err := envelope.AAD("ray", "weight_bearing", 3, models.AudienceUser)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != "ray|weight_bearing|v3|user" {
		t.Fatalf("AAD = %q", got)
	}
	got, err = envelope.AAD("ray", "risk", 12, models.AudienceAssistant)
	if err != nil || string(got) != "ray|risk|v12|assistant" {
		t.Fatalf("AAD = %q, %v", got, err)
	}
}

func TestAAD_RefusesReservedSeparatorAndEmptyComponents(t *testing.T) {
	tests := []struct {
		name, patient, domain string
		n                     int
		aud                   models.Audience
		field                 string
	}{
		{"pipe in patient", "ray|x", "risk", 1, models.AudienceUser, "patient"},
		{"pipe in domain", "ray", "weight_bearing|v1|user", 1, models.AudienceUser, "domain"},
		{"bare pipe domain", "ray", "|", 1, models.AudienceUser, "domain"},
		{"empty patient", "", "risk", 1, models.AudienceUser, "patient"},
		{"empty domain", "ray", "", 1, models.AudienceUser, "domain"},
		{"version zero", "ray", "risk", 0, models.AudienceUser, "version"},
		{"negative version", "ray", "risk", -1, models.AudienceUser, "version"},
		{"unknown audience", "ray", "risk", 1, models.Audience("user|assistant"), "audience"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b, err := envelope.AAD(tc.patient, tc.domain, tc.n, tc.aud)
			if b != nil || !errors.Is(err, envelope.ErrAAD) {
				t.Fatalf("AAD = %q, %v; want nil, ErrAAD", b, err)
			}
			var ae *envelope.AADError
			if !errors.As(err, &ae) || ae.Field != tc.field {
				t.Fatalf("err = %#v, want *AADError{Field: %q}", err, tc.field)
			}
		})
	}
}

func TestOpen_AcceptsOnlyTheSlotItWasSealedIn(t *testing.T) {
	s := newLocal(t, randomKey(t))
	risk := mustAAD(t, "ray", "risk", 1, models.AudienceAssistant)
	sealed := seal(t, s, risk, riskValue)

	tests := []struct {
		name string
		aad  []byte
		ok   bool
	}{
		{"same record, audience and version opens", risk, true},
		{"pasted into another record (care://ray/weight_bearing)", mustAAD(t, "ray", "weight_bearing", 1, models.AudienceUser), false},
		{"same record under the other audience", mustAAD(t, "ray", "risk", 1, models.AudienceUser), false},
		{"another version of the same record", mustAAD(t, "ray", "risk", 2, models.AudienceAssistant), false},
		{"another patient's same record", mustAAD(t, "rita", "risk", 1, models.AudienceAssistant), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pt, err := s.Open(context.Background(), tc.aad, sealed)
			if tc.ok {
				if err != nil || string(pt) != riskValue {
					t.Fatalf("Open = %q, %v; want the value", pt, err)
				}
				return
			}
			if pt != nil || !errors.Is(err, envelope.ErrOpen) || !errors.Is(err, envelope.ErrAuthentication) {
				t.Fatalf("Open = %q, %v; want nil, ErrAuthentication", pt, err)
			}
			if strings.Contains(err.Error(), "Fall-risk") {
				t.Fatalf("error leaks plaintext: %v", err)
			}
		})
	}
}

func TestOpen_RefusesFlippedBits(t *testing.T) {
	s := newLocal(t, randomKey(t))
	aad := mustAAD(t, "ray", "risk", 1, models.AudienceAssistant)
	sealed := seal(t, s, aad, riskValue)
	nonceAt, tagAt := layout(t, sealed)
	ctAt := nonceAt + envelope.NonceSize

	regions := []struct {
		name     string
		from, to int
		kind     error // asserted for every bit of the region; nil: any ErrOpen
	}{
		{"header", 0, nonceAt, nil},
		{"nonce", nonceAt, ctAt, envelope.ErrAuthentication},
		{"ciphertext", ctAt, tagAt, envelope.ErrAuthentication},
		{"tag", tagAt, len(sealed), envelope.ErrAuthentication},
	}
	for _, r := range regions {
		t.Run(r.name, func(t *testing.T) {
			if r.to <= r.from {
				t.Fatalf("empty region %d..%d", r.from, r.to)
			}
			for i := r.from; i < r.to; i++ {
				for bit := 0; bit < 8; bit++ {
					b := bytes.Clone(sealed)
					b[i] ^= 1 << bit
					pt, err := s.Open(context.Background(), aad, b)
					if pt != nil || !errors.Is(err, envelope.ErrOpen) {
						t.Fatalf("byte %d bit %d: Open = %q, %v; want nil, ErrOpen", i, bit, pt, err)
					}
					if r.kind != nil && !errors.Is(err, r.kind) {
						t.Fatalf("byte %d bit %d: err = %v, want %v", i, bit, err, r.kind)
					}
				}
			}
		})
	}
	// The positive twin: the unmodified bytes still open.
	if pt, err := s.Open(context.Background(), aad, sealed); err != nil || string(pt) != riskValue {
		t.Fatalf("untouched Open = %q, %v", pt, err)
	}
}

func TestOpen_RefusesTruncationAndExtension(t *testing.T) {
	s := newLocal(t, randomKey(t))
	aad := mustAAD(t, "ray", "risk", 1, models.AudienceAssistant)
	sealed := seal(t, s, aad, riskValue)
	nonceAt, _ := layout(t, sealed)
	minLen := nonceAt + envelope.NonceSize + envelope.TagSize
	for n := 0; n < len(sealed); n++ {
		pt, err := s.Open(context.Background(), aad, sealed[:n])
		if pt != nil || !errors.Is(err, envelope.ErrOpen) {
			t.Fatalf("len %d: Open = %q, %v; want nil, ErrOpen", n, pt, err)
		}
		switch {
		case n == 0:
			if !errors.Is(err, envelope.ErrNotEnvelope) {
				t.Fatalf("len 0: err = %v, want ErrNotEnvelope", err)
			}
		case n < minLen:
			if !errors.Is(err, envelope.ErrTruncated) {
				t.Fatalf("len %d: err = %v, want ErrTruncated", n, err)
			}
		default:
			if !errors.Is(err, envelope.ErrAuthentication) {
				t.Fatalf("len %d: err = %v, want ErrAuthentication", n, err)
			}
		}
	}
	if pt, err := s.Open(context.Background(), aad, append(bytes.Clone(sealed), 0)); pt != nil || !errors.Is(err, envelope.ErrAuthentication) {
		t.Fatalf("extended: Open = %q, %v; want ErrAuthentication", pt, err)
	}
	if pt, err := s.Open(context.Background(), aad, sealed); err != nil || string(pt) != riskValue {
		t.Fatalf("whole Open = %q, %v", pt, err)
	}
}

func TestOpen_RefusesNonEnvelopeBytes(t *testing.T) {
	s := newLocal(t, randomKey(t))
	aad := mustAAD(t, "ray", "weight_bearing", 1, models.AudienceUser)
	sealed := seal(t, s, aad, weightBearing)
	otherVersion := bytes.Clone(sealed)
	otherVersion[4] = 2
	otherProvider := bytes.Clone(sealed)
	otherProvider[5] = 9
	zeroKeyID := bytes.Clone(sealed)
	binary.BigEndian.PutUint16(zeroKeyID[6:], 0)
	random := make([]byte, 300)
	_, _ = rand.Read(random)
	random[0] = 0x00

	tests := []struct {
		name  string
		b     []byte
		magic bool // starts with the envelope magic
	}{
		{"plaintext value", []byte(weightBearing), false},
		{"empty", nil, false},
		{"JSON", []byte(`{"value":"x"}`), false},
		{"random bytes", random, false},
		{"unknown format version", otherVersion, true},
		{"unknown provider id", otherProvider, true},
		{"zero-length key id", zeroKeyID, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pt, err := s.Open(context.Background(), aad, tc.b)
			if pt != nil || !errors.Is(err, envelope.ErrOpen) || !errors.Is(err, envelope.ErrNotEnvelope) {
				t.Fatalf("Open = %q, %v; want nil, ErrNotEnvelope", pt, err)
			}
			if rc, err := s.Receipt(aad, tc.b); rc != nil || !errors.Is(err, envelope.ErrNotEnvelope) {
				t.Fatalf("Receipt = %+v, %v; want nil, ErrNotEnvelope", rc, err)
			}
			if envelope.IsSealed(tc.b) != tc.magic {
				t.Fatalf("IsSealed = %v, want %v", !tc.magic, tc.magic)
			}
		})
	}
	if !envelope.IsSealed(sealed) {
		t.Fatal("IsSealed(sealed) = false")
	}
	if pt, err := s.Open(context.Background(), aad, sealed); err != nil || string(pt) != weightBearing {
		t.Fatalf("Open(sealed) = %q, %v", pt, err)
	}
}

func TestSeal_NonceAndSaltUniqueOver100000Seals(t *testing.T) {
	const n = 100_000
	s := newLocal(t, randomKey(t))
	aad := mustAAD(t, "ray", "weight_bearing", 1, models.AudienceUser)
	nonces := make(map[[envelope.NonceSize]byte]struct{}, n)
	salts := make(map[[32]byte]struct{}, n)
	pt := []byte("x")
	for i := 0; i < n; i++ {
		b, err := s.Seal(context.Background(), aad, pt)
		if err != nil {
			t.Fatal(err)
		}
		nonceAt, _ := layout(t, b)
		nonces[[envelope.NonceSize]byte(b[nonceAt:])] = struct{}{}
		salts[[32]byte(b[nonceAt-32:])] = struct{}{}
	}
	if len(nonces) != n || len(salts) != n {
		t.Fatalf("%d distinct nonces, %d distinct salts over %d seals", len(nonces), len(salts), n)
	}
}

func TestLocal_TwoMasterKeysIsolateEachOther(t *testing.T) {
	kA, kB := randomKey(t), randomKey(t)
	a, b := newLocal(t, kA), newLocal(t, kB)
	aad := mustAAD(t, "ray", "risk", 1, models.AudienceAssistant)
	sealedA := seal(t, a, aad, riskValue)

	if pt, err := a.Open(context.Background(), aad, sealedA); err != nil || string(pt) != riskValue {
		t.Fatalf("A opens its own: %q, %v", pt, err)
	}
	if pt, err := b.Open(context.Background(), aad, sealedA); pt != nil || !errors.Is(err, envelope.ErrUnknownKey) {
		t.Fatalf("B opens A's: %q, %v; want ErrUnknownKey", pt, err)
	}
	// Relabel A's bytes with B's key id: B now derives a key from its own
	// master and the tag still refuses.
	idA, idB := envelope.LocalKeyID(kA), envelope.LocalKeyID(kB)
	forged := bytes.Replace(bytes.Clone(sealedA), []byte(idA), []byte(idB), 1)
	if bytes.Equal(forged, sealedA) {
		t.Fatal("key id not found in header")
	}
	if pt, err := b.Open(context.Background(), aad, forged); pt != nil || !errors.Is(err, envelope.ErrAuthentication) {
		t.Fatalf("B opens relabelled A: %q, %v; want ErrAuthentication", pt, err)
	}
	if idA == idB || len(idA) != 16 {
		t.Fatalf("key ids %q %q", idA, idB)
	}
}

func TestLocalKeyID_IsAnHMACNotABareHash(t *testing.T) {
	k := randomKey(t)
	id := envelope.LocalKeyID(k)
	if id != envelope.LocalKeyID(bytes.Clone(k)) {
		t.Fatal("key id not deterministic")
	}
	for _, bare := range [][]byte{sha256Sum(k)} {
		if strings.HasPrefix(hex.EncodeToString(bare), id) {
			t.Fatal("key id is a prefix of SHA-256(master)")
		}
	}
	rc, err := newLocal(t, k).Receipt([]byte("a"), seal(t, newLocal(t, k), []byte("a"), "v"))
	if err != nil || rc.KeyID != id {
		t.Fatalf("receipt key id %v, %v; want %s", rc, err, id)
	}
}

func TestLocal_RotationOpensOldSealsAndSealsUnderNewKey(t *testing.T) {
	k1, k2 := randomKey(t), randomKey(t)
	old := newLocal(t, k1)
	aad := mustAAD(t, "ray", "weight_bearing", 2, models.AudienceUser)
	sealedOld := seal(t, old, aad, weightBearing)

	rotated := newLocal(t, k2, k1)
	if pt, err := rotated.Open(context.Background(), aad, sealedOld); err != nil || string(pt) != weightBearing {
		t.Fatalf("rotated opens old: %q, %v", pt, err)
	}
	sealedNew := seal(t, rotated, aad, weightBearing)
	rc, err := rotated.Receipt(aad, sealedNew)
	if err != nil || rc.KeyID != envelope.LocalKeyID(k2) {
		t.Fatalf("new seal key id = %v, %v; want %s", rc, err, envelope.LocalKeyID(k2))
	}
	rcOld, _ := rotated.Receipt(aad, sealedOld)
	if rcOld.KeyID != envelope.LocalKeyID(k1) {
		t.Fatalf("old seal key id = %s, want %s", rcOld.KeyID, envelope.LocalKeyID(k1))
	}
	// Refusal twin: once k1 is dropped from UNSAY_MASTER_KEYS_PREVIOUS, its records no longer open.
	dropped := newLocal(t, k2)
	if pt, err := dropped.Open(context.Background(), aad, sealedOld); pt != nil || !errors.Is(err, envelope.ErrUnknownKey) {
		t.Fatalf("without previous key: %q, %v; want ErrUnknownKey", pt, err)
	}
	if pt, err := dropped.Open(context.Background(), aad, sealedNew); err != nil || string(pt) != weightBearing {
		t.Fatalf("without previous key, new seal: %q, %v", pt, err)
	}
}

func TestNew_LocalRefusesMissingShortOrMalformedKeysNamingTheVariable(t *testing.T) {
	good := b64(randomKey(t))
	short := b64(make([]byte, 31))
	tests := []struct {
		name       string
		env        map[string]string
		missing    []string
		invalidHas []string
	}{
		{"missing", map[string]string{}, []string{"UNSAY_MASTER_KEY"}, nil},
		{"whitespace only", map[string]string{"UNSAY_MASTER_KEY": "  "}, []string{"UNSAY_MASTER_KEY"}, nil},
		{"31 bytes", map[string]string{"UNSAY_MASTER_KEY": short}, nil, []string{"UNSAY_MASTER_KEY: 31 bytes"}},
		{"not base64", map[string]string{"UNSAY_MASTER_KEY": "this is not base64!!" + strings.Repeat("x", 40)}, nil, []string{"UNSAY_MASTER_KEY: not valid base64"}},
		{"bad previous", map[string]string{"UNSAY_MASTER_KEY": good, "UNSAY_MASTER_KEYS_PREVIOUS": good + ",%%%"}, nil, []string{"UNSAY_MASTER_KEYS_PREVIOUS[1]: not valid base64"}},
		{"missing current, short previous", map[string]string{"UNSAY_MASTER_KEYS_PREVIOUS": short}, []string{"UNSAY_MASTER_KEY"}, []string{"UNSAY_MASTER_KEYS_PREVIOUS[0]: 31 bytes"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := envelope.New(context.Background(), envelope.Config{Mode: "local", Getenv: env(tc.env)})
			if s != nil || !errors.Is(err, envelope.ErrConfig) {
				t.Fatalf("New = %v, %v; want nil, ErrConfig", s, err)
			}
			var ce *envelope.ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("err %T is not *ConfigError", err)
			}
			if strings.Join(ce.Missing, ",") != strings.Join(tc.missing, ",") {
				t.Fatalf("Missing = %q, want %q", ce.Missing, tc.missing)
			}
			for _, want := range tc.invalidHas {
				if !strings.Contains(strings.Join(ce.Invalid, "; "), want) {
					t.Fatalf("Invalid = %q, want it to contain %q", ce.Invalid, want)
				}
			}
			for _, v := range tc.env {
				if strings.TrimSpace(v) != "" && strings.Contains(err.Error(), v) {
					t.Fatalf("error echoes a key: %v", err)
				}
			}
		})
	}
}

func TestNew_LocalAcceptsBase64Variants(t *testing.T) {
	k := randomKey(t)
	for name, s := range map[string]string{
		"std":         base64.StdEncoding.EncodeToString(k),
		"raw std":     base64.RawStdEncoding.EncodeToString(k),
		"url":         base64.URLEncoding.EncodeToString(k),
		"64 bytes":    b64(append(bytes.Clone(k), k...)),
		"with spaces": " " + b64(k) + "\n",
	} {
		t.Run(name, func(t *testing.T) {
			sl, err := envelope.New(context.Background(), envelope.Config{Mode: "local", Getenv: env(map[string]string{"UNSAY_MASTER_KEY": s})})
			if err != nil || sl == nil || sl.Name() != "local" {
				t.Fatalf("New = %v, %v", sl, err)
			}
		})
	}
}

func TestNew_ModeNoneIsNilAndUnknownModesAreRefused(t *testing.T) {
	s, err := envelope.New(context.Background(), envelope.Config{Mode: "none", Getenv: env(nil)})
	if s != nil || err != nil {
		t.Fatalf("none: %v, %v; want nil, nil", s, err)
	}
	if got := envelope.Describe(s); got != "PLAINTEXT" {
		t.Fatalf("Describe(nil) = %q, want PLAINTEXT", got)
	}
	for _, mode := range []string{"", "aes", "LOCAL", "plaintext"} {
		s, err := envelope.New(context.Background(), envelope.Config{Mode: mode, Getenv: env(map[string]string{"UNSAY_MASTER_KEY": b64(randomKey(t))})})
		if s != nil || !errors.Is(err, envelope.ErrConfig) {
			t.Fatalf("mode %q: %v, %v; want ErrConfig", mode, s, err)
		}
	}
}

func TestDescribe_NamesProviderAndKeyForTheStartupLine(t *testing.T) {
	k1, k2 := randomKey(t), randomKey(t)
	got := envelope.Describe(newLocal(t, k2, k1))
	want := "local (key " + envelope.LocalKeyID(k2) + ", 1 previous)"
	if got != want {
		t.Fatalf("Describe = %q, want %q", got, want)
	}
	if strings.Contains(got, "PLAINTEXT") {
		t.Fatal("an encrypted store described as PLAINTEXT")
	}
}

func TestReceipt_DescribesTheSealWithoutPlaintext(t *testing.T) {
	k := randomKey(t)
	s := newLocal(t, k)
	aad := mustAAD(t, "ray", "risk", 1, models.AudienceAssistant)
	sealed := seal(t, s, aad, riskValue)
	rc, err := s.Receipt(aad, sealed)
	if err != nil {
		t.Fatal(err)
	}
	nonceAt, tagAt := layout(t, sealed)
	want := store.AtRestReceipt{
		Provider: "local",
		KeyID:    envelope.LocalKeyID(k),
		AAD:      "ray|risk|v1|assistant",
		Nonce:    hex.EncodeToString(sealed[nonceAt : nonceAt+envelope.NonceSize]),
		Tag:      hex.EncodeToString(sealed[tagAt:]),
	}
	if d := cmp.Diff(want, *rc); d != "" {
		t.Fatalf("Receipt (-want +got):\n%s", d)
	}
	j, _ := json.Marshal(rc)
	if bytes.Contains(j, []byte("Fall-risk")) || bytes.Contains(sealed, []byte("Fall-risk")) {
		t.Fatal("plaintext visible in receipt or sealed bytes")
	}
}

func TestSealOpen_RefuseEmptyAAD(t *testing.T) {
	s := newLocal(t, randomKey(t))
	if b, err := s.Seal(context.Background(), nil, []byte("v")); b != nil || !errors.Is(err, envelope.ErrSeal) || !errors.Is(err, envelope.ErrAAD) {
		t.Fatalf("Seal(empty aad) = %x, %v", b, err)
	}
	sealed := seal(t, s, []byte("a"), "v")
	if pt, err := s.Open(context.Background(), nil, sealed); pt != nil || !errors.Is(err, envelope.ErrAAD) {
		t.Fatalf("Open(empty aad) = %q, %v", pt, err)
	}
}

func TestSealOpen_EmptyAndLargeValuesRoundTrip(t *testing.T) {
	s := newLocal(t, randomKey(t))
	aad := []byte("ray|notes|v1|user")
	for _, v := range []string{"", strings.Repeat("é", models.MaxValueBytes/2)} {
		pt, err := s.Open(context.Background(), aad, seal(t, s, aad, v))
		if err != nil || string(pt) != v {
			t.Fatalf("round trip of %d bytes: %d bytes, %v", len(v), len(pt), err)
		}
	}
}

func TestSealer_ConcurrentSealAndOpen(t *testing.T) {
	s := newLocal(t, randomKey(t))
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			aad, _ := envelope.AAD("ray", "weight_bearing", g+1, models.AudienceUser)
			for i := 0; i < 200; i++ {
				b, err := s.Seal(context.Background(), aad, []byte(weightBearing))
				if err == nil {
					var pt []byte
					pt, err = s.Open(context.Background(), aad, b)
					if err == nil && string(pt) != weightBearing {
						err = errors.New("wrong plaintext")
					}
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

func TestError_TemporaryOnlyForKeyServiceFailures(t *testing.T) {
	s := newLocal(t, randomKey(t))
	_, err := s.Open(context.Background(), []byte("a"), seal(t, s, []byte("b"), "v"))
	var tmp interface{ Temporary() bool }
	if !errors.As(err, &tmp) || tmp.Temporary() {
		t.Fatalf("authentication failure: Temporary = %v (err %v), want false", tmp != nil && tmp.Temporary(), err)
	}
	e := &envelope.Error{Op: "open", Kind: envelope.ErrKeyUnavailable}
	if !e.Temporary() || !errors.Is(e, envelope.ErrOpen) {
		t.Fatal("ErrKeyUnavailable must be Temporary and an ErrOpen")
	}
}

func BenchmarkSeal(b *testing.B) {
	value := []byte(strings.Repeat("Full weight-bearing as tolerated. ", 6)[:200])
	aad, _ := envelope.AAD("ray", "weight_bearing", 7, models.AudienceUser)
	for _, bc := range benchSealers(b) {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(value)))
			for b.Loop() {
				if _, err := bc.s.Seal(context.Background(), aad, value); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkOpen(b *testing.B) {
	value := []byte(strings.Repeat("Full weight-bearing as tolerated. ", 6)[:200])
	aad, _ := envelope.AAD("ray", "weight_bearing", 7, models.AudienceUser)
	for _, bc := range benchSealers(b) {
		b.Run(bc.name, func(b *testing.B) {
			sealed, err := bc.s.Seal(context.Background(), aad, value)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.SetBytes(int64(len(value)))
			for b.Loop() {
				if _, err := bc.s.Open(context.Background(), aad, sealed); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

type benchSealer struct {
	name string
	s    store.Sealer
}

func benchSealers(b *testing.B) []benchSealer {
	f := newFakeKMS(b)
	arn := f.addKey(b, "unsay")
	return []benchSealer{
		{"local", newLocal(b, randomKey(b))},
		{"kms-fake", newKMSSealer(b, f, arn)},
	}
}

// FuzzOpen: whatever bytes reach Open, it never panics, and it returns a
// plaintext only for the exact bytes Seal produced.
func FuzzOpen(f *testing.F) {
	s := newLocal(f, randomKey(f))
	aad := []byte("ray|risk|v1|assistant")
	sealed, err := s.Seal(context.Background(), aad, []byte(riskValue))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(sealed)
	f.Add(sealed[:40])
	f.Add([]byte(riskValue))
	f.Add([]byte{0x89, 'U', 'N', 'S', 1, 1, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		pt, err := s.Open(context.Background(), aad, b)
		if err == nil {
			if !bytes.Equal(b, sealed) || string(pt) != riskValue {
				t.Fatalf("opened forged bytes %x", b)
			}
			return
		}
		if pt != nil || !errors.Is(err, envelope.ErrOpen) {
			t.Fatalf("Open = %q, %v", pt, err)
		}
		if _, rerr := s.Receipt(aad, b); rerr != nil && !errors.Is(rerr, envelope.ErrOpen) {
			t.Fatalf("Receipt error %v is not ErrOpen", rerr)
		}
	})
}

func TestSeal_LocalOverheadIs86Bytes(t *testing.T) {
	s := newLocal(t, randomKey(t))
	for _, n := range []int{0, 1, 200} {
		b, err := s.Seal(context.Background(), []byte("a"), make([]byte, n))
		if err != nil || len(b) != n+86 {
			t.Fatalf("sealed %d bytes into %d, %v; want %d (58 header + 12 nonce + 16 tag)", n, len(b), err, n+86)
		}
	}
}
