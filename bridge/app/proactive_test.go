package app_test

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/unsay/unsay/bridge/app"
	"github.com/unsay/unsay/skill"
	"github.com/unsay/unsay/skill/alexatest"
	"github.com/unsay/unsay/skill/proactive"
)

// fakeAlexaAPI is Login with Amazon and the Proactive Events API.
type fakeAlexaAPI struct {
	mu     sync.Mutex
	events []map[string]any
}

func (f *fakeAlexaAPI) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /auth/O2/token", func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]any{"access_token": "lwa-token", "expires_in": 3600})
	})
	mux.HandleFunc("POST /v1/proactiveEvents/stages/development", func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var ev map[string]any
		_ = json.Unmarshal(b, &ev)
		f.mu.Lock()
		f.events = append(f.events, ev)
		f.mu.Unlock()
		w.WriteHeader(http.StatusAccepted)
	})
	return mux
}

func (f *fakeAlexaAPI) sent() []map[string]any {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]map[string]any(nil), f.events...)
}

func TestOutOfSession_ARevisionSendsOneMessageAlertToRaysLinkedUserAndNoClinicalText(t *testing.T) {
	api := &fakeAlexaAPI{}
	fake := httptest.NewServer(api.handler())
	defer fake.Close()
	pki, err := alexatest.NewPKI()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	_, chain, err := pki.WriteFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	a, err := app.New(context.Background(), app.Config{
		Addr: "127.0.0.1:0", DB: filepath.Join(dir, "u.db"),
		Alexa: skill.Config{SkillID: skillID, Verify: true, ExtraRoots: []*x509.Certificate{pki.Root},
			CertOverrides: map[string]string{alexatest.CertURL: chain}},
		AlexaClientID: "amzn1.application-oa2-client.test", AlexaClientSecret: "secret",
		ProactiveTokenURL: fake.URL + "/auth/O2/token", ProactiveAPIBase: fake.URL, QuietHours: "off",
		AlertBudget: proactive.DefaultAlertBudget,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Serve(ctx) }()
	defer func() { cancel(); <-done; a.Close() }()
	r := &rig{t: t, pki: pki, app: a, alexa: &alexatest.Client{URL: a.URL() + "/alexa", PKI: pki}}

	// A voice-only Echo: no screen session stays open after its turns.
	dev := &alexatest.Device{SkillID: skillID, UserID: "amzn1.ask.account.RAY", DeviceID: "amzn1.ask.device.DOT", SessionID: "s1"}
	r.link(dev)
	r.say(dev, alexatest.Request{})
	if n := len(api.sent()); n != 0 {
		t.Fatalf("%d notifications before any revision", n)
	}
	r.write("weight_bearing", newSentence, "okafor", "Sarah Okafor, physio")
	r.write("exercise", "Heel slides twenty times, twice a day.", "okafor", "Sarah Okafor, physio")
	eventually(t, "one proactive notification (a burst settles for 5 s)", func() bool { return len(api.sent()) >= 1 })
	time.Sleep(1500 * time.Millisecond) // a second one would have been sent by now
	evs := api.sent()
	if len(evs) != 1 {
		t.Fatalf("%d notifications for two revisions inside a minute, want 1", len(evs))
	}
	raw, _ := json.Marshal(evs[0])
	body := string(raw)
	for _, want := range []string{`"AMAZON.MessageAlert.Activated"`, `"Unicast"`, `"amzn1.ask.account.RAY"`} {
		if !strings.Contains(body, want) {
			t.Errorf("event lacks %s: %s", want, body)
		}
	}
	for _, never := range []string{"weight", "Heel", "Okafor", "Full"} {
		if strings.Contains(body, never) {
			t.Errorf("clinical text %q left in a notification: %s", never, body)
		}
	}
	// The retraction itself is spoken at the next launch.
	if next := r.say(dev, alexatest.Request{}); !strings.HasPrefix(next, "Stop") {
		t.Fatalf("the next launch did not open with the retraction: %q", next)
	}
}
