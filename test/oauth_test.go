//go:build e2e

package e2e_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	josejwt "github.com/go-jose/go-jose/v4/jwt"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"

	"github.com/unsay/unsay/test/harness"
)

// Real OAuth — the embedded authorization server, the
// consent page, grants and their revocation, and a second, external
// authorization server trusted by its JWKS, all against the real binary.
const oauthPart = "OAuth and account linking"

var (
	reConsentID   = regexp.MustCompile(`name="id" value="([^"]+)"`)
	reConsentCSRF = regexp.MustCompile(`name="csrf" value="([^"]+)"`)
	noFollow      = &http.Client{Timeout: 15 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
)

// linkCodeFor creates a link code for ray with `unsay link`.
func linkCodeFor(t *testing.T, s *harness.Server) string {
	t.Helper()
	out, err := harness.Run(context.Background(), bin, "link", "--url", s.URL, "--patient", "ray")
	if err != nil {
		t.Fatal(err)
	}
	code := sixDigits.FindString(out)
	if code == "" {
		t.Fatalf("unsay link printed no code: %q", out)
	}
	return code
}

// consentWith walks the consent page as a browser would (no script): the
// code, then Allow, keeping its cookies (the page is bound to the browser
// that opened it). It returns where the page sends the person back.
func consentWith(t *testing.T, authURL, code string) *url.URL {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Timeout: noFollow.Timeout, CheckRedirect: noFollow.CheckRedirect, Jar: jar}
	get := func(u string) (int, string, string) {
		resp, err := browser.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), resp.Header.Get("Location")
	}
	status, _, loc := get(authURL)
	if status != http.StatusFound || !strings.Contains(loc, "/oauth/consent?id=") {
		t.Fatalf("/authorize: %d → %q", status, loc)
	}
	base := loc[:strings.Index(loc, "/oauth/consent")]
	_, page, _ := get(loc)
	post := func(form url.Values) (int, string, string) {
		form.Set("id", html.UnescapeString(reConsentID.FindStringSubmatch(page)[1]))
		form.Set("csrf", html.UnescapeString(reConsentCSRF.FindStringSubmatch(page)[1]))
		resp, err := browser.PostForm(base+"/oauth/consent", form)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), resp.Header.Get("Location")
	}
	status, _, loc = post(url.Values{"action": {"code"}, "code": {code}})
	if status != http.StatusSeeOther {
		t.Fatalf("the code: %d", status)
	}
	_, page, _ = get(base + loc)
	if !strings.Contains(page, "Read Ray&#39;s care notes aloud") {
		t.Fatalf("the confirm page does not say what is granted:\n%s", page)
	}
	status, _, loc = post(url.Values{"action": {"allow"}})
	if status != http.StatusSeeOther {
		t.Fatalf("Allow: %d", status)
	}
	u, err := url.Parse(loc)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// mcpSession connects the official Go SDK's client with token.
func mcpSession(t *testing.T, base, token string) (*mcp.ClientSession, error) {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "unsay-oauth-e2e", Version: "1"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: base + "/mcp",
		HTTPClient: &http.Client{Transport: bearerRT{token, http.DefaultTransport}}}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err == nil {
		t.Cleanup(func() { cs.Close() })
	}
	return cs, err
}

func careURIs(t *testing.T, cs *mcp.ClientSession) []string {
	t.Helper()
	var out []string
	for r, err := range cs.Resources(context.Background(), nil) {
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(r.URI, "care") {
			out = append(out, r.URI)
		}
	}
	return out
}

// mcpStatus POSTs an initialize with token and returns the status and the
// WWW-Authenticate header.
func mcpStatus(t *testing.T, base, token string) (int, string) {
	t.Helper()
	body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"e2e","version":"1"}}}`
	req, _ := http.NewRequest(http.MethodPost, base+"/mcp", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode, resp.Header.Get("WWW-Authenticate")
}

// TestOAuth_GoClientDiscoversRegistersLinksAndIsRevoked starts from only
// the /mcp URL, as an MCP host does: 401 → protected-resource metadata →
// authorization server metadata (the MCP SDK's oauthex) → dynamic
// registration → golang.org/x/oauth2 with PKCE through the consent page
// and a link code → Ray's facts over MCP → a refresh → `unsay grants
// revoke` → the next request is 401 invalid_token. On the way, a signed
// Alexa request carrying the same kind of token speaks Ray's notes, and
// after the revocation gets the LinkAccount card.
func TestOAuth_GoClientDiscoversRegistersLinksAndIsRevoked(t *testing.T) {
	s, alexa, _, _ := signedSetup(t, oauthPart)
	ctx := context.Background()

	// 1. Only the URL: the 401 names the metadata.
	status, challenge := mcpStatus(t, s.URL, "")
	if status != http.StatusUnauthorized {
		t.Fatalf("anonymous /mcp: %d", status)
	}
	chs, err := oauthex.ParseWWWAuthenticate([]string{challenge})
	if err != nil || len(chs) == 0 || chs[0].Params["resource_metadata"] == "" {
		t.Fatalf("challenge %q: %v", challenge, err)
	}
	prm, err := oauthex.GetProtectedResourceMetadata(ctx, chs[0].Params["resource_metadata"], s.URL+"/mcp", http.DefaultClient)
	if err != nil || len(prm.AuthorizationServers) != 1 || prm.AuthorizationServers[0] != s.URL {
		t.Fatalf("protected-resource metadata %+v: %v (want this server as its authorization server)", prm, err)
	}
	asm, err := oauthex.GetAuthServerMeta(ctx, prm.AuthorizationServers[0]+"/.well-known/oauth-authorization-server", prm.AuthorizationServers[0], http.DefaultClient)
	if err != nil || asm == nil || !asm.AuthorizationResponseIssParameterSupported {
		t.Fatalf("authorization server metadata %+v: %v", asm, err)
	}
	// 2. Dynamic registration (RFC 7591).
	reg, err := oauthex.RegisterClient(ctx, asm.RegistrationEndpoint, &oauthex.ClientRegistrationMetadata{
		RedirectURIs: []string{"http://127.0.0.1:9/callback"}, TokenEndpointAuthMethod: "none", ClientName: "Go e2e host",
		Scope: strings.Join(prm.ScopesSupported, " ")}, http.DefaultClient)
	if err != nil {
		t.Fatal(err)
	}
	conf := &oauth2.Config{ClientID: reg.ClientID, RedirectURL: "http://127.0.0.1:9/callback", Scopes: prm.ScopesSupported,
		Endpoint: oauth2.Endpoint{AuthURL: asm.AuthorizationEndpoint, TokenURL: asm.TokenEndpoint, AuthStyle: oauth2.AuthStyleInParams}}
	// 3. Authorization code with PKCE S256 and the resource indicator.
	verifier := oauth2.GenerateVerifier()
	back := consentWith(t, conf.AuthCodeURL("e2e-state", oauth2.S256ChallengeOption(verifier), oauth2.SetAuthURLParam("resource", prm.Resource)), linkCodeFor(t, s))
	if back.Query().Get("iss") != asm.Issuer || back.Query().Get("state") != "e2e-state" {
		t.Fatalf("authorization response %v: want iss %s (RFC 9207) and the state", back.Query(), asm.Issuer)
	}
	tok, err := conf.Exchange(ctx, back.Query().Get("code"), oauth2.VerifierOption(verifier))
	if err != nil {
		t.Fatal(err)
	}
	if scope, _ := tok.Extra("scope").(string); strings.Contains(scope, "care.read.assistant") || strings.Contains(scope, "care.write") {
		t.Fatalf("the consent page granted %q to an unapproved client", scope)
	}
	// 4. Ray's facts over MCP with the token.
	cs, err := mcpSession(t, s.URL, tok.AccessToken)
	if err != nil {
		t.Fatal(err)
	}
	uris := careURIs(t, cs)
	if len(uris) == 0 || !strings.Contains(strings.Join(uris, " "), "care://ray/weight_bearing") || strings.Contains(strings.Join(uris, " "), "care-internal://") {
		t.Fatalf("resources with the linked token: %v", uris)
	}
	// 5. A refresh rotates the refresh token and works.
	next, err := conf.TokenSource(ctx, &oauth2.Token{RefreshToken: tok.RefreshToken}).Token()
	if err != nil || next.RefreshToken == tok.RefreshToken {
		t.Fatalf("refresh: %v (rotated: %v)", err, next != nil && next.RefreshToken != tok.RefreshToken)
	}
	if status, _ := mcpStatus(t, s.URL, next.AccessToken); status != http.StatusOK {
		t.Fatalf("refreshed token at /mcp: %d", status)
	}

	// The classic skill: a signed request carrying the linked token speaks Ray's notes.
	dev := harness.NewDevice("account-linked")
	withToken := func(r harness.Request) harness.Request {
		r["context"].(map[string]any)["System"].(map[string]any)["user"].(map[string]any)["accessToken"] = next.AccessToken
		return r
	}
	r := send(t, alexa, withToken(dev.Launch()))
	if harness.WalkingSentence(r.Speech()) == "" {
		t.Fatalf("a launch with a linked access token did not speak Ray's walking instruction: %q", r.Speech())
	}

	// 6. Revocation, effective on the next request.
	gl, err := harness.Run(ctx, bin, "grants", "list", "--db", s.DB, "--patient", "ray")
	if err != nil {
		t.Fatal(err)
	}
	var grantID string
	for _, line := range strings.Split(gl, "\n") {
		if f := strings.Fields(line); len(f) > 2 && f[1] == "authorization_code" && strings.Contains(line, reg.ClientID) {
			grantID = f[0]
		}
	}
	if grantID == "" {
		t.Fatalf("unsay grants list shows no grant for the client:\n%s", gl)
	}
	if _, err := harness.Run(ctx, bin, "grants", "revoke", grantID, "--db", s.DB, "--by", "carer"); err != nil {
		t.Fatal(err)
	}
	if status, wa := mcpStatus(t, s.URL, next.AccessToken); status != http.StatusUnauthorized || !strings.Contains(wa, `error="invalid_token"`) {
		t.Fatalf("after unsay grants revoke: %d %q, want 401 with error=\"invalid_token\"", status, wa)
	}
	if _, err := conf.TokenSource(ctx, &oauth2.Token{RefreshToken: next.RefreshToken}).Token(); err == nil {
		t.Fatal("a revoked grant refreshed")
	}
	r = send(t, alexa, withToken(dev.Launch()))
	var body struct {
		Response struct {
			Card *struct {
				Type string `json:"type"`
			} `json:"card"`
		} `json:"response"`
	}
	_ = json.Unmarshal(r.Raw, &body)
	if body.Response.Card == nil || body.Response.Card.Type != "LinkAccount" || !strings.Contains(r.Speech(), "Link account") {
		t.Fatalf("a revoked token's launch: card %+v speech %q, want the LinkAccount card and an explanation", body.Response.Card, r.Speech())
	}
	if harness.WalkingSentence(r.Speech()) != "" {
		t.Fatalf("a revoked token still heard Ray's notes: %q", r.Speech())
	}
}

// TestOAuth_ClientCredentialsListToolsButReadNoPatient: an Alexa+-style
// registration client (`unsay client add --grant client_credentials`)
// gets a token that may initialize and call tools/list, bound to no
// patient: Ray's facts are not listed and not readable.
func TestOAuth_ClientCredentialsListToolsButReadNoPatient(t *testing.T) {
	s := startServer(t, oauthPart, "--alexa-verify=false")
	out, err := harness.Run(context.Background(), bin, "client", "add", "--name", "Alexa+ add-on", "--grant", "client_credentials", "--db", s.DB)
	if err != nil {
		t.Fatal(err)
	}
	creds := map[string]string{}
	for _, line := range strings.Split(out, "\n") {
		if k, v, ok := strings.Cut(line, "\t"); ok {
			creds[k] = v
		}
	}
	cc := clientcredentials.Config{ClientID: creds["client_id"], ClientSecret: creds["client_secret"], TokenURL: s.URL + "/oauth/token"}
	tok, err := cc.Token(context.Background())
	if err != nil {
		t.Fatalf("client_credentials: %v (unsay client add printed %q)", err, out)
	}
	cs, err := mcpSession(t, s.URL, tok.AccessToken)
	if err != nil {
		t.Fatalf("initialize with a client_credentials token: %v", err)
	}
	tools, err := cs.ListTools(context.Background(), nil)
	if err != nil || len(tools.Tools) == 0 {
		t.Fatalf("tools/list: %v %v", tools, err)
	}
	if uris := careURIs(t, cs); len(uris) != 0 {
		t.Fatalf("a token bound to no patient listed %v", uris)
	}
	if _, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: "care://ray/weight_bearing"}); err == nil {
		t.Fatal("a token bound to no patient read Ray's walking instruction")
	}
	// Its twin: a wrong secret gets nothing.
	cc.ClientSecret += "x"
	if _, err := cc.Token(context.Background()); err == nil {
		t.Fatal("client_credentials with a wrong secret")
	}
}

// externalIdP is a second authorization server, a hospital's, built with
// go-jose: ES256 keys, a JWKS endpoint, tokens with the claims Unsay reads.
type externalIdP struct {
	mu   sync.Mutex
	keys []jose.JSONWebKey
	srv  *httptest.Server
}

const idpIssuer = "https://idp.hospital.example"

func newExternalIdP(t *testing.T) *externalIdP {
	p := &externalIdP{}
	p.rotate(t)
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		set := jose.JSONWebKeySet{}
		for _, k := range p.keys {
			set.Keys = append(set.Keys, k.Public())
		}
		p.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(set)
	}))
	t.Cleanup(p.srv.Close)
	return p
}

func (p *externalIdP) rotate(t *testing.T) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 6)
	rand.Read(b)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.keys = append([]jose.JSONWebKey{{Key: k, KeyID: "idp-" + base64.RawURLEncoding.EncodeToString(b), Algorithm: "ES256", Use: "sig"}}, p.keys...)
}

func (p *externalIdP) sign(t *testing.T, key *jose.JSONWebKey, aud, sub, scope string, ttl time.Duration) string {
	if key == nil {
		p.mu.Lock()
		k := p.keys[0]
		p.mu.Unlock()
		key = &k
	}
	sig, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: *key}, (&jose.SignerOptions{}).WithType("at+jwt"))
	if err != nil {
		t.Fatal(err)
	}
	tok, err := josejwt.Signed(sig).Claims(map[string]any{"iss": idpIssuer, "sub": sub, "aud": aud,
		"exp": time.Now().Add(ttl).Unix(), "iat": time.Now().Unix(), "scope": scope, "patients": []string{"ray"}}).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// TestOAuth_ExternalAuthorizationServerIsTrustedByItsJWKS: with
// --authorization-server and --token-jwks-url the resource server accepts
// the hospital IdP's tokens, refuses one signed by a key not in its JWKS
// and HS256 development tokens, names the IdP in its metadata, and picks
// up the IdP's key rotation without a restart.
func TestOAuth_ExternalAuthorizationServerIsTrustedByItsJWKS(t *testing.T) {
	idp := newExternalIdP(t)
	dir := t.TempDir()
	// A fixed loopback public URL (any loopback Host is accepted), so the
	// speech principal's token — minted by the IdP before the server starts —
	// names the right audience.
	public := "http://127.0.0.1:1"
	speech := idp.sign(t, nil, public+"/mcp", "unsay-speech", "care.read.user", 2*time.Hour)
	s := startWith(t, oauthPart, harness.Options{Dir: dir, PublicURL: public, Args: []string{"--alexa-verify=false",
		"--authorization-server", idpIssuer, "--token-jwks-url", idp.srv.URL, "--speech-token", speech}})
	if out := s.Output(); !strings.Contains(out, "tokens verified by the JWKS at "+idp.srv.URL) || !strings.Contains(out, "HS256 off") {
		t.Fatalf("the startup line does not say which verification is in force:\n%s", out)
	}
	prmResp, err := http.Get(s.URL + "/.well-known/oauth-protected-resource/mcp")
	if err != nil {
		t.Fatal(err)
	}
	var prm struct {
		AuthorizationServers []string `json:"authorization_servers"`
	}
	_ = json.NewDecoder(prmResp.Body).Decode(&prm)
	prmResp.Body.Close()
	if len(prm.AuthorizationServers) != 1 || prm.AuthorizationServers[0] != idpIssuer {
		t.Fatalf("metadata names %v, want the external issuer", prm.AuthorizationServers)
	}
	if resp, err := http.Get(s.URL + "/.well-known/oauth-authorization-server"); err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Fatal("the embedded authorization server still serves metadata beside an external one")
		}
	}
	aud := s.PublicURL + "/mcp"
	if status, _ := mcpStatus(t, s.URL, idp.sign(t, nil, aud, "nurse-ade", "care.read.user", 5*time.Minute)); status != http.StatusOK {
		t.Fatalf("a token of the external IdP: %d", status)
	}
	stranger, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	unknown := &jose.JSONWebKey{Key: stranger, KeyID: "not-published", Algorithm: "ES256"}
	if status, wa := mcpStatus(t, s.URL, idp.sign(t, unknown, aud, "mallory", "care.read.user", 5*time.Minute)); status != http.StatusUnauthorized || !strings.Contains(wa, "invalid_token") {
		t.Fatalf("a token signed by an unknown key: %d %q", status, wa)
	}
	dev, err := s.Token(context.Background(), "ray", []string{"care.read.user"})
	if err != nil {
		t.Fatal(err)
	}
	if status, _ := mcpStatus(t, s.URL, dev); status != http.StatusUnauthorized {
		t.Fatalf("an HS256 development token beside an external JWKS: %d, want 401", status)
	}
	// Rotation at the IdP: the unknown kid makes the server refetch the JWKS
	// (at most once per 5 s, so forged kids cannot make it fetch on every
	// request; the forged token above just used that allowance).
	idp.rotate(t)
	rotated := idp.sign(t, nil, aud, "nurse-ade", "care.read.user", 5*time.Minute)
	deadline := time.Now().Add(30 * time.Second)
	for {
		status, _ := mcpStatus(t, s.URL, rotated)
		if status == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a token under the IdP's rotated-in key is still refused after 30 s, same server process: %d", status)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// TestOAuth_TokenWithDBIsSignedByTheServersKeyAndRevocable: `unsay token
// --db` (how an operator mints a token where HS256 is off) signs with the
// embedded authorization server's key; the token works at /mcp, and its
// own grant, listed by `unsay grants list`, ends it.
func TestOAuth_TokenWithDBIsSignedByTheServersKeyAndRevocable(t *testing.T) {
	s := startServer(t, oauthPart, "--alexa-verify=false")
	ctx := context.Background()
	tok, err := harness.Run(ctx, bin, "token", "--db", s.DB, "--public-url", s.PublicURL, "--patient", "ray", "--scope", "care.read.user", "--sub", "ops-jo")
	if err != nil {
		t.Fatal(err)
	}
	if status, _ := mcpStatus(t, s.URL, tok); status != http.StatusOK {
		t.Fatalf("a token signed with the server's key: %d", status)
	}
	list, err := harness.Run(ctx, bin, "grants", "list", "--db", s.DB)
	if err != nil {
		t.Fatal(err)
	}
	var grant string
	for _, line := range strings.Split(list, "\n") {
		if f := strings.Fields(line); len(f) > 0 && strings.HasPrefix(f[0], "internal:cli:ops-jo:") {
			grant = f[0]
		}
	}
	if grant == "" {
		t.Fatalf("no grant for the minted token:\n%s", list)
	}
	if _, err := harness.Run(ctx, bin, "grants", "revoke", grant, "--db", s.DB); err != nil {
		t.Fatal(err)
	}
	if status, wa := mcpStatus(t, s.URL, tok); status != http.StatusUnauthorized || !strings.Contains(wa, "invalid_token") {
		t.Fatalf("after revoking its grant: %d %q", status, wa)
	}
}

// TestOAuth_ASecondUseOfACodeRevokesTheTokensItProduced, against the real
// binary (OAuth 2.1 §4.1.3, RFC 6749 §4.1.2): a host that asks without
// "scope" links with care.read.user; its token reads /mcp; the same code
// presented again is invalid_grant, and from then on the token of the
// first exchange is 401 invalid_token at /mcp and its refresh token is
// refused; `unsay grants list --all` shows the grant revoked by
// "authorization code reuse". The twin: a second host's code, used once,
// keeps its token working after the first host's revocation.
func TestOAuth_ASecondUseOfACodeRevokesTheTokensItProduced(t *testing.T) {
	s := startServer(t, oauthPart, "--alexa-verify=false")
	ctx := context.Background()
	link := func(name string) (*oauth2.Config, *oauth2.Token, string, string) {
		reg, err := oauthex.RegisterClient(ctx, s.URL+"/oauth/register", &oauthex.ClientRegistrationMetadata{
			RedirectURIs: []string{"http://127.0.0.1:9/callback"}, TokenEndpointAuthMethod: "none", ClientName: name}, http.DefaultClient)
		if err != nil {
			t.Fatal(err)
		}
		conf := &oauth2.Config{ClientID: reg.ClientID, RedirectURL: "http://127.0.0.1:9/callback",
			Endpoint: oauth2.Endpoint{AuthURL: s.URL + "/oauth/authorize", TokenURL: s.URL + "/oauth/token", AuthStyle: oauth2.AuthStyleInParams}}
		v := oauth2.GenerateVerifier()
		back := consentWith(t, conf.AuthCodeURL("st", oauth2.S256ChallengeOption(v)), linkCodeFor(t, s))
		tok, err := conf.Exchange(ctx, back.Query().Get("code"), oauth2.VerifierOption(v))
		if err != nil {
			t.Fatalf("%s: exchange: %v", name, err)
		}
		if scope, _ := tok.Extra("scope").(string); !slices.Contains(strings.Fields(scope), "care.read.user") || strings.Contains(scope, "care.read.assistant") {
			t.Fatalf("%s asked without scope and got %q, want care.read.user", name, scope)
		}
		if status, _ := mcpStatus(t, s.URL, tok.AccessToken); status != http.StatusOK {
			t.Fatalf("%s: /mcp with the new token: %d", name, status)
		}
		return conf, tok, back.Query().Get("code"), v
	}
	conf, tok, code, v := link("Host A")
	_, other, _, _ := link("Host B")

	var re *oauth2.RetrieveError
	if _, err := conf.Exchange(ctx, code, oauth2.VerifierOption(v)); !errors.As(err, &re) || re.ErrorCode != "invalid_grant" {
		t.Fatalf("second use of the code: %v, want invalid_grant", err)
	}
	if status, wa := mcpStatus(t, s.URL, tok.AccessToken); status != http.StatusUnauthorized || !strings.Contains(wa, `error="invalid_token"`) {
		t.Fatalf("the first exchange's token after the code's reuse: %d %q, want 401 invalid_token", status, wa)
	}
	if _, err := conf.TokenSource(ctx, &oauth2.Token{RefreshToken: tok.RefreshToken}).Token(); err == nil {
		t.Fatal("the first exchange's refresh token still refreshes")
	}
	list, err := harness.Run(ctx, bin, "grants", "list", "--db", s.DB, "--all")
	if err != nil || !strings.Contains(list, "by authorization code reuse") {
		t.Fatalf("unsay grants list --all: %v\n%s\nwant a grant revoked by authorization code reuse", err, list)
	}
	if status, _ := mcpStatus(t, s.URL, other.AccessToken); status != http.StatusOK {
		t.Fatalf("host B's token (its code used once): %d, want 200", status)
	}
}
