package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"time"
)

// The demo's revision: what the physio writes (peers.md §1.2, STAGED_REVISION).
const (
	DemoRevision    = "Full weight-bearing as tolerated."
	DemoAuthor      = "okafor"
	DemoAuthorLabel = "Sarah Okafor, physio"
)

// AssistantOnlyPhrases are words from the seed's assistant-only records
// (care-internal://ray/risk, …/adherence and …/gait_note), and the prefix of their URIs,
// that must never be spoken to Ray, drawn on his screen, or shown to a
// user-scoped client.
var AssistantOnlyPhrases = []string{"fall risk", "adherence", "disputes", "over-reports", "lives alone", "gait cadence", "care-internal://ray"}

// Turn is one line of the demo transcript.
type Turn struct {
	Who   string // "Ray", "Alexa", "physio", "server"
	Text  string
	Reply *Reply // for Alexa's turns
}

// Demo is the transcript of one run of the main job.
type Demo struct {
	Turns []Turn
	// FirstWalking is Alexa's answer when Ray first asks for his walking instruction.
	FirstWalking *Reply
	// HeardSentence is the walking instruction Ray heard first, as quoted in speech.
	HeardSentence string
	// WriteAnswer is what `unsay write` printed.
	WriteAnswer string
	// AfterWrite is Alexa's answer to Ray's next turn after the write.
	AfterWrite *Reply
	// Again is Alexa's answer to the turn after that (the retraction must not repeat).
	Again *Reply
	// All is every Alexa reply in order.
	All []*Reply
}

var (
	quotedRE = regexp.MustCompile(`“([^”]+)”`)
	codeRE   = regexp.MustCompile(`\b[1-9][0-9]{5}\b`)
)

// Quoted returns the sentences inside curly quotes in speech, in order.
func Quoted(speech string) []string {
	var out []string
	for _, m := range quotedRE.FindAllStringSubmatch(speech, -1) {
		out = append(out, m[1])
	}
	return out
}

// WalkingSentence returns the first quoted sentence in speech that names a
// weight-bearing level (the walking instruction), or "" when none does.
func WalkingSentence(speech string) string {
	for _, q := range Quoted(speech) {
		if strings.Contains(strings.ToLower(q), "weight") {
			return q
		}
	}
	return ""
}

// RunDemo runs the main job end to end against the real binary bin, in dir:
// a server with Alexa verification on (a test CA), a carer's device-linking
// code, Ray's signed turns from an Echo Show, the physio's signed write with
// `unsay write`, and Ray's next turns. Every line goes to w as it happens
// (nil: discard). It returns the transcript, or an error when a step could
// not run (assertions are the caller's).
func RunDemo(ctx context.Context, bin, dir string, w io.Writer) (*Demo, error) {
	if w == nil {
		w = io.Discard
	}
	d := &Demo{}
	say := func(who, format string, args ...any) {
		text := fmt.Sprintf(format, args...)
		d.Turns = append(d.Turns, Turn{Who: who, Text: text})
		fmt.Fprintf(w, "%-7s %s\n", who+":", text)
	}
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	model, err := LoadModel(ModelPath(root, "en-US"))
	if err != nil {
		return nil, fmt.Errorf("demo needs the interaction model: %w", err)
	}
	ca, err := NewTestCA(dir)
	if err != nil {
		return nil, err
	}
	srv, err := Start(ctx, Options{Bin: bin, Dir: dir, Args: ca.ServeArgs()})
	if err != nil {
		return nil, err
	}
	defer srv.Stop()
	say("server", "unsay serve on %s (SQLite %s, demo seed, Alexa verification on with a test CA)", srv.URL, srv.DB)

	alexa := &AlexaClient{URL: srv.URL + "/alexa", CA: ca}
	ray := NewDevice("ray-echo-show")
	turn := func(spoken string, req Request) (*Reply, error) {
		say("Ray", "%s", spoken)
		r, err := alexa.Send(ctx, req)
		if err != nil {
			return nil, err
		}
		if r.Status != http.StatusOK {
			return nil, fmt.Errorf("POST /alexa for %q: HTTP %d: %.300s", spoken, r.Status, r.Raw)
		}
		d.All = append(d.All, r)
		text := r.Speech()
		if text == "" {
			text = "(silence)"
		}
		d.Turns = append(d.Turns, Turn{Who: "Alexa", Text: text, Reply: r})
		fmt.Fprintf(w, "%-7s %s\n", "Alexa:", text)
		if dt := r.DirectiveTypes(); len(dt) > 0 {
			fmt.Fprintf(w, "%-7s [screen: %s]\n", "", strings.Join(dt, ", "))
		}
		return r, nil
	}

	// A carer links Ray's Echo Show.
	out, err := Run(ctx, bin, "link", "--url", srv.URL, "--patient", "ray")
	if err != nil {
		return nil, err
	}
	code := codeRE.FindString(out)
	if code == "" {
		return nil, fmt.Errorf("unsay link printed no six-digit code: %q", out)
	}
	say("carer", "unsay link --patient ray → code %s", code)
	if _, err := turn("Alexa, open care notes", ray.Launch()); err != nil {
		return nil, err
	}
	codeSlot, err := model.Slot("LinkDeviceIntent", "code", code)
	if err != nil {
		return nil, err
	}
	if _, err := turn("my code is "+code, ray.Intent("LinkDeviceIntent", map[string]any{"code": codeSlot})); err != nil {
		return nil, err
	}
	if _, err := turn("stop", ray.Intent("AMAZON.StopIntent", nil)); err != nil {
		return nil, err
	}

	// Ray hears his walking instruction.
	if _, err := turn("Alexa, open care notes", ray.Launch()); err != nil {
		return nil, err
	}
	walk, err := model.Slot("CarePlanIntent", "topic", "walking")
	if err != nil {
		return nil, err
	}
	if d.FirstWalking, err = turn("what's my walking instruction?", ray.Intent("CarePlanIntent", map[string]any{"topic": walk})); err != nil {
		return nil, err
	}
	d.HeardSentence = WalkingSentence(d.FirstWalking.Speech())
	if _, err := turn("stop", ray.Intent("AMAZON.StopIntent", nil)); err != nil {
		return nil, err
	}
	before := speechBacklog(ctx, srv.AdminURL)

	// The physio revises it.
	if d.WriteAnswer, err = srv.Write(ctx, "ray", "weight_bearing", DemoRevision, DemoAuthor, DemoAuthorLabel); err != nil {
		return nil, err
	}
	say("physio", "unsay write --patient ray --domain weight_bearing --value %q --author %s → %s", DemoRevision, DemoAuthor, oneLine(d.WriteAnswer))
	waitForSpeech(ctx, srv.AdminURL, before)

	// Ray's next turn opens with the retraction.
	if d.AfterWrite, err = turn("Alexa, open care notes", ray.Launch()); err != nil {
		return nil, err
	}
	if d.Again, err = turn("what's my walking instruction?", ray.Intent("CarePlanIntent", map[string]any{"topic": walk})); err != nil {
		return nil, err
	}
	if _, err := turn("stop", ray.Intent("AMAZON.StopIntent", nil)); err != nil {
		return nil, err
	}
	return d, nil
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// speechBacklog reads the speech principal's backlog from the admin /readyz
// ({"speech":{"backlog":N}}); -1 when /readyz does not report it.
func speechBacklog(ctx context.Context, base string) int {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/readyz", nil)
	if err != nil {
		return -1
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	var body struct {
		Speech *struct {
			Backlog *int `json:"backlog"`
		} `json:"speech"`
	}
	if json.NewDecoder(resp.Body).Decode(&body) != nil || body.Speech == nil || body.Speech.Backlog == nil {
		return -1
	}
	return *body.Speech.Backlog
}

// waitForSpeech waits until the speech principal's backlog grows past before
// (it holds the revision), at most 4 s; when /readyz does not report a
// backlog it waits a fixed 2 s, inside the 3.4 s speech window.
func waitForSpeech(ctx context.Context, base string, before int) {
	if before < 0 {
		select {
		case <-ctx.Done():
		case <-time.After(2 * time.Second):
		}
		return
	}
	deadline := time.Now().Add(4 * time.Second)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if speechBacklog(ctx, base) > before {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}
