// Package auth is Unsay's OAuth 2.0 resource-server side: it verifies bearer
// tokens (JWTs) and turns them into a models.Principal, answers 401/403 for
// /mcp with the RFC 6750 / RFC 9728 WWW-Authenticate challenges, and mints
// development tokens (P-13, P-21).
//
// Which keys verify a token is decided once, by Config (Verifier.Describe
// names it for the startup line):
//
//   - a key set (Config.JWKS): the embedded authorization server's keys
//     (bridge/oauth) or an external one's (RemoteJWKS, --token-jwks-url).
//     Only the key named by the token's "kid" verifies it, with the one
//     algorithm of that key (RS256, PS256, ES256, ES384 or EdDSA); "iss"
//     must be Config.Issuer. HS256 stays on beside it only when
//     Config.HS256WithJWKS is set (the embedded server on loopback: the
//     development tokens of `unsay token`);
//   - a public key (Config.PublicKeyPEM, --token-public-key): RS256 or ES256
//     under that key and nothing else — HS256 is off;
//   - otherwise HS256 under Config.Secret.
//
// "none" and every other algorithm are refused, and each algorithm is
// checked only against its own key. A token is accepted only when all of
// these hold:
//
//   - its header and payload are JSON objects without duplicate member
//     names, its header has no "crit", and "exp"/"nbf"/"iat" are numbers;
//   - "exp" is present and not past (Config.Clock, no leeway); "nbf", when
//     present, is not in the future; "iat", when present, is at most
//     MaxIssuedAtSkew ahead of Config.Clock (a token "issued" later than
//     that was not issued by a clock we can trust);
//   - "aud" (a string or an array) contains this server's resource
//     identifier "{public-url}/mcp" or "{public-url}" (RFC 8707);
//   - "sub" is non-empty;
//   - "scope" is a non-empty list of known scopes (models.Scope.Valid)
//     separated by single spaces, RFC 6749 §3.3 (scope-token *( SP
//     scope-token )): a tab, a doubled or an outer space refuses the token,
//     and so does one unknown scope;
//   - "patients" is an array of valid patient ids (models.ValidID), non-empty
//     except in key-set tokens (a client_credentials token is bound to no
//     patient and reads none);
//   - with Config.GrantActive, the token's "grant" names a grant that is not
//     revoked — checked on every request, so a revocation is effective on
//     the next one.
//
// Scopes and patients come from the signed payload and nowhere else.
package auth

import (
	"context"
	"crypto/elliptic"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/golang-jwt/jwt/v5"
	sdkauth "github.com/modelcontextprotocol/go-sdk/auth"

	"github.com/unsay/unsay/models"
)

// DevTokenSecret is the development HS256 secret used when
// UNSAY_TOKEN_SECRET is unset. The startup line must announce it: a server
// running on it accepts tokens anyone with the source can mint.
const DevTokenSecret = "unsay-development-token-secret-NOT-FOR-DEPLOYMENT"

// MinSecretBytes is the shortest HS256 secret accepted: 32 bytes, the size
// of the hash output (RFC 7518 §3.2).
const MinSecretBytes = 32

// PrincipalKey is the TokenInfo.Extra key holding the token's models.Principal.
const PrincipalKey = "unsay/principal"

// Errors. Verification failures wrap sdkauth.ErrInvalidToken, so the SDK's
// RequireBearerToken answers 401 for them.
var (
	// ErrNoToken: the request carries no "Authorization: Bearer …" header.
	ErrNoToken = errors.New("no bearer token in the Authorization header")
	// ErrConfig: NewVerifier or Mint was given an unusable configuration.
	ErrConfig = errors.New("auth: bad configuration")
	// ErrUnavailable: the token could not be checked now (the grant check's
	// store is unreachable). It does not wrap sdkauth.ErrInvalidToken: the
	// token is not known to be bad, so /mcp answers 503, not 401, and the
	// skill does not tell a linked person to link again.
	ErrUnavailable = errors.New("auth: token verification unavailable")
)

// Config configures token verification and minting.
type Config struct {
	// Secret is the HS256 key (UNSAY_TOKEN_SECRET), at least MinSecretBytes.
	// It verifies tokens only when neither PublicKeyPEM nor JWKS is set, or
	// beside JWKS with HS256WithJWKS. Mint always uses it.
	Secret []byte
	// PublicKeyPEM enables RS256 (an RSA key) or ES256 (an EC P-256 key)
	// verification under that key alone (--token-public-key). PKIX or PKCS#1 PEM.
	PublicKeyPEM []byte
	// JWKS is an authorization server's key set; Issuer is then required.
	JWKS KeySource
	// Issuer is the "iss" every key-set token must carry (the authorization
	// server's issuer identifier, RFC 8414 §2).
	Issuer string
	// HS256WithJWKS keeps HS256 under Secret beside JWKS (development tokens
	// on a loopback server with the embedded authorization server).
	HS256WithJWKS bool
	// GrantActive, when set, is asked about every key-set token from Issuer:
	// it returns nil while the grant named by the token's "grant" claim is
	// active, an error once it is revoked (the token is then refused).
	GrantActive func(ctx context.Context, grantID string) error
	// JWKSDescription names the key set in Describe (e.g. its URL).
	JWKSDescription string
	// PublicURL is this server's public base URL, e.g. "http://127.0.0.1:8080"
	// (a trailing slash is ignored). The resource identifier is PublicURL+"/mcp".
	PublicURL string
	// Clock is the server clock for "exp"; nil means time.Now.
	Clock func() time.Time
}

// Verifier verifies bearer tokens. It is immutable after NewVerifier and
// safe for concurrent use.
type Verifier struct {
	secret   []byte // nil when HS256 is off
	pubKey   any    // *rsa.PublicKey or *ecdsa.PublicKey; nil when none
	pubAlg   string // "RS256" or "ES256" when pubKey != nil
	jwks     KeySource
	issuer   string
	active   func(ctx context.Context, grantID string) error
	describe string
	methods  []string
	base     string // PublicURL without trailing slash
	resource string // base + "/mcp"
	clock    func() time.Time
	sigs     *sigCache
}

// NewVerifier checks cfg and returns a Verifier. Errors (wrapping ErrConfig):
// no key at all, both a public key and a key set, a key set without an
// issuer, a secret shorter than MinSecretBytes where HS256 is in force, an
// unparsable or unsupported public key (only RSA ≥ 2048 bits and EC P-256),
// a PublicURL that is not an absolute http(s) URL without query or fragment.
func NewVerifier(cfg Config) (*Verifier, error) {
	base, err := normalizePublicURL(cfg.PublicURL)
	if err != nil {
		return nil, err
	}
	v := &Verifier{base: base, resource: base + "/mcp", clock: cfg.Clock, sigs: &sigCache{}}
	if v.clock == nil {
		v.clock = time.Now
	}
	if len(cfg.PublicKeyPEM) > 0 && cfg.JWKS != nil {
		return nil, fmt.Errorf("%w: --token-public-key and a key set (--token-jwks-url or the embedded authorization server) exclude each other", ErrConfig)
	}
	hs256 := len(cfg.Secret) > 0
	switch {
	case len(cfg.PublicKeyPEM) > 0:
		key, alg, err := parsePublicKey(cfg.PublicKeyPEM)
		if err != nil {
			return nil, err
		}
		v.pubKey, v.pubAlg = key, alg
		v.methods = append(v.methods, alg)
		v.describe = "tokens verified by the " + alg + " public key only (HS256 off)"
		hs256 = false
	case cfg.JWKS != nil:
		if cfg.Issuer == "" {
			return nil, fmt.Errorf("%w: a key set needs the issuer its tokens carry", ErrConfig)
		}
		v.jwks, v.issuer, v.active = cfg.JWKS, cfg.Issuer, cfg.GrantActive
		v.methods = append(v.methods, jwksAlgorithms...)
		what := cfg.JWKSDescription
		if what == "" {
			what = "a JWKS"
		}
		v.describe = "tokens verified by " + what + " (issuer " + cfg.Issuer + ")"
		hs256 = hs256 && cfg.HS256WithJWKS
		if hs256 {
			v.describe += " and HS256 development tokens (loopback only)"
		} else {
			v.describe += ", HS256 off"
		}
	default:
		v.describe = "tokens verified by HS256 (UNSAY_TOKEN_SECRET)"
	}
	if hs256 {
		if len(cfg.Secret) < MinSecretBytes {
			return nil, fmt.Errorf("%w: token secret is %d bytes, need at least %d", ErrConfig, len(cfg.Secret), MinSecretBytes)
		}
		v.secret = slices.Clone(cfg.Secret)
		v.methods = append(v.methods, jwt.SigningMethodHS256.Alg())
	}
	if len(v.methods) == 0 {
		return nil, fmt.Errorf("%w: neither a token secret nor a public key is configured", ErrConfig)
	}
	return v, nil
}

// Describe says which verification is in force, for the startup line:
// "tokens verified by …" naming the key set and issuer, the public key's
// algorithm, or HS256, and whether HS256 is on.
func (v *Verifier) Describe() string { return v.describe }

// HS256 reports whether HS256 tokens (Mint) are accepted.
func (v *Verifier) HS256() bool { return v.secret != nil }

func normalizePublicURL(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" ||
		u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return "", fmt.Errorf("%w: public URL %q must be an absolute http(s) URL without user, query or fragment", ErrConfig, raw)
	}
	return strings.TrimRight(raw, "/"), nil
}

func parsePublicKey(pemBytes []byte) (any, string, error) {
	if k, err := jwt.ParseRSAPublicKeyFromPEM(pemBytes); err == nil {
		if k.N.BitLen() < 2048 {
			return nil, "", fmt.Errorf("%w: RSA public key is %d bits, need at least 2048", ErrConfig, k.N.BitLen())
		}
		return k, jwt.SigningMethodRS256.Alg(), nil
	}
	if k, err := jwt.ParseECPublicKeyFromPEM(pemBytes); err == nil {
		if k.Curve != elliptic.P256() {
			return nil, "", fmt.Errorf("%w: EC public key must be on P-256 (ES256)", ErrConfig)
		}
		return k, jwt.SigningMethodES256.Alg(), nil
	}
	return nil, "", fmt.Errorf("%w: token public key is not an RSA or EC public key in PEM", ErrConfig)
}

// Resource is the resource identifier of the MCP endpoint: "{public-url}/mcp".
func (v *Verifier) Resource() string { return v.resource }

// ResourceMetadataURL is the RFC 9728 metadata URL for /mcp:
// "{public-url}/.well-known/oauth-protected-resource/mcp".
func (v *Verifier) ResourceMetadataURL() string {
	return v.base + "/.well-known/oauth-protected-resource/mcp"
}

// claims is the token payload Unsay reads.
type claims struct {
	Scope    string    `json:"scope"`
	Patients *[]string `json:"patients"`
	Grant    string    `json:"grant,omitempty"`
	jwt.RegisteredClaims
}

// verifiedKey carries a token already verified by Middleware to the SDK's
// RequireBearerToken, so the token is checked once per request.
type verifiedKey struct{}

type verified struct {
	token string
	info  *sdkauth.TokenInfo
}

// Verify checks token as described in the package comment and returns the
// SDK TokenInfo: Scopes, Expiration, UserID (= SessionUserID of the
// principal: its subject AND its patient binding) and the models.Principal
// in Extra[PrincipalKey]. It is an sdkauth.TokenVerifier.
// Every failure wraps sdkauth.ErrInvalidToken; the message names the rule
// that failed but never echoes the token.
func (v *Verifier) Verify(ctx context.Context, token string, r *http.Request) (*sdkauth.TokenInfo, error) {
	if pv, ok := ctx.Value(verifiedKey{}).(verified); ok && pv.token == token {
		return pv.info, nil
	}
	now := v.clock()
	c, fromKeySet, hit := v.sigs.get(token, now)
	if !hit {
		if err := checkRaw(token); err != nil {
			return nil, fmt.Errorf("%w: %w", sdkauth.ErrInvalidToken, err)
		}
		_, err := jwt.ParseWithClaims(token, &c, func(t *jwt.Token) (any, error) {
			key, set, err := v.keyFunc(ctx, t)
			fromKeySet = set
			return key, err
		},
			jwt.WithValidMethods(v.methods),
			jwt.WithExpirationRequired(),
			jwt.WithAudience(v.resource, v.base),
			jwt.WithTimeFunc(func() time.Time { return now }),
			jwt.WithStrictDecoding(),
		)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", sdkauth.ErrInvalidToken, err)
		}
		if c.IssuedAt != nil && c.IssuedAt.After(now.Add(MaxIssuedAtSkew)) {
			return nil, fmt.Errorf("%w: \"iat\" is more than %v in the future", sdkauth.ErrInvalidToken, MaxIssuedAtSkew)
		}
		if fromKeySet && c.Issuer != v.issuer {
			return nil, fmt.Errorf("%w: \"iss\" is not the authorization server in force", sdkauth.ErrInvalidToken)
		}
		v.sigs.put(token, c, fromKeySet, now)
	} else if !now.Before(c.ExpiresAt.Time) {
		return nil, fmt.Errorf("%w: token has expired", sdkauth.ErrInvalidToken)
	}
	if fromKeySet {
		if v.active != nil {
			if c.Grant == "" {
				return nil, fmt.Errorf("%w: \"grant\" is missing", sdkauth.ErrInvalidToken)
			}
			if err := v.active(ctx, c.Grant); err != nil {
				if errors.Is(err, ErrUnavailable) {
					return nil, err
				}
				return nil, fmt.Errorf("%w: grant: %w", sdkauth.ErrInvalidToken, err)
			}
		}
	}
	p, err := principalFromClaims(&c, fromKeySet)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", sdkauth.ErrInvalidToken, err)
	}
	scopes := make([]string, len(p.Scopes))
	for i, s := range p.Scopes {
		scopes[i] = string(s)
	}
	return &sdkauth.TokenInfo{
		Scopes:     scopes,
		Expiration: c.ExpiresAt.Time,
		UserID:     SessionUserID(p),
		Extra:      map[string]any{PrincipalKey: p},
	}, nil
}

// SessionUserID is the identity an MCP session is bound to (P-21): the
// principal's subject and its patient binding, "sub|p1,p2,…" with the
// patients sorted and deduplicated. Verify puts it in TokenInfo.UserID, and
// the SDK refuses (403 "session user mismatch") any POST, GET or DELETE on
// a session whose creator's UserID differs — so a token of the same
// subject bound to other patients cannot use, resume or end another
// principal's session, while a token of the same subject and patients with
// narrowed scopes can. Patient ids never contain "|" or ",", so the value
// is unambiguous (the subject is everything before the last "|"). It is an
// identity key, not a principal: audit actors and authorization use
// PrincipalOf(…).Subject and the principal's scopes and patients.
func SessionUserID(p models.Principal) string {
	patients := slices.Clone(p.Patients)
	slices.Sort(patients)
	patients = slices.Compact(patients)
	return p.Subject + "|" + strings.Join(patients, ",")
}

// Now is the verifier's clock (Config.Clock, or time.Now): the clock "exp"
// is checked against.
func (v *Verifier) Now() time.Time { return v.clock() }

// keyFunc returns the key for the token's own algorithm only: the HMAC
// secret for HS256, the public key for its RS256/ES256, and for a key set
// the key named by "kid" when the token's algorithm is that key's one
// algorithm. WithValidMethods has already refused any other algorithm,
// including "none". set reports that the key came from the key set.
func (v *Verifier) keyFunc(ctx context.Context, t *jwt.Token) (key any, set bool, err error) {
	alg := t.Method.Alg()
	switch {
	case alg == jwt.SigningMethodHS256.Alg():
		if v.secret != nil {
			return v.secret, false, nil
		}
	case v.pubKey != nil:
		if alg == v.pubAlg {
			return v.pubKey, false, nil
		}
	case v.jwks != nil:
		kid, _ := t.Header["kid"].(string)
		if kid == "" {
			return nil, true, errors.New(`a key-set token needs a "kid" header`)
		}
		k, err := v.jwks.Key(ctx, kid)
		if err != nil {
			return nil, true, err
		}
		want, err := keyAlgorithm(k)
		if err != nil {
			return nil, true, err
		}
		if alg != want {
			return nil, true, fmt.Errorf("key %q verifies %s, not %s", kid, want, alg)
		}
		return k.Key, true, nil
	}
	return nil, false, fmt.Errorf("no key for algorithm %q", alg)
}

func principalFromClaims(c *claims, fromKeySet bool) (models.Principal, error) {
	if c.Subject == "" {
		return models.Principal{}, errors.New(`"sub" is missing`)
	}
	scopes, err := ParseScopes(c.Scope)
	if err != nil {
		return models.Principal{}, err
	}
	if c.Patients == nil || (len(*c.Patients) == 0 && !fromKeySet) {
		return models.Principal{}, errors.New(`"patients" is missing or empty`)
	}
	patients := make([]string, 0, len(*c.Patients))
	for _, id := range *c.Patients {
		if !models.ValidID(id) {
			return models.Principal{}, errors.New(`"patients" holds an invalid patient id`)
		}
		if !slices.Contains(patients, id) {
			patients = append(patients, id)
		}
	}
	return models.Principal{Subject: c.Subject, Scopes: scopes, Patients: patients}, nil
}

// MaxIssuedAtSkew is how far a token's "iat" may be ahead of this server's
// clock: 60 s, for an authorization server whose clock runs a little fast.
const MaxIssuedAtSkew = 60 * time.Second

// ParseScopes parses an OAuth "scope" string into known scopes, dropping
// duplicates. The grammar is RFC 6749 §3.3's, scope = scope-token *( SP
// scope-token ): scopes separated by single spaces (U+0020), nothing
// before the first or after the last. It fails on an empty string, any
// other separator (a tab, a line break, two spaces), or a scope that is not
// models.Scope.Valid.
func ParseScopes(s string) ([]models.Scope, error) {
	if strings.TrimSpace(s) == "" {
		return nil, errors.New(`"scope" is missing or empty`)
	}
	var out []models.Scope
	for _, f := range strings.Split(s, " ") {
		sc := models.Scope(f)
		if f == "" || strings.ContainsFunc(f, unicode.IsSpace) {
			return nil, errors.New(`"scope" must be scope tokens separated by single spaces (RFC 6749 §3.3)`)
		}
		if !sc.Valid() {
			return nil, errors.New(`"scope" holds an unknown scope`)
		}
		if !slices.Contains(out, sc) {
			out = append(out, sc)
		}
	}
	if len(out) == 0 {
		return nil, errors.New(`"scope" is missing or empty`)
	}
	return out, nil
}

// PrincipalOf returns the principal a TokenInfo made by Verify carries.
// ok is false for a nil TokenInfo or one not made by Verify.
func PrincipalOf(ti *sdkauth.TokenInfo) (models.Principal, bool) {
	if ti == nil {
		return models.Principal{}, false
	}
	p, ok := ti.Extra[PrincipalKey].(models.Principal)
	return p, ok
}

// BearerToken returns the token of an "Authorization: Bearer <token>"
// header (scheme case-insensitive), or ErrNoToken — also for two
// Authorization headers, which RFC 6750 clients never send and a proxy
// before us might read the other of (finding U14). Tokens are read from
// this header only, never from the query or body (P-13).
func BearerToken(r *http.Request) (string, error) {
	if len(r.Header.Values("Authorization")) != 1 {
		return "", ErrNoToken
	}
	fields := strings.Fields(r.Header.Get("Authorization"))
	if len(fields) != 2 || !strings.EqualFold(fields[0], "bearer") {
		return "", ErrNoToken
	}
	return fields[1], nil
}

// FromRequest verifies the request's bearer token and returns its
// principal, for the non-MCP routes. Errors: ErrNoToken when there is no
// bearer token; an error wrapping sdkauth.ErrInvalidToken when it fails
// verification.
func (v *Verifier) FromRequest(r *http.Request) (models.Principal, error) {
	tok, err := BearerToken(r)
	if err != nil {
		return models.Principal{}, err
	}
	ti, err := v.Verify(r.Context(), tok, r)
	if err != nil {
		return models.Principal{}, err
	}
	p, _ := PrincipalOf(ti)
	return p, nil
}

// Challenge builds a WWW-Authenticate value for the Bearer scheme
// (RFC 6750 §3, RFC 9728 §5.1): resource_metadata first, then error and
// scope when non-empty.
//
//	Challenge(u, "", "")                                 Bearer resource_metadata="u"
//	Challenge(u, "invalid_token", "")                    Bearer resource_metadata="u", error="invalid_token"
//	Challenge(u, "insufficient_scope", "care.read.user") Bearer resource_metadata="u", error="insufficient_scope", scope="care.read.user"
func Challenge(resourceMetadataURL, errorCode string, scope models.Scope) string {
	var params []string
	if resourceMetadataURL != "" {
		params = append(params, fmt.Sprintf("resource_metadata=%q", resourceMetadataURL))
	}
	if errorCode != "" {
		params = append(params, fmt.Sprintf("error=%q", errorCode))
	}
	if scope != "" {
		params = append(params, fmt.Sprintf("scope=%q", string(scope)))
	}
	if len(params) == 0 {
		return "Bearer"
	}
	return "Bearer " + strings.Join(params, ", ")
}

// Middleware guards /mcp. Tokens are read only from the Authorization header.
//
//   - no bearer token → 401, WWW-Authenticate: Bearer resource_metadata="{url}"
//     (no error code, RFC 6750 §3.1);
//   - a token that fails Verify → 401, the same plus error="invalid_token";
//   - a token that cannot be checked now (ErrUnavailable) → 503 with Retry-After;
//   - a valid token holding neither read scope → 403,
//     error="insufficient_scope", scope="care.read.user";
//
// then it hands the request to the SDK's RequireBearerToken with the same
// verifier (the token is not verified twice), so the SDK's TokenInfo is in
// the request context and in each MCP request's Extra. Refusal bodies are
// JSON {"error": "..."}. Note: the SDK re-checks "exp" against time.Now,
// not Config.Clock, so a test clock far from real time fails there.
func (v *Verifier) Middleware(resourceMetadataURL string) func(http.Handler) http.Handler {
	sdk := sdkauth.RequireBearerToken(v.Verify, &sdkauth.RequireBearerTokenOptions{ResourceMetadataURL: resourceMetadataURL})
	return func(next http.Handler) http.Handler {
		inner := sdk(next)
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			tok, err := BearerToken(r)
			if err != nil {
				WriteChallenge(w, http.StatusUnauthorized, Challenge(resourceMetadataURL, "", ""), noTokenMessage(r))
				return
			}
			ti, err := v.Verify(r.Context(), tok, r)
			if errors.Is(err, ErrUnavailable) {
				w.Header().Set("Retry-After", "5")
				w.Header().Set("Content-Type", "application/json")
				w.Header().Set("Cache-Control", "no-store")
				w.WriteHeader(http.StatusServiceUnavailable)
				fmt.Fprintln(w, `{"error":"token verification is unavailable; try again"}`)
				return
			}
			if err != nil {
				WriteChallenge(w, http.StatusUnauthorized, Challenge(resourceMetadataURL, "invalid_token", ""), "invalid_token")
				return
			}
			p, _ := PrincipalOf(ti)
			if !p.Can(models.ScopeReadUser) && !p.Can(models.ScopeReadAssistant) {
				WriteChallenge(w, http.StatusForbidden, Challenge(resourceMetadataURL, "insufficient_scope", models.ScopeReadUser), "insufficient_scope")
				return
			}
			ctx := context.WithValue(r.Context(), verifiedKey{}, verified{token: tok, info: ti})
			inner.ServeHTTP(&challengeWriter{ResponseWriter: w, meta: resourceMetadataURL}, r.WithContext(ctx))
		})
	}
}

// noTokenMessage is the refusal body's words when BearerToken found no
// token: "missing bearer token" without an Authorization header, and what
// is wrong with one that is there ("Bearer A, Bearer B", "Basic …", a
// bare "Bearer"), so nobody debugging is told a header they sent is missing.
func noTokenMessage(r *http.Request) string {
	if len(r.Header.Values("Authorization")) == 0 {
		return "missing bearer token"
	}
	return `the Authorization header is not one bearer token: want "Authorization: Bearer <token>" (one header, one token)`
}

// challengeWriter gives a 401 the SDK writes itself (its own expiry check
// against time.Now, a token expiring between the two checks) the
// error="invalid_token" the SDK leaves out (go-sdk issue #1134), so every
// 401 for a presented token says why (RFC 6750 §3.1). Unwrap keeps
// http.ResponseController (flushing SSE streams) working through it.
type challengeWriter struct {
	http.ResponseWriter
	meta  string
	wrote bool
}

func (c *challengeWriter) WriteHeader(status int) {
	if !c.wrote && status == http.StatusUnauthorized && !strings.Contains(c.Header().Get("WWW-Authenticate"), "error=") {
		c.Header().Set("WWW-Authenticate", Challenge(c.meta, "invalid_token", ""))
	}
	c.wrote = true
	c.ResponseWriter.WriteHeader(status)
}

func (c *challengeWriter) Write(b []byte) (int, error) {
	c.wrote = true
	return c.ResponseWriter.Write(b)
}

func (c *challengeWriter) Unwrap() http.ResponseWriter { return c.ResponseWriter }

// Flush flushes the underlying writer when it can (SSE).
func (c *challengeWriter) Flush() {
	c.wrote = true
	_ = http.NewResponseController(c.ResponseWriter).Flush()
}

// WriteChallenge answers status with the given WWW-Authenticate value and a
// JSON body {"error": msg}.
func WriteChallenge(w http.ResponseWriter, status int, challenge, msg string) {
	w.Header().Set("WWW-Authenticate", challenge)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	fmt.Fprintf(w, "{\"error\":%q}\n", msg)
}

// Mint signs a development token with HS256 under cfg.Secret: sub, scope
// (space-separated), patients, aud "{public-url}/mcp", iat now and exp
// now+ttl (cfg.Clock). ttl must be positive. Errors (wrapping ErrConfig):
// a secret shorter than MinSecretBytes, a bad public URL, an empty sub, no
// or unknown scopes, no or invalid patient ids, ttl ≤ 0.
//
// Unsay is not an authorization server; Mint exists for development, tests
// and the `unsay token` command.
func Mint(cfg Config, sub string, scopes []models.Scope, patients []string, ttl time.Duration) (string, error) {
	base, err := normalizePublicURL(cfg.PublicURL)
	if err != nil {
		return "", err
	}
	if len(cfg.Secret) < MinSecretBytes {
		return "", fmt.Errorf("%w: token secret is %d bytes, need at least %d", ErrConfig, len(cfg.Secret), MinSecretBytes)
	}
	if ttl <= 0 {
		return "", fmt.Errorf("%w: ttl must be positive", ErrConfig)
	}
	parts := make([]string, len(scopes))
	for i, s := range scopes {
		parts[i] = string(s)
	}
	ps := slices.Clone(patients)
	c := claims{Scope: strings.Join(parts, " "), Patients: &ps}
	c.Subject = sub
	if _, err := principalFromClaims(&c, false); err != nil {
		return "", fmt.Errorf("%w: %w", ErrConfig, err)
	}
	now := time.Now
	if cfg.Clock != nil {
		now = cfg.Clock
	}
	t := now()
	c.Audience = jwt.ClaimStrings{base + "/mcp"}
	c.IssuedAt = jwt.NewNumericDate(t)
	c.ExpiresAt = jwt.NewNumericDate(t.Add(ttl))
	return jwt.NewWithClaims(jwt.SigningMethodHS256, c).SignedString(cfg.Secret)
}
