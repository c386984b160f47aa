package skill

import (
	"bytes"
	"context"
	"encoding/json"
	"html"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// tokenLinks is a Links with account linking: tokens map to patients until
// revoked; code links come from the embedded fakeLinks.
type tokenLinks struct {
	fakeLinks
	mu      sync.Mutex
	tokens  map[string]string // access token → patient
	revoked map[string]bool
}

func (l *tokenLinks) PatientForAccessToken(_ context.Context, tok string) (string, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	p, ok := l.tokens[tok]
	if !ok || l.revoked[tok] {
		return "", ErrAccessTokenInvalid
	}
	return p, nil
}

func (l *tokenLinks) revoke(tok string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.revoked[tok] = true
}

// accountTurn sends a launch carrying accessToken (none when "") to a skill
// without request verification and without a default patient.
func accountTurn(t *testing.T, links Links, accessToken string) ResponseEnvelope {
	t.Helper()
	return accountTurnTo(t, Config{}, rayCare(), links, accessToken)
}

// accountTurnTo is accountTurn to a skill configured by cfg (its clock
// set to t0) over care.
func accountTurnTo(t *testing.T, cfg Config, care *fakeCare, links Links, accessToken string) ResponseEnvelope {
	t.Helper()
	cfg.Clock = func() time.Time { return t0 }
	s, err := New(cfg, care, links)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s)
	defer srv.Close()
	var env map[string]any
	if err := json.Unmarshal(envelope(reqOpts{}), &env); err != nil {
		t.Fatal(err)
	}
	if accessToken != "" {
		env["context"].(map[string]any)["System"].(map[string]any)["user"].(map[string]any)["accessToken"] = accessToken
	}
	body, _ := json.Marshal(env)
	resp, err := http.Post(srv.URL, "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out ResponseEnvelope
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&out) != nil {
		t.Fatalf("status %d", resp.StatusCode)
	}
	return out
}

func speechOf(out ResponseEnvelope) string {
	if out.Response.OutputSpeech == nil {
		return ""
	}
	return html.UnescapeString(out.Response.OutputSpeech.SSML)
}

func TestAccountLinking_ALinkedAccessTokenSpeaksItsPatientsFacts(t *testing.T) {
	links := &tokenLinks{tokens: map[string]string{"tok-ray": "ray"}, revoked: map[string]bool{}}
	out := accountTurn(t, links, "tok-ray")
	if sp := speechOf(out); !strings.Contains(sp, "weight") && !strings.Contains(sp, "walking") && !strings.Contains(sp, "Walk") {
		t.Fatalf("a linked token did not reach Ray's care notes: %s", sp)
	}
	if out.Response.Card != nil && out.Response.Card.Type == CardLinkAccount {
		t.Fatal("a linked device was asked to link")
	}
}

func TestAccountLinking_ARevokedOrMissingTokenGetsTheLinkAccountCardAndAnExplanation(t *testing.T) {
	links := &tokenLinks{tokens: map[string]string{"tok-ray": "ray"}, revoked: map[string]bool{}}
	links.revoke("tok-ray")
	for name, tc := range map[string]struct {
		token string
		words string
	}{
		"revoked": {"tok-ray", "isn't working"},
		"missing": {"", "isn't linked"},
		"forged":  {"tok-forged", "isn't working"},
	} {
		t.Run(name, func(t *testing.T) {
			out := accountTurn(t, links, tc.token)
			if out.Response.Card == nil || out.Response.Card.Type != CardLinkAccount {
				t.Fatalf("card %+v, want LinkAccount", out.Response.Card)
			}
			sp := speechOf(out)
			if !strings.Contains(sp, tc.words) || !strings.Contains(sp, "Link account") || !strings.Contains(sp, "my code is") {
				t.Fatalf("speech %q: want %q, the Alexa app's Link account and the code fallback", sp, tc.words)
			}
			if strings.Contains(sp, "Full weight") || strings.Contains(sp, "weight-bearing") {
				t.Fatalf("an unlinked device heard Ray's notes: %s", sp)
			}
			// T11: a forged token is no removed link; the skill cannot tell
			// a revoked token from one that never was, so it says neither.
			if strings.Contains(sp, "was removed") {
				t.Fatalf("a refused token is told the link was removed: %s", sp)
			}
			b, _ := json.Marshal(out.Response.Card)
			if string(b) != `{"type":"LinkAccount"}` {
				t.Fatalf("LinkAccount card JSON %s, want the type alone", b)
			}
		})
	}
}

func TestAccountLinking_ARefusedTokenFallsBackToTheCodeLink(t *testing.T) {
	links := &tokenLinks{tokens: map[string]string{}, revoked: map[string]bool{}}
	links.linked = map[string]string{testUserID: "ray"}
	out := accountTurn(t, links, "tok-stale")
	if out.Response.Card != nil {
		t.Fatalf("a code-linked device was sent a card: %+v", out.Response.Card)
	}
	if sp := speechOf(out); strings.Contains(sp, "isn't linked") || strings.Contains(sp, "isn't working") {
		t.Fatalf("a code-linked device was told it is unlinked: %s", sp)
	}
}

func TestAccountLinking_WithoutAccountLinksTheUnlinkedReplyOffersTheCodeOnly(t *testing.T) {
	out := accountTurn(t, &fakeLinks{}, "tok-anything")
	if out.Response.Card != nil {
		t.Fatalf("card %+v without account linking", out.Response.Card)
	}
	if sp := speechOf(out); strings.Contains(sp, "Link account") || !strings.Contains(sp, "my code is") {
		t.Fatalf("speech %q", sp)
	}
}

// F11: in demo mode (Config.DefaultPatient) a device that presents an
// account-linking token that fails verification — revoked, or garbage —
// is told so and gets the LinkAccount card, as without the flag: it is
// not served as the default patient and does not use up his retraction.
// Twins: a device that sends no token is still the default patient, and a
// valid token still reaches its own patient.
func TestAccountLinking_DemoModeServesTheDefaultPatientOnlyWithoutAToken(t *testing.T) {
	links := &tokenLinks{tokens: map[string]string{"tok-bob": "bob", "tok-old": "bob"}, revoked: map[string]bool{}}
	links.revoke("tok-old")
	demo := Config{DefaultPatient: "ray"}
	for name, tc := range map[string]struct {
		token       string
		linkAccount bool
		words       string
	}{
		"revoked token": {"tok-old", true, "isn't working"},
		"garbage token": {"garbage.token.x", true, "isn't working"},
		"no token":      {"", false, "Stop — your walking instruction has changed."},
	} {
		t.Run(name, func(t *testing.T) {
			care := rayCare()
			care.setPending("ray", retractionWB())
			care.facts["ray"][0] = retractionWB().Current
			out := accountTurnTo(t, demo, care, links, tc.token)
			gotCard := out.Response.Card != nil && out.Response.Card.Type == CardLinkAccount
			sp := speechOf(out)
			if gotCard != tc.linkAccount || !strings.Contains(sp, tc.words) {
				t.Fatalf("card %+v, speech %q; want LinkAccount %v and %q", out.Response.Card, sp, tc.linkAccount, tc.words)
			}
			heard := care.heardCalls()
			if tc.linkAccount && (len(heard) != 0 || strings.Contains(sp, wbV3Text)) {
				t.Errorf("a refused token was served as Ray: marked %+v, speech %q", heard, sp)
			}
			if !tc.linkAccount && len(heard) == 0 {
				t.Errorf("the demo device without a token was not served as Ray: nothing marked")
			}
		})
	}
	out := accountTurnTo(t, demo, rayCare(), links, "tok-bob")
	if out.Response.Card != nil || strings.Contains(speechOf(out), "isn't working") {
		t.Errorf("a valid token in demo mode: card %+v, speech %q; want its patient served", out.Response.Card, speechOf(out))
	}
}
