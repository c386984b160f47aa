//go:build e2e

package e2e_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/unsay/unsay/test/harness"
)

// TestBrowser_EchoCardAndClinicianPageInChromium loads /echo.html with a
// reader token at 1280×800 and 960×480 and /clinician at 1280×800 in
// Debian's headless Chromium (playwright-core): nothing overflows the
// viewport, the current walking instruction is visible and updates live, no
// assistant-only text is in the DOM, three quick revisions withdraw every
// sentence the card showed (finding U1), and without a token the card shows only
// how to open it. On the clinician page the author label is prefilled, a
// mistyped patient is named as none of the token's ("did you mean ray?")
// before anything is offered, a mistyped topic asks before it is created,
// and the "did Ray hear it?"
// timeline shows the clinician's revision pending, then — after Ray's next
// turn on his Echo Show, live — heard on the Echo Show, the version he
// heard before withdrawn. Screenshots go to test/artifacts/
// (clinician-timeline-before.png, clinician-timeline-after.png).
func TestBrowser_EchoCardAndClinicianPageInChromium(t *testing.T) {
	const part = "6 headless Chromium"
	node := needNode(t, part, "playwright-core")
	chrome, ok := chromium()
	need(t, part, "Chromium (/usr/bin/chromium)", "apt-get install -y chromium", ok)
	// Ray's Echo Show is any unverified request (loopback only): the
	// clinician's timeline is checked before and after his next turn.
	s := startServer(t, part, "--alexa-verify=false", "--default-patient", "ray")
	reader := token(t, s, part, "care.read.user")
	writer := tokenWith(t, s, part, []string{"care.write", "care.read.user"}, "--sub", "okafor")
	_, err := s.Write(context.Background(), "ray", "weight_bearing", harness.DemoRevision, harness.DemoAuthor, harness.DemoAuthorLabel)
	pending(t, part, err)
	runChecks(t, node, "browser.mjs", []string{
		"UNSAY_E2E_URL=" + s.URL, "CHROMIUM=" + chrome, "TOKEN_READER=" + reader, "TOKEN_WRITER=" + writer,
		"WRITE_SECRET=" + harness.WriteSecret, "ARTIFACTS=" + filepath.Join(testDir, "artifacts", "screenshots"),
	}, 3*time.Minute)
}

// TestBrowser_BadLinksAndTokensShowARefusalAPersonCanActOn: a broken
// link or token showed the browser's own words ("Failed to execute 'atob'
// on 'Window'…") on the clinician page, or "Can't reach your care notes
// right now — trying again" forever on the Echo card for a token with a
// %00 after it. In headless Chromium, echo.html#token= with a stray %00, a
// space, a letter outside ASCII (each unsendable in an Authorization
// header), a forged signature or a token cut short (each a 401), or a
// token that reads only assistant-only notes, shows the refusal and keeps
// it; the clinician's sign-in with a token that is not
// base64url, not JSON, an array, two parts, or carries a character no
// header can hold says "That sign-in token is not valid; ask for a new
// one." Each has its twin: the good link and the good token still work.
// A screenshot goes to test/artifacts/ (clinician-bad-token.png).
func TestBrowser_BadLinksAndTokensShowARefusalAPersonCanActOn(t *testing.T) {
	const part = "6 headless Chromium"
	node := needNode(t, part, "playwright-core")
	chrome, ok := chromium()
	need(t, part, "Chromium (/usr/bin/chromium)", "apt-get install -y chromium", ok)
	s := startServer(t, part)
	reader := token(t, s, part, "care.read.user")
	writer := tokenWith(t, s, part, []string{"care.write", "care.read.user"}, "--sub", "okafor")
	assistant := tokenWith(t, s, part, []string{"care.read.assistant"})
	runChecks(t, node, "browser-links.mjs", []string{
		"UNSAY_E2E_URL=" + s.URL, "CHROMIUM=" + chrome, "TOKEN_READER=" + reader, "TOKEN_WRITER=" + writer, "TOKEN_ASSISTANT=" + assistant,
		"ARTIFACTS=" + filepath.Join(testDir, "artifacts", "screenshots"),
	}, 3*time.Minute)
}

// TestBrowser_AnExpiredLinkStopsShowingTheInstructionsAsCurrent: when its
// token expired, the Echo Show card kept showing the superseded walking
// instruction under a green "● Live" for minutes (the server withholds
// the update and pings; the page ignored the refused answer), and the
// clinician page kept "Current version" and "Live". In headless Chromium
// (js/browser-expiry.mjs) a card whose token expires during the test shows
// the expired-link refusal and no instruction, the clinician page signs
// out saying the sign-in expired; the twin, a card with a lasting token,
// shows the revision written after the expiry and says "Live" (P-24).
func TestBrowser_AnExpiredLinkStopsShowingTheInstructionsAsCurrent(t *testing.T) {
	const part = "6 headless Chromium"
	node := needNode(t, part, "playwright-core")
	chrome, ok := chromium()
	need(t, part, "Chromium (/usr/bin/chromium)", "apt-get install -y chromium", ok)
	s := startServer(t, part, "--alexa-verify=false", "--default-patient", "ray")
	reader := token(t, s, part, "care.read.user")
	short := tokenWith(t, s, part, []string{"care.read.user"}, "--ttl", "20s")
	writer := tokenWith(t, s, part, []string{"care.write", "care.read.user"}, "--sub", "okafor", "--ttl", "20s")
	runChecks(t, node, "browser-expiry.mjs", []string{
		"UNSAY_E2E_URL=" + s.URL, "CHROMIUM=" + chrome, "TOKEN_SHORT=" + short, "TOKEN_READER=" + reader,
		"TOKEN_WRITER_SHORT=" + writer, "WRITE_SECRET=" + harness.WriteSecret,
	}, 2*time.Minute)
}

// TestBrowser_AReReadThatFailsHidesTheOldWordsUntilTheNewOnesShow: when
// the Echo Show card's re-read of a revised fact failed once (a Wi-Fi
// blip), it kept the superseded walking instruction on screen as current
// under "Live" and never tried again (finding U7). In headless Chromium
// (js/browser-reread.mjs), with the card's reads refused while its event
// stream stays open, a revision turns the walking row into "This
// instruction has just changed, and the card can't show the new words
// yet", the old words gone and the status not "Live"; the card reads
// again until the reads work, then shows the new words with the old ones
// struck through and says "Live". The twin: a revision whose re-read works
// shows at once, "Live" throughout (P-24).
func TestBrowser_AReReadThatFailsHidesTheOldWordsUntilTheNewOnesShow(t *testing.T) {
	const part = "6 headless Chromium"
	node := needNode(t, part, "playwright-core")
	chrome, ok := chromium()
	need(t, part, "Chromium (/usr/bin/chromium)", "apt-get install -y chromium", ok)
	s := startServer(t, part)
	reader := token(t, s, part, "care.read.user")
	runChecks(t, node, "browser-reread.mjs", []string{
		"UNSAY_E2E_URL=" + s.URL, "CHROMIUM=" + chrome, "TOKEN_READER=" + reader, "WRITE_SECRET=" + harness.WriteSecret,
	}, 2*time.Minute)
}

// TestBrowser_AReviewDateThatPassesWhileTheCardIsOpenIsMarked: the voice
// said an instruction was past its review date as soon as the date passed,
// but the Echo Show card, open all the while, showed it unmarked until it
// was read again (finding U15). In headless Chromium
// (js/browser-review.mjs) the walking instruction, reviewed 8 s after it
// is written, is marked "past its review date" within 2 s of that date
// with no read (the read carries unsay/staleAfter); the twin, reviewed in
// an hour, is not marked (P-7, P-24). The clinician page says the same
// under the current words: the review date, then, once it passes, that Ray
// hears it as past its review date.
func TestBrowser_AReviewDateThatPassesWhileTheCardIsOpenIsMarked(t *testing.T) {
	const part = "6 headless Chromium"
	node := needNode(t, part, "playwright-core")
	chrome, ok := chromium()
	need(t, part, "Chromium (/usr/bin/chromium)", "apt-get install -y chromium", ok)
	s := startServer(t, part)
	reader := token(t, s, part, "care.read.user")
	writer := tokenWith(t, s, part, []string{"care.write", "care.read.user"}, "--sub", "okafor")
	runChecks(t, node, "browser-review.mjs", []string{
		"UNSAY_E2E_URL=" + s.URL, "CHROMIUM=" + chrome, "TOKEN_READER=" + reader, "TOKEN_WRITER=" + writer, "WRITE_SECRET=" + harness.WriteSecret,
	}, 2*time.Minute)
}

// TestBrowser_AHalfOpenEventStreamIsGivenUpAndTheCardReadsAgain: with the
// card's event stream stalled without a FIN (a Wi-Fi stall, a NAT drop),
// a revision sent into it was lost for good and the card said "Live" over
// the old words (finding V3). In headless Chromium
// (js/browser-halfopen.mjs), through a proxy that freezes the stream's
// connection, the card gives the silent stream up, opens it again, reads
// every fact again and shows the new words with the old struck through,
// then "Live" (P-24); within 20 s of the stream's last byte, before it is
// given up, it stops saying "Live" and shows "This card is out of date".
func TestBrowser_AHalfOpenEventStreamIsGivenUpAndTheCardReadsAgain(t *testing.T) {
	const part = "6 headless Chromium"
	node := needNode(t, part, "playwright-core")
	chrome, ok := chromium()
	need(t, part, "Chromium (/usr/bin/chromium)", "apt-get install -y chromium", ok)
	port, err := harness.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	s := startServer(t, part, "--allowed-origin", fmt.Sprintf("http://127.0.0.1:%d", port))
	reader := token(t, s, part, "care.read.user")
	runChecks(t, node, "browser-halfopen.mjs", []string{
		"UNSAY_E2E_URL=" + s.URL, "PROXY_PORT=" + fmt.Sprint(port), "CHROMIUM=" + chrome, "TOKEN_READER=" + reader,
		"WRITE_SECRET=" + harness.WriteSecret,
	}, 2*time.Minute)
}
