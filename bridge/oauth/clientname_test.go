package oauth

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"golang.org/x/oauth2"

	"github.com/unsay/unsay/store"
)

// spoofNames are client names that would not read on the consent page as
// what they are, each with the code point the refusal must name.
var spoofNames = []struct{ name, value, codePoint string }{
	{"right-to-left override", "Unsay Care \u202Enoitacilppa", "U+202E"},
	{"left-to-right embedding", "\u202AUnsay", "U+202A"},
	{"right-to-left isolate", "Unsay \u2067official\u2069", "U+2067"},
	{"right-to-left mark", "Unsay\u200F Care", "U+200F"},
	{"Arabic letter mark", "Unsay\u061C Care", "U+061C"},
	{"zero-width space", "Un\u200Bsay", "U+200B"},
	{"byte-order mark", "\uFEFFUnsay", "U+FEFF"},
	{"tab", "Unsay\tCare", "U+0009"},
	{"newline", "Unsay\nAllowed by your care team", "U+000A"},
	{"line separator", "Unsay\u2028Care", "U+2028"},
	{"private use", "Unsay \uE000", "U+E000"},
	{"Hangul filler after spaces (V6c)", "Dr Mensah, GP (NHS)   \u3164", "U+3164"},
	{"halfwidth Hangul filler", "Unsay\uFFA0Care", "U+FFA0"},
	{"braille pattern blank", "Unsay \u2800", "U+2800"},
	{"object replacement character", "Unsay \uFFFC", "U+FFFC"},
	{"101 characters", strings.Repeat("a", 101), "at most 100 characters"},
	{"101 four-byte characters", strings.Repeat("🦵", 101), "at most 100 characters"},
}

// fairNames are names in other scripts that must still be accepted,
// including the two format characters the rule lets through.
var fairNames = []string{
	"Desk assistant",
	"مساعد الرعاية",                // Arabic, right-to-left letters without controls
	"می\u200Cخواهم",                // Persian with a zero-width non-joiner
	"👩\u200D⚕\uFE0F Care",          // an emoji ZWJ sequence
	strings.Repeat("护", 100),       // 100 three-byte characters
	strings.Repeat("🦵", 100),       // 100 four-byte characters
	"Ürün Asistanı — Sağlık (2.0)", // punctuation and accents
	"돌봄 도우미",                       // Korean, Hangul syllables (not fillers)
}

// TestDynamicRegistration_RefusesClientNamesThatDoNotReadAsWritten: a
// client registered "Unsay Care" + U+202E + "noitacilppa" and the consent
// page showed it reversed, as another app's name. A name with a bidi
// control, another format or control character, a separator or private-use
// character, or more than 100 characters is refused with
// invalid_client_metadata naming the rule and the code point, and nothing
// is stored; names in any script without those are registered as written.
func TestDynamicRegistration_RefusesClientNamesThatDoNotReadAsWritten(t *testing.T) {
	f := newFixture(t, nil)
	register := func(name string) (int, map[string]any) {
		body, _ := json.Marshal(map[string]any{"redirect_uris": []string{redirectURI}, "token_endpoint_auth_method": "none", "client_name": name})
		resp, err := http.Post(f.as.Issuer()+PathRegister, "application/json", strings.NewReader(string(body)))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var m map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&m)
		return resp.StatusCode, m
	}
	for _, tc := range spoofNames {
		status, m := register(tc.value)
		desc, _ := m["error_description"].(string)
		if status != http.StatusBadRequest || m["error"] != "invalid_client_metadata" ||
			!strings.Contains(desc, "client_name") || !strings.Contains(desc, tc.codePoint) {
			t.Errorf("%s: %d %v; want 400 invalid_client_metadata naming client_name and %s", tc.name, status, m, tc.codePoint)
		}
		if strings.ContainsAny(desc, "\u202E\u202A\u2067\u200F\u061C\u200B\uFEFF\t\n\u2028\uE000") {
			t.Errorf("%s: the refusal echoes the character: %q", tc.name, desc)
		}
	}
	if cs, err := f.st.OAuthClients(t.Context()); err != nil || len(cs) != 0 {
		t.Fatalf("refused registrations left %d clients (%v)", len(cs), err)
	}
	for _, name := range fairNames {
		status, m := register(name)
		if status != http.StatusCreated || m["client_name"] != name {
			t.Errorf("%q: %d %v; want 201 with the name as written", name, status, m)
			continue
		}
		if c, err := f.st.OAuthClient(t.Context(), m["client_id"].(string)); err != nil || c.Name != name {
			t.Errorf("%q stored as %q (%v)", name, c.Name, err)
		}
	}
}

// TestClientIDMetadataDocument_RefusesClientNamesThatDoNotReadAsWritten:
// the same rule holds for a Client ID Metadata Document's client_name (an
// over-long one was silently replaced by the host, a bidi one kept): the
// document is refused as invalid_client_metadata; a fair name in another
// script is kept as written, and a document with no name is shown by its
// host.
func TestClientIDMetadataDocument_RefusesClientNamesThatDoNotReadAsWritten(t *testing.T) {
	h := newMetadataHost(t)
	f := newFixture(t, func(c *Config) { c.MetadataClient = h.srv.Client() })
	doc := func(path, name string) string {
		h.docs[path] = map[string]any{"client_id": h.url(path), "client_name": name, "redirect_uris": []string{redirectURI}}
		return h.url(path)
	}
	for i, tc := range spoofNames {
		id := doc("/spoof"+string(rune('a'+i))+".json", tc.value)
		_, err := f.as.clients.get(t.Context(), id)
		if err == nil || !strings.Contains(err.Error(), "invalid_client_metadata") || !strings.Contains(err.Error(), tc.codePoint) {
			t.Errorf("%s: %v; want refused as invalid_client_metadata naming %s", tc.name, err, tc.codePoint)
		}
	}
	for i, name := range fairNames {
		id := doc("/fair"+string(rune('a'+i))+".json", name)
		if c, err := f.as.clients.get(t.Context(), id); err != nil || c.Name != name {
			t.Errorf("%q: %q %v; want kept as written", name, c.Name, err)
		}
	}
	id := doc("/nameless.json", "")
	if c, err := f.as.clients.get(t.Context(), id); err != nil || c.Name != hostOf(id) {
		t.Errorf("a nameless document: %q %v; want its host", c.Name, err)
	}
}

// TestConsent_AStoredSpoofedNameIsShownWithoutItsControlsAndIsolated: a
// client stored before the rule (or by any path that skipped it) still
// cannot spoof its name on the consent page: the controls are dropped, the
// name is HTML-escaped and isolated in <bdi> in the heading and the text,
// and between U+2068 and U+2069 in the title. A fair right-to-left name is
// shown whole, isolated the same way.
func TestConsent_AStoredSpoofedNameIsShownWithoutItsControlsAndIsolated(t *testing.T) {
	f := newFixture(t, nil)
	for _, tc := range []struct {
		stored, shown string
	}{
		{"Evil\u202E<b>ppa</b>\u200B\nCare", "Evil&lt;b&gt;ppa&lt;/b&gt;Care"},
		{strings.Repeat("x", 150), strings.Repeat("x", 100) + "…"},
		{"مساعد الرعاية", "مساعد الرعاية"},
	} {
		id := "dyn-stored" + time.Now().Format("150405.000000000")
		if err := f.st.PutOAuthClient(t.Context(), store.OAuthClient{ID: id, Kind: store.ClientDynamic, Name: tc.stored,
			RedirectURIs: []string{redirectURI}, GrantTypes: []string{"authorization_code"}, CreatedAt: time.Now()}); err != nil {
			t.Fatal(err)
		}
		conf := f.config(id, "")
		conf.Endpoint.AuthStyle = oauth2.AuthStyleInParams
		p := f.authorize(conf.AuthCodeURL("s", oauth2.S256ChallengeOption(oauth2.GenerateVerifier())))
		if p.status != http.StatusOK {
			t.Fatalf("consent page for %q: %d %s", tc.stored, p.status, p.body)
		}
		for _, want := range []string{
			"<h1>Link <bdi>" + tc.shown + "</bdi> to a care plan</h1>",
			"<strong><bdi>" + tc.shown + "</bdi></strong> is asking",
			"<title>Link \u2068" + tc.shown + "\u2069 to a care plan — Unsay</title>",
		} {
			if !strings.Contains(p.body, want) {
				t.Errorf("stored %q: the page lacks %q:\n%s", tc.stored, want, p.body)
			}
		}
		if strings.ContainsAny(p.body, "\u202E\u200B") || strings.Contains(p.body, "<b>ppa") {
			t.Errorf("stored %q: a control or markup reached the page", tc.stored)
		}
		// The same isolation on the confirm step, after the code.
		p = f.post(p, url.Values{"action": {"code"}, "code": {f.linkCode("ray")}})
		if !strings.Contains(p.body, "<h1>Allow <bdi>"+tc.shown+"</bdi> to read") ||
			!strings.Contains(p.body, "<strong><bdi>"+tc.shown+"</bdi></strong> can:") {
			t.Errorf("stored %q: confirm step:\n%s", tc.stored, p.body)
		}
	}
}
