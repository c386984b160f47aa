// Package envelope seals care-plan values at rest with AES-256-GCM bound to
// the record they belong to (P-6): bytes moved to another record do not open. It implements
// store.Sealer; the store calls Seal on publish and Open on every read and
// verify with the record's AAD "patient|domain|v{n}|audience" (see AAD).
//
// Bytes copied from one record into another, into the same record under the
// other audience, or into another version of the same record fail to
// authenticate, so an attacker who can write the database file cannot make
// the skill read care-internal://ray/risk aloud as care://ray/weight_bearing.
// The chain hashes (P-5) stay over plaintext and are not this package's concern.
//
// Two providers, chosen by Config.Mode (the --envelope flag):
//
//   - "local": a fresh 256-bit data key per seal, derived with HKDF-SHA256
//     from UNSAY_MASTER_KEY (base64, ≥ 32 bytes), a random 256-bit salt kept in
//     the header and the AAD. Earlier master keys listed in
//     UNSAY_MASTER_KEYS_PREVIOUS keep opening what they sealed.
//   - "kms": a fresh data key per seal from AWS KMS GenerateDataKey (AES_256)
//     under UNSAY_KMS_KEY_ID with the AAD as encryption context; the wrapped
//     key is kept in the header and unwrapped with KMS Decrypt on every open.
//
// An unconfigured provider refuses to start (*ConfigError naming every missing
// variable); nothing here ever falls back to plaintext or from kms to local.
//
// # Sealed format (version 1)
//
//	offset  size  field
//	0       4     magic 0x89 'U' 'N' 'S' (0x89 is never the first byte of UTF-8 text)
//	4       1     format version, 0x01
//	5       1     provider: 0x01 local, 0x02 kms
//	6       2     key id length k, big-endian, 1…2048
//	8       k     key id (ASCII): local = HMAC fingerprint of the master key, kms = key ARN
//	8+k     2     key material length m, big-endian, 1…8192
//	10+k    m     key material: local = 32-byte HKDF salt, kms = KMS CiphertextBlob
//	10+k+m  12    nonce (96 bits, fresh from crypto/rand for every seal)
//	22+k+m  …     ciphertext ‖ 16-byte GCM tag
//
// The GCM additional data is the header (bytes 0 … 10+k+m) followed by the
// record AAD, so a flipped bit anywhere — header, nonce, ciphertext, tag —
// fails to open. A local seal of a 200-byte value is 286 bytes (58-byte header).
package envelope

import (
	"bytes"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"

	"github.com/unsay/unsay/models"
	"github.com/unsay/unsay/store"
)

// Sizes, in bytes.
const (
	// DataKeySize is the AES-256 data key length.
	DataKeySize = 32
	// NonceSize is the GCM nonce length (96 bits).
	NonceSize = 12
	// TagSize is the GCM tag length (128 bits).
	TagSize = 16

	formatVersion  = 0x01
	maxKeyIDLen    = 2048
	maxMaterialLen = 8192
	fixedHeaderLen = 4 + 1 + 1 + 2 + 2 // magic, version, provider, two lengths
)

// Provider ids in the header.
const (
	providerLocal byte = 0x01
	providerKMS   byte = 0x02
)

var magic = [4]byte{0x89, 'U', 'N', 'S'}

// providerName is the word Name, Receipt and the startup line use for a provider id.
func providerName(id byte) string {
	switch id {
	case providerLocal:
		return "local"
	case providerKMS:
		return "kms"
	}
	return "unknown"
}

// AAD builds the additional authenticated data that binds a sealed value to
// its record: "patient|domain|v{n}|audience" (P-6), e.g.
// "ray|weight_bearing|v3|user". "|" is reserved: a patient or domain that
// contains it, or is empty, n < 1, or an audience other than user/assistant
// is refused with an *AADError (errors.Is(err, ErrAAD)) rather than escaped,
// so two distinct records can never share an AAD.
func AAD(patient, domain string, n int, audience models.Audience) ([]byte, error) {
	switch {
	case patient == "":
		return nil, &AADError{Field: "patient", Reason: "empty"}
	case strings.Contains(patient, "|"):
		return nil, &AADError{Field: "patient", Reason: `contains the reserved separator "|"`}
	case domain == "":
		return nil, &AADError{Field: "domain", Reason: "empty"}
	case strings.Contains(domain, "|"):
		return nil, &AADError{Field: "domain", Reason: `contains the reserved separator "|"`}
	case n < 1:
		return nil, &AADError{Field: "version", Reason: "must be ≥ 1"}
	case !audience.Valid():
		return nil, &AADError{Field: "audience", Reason: "must be user or assistant"}
	}
	b := make([]byte, 0, len(patient)+len(domain)+len(audience)+16)
	b = append(b, patient...)
	b = append(b, '|')
	b = append(b, domain...)
	b = append(b, "|v"...)
	b = strconv.AppendInt(b, int64(n), 10)
	b = append(b, '|')
	b = append(b, audience...)
	return b, nil
}

// AADError says which AAD component was refused. errors.Is(err, ErrAAD) is true.
type AADError struct {
	Field  string // "patient", "domain", "version", "audience"
	Reason string
}

func (e *AADError) Error() string { return "envelope: AAD " + e.Field + ": " + e.Reason }

// Unwrap makes errors.Is(err, ErrAAD) true.
func (e *AADError) Unwrap() error { return ErrAAD }

// IsSealed reports whether b starts with the envelope magic. A stored value
// that does not is plaintext (written with --envelope none); UTF-8 text never
// starts with the magic's first byte.
func IsSealed(b []byte) bool { return bytes.HasPrefix(b, magic[:]) }

// keyring is one provider's key material: it mints a data key for a new seal
// and recovers the data key of an existing one. Errors are *Error.
type keyring interface {
	id() byte
	// newDataKey returns a fresh data key and the header fields that let
	// dataKey recover it: the key id and the key material.
	newDataKey(ctx context.Context, aad []byte) (dk []byte, keyID string, material []byte, err error)
	dataKey(ctx context.Context, aad []byte, keyID string, material []byte) ([]byte, error)
	// describe is the startup line's words for this keyring.
	describe() string
}

// sealer implements store.Sealer. It is immutable after construction and
// safe for concurrent use.
type sealer struct {
	current keyring
	openers map[byte]keyring // by provider id; includes current
}

var _ store.Sealer = (*sealer)(nil)

func newSealer(current keyring, extra ...keyring) *sealer {
	s := &sealer{current: current, openers: map[byte]keyring{current.id(): current}}
	for _, k := range extra {
		if _, ok := s.openers[k.id()]; !ok {
			s.openers[k.id()] = k
		}
	}
	return s
}

// Name is the encryption mode for the startup line: "local" or "kms".
func (s *sealer) Name() string { return providerName(s.current.id()) }

// Seal encrypts plaintext under a fresh data key and a fresh random nonce,
// bound to aad (the record's AAD, see AAD). The result is the versioned
// format described in the package comment. Errors (*Error, errors.Is
// ErrSeal): ErrAAD for an empty aad, ErrKeyUnavailable when KMS fails or
// the system random source fails.
func (s *sealer) Seal(ctx context.Context, aad, plaintext []byte) ([]byte, error) {
	if len(aad) == 0 {
		return nil, sealErr(ErrAAD, nil)
	}
	dk, keyID, material, err := s.current.newDataKey(ctx, aad)
	if err != nil {
		return nil, err
	}
	defer clear(dk)
	if len(keyID) == 0 || len(keyID) > maxKeyIDLen || len(material) == 0 || len(material) > maxMaterialLen {
		return nil, sealErr(ErrKeyUnavailable, fmt.Errorf("key id (%d bytes) or key material (%d bytes) out of range", len(keyID), len(material)))
	}
	aead, err := newGCM(dk)
	if err != nil {
		return nil, sealErr(ErrKeyUnavailable, err)
	}
	hlen := fixedHeaderLen + len(keyID) + len(material)
	out := make([]byte, hlen+NonceSize, hlen+NonceSize+len(plaintext)+TagSize)
	copy(out, magic[:])
	out[4] = formatVersion
	out[5] = s.current.id()
	binary.BigEndian.PutUint16(out[6:], uint16(len(keyID)))
	copy(out[8:], keyID)
	binary.BigEndian.PutUint16(out[8+len(keyID):], uint16(len(material)))
	copy(out[10+len(keyID):], material)
	nonce := out[hlen : hlen+NonceSize]
	if _, err := rand.Read(nonce); err != nil {
		return nil, sealErr(ErrKeyUnavailable, fmt.Errorf("nonce: %w", err))
	}
	return aead.Seal(out, nonce, plaintext, additionalData(out[:hlen], aad)), nil
}

// Open authenticates and decrypts sealed bytes for aad. It returns the
// plaintext only when the tag verifies under the record's AAD; otherwise
// nothing. Errors (*Error, errors.Is ErrOpen): ErrAAD (empty aad),
// ErrNotEnvelope, ErrTruncated, ErrUnknownKey, ErrAuthentication (altered
// bytes or another record's, audience's or version's), ErrKeyUnavailable
// (KMS outage; Temporary() is true). Never panics on any input.
func (s *sealer) Open(ctx context.Context, aad, sealed []byte) ([]byte, error) {
	if len(aad) == 0 {
		return nil, openErr(ErrAAD, nil)
	}
	p, err := parse(sealed)
	if err != nil {
		return nil, err
	}
	kr, ok := s.openers[p.provider]
	if !ok {
		return nil, openErr(ErrUnknownKey, fmt.Errorf("sealed by provider %s; this configuration is %s", providerName(p.provider), s.Name()))
	}
	dk, err := kr.dataKey(ctx, aad, p.keyID, p.material)
	if err != nil {
		return nil, err
	}
	defer clear(dk)
	aead, err := newGCM(dk)
	if err != nil {
		return nil, openErr(ErrAuthentication, err)
	}
	pt, err := aead.Open(nil, p.nonce, p.box, additionalData(p.header, aad))
	if err != nil {
		return nil, openErr(ErrAuthentication, nil)
	}
	return pt, nil
}

// Receipt describes sealed bytes for /verify without opening them: provider,
// key id, the AAD as a string, nonce and tag in lowercase hex. Never
// plaintext. Errors as Open's parse errors: ErrNotEnvelope, ErrTruncated.
func (s *sealer) Receipt(aad, sealed []byte) (*store.AtRestReceipt, error) {
	p, err := parse(sealed)
	if err != nil {
		return nil, err
	}
	return &store.AtRestReceipt{
		Provider: providerName(p.provider),
		KeyID:    p.keyID,
		AAD:      string(aad),
		Nonce:    hex.EncodeToString(p.nonce),
		Tag:      hex.EncodeToString(p.box[len(p.box)-TagSize:]),
	}, nil
}

// describe is the startup line's words for s.
func (s *sealer) describe() string { return s.current.describe() }

// Describe is the encryption part of the startup line: "PLAINTEXT" for a nil
// sealer (--envelope none), otherwise the provider word ("local" or "kms")
// followed by the current key id in parentheses, e.g. "local (key 3f9a0c1d2e4b5a67, 1 previous)".
func Describe(s store.Sealer) string {
	switch v := s.(type) {
	case nil:
		return "PLAINTEXT"
	case *sealer:
		if v == nil {
			return "PLAINTEXT"
		}
		return v.describe()
	default:
		return s.Name()
	}
}

// parsed is a sealed value split into its fields; all slices alias the input.
type parsed struct {
	provider byte
	keyID    string
	material []byte
	header   []byte // bytes 0 … end of key material
	nonce    []byte
	box      []byte // ciphertext ‖ tag, ≥ TagSize
}

func parse(b []byte) (parsed, error) {
	// The magic decides "envelope or not" on the bytes available, so a short
	// plaintext is ErrNotEnvelope and a short prefix of an envelope ErrTruncated.
	n := min(len(b), len(magic))
	if n == 0 || !bytes.Equal(b[:n], magic[:n]) {
		return parsed{}, openErr(ErrNotEnvelope, nil)
	}
	if len(b) < 6 {
		return parsed{}, openErr(ErrTruncated, nil)
	}
	if b[4] != formatVersion {
		return parsed{}, openErr(ErrNotEnvelope, fmt.Errorf("format version %d", b[4]))
	}
	p := parsed{provider: b[5]}
	if p.provider != providerLocal && p.provider != providerKMS {
		return parsed{}, openErr(ErrNotEnvelope, fmt.Errorf("provider id %d", b[5]))
	}
	off := 6
	field := func(limit int) ([]byte, error) {
		if len(b) < off+2 {
			return nil, openErr(ErrTruncated, nil)
		}
		l := int(binary.BigEndian.Uint16(b[off:]))
		off += 2
		if l == 0 || l > limit {
			return nil, openErr(ErrNotEnvelope, fmt.Errorf("field length %d", l))
		}
		if len(b) < off+l {
			return nil, openErr(ErrTruncated, nil)
		}
		f := b[off : off+l]
		off += l
		return f, nil
	}
	kid, err := field(maxKeyIDLen)
	if err != nil {
		return parsed{}, err
	}
	p.keyID = string(kid)
	if p.material, err = field(maxMaterialLen); err != nil {
		return parsed{}, err
	}
	p.header = b[:off:off]
	if len(b) < off+NonceSize+TagSize {
		return parsed{}, openErr(ErrTruncated, nil)
	}
	p.nonce = b[off : off+NonceSize]
	p.box = b[off+NonceSize:]
	return p, nil
}

// additionalData is the GCM additional data: header ‖ record AAD.
func additionalData(header, aad []byte) []byte {
	ad := make([]byte, 0, len(header)+len(aad))
	return append(append(ad, header...), aad...)
}

func newGCM(key []byte) (cipher.AEAD, error) {
	if len(key) != DataKeySize {
		return nil, fmt.Errorf("data key is %d bytes, want %d", len(key), DataKeySize)
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block) // 12-byte nonce, 16-byte tag
}

// DefaultMode is the mode `unsay serve` runs in without --envelope: none
// (values stored as plaintext; the startup line says PLAINTEXT).
const DefaultMode = "none"

// Config selects and configures the provider for New.
type Config struct {
	// Mode is "none", "local" or "kms" (--envelope / UNSAY_ENVELOPE). Anything
	// else, including "", is refused.
	Mode string
	// Getenv reads the environment (UNSAY_MASTER_KEY, UNSAY_MASTER_KEYS_PREVIOUS,
	// UNSAY_KMS_KEY_ID, UNSAY_KMS_ENDPOINT, UNSAY_KMS_REGION, AWS_REGION,
	// AWS_DEFAULT_REGION, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
	// AWS_SESSION_TOKEN, AWS_PROFILE); nil means os.Getenv. The rest of the
	// AWS credential chain (shared config files, SSO, container and instance
	// roles) is read by the AWS SDK from the process environment.
	Getenv func(string) string
	// KMSEndpoint overrides the KMS endpoint URL (--kms-endpoint); "" falls
	// back to UNSAY_KMS_ENDPOINT, then the AWS default for the region.
	KMSEndpoint string
	// KMSRegion is the AWS region (--kms-region); "" falls back to
	// UNSAY_KMS_REGION, AWS_REGION, AWS_DEFAULT_REGION, then the shared config.
	KMSRegion string
	// HTTPClient carries KMS calls; nil means the AWS SDK's default.
	HTTPClient *http.Client
}

// New returns the sealer cfg.Mode names, or (nil, nil) for "none": the store
// then keeps plaintext and the startup line must say PLAINTEXT (see Describe).
// The sealer's Name() — the startup line's encryption word — is "local" or "kms".
//
// It refuses to start, with a *ConfigError (errors.Is ErrConfig) naming every
// missing or invalid variable, when:
//   - local: UNSAY_MASTER_KEY is missing, not base64, or under 32 bytes once
//     decoded; an entry of UNSAY_MASTER_KEYS_PREVIOUS is not base64 or short.
//   - kms: UNSAY_KMS_KEY_ID is missing; no region is configured; no AWS
//     credentials can be retrieved (probed once, ≤ 5 s); the endpoint
//     override is not an http(s) URL; UNSAY_MASTER_KEY or
//     UNSAY_MASTER_KEYS_PREVIOUS is set but invalid (in kms mode, local
//     keys only open older records, for migrating with `unsay rekey`).
//
// New never falls back to plaintext, nor from kms to local. ctx bounds the
// credential probe.
func New(ctx context.Context, cfg Config) (store.Sealer, error) {
	getenv := cfg.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	switch mode := strings.TrimSpace(cfg.Mode); mode {
	case "none":
		return nil, nil
	case "local":
		ce := &ConfigError{Mode: "local"}
		lk := loadLocalKeys(getenv, ce, true)
		if !ce.empty() {
			return nil, ce
		}
		return newSealer(lk), nil
	case "kms":
		return newKMS(ctx, cfg, getenv)
	default:
		return nil, &ConfigError{Mode: strconv.Quote(mode), Invalid: []string{"UNSAY_ENVELOPE (--envelope): want none, local or kms"}}
	}
}
