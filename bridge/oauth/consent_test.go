package oauth

import (
	"html"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/oauth2"

	"github.com/unsay/unsay/store"
)

// TestConsent_GlobalLinkPauseSaysHowLongAndEnds: while wrong codes from
// every device together pause linking (store.LinkPausedError), the consent
// page said "wait fifteen minutes" whatever the pause was. Now it says it
// is paused for everyone and for how long, in whole minutes rounded up
// (four, then one), with a Retry-After in seconds to match; a right code
// works once the pause has ended. The twin: a person who alone typed too
// many wrong codes is still told fifteen minutes (their own block).
func TestConsent_GlobalLinkPauseSaysHowLongAndEnds(t *testing.T) {
	var mu sync.Mutex
	now := time.Now().UTC().Truncate(time.Second)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	set := func(t time.Time) { mu.Lock(); defer mu.Unlock(); now = t }
	f := newFixture(t, func(c *Config) { c.Clock = clock })
	start := clock()
	for i := range store.LinkGlobalMaxFailures {
		_, err := f.st.RedeemLinkCodeForConsent(t.Context(), "consent:10.0.0."+strconv.Itoa(i), "111111", start.Add(-6*time.Minute))
		if err == nil {
			t.Fatal("a wrong code was redeemed")
		}
	}
	conf := f.config(f.publicClient(), "")
	p := f.authorize(conf.AuthCodeURL("s", oauth2.S256ChallengeOption(oauth2.GenerateVerifier())))
	code := f.linkCode("ray")
	for _, tc := range []struct {
		at    time.Time
		words string
		retry int
	}{
		{start, "Please try your code again in four minutes.", 240},
		{start.Add(3*time.Minute + 30*time.Second), "Please try your code again in one minute.", 30},
	} {
		set(tc.at)
		got := f.post(p, url.Values{"action": {"code"}, "code": {code}})
		if got.status != http.StatusTooManyRequests || !strings.Contains(got.body, "paused for everyone") ||
			!strings.Contains(got.body, tc.words) || strings.Contains(got.body, "fifteen") {
			t.Errorf("at +%v: %d, want 429 saying %q:\n%s", tc.at.Sub(start), got.status, tc.words, got.body)
		}
		if ra := got.header.Get("Retry-After"); ra != strconv.Itoa(tc.retry) {
			t.Errorf("at +%v: Retry-After %q, want %d", tc.at.Sub(start), ra, tc.retry)
		}
	}
	set(start.Add(4*time.Minute + time.Second))
	if got := f.post(p, url.Values{"action": {"code"}, "code": {code}}); got.status != http.StatusOK || !strings.Contains(got.body, "Allow") {
		t.Fatalf("after the pause, the right code: %d\n%s", got.status, got.body)
	}

	// The twin: this address's own block.
	p = f.authorize(conf.AuthCodeURL("s", oauth2.S256ChallengeOption(oauth2.GenerateVerifier())))
	var got page
	for range store.LinkMaxFailures + 1 {
		got = f.post(p, url.Values{"action": {"code"}, "code": {"222222"}})
	}
	if got.status != http.StatusTooManyRequests || !strings.Contains(got.body, "wait fifteen minutes") || strings.Contains(got.body, "everyone") {
		t.Fatalf("one address's own block: %d\n%s", got.status, got.body)
	}
}

// TestConsent_ASixDigitWrongCodeSaysItDidNotWork: "000000" and "012345"
// (six digits, though no code starts with 0) were answered "A linking code
// has six digits", which they have. Every six-digit wrong code now says
// the code didn't work (and counts as a wrong try); the twin: a code
// without six digits is still told it needs six, and the right code then
// works.
func TestConsent_ASixDigitWrongCodeSaysItDidNotWork(t *testing.T) {
	f := newFixture(t, nil)
	conf := f.config(f.publicClient(), "")
	p := f.authorize(conf.AuthCodeURL("s", oauth2.S256ChallengeOption(oauth2.GenerateVerifier())))
	for _, tc := range []struct{ code, want string }{
		{"000000", "didn&#39;t work"},
		{"012345", "didn&#39;t work"},
		{"12345", "has six digits"},
		{"1234567", "has six digits"},
		{"12a456", "has six digits"},
	} {
		got := f.post(p, url.Values{"action": {"code"}, "code": {tc.code}})
		other := map[string]string{"didn&#39;t work": "has six digits", "has six digits": "didn&#39;t work"}[tc.want]
		if got.status != http.StatusBadRequest || !strings.Contains(got.body, tc.want) || strings.Contains(got.body, other) {
			t.Errorf("code %q: %d, want 400 saying %q:\n%s", tc.code, got.status, tc.want, got.body)
		}
	}
	if got := f.post(p, url.Values{"action": {"code"}, "code": {f.linkCode("ray")}}); got.status != http.StatusOK || !strings.Contains(got.body, "Allow") {
		t.Fatalf("the right code after the wrong ones: %d\n%s", got.status, got.body)
	}
}

// TestConsent_OnlyTheBrowserThatOpenedThePageCanAnswerIt: the consent page
// was not bound to the carer's browser, so the client that started the
// request (holding the page's id and csrf) could press Allow itself once
// the carer had typed the code. The first browser to open the page now
// binds it (consentCookie); a POST without that cookie, or with another
// browser's, is 403 whatever it asks — the code, Allow, Deny — and changes
// nothing: the carer's browser then redeems the same code and completes
// the flow. A second browser opening the page is refused too, and a
// request first opened by the client's own fetch cannot be answered from
// the carer's browser.
func TestConsent_OnlyTheBrowserThatOpenedThePageCanAnswerIt(t *testing.T) {
	f := newFixture(t, nil)
	conf := f.config(f.publicClient(), "")
	carer := f.authorize(conf.AuthCodeURL("s", oauth2.S256ChallengeOption(oauth2.GenerateVerifier())))
	if carer.status != http.StatusOK {
		t.Fatalf("the carer's page: %d\n%s", carer.status, carer.body)
	}
	ck := carer.header.Get("Set-Cookie")
	for _, want := range []string{consentCookie + "=", "Path=" + PathConsent, "HttpOnly", "SameSite=Lax"} {
		if !strings.Contains(ck, want) {
			t.Errorf("consent cookie %q lacks %q", ck, want)
		}
	}
	if strings.Contains(ck, "Secure") {
		t.Errorf("consent cookie %q is Secure on an http issuer (the browser would drop it)", ck)
	}
	id := html.UnescapeString(reID.FindStringSubmatch(carer.body)[1])
	csrf := html.UnescapeString(reCSRF.FindStringSubmatch(carer.body)[1])

	// The other party: its own browser, which fetched the consent URL.
	other := &fixture{t: t, st: f.st, as: f.as, srv: f.srv}
	if p := other.get(f.as.Issuer() + PathConsent + "?id=" + id); p.status != http.StatusForbidden ||
		!strings.Contains(p.body, "opened in another browser") || strings.Contains(p.body, csrf) {
		t.Fatalf("a second browser opening the page: %d, want 403 without the form\n%s", p.status, p.body)
	}
	forged := "unsay_consent=" + randomToken(32)
	attempt := func(step string, form url.Values) {
		t.Helper()
		form.Set("id", id)
		form.Set("csrf", csrf)
		for _, who := range []struct {
			name   string
			client *http.Client
			cookie string
			says   string
		}{
			{"no cookie", noRedirect, "", "needs its cookie"},
			{"its own cookie", other.browser(), "", "opened in another browser"},
			{"a made-up cookie", noRedirect, forged, "opened in another browser"},
		} {
			req, _ := http.NewRequest(http.MethodPost, f.as.Issuer()+PathConsent, strings.NewReader(form.Encode()))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			if who.cookie != "" {
				req.Header.Set("Cookie", who.cookie)
			}
			resp, err := who.client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(b), who.says) {
				t.Errorf("%s from %s: %d %s, want 403 saying %q\n%s", step, who.name, resp.StatusCode, resp.Header.Get("Location"), who.says, b)
			}
		}
	}
	code := f.linkCode("ray")
	attempt("the code", url.Values{"action": {"code"}, "code": {code}})
	attempt("Deny", url.Values{"action": {"deny"}})

	// The carer types the same code (not spent by the refused tries) …
	carer = f.post(carer, url.Values{"action": {"code"}, "code": {code}})
	if carer.status != http.StatusOK || !strings.Contains(carer.body, "Allow") {
		t.Fatalf("the carer's code after the refused tries: %d\n%s", carer.status, carer.body)
	}
	// … and now the other party tries to answer for them.
	attempt("Allow", url.Values{"action": {"allow"}})
	attempt("Deny", url.Values{"action": {"deny"}})
	if gs, _ := f.st.OAuthGrants(t.Context(), store.OAuthGrantFilter{}); len(gs) != 0 {
		t.Fatalf("grants made by refused answers: %+v", gs)
	}
	got := f.post(carer, url.Values{"action": {"allow"}})
	if got.status != http.StatusSeeOther || !strings.HasPrefix(got.location, redirectURI+"?code=") {
		t.Fatalf("the carer's Allow: %d %q\n%s", got.status, got.location, got.body)
	}

	// A request whose page the client fetched first is bound to the
	// client: the carer's browser is refused, and so is the client's
	// Allow (no code was typed in its browser).
	req := other.authorize(conf.AuthCodeURL("s2", oauth2.S256ChallengeOption(oauth2.GenerateVerifier())))
	id2 := html.UnescapeString(reID.FindStringSubmatch(req.body)[1])
	if p := f.get(f.as.Issuer() + PathConsent + "?id=" + id2); p.status != http.StatusForbidden {
		t.Fatalf("the carer opening a page the client opened first: %d\n%s", p.status, p.body)
	}
}
