package oauth

import (
	"context"
	"encoding/json"
	"errors"
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"

	"github.com/unsay/unsay/bridge/auth"
	"github.com/unsay/unsay/models"
	"github.com/unsay/unsay/store"
)

// fixture is the authorization server on a real socket, with a resource
// server (auth.Verifier trusting it by its keys and grant check) beside it.
type fixture struct {
	t   *testing.T
	st  *store.Store
	as  *Server
	srv *httptest.Server
	rs  *auth.Verifier
	// jar is the browser's cookie jar (the consent cookie); nil until the
	// first request, then one browser for the fixture's life.
	jar http.CookieJar
}

// browser is the fixture's one browser: it keeps cookies and returns
// redirects instead of following them.
func (f *fixture) browser() *http.Client {
	if f.jar == nil {
		f.jar, _ = cookiejar.New(nil)
	}
	return &http.Client{Jar: f.jar, CheckRedirect: noRedirect.CheckRedirect}
}

func newFixture(t *testing.T, mod func(*Config)) *fixture {
	t.Helper()
	st, err := store.Open(context.Background(), store.Options{DSN: filepath.Join(t.TempDir(), "unsay.db"), AuditKey: []byte("k")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	srv := httptest.NewUnstartedServer(nil)
	issuer := "http://" + srv.Listener.Addr().String()
	cfg := Config{Store: st, Issuer: issuer, RegistrationsPerHour: -1}
	if mod != nil {
		mod(&cfg)
	}
	as, err := New(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	r := chi.NewRouter()
	as.Routes(r)
	srv.Config.Handler = r
	srv.Start()
	t.Cleanup(srv.Close)
	rs, err := auth.NewVerifier(auth.Config{JWKS: as.KeySource(), Issuer: issuer, GrantActive: as.GrantActive, PublicURL: issuer})
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{t: t, st: st, as: as, srv: srv, rs: rs}
}

const redirectURI = "http://127.0.0.1:9/callback"

// noRedirect is a client that returns redirects instead of following them.
var noRedirect = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

func (f *fixture) publicClient(grants ...string) string {
	f.t.Helper()
	id, _, err := RegisterClient(f.t.Context(), f.st, "Care Notes test app", []string{redirectURI}, grants, true, time.Now())
	if err != nil {
		f.t.Fatal(err)
	}
	return id
}

func (f *fixture) config(clientID, secret string) *oauth2.Config {
	return &oauth2.Config{ClientID: clientID, ClientSecret: secret, RedirectURL: redirectURI, Scopes: []string{"care.read.user"},
		Endpoint: oauth2.Endpoint{AuthURL: f.as.Issuer() + PathAuthorize, TokenURL: f.as.Issuer() + PathToken, AuthStyle: oauth2.AuthStyleInHeader}}
}

func (f *fixture) linkCode(patient string) string {
	f.t.Helper()
	code, _, err := f.st.CreateLinkCode(f.t.Context(), patient, time.Now())
	if err != nil {
		f.t.Fatal(err)
	}
	return code
}

var (
	reID   = regexp.MustCompile(`name="id" value="([^"]+)"`)
	reCSRF = regexp.MustCompile(`name="csrf" value="([^"]+)"`)
)

// page is one consent page as a browser sees it.
type page struct {
	status   int
	body     string
	header   http.Header
	location string
}

func (f *fixture) get(u string) page {
	f.t.Helper()
	resp, err := f.browser().Get(u)
	if err != nil {
		f.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return page{status: resp.StatusCode, body: string(b), header: resp.Header, location: resp.Header.Get("Location")}
}

func (f *fixture) post(p page, form url.Values) page {
	f.t.Helper()
	id, csrf := reID.FindStringSubmatch(p.body), reCSRF.FindStringSubmatch(p.body)
	if id == nil || csrf == nil {
		f.t.Fatalf("no consent form on the page (status %d):\n%s", p.status, p.body)
	}
	if !form.Has("id") {
		form.Set("id", html.UnescapeString(id[1]))
	}
	if !form.Has("csrf") {
		form.Set("csrf", html.UnescapeString(csrf[1]))
	}
	req, _ := http.NewRequest(http.MethodPost, f.as.Issuer()+PathConsent, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := f.browser().Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	out := page{status: resp.StatusCode, body: string(b), header: resp.Header, location: resp.Header.Get("Location")}
	if out.status == http.StatusSeeOther && strings.HasPrefix(out.location, PathConsent) {
		return f.get(f.as.Issuer() + out.location)
	}
	return out
}

// authorize follows /authorize to the consent page.
func (f *fixture) authorize(authURL string) page {
	f.t.Helper()
	p := f.get(authURL)
	if p.status != http.StatusFound {
		f.t.Fatalf("/authorize answered %d, want 302 to the consent page: %s", p.status, p.body)
	}
	if !strings.HasPrefix(p.location, f.as.Issuer()+PathConsent) {
		return p // an error redirect to the client
	}
	return f.get(p.location)
}

// consent drives the page: the link code, then Allow; it returns the
// redirect to the client.
func (f *fixture) consent(authURL, code string) *url.URL {
	f.t.Helper()
	p := f.authorize(authURL)
	p = f.post(p, url.Values{"action": {"code"}, "code": {code}})
	if p.status != http.StatusOK || !strings.Contains(p.body, "Allow") {
		f.t.Fatalf("after the code: status %d\n%s", p.status, p.body)
	}
	p = f.post(p, url.Values{"action": {"allow"}})
	if p.status != http.StatusSeeOther {
		f.t.Fatalf("Allow answered %d: %s", p.status, p.body)
	}
	u, err := url.Parse(p.location)
	if err != nil || !strings.HasPrefix(p.location, "http://127.0.0.1:9/callback?") {
		f.t.Fatalf("redirect %q", p.location)
	}
	return u
}

func (f *fixture) principal(tok string) (models.Principal, error) {
	ti, err := f.rs.Verify(f.t.Context(), tok, nil)
	if err != nil {
		return models.Principal{}, err
	}
	p, _ := auth.PrincipalOf(ti)
	return p, nil
}

func TestAuthorizationCode_XOAuth2WithPKCEGetsATokenBoundToThePatientOfTheLinkCode(t *testing.T) {
	f := newFixture(t, nil)
	conf := f.config(f.publicClient(), "")
	verifier := oauth2.GenerateVerifier()
	back := f.consent(conf.AuthCodeURL("st-1", oauth2.S256ChallengeOption(verifier), oauth2.SetAuthURLParam("resource", f.as.Resource())), f.linkCode("ray"))
	q := back.Query()
	if q.Get("state") != "st-1" || q.Get("iss") != f.as.Issuer() || q.Get("code") == "" {
		t.Fatalf("authorization response %v: want state, iss = %s (RFC 9207) and a code", q, f.as.Issuer())
	}
	tok, err := conf.Exchange(t.Context(), q.Get("code"), oauth2.VerifierOption(verifier))
	if err != nil {
		t.Fatal(err)
	}
	if tok.RefreshToken == "" || tok.Expiry.IsZero() || time.Until(tok.Expiry) > DefaultAccessTokenTTL+time.Minute {
		t.Fatalf("token %+v: want a refresh token and a short-lived access token", tok)
	}
	p, err := f.principal(tok.AccessToken)
	if err != nil {
		t.Fatalf("the resource server refused the access token: %v", err)
	}
	if !slices.Equal(p.Patients, []string{"ray"}) || !slices.Equal(p.Scopes, []models.Scope{models.ScopeReadUser}) {
		t.Fatalf("principal %+v: want care.read.user bound to ray", p)
	}
	// The code works once.
	if _, err := conf.Exchange(t.Context(), q.Get("code"), oauth2.VerifierOption(verifier)); err == nil {
		t.Fatal("an authorization code was exchanged twice")
	}
	// The ID token op adds is not an access token.
	if idt, _ := tok.Extra("id_token").(string); idt != "" {
		if _, err := f.principal(idt); err == nil {
			t.Fatal("the resource server accepted an ID token as an access token")
		}
	}
}

func TestAuthorizationCode_WithoutTheVerifierOrWithAnotherOneIsRefused(t *testing.T) {
	f := newFixture(t, nil)
	conf := f.config(f.publicClient(), "")
	verifier := oauth2.GenerateVerifier()
	back := f.consent(conf.AuthCodeURL("s", oauth2.S256ChallengeOption(verifier)), f.linkCode("ray"))
	if _, err := conf.Exchange(t.Context(), back.Query().Get("code"), oauth2.VerifierOption(oauth2.GenerateVerifier())); err == nil {
		t.Fatal("a code was exchanged with the wrong PKCE verifier")
	}
}

func TestAuthorize_RefusesWithoutPKCES256AndForAnotherResourceWithIss(t *testing.T) {
	f := newFixture(t, nil)
	conf := f.config(f.publicClient(), "")
	v := oauth2.GenerateVerifier()
	cases := []struct {
		name string
		url  string
		want string
	}{
		{"no PKCE", conf.AuthCodeURL("s"), "invalid_request"},
		{"PKCE plain", conf.AuthCodeURL("s", oauth2.SetAuthURLParam("code_challenge", v), oauth2.SetAuthURLParam("code_challenge_method", "plain")), "invalid_request"},
		{"another resource", conf.AuthCodeURL("s", oauth2.S256ChallengeOption(v), oauth2.SetAuthURLParam("resource", "https://other.example/mcp")), "invalid_target"},
		{"only care.write asked", (&oauth2.Config{ClientID: conf.ClientID, RedirectURL: redirectURI, Scopes: []string{"care.write"}, Endpoint: conf.Endpoint}).AuthCodeURL("s", oauth2.S256ChallengeOption(v)), "invalid_scope"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := f.get(tc.url)
			u, err := url.Parse(p.location)
			if p.status != http.StatusFound || err != nil || !strings.HasPrefix(p.location, redirectURI) {
				t.Fatalf("status %d location %q: want an error redirect to the client", p.status, p.location)
			}
			if q := u.Query(); q.Get("error") != tc.want || q.Get("iss") != f.as.Issuer() || q.Get("state") != "s" {
				t.Fatalf("error response %v: want error=%s with iss and state", q, tc.want)
			}
		})
	}
	// The positive twin: S256 for this resource reaches the consent page.
	p := f.get(conf.AuthCodeURL("s", oauth2.S256ChallengeOption(v), oauth2.SetAuthURLParam("resource", f.as.Resource())))
	if p.status != http.StatusFound || !strings.HasPrefix(p.location, f.as.Issuer()+PathConsent) {
		t.Fatalf("a good request: %d %q", p.status, p.location)
	}
}

func TestConsent_GrantsOnlyTheSpeakableScopeToAnUnapprovedClientAndSaysSoInPlainWords(t *testing.T) {
	f := newFixture(t, nil)
	id := f.publicClient()
	conf := f.config(id, "")
	conf.Scopes = []string{"care.read.user", "care.read.assistant", "care.write"}
	v := oauth2.GenerateVerifier()
	p := f.authorize(conf.AuthCodeURL("s", oauth2.S256ChallengeOption(v)))
	p = f.post(p, url.Values{"action": {"code"}, "code": {f.linkCode("ray")}})
	if !strings.Contains(p.body, "Read Ray&#39;s care notes aloud") || strings.Contains(p.body, "only for the assistant&#39;s own reasoning") {
		t.Fatalf("confirm page does not say exactly what is granted:\n%s", p.body)
	}
	if p.header.Get("X-Frame-Options") != "DENY" || !strings.Contains(p.header.Get("Content-Security-Policy"), "frame-ancestors 'none'") {
		t.Fatalf("consent page can be framed: %v", p.header)
	}
	p = f.post(p, url.Values{"action": {"allow"}})
	u, _ := url.Parse(p.location)
	tok, err := conf.Exchange(t.Context(), u.Query().Get("code"), oauth2.VerifierOption(v))
	if err != nil {
		t.Fatal(err)
	}
	pr, err := f.principal(tok.AccessToken)
	if err != nil || !slices.Equal(pr.Scopes, []models.Scope{models.ScopeReadUser}) {
		t.Fatalf("principal %+v %v: an unapproved client got more than care.read.user", pr, err)
	}

	// The twin: a client a clinician approved gets the assistant scope, named on the page with the approval.
	if err := ApproveClient(t.Context(), f.st, id, []models.Scope{models.ScopeReadAssistant}, "Dr Okafor", time.Now()); err != nil {
		t.Fatal(err)
	}
	v2 := oauth2.GenerateVerifier()
	p = f.authorize(conf.AuthCodeURL("s", oauth2.S256ChallengeOption(v2)))
	p = f.post(p, url.Values{"action": {"code"}, "code": {f.linkCode("ray")}})
	if !strings.Contains(p.body, "Approved by Dr Okafor, not by this page") {
		t.Fatalf("the approved scope is not named with its approval:\n%s", p.body)
	}
	p = f.post(p, url.Values{"action": {"allow"}})
	u, _ = url.Parse(p.location)
	tok, err = conf.Exchange(t.Context(), u.Query().Get("code"), oauth2.VerifierOption(v2))
	if err != nil {
		t.Fatal(err)
	}
	pr, _ = f.principal(tok.AccessToken)
	if !pr.Can(models.ScopeReadAssistant) || pr.Can(models.ScopeWrite) {
		t.Fatalf("approved client's principal %+v", pr)
	}
	// Withdrawing the approval cuts the next token of the same grant.
	if err := ApproveClient(t.Context(), f.st, id, nil, "Dr Okafor", time.Now()); err != nil {
		t.Fatal(err)
	}
	next, err := conf.TokenSource(t.Context(), &oauth2.Token{RefreshToken: tok.RefreshToken}).Token()
	if err != nil {
		t.Fatal(err)
	}
	if pr, _ := f.principal(next.AccessToken); pr.Can(models.ScopeReadAssistant) {
		t.Fatal("a refreshed token kept a scope whose approval was withdrawn")
	}
}

func TestConsent_WrongCodeCsrfAndDenyAreRefusedWithoutAGrant(t *testing.T) {
	f := newFixture(t, nil)
	conf := f.config(f.publicClient(), "")
	v := oauth2.GenerateVerifier()
	authURL := conf.AuthCodeURL("s", oauth2.S256ChallengeOption(v))

	p := f.authorize(authURL)
	if wrong := f.post(p, url.Values{"action": {"code"}, "code": {"123456"}}); wrong.status != http.StatusBadRequest || !strings.Contains(wrong.body, "didn&#39;t work") {
		t.Fatalf("wrong code: %d\n%s", wrong.status, wrong.body)
	}
	if bad := f.post(p, url.Values{"action": {"code"}, "code": {"12ab56"}}); bad.status != http.StatusBadRequest {
		t.Fatalf("malformed code: %d", bad.status)
	}
	if forged := f.post(p, url.Values{"action": {"code"}, "code": {f.linkCode("ray")}, "csrf": {"forged"}}); forged.status != http.StatusForbidden {
		t.Fatalf("forged csrf: %d", forged.status)
	}
	if early := f.post(p, url.Values{"action": {"allow"}}); early.status != http.StatusBadRequest {
		t.Fatalf("Allow before a code: %d", early.status)
	}
	denied := f.post(p, url.Values{"action": {"deny"}})
	u, _ := url.Parse(denied.location)
	if denied.status != http.StatusSeeOther || u.Query().Get("error") != "access_denied" || u.Query().Get("iss") != f.as.Issuer() {
		t.Fatalf("deny: %d %q", denied.status, denied.location)
	}
	if gs, _ := f.st.OAuthGrants(t.Context(), store.OAuthGrantFilter{}); len(gs) != 0 {
		t.Fatalf("refusals made grants: %+v", gs)
	}
	// The request is gone after a deny.
	if again := f.get(f.as.Issuer() + PathConsent + "?id=" + url.QueryEscape(html.UnescapeString(reID.FindStringSubmatch(p.body)[1]))); again.status != http.StatusBadRequest {
		t.Fatalf("consent page after deny: %d", again.status)
	}
}

func TestRevocation_NextRequestIsRefusedAndRefreshFails(t *testing.T) {
	f := newFixture(t, nil)
	conf := f.config(f.publicClient(), "")
	v := oauth2.GenerateVerifier()
	back := f.consent(conf.AuthCodeURL("s", oauth2.S256ChallengeOption(v)), f.linkCode("ray"))
	tok, err := conf.Exchange(t.Context(), back.Query().Get("code"), oauth2.VerifierOption(v))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.principal(tok.AccessToken); err != nil {
		t.Fatal(err)
	}
	gs, _ := f.st.OAuthGrants(t.Context(), store.OAuthGrantFilter{Patient: "ray", ActiveOnly: true})
	if len(gs) != 1 {
		t.Fatalf("grants %+v", gs)
	}
	// The id a carer types after `unsay grants revoke` is never read as a flag.
	if !strings.HasPrefix(gs[0].ID, "ac:") {
		t.Errorf("consent grant id %q, want the ac: prefix (an id never starts with -)", gs[0].ID)
	}
	if err := f.st.RevokeOAuthGrant(t.Context(), gs[0].ID, "carer", time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := f.principal(tok.AccessToken); err == nil {
		t.Fatal("an unexpired access token of a revoked grant was accepted")
	}
	if _, err := conf.TokenSource(t.Context(), &oauth2.Token{RefreshToken: tok.RefreshToken}).Token(); err == nil {
		t.Fatal("a revoked grant refreshed")
	}
}

func TestRefresh_RotatesAndAReusedRefreshTokenRevokesTheGrant(t *testing.T) {
	f := newFixture(t, nil)
	conf := f.config(f.publicClient(), "")
	v := oauth2.GenerateVerifier()
	back := f.consent(conf.AuthCodeURL("s", oauth2.S256ChallengeOption(v)), f.linkCode("ray"))
	tok, err := conf.Exchange(t.Context(), back.Query().Get("code"), oauth2.VerifierOption(v))
	if err != nil {
		t.Fatal(err)
	}
	next, err := conf.TokenSource(t.Context(), &oauth2.Token{RefreshToken: tok.RefreshToken}).Token()
	if err != nil {
		t.Fatal(err)
	}
	if next.RefreshToken == "" || next.RefreshToken == tok.RefreshToken {
		t.Fatal("refresh did not rotate the refresh token")
	}
	if _, err := f.principal(next.AccessToken); err != nil {
		t.Fatalf("refreshed access token: %v", err)
	}
	// A thief replays the old refresh token: refused, and the grant dies with it.
	if _, err := conf.TokenSource(t.Context(), &oauth2.Token{RefreshToken: tok.RefreshToken}).Token(); err == nil {
		t.Fatal("a rotated refresh token was accepted again")
	}
	if _, err := f.principal(next.AccessToken); err == nil {
		t.Fatal("the grant survived the reuse of a rotated refresh token")
	}
}

func TestClientCredentials_TokenIsBoundToNoPatientAndCannotAskForMore(t *testing.T) {
	f := newFixture(t, nil)
	id, secret, err := RegisterClient(t.Context(), f.st, "Alexa+ add-on", nil, []string{"client_credentials"}, false, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	cc := clientcredentials.Config{ClientID: id, ClientSecret: secret, TokenURL: f.as.Issuer() + PathToken,
		EndpointParams: url.Values{"resource": {f.as.Resource()}}, AuthStyle: oauth2.AuthStyleInHeader}
	tok, err := cc.Token(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	p, err := f.principal(tok.AccessToken)
	if err != nil {
		t.Fatalf("client_credentials token refused: %v", err)
	}
	if len(p.Patients) != 0 || !p.Can(models.ScopeReadUser) || p.CanAccessPatient("ray") {
		t.Fatalf("client_credentials principal %+v: want care.read.user bound to no patient", p)
	}
	for name, c := range map[string]clientcredentials.Config{
		"care.write":     {ClientID: id, ClientSecret: secret, TokenURL: cc.TokenURL, Scopes: []string{"care.write"}},
		"wrong secret":   {ClientID: id, ClientSecret: secret + "x", TokenURL: cc.TokenURL},
		"other resource": {ClientID: id, ClientSecret: secret, TokenURL: cc.TokenURL, EndpointParams: url.Values{"resource": {"https://other.example"}}},
	} {
		if _, err := c.Token(t.Context()); err == nil {
			t.Errorf("%s: a client_credentials token was issued", name)
		}
	}
	// A public client has no client_credentials.
	if _, _, err := RegisterClient(t.Context(), f.st, "x", nil, []string{"client_credentials"}, true, time.Now()); err == nil {
		t.Error("a public client was registered for client_credentials")
	}
}

func TestDynamicRegistration_RegistersAPublicClientThatCompletesTheFlow(t *testing.T) {
	f := newFixture(t, nil)
	post := func(body string) (*http.Response, map[string]any) {
		resp, err := http.Post(f.as.Issuer()+PathRegister, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var m map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&m)
		return resp, m
	}
	resp, m := post(`{"redirect_uris":["` + redirectURI + `"],"token_endpoint_auth_method":"none","client_name":"Desk assistant","scope":"care.read.user care.read.assistant care.write"}`)
	if resp.StatusCode != http.StatusCreated || m["client_id"] == nil || m["client_secret"] != nil || m["scope"] != "care.read.user" {
		t.Fatalf("registration %d %v: want 201, a client_id, no secret, scope care.read.user", resp.StatusCode, m)
	}
	conf := f.config(m["client_id"].(string), "")
	conf.Endpoint.AuthStyle = oauth2.AuthStyleInParams
	v := oauth2.GenerateVerifier()
	back := f.consent(conf.AuthCodeURL("s", oauth2.S256ChallengeOption(v)), f.linkCode("ray"))
	if _, err := conf.Exchange(t.Context(), back.Query().Get("code"), oauth2.VerifierOption(v)); err != nil {
		t.Fatalf("registered client's exchange: %v", err)
	}
	for name, body := range map[string]string{
		"no redirect":         `{"token_endpoint_auth_method":"none"}`,
		"javascript redirect": `{"redirect_uris":["javascript:alert(1)"]}`,
		"http off loopback":   `{"redirect_uris":["http://evil.example/cb"]}`,
		"implicit":            `{"redirect_uris":["` + redirectURI + `"],"response_types":["token"]}`,
		"not JSON":            `redirect_uris=x`,
	} {
		if resp, m := post(body); resp.StatusCode != http.StatusBadRequest || m["error"] == nil {
			t.Errorf("%s: %d %v, want 400 with an RFC 7591 error", name, resp.StatusCode, m)
		}
	}
}

func TestDynamicRegistration_IsCappedPerAddress(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.RegistrationsPerHour = 2 })
	body := `{"redirect_uris":["` + redirectURI + `"],"token_endpoint_auth_method":"none"}`
	codes := []int{}
	var retry string
	for range 3 {
		resp, err := http.Post(f.as.Issuer()+PathRegister, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		codes = append(codes, resp.StatusCode)
		retry = resp.Header.Get("Retry-After")
	}
	if !slices.Equal(codes, []int{201, 201, 429}) || retry == "" {
		t.Fatalf("statuses %v Retry-After %q: want two registrations then 429 with Retry-After", codes, retry)
	}
}

func TestMetadata_AdvertisesWhatTheServerHonours(t *testing.T) {
	f := newFixture(t, nil)
	resp, err := http.Get(f.as.Issuer() + PathMetadata)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"issuer": f.as.Issuer(), "authorization_endpoint": f.as.Issuer() + PathAuthorize, "token_endpoint": f.as.Issuer() + PathToken,
		"jwks_uri": f.as.Issuer() + PathJWKS, "registration_endpoint": f.as.Issuer() + PathRegister,
		"authorization_response_iss_parameter_supported": true, "client_id_metadata_document_supported": true,
	}
	for k, v := range want {
		if m[k] != v {
			t.Errorf("%s = %v, want %v", k, m[k], v)
		}
	}
	for k, v := range map[string]string{"code_challenge_methods_supported": "S256", "grant_types_supported": "client_credentials", "response_types_supported": "code"} {
		got, _ := json.Marshal(m[k])
		if !strings.Contains(string(got), `"`+v+`"`) {
			t.Errorf("%s = %s, want it to hold %s", k, got, v)
		}
	}
	if s, _ := json.Marshal(m["scopes_supported"]); strings.Contains(string(s), "offline_access") || strings.Contains(string(s), "care.write") {
		t.Errorf("scopes_supported = %s: must not list offline_access or care.write", s)
	}
	if s, _ := json.Marshal(m["code_challenge_methods_supported"]); strings.Contains(string(s), "plain") {
		t.Errorf("plain PKCE advertised: %s", s)
	}
}

func TestJWKS_PublishesOnlyPublicKeys(t *testing.T) {
	f := newFixture(t, nil)
	resp, err := http.Get(f.as.JWKSURL())
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	keys, err := auth.ParseJWKS(b)
	if err != nil || len(keys) != 1 {
		t.Fatalf("JWKS %s: %v", b, err)
	}
	if strings.Contains(string(b), `"d"`) {
		t.Fatal("the JWKS carries a private key")
	}
}

func TestMintInternal_TokensVerifyAndEndWithTheirGrant(t *testing.T) {
	f := newFixture(t, nil)
	tok, err := f.as.MintInternal(t.Context(), "internal:unsay-speech", "unsay-speech", []models.Scope{models.ScopeReadUser}, []string{"ray", "sue"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	p, err := f.principal(tok)
	if err != nil || p.Subject != "unsay-speech" || len(p.Patients) != 2 {
		t.Fatalf("internal token principal %+v %v", p, err)
	}
	if err := f.st.RevokeOAuthGrant(t.Context(), "internal:unsay-speech", "op", time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := f.principal(tok); err == nil {
		t.Fatal("an internal token outlived its grant")
	}
	if _, err := f.as.MintInternal(t.Context(), "internal:unsay-speech", "unsay-speech", []models.Scope{models.ScopeReadUser}, nil, time.Hour); !errors.Is(err, store.ErrGrantRevoked) {
		t.Fatalf("minting on a revoked grant: %v", err)
	}
	if _, err := f.as.MintInternal(t.Context(), "internal:x", "x", []models.Scope{models.ScopeReadUser}, nil, 48*time.Hour); err == nil {
		t.Fatal("a two-day internal token was minted")
	}
}

// BenchmarkResourceServer_VerifyWithGrantCheck measures what every /mcp
// request pays for an embedded-server token: ES256 signature, claims, and
// the grant's revocation row in SQLite.
func BenchmarkResourceServer_VerifyWithGrantCheck(b *testing.B) {
	st, err := store.Open(context.Background(), store.Options{DSN: filepath.Join(b.TempDir(), "u.db"), AuditKey: []byte("k")})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	as, err := New(context.Background(), Config{Store: st, Issuer: "http://127.0.0.1:1"})
	if err != nil {
		b.Fatal(err)
	}
	rs, err := auth.NewVerifier(auth.Config{JWKS: as.KeySource(), Issuer: as.Issuer(), GrantActive: as.GrantActive, PublicURL: as.Issuer()})
	if err != nil {
		b.Fatal(err)
	}
	tok, err := as.MintInternal(context.Background(), "internal:bench", "bench", []models.Scope{models.ScopeReadUser}, []string{"ray"}, time.Hour)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for b.Loop() {
		if _, err := rs.Verify(ctx, tok, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// TestRevocationEndpoint_RevokingARefreshTokenEndsTheWholeGrant (RFC 7009):
// the client hands back its refresh token; its access token stops working
// at once. Another client's attempt changes nothing.
func TestRevocationEndpoint_RevokingARefreshTokenEndsTheWholeGrant(t *testing.T) {
	f := newFixture(t, nil)
	id := f.publicClient()
	conf := f.config(id, "")
	v := oauth2.GenerateVerifier()
	back := f.consent(conf.AuthCodeURL("s", oauth2.S256ChallengeOption(v)), f.linkCode("ray"))
	tok, err := conf.Exchange(t.Context(), back.Query().Get("code"), oauth2.VerifierOption(v))
	if err != nil {
		t.Fatal(err)
	}
	revoke := func(clientID string) int {
		resp, err := http.PostForm(f.as.Issuer()+PathRevoke, url.Values{"token": {tok.RefreshToken}, "token_type_hint": {"refresh_token"}, "client_id": {clientID}})
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	other := f.publicClient()
	if status := revoke(other); status != http.StatusOK {
		t.Fatalf("another client's revocation: %d (RFC 7009 answers 200)", status)
	}
	if _, err := f.principal(tok.AccessToken); err != nil {
		t.Fatalf("another client revoked this client's grant: %v", err)
	}
	if status := revoke(id); status != http.StatusOK {
		t.Fatalf("revocation: %d", status)
	}
	if _, err := f.principal(tok.AccessToken); err == nil {
		t.Fatal("the access token outlived the revocation of its refresh token")
	}
}

func TestRevocationEndpoint_RevokingAnAccessTokenEndsTheWholeGrant(t *testing.T) {
	f := newFixture(t, nil)
	id := f.publicClient()
	conf := f.config(id, "")
	v := oauth2.GenerateVerifier()
	back := f.consent(conf.AuthCodeURL("s", oauth2.S256ChallengeOption(v)), f.linkCode("ray"))
	tok, err := conf.Exchange(t.Context(), back.Query().Get("code"), oauth2.VerifierOption(v))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.PostForm(f.as.Issuer()+PathRevoke, url.Values{"token": {tok.AccessToken}, "token_type_hint": {"access_token"}, "client_id": {id}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("revocation: %d", resp.StatusCode)
	}
	if _, err := f.principal(tok.AccessToken); err == nil {
		t.Fatal("a revoked access token still works")
	}
	if _, err := conf.TokenSource(t.Context(), &oauth2.Token{RefreshToken: tok.RefreshToken}).Token(); err == nil {
		t.Fatal("the grant of a revoked access token still refreshes")
	}
}
