package app_test

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/unsay/unsay/bridge/app"
	"github.com/unsay/unsay/bridge/auth"
	"github.com/unsay/unsay/bridge/httpapi"
	"github.com/unsay/unsay/models"
	"github.com/unsay/unsay/skill"
	"github.com/unsay/unsay/skill/alexatest"
)

const skillID = "amzn1.ask.skill.unsay-e2e"

// Words of the assistant-only seed records; none may ever reach Ray's ears.
var internalWords = []string{"fall risk", "Fall risk", "FALL RISK", "disputes", "adherence", "Adherence", "over-report", "lives alone", "gait"}

type rig struct {
	t      *testing.T
	dbPath string
	pki    *alexatest.PKI
	root   string
	chain  string
	app    *app.App
	cancel context.CancelFunc
	done   chan error
	alexa  *alexatest.Client
}

func newRig(t *testing.T) *rig {
	t.Helper()
	return newRigOn(t, "")
}

// newRigOn is newRig on the database dsn ("": a SQLite file in t.TempDir()).
func newRigOn(t *testing.T, dsn string) *rig {
	t.Helper()
	pki, err := alexatest.NewPKI()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	root, chain, err := pki.WriteFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	if dsn == "" {
		dsn = filepath.Join(dir, "unsay.db")
	}
	r := &rig{t: t, dbPath: dsn, pki: pki, root: root, chain: chain}
	r.start()
	t.Cleanup(r.stop)
	return r
}

// start runs the whole program in-process on a free loopback port, with
// Alexa verification ON against the test CA.
func (r *rig) start() {
	r.t.Helper()
	a, err := app.New(context.Background(), app.Config{
		Addr: "127.0.0.1:0", DB: r.dbPath, AdminAddr: "127.0.0.1:0",
		Alexa: skill.Config{SkillID: skillID, Verify: true, ExtraRoots: []*x509.Certificate{r.pki.Root},
			CertOverrides: map[string]string{alexatest.CertURL: r.chain}},
	})
	if err != nil {
		r.t.Fatalf("app.New: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.app, r.cancel, r.done = a, cancel, make(chan error, 1)
	go func() { r.done <- a.Serve(ctx) }()
	r.alexa = &alexatest.Client{URL: a.URL() + "/alexa", PKI: r.pki}
}

// stop shuts the program down and closes its database, as a restart would.
func (r *rig) stop() {
	if r.cancel == nil {
		return
	}
	r.cancel()
	<-r.done
	r.app.Close()
	r.cancel = nil
}

func (r *rig) token(scopes ...models.Scope) string {
	tok, err := auth.Mint(r.app.TokenConfig(), "carer-jo", scopes, []string{"ray"}, time.Hour)
	if err != nil {
		r.t.Fatal(err)
	}
	return tok
}

func (r *rig) post(path string, body []byte, hdr map[string]string) (int, map[string]any) {
	r.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, r.app.URL()+path, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		r.t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

// write is a clinician's signed POST /write.
func (r *rig) write(domain, value, author, label string) int {
	r.t.Helper()
	body, _ := json.Marshal(map[string]any{"patient": "ray", "domain": domain, "audience": "user", "value": value,
		"authorId": author, "authorLabel": label})
	ts := time.Now().Unix()
	code, out := r.post("/write", body, map[string]string{
		httpapi.HeaderTimestamp: strconv.FormatInt(ts, 10),
		httpapi.HeaderSignature: httpapi.SignWrite([]byte(httpapi.DevWriteSecret), ts, body),
	})
	if code != http.StatusCreated {
		r.t.Fatalf("write answered %d %v", code, out)
	}
	return int(out["version"].(float64))
}

// say sends one signed request from Ray's Echo Show and returns what he hears.
func (r *rig) say(dev *alexatest.Device, req alexatest.Request) string {
	r.t.Helper()
	turn, err := r.alexa.Do(dev.Build(req))
	if err != nil {
		r.t.Fatal(err)
	}
	if turn.Status != http.StatusOK {
		r.t.Fatalf("alexa answered %d: %s", turn.Status, turn.Raw)
	}
	for _, w := range internalWords {
		if strings.Contains(string(turn.Raw), w) {
			r.t.Fatalf("assistant-only words %q reached the response: %s", w, turn.Raw)
		}
	}
	return turn.Speech()
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (r *rig) waitPending(n int) {
	r.t.Helper()
	eventually(r.t, "the speech principal to queue the retraction", func() bool {
		p, err := r.app.Speech.Pending(context.Background(), "ray")
		return err == nil && len(p) == n
	})
}

// link has a carer create a code (POST /link, care.link) and Ray say it.
func (r *rig) link(dev *alexatest.Device) {
	r.t.Helper()
	code, out := r.post("/link", []byte(`{"patient":"ray"}`), map[string]string{"Authorization": "Bearer " + r.token(models.ScopeLink)})
	if code != http.StatusCreated {
		r.t.Fatalf("/link answered %d %v", code, out)
	}
	said := r.say(dev, alexatest.Request{Type: "IntentRequest", Intent: skill.IntentLinkDevice, Slots: alexatest.CodeSlot(out["code"].(string))})
	if strings.Contains(said, "isn't linked") {
		r.t.Fatalf("linking failed: %q", said)
	}
	eventually(r.t, "the speech principal to follow ray", func() bool {
		f, err := r.app.Speech.Facts(context.Background(), "ray")
		return err == nil && len(f) > 0
	})
}

const (
	heardSentence = "Partial weight-bearing, about half your body weight, with the frame."
	newSentence   = "Full weight-bearing as tolerated."
)

func TestMainJob_RetractsExactlyWhatRayHeardOnceOverRealSockets(t *testing.T) {
	r := newRig(t)
	dev := &alexatest.Device{SkillID: skillID, UserID: "amzn1.ask.account.RAY", DeviceID: "amzn1.ask.device.SHOW", SessionID: "s1", APL: true}

	// Unlinked: he hears only how to link.
	if said := r.say(dev, alexatest.Request{}); !strings.Contains(said, "isn't linked") || strings.Contains(said, "weight") {
		t.Fatalf("unlinked launch said %q", said)
	}
	r.link(dev)

	first := r.say(dev, alexatest.Request{})
	if !strings.Contains(first, heardSentence) || !strings.Contains(first, "Mr Adeyemi") {
		t.Fatalf("launch did not tell the walking instruction with its author: %q", first)
	}
	if strings.HasPrefix(first, "Stop") {
		t.Fatalf("first launch opened with a retraction: %q", first)
	}

	if v := r.write("weight_bearing", newSentence, "okafor", "Sarah Okafor, physio"); v != 3 {
		t.Fatalf("write made v%d, want v3", v)
	}
	r.waitPending(1)

	next := r.say(dev, alexatest.Request{})
	if !strings.HasPrefix(next, "Stop") {
		t.Fatalf("next launch did not open with the retraction: %q", next)
	}
	for _, want := range []string{"I told you: “" + heardSentence + "”", "Sarah Okafor", "just now", newSentence} {
		if !strings.Contains(next, want) {
			t.Errorf("retraction lacks %q: %q", want, next)
		}
	}
	if strings.Index(next, heardSentence) > strings.Index(next, newSentence) {
		t.Errorf("the withdrawn sentence must come before the new one: %q", next)
	}

	again := r.say(dev, alexatest.Request{})
	if strings.Contains(again, "Stop") || strings.Contains(again, "I told you") {
		t.Fatalf("the retraction was repeated: %q", again)
	}
	if !strings.Contains(again, newSentence) {
		t.Fatalf("the current instruction is not told: %q", again)
	}
}

func TestMainJob_RetractionSurvivesARestartBetweenWriteAndLaunch(t *testing.T) {
	r := newRig(t)
	dev := &alexatest.Device{SkillID: skillID, UserID: "amzn1.ask.account.RAY", DeviceID: "amzn1.ask.device.SHOW", SessionID: "s1"}
	r.link(dev)
	if first := r.say(dev, alexatest.Request{}); !strings.Contains(first, heardSentence) {
		t.Fatalf("launch said %q", first)
	}
	r.write("weight_bearing", newSentence, "okafor", "Sarah Okafor, physio")
	r.waitPending(1)

	r.stop()
	r.start()
	r.waitPending(1)

	dev.SessionID = "s2"
	next := r.say(dev, alexatest.Request{})
	if !strings.HasPrefix(next, "Stop") || !strings.Contains(next, heardSentence) || !strings.Contains(next, "Sarah Okafor") {
		t.Fatalf("after a restart the launch did not open with the retraction: %q", next)
	}
	r.stop()
	r.start()
	r.waitPending(0)
	if again := r.say(dev, alexatest.Request{}); strings.Contains(again, "I told you") {
		t.Fatalf("the retraction was repeated after a second restart: %q", again)
	}
}

func TestSpeechToken_CannotReadTheInternalRiskNoteThroughTheRunningServer(t *testing.T) {
	r := newRig(t)
	// The speech principal's own token class: care.read.user only.
	userTok, err := auth.Mint(r.app.TokenConfig(), "unsay-speech", []models.Scope{models.ScopeReadUser}, []string{"ray"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	dualTok := r.token(models.ScopeReadUser, models.ScopeReadAssistant)
	read := func(tok, uri string) (int, string) {
		body := []byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
		req, _ := http.NewRequest(http.MethodPost, r.app.URL()+"/mcp", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body) // initialization completes with its response
		resp.Body.Close()
		sid := resp.Header.Get("Mcp-Session-Id")
		for i, m := range []string{
			`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
			`{"jsonrpc":"2.0","id":2,"method":"resources/read","params":{"uri":"` + uri + `"}}`,
		} {
			req, _ := http.NewRequest(http.MethodPost, r.app.URL()+"/mcp", strings.NewReader(m))
			req.Header.Set("Authorization", "Bearer "+tok)
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			req.Header.Set("Mcp-Session-Id", sid)
			req.Header.Set("MCP-Protocol-Version", "2025-11-25")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			var buf bytes.Buffer
			_, _ = buf.ReadFrom(resp.Body)
			resp.Body.Close()
			if i == 1 {
				return resp.StatusCode, buf.String()
			}
		}
		return 0, ""
	}
	_, got := read(userTok, "care-internal://ray/risk")
	if !strings.Contains(got, "-32002") || strings.Contains(strings.ToLower(got), "fall risk") {
		t.Fatalf("speech token read of care-internal://ray/risk = %s, want -32002 and no text", got)
	}
	// Positive twin: a dual-scope reasoning host can read it; the speech one cannot.
	_, got = read(dualTok, "care-internal://ray/risk")
	if !strings.Contains(strings.ToLower(got), "fall risk") {
		t.Fatalf("dual-scope read of the risk note = %s, want its text", got)
	}
}
