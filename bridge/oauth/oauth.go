// Package oauth is Unsay's embedded OAuth 2.1 authorization server, on the
// same origin as the MCP endpoint it protects. The protocol is
// github.com/zitadel/oidc/v3's op package; this package adds only what op
// leaves to its user or lacks, and keeps all state in the store (clients,
// grants, pending authorization requests, refresh tokens, signing keys), so
// it survives restarts and every instance on Postgres shares it.
//
//	GET  /.well-known/oauth-authorization-server  RFC 8414 metadata (oauthex.AuthServerMeta)
//	GET  /oauth/authorize                         authorization_code, PKCE S256 required, scope defaults to care.read.user (op)
//	GET  /oauth/consent, POST /oauth/consent      the consent page (consent.go)
//	POST /oauth/token                             authorization_code, refresh_token (rotated), client_credentials (op)
//	GET  /oauth/jwks                              the public signing keys, ES256 (op; keys.go rotates them)
//	POST /oauth/revoke                            RFC 7009: revokes the token's whole grant (op)
//	POST /oauth/register                          RFC 7591 dynamic client registration (register.go)
//
// What this package adds on top of op:
//
//   - PKCE with S256 is required of every client (op requires it only of
//     public ones), checked when the authorization request is stored;
//   - RFC 8707 resource indicators: "resource" on /authorize and /token
//     must name the MCP endpoint ("{issuer}/mcp", or "{issuer}"), becomes the
//     token's "aud", and defaults to "{issuer}/mcp" (Alexa sends none);
//     anything else is invalid_target;
//   - RFC 9207: every authorization response (code or error) carries "iss";
//   - Client ID Metadata Documents: a client_id that is an https URL is
//     fetched (https only, no private addresses, 5 s, 64 KiB, no redirects)
//     and cached in the store for an hour (client.go);
//   - consent by link code (consent.go): a carer or the patient proves they
//     may link with the one-time six-digit code of `unsay link`, under its
//     rate limits, and confirms what is granted, in plain words;
//   - scopes: the consent page grants care.read.user only; a scope beyond it
//     (care.read.assistant) is granted only to a client a clinician approved
//     (`unsay client approve`), and every token is cut to what is approved
//     at the time it is issued; care.write is never granted here;
//   - grants: every token carries its grant's id ("grant"); the resource
//     server (bridge/auth, Config.GrantActive) checks it on every request,
//     refresh checks it, and a reused refresh token revokes it;
//   - refresh tokens for every client registered with the refresh_token
//     grant, without asking for offline_access (which MCP clients are told
//     not to request).
package oauth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"

	"github.com/unsay/unsay/models"
	"github.com/unsay/unsay/store"
)

// Endpoint paths, relative to the issuer.
const (
	PathMetadata  = "/.well-known/oauth-authorization-server"
	PathAuthorize = "/oauth/authorize"
	PathConsent   = "/oauth/consent"
	PathToken     = "/oauth/token"
	PathJWKS      = "/oauth/jwks"
	PathRevoke    = "/oauth/revoke"
	PathRegister  = "/oauth/register"
)

// Defaults for Config.
const (
	// DefaultAccessTokenTTL is an access token's lifetime: 5 minutes. The
	// resource server also checks the grant on every request, so a
	// revocation does not wait for it.
	DefaultAccessTokenTTL = 5 * time.Minute
	// DefaultRefreshTokenTTL is a refresh token's lifetime: 30 days; each
	// use rotates it.
	DefaultRefreshTokenTTL = 30 * 24 * time.Hour
	// DefaultAuthRequestTTL is how long a person has from /authorize to the
	// code's exchange: 10 minutes (the link code's own lifetime).
	DefaultAuthRequestTTL = 10 * time.Minute
	// DefaultKeyRotation is how old the signing key may get before a new one
	// is made: 30 days.
	DefaultKeyRotation = 30 * 24 * time.Hour
	// InternalTokenMaxTTL caps MintInternal's tokens: 24 hours. Retired keys
	// stay in the JWKS until every token they signed has expired.
	InternalTokenMaxTTL = 24 * time.Hour
)

// Config configures New.
type Config struct {
	// Store holds every client, grant, request, refresh token and key. Required.
	Store *store.Store
	// Issuer is the public URL ("https://care.example.org", no path, no
	// trailing slash): the issuer identifier and the origin of every endpoint.
	// http is allowed only on a loopback host.
	Issuer string
	// Clock is the clock for expiry; nil is the store's.
	Clock func() time.Time
	// Logger receives one line per refusal worth an operator's eye; nil discards.
	Logger *slog.Logger
	// AccessTokenTTL, RefreshTokenTTL, AuthRequestTTL, KeyRotation: zero
	// means the Default… constant.
	AccessTokenTTL  time.Duration
	RefreshTokenTTL time.Duration
	AuthRequestTTL  time.Duration
	KeyRotation     time.Duration
	// MetadataClient fetches Client ID Metadata Documents; nil is a client
	// that refuses private, loopback and link-local addresses (SSRF).
	MetadataClient *http.Client
	// PatientName is how the consent page names a patient ("ray" → "Ray");
	// nil capitalizes the id.
	PatientName func(patient string) string
	// RegistrationsPerHour caps dynamic registrations per client address;
	// 0 means 20, negative means no cap (tests).
	RegistrationsPerHour int
}

// Server is the authorization server. Its methods are safe for concurrent use.
type Server struct {
	cfg      Config
	st       *store.Store
	now      func() time.Time
	log      *slog.Logger
	issuer   string
	resource string
	provider *op.Provider
	keys     *keyring
	storage  *storage
	clients  *clientResolver
	regLimit *rateLimiter
}

// New checks cfg, makes the first signing key if the store has none, and
// builds the server. Errors: a missing store, an issuer that is not an
// absolute http(s) URL without path (http only on loopback), a store error.
func New(ctx context.Context, cfg Config) (*Server, error) {
	if cfg.Store == nil {
		return nil, errors.New("oauth: a store is required")
	}
	issuer := strings.TrimRight(cfg.Issuer, "/")
	u, err := url.Parse(issuer)
	if err != nil || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return nil, fmt.Errorf("oauth: issuer %q must be scheme://host[:port] without a path", cfg.Issuer)
	}
	insecure := u.Scheme == "http"
	if u.Scheme != "https" && !(insecure && isLoopbackHost(u.Hostname())) {
		return nil, fmt.Errorf("oauth: issuer %q must be https (http only on a loopback host)", cfg.Issuer)
	}
	s := &Server{cfg: cfg, st: cfg.Store, now: cfg.Clock, log: cfg.Logger, issuer: issuer, resource: issuer + "/mcp"}
	if s.now == nil {
		s.now = cfg.Store.Now
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.cfg.AccessTokenTTL <= 0 {
		s.cfg.AccessTokenTTL = DefaultAccessTokenTTL
	}
	if s.cfg.RefreshTokenTTL <= 0 {
		s.cfg.RefreshTokenTTL = DefaultRefreshTokenTTL
	}
	if s.cfg.AuthRequestTTL <= 0 {
		s.cfg.AuthRequestTTL = DefaultAuthRequestTTL
	}
	if s.cfg.KeyRotation <= 0 {
		s.cfg.KeyRotation = DefaultKeyRotation
	}
	if s.cfg.PatientName == nil {
		s.cfg.PatientName = capitalize
	}
	perHour := s.cfg.RegistrationsPerHour
	if perHour == 0 {
		perHour = 20
	}
	s.regLimit = newRateLimiter(perHour, time.Hour, s.now)
	s.keys = newKeyring(s.st, s.now, s.cfg.KeyRotation, max(s.cfg.AccessTokenTTL, InternalTokenMaxTTL), s.log)
	if err := s.keys.ensure(ctx); err != nil {
		return nil, err
	}
	s.clients = newClientResolver(s.st, s.now, cfg.MetadataClient, s.log)
	s.storage = &storage{s: s}
	opts := []op.Option{
		op.WithCustomAuthEndpoint(op.NewEndpoint(strings.TrimPrefix(PathAuthorize, "/"))),
		op.WithCustomTokenEndpoint(op.NewEndpoint(strings.TrimPrefix(PathToken, "/"))),
		op.WithCustomKeysEndpoint(op.NewEndpoint(strings.TrimPrefix(PathJWKS, "/"))),
		op.WithCustomRevocationEndpoint(op.NewEndpoint(strings.TrimPrefix(PathRevoke, "/"))),
		op.WithCrypto(codeCrypto{}),
		op.WithHttpInterceptors(resourceInterceptor),
	}
	if insecure {
		opts = append(opts, op.WithAllowInsecure())
	}
	s.provider, err = op.NewProvider(&op.Config{
		CodeMethodS256:        true,
		AuthMethodPost:        true,
		GrantTypeRefreshToken: true,
		SupportedScopes:       scopeStrings(models.ScopeReadUser, models.ScopeReadAssistant),
	}, s.storage, op.StaticIssuer(issuer), opts...)
	if err != nil {
		return nil, fmt.Errorf("oauth: %w", err)
	}
	return s, nil
}

// Issuer is the issuer identifier (the public URL).
func (s *Server) Issuer() string { return s.issuer }

// Resource is the default resource indicator: "{issuer}/mcp".
func (s *Server) Resource() string { return s.resource }

// JWKSURL is the JWKS endpoint's URL.
func (s *Server) JWKSURL() string { return s.issuer + PathJWKS }

// Routes mounts the endpoints of the package comment on r.
func (s *Server) Routes(r chi.Router) {
	r.Get(PathMetadata, s.handleMetadata)
	r.Handle(PathAuthorize, withDefaultScope(withIss(s.issuer, s.provider)))
	r.Post(PathToken, s.provider.ServeHTTP)
	r.Get(PathJWKS, s.provider.ServeHTTP)
	r.Post(PathRevoke, s.provider.ServeHTTP)
	r.Post(PathRegister, s.handleRegister)
	r.Get(PathConsent, s.handleConsentPage)
	r.Post(PathConsent, s.handleConsentForm)
}

// Metadata is the RFC 8414 authorization server metadata.
func (s *Server) Metadata() *oauthex.AuthServerMeta {
	return &oauthex.AuthServerMeta{
		Issuer:                                     s.issuer,
		AuthorizationEndpoint:                      s.issuer + PathAuthorize,
		TokenEndpoint:                              s.issuer + PathToken,
		JWKSURI:                                    s.JWKSURL(),
		RegistrationEndpoint:                       s.issuer + PathRegister,
		RevocationEndpoint:                         s.issuer + PathRevoke,
		ScopesSupported:                            scopeStrings(models.ScopeReadUser, models.ScopeReadAssistant),
		ResponseTypesSupported:                     []string{string(oidc.ResponseTypeCode)},
		ResponseModesSupported:                     []string{string(oidc.ResponseModeQuery)},
		GrantTypesSupported:                        []string{string(oidc.GrantTypeCode), string(oidc.GrantTypeRefreshToken), string(oidc.GrantTypeClientCredentials)},
		TokenEndpointAuthMethodsSupported:          []string{string(oidc.AuthMethodBasic), string(oidc.AuthMethodPost), string(oidc.AuthMethodNone)},
		RevocationEndpointAuthMethodsSupported:     []string{string(oidc.AuthMethodBasic), string(oidc.AuthMethodPost), string(oidc.AuthMethodNone)},
		CodeChallengeMethodsSupported:              []string{string(oidc.CodeChallengeMethodS256)},
		ClientIDMetadataDocumentSupported:          true,
		AuthorizationResponseIssParameterSupported: true,
	}
}

func (s *Server) handleMetadata(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "public, max-age=300")
	_ = json.NewEncoder(w).Encode(s.Metadata())
}

func scopeStrings(scopes ...models.Scope) []string {
	out := make([]string, len(scopes))
	for i, sc := range scopes {
		out[i] = string(sc)
	}
	return out
}

func capitalize(id string) string {
	if id == "" {
		return id
	}
	return strings.ToUpper(id[:1]) + id[1:]
}
