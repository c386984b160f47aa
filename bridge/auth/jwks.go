package auth

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"sync"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// KeySource gives the public keys of an authorization server by key id
// ("kid"), for tokens verified against its JWKS (RFC 7517). The embedded
// authorization server (bridge/oauth) and RemoteJWKS implement it.
type KeySource interface {
	// Key returns the public key named kid. An implementation with a cache
	// refreshes it when kid is unknown (a rotation), so a new key is picked
	// up without a restart. Errors: ErrUnknownKey when the key set has no
	// such key, or the fetch error.
	Key(ctx context.Context, kid string) (jose.JSONWebKey, error)
}

// ErrUnknownKey: the key set holds no key with the token's "kid".
var ErrUnknownKey = errors.New("no key with this kid in the authorization server's key set")

// Algorithms accepted for keys from a key set, by key type. HS256 is never
// among them: a symmetric key cannot be published.
const (
	algRS256 = "RS256"
	algPS256 = "PS256"
	algES256 = "ES256"
	algES384 = "ES384"
	algEdDSA = "EdDSA"
)

var jwksAlgorithms = []string{algRS256, algPS256, algES256, algES384, algEdDSA}

// keyAlgorithm returns the one algorithm a JWK may verify: its "alg" when
// set (and one of jwksAlgorithms matching its type), else the type's
// default (RSA → RS256, P-256 → ES256, P-384 → ES384, Ed25519 → EdDSA).
// RSA keys shorter than 2048 bits, other curves and private or symmetric
// keys are refused.
func keyAlgorithm(k jose.JSONWebKey) (string, error) {
	var def string
	var allowed []string
	switch pk := k.Key.(type) {
	case *rsa.PublicKey:
		if pk.N.BitLen() < 2048 {
			return "", fmt.Errorf("RSA key %q is %d bits, need at least 2048", k.KeyID, pk.N.BitLen())
		}
		def, allowed = algRS256, []string{algRS256, algPS256}
	case *ecdsa.PublicKey:
		switch pk.Curve {
		case elliptic.P256():
			def, allowed = algES256, []string{algES256}
		case elliptic.P384():
			def, allowed = algES384, []string{algES384}
		default:
			return "", fmt.Errorf("EC key %q is not on P-256 or P-384", k.KeyID)
		}
	case ed25519.PublicKey:
		def, allowed = algEdDSA, []string{algEdDSA}
	default:
		return "", fmt.Errorf("key %q is not an RSA, EC or Ed25519 public key", k.KeyID)
	}
	if k.Algorithm == "" {
		return def, nil
	}
	for _, a := range allowed {
		if a == k.Algorithm {
			return a, nil
		}
	}
	return "", fmt.Errorf("key %q declares alg %q, which its key type cannot verify here", k.KeyID, k.Algorithm)
}

// RemoteJWKS is a KeySource over an HTTPS JWKS URL (--token-jwks-url): the
// key set is fetched on first use, refetched every MaxAge, and refetched at
// once (at most every MinRefetch) when a token names an unknown kid — so an
// authorization server's key rotation is picked up without a restart while
// forged kids cannot make the server fetch more than once per MinRefetch.
// When a refetch fails the last good key set stays in use. Safe for
// concurrent use.
type RemoteJWKS struct {
	url        string
	client     *http.Client
	clock      func() time.Time
	maxAge     time.Duration
	minRefetch time.Duration

	fetchMu sync.Mutex // one fetch at a time
	mu      sync.Mutex
	keys    map[string]jose.JSONWebKey
	fetched time.Time // last successful fetch
	tried   time.Time // last attempt
	gen     int       // attempts so far
}

// RemoteJWKSConfig configures NewRemoteJWKS.
type RemoteJWKSConfig struct {
	// URL is the JWKS URL: https, or http on a loopback host (development).
	URL string
	// HTTPClient fetches it; nil is a client with a 5 s timeout.
	HTTPClient *http.Client
	// MaxAge is how long a fetched key set is used before it is refetched;
	// 0 means 10 minutes.
	MaxAge time.Duration
	// MinRefetch is the shortest interval between two fetches for unknown
	// kids; 0 means 5 s, negative means no limit (tests).
	MinRefetch time.Duration
	// Clock is the clock; nil is time.Now.
	Clock func() time.Time
}

// MaxJWKSBytes caps a fetched key set: 256 KiB.
const MaxJWKSBytes = 256 << 10

// NewRemoteJWKS checks cfg and returns the key source; it fetches nothing
// yet. Errors (wrapping ErrConfig): a URL that is not https (or http on
// loopback).
func NewRemoteJWKS(cfg RemoteJWKSConfig) (*RemoteJWKS, error) {
	u, err := url.Parse(cfg.URL)
	if err != nil || u.Host == "" || u.User != nil || u.Fragment != "" ||
		(u.Scheme != "https" && !(u.Scheme == "http" && isLoopback(u.Hostname()))) {
		return nil, fmt.Errorf("%w: --token-jwks-url %q must be an https URL (http only on a loopback host)", ErrConfig, cfg.URL)
	}
	r := &RemoteJWKS{url: cfg.URL, client: cfg.HTTPClient, clock: cfg.Clock, maxAge: cfg.MaxAge, minRefetch: cfg.MinRefetch}
	if r.client == nil {
		r.client = &http.Client{Timeout: 5 * time.Second}
	}
	if r.clock == nil {
		r.clock = time.Now
	}
	if r.maxAge == 0 {
		r.maxAge = 10 * time.Minute
	}
	if r.minRefetch == 0 {
		r.minRefetch = 5 * time.Second
	}
	return r, nil
}

func isLoopback(host string) bool {
	ip := net.ParseIP(host)
	return host == "localhost" || (ip != nil && ip.IsLoopback())
}

// URL is the key set's URL.
func (r *RemoteJWKS) URL() string { return r.url }

// Key implements KeySource.
func (r *RemoteJWKS) Key(ctx context.Context, kid string) (jose.JSONWebKey, error) {
	now := r.clock()
	r.mu.Lock()
	k, known := r.keys[kid]
	stale := r.fetched.IsZero() || now.Sub(r.fetched) >= r.maxAge
	mayFetch := r.tried.IsZero() || r.minRefetch < 0 || now.Sub(r.tried) >= r.minRefetch
	gen := r.gen
	r.mu.Unlock()
	if known && !stale {
		return k, nil
	}
	if mayFetch { // stale, or an unknown kid (a rotation)
		if err := r.refresh(ctx, gen); err != nil && !known {
			return jose.JSONWebKey{}, err
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if k, ok := r.keys[kid]; ok {
		return k, nil
	}
	return jose.JSONWebKey{}, ErrUnknownKey
}

// refresh fetches the key set, once even when several callers ask at once.
func (r *RemoteJWKS) refresh(ctx context.Context, gen int) error {
	r.fetchMu.Lock()
	defer r.fetchMu.Unlock()
	r.mu.Lock()
	if r.gen != gen { // another caller fetched meanwhile
		r.mu.Unlock()
		return nil
	}
	r.gen++
	r.tried = r.clock()
	r.mu.Unlock()
	keys, err := r.fetch(ctx)
	if err != nil {
		return fmt.Errorf("jwks %s: %w", r.url, err)
	}
	r.mu.Lock()
	r.keys, r.fetched = keys, r.clock()
	r.mu.Unlock()
	return nil
}

func (r *RemoteJWKS) fetch(ctx context.Context) (map[string]jose.JSONWebKey, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := r.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("answered %d", resp.StatusCode)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxJWKSBytes+1))
	if err != nil {
		return nil, err
	}
	if len(body) > MaxJWKSBytes {
		return nil, fmt.Errorf("key set over %d bytes", MaxJWKSBytes)
	}
	return ParseJWKS(body)
}

// ParseJWKS reads a JWKS document into its usable signing keys by kid:
// public keys with a kid, "use" absent or "sig", whose algorithm
// keyAlgorithm accepts. Other keys are left out; a document with no usable
// key, or two keys with one kid, is an error.
func ParseJWKS(body []byte) (map[string]jose.JSONWebKey, error) {
	var raw struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(body, &raw); err != nil {
		return nil, fmt.Errorf("not a JWKS document: %w", err)
	}
	out := map[string]jose.JSONWebKey{}
	for _, rk := range raw.Keys {
		var k jose.JSONWebKey
		if err := k.UnmarshalJSON(rk); err != nil {
			continue // a key type go-jose does not know: not one we could verify with
		}
		if k.KeyID == "" || !k.IsPublic() || (k.Use != "" && k.Use != "sig") {
			continue
		}
		if _, err := keyAlgorithm(k); err != nil {
			continue
		}
		if _, dup := out[k.KeyID]; dup {
			return nil, fmt.Errorf("two keys with kid %q", k.KeyID)
		}
		out[k.KeyID] = k
	}
	if len(out) == 0 {
		return nil, errors.New("no usable signing key in the key set")
	}
	return out, nil
}
