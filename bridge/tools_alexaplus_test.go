package bridge

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/unsay/unsay/models"
	skillpackage "github.com/unsay/unsay/skill-package"
	"github.com/unsay/unsay/skill/alexaask"
	"github.com/unsay/unsay/web"
)

// AlexaPlusProtocolVersion is what Alexa+'s MCP client sends in initialize
// (Amazon's "MCP Client and App Lifecycle" sample).
const AlexaPlusProtocolVersion = "2025-03-26"

// connectAlexaPlus connects as Alexa+ does: protocol 2025-03-26, no
// standalone GET stream (request/response only).
func (h *harness) connectAlexaPlus(tok string) (*mcp.ClientSession, *mcp.InitializeResult) {
	h.t.Helper()
	b := &bearer{base: http.DefaultTransport}
	b.tok.Store(tok)
	mc := mcp.NewClient(&mcp.Implementation{Name: "Alexa+ MCP Client", Version: "1.0.0"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cs, err := mc.Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint: h.base + "/mcp", HTTPClient: &http.Client{Transport: b}, DisableStandaloneSSE: true,
	}, &mcp.ClientSessionOptions{ProtocolVersion: AlexaPlusProtocolVersion})
	if err != nil {
		h.t.Fatalf("Connect at %s: %v", AlexaPlusProtocolVersion, err)
	}
	h.t.Cleanup(func() { cs.Close() })
	return cs, cs.InitializeResult()
}

func callCareInstruction(t *testing.T, cs *mcp.ClientSession, topic string) (*mcp.CallToolResult, CareInstructionOutput, string) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: ToolCareInstruction, Arguments: map[string]any{"topic": topic}})
	if err != nil {
		t.Fatalf("care_instruction %q: %v", topic, err)
	}
	var out CareInstructionOutput
	if !res.IsError {
		b, _ := json.Marshal(res.StructuredContent)
		if err := json.Unmarshal(b, &out); err != nil {
			t.Fatalf("structured content %s: %v", b, err)
		}
	}
	return res, out, textOf(t, res)
}

// textOf is the one text block of a tool result.
func textOf(t *testing.T, res *mcp.CallToolResult) string {
	t.Helper()
	if len(res.Content) != 1 {
		t.Fatalf("%d content blocks, want exactly 1 text block", len(res.Content))
	}
	tc, ok := res.Content[0].(*mcp.TextContent)
	if !ok {
		t.Fatalf("content block %T, want text", res.Content[0])
	}
	return tc.Text
}

// TestCareTopics_EveryNameAndSynonymOfTheSkillsModelResolvesToItsDomain
// reads the interaction models with the parser `unsay ask` uses (not the
// bridge's) and asks the bridge to resolve every CareTopic name and
// synonym of every locale: each names its value's id — the domain
// CarePlanIntent would resolve. Twin: words of no topic resolve to nothing.
func TestCareTopics_EveryNameAndSynonymOfTheSkillsModelResolvesToItsDomain(t *testing.T) {
	ix := careTopics()
	if ix.err != nil {
		t.Fatalf("the interaction models did not load: %v", ix.err)
	}
	all := map[string]bool{"weight_bearing": true, "anticoagulant": true, "exercise": true, "contact": true}
	n := 0
	for _, locale := range skillpackage.Locales() {
		raw, err := skillpackage.FS().(interface{ ReadFile(string) ([]byte, error) }).ReadFile("interactionModels/custom/" + locale + ".json")
		if err != nil {
			t.Fatal(err)
		}
		m, err := alexaask.ParseModel(raw)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range m.Types[CareTopicSlotType] {
			for _, phrase := range append([]string{v.Name}, v.Synonyms...) {
				n++
				if got, ok := ix.resolve(phrase, all); !ok || got != v.ID {
					t.Errorf("%s: %q resolved to %q (%v), want %s", locale, phrase, got, ok, v.ID)
				}
			}
		}
	}
	if n < 40 {
		t.Fatalf("only %d phrases in the models", n)
	}
	for _, tc := range []struct{ said, want string }{
		{"My walking instruction", "weight_bearing"},
		{"Who do I call?", "contact"},
		{"weight_bearing", "weight_bearing"},
		{"exercise count", "exercise_clip"}, // a domain the model does not name, by its spoken topic
	} {
		if got, ok := ix.resolve(tc.said, map[string]bool{"weight_bearing": true, "contact": true, "exercise_clip": true}); !ok || got != tc.want {
			t.Errorf("%q resolved to %q (%v), want %s", tc.said, got, ok, tc.want)
		}
	}
	for _, said := range []string{"", "the weather", "hair", "my"} {
		if got, ok := ix.resolve(said, all); ok {
			t.Errorf("%q resolved to %q, want nothing", said, got)
		}
	}
}

// TestCareInstruction_IsOneIntentWithOneParameterAndLinksTheCard: the
// tool declares exactly the parameter it honours (topic, required, no
// others), an output schema naming the withdrawal fields, a description
// that says to withdraw first and speak a stale fact's age, and the card
// as its MCP Apps view in _meta.ui (not the deprecated flat key) — and so
// does whats_changed.
func TestCareInstruction_IsOneIntentWithOneParameterAndLinksTheCard(t *testing.T) {
	h := newHarness(t)
	cs, _ := h.connectAlexaPlus(h.token("alexa", userScopes))
	tools, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]*mcp.Tool{}
	for _, tl := range tools.Tools {
		byName[tl.Name] = tl
	}
	ci := byName[ToolCareInstruction]
	if ci == nil {
		t.Fatalf("care_instruction not listed: %v", tools.Tools)
	}
	in, _ := json.Marshal(ci.InputSchema)
	var ins struct {
		Properties           map[string]any `json:"properties"`
		Required             []string       `json:"required"`
		AdditionalProperties any            `json:"additionalProperties"`
	}
	_ = json.Unmarshal(in, &ins)
	if len(ins.Properties) != 1 || ins.Properties["topic"] == nil || len(ins.Required) != 1 || ins.Required[0] != "topic" || ins.AdditionalProperties == nil {
		t.Errorf("input schema %s: want exactly the required topic, nothing else accepted", in)
	}
	out, _ := json.Marshal(ci.OutputSchema)
	for _, f := range []string{"retraction", "previousValue", "previousVersion", "value", "authorLabel", "age", "ageSeconds", "stale", "instructions", "availableTopics"} {
		if !strings.Contains(string(out), `"`+f+`"`) {
			t.Errorf("output schema lacks %q", f)
		}
	}
	if i, j := strings.Index(string(out), `"retraction"`), strings.Index(string(out), `"value"`); i < 0 || j < 0 {
		t.Error("output schema lacks retraction or value")
	}
	for _, want := range []string{"retraction, say it first", "word for word", "before anything else", "say its age aloud", "add no medical advice"} {
		if !strings.Contains(ci.Description, want) {
			t.Errorf("care_instruction description lacks %q: %s", want, ci.Description)
		}
	}
	if wc := byName[ToolWhatsChanged]; wc == nil || !strings.Contains(wc.Description, "Withdraw before you answer") || !strings.Contains(wc.Description, "say its age aloud") {
		t.Errorf("whats_changed description does not say to withdraw first and speak a stale age: %+v", wc)
	}
	for _, name := range []string{ToolCareInstruction, ToolWhatsChanged} {
		tl := byName[name]
		ui, _ := tl.Meta["ui"].(map[string]any)
		if ui["resourceUri"] != EchoURI {
			t.Errorf("%s _meta.ui = %v, want resourceUri %s", name, tl.Meta["ui"], EchoURI)
		}
		if _, flat := tl.Meta["ui/resourceUri"]; flat {
			t.Errorf("%s still carries the deprecated flat _meta[\"ui/resourceUri\"]", name)
		}
		if strings.Contains(tl.Description, "://") {
			t.Errorf("%s description names a scheme with :// (the replay filter would withhold tools/list)", name)
		}
	}
}

// TestCareInstruction_AnswersTheCurrentWordsWithWhatTheyReplacedFirst: a
// first call in a session answers version 2 with its author and spoken
// age, and — before the current words — the version it replaced, with the
// instruction to withdraw it if the patient may have heard it. No
// retraction sentence: this session was given nothing older.
func TestCareInstruction_AnswersTheCurrentWordsWithWhatTheyReplacedFirst(t *testing.T) {
	h := newHarness(t)
	cs, _ := h.connectAlexaPlus(h.token("alexa", userScopes))
	for _, topic := range []string{"walking", "crutches", "my walking instruction"} {
		res, out, text := callCareInstruction(t, cs, topic)
		if res.IsError || len(out.Instructions) != 1 {
			t.Fatalf("%q: isError %v, %d instructions: %s", topic, res.IsError, len(out.Instructions), text)
		}
		in := out.Instructions[0]
		if in.URI != "care://ray/weight_bearing" || in.Version != 2 || !strings.HasPrefix(in.Value, "Partial weight-bearing") ||
			in.AuthorLabel != "Mr Adeyemi, surgical team" || in.Age != "two days ago" || in.Stale || in.Topic != "walking" {
			t.Errorf("%q: %+v", topic, in)
		}
		if in.Retraction != "" {
			t.Errorf("%q: a retraction on a session's first read: %q", topic, in.Retraction)
		}
		if in.PreviousVersion != 1 || !strings.HasPrefix(in.PreviousValue, "No weight through the operated leg") {
			t.Errorf("%q: previous %d %q, want version 1", topic, in.PreviousVersion, in.PreviousValue)
		}
		w, now := strings.Index(text, "Withdrawn (version 1)"), strings.Index(text, "Now: “Partial weight-bearing")
		if w < 0 || now < 0 || w > now || !strings.Contains(text[:now], mayHaveBeenTold) {
			t.Errorf("%q: the replaced words do not come first with the instruction to withdraw them:\n%s", topic, text)
		}
	}
}

// TestCareInstruction_AfterARevisionTheSameSessionIsToldToRetractFirst:
// the session was given version 2; after a clinician writes version 3 the
// next call (the session never opened a GET stream) puts the retraction of
// version 2 first — in the text before anything else, and in the output —
// and a third call does not repeat it (P-17, P-19).
func TestCareInstruction_AfterARevisionTheSameSessionIsToldToRetractFirst(t *testing.T) {
	h := newHarness(t)
	cs, _ := h.connectAlexaPlus(h.token("alexa", userScopes))
	_, before, _ := callCareInstruction(t, cs, "walking")
	h.publish("weight_bearing", models.AudienceUser, "Full weight-bearing as tolerated.")

	_, out, text := callCareInstruction(t, cs, "weight bearing")
	in := out.Instructions[0]
	if in.Version != 3 || in.Retraction == "" || in.PreviousVersion != 2 || in.PreviousValue != strings.TrimSpace(before.Instructions[0].Value) {
		t.Fatalf("after the revision: %+v", in)
	}
	for _, want := range []string{"Stop — your walking instruction has changed.", "I told you: “Partial weight-bearing", "Sarah Okafor, physio, changed it", "“Full weight-bearing as tolerated.”"} {
		if !strings.Contains(in.Retraction, want) {
			t.Errorf("retraction lacks %q: %s", want, in.Retraction)
		}
	}
	if !strings.HasPrefix(text, sayFirstLine+"\n"+in.Retraction) {
		t.Errorf("the text does not open with the retraction:\n%s", text)
	}
	if strings.Contains(text, mayHaveBeenTold) {
		t.Error("with a retraction to say, the text still hedges about what the patient may have been told")
	}

	_, again, text := callCareInstruction(t, cs, "walking")
	if again.Instructions[0].Retraction != "" || strings.Contains(text, sayFirstLine) {
		t.Errorf("the retraction was given twice: %q", again.Instructions[0].Retraction)
	}
	if again.Instructions[0].PreviousVersion != 2 {
		t.Errorf("the third answer no longer names what version 3 replaced: %+v", again.Instructions[0])
	}
}

// TestCareInstruction_AStaleFactLeadsWithItsAge: the blood thinner is past
// its review date in the demo seed — its value starts with the [STALE …]
// header (P-7) and the text tells the host to say its age aloud; the
// walking instruction (its twin) does neither.
func TestCareInstruction_AStaleFactLeadsWithItsAge(t *testing.T) {
	h := newHarness(t)
	cs, _ := h.connectAlexaPlus(h.token("alexa", userScopes))
	_, out, text := callCareInstruction(t, cs, "rivaroxaban")
	in := out.Instructions[0]
	if !in.Stale || !strings.HasPrefix(in.Value, "[STALE — last changed nine days ago by Dr Mensah, GP; say this age aloud]\n") {
		t.Fatalf("stale blood thinner: %+v", in)
	}
	h1, h2 := strings.Index(text, "[STALE — last changed nine days ago"), strings.Index(text, "Now: “Rivaroxaban")
	if h1 < 0 || h2 < h1 || !strings.Contains(text, "say its age aloud (nine days ago)") {
		t.Errorf("the stale warning does not come before the words:\n%s", text)
	}
	_, fresh, ftext := callCareInstruction(t, cs, "walking")
	if fresh.Instructions[0].Stale || strings.Contains(ftext, "[STALE") || strings.Contains(ftext, "review date") {
		t.Errorf("a fresh fact is marked stale: %s", ftext)
	}
}

// TestCareInstruction_ReadsOnlySpeakableFactsOfTheTokensPatients: a token
// without care.read.user and one bound to another patient read nothing of Ray's
// and are told nothing about his notes (a token bound to no patient, as
// client_credentials gives, is the whole-program test's: HS256 development
// tokens always name a patient); a dual-scope token is narrowed to the
// speakable scope — an assistant-only domain is no topic, and nothing
// assistant-only appears (P-1, P-10, P-21). Twin: Ray's user token reads
// his walking instruction.
func TestCareInstruction_ReadsOnlySpeakableFactsOfTheTokensPatients(t *testing.T) {
	h := newHarness(t)
	for _, tc := range []struct {
		name, tok string
	}{
		{"assistant scope only", h.token("a", []models.Scope{models.ScopeReadAssistant})},
		{"another patient", h.tokenFor("carer", userScopes, time.Hour, "alice")},
	} {
		cs, _ := h.connectAlexaPlus(tc.tok)
		for _, topic := range []string{"walking", "risk"} {
			res, out, text := callCareInstruction(t, cs, topic)
			if res.IsError || len(out.Instructions) != 0 || len(out.AvailableTopics) != 0 {
				t.Errorf("%s, %q: %+v", tc.name, topic, out)
			}
			if strings.Contains(text, "Partial weight-bearing") || strings.Contains(text, "ray") || strings.Contains(text, "Ray") {
				t.Errorf("%s, %q: the answer tells of Ray's notes: %s", tc.name, topic, text)
			}
		}
	}
	dual, _ := h.connectAlexaPlus(h.token("host", dualScopes))
	for _, topic := range []string{"risk", "fall risk", "adherence", "gait note"} {
		_, out, text := callCareInstruction(t, dual, topic)
		s, _ := json.Marshal(out)
		if len(out.Instructions) != 0 || leaksAssistant(string(s)+text) {
			t.Errorf("dual, %q: %s / %s", topic, s, text)
		}
		for _, tp := range out.AvailableTopics {
			if tp == "risk" || tp == "adherence" || tp == "gait note" {
				t.Errorf("dual, %q: an assistant-only domain offered as a topic: %v", topic, out.AvailableTopics)
			}
		}
	}
	user, _ := h.connectAlexaPlus(h.token("alexa", userScopes))
	if _, out, _ := callCareInstruction(t, user, "walking"); len(out.Instructions) != 1 {
		t.Fatalf("Ray's own token: %+v", out)
	}
}

// leaksAssistant reports whether s holds words of the seed's
// assistant-only facts or their scheme.
func leaksAssistant(s string) bool {
	for _, w := range []string{"care-internal", "Fall risk HIGH", "Adherence unreliable", "gait cadence"} {
		if strings.Contains(s, w) {
			return true
		}
	}
	return false
}

// TestCareInstruction_AnUnknownTopicOffersTheTopicsThereAre: a topic the
// notes do not hold is not guessed; the answer names the speakable topics
// Ray's notes hold (and no assistant-only one). An empty topic is a tool
// error (isError), not a protocol error.
func TestCareInstruction_AnUnknownTopicOffersTheTopicsThereAre(t *testing.T) {
	h := newHarness(t)
	cs, _ := h.connectAlexaPlus(h.token("alexa", dualScopes))
	res, out, text := callCareInstruction(t, cs, "the weather")
	if res.IsError || len(out.Instructions) != 0 {
		t.Fatalf("%+v", out)
	}
	want := []string{"blood thinner", "exercise count", "exercises", "walking", "who to call"}
	if fmt.Sprint(out.AvailableTopics) != fmt.Sprint(want) || !strings.Contains(text, strings.Join(want, "; ")) || !strings.Contains(text, "Do not guess") {
		t.Errorf("available topics %v, want %v; text %s", out.AvailableTopics, want, text)
	}
	if res, _, _ := callCareInstruction(t, cs, "  "); !res.IsError {
		t.Error("an empty topic is not a tool error")
	}
}

// TestAlexaPlus_A20250326SessionGetsTheWholeAnswerInTheTextBlock: Alexa+'s
// client negotiates 2025-03-26, which has no structuredContent; the server
// agrees to it, lists both tools, and each tool's one text block carries
// every value of its structured output — so a host of that revision loses
// nothing — with the retraction before the current words.
func TestAlexaPlus_A20250326SessionGetsTheWholeAnswerInTheTextBlock(t *testing.T) {
	h := newHarness(t)
	cs, init := h.connectAlexaPlus(h.token("alexa", userScopes))
	if init.ProtocolVersion != AlexaPlusProtocolVersion {
		t.Fatalf("negotiated %s, want %s", init.ProtocolVersion, AlexaPlusProtocolVersion)
	}
	since := h.st.Now().Add(-time.Minute).UTC().Format(time.RFC3339Nano)
	callCareInstruction(t, cs, "walking")
	callCareInstruction(t, cs, "blood thinner")
	h.publish("weight_bearing", models.AudienceUser, "Full weight-bearing as tolerated.")

	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: ToolWhatsChanged, Arguments: map[string]any{"since": since}})
	if err != nil || res.IsError {
		t.Fatalf("whats_changed: %v %+v", err, res)
	}
	var wc WhatsChangedOutput
	b, _ := json.Marshal(res.StructuredContent)
	_ = json.Unmarshal(b, &wc)
	wtext := textOf(t, res)
	assertTextCarries(t, "whats_changed", wtext, wc)
	if len(wc.Changes) != 1 || wc.Changes[0].Retraction == "" {
		t.Fatalf("whats_changed: %+v", wc)
	}
	if r, rev := strings.Index(wtext, wc.Changes[0].Retraction), strings.Index(wtext, "Revisions, oldest first"); r < 0 || r > rev {
		t.Errorf("whats_changed text does not put the retraction first:\n%s", wtext)
	}
	_, out, text := callCareInstruction(t, cs, "walking")
	if out.Instructions[0].Retraction == "" {
		t.Fatalf("care_instruction after the revision: %+v", out)
	}
	assertTextCarries(t, "care_instruction", text, out)
	// The stale fact in a 2025-03-26 text: its age is there to speak.
	_, stale, stext := callCareInstruction(t, cs, "blood thinner")
	assertTextCarries(t, "care_instruction (stale)", stext, stale)
}

// assertTextCarries checks that every leaf of v's JSON appears in text:
// strings line by line (a value's [STALE …] header and its words), numbers
// in digits, a true stale flag as the review-date warning and a false one
// as its absence.
func assertTextCarries(t *testing.T, what, text string, v any) {
	t.Helper()
	b, _ := json.Marshal(v)
	var tree any
	_ = json.Unmarshal(b, &tree)
	stale := false
	var walk func(key string, x any)
	walk = func(key string, x any) {
		switch y := x.(type) {
		case map[string]any:
			for k, e := range y {
				walk(k, e)
			}
		case []any:
			for _, e := range y {
				walk(key, e)
			}
		case string:
			for _, line := range strings.Split(y, "\n") {
				if l := strings.TrimSpace(line); l != "" && !strings.Contains(strings.ToLower(text), strings.ToLower(l)) {
					t.Errorf("%s: the text block lacks %s %q:\n%s", what, key, l, text)
				}
			}
		case float64:
			if n := fmt.Sprint(int64(y)); !strings.Contains(text, n) {
				t.Errorf("%s: the text block lacks %s %s", what, key, n)
			}
		case bool:
			if key == "stale" && y {
				stale = true
			}
		}
	}
	walk("", tree)
	if got := strings.Contains(text, "past its review date"); got != stale {
		t.Errorf("%s: review-date warning in text %v, stale in output %v", what, got, stale)
	}
}

// TestAlexaPlus_ASessionWithoutAGETStreamOutlivesTheKeepAlive: an
// Alexa+-style session (2025-03-26, no GET stream, request/response only)
// stays idle through many keep-alive intervals — the SDK's own keep-alive
// would have closed it after KeepAliveMisses — and then calls the tool
// after a revision: the session is still there, and the answer opens with
// the retraction of what it was given before.
func TestAlexaPlus_ASessionWithoutAGETStreamOutlivesTheKeepAlive(t *testing.T) {
	h := newHarness(t, func(c *Config) {
		c.KeepAlive = 20 * time.Millisecond
		c.SessionTimeout = -1
	})
	cs, _ := h.connectAlexaPlus(h.token("alexa", userScopes))
	callCareInstruction(t, cs, "walking")
	start := h.srv.sweeps.Load()
	waitUntil(t, func() bool { return h.srv.sweeps.Load() >= start+4*KeepAliveMisses })
	h.publish("weight_bearing", models.AudienceUser, "Full weight-bearing as tolerated.")
	if h.srv.sessions.get(cs.ID()) == nil {
		t.Fatal("the session without a GET stream was closed while idle")
	}
	_, out, text := callCareInstruction(t, cs, "walking")
	if len(out.Instructions) != 1 || out.Instructions[0].Retraction == "" || !strings.HasPrefix(text, sayFirstLine) {
		t.Fatalf("after %d idle keep-alive sweeps: %+v\n%s", 4*KeepAliveMisses, out, text)
	}
}

// TestEchoCard_IsTheMCPAppsViewWithItsCSPAndTheSameBytes: ui://unsay/echo
// is listed and read as an MCP Apps view — mime text/html;profile=mcp-app,
// _meta.ui.csp declaring no network (it gets its data through the host
// bridge) on both the list entry and the contents — with exactly the bytes
// of /echo.html (P-16).
func TestEchoCard_IsTheMCPAppsViewWithItsCSPAndTheSameBytes(t *testing.T) {
	h := newHarness(t)
	cs, _ := h.connectAlexaPlus(h.token("alexa", userScopes))
	var entry *mcp.Resource
	for r, err := range cs.Resources(context.Background(), nil) {
		if err != nil {
			t.Fatal(err)
		}
		if r.URI == EchoURI {
			entry = r
		}
	}
	if entry == nil || entry.MIMEType != "text/html;profile=mcp-app" {
		t.Fatalf("list entry %+v", entry)
	}
	rr, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: EchoURI})
	if err != nil || len(rr.Contents) != 1 {
		t.Fatalf("read: %v %+v", err, rr)
	}
	c := rr.Contents[0]
	if c.MIMEType != EchoMIMEType || c.Text != string(web.EchoHTML()) {
		t.Errorf("contents mime %q, same bytes as /echo.html: %v", c.MIMEType, c.Text == string(web.EchoHTML()))
	}
	for where, meta := range map[string]mcp.Meta{"list entry": entry.Meta, "contents": c.Meta} {
		ui, _ := meta["ui"].(map[string]any)
		csp, ok := ui["csp"].(map[string]any)
		if !ok {
			t.Errorf("%s: no _meta.ui.csp in %v", where, meta)
			continue
		}
		for _, k := range []string{"connectDomains", "resourceDomains"} {
			if d, ok := csp[k].([]any); !ok || len(d) != 0 {
				t.Errorf("%s: csp %s = %v, want an empty list (no network)", where, k, csp[k])
			}
		}
	}
}

// TestCareInstruction_EchoesTheTopicAsWordsOnly: a topic is echoed back
// as letters, digits and spaces — a URI or markup typed as a topic never
// comes back as one (so an answer never names a care scheme it was fed);
// punctuation alone is an empty topic, a tool error.
func TestCareInstruction_EchoesTheTopicAsWordsOnly(t *testing.T) {
	h := newHarness(t)
	cs, _ := h.connectAlexaPlus(h.token("alexa", userScopes))
	_, out, text := callCareInstruction(t, cs, "care-internal://ray/risk <b>")
	if out.Topic != "care internal ray risk b" || strings.Contains(text, "://") || strings.Contains(text, "<b>") {
		t.Errorf("topic %q, text %s", out.Topic, text)
	}
	if res, _, _ := callCareInstruction(t, cs, "?!"); !res.IsError {
		t.Error("a topic of punctuation only is not a tool error")
	}
	if _, twin, _ := callCareInstruction(t, cs, "Walking!"); twin.Topic != "walking" || len(twin.Instructions) != 1 {
		t.Errorf("twin: %+v", twin)
	}
}
