package harness

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"net/http"
	"regexp"
	"strings"
	"time"

	"github.com/unsay/unsay/skill/alexatest"
)

// CertURL is the SignatureCertChainUrl the test CA's chain is served under
// (alexatest's): it passes Amazon's URL rules, and the server maps it to a
// file with --alexa-cert URL=PEMFILE instead of fetching it.
const CertURL = alexatest.CertURL

// SkillID is the application id the harness's requests carry.
const SkillID = "amzn1.ask.skill.00000000-0000-4000-8000-00000000e2e0"

// TestCA is a throwaway RSA-2048 root and a leaf with SAN
// echo-api.amazon.com (skill/alexatest), written as PEM files for the
// server's --alexa-roots and --alexa-cert.
type TestCA struct {
	RootPEM  string // path: the root certificate (for --alexa-roots)
	ChainPEM string // path: leaf then root (for --alexa-cert)
	pki      *alexatest.PKI
}

// NewTestCA makes the CA and writes its files under dir.
func NewTestCA(dir string) (*TestCA, error) {
	pki, err := alexatest.NewPKI()
	if err != nil {
		return nil, err
	}
	root, chain, err := pki.WriteFiles(dir)
	if err != nil {
		return nil, err
	}
	return &TestCA{RootPEM: root, ChainPEM: chain, pki: pki}, nil
}

// ServeArgs are the `unsay serve` flags that make the server trust this CA
// and accept SkillID, with verification on.
func (ca *TestCA) ServeArgs() []string {
	return []string{"--alexa-verify=true", "--alexa-skill-id", SkillID,
		"--alexa-roots", ca.RootPEM, "--alexa-cert", CertURL + "=" + ca.ChainPEM}
}

// Sign returns the base64 Signature-256 (RSA PKCS#1 v1.5, SHA-256) of body.
func (ca *TestCA) Sign(body []byte) string { return ca.pki.Sign(body) }

// Device is one simulated Echo: its ids and whether it has a screen (APL).
type Device struct {
	UserID   string
	DeviceID string
	APL      bool // advertise Alexa.Presentation.APL with a 1280×800 hub viewport
	// SkillID overrides the application id (default SkillID).
	SkillID   string
	sessionID string
	newSess   bool
	n         int
}

// NewDevice returns an Echo Show (APL on) with ids derived from name.
func NewDevice(name string) *Device {
	return &Device{UserID: "amzn1.ask.account.e2e-" + name, DeviceID: "amzn1.ask.device.e2e-" + name, APL: true}
}

// Request is a built Alexa request body.
type Request map[string]any

// Launch starts a new session and returns a LaunchRequest.
func (d *Device) Launch() Request {
	d.n++
	d.sessionID = fmt.Sprintf("amzn1.echo-api.session.e2e-%s-%d-%d", d.DeviceID[len(d.DeviceID)-4:], time.Now().UnixNano(), d.n)
	d.newSess = true
	return d.envelope(map[string]any{"type": "LaunchRequest"})
}

// Intent returns an IntentRequest in the current session (a new one if none).
// Slots map slot name → slot object (see Slot).
func (d *Device) Intent(name string, slots map[string]any) Request {
	if d.sessionID == "" {
		d.Launch()
		d.newSess = true
	}
	intent := map[string]any{"name": name, "confirmationStatus": "NONE"}
	if slots != nil {
		intent["slots"] = slots
	}
	return d.envelope(map[string]any{"type": "IntentRequest", "dialogState": "COMPLETED", "intent": intent})
}

// SessionEnded returns a SessionEndedRequest and forgets the session.
func (d *Device) SessionEnded(reason string) Request {
	r := d.envelope(map[string]any{"type": "SessionEndedRequest", "reason": reason})
	d.sessionID = ""
	return r
}

// UserEvent returns an Alexa.Presentation.APL.UserEvent (a tap or the card's tick).
func (d *Device) UserEvent(args ...any) Request {
	return d.envelope(map[string]any{"type": "Alexa.Presentation.APL.UserEvent", "arguments": args, "token": "e2e"})
}

func (d *Device) envelope(req map[string]any) Request {
	d.n++
	req["requestId"] = fmt.Sprintf("amzn1.echo-api.request.e2e-%d-%d", time.Now().UnixNano(), d.n)
	req["timestamp"] = time.Now().UTC().Format("2006-01-02T15:04:05Z")
	req["locale"] = "en-US"
	app := map[string]any{"applicationId": d.skillID()}
	user := map[string]any{"userId": d.UserID}
	ifaces := map[string]any{}
	if d.APL {
		ifaces["Alexa.Presentation.APL"] = map[string]any{"runtime": map[string]any{"maxVersion": "2024.3"}}
	}
	ctx := map[string]any{
		"System": map[string]any{
			"application":    app,
			"user":           user,
			"device":         map[string]any{"deviceId": d.DeviceID, "supportedInterfaces": ifaces},
			"apiEndpoint":    "https://api.amazonalexa.com",
			"apiAccessToken": "e2e-api-access-token",
		},
	}
	if d.APL {
		ctx["Viewport"] = map[string]any{
			"experiences": []any{map[string]any{"arcMinuteWidth": 346, "arcMinuteHeight": 216, "canRotate": false, "canResize": false}},
			"mode":        "HUB", "shape": "RECTANGLE", "pixelWidth": 1280, "pixelHeight": 800, "dpi": 160,
			"currentPixelWidth": 1280, "currentPixelHeight": 800, "touch": []string{"SINGLE"},
		}
	}
	r := Request{"version": "1.0", "context": ctx, "request": req}
	if d.sessionID != "" {
		r["session"] = map[string]any{"new": d.newSess, "sessionId": d.sessionID, "application": app, "user": user}
		d.newSess = false
	}
	return r
}

// Slot builds a slot the way Alexa sends it after entity resolution:
// ER_SUCCESS_MATCH with the value's canonical name and id when id != "",
// ER_SUCCESS_NO_MATCH otherwise.
func Slot(name, spoken, typeName, canonical, id string) map[string]any {
	s := map[string]any{"name": name, "value": spoken, "confirmationStatus": "NONE"}
	code := "ER_SUCCESS_NO_MATCH"
	var values []any
	if id != "" || canonical != "" {
		code = "ER_SUCCESS_MATCH"
		values = []any{map[string]any{"value": map[string]any{"name": canonical, "id": id}}}
	}
	s["resolutions"] = map[string]any{"resolutionsPerAuthority": []any{map[string]any{
		"authority": "amzn1.er-authority.echo-sdk." + SkillID + "." + typeName,
		"status":    map[string]any{"code": code},
		"values":    values,
	}}}
	return s
}

// Reply is the part of an Alexa response the tests read.
type Reply struct {
	Status int
	Raw    []byte
	Body   struct {
		Version           string         `json:"version"`
		SessionAttributes map[string]any `json:"sessionAttributes"`
		Response          struct {
			OutputSpeech *struct {
				Type string `json:"type"`
				SSML string `json:"ssml"`
				Text string `json:"text"`
			} `json:"outputSpeech"`
			Reprompt *struct {
				OutputSpeech *struct {
					SSML string `json:"ssml"`
					Text string `json:"text"`
				} `json:"outputSpeech"`
			} `json:"reprompt"`
			ShouldEndSession *bool            `json:"shouldEndSession"`
			Directives       []map[string]any `json:"directives"`
		} `json:"response"`
	}
}

var tagRE = regexp.MustCompile(`<[^>]*>`)

// Speech is the response's outputSpeech as plain text (SSML tags removed,
// entities unescaped, spaces collapsed); "" when there is none.
func (r *Reply) Speech() string {
	os := r.Body.Response.OutputSpeech
	if os == nil {
		return ""
	}
	if os.SSML != "" {
		return PlainSSML(os.SSML)
	}
	return strings.Join(strings.Fields(os.Text), " ")
}

// PlainSSML turns SSML into the words a listener hears.
func PlainSSML(ssml string) string {
	s := tagRE.ReplaceAllString(ssml, " ")
	return strings.Join(strings.Fields(html.UnescapeString(s)), " ")
}

// DirectiveTypes lists the response's directive types in order.
func (r *Reply) DirectiveTypes() []string {
	var out []string
	for _, d := range r.Body.Response.Directives {
		t, _ := d["type"].(string)
		out = append(out, t)
	}
	return out
}

// AlexaClient posts requests to an /alexa endpoint, signed by CA when CA is
// not nil (unsigned otherwise, for --alexa-verify=false).
type AlexaClient struct {
	URL  string // e.g. http://127.0.0.1:PORT/alexa
	CA   *TestCA
	HTTP *http.Client
}

// Send marshals req, signs it and posts it.
func (c *AlexaClient) Send(ctx context.Context, req Request) (*Reply, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	h := http.Header{}
	if c.CA != nil {
		h.Set("SignatureCertChainUrl", CertURL)
		h.Set("Signature-256", c.CA.Sign(body))
	}
	return c.SendRaw(ctx, body, h)
}

// SendRaw posts body with exactly the given headers (plus Content-Type).
// An HTTP status other than 200 is not an error: Reply.Status carries it.
func (c *AlexaClient) SendRaw(ctx context.Context, body []byte, h http.Header) (*Reply, error) {
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, c.URL, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	for k, v := range h {
		hr.Header[k] = v
	}
	hr.Header.Set("Content-Type", "application/json; charset=utf-8")
	client := c.HTTP
	if client == nil {
		client = &http.Client{Timeout: 15 * time.Second}
	}
	resp, err := client.Do(hr)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, err
	}
	r := &Reply{Status: resp.StatusCode, Raw: raw}
	if resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal(raw, &r.Body); err != nil {
			return r, fmt.Errorf("alexa response is not JSON: %w: %.300s", err, raw)
		}
	}
	return r, nil
}

func (d *Device) skillID() string {
	if d.SkillID != "" {
		return d.SkillID
	}
	return SkillID
}
