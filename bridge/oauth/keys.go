package oauth

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/zitadel/oidc/v3/pkg/op"

	"github.com/unsay/unsay/bridge/auth"
	"github.com/unsay/unsay/store"
)

// Key rotation timing.
const (
	// publishLead is how long a new key is in the JWKS before it signs, so
	// every instance (and every resource server caching the JWKS for up to a
	// minute) knows it before the first token it signs arrives: 2 minutes.
	publishLead = 2 * time.Minute
	// keyCheckEvery is how often signing looks at the key set's age: 1 minute.
	keyCheckEvery = time.Minute
	// unknownKidReload is the shortest interval between two reloads of the
	// key set from the store for an unknown kid: 1 second.
	unknownKidReload = time.Second
)

// signingKey is one ES256 key; it implements op.SigningKey and op.Key.
type signingKey struct {
	kid     string
	priv    *ecdsa.PrivateKey
	created time.Time
}

func (k signingKey) SignatureAlgorithm() jose.SignatureAlgorithm { return jose.ES256 }
func (k signingKey) Algorithm() jose.SignatureAlgorithm          { return jose.ES256 }
func (k signingKey) Key() any                                    { return k.priv }
func (k signingKey) ID() string                                  { return k.kid }
func (k signingKey) Use() string                                 { return "sig" }

// publicKey is the public half, for the JWKS (op.Key).
type publicKey struct{ signingKey }

func (k publicKey) Key() any { return &k.priv.PublicKey }

// keyring keeps the signing keys, newest first, loaded from the store. A
// key signs once it has been published for publishLead (the first key at
// once); when the signing key is older than rotation a new one is made;
// a key is deleted once its successor has signed for longer than the
// longest token it may have signed lives (maxTTL).
type keyring struct {
	st       *store.Store
	now      func() time.Time
	rotation time.Duration
	maxTTL   time.Duration
	log      *slog.Logger

	mu      sync.Mutex
	keys    []signingKey
	checked time.Time
	loaded  time.Time
}

func newKeyring(st *store.Store, now func() time.Time, rotation, maxTTL time.Duration, log *slog.Logger) *keyring {
	return &keyring{st: st, now: now, rotation: rotation, maxTTL: maxTTL, log: log}
}

// load reads the keys from the store; the caller holds k.mu.
func (k *keyring) load(ctx context.Context) error {
	stored, skipped, err := k.st.OAuthSigningKeys(ctx)
	if err != nil {
		return fmt.Errorf("oauth: signing keys: %w", err)
	}
	if skipped > 0 {
		k.log.Warn("oauth: signing keys that cannot be opened under this envelope were skipped", "skipped", skipped)
	}
	keys := make([]signingKey, 0, len(stored))
	for _, sk := range stored {
		pk, err := x509.ParsePKCS8PrivateKey(sk.PrivateDER)
		if err != nil {
			k.log.Warn("oauth: unreadable signing key skipped", "kid", sk.KID, "err", err)
			continue
		}
		ec, ok := pk.(*ecdsa.PrivateKey)
		if !ok || ec.Curve != elliptic.P256() || sk.Alg != string(jose.ES256) {
			k.log.Warn("oauth: signing key of an unexpected type skipped", "kid", sk.KID)
			continue
		}
		keys = append(keys, signingKey{kid: sk.KID, priv: ec, created: sk.CreatedAt})
	}
	k.keys, k.loaded = keys, k.now()
	return nil
}

// ensure makes sure a key young enough exists and retires old ones.
func (k *keyring) ensure(ctx context.Context) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	now := k.now()
	if err := k.load(ctx); err != nil {
		return err
	}
	if len(k.keys) == 0 || now.Sub(k.keys[0].created) >= k.rotation {
		if err := k.add(ctx, now); err != nil {
			return err
		}
		if err := k.load(ctx); err != nil {
			return err
		}
		if len(k.keys) == 0 {
			return errors.New("oauth: no usable signing key after making one")
		}
	}
	if s, i := k.signingLocked(now); i+1 < len(k.keys) && now.Sub(s.created.Add(publishLead)) > k.maxTTL {
		if n, err := k.st.DeleteOAuthSigningKeysBefore(ctx, s.created); err != nil {
			k.log.Warn("oauth: retiring old signing keys", "err", err)
		} else if n > 0 {
			_ = k.load(ctx)
		}
	}
	k.checked = now
	return nil
}

func (k *keyring) add(ctx context.Context, now time.Time) error {
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("oauth: new signing key: %w", err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return fmt.Errorf("oauth: new signing key: %w", err)
	}
	kid := randomToken(12)
	// Another instance rotating at the same moment: only one key is added.
	if _, err := k.st.AddOAuthSigningKey(ctx, store.OAuthKey{KID: kid, Alg: string(jose.ES256), PrivateDER: der, CreatedAt: now},
		now.Add(-k.rotation)); err != nil {
		return fmt.Errorf("oauth: new signing key: %w", err)
	}
	return nil
}

// signingLocked returns the key that signs now and its index: the newest
// key published for publishLead, or the oldest when none is (the very first).
func (k *keyring) signingLocked(now time.Time) (signingKey, int) {
	for i, key := range k.keys {
		if now.Sub(key.created) >= publishLead {
			return key, i
		}
	}
	return k.keys[len(k.keys)-1], len(k.keys) - 1
}

// signing returns the key to sign with, rotating when due.
func (k *keyring) signing(ctx context.Context) (signingKey, error) {
	k.mu.Lock()
	due := k.now().Sub(k.checked) >= keyCheckEvery
	k.mu.Unlock()
	if due {
		if err := k.ensure(ctx); err != nil {
			k.log.Warn("oauth: key check", "err", err)
		}
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if len(k.keys) == 0 {
		return signingKey{}, errors.New("oauth: no signing key")
	}
	s, _ := k.signingLocked(k.now())
	return s, nil
}

// published returns every key in the JWKS (public halves).
func (k *keyring) published(ctx context.Context) []op.Key {
	k.mu.Lock()
	due := k.now().Sub(k.loaded) >= keyCheckEvery
	k.mu.Unlock()
	if due {
		_, _ = k.signing(ctx) // reloads and rotates
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	out := make([]op.Key, len(k.keys))
	for i, key := range k.keys {
		out[i] = publicKey{key}
	}
	return out
}

// Key implements auth.KeySource for the resource server in this process:
// the public key named kid, reloading from the store (at most once per
// second) when it is unknown — a key another instance made.
func (k *keyring) Key(ctx context.Context, kid string) (jose.JSONWebKey, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	find := func() (jose.JSONWebKey, bool) {
		for _, key := range k.keys {
			if key.kid == kid {
				return jose.JSONWebKey{Key: &key.priv.PublicKey, KeyID: kid, Algorithm: string(jose.ES256), Use: "sig"}, true
			}
		}
		return jose.JSONWebKey{}, false
	}
	if j, ok := find(); ok {
		return j, nil
	}
	if k.now().Sub(k.loaded) >= unknownKidReload {
		if err := k.load(ctx); err != nil {
			return jose.JSONWebKey{}, err
		}
		if j, ok := find(); ok {
			return j, nil
		}
	}
	return jose.JSONWebKey{}, auth.ErrUnknownKey
}
