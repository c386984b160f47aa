package auth

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	sdkauth "github.com/modelcontextprotocol/go-sdk/auth"

	"github.com/unsay/unsay/models"
)

const (
	testURL    = "http://127.0.0.1:8080"
	testSecret = "test-secret-0123456789abcdef-0123456789"
)

var testNow = time.Now().Truncate(time.Second)

func testConfig() Config {
	return Config{Secret: []byte(testSecret), PublicURL: testURL, Clock: func() time.Time { return testNow }}
}

func newVerifier(t *testing.T, cfg Config) *Verifier {
	t.Helper()
	v, err := NewVerifier(cfg)
	if err != nil {
		t.Fatalf("NewVerifier: %v", err)
	}
	return v
}

// goodClaims is a valid payload; each case mutates a copy.
func goodClaims() jwt.MapClaims {
	return jwt.MapClaims{
		"sub":      "okafor",
		"aud":      testURL + "/mcp",
		"exp":      testNow.Add(time.Hour).Unix(),
		"iat":      testNow.Unix(),
		"scope":    "care.read.user care.write",
		"patients": []string{"ray"},
	}
}

func sign(t *testing.T, m jwt.SigningMethod, key any, c jwt.MapClaims) string {
	t.Helper()
	s, err := jwt.NewWithClaims(m, c).SignedString(key)
	if err != nil {
		t.Fatalf("sign: %v", err)
	}
	return s
}

func with(c jwt.MapClaims, k string, v any) jwt.MapClaims {
	out := jwt.MapClaims{}
	for kk, vv := range c {
		out[kk] = vv
	}
	if v == nil {
		delete(out, k)
	} else {
		out[k] = v
	}
	return out
}

// tamperPayload rewrites the payload segment and keeps the original signature.
func tamperPayload(t *testing.T, token string, edit func(map[string]any)) string {
	t.Helper()
	parts := strings.Split(token, ".")
	raw, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	edit(m)
	b, _ := json.Marshal(m)
	parts[1] = base64.RawURLEncoding.EncodeToString(b)
	return strings.Join(parts, ".")
}

func TestVerify_RefusesEveryBrokenRuleAndAcceptsItsValidTwin(t *testing.T) {
	t.Parallel()
	v := newVerifier(t, testConfig())
	hs := jwt.SigningMethodHS256
	key := []byte(testSecret)
	good := sign(t, hs, key, goodClaims())
	noneTok := sign(t, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, goodClaims())

	cases := []struct {
		name    string
		token   string
		wantErr bool
	}{
		{"valid", good, false},
		{"wrong audience", sign(t, hs, key, with(goodClaims(), "aud", "http://other.example/mcp")), true},
		{"audience is the bare public URL", sign(t, hs, key, with(goodClaims(), "aud", testURL)), false},
		{"audience array containing the resource", sign(t, hs, key, with(goodClaims(), "aud", []string{"http://other.example", testURL + "/mcp"})), false},
		{"audience array without the resource", sign(t, hs, key, with(goodClaims(), "aud", []string{"http://other.example", testURL + "/mcp/"})), true},
		{"no audience", sign(t, hs, key, with(goodClaims(), "aud", nil)), true},
		{"expired", sign(t, hs, key, with(goodClaims(), "exp", testNow.Add(-time.Second).Unix())), true},
		{"expires in one second", sign(t, hs, key, with(goodClaims(), "exp", testNow.Add(time.Second).Unix())), false},
		{"missing exp", sign(t, hs, key, with(goodClaims(), "exp", nil)), true},
		{"alg none", noneTok, true},
		{"alg none with its signature stripped from a good token", strings.Join(append(strings.Split(noneTok, ".")[:2], ""), "."), true},
		{"two-segment token", strings.Join(strings.Split(good, ".")[:2], "."), true},
		{"wrong secret", sign(t, hs, []byte("another-secret-0123456789abcdef-xyz"), goodClaims()), true},
		{"HS512 under the right secret", sign(t, jwt.SigningMethodHS512, key, goodClaims()), true},
		{"scope tampered after signing", tamperPayload(t, good, func(m map[string]any) { m["scope"] = "care.read.user care.read.assistant care.write" }), true},
		{"patients tampered after signing", tamperPayload(t, good, func(m map[string]any) { m["patients"] = []string{"ray", "other"} }), true},
		{"empty scope", sign(t, hs, key, with(goodClaims(), "scope", "")), true},
		{"blank scope", sign(t, hs, key, with(goodClaims(), "scope", "   ")), true},
		{"missing scope", sign(t, hs, key, with(goodClaims(), "scope", nil)), true},
		{"unknown scope", sign(t, hs, key, with(goodClaims(), "scope", "care.read.user care.admin")), true},
		{"scope as an array", sign(t, hs, key, with(goodClaims(), "scope", []string{"care.read.user"})), true},
		// RFC 6749 §3.3: scope-token *( SP scope-token ), single spaces only.
		{"scopes separated by a tab", sign(t, hs, key, with(goodClaims(), "scope", "care.read.user\tcare.write")), true},
		{"scopes separated by a line feed", sign(t, hs, key, with(goodClaims(), "scope", "care.read.user\ncare.write")), true},
		{"scopes separated by two spaces", sign(t, hs, key, with(goodClaims(), "scope", "care.read.user  care.write")), true},
		{"scopes separated by a no-break space", sign(t, hs, key, with(goodClaims(), "scope", "care.read.user\u00a0care.write")), true},
		{"a leading space", sign(t, hs, key, with(goodClaims(), "scope", " care.read.user")), true},
		{"a trailing space", sign(t, hs, key, with(goodClaims(), "scope", "care.read.user ")), true},
		{"one scope", sign(t, hs, key, with(goodClaims(), "scope", "care.read.user")), false},
		{"three scopes, single spaces", sign(t, hs, key, with(goodClaims(), "scope", "care.read.user care.write care.read.user")), false},
		// iat: at most MaxIssuedAtSkew in the future.
		{"issued an hour in the future", sign(t, hs, key, with(goodClaims(), "iat", testNow.Add(time.Hour).Unix())), true},
		{"issued just over the skew in the future", sign(t, hs, key, with(goodClaims(), "iat", testNow.Add(MaxIssuedAtSkew+time.Second).Unix())), true},
		{"issued exactly the skew in the future", sign(t, hs, key, with(goodClaims(), "iat", testNow.Add(MaxIssuedAtSkew).Unix())), false},
		{"issued an hour ago", sign(t, hs, key, with(goodClaims(), "iat", testNow.Add(-time.Hour).Unix())), false},
		{"no iat", sign(t, hs, key, with(goodClaims(), "iat", nil)), false},
		{"not valid for another minute (nbf)", sign(t, hs, key, with(goodClaims(), "nbf", testNow.Add(time.Minute).Unix())), true},
		{"valid from now (nbf)", sign(t, hs, key, with(goodClaims(), "nbf", testNow.Unix())), false},
		{"no patients", sign(t, hs, key, with(goodClaims(), "patients", nil)), true},
		{"empty patients", sign(t, hs, key, with(goodClaims(), "patients", []string{})), true},
		{"wildcard patient", sign(t, hs, key, with(goodClaims(), "patients", []string{"*"})), true},
		{"patients as a string", sign(t, hs, key, with(goodClaims(), "patients", "ray")), true},
		{"missing sub", sign(t, hs, key, with(goodClaims(), "sub", nil)), true},
		{"garbage", "not.a.token", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ti, err := v.Verify(t.Context(), tc.token, nil)
			if tc.wantErr {
				if err == nil {
					t.Fatalf("accepted a token that breaks a rule")
				}
				if !errors.Is(err, sdkauth.ErrInvalidToken) {
					t.Fatalf("error %v does not wrap sdkauth.ErrInvalidToken", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("refused a valid token: %v", err)
			}
			p, ok := PrincipalOf(ti)
			if !ok || p.Subject != "okafor" || ti.UserID != "okafor|ray" {
				t.Fatalf("principal %+v ok=%v userID=%q", p, ok, ti.UserID)
			}
		})
	}
}

func TestVerify_TokenInfoCarriesScopesExpiryAndPrincipalFromThePayload(t *testing.T) {
	t.Parallel()
	v := newVerifier(t, testConfig())
	c := with(goodClaims(), "scope", "care.read.assistant care.read.user care.read.user")
	c = with(c, "patients", []string{"ray", "ada", "ray"})
	ti, err := v.Verify(t.Context(), sign(t, jwt.SigningMethodHS256, []byte(testSecret), c), nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"care.read.assistant", "care.read.user"}; !slices.Equal(ti.Scopes, want) {
		t.Errorf("Scopes = %v, want %v (deduplicated, in token order)", ti.Scopes, want)
	}
	if !ti.Expiration.Equal(testNow.Add(time.Hour)) {
		t.Errorf("Expiration = %v", ti.Expiration)
	}
	p, _ := PrincipalOf(ti)
	if !slices.Equal(p.Patients, []string{"ray", "ada"}) || !p.Can(models.ScopeReadAssistant) || p.Can(models.ScopeWrite) {
		t.Errorf("principal = %+v", p)
	}
	if p.CanAccessPatient("bob") {
		t.Error("principal reaches a patient its token is not bound to (P-21)")
	}
}

// TestVerify_SessionUserIDBindsSubjectAndPatientsButNotScopes: the MCP
// session identity (TokenInfo.UserID, compared by the SDK on every request
// of a session) differs for another subject or another patient set, and is
// the same for a narrowed-scope token of the same subject and patients
// (patients in any order) — the twin that lets a narrowed token resume.
// The principal's subject stays the plain "sub" (audit actor).
func TestVerify_SessionUserIDBindsSubjectAndPatientsButNotScopes(t *testing.T) {
	t.Parallel()
	v := newVerifier(t, testConfig())
	userID := func(c jwt.MapClaims) (string, string) {
		t.Helper()
		ti, err := v.Verify(t.Context(), sign(t, jwt.SigningMethodHS256, []byte(testSecret), c), nil)
		if err != nil {
			t.Fatal(err)
		}
		p, _ := PrincipalOf(ti)
		return ti.UserID, p.Subject
	}
	base := with(with(goodClaims(), "patients", []string{"ray", "ada"}), "scope", "care.read.user care.read.assistant")
	id, sub := userID(base)
	if sub != "okafor" {
		t.Errorf("principal subject = %q, want the plain sub %q", sub, "okafor")
	}
	for _, tc := range []struct {
		name string
		c    jwt.MapClaims
		same bool
	}{
		{"narrowed scope, same patients reordered", with(with(base, "scope", "care.read.user"), "patients", []string{"ada", "ray", "ada"}), true},
		{"same subject, another patient", with(base, "patients", []string{"bob"}), false},
		{"same subject, one patient fewer", with(base, "patients", []string{"ray"}), false},
		{"same subject, one patient more", with(base, "patients", []string{"ray", "ada", "bob"}), false},
		{"another subject, same patients", with(base, "sub", "mallory"), false},
		{"subject spelling the patients into itself", with(with(base, "sub", "okafor|ada"), "patients", []string{"ray"}), false},
	} {
		got, _ := userID(tc.c)
		if (got == id) != tc.same {
			t.Errorf("%s: UserID %q vs %q, same = %v, want %v", tc.name, got, id, got == id, tc.same)
		}
	}
}

func TestVerify_PublicKeyAlgorithmsArePinnedToTheirOwnKey(t *testing.T) {
	t.Parallel()
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	ecKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	pemOf := func(pub any) []byte {
		der, err := x509.MarshalPKIXPublicKey(pub)
		if err != nil {
			t.Fatal(err)
		}
		return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
	}
	rsaPEM, ecPEM := pemOf(&rsaKey.PublicKey), pemOf(&ecKey.PublicKey)

	rsaV := newVerifier(t, Config{Secret: []byte(testSecret), PublicKeyPEM: rsaPEM, PublicURL: testURL, Clock: testConfig().Clock})
	ecV := newVerifier(t, Config{PublicKeyPEM: ecPEM, PublicURL: testURL, Clock: testConfig().Clock})
	hsOnly := newVerifier(t, testConfig())

	rs := sign(t, jwt.SigningMethodRS256, rsaKey, goodClaims())
	es := sign(t, jwt.SigningMethodES256, ecKey, goodClaims())
	hs := sign(t, jwt.SigningMethodHS256, []byte(testSecret), goodClaims())
	// Key confusion: HS256 keyed with the public key's PEM bytes.
	confused := sign(t, jwt.SigningMethodHS256, rsaPEM, goodClaims())

	cases := []struct {
		name    string
		v       *Verifier
		token   string
		wantErr bool
	}{
		{"RS256 with the RSA key configured", rsaV, rs, false},
		// With a public key only its algorithm is accepted —
		// HS256 under the (still configured) secret is refused.
		{"HS256 refused beside the RSA key", rsaV, hs, true},
		{"HS256 keyed with the public key PEM", rsaV, confused, true},
		{"ES256 where only RS256 is configured", rsaV, es, true},
		{"ES256 with the EC key configured", ecV, es, false},
		{"HS256 where no secret is configured", ecV, hs, true},
		{"RS256 where only a secret is configured", hsOnly, rs, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := tc.v.Verify(t.Context(), tc.token, nil)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tc.wantErr)
			}
		})
	}
}

func TestNewVerifier_RefusesUnusableConfigurationAndAcceptsAGoodOne(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		cfg     Config
		wantErr bool
	}{
		{"good", Config{Secret: []byte(testSecret), PublicURL: testURL}, false},
		{"trailing slash is ignored", Config{Secret: []byte(testSecret), PublicURL: testURL + "/"}, false},
		{"dev secret is long enough", Config{Secret: []byte(DevTokenSecret), PublicURL: testURL}, false},
		{"no key", Config{PublicURL: testURL}, true},
		{"short secret", Config{Secret: []byte("short"), PublicURL: testURL}, true},
		{"not a PEM key", Config{PublicKeyPEM: []byte("nope"), PublicURL: testURL}, true},
		{"relative public URL", Config{Secret: []byte(testSecret), PublicURL: "/here"}, true},
		{"public URL with query", Config{Secret: []byte(testSecret), PublicURL: testURL + "?x=1"}, true},
		{"ftp public URL", Config{Secret: []byte(testSecret), PublicURL: "ftp://h"}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			v, err := NewVerifier(tc.cfg)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tc.wantErr)
			}
			if err != nil && !errors.Is(err, ErrConfig) {
				t.Fatalf("error %v does not wrap ErrConfig", err)
			}
			if err == nil && v.Resource() != testURL+"/mcp" {
				t.Fatalf("Resource() = %q", v.Resource())
			}
		})
	}
}

func TestMint_RoundTripsThroughVerifyAndRefusesBadInput(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	v := newVerifier(t, cfg)
	tok, err := Mint(cfg, "carer", []models.Scope{models.ScopeReadUser}, []string{"ray"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	ti, err := v.Verify(t.Context(), tok, nil)
	if err != nil {
		t.Fatalf("a minted token does not verify: %v", err)
	}
	p, _ := PrincipalOf(ti)
	if p.Subject != "carer" || !slices.Equal(p.Scopes, []models.Scope{models.ScopeReadUser}) || !slices.Equal(p.Patients, []string{"ray"}) {
		t.Fatalf("principal = %+v", p)
	}
	if !ti.Expiration.Equal(testNow.Add(time.Hour)) {
		t.Fatalf("exp = %v, want now+1h", ti.Expiration)
	}
	// A minted token expires by the verifier's clock.
	later := newVerifier(t, Config{Secret: cfg.Secret, PublicURL: testURL, Clock: func() time.Time { return testNow.Add(time.Hour) }})
	if _, err := later.Verify(t.Context(), tok, nil); err == nil {
		t.Fatal("token verified after its ttl")
	}

	bad := []struct {
		name     string
		cfg      Config
		sub      string
		scopes   []models.Scope
		patients []string
		ttl      time.Duration
	}{
		{"empty sub", cfg, "", []models.Scope{models.ScopeReadUser}, []string{"ray"}, time.Hour},
		{"no scopes", cfg, "a", nil, []string{"ray"}, time.Hour},
		{"unknown scope", cfg, "a", []models.Scope{"care.admin"}, []string{"ray"}, time.Hour},
		{"no patients", cfg, "a", []models.Scope{models.ScopeReadUser}, nil, time.Hour},
		{"bad patient", cfg, "a", []models.Scope{models.ScopeReadUser}, []string{"Ray"}, time.Hour},
		{"zero ttl", cfg, "a", []models.Scope{models.ScopeReadUser}, []string{"ray"}, 0},
		{"short secret", Config{Secret: []byte("x"), PublicURL: testURL}, "a", []models.Scope{models.ScopeReadUser}, []string{"ray"}, time.Hour},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if _, err := Mint(tc.cfg, tc.sub, tc.scopes, tc.patients, tc.ttl); !errors.Is(err, ErrConfig) {
				t.Fatalf("err = %v, want ErrConfig", err)
			}
		})
	}
}

func TestMiddleware_AnswersRFC6750ChallengesAndPassesAReadTokenToTheSDK(t *testing.T) {
	t.Parallel()
	// The SDK checks exp against the real clock; use real time here.
	cfg := Config{Secret: []byte(testSecret), PublicURL: testURL}
	v := newVerifier(t, cfg)
	meta := v.ResourceMetadataURL()
	var seen *sdkauth.TokenInfo
	h := v.Middleware(meta)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen = sdkauth.TokenInfoFromContext(r.Context())
		w.WriteHeader(http.StatusNoContent)
	}))
	srv := httptest.NewServer(h)
	defer srv.Close()

	mint := func(scopes ...models.Scope) string {
		tok, err := Mint(cfg, "host", scopes, []string{"ray"}, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	readTok := mint(models.ScopeReadUser)
	cases := []struct {
		name       string
		authz      string
		query      string
		wantStatus int
		wantHeader string
	}{
		{"no token", "", "", 401, `Bearer resource_metadata="` + meta + `"`},
		{"token in the query only", "", "?access_token=" + readTok, 401, `Bearer resource_metadata="` + meta + `"`},
		{"basic auth", "Basic dXNlcjpwYXNz", "", 401, `Bearer resource_metadata="` + meta + `"`},
		{"invalid token", "Bearer " + readTok + "x", "", 401, `Bearer resource_metadata="` + meta + `", error="invalid_token"`},
		{"write-only token", "Bearer " + mint(models.ScopeWrite), "", 403, `Bearer resource_metadata="` + meta + `", error="insufficient_scope", scope="care.read.user"`},
		{"user read token", "Bearer " + readTok, "", 204, ""},
		{"assistant read token", "bearer " + mint(models.ScopeReadAssistant), "", 204, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			seen = nil
			req, _ := http.NewRequest(http.MethodPost, srv.URL+"/mcp"+tc.query, strings.NewReader("{}"))
			if tc.authz != "" {
				req.Header.Set("Authorization", tc.authz)
			}
			resp, err := srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.wantStatus {
				t.Fatalf("status = %d, want %d (body %s)", resp.StatusCode, tc.wantStatus, body)
			}
			if got := resp.Header.Get("WWW-Authenticate"); got != tc.wantHeader {
				t.Fatalf("WWW-Authenticate = %q, want %q", got, tc.wantHeader)
			}
			if tc.wantStatus != 204 {
				if seen != nil {
					t.Fatal("the handler ran for a refused request")
				}
				var e struct{ Error string }
				if err := json.Unmarshal(body, &e); err != nil || e.Error == "" {
					t.Fatalf("refusal body is not JSON {error}: %s", body)
				}
				return
			}
			p, ok := PrincipalOf(seen)
			if !ok || p.Subject != "host" {
				t.Fatalf("SDK TokenInfo missing or without principal: %+v", seen)
			}
		})
	}
}

func TestChallenge_FormatsParametersInOrder(t *testing.T) {
	t.Parallel()
	if got, want := Challenge("u", "", ""), `Bearer resource_metadata="u"`; got != want {
		t.Errorf("got %q want %q", got, want)
	}
	if got, want := Challenge("", "insufficient_scope", models.ScopeWrite), `Bearer error="insufficient_scope", scope="care.write"`; got != want {
		t.Errorf("got %q want %q", got, want)
	}
}

// BenchmarkVerify_HS256 measures one bearer-token verification.
func BenchmarkVerify_HS256(b *testing.B) {
	cfg := testConfig()
	v, err := NewVerifier(cfg)
	if err != nil {
		b.Fatal(err)
	}
	tok, err := Mint(cfg, "host", []models.Scope{models.ScopeReadUser}, []string{"ray"}, time.Hour)
	if err != nil {
		b.Fatal(err)
	}
	ctx := b.Context()
	for b.Loop() {
		if _, err := v.Verify(ctx, tok, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// TestMiddleware_SDKsOwn401CarriesInvalidToken: a token our clock accepts
// but the SDK's own expiry check (against time.Now) refuses gets the SDK's
// 401 — and error="invalid_token", which the SDK leaves out (#1134).
func TestMiddleware_SDKsOwn401CarriesInvalidToken(t *testing.T) {
	t.Parallel()
	past := time.Now().Add(-48 * time.Hour)
	cfg := Config{Secret: []byte(testSecret), PublicURL: testURL, Clock: func() time.Time { return past }}
	v := newVerifier(t, cfg)
	tok, err := Mint(cfg, "host", []models.Scope{models.ScopeReadUser}, []string{"ray"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	ran := false
	srv := httptest.NewServer(v.Middleware(v.ResourceMetadataURL())(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { ran = true })))
	defer srv.Close()
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/mcp", strings.NewReader("{}"))
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	want := `Bearer resource_metadata="` + v.ResourceMetadataURL() + `", error="invalid_token"`
	if resp.StatusCode != 401 || ran || resp.Header.Get("WWW-Authenticate") != want {
		t.Fatalf("status %d ran=%v WWW-Authenticate %q, want 401 and %q", resp.StatusCode, ran, resp.Header.Get("WWW-Authenticate"), want)
	}
}

// TestVerify_ARepeatedTokenStillExpiresByTheClock: the second verification
// of the same token (served from the signature cache) is still refused
// once the verifier's clock passes its "exp".
func TestVerify_ARepeatedTokenStillExpiresByTheClock(t *testing.T) {
	t.Parallel()
	now := testNow
	cfg := Config{Secret: []byte(testSecret), PublicURL: testURL, Clock: func() time.Time { return now }}
	v := newVerifier(t, cfg)
	tok, err := Mint(cfg, "host", []models.Scope{models.ScopeReadUser}, []string{"ray"}, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := v.Verify(t.Context(), tok, nil); err != nil {
			t.Fatalf("a fresh token: %v", err)
		}
	}
	now = now.Add(10 * time.Second)
	if _, err := v.Verify(t.Context(), tok, nil); !errors.Is(err, sdkauth.ErrInvalidToken) {
		t.Fatalf("a cached token past its exp: %v", err)
	}
}

// TestMiddleware_AMalformedAuthorizationHeaderIsNotCalledMissing: two
// bearer values ("Bearer A, Bearer B"), another scheme, or "Bearer" alone
// were answered "missing bearer token" although a header was sent. They
// keep the same 401 and challenge, and the body now says the header is not
// one bearer token, as two Authorization headers are (U14: the first was
// served); the twins: no header at all is still "missing", and one header
// with the token is served (TestMiddleware_AnswersRFC6750ChallengesAndPassesAReadTokenToTheSDK).
func TestMiddleware_AMalformedAuthorizationHeaderIsNotCalledMissing(t *testing.T) {
	t.Parallel()
	cfg := Config{Secret: []byte(testSecret), PublicURL: testURL}
	v := newVerifier(t, cfg)
	meta := v.ResourceMetadataURL()
	srv := httptest.NewServer(v.Middleware(meta)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNoContent)
	})))
	defer srv.Close()
	tok, err := Mint(cfg, "host", []models.Scope{models.ScopeReadUser}, []string{"ray"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ authz, want string }{
		{"", "missing bearer token"},
		{"Bearer " + tok + ", Bearer " + tok, "not one bearer token"},
		{"Basic dXNlcjpwYXNz", "not one bearer token"},
		{"Bearer", "not one bearer token"},
		{"Bearer " + tok + "\nBearer " + tok, "not one bearer token"}, // two headers (U14)
	} {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/mcp", strings.NewReader("{}"))
		for _, h := range strings.Split(tc.authz, "\n") {
			if h != "" {
				req.Header.Add("Authorization", h)
			}
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var e struct{ Error string }
		if resp.StatusCode != 401 || resp.Header.Get("WWW-Authenticate") != `Bearer resource_metadata="`+meta+`"` ||
			json.Unmarshal(body, &e) != nil || !strings.Contains(e.Error, tc.want) {
			t.Errorf("Authorization %.20q: %d %q %s; want 401 saying %q", tc.authz, resp.StatusCode, resp.Header.Get("WWW-Authenticate"), body, tc.want)
		}
	}
}
