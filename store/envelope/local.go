package envelope

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"strconv"
	"strings"

	"golang.org/x/crypto/hkdf"

	"github.com/unsay/unsay/store"
)

// MinMasterKeySize is the shortest master key the local provider accepts, in bytes.
const MinMasterKeySize = 32

const (
	saltSize     = 32 // HKDF salt per seal, bytes
	keyIDLabel   = "unsay/envelope/local/key-id/v1"
	dataKeyLabel = "unsay/envelope/local/data-key/v1\x00" // HKDF info = label ‖ AAD
	// Environment variables of the local provider.
	envMasterKey      = "UNSAY_MASTER_KEY"
	envMasterPrevious = "UNSAY_MASTER_KEYS_PREVIOUS"
)

// LocalKeyID is the public fingerprint of a master key, the key id written in
// the header of everything it seals: the first 8 bytes of
// HMAC-SHA256(key = master, "unsay/envelope/local/key-id/v1"), 16 hex digits.
// It is an HMAC keyed by the secret, never a bare hash of it, so it reveals
// nothing that helps guess the key.
func LocalKeyID(master []byte) string {
	m := hmac.New(sha256.New, master)
	m.Write([]byte(keyIDLabel))
	return hex.EncodeToString(m.Sum(nil)[:8])
}

// localKeyring derives per-seal data keys from master keys with HKDF-SHA256.
type localKeyring struct {
	currentID string
	keys      map[string][]byte // by key id; includes the current key
}

// NewLocal returns a local-provider sealer that seals under current and also
// opens what any of previous sealed (rotation). Each key must be at least
// MinMasterKeySize bytes, else a *ConfigError. The keys are copied.
// Most callers use New with Mode "local", which reads them from the environment.
func NewLocal(current []byte, previous ...[]byte) (store.Sealer, error) {
	ce := &ConfigError{Mode: "local"}
	if len(current) < MinMasterKeySize {
		ce.Invalid = append(ce.Invalid, fmt.Sprintf("current master key: %d bytes, need ≥ %d", len(current), MinMasterKeySize))
	}
	for i, p := range previous {
		if len(p) < MinMasterKeySize {
			ce.Invalid = append(ce.Invalid, fmt.Sprintf("previous master key %d: %d bytes, need ≥ %d", i+1, len(p), MinMasterKeySize))
		}
	}
	if !ce.empty() {
		return nil, ce
	}
	return newSealer(newLocalKeyring(current, previous)), nil
}

func newLocalKeyring(current []byte, previous [][]byte) *localKeyring {
	k := &localKeyring{currentID: LocalKeyID(current), keys: map[string][]byte{}}
	k.keys[k.currentID] = append([]byte(nil), current...)
	for _, p := range previous {
		id := LocalKeyID(p)
		if _, dup := k.keys[id]; !dup {
			k.keys[id] = append([]byte(nil), p...)
		}
	}
	return k
}

// loadLocalKeys reads UNSAY_MASTER_KEY and UNSAY_MASTER_KEYS_PREVIOUS,
// recording every problem in ce (names only, never values). With required
// false (kms mode) an unset UNSAY_MASTER_KEY is not a problem and, when
// nothing is set, it returns nil.
func loadLocalKeys(getenv func(string) string, ce *ConfigError, required bool) *localKeyring {
	curRaw := strings.TrimSpace(getenv(envMasterKey))
	prevRaw := strings.TrimSpace(getenv(envMasterPrevious))
	if !required && curRaw == "" && prevRaw == "" {
		return nil
	}
	var current []byte
	if curRaw == "" {
		if required {
			ce.Missing = append(ce.Missing, envMasterKey)
		}
	} else if k, reason := decodeMasterKey(curRaw); reason != "" {
		ce.Invalid = append(ce.Invalid, envMasterKey+": "+reason)
	} else {
		current = k
	}
	var previous [][]byte
	if prevRaw != "" {
		for i, part := range strings.Split(prevRaw, ",") {
			part = strings.TrimSpace(part)
			if part == "" {
				continue
			}
			if k, reason := decodeMasterKey(part); reason != "" {
				ce.Invalid = append(ce.Invalid, envMasterPrevious+"["+strconv.Itoa(i)+"]: "+reason)
			} else {
				previous = append(previous, k)
			}
		}
	}
	if !ce.empty() {
		return nil
	}
	if current == nil {
		// kms mode with only previous local keys: they open, nothing seals with them.
		if len(previous) == 0 {
			return nil
		}
		current, previous = previous[0], previous[1:]
	}
	return newLocalKeyring(current, previous)
}

// decodeMasterKey accepts standard or URL-safe base64, padded or not, and
// returns the key or why it is unusable (without echoing it).
func decodeMasterKey(s string) ([]byte, string) {
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if k, err := enc.DecodeString(s); err == nil {
			if len(k) < MinMasterKeySize {
				return nil, fmt.Sprintf("%d bytes after base64 decoding, need ≥ %d random bytes", len(k), MinMasterKeySize)
			}
			return k, ""
		}
	}
	return nil, "not valid base64"
}

func (k *localKeyring) id() byte { return providerLocal }

func (k *localKeyring) describe() string {
	s := "local (key " + k.currentID
	if n := len(k.keys) - 1; n > 0 {
		s += ", " + strconv.Itoa(n) + " previous"
	}
	return s + ")"
}

func (k *localKeyring) newDataKey(_ context.Context, aad []byte) ([]byte, string, []byte, error) {
	salt := make([]byte, saltSize)
	if _, err := rand.Read(salt); err != nil {
		return nil, "", nil, sealErr(ErrKeyUnavailable, fmt.Errorf("salt: %w", err))
	}
	dk, err := derive(k.keys[k.currentID], salt, aad)
	if err != nil {
		return nil, "", nil, sealErr(ErrKeyUnavailable, err)
	}
	return dk, k.currentID, salt, nil
}

func (k *localKeyring) dataKey(_ context.Context, aad []byte, keyID string, material []byte) ([]byte, error) {
	master, ok := k.keys[keyID]
	if !ok {
		return nil, openErr(ErrUnknownKey, fmt.Errorf("local key id %q is not UNSAY_MASTER_KEY or in UNSAY_MASTER_KEYS_PREVIOUS", keyID))
	}
	if len(material) != saltSize {
		return nil, openErr(ErrAuthentication, fmt.Errorf("salt is %d bytes, want %d", len(material), saltSize))
	}
	dk, err := derive(master, material, aad)
	if err != nil {
		return nil, openErr(ErrAuthentication, err)
	}
	return dk, nil
}

// derive is HKDF-SHA256(secret = master, salt, info = dataKeyLabel ‖ aad), 32 bytes.
func derive(master, salt, aad []byte) ([]byte, error) {
	info := make([]byte, 0, len(dataKeyLabel)+len(aad))
	info = append(append(info, dataKeyLabel...), aad...)
	dk := make([]byte, DataKeySize)
	if _, err := io.ReadFull(hkdf.New(sha256.New, master, salt, info), dk); err != nil {
		return nil, fmt.Errorf("hkdf: %w", err)
	}
	return dk, nil
}
