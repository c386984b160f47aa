//go:build e2e

package e2e_test

import (
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/unsay/unsay/test/harness"
)

var sixDigits = regexp.MustCompile(`\b[1-9][0-9]{5}\b`)

// signedSetup starts a server that verifies every Alexa request against a
// test CA (--alexa-roots, --alexa-cert, --alexa-skill-id) and links a fresh
// Echo Show to ray with `unsay link` + LinkDeviceIntent.
func signedSetup(t *testing.T, part string) (*harness.Server, *harness.AlexaClient, *harness.TestCA, *harness.Model) {
	t.Helper()
	pending(t, part, landed(filepath.Join("skill-package", "interactionModels", "custom", "en-US.json")))
	model, err := harness.LoadModel(harness.ModelPath(repoRoot, "en-US"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	ca, err := harness.NewTestCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	s := startServerIn(t, part, dir, ca.ServeArgs()...)
	return s, &harness.AlexaClient{URL: s.URL + "/alexa", CA: ca}, ca, model
}

func send(t *testing.T, c *harness.AlexaClient, req harness.Request) *harness.Reply {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	r, err := c.Send(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != http.StatusOK {
		t.Fatalf("POST /alexa: HTTP %d: %.400s", r.Status, r.Raw)
	}
	if hit := containsAny(string(r.Raw), harness.AssistantOnlyPhrases); hit != "" {
		t.Errorf("assistant-only text %q in a response to Ray: %s", hit, r.Raw)
	}
	return r
}

// link links dev to ray through `unsay link` and LinkDeviceIntent.
func link(t *testing.T, s *harness.Server, c *harness.AlexaClient, m *harness.Model, dev *harness.Device, part string) {
	t.Helper()
	out, err := harness.Run(context.Background(), bin, "link", "--url", s.URL, "--patient", "ray")
	pending(t, part, err)
	code := sixDigits.FindString(out)
	if code == "" {
		t.Fatalf("unsay link printed no six-digit code: %q", out)
	}
	slot, err := m.Slot("LinkDeviceIntent", "code", code)
	if err != nil {
		t.Fatal(err)
	}
	send(t, c, dev.Launch())
	r := send(t, c, dev.Intent("LinkDeviceIntent", map[string]any{"code": slot}))
	if r.Speech() == "" {
		t.Fatalf("LinkDeviceIntent answered with no speech: %s", r.Raw)
	}
}

// TestSignedAlexa_VerifiedConversation holds the same conversation as part 3
// with verification on: every request signed (Signature-256, RSA SHA-256
// over the raw body) with a test CA's leaf for echo-api.amazon.com.
func TestSignedAlexa_VerifiedConversation(t *testing.T) {
	const part = "4 signed Alexa traffic"
	s, c, _, m := signedSetup(t, part)

	t.Run("an unlinked device hears how to link and no care fact", func(t *testing.T) {
		dev := harness.NewDevice("stranger")
		r := send(t, c, dev.Launch())
		if !strings.Contains(strings.ToLower(r.Speech()), "link") {
			t.Errorf("unlinked launch does not say how to link: %q", r.Speech())
		}
		if w := harness.WalkingSentence(r.Speech()); w != "" {
			t.Errorf("unlinked device heard a care fact: %q", w)
		}
	})

	ray := harness.NewDevice("ray-signed")
	link(t, s, c, m, ray, part)
	var walking string
	t.Run("launch speaks the walking instruction and draws an APL card", func(t *testing.T) {
		r := send(t, c, ray.Launch())
		walking = harness.WalkingSentence(r.Speech())
		if walking == "" {
			t.Fatalf("no quoted weight-bearing instruction in %q", r.Speech())
		}
		if !strings.Contains(strings.Join(r.DirectiveTypes(), ","), "Alexa.Presentation.APL.RenderDocument") {
			t.Errorf("no RenderDocument on an Echo Show: %v", r.DirectiveTypes())
		}
	})
	for _, topic := range []string{"walking", "weight", "crutches", "frame"} {
		t.Run("CarePlanIntent topic "+topic+" answers with the walking instruction", func(t *testing.T) {
			slot, err := m.Slot("CarePlanIntent", "topic", topic)
			if err != nil {
				t.Fatal(err)
			}
			r := send(t, c, ray.Intent("CarePlanIntent", map[string]any{"topic": slot}))
			if walking == "" || !strings.Contains(r.Speech(), walking) {
				t.Errorf("answer does not quote %q: %q", walking, r.Speech())
			}
		})
	}
	t.Run("an unresolved topic is reprompted with the session kept open", func(t *testing.T) {
		slot, err := m.Slot("CarePlanIntent", "topic", "the moon")
		if err != nil {
			t.Fatal(err)
		}
		r := send(t, c, ray.Intent("CarePlanIntent", map[string]any{"topic": slot}))
		if e := r.Body.Response.ShouldEndSession; e == nil || *e {
			t.Errorf("shouldEndSession = %v, want false with a reprompt", e)
		}
	})
	t.Run("what changed answers", func(t *testing.T) {
		if r := send(t, c, ray.Intent("WhatsChangedIntent", nil)); r.Speech() == "" {
			t.Errorf("no speech: %s", r.Raw)
		}
	})
	t.Run("help answers and keeps the session open", func(t *testing.T) {
		r := send(t, c, ray.Intent("AMAZON.HelpIntent", nil))
		if r.Speech() == "" {
			t.Errorf("no speech")
		}
		if e := r.Body.Response.ShouldEndSession; e != nil && *e {
			t.Errorf("help ended the session")
		}
	})
	t.Run("stop ends the session", func(t *testing.T) {
		r := send(t, c, ray.Intent("AMAZON.StopIntent", nil))
		if e := r.Body.Response.ShouldEndSession; e == nil || !*e {
			t.Errorf("shouldEndSession = %v, want true", e)
		}
	})
}

// TestSignedAlexa_RefusesBadRequestsBeforeAnyHandler sends, for each way a
// request can fail verification (P-22), the broken request (400) and its
// correctly signed twin (200).
func TestSignedAlexa_RefusesBadRequestsBeforeAnyHandler(t *testing.T) {
	const part = "4 signed Alexa traffic"
	s, c, ca, m := signedSetup(t, part)
	ray := harness.NewDevice("ray-vectors")
	link(t, s, c, m, ray, part)
	ready := time.Now() // the server started before this

	post := func(t *testing.T, body []byte, h http.Header) int {
		t.Helper()
		r, err := c.SendRaw(context.Background(), body, h)
		if err != nil {
			t.Fatal(err)
		}
		return r.Status
	}
	signed := func(body []byte) http.Header {
		h := http.Header{}
		h.Set("SignatureCertChainUrl", harness.CertURL)
		h.Set("Signature-256", ca.Sign(body))
		return h
	}
	marshal := func(r harness.Request) []byte {
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	type vector struct {
		name   string
		mutate func(body []byte) ([]byte, http.Header)
	}
	vectors := []vector{
		{"one flipped body byte after signing", func(b []byte) ([]byte, http.Header) {
			h := signed(b)
			b = append([]byte(nil), b...)
			i := strings.Index(string(b), "LaunchRequest")
			b[i] ^= 0x20
			return b, h
		}},
		{"no Signature-256 header", func(b []byte) ([]byte, http.Header) {
			h := signed(b)
			h.Del("Signature-256")
			return b, h
		}},
		{"only the legacy SHA-1 Signature header", func(b []byte) ([]byte, http.Header) {
			h := signed(b)
			h.Set("Signature", h.Get("Signature-256"))
			h.Del("Signature-256")
			return b, h
		}},
		{"a certificate URL over http://", func(b []byte) ([]byte, http.Header) {
			h := signed(b)
			h.Set("SignatureCertChainUrl", strings.Replace(harness.CertURL, "https://", "http://", 1))
			return b, h
		}},
		{"a certificate URL with /EcHo.aPi/", func(b []byte) ([]byte, http.Header) {
			h := signed(b)
			h.Set("SignatureCertChainUrl", strings.Replace(harness.CertURL, "/echo.api/", "/EcHo.aPi/", 1))
			return b, h
		}},
		{"a signature that is not base64", func(b []byte) ([]byte, http.Header) {
			h := signed(b)
			h.Set("Signature-256", "%%%not-base64%%%")
			return b, h
		}},
	}
	for _, v := range vectors {
		t.Run("refused: "+v.name, func(t *testing.T) {
			body, h := v.mutate(marshal(ray.Launch()))
			if got := post(t, body, h); got != http.StatusBadRequest {
				t.Errorf("HTTP %d, want 400", got)
			}
		})
	}
	for _, tc := range []struct {
		name string
		at   func() time.Time
		want int
	}{
		{"refused: a timestamp 200 s old", func() time.Time { return time.Now().Add(-200 * time.Second) }, http.StatusBadRequest},
		{"refused: a timestamp 200 s in the future", func() time.Time { return time.Now().Add(200 * time.Second) }, http.StatusBadRequest},
		// Inside the window but signed before this server started: a turn an
		// earlier process may have accepted, replayed after a restart.
		{"refused: a timestamp 100 s old, before the server started", func() time.Time { return time.Now().Add(-100 * time.Second) }, http.StatusBadRequest},
		{"accepted: a timestamp seconds old, after the server started", func() time.Time { return ready }, http.StatusOK},
		{"accepted: a timestamp 100 s in the future is inside the window", func() time.Time { return time.Now().Add(100 * time.Second) }, http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := ray.Launch()
			r["request"].(map[string]any)["timestamp"] = tc.at().UTC().Format(time.RFC3339)
			b := marshal(r)
			if got := post(t, b, signed(b)); got != tc.want {
				t.Errorf("HTTP %d, want %d", got, tc.want)
			}
		})
	}
	t.Run("refused: another skill's application id", func(t *testing.T) {
		other := *ray
		other.SkillID = "amzn1.ask.skill.00000000-0000-4000-8000-0000000000ff"
		b := marshal(other.Launch())
		if got := post(t, b, signed(b)); got != http.StatusBadRequest {
			t.Errorf("HTTP %d, want 400", got)
		}
	})
	t.Run("accepted: the same launch, correctly signed, with a non-ASCII body", func(t *testing.T) {
		r := ray.Launch()
		r["session"].(map[string]any)["attributes"] = map[string]any{"note": "déjà vu"}
		b := marshal(r)
		if got := post(t, b, signed(b)); got != http.StatusOK {
			t.Errorf("HTTP %d, want 200", got)
		}
	})
}
