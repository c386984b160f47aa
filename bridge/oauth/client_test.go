package oauth

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/oauth2"

	"github.com/unsay/unsay/bridge/auth"
	"github.com/unsay/unsay/models"
	"github.com/unsay/unsay/store"
)

// metadataHost serves Client ID Metadata Documents over TLS (httptest's
// certificate; the authorization server trusts it through its client).
type metadataHost struct {
	srv     *httptest.Server
	docs    map[string]any // path → document
	fetches atomic.Int32
}

func newMetadataHost(t *testing.T) *metadataHost {
	h := &metadataHost{docs: map[string]any{}}
	h.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.fetches.Add(1)
		doc, ok := h.docs[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		switch d := doc.(type) {
		case string:
			_, _ = w.Write([]byte(d))
		default:
			_ = json.NewEncoder(w).Encode(d)
		}
	}))
	t.Cleanup(h.srv.Close)
	return h
}

func (h *metadataHost) url(path string) string { return h.srv.URL + path }

func TestClientIDMetadataDocument_AnHTTPSClientIDIsFetchedValidatedAndCached(t *testing.T) {
	h := newMetadataHost(t)
	id := h.url("/oauth/client.json")
	h.docs["/oauth/client.json"] = map[string]any{"client_id": id, "client_name": "Hosted agent", "redirect_uris": []string{redirectURI},
		"token_endpoint_auth_method": "none"}
	f := newFixture(t, func(c *Config) { c.MetadataClient = h.srv.Client() })
	conf := f.config(id, "")
	conf.Endpoint.AuthStyle = oauth2.AuthStyleInParams
	v := oauth2.GenerateVerifier()
	p := f.authorize(conf.AuthCodeURL("s", oauth2.S256ChallengeOption(v)))
	if !strings.Contains(p.body, "Hosted agent") || !strings.Contains(p.body, "registered itself") {
		t.Fatalf("consent page for a metadata-document client:\n%s", p.body)
	}
	p = f.post(p, map[string][]string{"action": {"code"}, "code": {f.linkCode("ray")}})
	p = f.post(p, map[string][]string{"action": {"allow"}})
	u := mustURL(t, p.location)
	tok, err := conf.Exchange(t.Context(), u.Query().Get("code"), oauth2.VerifierOption(v))
	if err != nil {
		t.Fatalf("exchange for a metadata-document client: %v", err)
	}
	if pr, err := f.principal(tok.AccessToken); err != nil || pr.Patients[0] != "ray" {
		t.Fatalf("principal %+v %v", pr, err)
	}
	if n := h.fetches.Load(); n != 1 {
		t.Fatalf("document fetched %d times in one flow, want 1 (cached in the store)", n)
	}
}

func TestClientIDMetadataDocument_RefusesDocumentsThatDoNotDescribeThemselves(t *testing.T) {
	h := newMetadataHost(t)
	f := newFixture(t, func(c *Config) { c.MetadataClient = h.srv.Client() })
	good := func(path string) map[string]any {
		return map[string]any{"client_id": h.url(path), "client_name": "x", "redirect_uris": []string{redirectURI}}
	}
	cases := map[string]any{
		"/other-id.json": map[string]any{"client_id": h.url("/elsewhere.json"), "redirect_uris": []string{redirectURI}},
		"/secret.json":   func() map[string]any { d := good("/secret.json"); d["client_secret"] = "s"; return d }(),
		"/jwt.json": func() map[string]any {
			d := good("/jwt.json")
			d["token_endpoint_auth_method"] = "private_key_jwt"
			return d
		}(),
		"/bad-redir.json": func() map[string]any {
			d := good("/bad-redir.json")
			d["redirect_uris"] = []string{"javascript:x"}
			return d
		}(),
		"/huge.json":     `{"client_id":"` + h.url("/huge.json") + `","pad":"` + strings.Repeat("a", MaxMetadataBytes) + `"}`,
		"/not-json.json": `<html>`,
	}
	for path, doc := range cases {
		h.docs[path] = doc
		t.Run(path, func(t *testing.T) {
			if _, err := f.as.clients.get(t.Context(), h.url(path)); err == nil {
				t.Fatalf("document %s was accepted", path)
			}
		})
	}
	h.docs["/ok.json"] = good("/ok.json")
	if c, err := f.as.clients.get(t.Context(), h.url("/ok.json")); err != nil || c.Kind != store.ClientMetadata || !c.Public() {
		t.Fatalf("a good document: %+v %v", c, err)
	}
	for _, id := range []string{"http://example.com/c.json", "https://example.com", "https://example.com/", "https://u@example.com/c.json"} {
		if IsMetadataClientID(id) {
			t.Errorf("%q taken for a metadata document URL", id)
		}
	}
}

// TestClientIDMetadataDocument_DefaultClientRefusesPrivateAddresses: the
// fetcher used outside tests refuses loopback, private and link-local
// addresses after resolution (SSRF), and follows no redirect.
func TestClientIDMetadataDocument_DefaultClientRefusesPrivateAddresses(t *testing.T) {
	h := newMetadataHost(t) // on 127.0.0.1
	h.docs["/c.json"] = map[string]any{"client_id": h.url("/c.json"), "redirect_uris": []string{redirectURI}}
	f := newFixture(t, nil) // the default, public-only client
	if _, err := f.as.clients.get(t.Context(), h.url("/c.json")); err == nil || !strings.Contains(err.Error(), "non-public address") {
		t.Fatalf("a loopback metadata URL: %v", err)
	}
	if h.fetches.Load() != 0 {
		t.Fatal("the loopback host was contacted")
	}
	for _, ip := range []string{"127.0.0.1", "10.0.0.1", "192.168.1.1", "169.254.169.254", "::1", "fc00::1", "100.64.0.1", "0.0.0.0"} {
		if publicAddress(net.ParseIP(ip)) {
			t.Errorf("%s counted as public", ip)
		}
	}
	for _, ip := range []string{"8.8.8.8", "2606:4700::1111"} {
		if !publicAddress(net.ParseIP(ip)) {
			t.Errorf("%s counted as private", ip)
		}
	}
}

func TestConfidentialClient_BasicAuthHTTPSRedirectAndRefreshLikeAlexa(t *testing.T) {
	f := newFixture(t, nil)
	const alexaRedirect = "https://pitangui.amazon.com/api/skill/link/M2AAAAAAAAAAAA"
	id, secret, err := RegisterClient(t.Context(), f.st, "Care Notes for Alexa", []string{alexaRedirect}, nil, false, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	conf := &oauth2.Config{ClientID: id, ClientSecret: secret, RedirectURL: alexaRedirect, Scopes: []string{"care.read.user"},
		Endpoint: oauth2.Endpoint{AuthURL: f.as.Issuer() + PathAuthorize, TokenURL: f.as.Issuer() + PathToken, AuthStyle: oauth2.AuthStyleInHeader}}
	v := oauth2.GenerateVerifier()
	p := f.authorize(conf.AuthCodeURL("alexa-state", oauth2.S256ChallengeOption(v)))
	p = f.post(p, map[string][]string{"action": {"code"}, "code": {f.linkCode("ray")}})
	p = f.post(p, map[string][]string{"action": {"allow"}})
	u := mustURL(t, p.location)
	if !strings.HasPrefix(p.location, alexaRedirect+"?") || u.Query().Get("state") != "alexa-state" {
		t.Fatalf("redirect %q", p.location)
	}
	bad := *conf
	bad.ClientSecret = "wrong"
	if _, err := bad.Exchange(t.Context(), u.Query().Get("code"), oauth2.VerifierOption(v)); err == nil {
		t.Fatal("the code was exchanged with a wrong client secret")
	}
	tok, err := conf.Exchange(t.Context(), u.Query().Get("code"), oauth2.VerifierOption(v))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conf.TokenSource(t.Context(), &oauth2.Token{RefreshToken: tok.RefreshToken}).Token(); err != nil {
		t.Fatalf("refresh: %v", err)
	}
	// Another client cannot use this client's refresh token.
	other, otherSecret, _ := RegisterClient(t.Context(), f.st, "other", []string{alexaRedirect}, nil, false, time.Now())
	oc := *conf
	oc.ClientID, oc.ClientSecret = other, otherSecret
	if _, err := oc.TokenSource(t.Context(), &oauth2.Token{RefreshToken: tok.RefreshToken}).Token(); err == nil {
		t.Fatal("another client refreshed this client's grant")
	}
}

// TestKeys_RotationPublishesTheNewKeyBeforeItSignsAndRetiresTheOldOneLater
// drives the keyring on a fake clock: a due rotation adds a key that is in
// the JWKS at once but signs only after publishLead; tokens of the old key
// keep verifying; the old key leaves once its tokens have all expired.
func TestKeys_RotationPublishesTheNewKeyBeforeItSignsAndRetiresTheOldOneLater(t *testing.T) {
	now := time.Now()
	clock := func() time.Time { return now }
	f := newFixture(t, func(c *Config) { c.Clock = clock; c.KeyRotation = 24 * time.Hour })
	ctx := context.Background()
	mint := func() string {
		tok, err := f.as.MintInternal(ctx, "internal:t", "t", []models.Scope{models.ScopeReadUser}, nil, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	kidOf := func(tok string) string {
		var h struct {
			Kid string `json:"kid"`
		}
		b, _ := decodeSegment(strings.Split(tok, ".")[0])
		_ = json.Unmarshal(b, &h)
		return h.Kid
	}
	verifierAt := func() *auth.Verifier {
		v, err := auth.NewVerifier(auth.Config{JWKS: f.as.KeySource(), Issuer: f.as.Issuer(), PublicURL: f.as.Issuer(), Clock: clock})
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	old := mint()
	oldKid := kidOf(old)

	now = now.Add(25 * time.Hour) // rotation due
	if err := f.as.keys.ensure(ctx); err != nil {
		t.Fatal(err)
	}
	if n := len(f.as.keys.published(ctx)); n != 2 {
		t.Fatalf("after rotation the JWKS has %d keys, want 2 (new and old)", n)
	}
	if kid := kidOf(mint()); kid != oldKid {
		t.Fatal("the new key signed before it was published for publishLead")
	}
	now = now.Add(publishLead)
	fresh := mint()
	if kidOf(fresh) == oldKid {
		t.Fatal("the new key does not sign after publishLead")
	}
	v := verifierAt()
	// old expired by now (1 h ttl, 25 h ago); a token of the old key minted just before the switch must verify.
	now = now.Add(-publishLead)
	recentOld := mint()
	now = now.Add(publishLead)
	if _, err := v.Verify(ctx, recentOld, nil); err != nil {
		t.Fatalf("a token of the previous key was refused during the overlap: %v", err)
	}
	if _, err := v.Verify(ctx, fresh, nil); err != nil {
		t.Fatalf("a token of the new key: %v", err)
	}
	now = now.Add(InternalTokenMaxTTL + time.Minute) // every token of the old key has expired
	if err := f.as.keys.ensure(ctx); err != nil {
		t.Fatal(err)
	}
	for _, k := range f.as.keys.published(ctx) {
		if k.ID() == oldKid {
			t.Fatal("the old key is still published after all its tokens expired")
		}
	}
	_ = old
}

func mustURL(t *testing.T, raw string) *url.URL {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func decodeSegment(s string) ([]byte, error) { return base64.RawURLEncoding.DecodeString(s) }
