package app_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/unsay/unsay/models"
	"github.com/unsay/unsay/skill/alexatest"
	"github.com/unsay/unsay/store"
)

// Finding G10: the server names at most 256 URIs per subscriptions/listen
// (bridge.MaxListenURIs), and the speech principal once asked for all its
// patients' facts on one — a patient's 257th topic (or 50 followed
// patients' notes together) made every listen refused, /readyz 503 and
// every turn "I can't reach your care notes", for good. With 300 topics it
// stays ready, a revision of the last one is queued, and Ray's question is
// answered.
func TestSpeech_APatientWithMoreTopicsThanOneListenNamesIsStillHeard(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	w := models.Principal{Subject: "okafor", Scopes: []models.Scope{models.ScopeWrite}, Patients: []string{"ray"}}
	publish := func(domain, value string) int {
		t.Helper()
		res, err := r.app.Store.Publish(ctx, w, store.PublishInput{Patient: "ray", Domain: domain, Audience: models.AudienceUser,
			Value: value, AuthorID: "okafor", AuthorLabel: "Sarah Okafor, physio"})
		if err != nil {
			t.Fatal(err)
		}
		return res.Version.N
	}
	dev := &alexatest.Device{SkillID: skillID, UserID: "amzn1.ask.account.RAY", DeviceID: "amzn1.ask.device.SHOW", SessionID: "s300", APL: true}
	r.link(dev) // the principal follows Ray from now on
	for i := range 300 {
		publish(fmt.Sprintf("order_%03d", i), fmt.Sprintf("Order %d: walk to the window.", i))
	}
	eventually(t, "the last new topic to be queued for Ray", func() bool {
		p, err := r.app.Speech.Pending(ctx, "ray")
		if err != nil {
			return false
		}
		for _, a := range p {
			if a.Current.Domain == "order_299" {
				return true
			}
		}
		return false
	})
	n := publish("order_299", "Order 299: walk to the door.")
	deadline := time.Now().Add(10 * time.Second)
	for {
		p, err := r.app.Speech.Pending(ctx, "ray")
		found := false
		for _, a := range p {
			found = found || err == nil && a.Current.Domain == "order_299" && a.Current.N == n
		}
		if found {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the revision of the 300th topic was not queued; speech state %+v", r.app.Speech.State())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if st := r.app.Speech.State(); !st.Ready {
		t.Fatalf("speech not ready with 300 topics: %+v", st)
	}
	// Confirming 300 facts within the turn's 2 s (speech.DefaultConfirmTimeout)
	// can miss under -race on a loaded machine, and the fail-safe answer is
	// then right; before the fix no turn was ever answered.
	var said string
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if said = r.say(dev, alexatest.Request{Type: "LaunchRequest"}); said != "" && !strings.Contains(said, "can't reach your care notes") {
			return
		}
	}
	t.Fatalf("launch said %q", said)
}
