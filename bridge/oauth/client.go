package oauth

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"

	"github.com/unsay/unsay/models"
	"github.com/unsay/unsay/store"
)

// Client ID Metadata Document limits.
const (
	// MaxMetadataBytes caps a fetched client metadata document: 64 KiB.
	MaxMetadataBytes = 64 << 10
	// MetadataTimeout bounds one fetch: 5 seconds.
	MetadataTimeout = 5 * time.Second
	// MetadataCacheTTL is how long a fetched document is used before it is
	// fetched again: 1 hour.
	MetadataCacheTTL = time.Hour
)

// consentScopes are what the consent page may grant any client.
var consentScopes = []models.Scope{models.ScopeReadUser}

// approvableScopes are what a clinician may approve for a client beyond
// consentScopes (`unsay client approve`). care.write is never granted
// through this authorization server.
var approvableScopes = []models.Scope{models.ScopeReadAssistant}

// ApprovableScopes returns the scopes `unsay client approve` accepts.
func ApprovableScopes() []models.Scope { return slices.Clone(approvableScopes) }

// client adapts a stored client to op.Client.
type client struct {
	c     store.OAuthClient
	login func(id string) string
}

func (c *client) GetID() string                    { return c.c.ID }
func (c *client) RedirectURIs() []string           { return c.c.RedirectURIs }
func (c *client) PostLogoutRedirectURIs() []string { return nil }

// ApplicationType: a confidential client is a web application; a public one
// (PKCE, no secret) is native, so its loopback redirect may use any port
// (RFC 8252 §7.3).
func (c *client) ApplicationType() op.ApplicationType {
	if c.c.Public() {
		return op.ApplicationTypeNative
	}
	return op.ApplicationTypeWeb
}

func (c *client) AuthMethod() oidc.AuthMethod {
	if c.c.Public() {
		return oidc.AuthMethodNone
	}
	var m struct {
		Method string `json:"token_endpoint_auth_method"`
	}
	_ = json.Unmarshal(c.c.Metadata, &m)
	if m.Method == string(oidc.AuthMethodPost) {
		return oidc.AuthMethodPost
	}
	return oidc.AuthMethodBasic
}

func (c *client) ResponseTypes() []oidc.ResponseType {
	return []oidc.ResponseType{oidc.ResponseTypeCode}
}

func (c *client) GrantTypes() []oidc.GrantType {
	out := make([]oidc.GrantType, 0, len(c.c.GrantTypes))
	for _, g := range c.c.GrantTypes {
		out = append(out, oidc.GrantType(g))
	}
	return out
}

func (c *client) hasGrant(g oidc.GrantType) bool { return slices.Contains(c.c.GrantTypes, string(g)) }

func (c *client) LoginURL(id string) string            { return c.login(id) }
func (c *client) AccessTokenType() op.AccessTokenType  { return op.AccessTokenTypeJWT }
func (c *client) IDTokenLifetime() time.Duration       { return 5 * time.Minute }
func (c *client) DevMode() bool                        { return false }
func (c *client) IDTokenUserinfoClaimsAssertion() bool { return false }
func (c *client) ClockSkew() time.Duration             { return 0 }
func (c *client) RestrictAdditionalIdTokenScopes() func([]string) []string {
	return func(s []string) []string { return nil } // ID tokens carry no scopes
}
func (c *client) RestrictAdditionalAccessTokenScopes() func([]string) []string {
	return func(s []string) []string { return s }
}

// IsScopeAllowed: the consent page's scopes, and those a clinician approved.
func (c *client) IsScopeAllowed(scope string) bool {
	return slices.Contains(c.allowedScopes(), models.Scope(scope))
}

// allowedScopes is what this client may be granted now.
func (c *client) allowedScopes() []models.Scope {
	out := slices.Clone(consentScopes)
	for _, s := range c.c.ApprovedScopes {
		if sc := models.Scope(s); slices.Contains(approvableScopes, sc) && !slices.Contains(out, sc) {
			out = append(out, sc)
		}
	}
	return out
}

// clientResolver finds clients: stored ones by id, and Client ID Metadata
// Documents by fetching the https URL that is their id.
type clientResolver struct {
	st   *store.Store
	now  func() time.Time
	http *http.Client
	log  *slog.Logger
}

func newClientResolver(st *store.Store, now func() time.Time, hc *http.Client, log *slog.Logger) *clientResolver {
	if hc == nil {
		hc = PublicOnlyHTTPClient()
	}
	return &clientResolver{st: st, now: now, http: hc, log: log}
}

// ErrUnknownClient: no such client, a disabled one, or a metadata document
// that cannot be fetched or is not valid.
var ErrUnknownClient = errors.New("oauth: unknown client")

// IsMetadataClientID reports whether id names a Client ID Metadata
// Document: an https URL with a path (draft-ietf-oauth-client-id-metadata-document §3).
func IsMetadataClientID(id string) bool {
	u, err := url.Parse(id)
	return err == nil && u.Scheme == "https" && u.Host != "" && u.Path != "" && u.Path != "/" &&
		u.User == nil && u.Fragment == "" && !strings.Contains(u.Path, "/./") && !strings.Contains(u.Path, "/../")
}

func (r *clientResolver) get(ctx context.Context, id string) (store.OAuthClient, error) {
	c, err := r.st.OAuthClient(ctx, id)
	switch {
	case err == nil && c.Disabled:
		return store.OAuthClient{}, ErrUnknownClient
	case err == nil && (c.Kind != store.ClientMetadata || r.now().Sub(c.FetchedAt) < MetadataCacheTTL):
		return c, nil
	case err != nil && !errors.Is(err, store.ErrOAuthNotFound):
		return store.OAuthClient{}, err
	}
	if !IsMetadataClientID(id) {
		return store.OAuthClient{}, ErrUnknownClient
	}
	fetched, ferr := r.fetch(ctx, id)
	if ferr != nil {
		r.log.Warn("oauth: client metadata document refused", "client_id", id, "err", ferr)
		return store.OAuthClient{}, fmt.Errorf("%w: %w", ErrUnknownClient, ferr)
	}
	if err := r.st.PutOAuthClient(ctx, fetched); err != nil {
		return store.OAuthClient{}, err
	}
	return r.st.OAuthClient(ctx, id)
}

// metadataDocument is the part of a Client ID Metadata Document Unsay reads
// (RFC 7591 client metadata names).
type metadataDocument struct {
	ClientID                string   `json:"client_id"`
	ClientName              string   `json:"client_name"`
	RedirectURIs            []string `json:"redirect_uris"`
	GrantTypes              []string `json:"grant_types"`
	ResponseTypes           []string `json:"response_types"`
	TokenEndpointAuthMethod string   `json:"token_endpoint_auth_method"`
	ClientSecret            string   `json:"client_secret"`
}

// fetch GETs and validates the document at id: 200, JSON, at most
// MaxMetadataBytes, client_id equal to the URL, no client secret (a
// document is public), token_endpoint_auth_method none, redirect URIs
// that pass validRedirectURI, and a client_name (if any) that passes
// checkClientName (refused as "invalid_client_metadata: …").
func (r *clientResolver) fetch(ctx context.Context, id string) (store.OAuthClient, error) {
	ctx, cancel := context.WithTimeout(ctx, MetadataTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, id, nil)
	if err != nil {
		return store.OAuthClient{}, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := r.http.Do(req)
	if err != nil {
		return store.OAuthClient{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return store.OAuthClient{}, fmt.Errorf("answered %d", resp.StatusCode)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxMetadataBytes+1))
	if err != nil {
		return store.OAuthClient{}, err
	}
	if len(body) > MaxMetadataBytes {
		return store.OAuthClient{}, fmt.Errorf("document over %d bytes", MaxMetadataBytes)
	}
	var doc metadataDocument
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&doc); err != nil {
		return store.OAuthClient{}, fmt.Errorf("not a JSON document: %w", err)
	}
	switch {
	case doc.ClientID != id:
		return store.OAuthClient{}, errors.New("client_id in the document is not its URL")
	case doc.ClientSecret != "":
		return store.OAuthClient{}, errors.New("a metadata document must not carry a client secret")
	case doc.TokenEndpointAuthMethod != "" && doc.TokenEndpointAuthMethod != string(oidc.AuthMethodNone):
		return store.OAuthClient{}, errors.New("token_endpoint_auth_method must be none (private_key_jwt is not supported)")
	case len(doc.RedirectURIs) == 0:
		return store.OAuthClient{}, errors.New("redirect_uris is empty")
	}
	for _, u := range doc.RedirectURIs {
		if err := validRedirectURI(u); err != nil {
			return store.OAuthClient{}, err
		}
	}
	grants, err := clientGrants(doc.GrantTypes, true)
	if err != nil {
		return store.OAuthClient{}, err
	}
	name := strings.TrimSpace(doc.ClientName)
	if err := checkClientName(name); err != nil {
		return store.OAuthClient{}, fmt.Errorf("invalid_client_metadata: %w", err)
	}
	if name == "" {
		name = hostOf(id)
	}
	now := r.now()
	return store.OAuthClient{ID: id, Kind: store.ClientMetadata, Name: name, RedirectURIs: doc.RedirectURIs, GrantTypes: grants,
		Metadata: body, CreatedAt: now, FetchedAt: now}, nil
}

// clientGrants checks requested grant types: authorization_code (the
// default), refresh_token, and client_credentials only for a confidential
// client. A public client gets refresh_token with authorization_code.
func clientGrants(requested []string, public bool) ([]string, error) {
	if len(requested) == 0 {
		requested = []string{string(oidc.GrantTypeCode), string(oidc.GrantTypeRefreshToken)}
	}
	var out []string
	for _, g := range requested {
		switch oidc.GrantType(g) {
		case oidc.GrantTypeCode, oidc.GrantTypeRefreshToken:
		case oidc.GrantTypeClientCredentials:
			if public {
				return nil, errors.New("client_credentials needs a confidential client")
			}
		default:
			return nil, fmt.Errorf("grant type %q is not supported", g)
		}
		if !slices.Contains(out, g) {
			out = append(out, g)
		}
	}
	if slices.Contains(out, string(oidc.GrantTypeCode)) && !slices.Contains(out, string(oidc.GrantTypeRefreshToken)) {
		out = append(out, string(oidc.GrantTypeRefreshToken))
	}
	return out, nil
}

// validRedirectURI accepts an absolute https URL, an http URL on a loopback
// host (native apps, RFC 8252 §7.3), or a private-use scheme with a dot
// (RFC 8252 §7.1, "com.example.app:/cb"); never a fragment, userinfo, or a
// scheme a browser would run (javascript:, data:, file:, vbscript:).
func validRedirectURI(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme == "" || u.Fragment != "" || u.User != nil || len(raw) > 2000 {
		return fmt.Errorf("redirect_uri %q is not an absolute URI without fragment", raw)
	}
	switch strings.ToLower(u.Scheme) {
	case "https":
		if u.Host == "" {
			return fmt.Errorf("redirect_uri %q has no host", raw)
		}
		return nil
	case "http":
		if isLoopbackHost(u.Hostname()) {
			return nil
		}
		return fmt.Errorf("redirect_uri %q: http only on a loopback host", raw)
	case "javascript", "data", "file", "vbscript", "blob", "about":
		return fmt.Errorf("redirect_uri %q uses a forbidden scheme", raw)
	}
	if !strings.Contains(u.Scheme, ".") {
		return fmt.Errorf("redirect_uri %q: a private-use scheme must be a reversed domain name (RFC 8252 §7.1)", raw)
	}
	return nil
}

func hostOf(raw string) string {
	if u, err := url.Parse(raw); err == nil && u.Host != "" {
		return u.Host
	}
	return raw
}

// PublicOnlyHTTPClient is the client Client ID Metadata Documents are
// fetched with: https only, no redirects, a MetadataTimeout limit, and a
// dialer that refuses every address that is not public unicast — loopback,
// private (RFC 1918, fc00::/7), link-local (cloud metadata at
// 169.254.169.254), unspecified, multicast, CGNAT — after name resolution,
// so a DNS name pointing inside is refused too (SSRF).
func PublicOnlyHTTPClient() *http.Client {
	dialer := &net.Dialer{Timeout: MetadataTimeout, Control: func(network, address string, _ syscall.RawConn) error {
		host, _, err := net.SplitHostPort(address)
		if err != nil {
			return err
		}
		ip := net.ParseIP(host)
		if ip == nil || !publicAddress(ip) {
			return fmt.Errorf("oauth: refusing to fetch client metadata from the non-public address %s", host)
		}
		return nil
	}}
	tr := &http.Transport{
		DialContext:           dialer.DialContext,
		Proxy:                 nil,
		TLSHandshakeTimeout:   MetadataTimeout,
		ResponseHeaderTimeout: MetadataTimeout,
		MaxIdleConns:          4,
		IdleConnTimeout:       30 * time.Second,
	}
	return &http.Client{Transport: tr, Timeout: MetadataTimeout, CheckRedirect: func(*http.Request, []*http.Request) error {
		return errors.New("oauth: client metadata documents are not fetched through redirects")
	}}
}

var cgnat = &net.IPNet{IP: net.IPv4(100, 64, 0, 0), Mask: net.CIDRMask(10, 32)}

func publicAddress(ip net.IP) bool {
	return !(ip.IsLoopback() || ip.IsPrivate() || ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() ||
		ip.IsInterfaceLocalMulticast() || ip.IsMulticast() || ip.IsUnspecified() || cgnat.Contains(ip))
}
