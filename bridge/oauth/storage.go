package oauth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"

	"github.com/unsay/unsay/models"
	"github.com/unsay/unsay/store"
)

// storage implements op.Storage (and op.ClientCredentialsStorage,
// op.CanGetPrivateClaimsFromRequest) over the store.
type storage struct{ s *Server }

var (
	_ op.Storage                        = (*storage)(nil)
	_ op.ClientCredentialsStorage       = (*storage)(nil)
	_ op.CanGetPrivateClaimsFromRequest = (*storage)(nil)
)

// authRequestData is the validated authorization request, stored as JSON.
type authRequestData struct {
	RedirectURI         string   `json:"redirect_uri"`
	State               string   `json:"state,omitempty"`
	Nonce               string   `json:"nonce,omitempty"`
	Scopes              []string `json:"scopes"`
	ResponseMode        string   `json:"response_mode,omitempty"`
	CodeChallenge       string   `json:"code_challenge"`
	CodeChallengeMethod string   `json:"code_challenge_method"`
	Resource            string   `json:"resource"`
	Refresh             bool     `json:"refresh"` // the client may refresh: offline_access is implied
}

// authRequest is a pending request (op.AuthRequest); grant is loaded once
// the person confirmed.
type authRequest struct {
	row   store.OAuthAuthRequest
	d     authRequestData
	grant *store.OAuthGrant
}

func (a *authRequest) GetID() string         { return a.row.ID }
func (a *authRequest) GetACR() string        { return "" }
func (a *authRequest) GetAMR() []string      { return nil }
func (a *authRequest) GetAudience() []string { return []string{a.d.Resource} }
func (a *authRequest) GetAuthTime() time.Time {
	if a.grant != nil {
		return a.grant.CreatedAt
	}
	return a.row.CreatedAt
}
func (a *authRequest) GetClientID() string { return a.row.ClientID }
func (a *authRequest) GetCodeChallenge() *oidc.CodeChallenge {
	return &oidc.CodeChallenge{Challenge: a.d.CodeChallenge, Method: oidc.CodeChallengeMethod(a.d.CodeChallengeMethod)}
}
func (a *authRequest) GetNonce() string                   { return a.d.Nonce }
func (a *authRequest) GetRedirectURI() string             { return a.d.RedirectURI }
func (a *authRequest) GetResponseType() oidc.ResponseType { return oidc.ResponseTypeCode }
func (a *authRequest) GetResponseMode() oidc.ResponseMode { return oidc.ResponseMode(a.d.ResponseMode) }
func (a *authRequest) GetState() string                   { return a.d.State }
func (a *authRequest) Done() bool                         { return a.grant != nil }
func (a *authRequest) GetSubject() string {
	if a.grant != nil {
		return a.grant.Subject
	}
	return ""
}

// GetScopes: the requested care scopes, and offline_access when the client
// may refresh (op issues a refresh token only then; clients are not asked
// to request it).
func (a *authRequest) GetScopes() []string {
	out := slices.Clone(a.d.Scopes)
	if a.d.Refresh {
		out = append(out, oidc.ScopeOfflineAccess)
	}
	return out
}

// refreshRequest is a refresh_token grant's request (op.RefreshTokenRequest).
type refreshRequest struct {
	grant  store.OAuthGrant
	scopes []string
}

func (r *refreshRequest) GetAMR() []string            { return nil }
func (r *refreshRequest) GetAudience() []string       { return []string{r.grant.Resource} }
func (r *refreshRequest) GetAuthTime() time.Time      { return r.grant.CreatedAt }
func (r *refreshRequest) GetClientID() string         { return r.grant.ClientID }
func (r *refreshRequest) GetScopes() []string         { return r.scopes }
func (r *refreshRequest) GetSubject() string          { return r.grant.Subject }
func (r *refreshRequest) SetCurrentScopes(s []string) { r.scopes = s }

// ccRequest is a client_credentials grant's request (op.TokenRequest).
type ccRequest struct {
	grant  store.OAuthGrant
	scopes []string
}

func (r *ccRequest) GetSubject() string    { return r.grant.Subject }
func (r *ccRequest) GetAudience() []string { return []string{r.grant.Resource} }
func (r *ccRequest) GetScopes() []string   { return r.scopes }

// ---- clients ----

func (st *storage) client(ctx context.Context, id string) (*client, error) {
	c, err := st.s.clients.get(ctx, id)
	if err != nil {
		return nil, err
	}
	return &client{c: c, login: func(reqID string) string { return st.s.issuer + PathConsent + "?id=" + reqID }}, nil
}

func (st *storage) GetClientByClientID(ctx context.Context, id string) (op.Client, error) {
	c, err := st.client(ctx, id)
	if err != nil {
		if errors.Is(err, ErrUnknownClient) {
			return nil, err
		}
		return nil, oidc.ErrServerError().WithParent(err)
	}
	return c, nil
}

func (st *storage) AuthorizeClientIDSecret(ctx context.Context, id, secret string) error {
	c, err := st.client(ctx, id)
	if err != nil {
		return err
	}
	if !c.c.CheckSecret(secret) {
		return errors.New("oauth: wrong client secret")
	}
	return nil
}

func (st *storage) ClientCredentials(ctx context.Context, id, secret string) (op.Client, error) {
	c, err := st.client(ctx, id)
	if err != nil {
		return nil, err
	}
	if c.c.Public() || !c.c.CheckSecret(secret) {
		return nil, errors.New("oauth: wrong client secret")
	}
	return c, nil
}

// ClientCredentialsTokenRequest: a client's own token, bound to no patient
// (it may list tools, and reads no patient). The scopes asked for must be
// ones the client may have (care.read.user, and what a clinician approved);
// none asked means all of them. Its grant is "cc:{client}", made once: if
// it is revoked, the client's client_credentials tokens stay refused.
func (st *storage) ClientCredentialsTokenRequest(ctx context.Context, id string, scopes []string) (op.TokenRequest, error) {
	c, err := st.client(ctx, id)
	if err != nil {
		return nil, err
	}
	resource, err := st.s.resolveResource(ctx)
	if err != nil {
		return nil, err
	}
	allowed := c.allowedScopes()
	var want []string
	for _, sc := range scopes {
		if !slices.Contains(allowed, models.Scope(sc)) {
			return nil, oidc.ErrInvalidScope().WithDescription("scope %q is not available to this client", sc)
		}
		if !slices.Contains(want, sc) {
			want = append(want, sc)
		}
	}
	if len(want) == 0 {
		want = scopeStrings(allowed...)
	}
	g, err := st.s.st.EnsureOAuthGrant(ctx, store.OAuthGrant{ID: "cc:" + id, ClientID: id, Kind: store.GrantClientCredentials,
		Subject: "client:" + id, Scopes: scopeStrings(allowed...), Resource: resource, Consent: "client credentials", CreatedAt: st.s.now()})
	if err != nil {
		return nil, oidc.ErrServerError().WithParent(err)
	}
	if !g.Active() {
		return nil, oidc.ErrAccessDenied().WithDescription("this client's access was revoked")
	}
	if g.Resource != resource {
		return nil, oidc.ErrInvalidTarget().WithDescription("the resource differs from the one granted")
	}
	return &ccRequest{grant: g, scopes: want}, nil
}

// ---- authorization requests ----

// CreateAuthRequest stores an authorization request op validated (client,
// redirect_uri, response_type), after the rules op leaves open: PKCE with
// S256, at least one care scope this client may be granted (others are
// dropped: RFC 6749 §3.3 lets the server narrow), a resource naming this
// MCP server, no prompt=none (consent always needs the person).
func (st *storage) CreateAuthRequest(ctx context.Context, req *oidc.AuthRequest, _ string) (op.AuthRequest, error) {
	if req.CodeChallenge == "" || req.CodeChallengeMethod != oidc.CodeChallengeMethodS256 {
		return nil, oidc.ErrInvalidRequest().WithDescription("PKCE with code_challenge_method S256 is required")
	}
	if slices.Contains(req.Prompt, oidc.PromptNone) {
		return nil, oidc.ErrInteractionRequired().WithDescription("linking needs the person's consent")
	}
	c, err := st.client(ctx, req.ClientID)
	if err != nil {
		return nil, oidc.ErrInvalidRequest().WithDescription("unknown client").WithParent(err)
	}
	allowed := c.allowedScopes()
	var scopes []string
	for _, sc := range req.Scopes {
		if slices.Contains(allowed, models.Scope(sc)) && !slices.Contains(scopes, sc) {
			scopes = append(scopes, sc)
		}
	}
	if len(scopes) == 0 {
		return nil, oidc.ErrInvalidScope().WithDescription("ask for %s: the only scope this page can grant", models.ScopeReadUser)
	}
	resource, err := st.s.resolveResource(ctx)
	if err != nil {
		return nil, err
	}
	d := authRequestData{RedirectURI: req.RedirectURI, State: req.State, Nonce: req.Nonce, Scopes: scopes,
		ResponseMode: string(req.ResponseMode), CodeChallenge: req.CodeChallenge, CodeChallengeMethod: string(req.CodeChallengeMethod),
		Resource: resource, Refresh: c.hasGrant(oidc.GrantTypeRefreshToken)}
	body, err := json.Marshal(d)
	if err != nil {
		return nil, err
	}
	now := st.s.now()
	row := store.OAuthAuthRequest{ID: randomToken(18), ClientID: c.c.ID, Request: body, CSRF: randomToken(18),
		CreatedAt: now, ExpiresAt: now.Add(st.s.cfg.AuthRequestTTL)}
	if err := st.s.st.CreateOAuthAuthRequest(ctx, row); err != nil {
		return nil, oidc.ErrServerError().WithParent(err)
	}
	return &authRequest{row: row, d: d}, nil
}

func (st *storage) loadAuthRequest(ctx context.Context, row store.OAuthAuthRequest) (*authRequest, error) {
	a := &authRequest{row: row}
	if err := json.Unmarshal(row.Request, &a.d); err != nil {
		return nil, fmt.Errorf("oauth: stored authorization request: %w", err)
	}
	if row.GrantID != "" {
		g, err := st.s.st.OAuthGrant(ctx, row.GrantID)
		if err != nil {
			return nil, err
		}
		a.grant = &g
	}
	return a, nil
}

func (st *storage) authRequestByID(ctx context.Context, id string) (*authRequest, error) {
	row, err := st.s.st.OAuthAuthRequest(ctx, id, st.s.now())
	if err != nil {
		return nil, err
	}
	return st.loadAuthRequest(ctx, row)
}

func (st *storage) AuthRequestByID(ctx context.Context, id string) (op.AuthRequest, error) {
	return st.authRequestByID(ctx, id)
}

// AuthRequestByCode finds the pending request of a code. A code already
// exchanged is refused (op answers invalid_grant) and the store revokes the
// grant its exchange produced: the tokens already issued from the code stop
// working (OAuth 2.1 §4.1.3, RFC 6749 §4.1.2).
func (st *storage) AuthRequestByCode(ctx context.Context, code string) (op.AuthRequest, error) {
	row, err := st.s.st.OAuthAuthRequestByCode(ctx, store.HashSecret(code), st.s.now())
	if err != nil {
		st.securityEvent(err)
		return nil, err
	}
	return st.loadAuthRequest(ctx, row)
}

// securityEvent logs, at Warn, a one-time credential presented again (the
// store revoked its grant; the grant row keeps who revoked it and when:
// `unsay grants list --all`). Other errors are not logged here.
func (st *storage) securityEvent(err error) {
	switch {
	case errors.Is(err, store.ErrAuthCodeReused):
		st.s.log.Warn("oauth: an authorization code was used a second time; the grant it produced is revoked", "err", err)
	case errors.Is(err, store.ErrRefreshTokenReused):
		st.s.log.Warn("oauth: a rotated refresh token was presented again; its grant is revoked", "err", err)
	}
}

func (st *storage) SaveAuthCode(ctx context.Context, id, code string) error {
	return st.s.st.SetOAuthAuthRequestCode(ctx, id, store.HashSecret(code))
}

// exchangeCode is the code's one use, before any token of it is made
// (store.ExchangeOAuthCode: of two concurrent exchanges one wins, and the
// other revokes the grant as a second use), storing refreshHash when it is
// not nil.
func (st *storage) exchangeCode(ctx context.Context, a *authRequest, refreshHash []byte, refreshExpires time.Time) error {
	_, err := st.s.st.ExchangeOAuthCode(ctx, a.row.ID, a.row.CodeHash, refreshHash, st.s.now(), refreshExpires)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, store.ErrAuthCodeReused):
		st.securityEvent(err)
		return oidc.ErrInvalidGrant().WithDescription("authorization code already used; the grant is revoked").WithParent(err)
	case errors.Is(err, store.ErrGrantRevoked):
		return oidc.ErrInvalidGrant().WithDescription("the grant was revoked").WithParent(err)
	case errors.Is(err, store.ErrOAuthNotFound):
		return oidc.ErrInvalidGrant().WithDescription("invalid code").WithParent(err)
	}
	return oidc.ErrServerError().WithParent(err)
}

// DeleteAuthRequest: op's call after the tokens are made. The exchange
// (exchangeCode) already ended the request, so a request that is gone is
// no error here.
func (st *storage) DeleteAuthRequest(ctx context.Context, id string) error {
	if err := st.s.st.DeleteOAuthAuthRequest(ctx, id); err != nil && !errors.Is(err, store.ErrOAuthNotFound) {
		return err
	}
	return nil
}

// ---- tokens ----

// grantOf returns the grant behind a token request, refusing a revoked one
// and a "resource" that differs from the grant's.
func (st *storage) grantOf(ctx context.Context, req op.TokenRequest) (store.OAuthGrant, error) {
	var g store.OAuthGrant
	switch r := req.(type) {
	case *authRequest:
		if r.grant == nil {
			return g, oidc.ErrInvalidGrant().WithDescription("the authorization was not confirmed")
		}
		g = *r.grant
	case *refreshRequest:
		g = r.grant
	case *ccRequest:
		g = r.grant
	default:
		return g, oidc.ErrUnsupportedGrantType()
	}
	if err := st.s.st.OAuthGrantRevoked(ctx, g.ID); err != nil {
		return g, oidc.ErrInvalidGrant().WithDescription("the grant was revoked").WithParent(err)
	}
	if err := st.s.checkSameResource(ctx, g.Resource); err != nil {
		return g, err
	}
	return g, nil
}

func (st *storage) accessTokenID(g store.OAuthGrant) (string, time.Time) {
	return g.ID + "." + randomToken(12), st.s.now().Add(st.s.cfg.AccessTokenTTL)
}

// CreateAccessToken makes an access token's id; for a code exchange it
// first uses the code up (exchangeCode).
func (st *storage) CreateAccessToken(ctx context.Context, req op.TokenRequest) (string, time.Time, error) {
	g, err := st.grantOf(ctx, req)
	if err != nil {
		return "", time.Time{}, err
	}
	if a, ok := req.(*authRequest); ok {
		if err := st.exchangeCode(ctx, a, nil, time.Time{}); err != nil {
			return "", time.Time{}, err
		}
	}
	id, exp := st.accessTokenID(g)
	return id, exp, nil
}

// CreateAccessAndRefreshTokens issues a refresh token with the code
// exchange (in the transaction that uses the code up: exchangeCode), and
// rotates it on each refresh: the presented token is marked used, and
// presenting it again revokes the whole grant.
func (st *storage) CreateAccessAndRefreshTokens(ctx context.Context, req op.TokenRequest, current string) (string, string, time.Time, error) {
	g, err := st.grantOf(ctx, req)
	if err != nil {
		return "", "", time.Time{}, err
	}
	now := st.s.now()
	next := randomToken(32)
	expires := now.Add(st.s.cfg.RefreshTokenTTL)
	switch a, isCode := req.(*authRequest); {
	case isCode:
		if err := st.exchangeCode(ctx, a, store.HashSecret(next), expires); err != nil {
			return "", "", time.Time{}, err
		}
	case current == "":
		err = st.s.st.CreateOAuthRefreshToken(ctx, store.HashSecret(next), g.ID, now, expires)
	default:
		_, err = st.s.st.RotateOAuthRefreshToken(ctx, store.HashSecret(current), store.HashSecret(next), now, expires)
	}
	if err != nil {
		st.securityEvent(err)
		return "", "", time.Time{}, refreshError(err)
	}
	id, exp := st.accessTokenID(g)
	return id, next, exp, nil
}

func refreshError(err error) error {
	switch {
	case errors.Is(err, store.ErrRefreshTokenReused):
		return oidc.ErrInvalidGrant().WithDescription("refresh token already used; the grant is revoked").WithParent(err)
	case errors.Is(err, store.ErrGrantRevoked):
		return oidc.ErrInvalidGrant().WithDescription("the grant was revoked").WithParent(err)
	case errors.Is(err, store.ErrOAuthNotFound):
		return oidc.ErrInvalidGrant().WithDescription("unknown or expired refresh token").WithParent(err)
	}
	return oidc.ErrServerError().WithParent(err)
}

func (st *storage) TokenRequestByRefreshToken(ctx context.Context, rt string) (op.RefreshTokenRequest, error) {
	g, err := st.s.st.OAuthRefreshTokenGrant(ctx, store.HashSecret(rt), st.s.now())
	if err != nil {
		st.securityEvent(err)
		return nil, refreshError(err)
	}
	scopes := slices.Clone(g.Scopes)
	if g.Kind == store.GrantAuthorizationCode {
		scopes = append(scopes, oidc.ScopeOfflineAccess)
	}
	return &refreshRequest{grant: g, scopes: scopes}, nil
}

// GetPrivateClaimsFromRequest gives every access token the claims the
// resource server reads: "scope" (the grant's scopes the client may still
// have — a withdrawn approval cuts the next token), "patients" (the grant's
// patient, or none) and "grant".
func (st *storage) GetPrivateClaimsFromRequest(ctx context.Context, req op.TokenRequest, _ []string) (map[string]any, error) {
	g, err := st.grantOf(ctx, req)
	if err != nil {
		return nil, err
	}
	c, err := st.client(ctx, g.ClientID)
	if err != nil {
		return nil, oidc.ErrInvalidClient().WithParent(err)
	}
	allowed := c.allowedScopes()
	var scopes []string
	for _, sc := range req.GetScopes() {
		if slices.Contains(g.Scopes, sc) && slices.Contains(allowed, models.Scope(sc)) && !slices.Contains(scopes, sc) {
			scopes = append(scopes, sc)
		}
	}
	if len(scopes) == 0 {
		return nil, oidc.ErrInvalidScope().WithDescription("no scope of this grant is still available to the client")
	}
	patients := []string{}
	if g.Patient != "" {
		patients = []string{g.Patient}
	}
	return map[string]any{"scope": strings.Join(scopes, " "), "patients": patients, "grant": g.ID}, nil
}

func (st *storage) GetPrivateClaimsFromScopes(context.Context, string, string, []string) (map[string]any, error) {
	return nil, errors.New("oauth: claims come from the token request")
}

func (st *storage) TerminateSession(context.Context, string, string) error { return nil }

// RevokeToken (RFC 7009) revokes the whole grant the token belongs to: an
// access token by its id ("{grant}.{random}"), a refresh token by the id
// GetRefreshTokenInfo gave it ("{grant}.refresh"), or by its hash.
// A token of another client, or an unknown one, is not an error (§2.2).
func (st *storage) RevokeToken(ctx context.Context, tokenOrID, userID, clientID string) *oidc.Error {
	var g store.OAuthGrant
	var err error
	if userID == "" {
		g, err = st.s.st.OAuthRefreshTokenGrant(ctx, store.HashSecret(tokenOrID), st.s.now())
		st.securityEvent(err)
	} else {
		grantID, _, _ := strings.Cut(tokenOrID, ".")
		g, err = st.s.st.OAuthGrant(ctx, grantID)
	}
	if err != nil || g.ClientID != clientID {
		return nil
	}
	if err := st.s.st.RevokeOAuthGrant(ctx, g.ID, "client "+clientID+" (RFC 7009)", st.s.now()); err != nil {
		return oidc.ErrServerError().WithParent(err)
	}
	return nil
}

func (st *storage) GetRefreshTokenInfo(ctx context.Context, _ string, token string) (string, string, error) {
	g, err := st.s.st.OAuthRefreshTokenGrant(ctx, store.HashSecret(token), st.s.now())
	if err != nil {
		st.securityEvent(err)
		return "", "", op.ErrInvalidRefreshToken
	}
	// op hands this id back to RevokeToken, which revokes the grant before the ".".
	return g.Subject, g.ID + ".refresh", nil
}

func (st *storage) SigningKey(ctx context.Context) (op.SigningKey, error) {
	return st.s.keys.signing(ctx)
}

func (st *storage) SignatureAlgorithms(context.Context) ([]jose.SignatureAlgorithm, error) {
	return []jose.SignatureAlgorithm{jose.ES256}, nil
}

func (st *storage) KeySet(ctx context.Context) ([]op.Key, error) {
	return st.s.keys.published(ctx), nil
}

func (st *storage) SetUserinfoFromScopes(context.Context, *oidc.UserInfo, string, string, []string) error {
	return nil
}

func (st *storage) SetUserinfoFromToken(context.Context, *oidc.UserInfo, string, string, string) error {
	return errors.New("oauth: no userinfo endpoint")
}

func (st *storage) SetIntrospectionFromToken(context.Context, *oidc.IntrospectionResponse, string, string, string) error {
	return errors.New("oauth: no introspection endpoint")
}

func (st *storage) GetKeyByIDAndClientID(context.Context, string, string) (*jose.JSONWebKey, error) {
	return nil, errors.New("oauth: JWT client authentication is not supported")
}

func (st *storage) ValidateJWTProfileScopes(context.Context, string, []string) ([]string, error) {
	return nil, errors.New("oauth: the JWT profile grant is not supported")
}

func (st *storage) Health(ctx context.Context) error { return nil }
