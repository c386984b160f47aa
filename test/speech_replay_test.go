//go:build e2e

package e2e_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/unsay/unsay/test/harness"
)

// Finding 5 (P-22, P-24): a genuine signed request captured and replayed
// within its 150 s window is refused (400) before any handler runs, so it
// cannot take the retraction meant for Ray's next real turn.
func TestSpeechReplay_ACapturedSignedRequestReplayedIsRefusedAndRaysNextTurnHearsTheRetraction(t *testing.T) {
	const part = "4 signed Alexa traffic"
	s, c, ca, m := signedSetup(t, part)
	ray := harness.NewDevice("ray-replay")
	link(t, s, c, m, ray, part)

	captured, err := json.Marshal(ray.Intent("WhatsChangedIntent", nil))
	if err != nil {
		t.Fatal(err)
	}
	h := http.Header{}
	h.Set("SignatureCertChainUrl", harness.CertURL)
	h.Set("Signature-256", ca.Sign(captured))
	post := func() *harness.Reply {
		r, err := c.SendRaw(context.Background(), captured, h)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	if r := post(); r.Status != http.StatusOK {
		t.Fatalf("the genuine request: HTTP %d %s", r.Status, r.Raw)
	}
	write(t, s, "weight_bearing", revision)
	backlogAtLeast(t, s, 1)
	if r := post(); r.Status != http.StatusBadRequest {
		t.Fatalf("the replay: HTTP %d %.200s, want 400", r.Status, r.Raw)
	}
	next := send(t, c, ray.Intent("WhatsChangedIntent", nil)).Speech()
	if !strings.HasPrefix(next, "Stop — your walking instruction has changed.") || !strings.Contains(next, revision) {
		t.Fatalf("Ray's next real turn = %q, want the retraction", next)
	}
	if !strings.Contains(s.Output(), "request id already seen") {
		t.Errorf("the refusal is not logged with its reason")
	}
}
