package oauth

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	josejwt "github.com/go-jose/go-jose/v4/jwt"

	"github.com/unsay/unsay/bridge/auth"
	"github.com/unsay/unsay/models"
	"github.com/unsay/unsay/store"
)

// KeySource is the resource server's view of this server's keys (an
// auth.KeySource): the public key by kid, reloaded from the store when
// another instance made one.
func (s *Server) KeySource() auth.KeySource { return s.keys }

// GrantActive is the resource server's per-request revocation check
// (auth.Config.GrantActive): nil while the grant is active, an error
// wrapping store.ErrGrantRevoked or store.ErrOAuthNotFound when it is not,
// and one wrapping auth.ErrUnavailable when the store cannot answer (the
// token is then neither accepted nor called invalid). One prepared
// primary-key read (store.OAuthGrantRevoked).
func (s *Server) GrantActive(ctx context.Context, grantID string) error {
	err := s.st.OAuthGrantRevoked(ctx, grantID)
	if err == nil || errors.Is(err, store.ErrGrantRevoked) || errors.Is(err, store.ErrOAuthNotFound) {
		return err
	}
	return fmt.Errorf("%w: %w", auth.ErrUnavailable, err) // the store, not the token
}

// MintInternal signs a token for this server's own use — the speech
// principal's, or one `unsay token` mints for an operator — with the
// current signing key: iss, sub, aud "{issuer}/mcp", exp now+ttl (at most
// InternalTokenMaxTTL), scope, patients, and the grant grantID (kind
// internal, made on first use), so `unsay grants revoke` ends it like any
// other. Errors: an empty subject or grant id, no or unknown scopes,
// invalid patient ids, a ttl outside (0, InternalTokenMaxTTL], the grant
// revoked (store.ErrGrantRevoked), a store error. The grant records no
// patient: the speech principal's grant outlives its tokens, whose
// patients change as patients are linked (MintOperator's records them).
func (s *Server) MintInternal(ctx context.Context, grantID, sub string, scopes []models.Scope, patients []string, ttl time.Duration) (string, error) {
	return s.mintInternal(ctx, grantID, sub, scopes, patients, ttl, false)
}

// MintOperator is MintInternal for a token `unsay token --db` mints for an
// operator, on a grant of its own: the grant records the token's patients
// (joined by ","; store.OAuthGrant.Patients), so `unsay grants list
// --patient ray` lists every live token for ray (finding U6). Errors as
// MintInternal's.
func (s *Server) MintOperator(ctx context.Context, grantID, sub string, scopes []models.Scope, patients []string, ttl time.Duration) (string, error) {
	return s.mintInternal(ctx, grantID, sub, scopes, patients, ttl, true)
}

func (s *Server) mintInternal(ctx context.Context, grantID, sub string, scopes []models.Scope, patients []string, ttl time.Duration, bind bool) (string, error) {
	if sub == "" || grantID == "" {
		return "", errors.New("oauth: an internal token needs a subject and a grant id")
	}
	if ttl <= 0 || ttl > InternalTokenMaxTTL {
		return "", fmt.Errorf("oauth: an internal token lives (0, %s]", InternalTokenMaxTTL)
	}
	if len(scopes) == 0 {
		return "", errors.New("oauth: an internal token needs a scope")
	}
	for _, sc := range scopes {
		if !sc.Valid() {
			return "", fmt.Errorf("oauth: unknown scope %q", sc)
		}
	}
	ps := []string{}
	for _, p := range patients {
		if !models.ValidID(p) {
			return "", fmt.Errorf("oauth: %q is not a patient id", p)
		}
		if !slices.Contains(ps, p) {
			ps = append(ps, p)
		}
	}
	grant := store.OAuthGrant{ID: grantID, ClientID: "unsay", Kind: store.GrantInternal, Subject: sub,
		Scopes: scopeStrings(scopes...), Resource: s.resource, Consent: "minted by the server for " + sub, CreatedAt: s.now()}
	if bind {
		grant.Patient = strings.Join(ps, ",")
	}
	g, err := s.st.EnsureOAuthGrant(ctx, grant)
	if err != nil {
		return "", err
	}
	if !g.Active() {
		return "", fmt.Errorf("oauth: grant %s: %w", grantID, store.ErrGrantRevoked)
	}
	key, err := s.keys.signing(ctx)
	if err != nil {
		return "", err
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: jose.JSONWebKey{Key: key.priv, KeyID: key.kid}},
		(&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		return "", err
	}
	now := s.now()
	claims := map[string]any{
		"iss": s.issuer, "sub": sub, "aud": []string{s.resource},
		"iat": now.Unix(), "exp": now.Add(ttl).Unix(), "jti": grantID + "." + randomToken(12),
		"scope": joinScopes(scopes), "patients": ps, "grant": grantID, "client_id": "unsay",
	}
	return josejwt.Signed(signer).Claims(claims).Serialize()
}

func joinScopes(scopes []models.Scope) string {
	out := ""
	for i, sc := range scopes {
		if i > 0 {
			out += " "
		}
		out += string(sc)
	}
	return out
}
