package auth

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	josejwt "github.com/go-jose/go-jose/v4/jwt"
	"github.com/golang-jwt/jwt/v5"
	sdkauth "github.com/modelcontextprotocol/go-sdk/auth"
)

const testIssuer = "https://idp.hospital.example"

// externalAS is a second authorization server built with go-jose: its own
// keys, a JWKS endpoint, and tokens signed the way an IdP signs them.
type externalAS struct {
	mu      sync.Mutex
	keys    []jose.JSONWebKey // private keys; the JWKS serves their public halves
	fetches atomic.Int32
	srv     *httptest.Server
}

func newExternalAS(t *testing.T) *externalAS {
	t.Helper()
	as := &externalAS{}
	as.rotate(t)
	as.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		as.fetches.Add(1)
		as.mu.Lock()
		set := jose.JSONWebKeySet{}
		for _, k := range as.keys {
			set.Keys = append(set.Keys, k.Public())
		}
		as.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(set)
	}))
	t.Cleanup(as.srv.Close)
	return as
}

// rotate adds a new EC key in front (the one tokens are signed with) and
// drops all but the previous one.
func (as *externalAS) rotate(t *testing.T) string {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 6)
	rand.Read(b)
	jwk := jose.JSONWebKey{Key: k, KeyID: "k-" + base64.RawURLEncoding.EncodeToString(b), Algorithm: string(jose.ES256), Use: "sig"}
	as.mu.Lock()
	defer as.mu.Unlock()
	as.keys = append([]jose.JSONWebKey{jwk}, as.keys...)
	if len(as.keys) > 2 {
		as.keys = as.keys[:2]
	}
	return jwk.KeyID
}

// token signs claims with the current key (or key, when given).
func (as *externalAS) token(t *testing.T, claims map[string]any, key *jose.JSONWebKey) string {
	t.Helper()
	if key == nil {
		as.mu.Lock()
		k := as.keys[0]
		as.mu.Unlock()
		key = &k
	}
	sig, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.SignatureAlgorithm(key.Algorithm), Key: *key},
		(&jose.SignerOptions{}).WithType("at+jwt"))
	if err != nil {
		t.Fatal(err)
	}
	tok, err := josejwt.Signed(sig).Claims(claims).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func idpClaims() map[string]any {
	return map[string]any{
		"iss": testIssuer, "sub": "nurse-ade", "aud": testURL + "/mcp",
		"exp": testNow.Add(5 * time.Minute).Unix(), "iat": testNow.Unix(),
		"scope": "care.read.user", "patients": []string{"ray"},
	}
}

func remoteVerifier(t *testing.T, as *externalAS, extra func(*Config)) *Verifier {
	t.Helper()
	src, err := NewRemoteJWKS(RemoteJWKSConfig{URL: as.srv.URL, MinRefetch: -1})
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{JWKS: src, Issuer: testIssuer, PublicURL: testURL, Clock: testConfig().Clock, Secret: []byte(testSecret)}
	if extra != nil {
		extra(&cfg)
	}
	return newVerifier(t, cfg)
}

func TestKeySet_ExternalAuthorizationServerTokensVerifyByItsJWKSAndOthersAreRefused(t *testing.T) {
	t.Parallel()
	as := newExternalAS(t)
	v := remoteVerifier(t, as, nil)
	stranger, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	rsaKey, _ := rsa.GenerateKey(rand.Reader, 2048)
	as.mu.Lock()
	current := as.keys[0]
	as.mu.Unlock()
	unknown := jose.JSONWebKey{Key: stranger, KeyID: "not-in-the-set", Algorithm: string(jose.ES256)}
	impostor := jose.JSONWebKey{Key: stranger, KeyID: current.KeyID, Algorithm: string(jose.ES256)} // the right kid, another key
	rsaWithECKid := jose.JSONWebKey{Key: rsaKey, KeyID: current.KeyID, Algorithm: string(jose.RS256)}
	with := func(k string, val any) map[string]any {
		c := idpClaims()
		if val == nil {
			delete(c, k)
		} else {
			c[k] = val
		}
		return c
	}
	cases := []struct {
		name    string
		token   string
		wantErr bool
	}{
		{"a token of the external AS", as.token(t, idpClaims(), nil), false},
		{"a token bound to no patient (client credentials)", as.token(t, with("patients", []string{}), nil), false},
		{"a token signed by a key not in its JWKS", as.token(t, idpClaims(), &unknown), true},
		{"a token with a known kid but another key", as.token(t, idpClaims(), &impostor), true},
		{"RS256 under the kid of an ES256 key", as.token(t, idpClaims(), &rsaWithECKid), true},
		{"another issuer", as.token(t, with("iss", "https://evil.example"), nil), true},
		{"no issuer", as.token(t, with("iss", nil), nil), true},
		{"no patients claim at all", as.token(t, with("patients", nil), nil), true},
		{"HS256 beside a key set without HS256WithJWKS", sign(t, jwt.SigningMethodHS256, []byte(testSecret), goodClaims()), true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ti, err := v.Verify(t.Context(), tc.token, nil)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tc.wantErr)
			}
			if err != nil && !errors.Is(err, sdkauth.ErrInvalidToken) {
				t.Fatalf("error %v does not wrap ErrInvalidToken", err)
			}
			if err == nil {
				if p, _ := PrincipalOf(ti); p.Subject != "nurse-ade" {
					t.Fatalf("principal %+v", p)
				}
			}
		})
	}
	if !strings.Contains(v.Describe(), as.srv.URL) && !strings.Contains(v.Describe(), "JWKS") {
		t.Errorf("Describe() = %q names neither the key set nor JWKS", v.Describe())
	}
	if !strings.Contains(v.Describe(), "HS256 off") || v.HS256() {
		t.Errorf("Describe() = %q, HS256() = %v: HS256 must be off beside an external key set", v.Describe(), v.HS256())
	}
}

func TestKeySet_RotationAtTheAuthorizationServerIsPickedUpWithoutARestart(t *testing.T) {
	t.Parallel()
	as := newExternalAS(t)
	v := remoteVerifier(t, as, nil)
	if _, err := v.Verify(t.Context(), as.token(t, idpClaims(), nil), nil); err != nil {
		t.Fatalf("before rotation: %v", err)
	}
	before := as.fetches.Load()
	as.rotate(t)
	fresh := as.token(t, idpClaims(), nil)
	if _, err := v.Verify(t.Context(), fresh, nil); err != nil {
		t.Fatalf("a token under the rotated-in key was refused: %v", err)
	}
	if as.fetches.Load() != before+1 {
		t.Fatalf("fetches %d → %d: the unknown kid should cost exactly one refetch", before, as.fetches.Load())
	}
	// The known key is served from the cache: no fetch per token.
	for range 5 {
		if _, err := v.Verify(t.Context(), fresh, nil); err != nil {
			t.Fatal(err)
		}
	}
	if as.fetches.Load() != before+1 {
		t.Fatalf("cached key refetched: %d fetches", as.fetches.Load())
	}
}

func TestKeySet_UnknownKidsRefetchAtMostOncePerMinRefetch(t *testing.T) {
	t.Parallel()
	as := newExternalAS(t)
	now := time.Now()
	clock := func() time.Time { return now }
	src, err := NewRemoteJWKS(RemoteJWKSConfig{URL: as.srv.URL, MinRefetch: time.Minute, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if _, err := src.Key(t.Context(), "forged-"+string(rune('a'+i))); !errors.Is(err, ErrUnknownKey) {
			t.Fatalf("forged kid: %v", err)
		}
	}
	if n := as.fetches.Load(); n != 1 {
		t.Fatalf("five forged kids cost %d fetches, want 1", n)
	}
	now = now.Add(time.Minute)
	_, _ = src.Key(t.Context(), "forged-z")
	if n := as.fetches.Load(); n != 2 {
		t.Fatalf("after MinRefetch: %d fetches, want 2", n)
	}
}

func TestKeySet_GrantCheckRefusesARevokedGrantOnTheNextRequest(t *testing.T) {
	t.Parallel()
	as := newExternalAS(t)
	var revoked atomic.Bool
	v := remoteVerifier(t, as, func(c *Config) {
		c.GrantActive = func(_ context.Context, id string) error {
			if id != "g1" {
				return errors.New("no such grant")
			}
			if revoked.Load() {
				return errors.New("revoked")
			}
			return nil
		}
	})
	c := idpClaims()
	c["grant"] = "g1"
	tok := as.token(t, c, nil)
	if _, err := v.Verify(t.Context(), tok, nil); err != nil {
		t.Fatalf("active grant: %v", err)
	}
	revoked.Store(true)
	if _, err := v.Verify(t.Context(), tok, nil); err == nil {
		t.Fatal("the same token was accepted after its grant was revoked")
	}
	if _, err := v.Verify(t.Context(), as.token(t, idpClaims(), nil), nil); err == nil {
		t.Fatal("a token without a grant claim was accepted where grants are checked")
	}
}

func TestKeySet_HS256DevelopmentTokensOnlyWithHS256WithJWKS(t *testing.T) {
	t.Parallel()
	as := newExternalAS(t)
	hs := sign(t, jwt.SigningMethodHS256, []byte(testSecret), goodClaims())
	off := remoteVerifier(t, as, nil)
	on := remoteVerifier(t, as, func(c *Config) { c.HS256WithJWKS = true })
	if _, err := off.Verify(t.Context(), hs, nil); err == nil {
		t.Fatal("HS256 accepted beside a key set")
	}
	if _, err := on.Verify(t.Context(), hs, nil); err != nil {
		t.Fatalf("HS256 with HS256WithJWKS: %v", err)
	}
	if !on.HS256() || !strings.Contains(on.Describe(), "HS256 development tokens") {
		t.Errorf("Describe() = %q", on.Describe())
	}
	// A key-set token keeps verifying by its key beside HS256.
	if _, err := on.Verify(t.Context(), as.token(t, idpClaims(), nil), nil); err != nil {
		t.Fatalf("key-set token beside HS256: %v", err)
	}
}

func TestNewVerifier_PublicKeyAndKeySetExcludeEachOther(t *testing.T) {
	t.Parallel()
	as := newExternalAS(t)
	src, _ := NewRemoteJWKS(RemoteJWKSConfig{URL: as.srv.URL})
	k, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	_ = k
	if _, err := NewVerifier(Config{JWKS: src, PublicURL: testURL}); !errors.Is(err, ErrConfig) {
		t.Fatalf("key set without issuer: %v", err)
	}
	if _, err := NewVerifier(Config{JWKS: src, Issuer: testIssuer, PublicURL: testURL}); err != nil {
		t.Fatalf("key set with issuer and no secret: %v (UNSAY_TOKEN_SECRET is not required then)", err)
	}
	if _, err := NewRemoteJWKS(RemoteJWKSConfig{URL: "http://idp.example/jwks"}); !errors.Is(err, ErrConfig) {
		t.Fatalf("plain-http JWKS URL off loopback: %v", err)
	}
}

func TestParseJWKS_KeepsOnlyUsableSigningKeys(t *testing.T) {
	t.Parallel()
	ec, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	small, _ := rsa.GenerateKey(rand.Reader, 1024)
	set := jose.JSONWebKeySet{Keys: []jose.JSONWebKey{
		{Key: &ec.PublicKey, KeyID: "good", Algorithm: "ES256", Use: "sig"},
		{Key: &ec.PublicKey, KeyID: "enc", Use: "enc"},
		{Key: &ec.PublicKey, KeyID: "", Algorithm: "ES256"},
		{Key: &small.PublicKey, KeyID: "small"},
		{Key: &ec.PublicKey, KeyID: "wrong-alg", Algorithm: "RS256"},
	}}
	b, _ := json.Marshal(set)
	keys, err := ParseJWKS(b)
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 1 || keys["good"].KeyID != "good" {
		t.Fatalf("usable keys = %v", keys)
	}
	if _, err := ParseJWKS([]byte(`{"keys":[]}`)); err == nil {
		t.Fatal("an empty key set was accepted")
	}
}

// TestKeySet_AGrantCheckThatCannotAnswerIs503NotInvalidToken: a store
// outage during the grant check is not a verdict on the token — /mcp
// answers 503 with Retry-After, not 401 (the client would drop a good
// token); its twin, a revoked grant, is 401 invalid_token.
func TestKeySet_AGrantCheckThatCannotAnswerIs503NotInvalidToken(t *testing.T) {
	t.Parallel()
	as := newExternalAS(t)
	var down atomic.Bool
	v := remoteVerifier(t, as, func(c *Config) {
		c.Clock = nil // the SDK checks exp against time.Now
		c.GrantActive = func(context.Context, string) error {
			if down.Load() {
				return errors.Join(ErrUnavailable, errors.New("database is locked"))
			}
			return errors.New("revoked")
		}
	})
	c := idpClaims()
	c["grant"], c["exp"] = "g1", time.Now().Add(time.Hour).Unix()
	tok := as.token(t, c, nil)
	srv := httptest.NewServer(v.Middleware(v.ResourceMetadataURL())(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})))
	defer srv.Close()
	do := func() (*http.Response, error) {
		req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader("{}"))
		req.Header.Set("Authorization", "Bearer "+tok)
		return srv.Client().Do(req)
	}
	resp, err := do()
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 401 || !strings.Contains(resp.Header.Get("WWW-Authenticate"), "invalid_token") {
		t.Fatalf("revoked grant: %d %q", resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
	}
	down.Store(true)
	resp, err = do()
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("grant check unavailable: %d Retry-After %q, want 503 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	if _, err := v.Verify(t.Context(), tok, nil); errors.Is(err, sdkauth.ErrInvalidToken) || !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Verify during an outage: %v, want ErrUnavailable and not ErrInvalidToken", err)
	}
}
