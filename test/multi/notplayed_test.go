package multi

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/unsay/unsay/test/harness"
)

// reply sends one Alexa request to s and returns its reply.
func reply(t testing.TB, s *harness.Server, req harness.Request) *harness.Reply {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	r, err := (&harness.AlexaClient{URL: s.URL + "/alexa"}).Send(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != http.StatusOK {
		t.Fatalf("POST /alexa: HTTP %d: %.300s", r.Status, r.Raw)
	}
	return r
}

// TestTwoInstances_AnErrorReportOnTheOtherInstanceStillOwesTheRetraction
// (P-24, finding U8): instance A speaks Ray's retraction in a new session
// and marks it heard; Alexa's ENDPOINT_TIMEOUT report of that response —
// with no session attributes: Alexa never had the response's, and a new
// session has none before — reaches instance B behind the load balancer.
// B never wrote the response, but the heard ledger they share holds its
// record (written with its offers), so B re-opens its marks and Ray's next
// turn, on A, says the retraction again, saying so. Twin: the report echoes
// the response's own attributes (DEVICE_COMMUNICATION_ERROR) — B re-opens
// it from them, as before the record was shared.
func TestTwoInstances_AnErrorReportOnTheOtherInstanceStillOwesTheRetraction(t *testing.T) {
	for _, tt := range []struct {
		name, errType string
		echo          bool
	}{
		{"ENDPOINT_TIMEOUT, no attributes", "ENDPOINT_TIMEOUT", false},
		{"twin: DEVICE_COMMUNICATION_ERROR, the response's own attributes", "DEVICE_COMMUNICATION_ERROR", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dsn := freshDSN(t)
			a := startInstance(t, dsn, alexaArgs...)
			b := startInstance(t, dsn, alexaArgs...)
			waitFor(t, 30*time.Second, "both speech principals sync", func() bool { return speechConnected(a) && speechConnected(b) })
			ray := harness.NewDevice("ray-report")
			walking := walkingSlot(t)
			say(t, a, ray.Launch())
			if got := say(t, a, ray.Intent("CarePlanIntent", map[string]any{"topic": walking})); !strings.Contains(got, heardSentence) {
				t.Fatalf("Ray's walking instruction = %q, want the seeded %q", got, heardSentence)
			}
			say(t, a, ray.Intent("AMAZON.StopIntent", nil))

			const revised = "Full weight-bearing as tolerated with one stick."
			hc := &http.Client{Timeout: 10 * time.Second}
			if _, err := signedWrite(context.Background(), hc, a.URL, "weight_bearing", revised); err != nil {
				t.Fatal(err)
			}
			waitFor(t, 10*time.Second, "the retraction is queued", func() bool { return speechBacklog(a) >= 1 })
			r1 := reply(t, a, ray.Launch())
			if said := harness.PlainSSML(r1.Speech()); !strings.HasPrefix(said, "Stop — your walking instruction has changed.") || !strings.Contains(said, revised) {
				t.Fatalf("the retraction on A = %q", said)
			}
			waitFor(t, 10*time.Second, "A marks the retraction heard", func() bool { return speechBacklog(a) == 0 })

			end := ray.SessionEnded("ERROR")
			end["session"].(map[string]any)["attributes"] = nil
			if tt.echo {
				end["session"].(map[string]any)["attributes"] = r1.Body.SessionAttributes
			}
			end["request"].(map[string]any)["error"] = map[string]any{"type": tt.errType, "message": "not played"}
			reply(t, b, end)
			next := say(t, a, ray.Launch())
			if !strings.HasPrefix(next, "Stop — as I may not have told you properly: your walking instruction has changed.") || !strings.Contains(next, revised) {
				t.Fatalf("Ray's next turn on A = %q; want the retraction again, saying so", next)
			}
		})
	}
}
