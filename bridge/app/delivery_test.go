package app_test

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/unsay/unsay/bridge"
	"github.com/unsay/unsay/bridge/app"
	"github.com/unsay/unsay/bridge/auth"
	"github.com/unsay/unsay/models"
	"github.com/unsay/unsay/skill"
	"github.com/unsay/unsay/skill/alexatest"
)

type bearerRT struct{ tok string }

func (b bearerRT) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.tok)
	return http.DefaultTransport.RoundTrip(r)
}

// The clinician's timeline over the whole program: Ray hears v2 on a
// voice-only Echo; the physio's revision is pending; the notifier's
// message alert marks it told unasked (notification); his next turn marks
// it heard on that device — each read through care-delivery:// with the
// clinician's token, over MCP, with an updated notification for each step.
func TestDeliveryTimeline_ToldUnaskedThenHeardOverTheWholeProgram(t *testing.T) {
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
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Serve(ctx) }()
	defer func() { cancel(); <-done; a.Close() }()
	r := &rig{t: t, pki: pki, app: a, alexa: &alexatest.Client{URL: a.URL() + "/alexa", PKI: pki}}

	dev := &alexatest.Device{SkillID: skillID, UserID: "amzn1.ask.account.RAY", DeviceID: "amzn1.ask.device.DOT", SessionID: "s1"}
	r.link(dev)
	r.say(dev, alexatest.Request{}) // the launch tells him his walking instruction

	tok, err := auth.Mint(a.TokenConfig(), "okafor", []models.Scope{models.ScopeWrite, models.ScopeReadUser}, []string{"ray"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	updated := make(chan string, 64)
	mc := mcp.NewClient(&mcp.Implementation{Name: "clinician-test", Version: "1"}, &mcp.ClientOptions{
		ResourceUpdatedHandler: func(_ context.Context, r *mcp.ResourceUpdatedNotificationRequest) { updated <- r.Params.URI },
	})
	cs, err := mc.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: a.URL() + "/mcp", HTTPClient: &http.Client{Transport: bearerRT{tok}}},
		&mcp.ClientSessionOptions{ProtocolVersion: models.ProtocolVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	const uri = "care-delivery://ray/weight_bearing"
	if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: uri}); err != nil {
		t.Fatal(err)
	}
	read := func() bridge.DeliveryTimeline {
		t.Helper()
		res, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
		if err != nil {
			t.Fatal(err)
		}
		var tl bridge.DeliveryTimeline
		if err := json.Unmarshal([]byte(res.Contents[0].Text), &tl); err != nil {
			t.Fatal(err)
		}
		return tl
	}
	waitFor := func(what string, ok func(bridge.DeliveryTimeline) bool) bridge.DeliveryTimeline {
		t.Helper()
		deadline := time.After(15 * time.Second)
		for {
			if tl := read(); ok(tl) {
				return tl
			}
			select {
			case <-updated:
			case <-deadline:
				t.Fatalf("timed out waiting for %s: %+v", what, read())
			}
		}
	}

	tl := read()
	if tl.Latest != 2 || tl.Versions[1].State != models.StateHeard || tl.Versions[1].Device != models.DeviceVoice || tl.Versions[1].Via != models.ViaAsked {
		t.Fatalf("after he asked on a voice-only Echo: %+v", tl)
	}
	v := r.write("weight_bearing", newSentence, "okafor", "Sarah Okafor, physio")
	tl = waitFor("the revision pending, told unasked by notification", func(tl bridge.DeliveryTimeline) bool {
		return tl.Latest == v && tl.Versions[v-1].State == models.StatePending && tl.Versions[v-1].NotifiedAt != ""
	})
	if len(api.sent()) != 1 || tl.Versions[v-1].Withdraws != 2 {
		t.Fatalf("notifications %d; pending %+v", len(api.sent()), tl.Versions[v-1])
	}
	if said := r.say(dev, alexatest.Request{}); len(said) < 4 || said[:4] != "Stop" {
		t.Fatalf("the next launch did not open with the retraction: %q", said)
	}
	tl = waitFor("the revision heard on the voice-only Echo", func(tl bridge.DeliveryTimeline) bool {
		return tl.Versions[v-1].State == models.StateHeard
	})
	if got := tl.Versions[v-1]; got.Device != models.DeviceVoice || got.At == "" || tl.Versions[1].WithdrawnAt != got.At {
		t.Fatalf("heard %+v; v2 withdrawn at %q", got, tl.Versions[1].WithdrawnAt)
	}
}
