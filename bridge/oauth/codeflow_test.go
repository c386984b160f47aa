package oauth

import (
	"bytes"
	"errors"
	"html"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"

	"golang.org/x/oauth2"

	"github.com/unsay/unsay/models"
	"github.com/unsay/unsay/store"
)

// logBuffer is a log sink safe for the server's goroutines.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// codeFlow runs /authorize and the consent page for a new public client
// and returns its config, the code and its verifier.
func (f *fixture) codeFlow() (*oauth2.Config, string, string) {
	f.t.Helper()
	conf := f.config(f.publicClient(), "")
	v := oauth2.GenerateVerifier()
	back := f.consent(conf.AuthCodeURL("s", oauth2.S256ChallengeOption(v)), f.linkCode("ray"))
	return conf, back.Query().Get("code"), v
}

func invalidGrant(err error) bool {
	var re *oauth2.RetrieveError
	return errors.As(err, &re) && re.ErrorCode == "invalid_grant"
}

// TestAuthorizationCode_ASecondUseRevokesTheTokensTheFirstProduced: OAuth
// 2.1 §4.1.3 / RFC 6749 §4.1.2. The same code presented again is refused
// with invalid_grant, and the access and refresh tokens its first exchange
// produced stop working at once; the revocation is logged at Warn and kept
// on the grant (revoked by "authorization code reuse").
func TestAuthorizationCode_ASecondUseRevokesTheTokensTheFirstProduced(t *testing.T) {
	logs := &logBuffer{}
	f := newFixture(t, func(c *Config) { c.Logger = slog.New(slog.NewTextHandler(logs, nil)) })
	conf, code, v := f.codeFlow()
	tok, err := conf.Exchange(t.Context(), code, oauth2.VerifierOption(v))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.principal(tok.AccessToken); err != nil {
		t.Fatalf("access token of the first exchange: %v", err)
	}
	if _, err := conf.Exchange(t.Context(), code, oauth2.VerifierOption(v)); !invalidGrant(err) {
		t.Fatalf("second exchange of one code: %v, want invalid_grant", err)
	}
	if _, err := f.principal(tok.AccessToken); err == nil {
		t.Fatal("the access token of a reused code still works")
	}
	if _, err := conf.TokenSource(t.Context(), &oauth2.Token{RefreshToken: tok.RefreshToken}).Token(); !invalidGrant(err) {
		t.Fatalf("refresh with the refresh token of a reused code: %v, want invalid_grant", err)
	}
	gs, err := f.st.OAuthGrants(t.Context(), store.OAuthGrantFilter{Patient: "ray"})
	if err != nil || len(gs) != 1 || gs[0].Active() || gs[0].RevokedBy != store.RevokedByCodeReuse {
		t.Fatalf("grants %+v, %v: want the one grant revoked by %q", gs, err, store.RevokedByCodeReuse)
	}
	if l := logs.String(); !strings.Contains(l, "level=WARN") || !strings.Contains(l, "authorization code was used a second time") || !strings.Contains(l, gs[0].ID) {
		t.Fatalf("log %q: want a WARN line naming grant %s", l, gs[0].ID)
	}
}

// TestAuthorizationCode_UsedOnceItsTokensKeepWorkingAndAnUnknownCodeRevokesNothing:
// the twin. A code exchanged once keeps its tokens (the access token
// verifies, the refresh token refreshes), also after a code that was never
// issued and a wrong verifier for another code were presented.
func TestAuthorizationCode_UsedOnceItsTokensKeepWorkingAndAnUnknownCodeRevokesNothing(t *testing.T) {
	f := newFixture(t, nil)
	conf, code, v := f.codeFlow()
	tok, err := conf.Exchange(t.Context(), code, oauth2.VerifierOption(v))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conf.Exchange(t.Context(), "never-issued-"+code[:8], oauth2.VerifierOption(v)); !invalidGrant(err) {
		t.Fatalf("a code never issued: %v, want invalid_grant", err)
	}
	conf2, code2, _ := f.codeFlow()
	if _, err := conf2.Exchange(t.Context(), code2, oauth2.VerifierOption(oauth2.GenerateVerifier())); err == nil {
		t.Fatal("a code was exchanged with another verifier")
	}
	if _, err := f.principal(tok.AccessToken); err != nil {
		t.Fatalf("the access token of a code used once: %v", err)
	}
	next, err := conf.TokenSource(t.Context(), &oauth2.Token{RefreshToken: tok.RefreshToken}).Token()
	if err != nil {
		t.Fatalf("refresh of a code used once: %v", err)
	}
	if _, err := f.principal(next.AccessToken); err != nil {
		t.Fatalf("refreshed access token: %v", err)
	}
	gs, _ := f.st.OAuthGrants(t.Context(), store.OAuthGrantFilter{Patient: "ray", ActiveOnly: true})
	if len(gs) != 2 {
		t.Fatalf("active grants %+v: want both (nothing revoked)", gs)
	}
}

// TestAuthorizationCode_TwoSimultaneousExchangesDoNotBothSucceed: two
// clients redeem one code at the same moment. At most one gets tokens,
// and whatever it got is refused afterwards (the other attempt was a
// second use of the code).
func TestAuthorizationCode_TwoSimultaneousExchangesDoNotBothSucceed(t *testing.T) {
	f := newFixture(t, nil)
	conf, code, v := f.codeFlow()
	const n = 2
	toks := make([]*oauth2.Token, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			toks[i], errs[i] = conf.Exchange(t.Context(), code, oauth2.VerifierOption(v))
		}()
	}
	close(start)
	wg.Wait()
	wins := 0
	for i := range n {
		if errs[i] == nil {
			wins++
			if _, err := f.principal(toks[i].AccessToken); err == nil {
				t.Error("the winner's access token works after a simultaneous second use of its code")
			}
		} else if !invalidGrant(errs[i]) {
			t.Errorf("exchange %d: %v, want invalid_grant", i, errs[i])
		}
	}
	if wins > 1 {
		t.Fatalf("%d simultaneous exchanges of one code succeeded", wins)
	}
	if gs, _ := f.st.OAuthGrants(t.Context(), store.OAuthGrantFilter{Patient: "ray", ActiveOnly: true}); len(gs) != 0 {
		t.Fatalf("active grants after a code was redeemed twice: %+v", gs)
	}
}

// TestAuthorize_WithoutScopeDefaultsToTheSpeakableScope: an MCP host that
// leaves "scope" out (or sends it empty) was refused invalid_request
// ("The scope of your request is missing"), although care.read.user is
// the only scope the page grants. It now reaches the consent page and its
// token carries care.read.user. The twin: a request for only a scope the
// page cannot grant is still invalid_scope.
func TestAuthorize_WithoutScopeDefaultsToTheSpeakableScope(t *testing.T) {
	f := newFixture(t, nil)
	id := f.publicClient()
	for _, scopes := range [][]string{nil, {""}} {
		conf := &oauth2.Config{ClientID: id, RedirectURL: redirectURI, Scopes: scopes, Endpoint: f.config(id, "").Endpoint}
		v := oauth2.GenerateVerifier()
		authURL := conf.AuthCodeURL("s", oauth2.S256ChallengeOption(v))
		if u, _ := url.Parse(authURL); u.Query().Get("scope") != "" {
			t.Fatalf("the request carries scope %q", u.Query().Get("scope"))
		}
		back := f.consent(authURL, f.linkCode("ray"))
		tok, err := conf.Exchange(t.Context(), back.Query().Get("code"), oauth2.VerifierOption(v))
		if err != nil {
			t.Fatalf("scopes %q: %v", scopes, err)
		}
		p, err := f.principal(tok.AccessToken)
		if err != nil || !slices.Equal(p.Scopes, []models.Scope{models.ScopeReadUser}) {
			t.Fatalf("scopes %q: principal %+v, %v; want care.read.user", scopes, p, err)
		}
	}
	conf := &oauth2.Config{ClientID: id, RedirectURL: redirectURI, Scopes: []string{"care.write"}, Endpoint: f.config(id, "").Endpoint}
	p := f.get(conf.AuthCodeURL("s", oauth2.S256ChallengeOption(oauth2.GenerateVerifier())))
	if u, err := url.Parse(p.location); err != nil || u.Query().Get("error") != "invalid_scope" {
		t.Fatalf("only care.write asked: %d %q, want invalid_scope", p.status, p.location)
	}
}

// TestAuthorize_TheRedirectsHTMLLinkCarriesIssLikeItsLocation: the 302's
// body (http.Redirect's link, for a browser that does not follow) named
// the Location without RFC 9207's "iss"; it now names the same URL.
func TestAuthorize_TheRedirectsHTMLLinkCarriesIssLikeItsLocation(t *testing.T) {
	f := newFixture(t, nil)
	conf := f.config(f.publicClient(), "")
	p := f.get(conf.AuthCodeURL("s")) // no PKCE: an error redirect to the client
	if p.status != http.StatusFound || !strings.Contains(p.location, "iss=") {
		t.Fatalf("%d %q: want a 302 carrying iss", p.status, p.location)
	}
	if want := `<a href="` + html.EscapeString(p.location) + `">`; !strings.Contains(p.body, want) {
		t.Fatalf("body %q: want the link %s", p.body, want)
	}
}

// TestRefresh_AReusedRefreshTokenIsLoggedAtWarnNamingTheGrant: the other
// one-time credential. A rotated refresh token presented again revokes the
// grant (TestRefresh_RotatesAndAReusedRefreshTokenRevokesTheGrant) and is
// now logged at WARN naming it; the twin: a normal rotation logs nothing.
func TestRefresh_AReusedRefreshTokenIsLoggedAtWarnNamingTheGrant(t *testing.T) {
	logs := &logBuffer{}
	f := newFixture(t, func(c *Config) { c.Logger = slog.New(slog.NewTextHandler(logs, nil)) })
	conf, code, v := f.codeFlow()
	tok, err := conf.Exchange(t.Context(), code, oauth2.VerifierOption(v))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conf.TokenSource(t.Context(), &oauth2.Token{RefreshToken: tok.RefreshToken}).Token(); err != nil {
		t.Fatal(err)
	}
	if l := logs.String(); strings.Contains(l, "level=WARN") {
		t.Fatalf("a normal exchange and rotation logged a warning: %s", l)
	}
	if _, err := conf.TokenSource(t.Context(), &oauth2.Token{RefreshToken: tok.RefreshToken}).Token(); !invalidGrant(err) {
		t.Fatalf("reused refresh token: %v, want invalid_grant", err)
	}
	gs, _ := f.st.OAuthGrants(t.Context(), store.OAuthGrantFilter{Patient: "ray"})
	if len(gs) != 1 || gs[0].RevokedBy != store.RevokedByRefreshReuse {
		t.Fatalf("grants %+v: want one revoked by %q", gs, store.RevokedByRefreshReuse)
	}
	if l := logs.String(); !strings.Contains(l, "level=WARN") || !strings.Contains(l, "rotated refresh token was presented again") || !strings.Contains(l, gs[0].ID) {
		t.Fatalf("log %q: want a WARN line naming grant %s", l, gs[0].ID)
	}
}
