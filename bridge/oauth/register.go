package oauth

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"github.com/zitadel/oidc/v3/pkg/oidc"

	"github.com/unsay/unsay/models"
	"github.com/unsay/unsay/store"
)

// MaxRegistrationBytes caps a dynamic registration request: 16 KiB.
const MaxRegistrationBytes = 16 << 10

// handleRegister is RFC 7591 dynamic client registration (deprecated in
// MCP 2026-07-28 in favour of Client ID Metadata Documents, still used by
// many hosts). Open, but capped per client address (429 with Retry-After).
// A registered client may be granted through consent only care.read.user,
// whatever "scope" it asks for: the answer's "scope" says what it may
// have. token_endpoint_auth_method "none" makes a public client (PKCE);
// client_secret_basic (the default) or client_secret_post a confidential
// one, whose secret is in the answer and nowhere else (the store keeps its
// hash). Refusals are RFC 7591 §3.2.2 errors: invalid_redirect_uri,
// invalid_client_metadata (a client_name that is not plain text of at
// most MaxClientNameRunes characters among them: checkClientName).
func (s *Server) handleRegister(w http.ResponseWriter, r *http.Request) {
	if ok, retry := s.regLimit.allow(clientAddress(r)); !ok {
		w.Header().Set("Retry-After", strconv.Itoa(int(retry.Round(time.Second).Seconds())+1))
		registrationError(w, http.StatusTooManyRequests, "invalid_client_metadata", "too many registrations from this address; try later")
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxRegistrationBytes))
	if err != nil {
		registrationError(w, http.StatusRequestEntityTooLarge, "invalid_client_metadata", fmt.Sprintf("registration over %d bytes", MaxRegistrationBytes))
		return
	}
	var meta oauthex.ClientRegistrationMetadata
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&meta); err != nil {
		registrationError(w, http.StatusBadRequest, "invalid_client_metadata", "the body is not a JSON client metadata object")
		return
	}
	resp, secret, status, code, msg := s.register(r.Context(), meta, body)
	if status != http.StatusCreated {
		registrationError(w, status, code, msg)
		return
	}
	resp.ClientSecret = secret
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusCreated)
	_ = json.NewEncoder(w).Encode(resp)
}

func (s *Server) register(ctx context.Context, meta oauthex.ClientRegistrationMetadata, raw []byte) (resp *oauthex.ClientRegistrationResponse, secret string, status int, code, msg string) {
	if len(meta.RedirectURIs) == 0 || len(meta.RedirectURIs) > 10 {
		return nil, "", http.StatusBadRequest, "invalid_redirect_uri", "give 1–10 redirect_uris"
	}
	for _, u := range meta.RedirectURIs {
		if err := validRedirectURI(u); err != nil {
			return nil, "", http.StatusBadRequest, "invalid_redirect_uri", err.Error()
		}
	}
	method := meta.TokenEndpointAuthMethod
	if method == "" {
		method = string(oidc.AuthMethodBasic)
	}
	public := method == string(oidc.AuthMethodNone)
	if !public && method != string(oidc.AuthMethodBasic) && method != string(oidc.AuthMethodPost) {
		return nil, "", http.StatusBadRequest, "invalid_client_metadata", "token_endpoint_auth_method must be none, client_secret_basic or client_secret_post"
	}
	for _, rt := range meta.ResponseTypes {
		if rt != string(oidc.ResponseTypeCode) {
			return nil, "", http.StatusBadRequest, "invalid_client_metadata", "response_types may only be code"
		}
	}
	grants, err := clientGrants(meta.GrantTypes, public)
	if err != nil {
		return nil, "", http.StatusBadRequest, "invalid_client_metadata", err.Error()
	}
	name := strings.TrimSpace(meta.ClientName)
	if err := checkClientName(name); err != nil {
		return nil, "", http.StatusBadRequest, "invalid_client_metadata", err.Error()
	}
	if name == "" {
		name = "an app that registered itself (" + hostOf(meta.RedirectURIs[0]) + ")"
	}
	now := s.now()
	c := store.OAuthClient{ID: "dyn-" + randomToken(16), Kind: store.ClientDynamic, Name: name, RedirectURIs: meta.RedirectURIs,
		GrantTypes: grants, Metadata: raw, CreatedAt: now}
	if !public {
		secret = randomToken(32)
		c.SecretHash = store.HashSecret(secret)
	}
	if err := s.st.PutOAuthClient(ctx, c); err != nil {
		var ve *store.ValidationError
		if errors.As(err, &ve) {
			return nil, "", http.StatusBadRequest, "invalid_client_metadata", ve.Error()
		}
		s.log.Error("oauth: registration", "err", err)
		return nil, "", http.StatusInternalServerError, "server_error", "the registration could not be stored"
	}
	out := &oauthex.ClientRegistrationResponse{
		ClientRegistrationMetadata: oauthex.ClientRegistrationMetadata{
			RedirectURIs: meta.RedirectURIs, TokenEndpointAuthMethod: method, GrantTypes: grants,
			ResponseTypes: []string{string(oidc.ResponseTypeCode)}, ClientName: name,
			Scope: strings.Join(scopeStrings(consentScopes...), " "),
		},
		ClientID:         c.ID,
		ClientIDIssuedAt: now,
	}
	return out, secret, http.StatusCreated, "", ""
}

func registrationError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(oauthex.ClientRegistrationError{ErrorCode: code, ErrorDescription: msg})
}

// RegisterClient adds a client the operator registers (`unsay client add`):
// confidential (with a returned secret) unless public, with the given
// redirect URIs and grants. It is how Alexa account linking and an Alexa+
// add-on's client_credentials client are set up.
func RegisterClient(ctx context.Context, st *store.Store, name string, redirectURIs, grantTypes []string, public bool, now time.Time) (id, secret string, err error) {
	for _, u := range redirectURIs {
		if err := validRedirectURI(u); err != nil {
			return "", "", err
		}
	}
	grants, err := clientGrants(grantTypes, public)
	if err != nil {
		return "", "", err
	}
	if err := checkClientName(name); err != nil {
		return "", "", err
	}
	if slices.Contains(grants, string(oidc.GrantTypeCode)) && len(redirectURIs) == 0 {
		return "", "", errors.New("an authorization_code client needs at least one redirect URI")
	}
	c := store.OAuthClient{ID: "cli-" + randomToken(12), Kind: store.ClientRegistered, Name: name, RedirectURIs: redirectURIs,
		GrantTypes: grants, CreatedAt: now}
	if !public {
		secret = randomToken(32)
		c.SecretHash = store.HashSecret(secret)
	}
	if err := st.PutOAuthClient(ctx, c); err != nil {
		return "", "", err
	}
	return c.ID, secret, nil
}

// ApproveClient records a clinician's approval of scopes (only
// ApprovableScopes) for a client; see store.ApproveOAuthClient.
func ApproveClient(ctx context.Context, st *store.Store, id string, scopes []models.Scope, by string, now time.Time) error {
	if by == "" {
		return errors.New("an approval names the clinician who gives it")
	}
	out := make([]string, 0, len(scopes))
	for _, sc := range scopes {
		if !slices.Contains(approvableScopes, sc) {
			return fmt.Errorf("scope %q cannot be approved for a client (approvable: %s)", sc, strings.Join(scopeStrings(approvableScopes...), ", "))
		}
		out = append(out, string(sc))
	}
	return st.ApproveOAuthClient(ctx, id, out, by, now)
}
