package app

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/unsay/unsay/bridge/auth"
	"github.com/unsay/unsay/bridge/oauth"
	"github.com/unsay/unsay/models"
	"github.com/unsay/unsay/skill"
)

// SpeechGrant is the internal grant the speech principal's tokens carry
// when the embedded authorization server signs them (`unsay grants list`
// shows it; revoking it silences the skill until restart).
const SpeechGrant = "internal:unsay-speech"

// isExposed reports whether the server is reachable off this machine: a
// listener or a public URL that is not loopback.
func isExposed(cfg Config) bool {
	host, _, err := net.SplitHostPort(cfg.Addr)
	if err != nil || !isLoopbackHost(host) {
		return true
	}
	if cfg.PublicURL != "" {
		if u, err := url.Parse(cfg.PublicURL); err != nil || !isLoopbackHost(u.Hostname()) {
			return true
		}
	}
	return false
}

// buildTokens decides how bearer tokens are verified (P-13) and, unless an
// external authorization server or a static public key is configured,
// builds the embedded one (bridge/oauth) on the public URL:
//
//   - --token-public-key: that key only; no authorization server here;
//   - --authorization-server ISSUER with --token-jwks-url: that server's
//     JWKS only (cached, refetched on an unknown kid); the protected-resource
//     metadata names it;
//   - otherwise the embedded server: its JWKS and a per-request grant check;
//     the metadata names this server. HS256 development tokens are accepted
//     beside it only on loopback.
//
// HS256 is never accepted off loopback, so UNSAY_TOKEN_SECRET is not
// required there.
func (a *App) buildTokens(ctx context.Context) error {
	cfg := a.cfg
	exposed := isExposed(cfg)
	tokenSecret := cfg.TokenSecret
	if len(tokenSecret) == 0 && !exposed {
		tokenSecret = []byte(auth.DevTokenSecret)
	}
	// tokenCfg mints development tokens (TokenConfig): tests, the demo, bench.
	a.tokenCfg = auth.Config{Secret: tokenSecret, PublicURL: a.publicURL, Clock: cfg.Clock}
	vc := auth.Config{PublicURL: a.publicURL, Clock: cfg.Clock}
	switch {
	case len(cfg.TokenPublicKeyPEM) > 0:
		if cfg.TokenJWKSURL != "" {
			return errors.New("--token-public-key and --token-jwks-url exclude each other")
		}
		vc.PublicKeyPEM = cfg.TokenPublicKeyPEM
		a.authServers = slices.Clone(cfg.AuthorizationServers)
	case cfg.TokenJWKSURL != "":
		if len(cfg.AuthorizationServers) != 1 {
			return errors.New("--token-jwks-url needs exactly one --authorization-server: the issuer its tokens carry")
		}
		src, err := auth.NewRemoteJWKS(auth.RemoteJWKSConfig{URL: cfg.TokenJWKSURL, Clock: cfg.Clock})
		if err != nil {
			return fmt.Errorf("tokens: %w", err)
		}
		vc.JWKS, vc.Issuer, vc.JWKSDescription = src, cfg.AuthorizationServers[0], "the JWKS at "+cfg.TokenJWKSURL
		a.authServers = slices.Clone(cfg.AuthorizationServers)
	case len(cfg.AuthorizationServers) > 0:
		return errors.New("--authorization-server needs --token-jwks-url (its key set) or --token-public-key; without them the embedded authorization server is used")
	default:
		as, err := oauth.New(ctx, oauth.Config{Store: a.Store, Issuer: a.publicURL, Clock: cfg.Clock, Logger: a.log.With("part", "oauth"),
			MetadataClient: cfg.OAuthMetadataClient})
		if err != nil {
			return fmt.Errorf("embedded authorization server (give --public-url https://… or --authorization-server with --token-jwks-url): %w", err)
		}
		a.AS = as
		vc.JWKS, vc.Issuer, vc.GrantActive = as.KeySource(), as.Issuer(), as.GrantActive
		vc.JWKSDescription = "the embedded authorization server's JWKS (" + as.JWKSURL() + ")"
		vc.HS256WithJWKS, vc.Secret = !exposed, tokenSecret
		a.authServers = []string{as.Issuer()}
		if !exposed && len(cfg.TokenSecret) == 0 {
			a.notes = append(a.notes, "DEV DEFAULT UNSAY_TOKEN_SECRET")
		}
	}
	var err error
	if a.verifier, err = auth.NewVerifier(vc); err != nil {
		return fmt.Errorf("tokens: %w", err)
	}
	if exposed && len(cfg.TokenSecret) > 0 {
		a.notes = append(a.notes, "UNSAY_TOKEN_SECRET ignored: HS256 is off on a public URL")
	}
	return nil
}

// mintSpeechToken is the speech principal's token: care.read.user and
// nothing else (P-18), bound to the followed patients — signed by the
// embedded authorization server when there is one, else HS256 on loopback.
//
// Tokens are cached per patient set until an hour before they expire: the
// speech principal asks for one before every connection, and a mint that
// is as quick as a map lookup keeps a reconnect racing AddPatient from
// storing a token for the older, smaller patient set after the newer one
// (bridge/speech's refreshToken stores whatever finishes last).
func (a *App) mintSpeechToken(ctx context.Context, patients []string) (string, error) {
	if a.AS != nil {
		key := strings.Join(patients, ",")
		a.speechTokMu.Lock()
		defer a.speechTokMu.Unlock()
		if c, ok := a.speechToks[key]; ok && a.now().Before(c.until) {
			return c.token, nil
		}
		tok, err := a.AS.MintInternal(ctx, SpeechGrant, "unsay-speech", []models.Scope{models.ScopeReadUser}, patients, SpeechTokenTTL)
		if err != nil {
			return "", err
		}
		if a.speechToks == nil {
			a.speechToks = map[string]cachedToken{}
		}
		a.speechToks[key] = cachedToken{token: tok, until: a.now().Add(SpeechTokenTTL - time.Hour)}
		return tok, nil
	}
	if !a.verifier.HS256() {
		return "", errors.New("the speech principal needs --speech-token (a care.read.user token of the authorization server in force)")
	}
	if len(patients) == 0 {
		patients = []string{"none"} // an HS256 token must be bound to something; "none" holds no facts
	}
	tok, err := auth.Mint(a.tokenCfg, "unsay-speech", []models.Scope{models.ScopeReadUser}, patients, SpeechTokenTTL)
	if err == nil && len(tok) > auth.MaxTokenBytes {
		// Refused by this very server: say so, rather than retry as if
		// the server were merely unreachable.
		return "", fmt.Errorf("the speech principal's token for its %d patients is %d bytes, over the %d-byte cap on bearer tokens: this server cannot follow that many patients", len(patients), len(tok), auth.MaxTokenBytes)
	}
	return tok, err
}

// cachedToken is a minted speech token and when to stop reusing it.
type cachedToken struct {
	token string
	until time.Time
}

// AuthorizationServers are the issuers the protected-resource metadata names.
func (a *App) AuthorizationServers() []string { return slices.Clone(a.authServers) }

// PatientForAccessToken implements skill.AccountLinks: the patient of an
// Alexa account-linking access token, verified like any bearer token here
// (signature, expiry, audience, grant not revoked). It must hold
// care.read.user and be bound to exactly one patient; the speech principal
// then follows that patient. Errors: skill.ErrAccessTokenInvalid, or
// auth.ErrUnavailable when the grant cannot be checked now.
func (l *linkAdapter) PatientForAccessToken(ctx context.Context, accessToken string) (string, error) {
	ti, err := l.verifier.Verify(ctx, accessToken, nil)
	if errors.Is(err, auth.ErrUnavailable) {
		return "", err // the skill says it cannot reach the notes, not "link again"
	}
	if err != nil {
		return "", fmt.Errorf("%w: %w", skill.ErrAccessTokenInvalid, err)
	}
	p, _ := auth.PrincipalOf(ti)
	if !p.Can(models.ScopeReadUser) || len(p.Patients) != 1 || p.Patients[0] == models.AllPatients {
		return "", fmt.Errorf("%w: the token must hold %s for exactly one patient", skill.ErrAccessTokenInvalid, models.ScopeReadUser)
	}
	patient := p.Patients[0]
	if !slices.Contains(l.speech.State().Patients, patient) {
		actx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		if err := l.speech.AddPatient(actx, patient); err != nil {
			l.log.Warn("speech principal could not follow the account-linked patient", "patient", patient, "err", err)
		}
	}
	return patient, nil
}
