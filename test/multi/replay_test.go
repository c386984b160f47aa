package multi

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/unsay/unsay/test/harness"
)

// TestTwoInstances_ASignedRequestOneAcceptedIsRefusedWhenReplayedToTheOther
// (P-22): with request signatures verified on both instances, a captured
// LaunchRequest that instance A answered is refused 400 when it is sent
// again to instance B behind the load balancer — the instances share the
// replay memory in their database — so a replayed turn cannot use up the
// retraction Ray is owed. Twin: a new request (its own request id), signed
// the same way, is answered 200 by B.
func TestTwoInstances_ASignedRequestOneAcceptedIsRefusedWhenReplayedToTheOther(t *testing.T) {
	dir := t.TempDir()
	ca, err := harness.NewTestCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	args := append([]string{"--default-patient", "ray"}, ca.ServeArgs()...)
	dsn := freshDSN(t)
	a, b := startInstance(t, dsn, args...), startInstance(t, dsn, args...)
	ray := harness.NewDevice("ray-replay")
	body, err := json.Marshal(ray.Launch())
	if err != nil {
		t.Fatal(err)
	}
	h := http.Header{}
	h.Set("SignatureCertChainUrl", harness.CertURL)
	h.Set("Signature-256", ca.Sign(body))
	send := func(s *harness.Server, body []byte, h http.Header) int {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		r, err := (&harness.AlexaClient{URL: s.URL + "/alexa"}).SendRaw(ctx, body, h)
		if err != nil {
			t.Fatal(err)
		}
		return r.Status
	}
	if got := send(a, body, h); got != http.StatusOK {
		t.Fatalf("the signed LaunchRequest on A: HTTP %d", got)
	}
	if got := send(b, body, h); got != http.StatusBadRequest {
		t.Errorf("the same signed request replayed to B: HTTP %d, want 400 (a replay another instance accepted)", got)
	}
	fresh, err := json.Marshal(ray.Launch())
	if err != nil {
		t.Fatal(err)
	}
	h2 := http.Header{}
	h2.Set("SignatureCertChainUrl", harness.CertURL)
	h2.Set("Signature-256", ca.Sign(fresh))
	if got := send(b, fresh, h2); got != http.StatusOK {
		t.Errorf("a new signed request on B: HTTP %d, want 200", got)
	}
}
