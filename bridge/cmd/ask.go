package cmd

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/unsay/unsay/apl"
	"github.com/unsay/unsay/bridge/app"
	skillpackage "github.com/unsay/unsay/skill-package"
	"github.com/unsay/unsay/skill/alexaask"
	"github.com/unsay/unsay/skill/alexatest"
)

// aplVersionRE is what --apl-version takes: an APL runtime version as Alexa
// declares one in runtime.maxVersion, "1.0"–"1.9" or a year version
// ("2022.1", "2024.3", and later ones).
var aplVersionRE = regexp.MustCompile(`^(1\.[0-9]|2022\.[1-9]|202[3-9]\.[1-9]|20[3-9][0-9]\.[1-9])$`)

// cmdAsk talks to a running server's /alexa from the terminal:
//
//	unsay ask [--url URL] [--screen=false] [--apl-version V] [--json] "what's my walking instruction"
//
// Each utterance is matched against the skill package's interaction model
// (skill/alexaask): intent, slots, entity resolutions; "open care notes"
// (or "") is a LaunchRequest. Several utterances are turns of one session.
// Unsigned requests suit a development server (--alexa-verify=false
// --default-patient ray, on loopback); --alexa-test-ca DIR signs them with a
// test CA kept in DIR (created on first use: the serve flags are printed
// and it exits 3, nothing asked). --apl-version takes 1.0–1.9 or a year
// version from 2022.1 (aplVersionRE); anything else is a usage error.
// It prints what Ray hears (SSML as plain text), what happens next and what
// the card shows; --json prints the response envelopes, --print-request the
// request bodies.
func cmdAsk(ctx context.Context, args []string) error {
	c, fs := newCommand("ask")
	base := fs.String("url", app.DefaultURL, "the server's base URL; requests go to {url}/alexa")
	skillID := fs.String("alexa-skill-id", "amzn1.ask.skill.unsay-cli", "applicationId the requests carry (must equal the server's --alexa-skill-id when it verifies)")
	locale := fs.String("locale", "en-GB", "interaction model and request locale: en-GB or en-US")
	screen := fs.Bool("screen", true, "an Echo Show (APL card); false for a device without a screen")
	aplVersion := fs.String("apl-version", alexaask.DefaultAPLVersion, "the screen's APL runtime.maxVersion")
	user := fs.String("user-id", "amzn1.ask.account.unsay-cli", "the Alexa user id (an unlinked one hears --default-patient)")
	sessionID := fs.String("session", "", "continue this session id instead of opening a new one")
	testCA := fs.String("alexa-test-ca", "", "sign requests with the test CA in this folder (created when empty); for a server with verification on")
	asJSON := fs.Bool("json", false, "print each response envelope as JSON instead of text")
	printReq := fs.Bool("print-request", false, "also print each request body sent")
	utterances, err := parseFlags(c, fs, args)
	if err != nil {
		return err
	}
	if len(utterances) == 0 {
		return usageErr("ask", `say something: unsay ask "what's my walking instruction" (or "open care notes")`)
	}
	if !aplVersionRE.MatchString(*aplVersion) {
		return usageErr("ask", "--apl-version %q: want an APL runtime version: 1.0 to 1.9, or a year version from 2022.1 (2024.3, the newest, is the default; below %s the screen gets no card)", *aplVersion, apl.MinRuntime)
	}
	var raw []byte
	for _, l := range skillpackage.Locales() {
		if l == *locale {
			raw, err = readModel(l)
			if err != nil {
				return err
			}
		}
	}
	if raw == nil {
		return usageErr("ask", "--locale %q: want one of %s", *locale, strings.Join(skillpackage.Locales(), ", "))
	}
	model, err := alexaask.ParseModel(raw)
	if err != nil {
		return err
	}
	client := &alexaask.Client{URL: strings.TrimRight(*base, "/") + "/alexa"}
	if err := checkBaseURL(*base); err != nil {
		return usageErr("ask", "--url %q is malformed: %v", *base, err)
	}
	if *testCA != "" {
		pki, created, err := loadOrCreateCA(*testCA)
		if err != nil {
			return fmt.Errorf("--alexa-test-ca %s: %w", *testCA, err)
		}
		if created {
			fmt.Fprintf(os.Stderr, "unsay ask: created a test CA in %s; nothing was asked. Start the server trusting it (loopback only), then ask again:\n  unsay serve --alexa-skill-id %s --alexa-roots %s --alexa-cert %s=%s\n",
				*testCA, *skillID, filepath.Join(*testCA, alexatest.RootFile), alexatest.CertURL, filepath.Join(*testCA, alexatest.ChainFile))
			return exitError{code: 3} // a script can tell that the question was not sent
		}
		client.CA = pki
	}
	dev := &alexaask.Device{SkillID: *skillID, UserID: *user, SessionID: *sessionID, Locale: *locale, Screen: *screen, APLVersion: *aplVersion}
	if *sessionID != "" {
		dev.Request(alexaask.Match{Launch: true}, time.Now()) // the session exists: later turns are not new
	}
	for _, u := range utterances {
		m := model.Understand(u)
		req := dev.Request(m, time.Now())
		body := req.JSON()
		if !*asJSON {
			if m.Launch {
				fmt.Printf("» %s  (LaunchRequest)\n", u)
			} else {
				fmt.Printf("» %s  (%s%s)\n", u, m.Intent, slotSummary(m))
			}
		}
		if *printReq {
			var pretty bytes.Buffer
			_ = json.Indent(&pretty, body, "", "  ")
			fmt.Printf("%s\n", pretty.String())
		}
		answer, err := client.Send(ctx, body)
		if err != nil {
			return err
		}
		if *asJSON {
			os.Stdout.Write(answer)
			fmt.Println()
			continue
		}
		a, err := alexaask.ReadAnswer(answer)
		if err != nil {
			return err
		}
		fmt.Print(a.String())
	}
	return nil
}

// readModel reads the skill package's interaction model for a locale.
func readModel(locale string) ([]byte, error) {
	f, err := skillpackage.FS().Open("interactionModels/custom/" + locale + ".json")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

// slotSummary is ", topic=walking → weight_bearing" for the matched slots.
func slotSummary(m alexaask.Match) string {
	var s []string
	for _, v := range m.Slots {
		switch {
		case v.Value == "":
		case v.ResolvedID != "":
			s = append(s, fmt.Sprintf("%s=%q → %s", v.Name, v.Value, v.ResolvedID))
		default:
			s = append(s, fmt.Sprintf("%s=%q", v.Name, v.Value))
		}
	}
	if len(s) == 0 {
		return ""
	}
	return ", " + strings.Join(s, ", ")
}

// loadOrCreateCA loads the test CA saved in dir, or creates and saves one
// (created reports which).
func loadOrCreateCA(dir string) (pki *alexatest.PKI, created bool, err error) {
	if _, err := os.Stat(filepath.Join(dir, alexatest.KeyFile)); err == nil {
		pki, err := alexatest.Load(dir)
		return pki, false, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, false, unwrapPath(err)
	}
	if pki, err = alexatest.NewPKI(); err != nil {
		return nil, false, err
	}
	return pki, true, pki.Save(dir)
}
