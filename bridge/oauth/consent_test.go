package oauth

import (
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
