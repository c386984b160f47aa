package bridge

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/unsay/unsay/models"
	"github.com/unsay/unsay/store"
)

// This file holds the tools shaped for Alexa+ (Amazon's "Alexa+ MCP
// Toolkit": Alexa+ is the MCP client and its own model phrases the reply
// from what a tool returns). Amazon's add-on design guide asks for one tool
// per customer intent, with a description that says when to call it, why,
// and what it returns, and a schema that declares only what the server
// honours. Two intents: "what does my instruction say now"
// (care_instruction) and "what changed" (whats_changed, tools.go).
//
// Both answers put the withdrawal first — in the structured output (the
// retraction and the previous words come before the current ones) and in
// the text block, which carries the whole answer on its own: Alexa+'s
// client negotiates 2025-03-26, a revision without structuredContent, so a
// host of that revision sees only the text.
//
// Alexa+ talks request/response and never opens a GET stream, so neither
// tool relies on notifications: the basis of a retraction is what this
// MCP session was given before (resources/read, care_instruction), as for
// _meta "unsay/retraction".

// ToolCareInstruction is the name of the care-instruction tool.
const ToolCareInstruction = "care_instruction"

// CareInstructionInput is care_instruction's input: one topic, in the
// patient's or a carer's words. It is the only parameter: the patient is
// the one the caller's token is bound to (P-21).
type CareInstructionInput struct {
	Topic string `json:"topic" jsonschema:"what the instruction is about, in the patient's words: walking (weight on the leg, crutches, the frame), blood thinner (tablets, injections), exercises, who to call, or another topic of the care plan"`
}

// CareInstructionOutput is care_instruction's structured output.
type CareInstructionOutput struct {
	AsOf  string `json:"asOf" jsonschema:"the server clock when the answer was built, RFC 3339 UTC"`
	Topic string `json:"topic" jsonschema:"the topic as asked, in lower case with letters, digits and spaces only"`
	// Instructions holds the current instruction on the topic for each
	// patient the caller's token is bound to who has one (usually one).
	Instructions []Instruction `json:"instructions" jsonschema:"the current instruction on the topic for each patient this account is linked to who has one (usually exactly one); empty when none matched"`
	// AvailableTopics lists the topics the linked patients' notes do hold
	// when none matched (spoken names, sorted); absent otherwise and for a
	// caller linked to no patient.
	AvailableTopics []string `json:"availableTopics,omitempty" jsonschema:"when nothing matched: the topics the linked patient's care notes do hold"`
}

// Instruction is one patient's current instruction on a topic. The
// withdrawal comes first: Retraction, then the words it replaced.
type Instruction struct {
	Retraction      string `json:"retraction,omitempty" jsonschema:"say this FIRST, word for word, before anything else: it withdraws the older words this conversation was given and gives the new ones, with who changed them and when. Absent when this conversation was not given older words of this instruction."`
	PreviousValue   string `json:"previousValue,omitempty" jsonschema:"the words this instruction replaced (the ones the retraction withdraws, else the version before this one); absent for a first version. If the patient may have been told them, say first that they changed."`
	PreviousVersion int    `json:"previousVersion,omitempty" jsonschema:"the version of previousValue"`
	URI             string `json:"uri" jsonschema:"the fact's URI"`
	Patient         string `json:"patient" jsonschema:"the patient's id"`
	Topic           string `json:"topic" jsonschema:"the instruction's topic, as spoken"`
	Version         int    `json:"version" jsonschema:"the current version"`
	Value           string `json:"value" jsonschema:"the clinician's current words; start with a [STALE …] header line when past its review date"`
	AuthorID        string `json:"authorId" jsonschema:"who wrote the current version"`
	AuthorLabel     string `json:"authorLabel" jsonschema:"who wrote it, as spoken: name and role"`
	WrittenAt       string `json:"writtenAt" jsonschema:"when it was written, RFC 3339 UTC with milliseconds"`
	AgeSeconds      int64  `json:"ageSeconds" jsonschema:"seconds between writtenAt and asOf"`
	Age             string `json:"age" jsonschema:"how long ago it was written, as spoken (say it with the instruction)"`
	Stale           bool   `json:"stale" jsonschema:"past its review date at asOf: say its age aloud and ask them to check it with the care team"`
}

// careInstructionOutputSchema is the inferred schema of
// CareInstructionOutput with its slices typed as arrays (the SDK infers
// ["null","array"], but the answer always carries arrays).
func careInstructionOutputSchema() *jsonschema.Schema {
	sch, err := jsonschema.For[CareInstructionOutput](nil)
	if err != nil {
		panic("bridge: care_instruction output schema: " + err.Error()) // a static type: cannot fail
	}
	for _, name := range []string{"instructions", "availableTopics"} {
		if c := sch.Properties[name]; c != nil {
			c.Types = nil
			c.Type = "array"
		}
	}
	return sch
}

// careInstructionDescription tells Alexa+'s model (or any host) when to
// call the tool, what it returns, and to withdraw before it answers.
const careInstructionDescription = "Call this when the patient or a carer asks what a care instruction says now: " +
	"walking and how much weight to put on the leg, the blood thinner, the exercises, who to call, or another topic of the care plan. " +
	"Returns the clinician's current words with who wrote them and how long ago. " +
	"Withdraw before you answer: if the result has a retraction, say it first, word for word, before anything else; " +
	"if the instruction replaced words the patient may have been told, first say that it changed, what it was, and who changed it when. " +
	"If it is past its review date, say its age aloud and ask them to check it with their care team. " +
	"Say only the clinician's words; add no medical advice."

func careInstructionTool() *mcp.Tool {
	return &mcp.Tool{
		Name:         ToolCareInstruction,
		Title:        "The current care instruction on a topic",
		Description:  careInstructionDescription,
		OutputSchema: careInstructionOutputSchema(),
		Annotations:  &mcp.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: boolPtr(false)},
		// MCP Apps: the card renders the answer (tool linkage in
		// _meta.ui; the flat "ui/resourceUri" key is deprecated).
		Meta: mcp.Meta{"ui": map[string]any{"resourceUri": EchoURI}},
	}
}

// addAlexaPlusTools registers the tools of this file on srv.
func (s *Server) addAlexaPlusTools(srv *mcp.Server) {
	mcp.AddTool(srv, careInstructionTool(), s.careInstruction)
}

// errTopic is the tool-level error for an empty topic.
var errTopic = errors.New("topic")

// careInstruction implements the tool. The caller is narrowed to the
// speakable scope: this tool answers what may be said aloud, even to a
// dual-scope caller (as brief_carer, P-10), and it reads through the
// store's partition for the patients the request's own token is bound to
// (P-1, P-21) — a token bound to no patient (client_credentials) reads
// nothing and learns nothing. The answer withdraws first: the retraction of
// the version this session was given before, else the words the current
// version replaced. The read is recorded for the session, like a
// resources/read. A store failure is a tool error, never "no instruction".
func (s *Server) careInstruction(ctx context.Context, req *mcp.CallToolRequest, in CareInstructionInput) (*mcp.CallToolResult, CareInstructionOutput, error) {
	now := s.now()
	asked := strings.TrimSpace(in.Topic)
	if normalizeTopic(asked) == "" {
		return nil, CareInstructionOutput{}, fmt.Errorf("%w: say what the instruction is about, for example walking, blood thinner, exercises or who to call", errTopic)
	}
	p := s.readPrincipal(req).Narrow(models.ScopeReadUser)
	// The topic is echoed back normalized (letters, digits and spaces):
	// never a URI or markup a caller typed.
	out := CareInstructionOutput{AsOf: now.UTC().Format(models.TimeLayout), Topic: truncate(normalizeTopic(asked), 200), Instructions: []Instruction{}}
	patients := readablePatients(p)
	if len(patients) == 0 {
		return careInstructionResult(out, false), out, nil
	}
	facts, err := s.st.List(ctx, p)
	if err != nil {
		s.logger.ErrorContext(ctx, "care_instruction: store list failed", "err", err)
		return nil, CareInstructionOutput{}, errors.New("the care notes could not be read; try again")
	}
	domains := map[string]bool{}
	for _, f := range facts {
		if f.Current.Audience == models.AudienceUser && p.CanRead(f.Current.Patient, models.AudienceUser) {
			domains[f.Current.Domain] = true
		}
	}
	domain, ok := careTopics().resolve(asked, domains)
	if !ok {
		out.AvailableTopics = careTopics().spokenTopics(domains)
		return careInstructionResult(out, true), out, nil
	}
	st, _ := s.sessionOf(req)
	for _, patient := range patients {
		u := models.NewURI(models.AudienceUser, patient, domain)
		rr, err := s.st.Read(ctx, p, u.String())
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			s.logger.ErrorContext(ctx, "care_instruction: store read failed", "err", err)
			return nil, CareInstructionOutput{}, errors.New("the care notes could not be read; try again")
		}
		v := rr.Version
		if v.Audience != models.AudienceUser || !p.CanRead(v.Patient, v.Audience) { // defence in depth (P-1)
			continue
		}
		out.Instructions = append(out.Instructions, s.instruction(ctx, p, st, v, now))
	}
	if len(out.Instructions) == 0 {
		out.AvailableTopics = careTopics().spokenTopics(domains)
	}
	return careInstructionResult(out, true), out, nil
}

// instruction builds one Instruction for v, withdrawal first: the
// retraction of the version session st was given before (recording that
// it was now given v), else the version before v as the words replaced.
func (s *Server) instruction(ctx context.Context, p models.Principal, st *sessionState, v models.Version, now time.Time) Instruction {
	in := Instruction{
		URI:         v.FactURI().String(),
		Patient:     v.Patient,
		Topic:       careTopics().spokenName(v.Domain),
		Version:     v.N,
		Value:       v.Value,
		AuthorID:    v.AuthorID,
		AuthorLabel: v.AuthorLabel,
		WrittenAt:   v.WrittenAt.UTC().Format(models.TimeLayout),
		AgeSeconds:  int64(now.Sub(v.WrittenAt) / time.Second),
		Age:         models.SpokenAge(now.Sub(v.WrittenAt)),
		Stale:       v.IsStale(now),
	}
	if in.Stale {
		in.Value = models.StaleHeader(v, now) + "\n" + v.Value
	}
	if st != nil {
		if read, ok := st.lastReadOf(v.FactURI()); ok && read.N < v.N {
			in.PreviousValue, in.PreviousVersion = read.Value, read.N
		}
		in.Retraction = s.noteRead(ctx, p, st, v, now)
	}
	if in.PreviousVersion == 0 && v.N > 1 {
		if pr, err := s.st.Read(ctx, p, v.FactURI().WithVersion(v.N-1).String()); err == nil && pr.Version.Audience == models.AudienceUser {
			in.PreviousValue, in.PreviousVersion = pr.Version.Value, pr.Version.N
		}
	}
	return in
}

// readablePatients are the patients p may read speakable facts of, in
// token order; none for a principal without care.read.user or bound to no
// patient (a client_credentials token), nor for the all-patients wildcard,
// which no request carries.
func readablePatients(p models.Principal) []string {
	if !p.Can(models.ScopeReadUser) {
		return nil
	}
	var out []string
	for _, id := range p.Patients {
		if id != models.AllPatients && models.ValidID(id) && !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	return out
}

// careInstructionResult is the tool result whose one text block carries
// the whole answer, withdrawal first (see careInstructionText).
func careInstructionResult(out CareInstructionOutput, linked bool) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: careInstructionText(out, linked)}}}
}

// whatsChangedResult is whats_changed's result: one text block with the
// whole answer, withdrawal first (see whatsChangedText).
func whatsChangedResult(out WhatsChangedOutput, since time.Time) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: whatsChangedText(out, since)}}}
}

// Words of the text blocks.
const (
	sayFirstLine    = "SAY THIS FIRST, word for word, before anything else — it withdraws what was said before:"
	mayHaveBeenTold = "If the patient may have been told the earlier words, withdraw them before you answer: say that the instruction changed, what it was, and who changed it when."
	staleLine       = "It is past its review date: say its age aloud (%s) and ask them to check it with their care team."
	onlyTheirWords  = "Say only the clinicians' words, with who wrote them and how long ago; add no medical advice."
)

// careInstructionText is care_instruction's text block: every field of out,
// in this order — each retraction to say first; for each instruction the
// words it replaced, the review-date warning with the age to speak, the
// current words, who wrote them, when and how long ago, its URI and
// version; what to say when nothing matched.
func careInstructionText(out CareInstructionOutput, linked bool) string {
	var b strings.Builder
	if !linked {
		fmt.Fprintf(&b, "No patient's care notes are linked to this account, so there is no instruction about %q to give (as of %s). "+
			"A carer links the account in the Alexa app (Link account) with the six-digit code from the care team.", out.Topic, out.AsOf)
		return b.String()
	}
	if len(out.Instructions) == 0 {
		fmt.Fprintf(&b, "The care notes hold no instruction about %q (as of %s).", out.Topic, out.AsOf)
		if len(out.AvailableTopics) > 0 {
			fmt.Fprintf(&b, " They hold instructions about: %s.", strings.Join(out.AvailableTopics, "; "))
		}
		b.WriteString(" Do not guess one; offer these topics instead.")
		return b.String()
	}
	var first []string
	for _, in := range out.Instructions {
		if in.Retraction != "" {
			first = append(first, in.Retraction)
		}
	}
	if len(first) > 0 {
		b.WriteString(sayFirstLine)
		for _, r := range first {
			b.WriteString("\n" + r)
		}
		b.WriteString("\n\n")
	}
	for i, in := range out.Instructions {
		if i > 0 {
			b.WriteString("\n\n")
		}
		fmt.Fprintf(&b, "%s's %s instruction (%s, version %d)", displayName(in.Patient), in.Topic, in.URI, in.Version)
		if in.PreviousVersion > 0 {
			fmt.Fprintf(&b, " replaced version %d.\nWithdrawn (version %d): %s", in.PreviousVersion, in.PreviousVersion, models.Quote(in.PreviousValue))
			if in.Retraction == "" {
				b.WriteString("\n" + mayHaveBeenTold)
			}
		} else {
			b.WriteString(".")
		}
		current := in.Value
		if in.Stale {
			var header string
			header, current, _ = strings.Cut(in.Value, "\n")
			fmt.Fprintf(&b, "\n%s\n"+staleLine, header, in.Age)
		}
		fmt.Fprintf(&b, "\nNow: %s\nWritten by %s (%s) %s, at %s (%d seconds before %s).",
			models.Quote(current), in.AuthorLabel, in.AuthorID, in.Age, in.WrittenAt, in.AgeSeconds, out.AsOf)
	}
	b.WriteString("\n\n" + onlyTheirWords)
	return b.String()
}

// whatsChangedText is whats_changed's text block: every field of out —
// first each retraction to say, then every revision oldest first with the
// words it withdrew, its review-date warning, its words, author, time and
// age, and for an assistant-only revision that it is never to be spoken.
func whatsChangedText(out WhatsChangedOutput, since time.Time) string {
	var b strings.Builder
	sinceStr := since.UTC().Format(models.TimeLayout)
	if len(out.Changes) == 0 {
		fmt.Fprintf(&b, "No revision you may read was written after %s (as of %s).", sinceStr, out.AsOf)
		return b.String()
	}
	fmt.Fprintf(&b, "%d revision(s) you may read since %s (as of %s).", len(out.Changes), sinceStr, out.AsOf)
	if out.OlderRevisionsOmitted > 0 {
		fmt.Fprintf(&b, " Only each fact's latest revision is listed; %d older revision(s) left out (olderRevisionsOmitted).", out.OlderRevisionsOmitted)
	}
	var first []string
	for _, r := range out.Changes {
		if r.Retraction != "" {
			first = append(first, r.Retraction)
		}
	}
	if len(first) > 0 {
		b.WriteString("\n\n" + sayFirstLine)
		for _, r := range first {
			b.WriteString("\n" + r)
		}
	}
	b.WriteString("\n\nRevisions, oldest first:")
	for i, r := range out.Changes {
		fmt.Fprintf(&b, "\n%d. %s version %d", i+1, r.URI, r.Version)
		u, err := models.ParseURI(r.URI)
		speakable := err == nil && u.Audience() == models.AudienceUser
		if !speakable {
			b.WriteString(" — for your reasoning only: never speak, quote or paraphrase it")
		}
		if r.PreviousVersion > 0 {
			fmt.Fprintf(&b, "\n   Withdrawn (version %d): %s", r.PreviousVersion, models.Quote(r.PreviousValue))
			if speakable && r.Retraction == "" {
				b.WriteString("\n   " + mayHaveBeenTold)
			}
		}
		current := r.Value
		if r.Stale {
			var header string
			header, current, _ = strings.Cut(r.Value, "\n")
			fmt.Fprintf(&b, "\n   %s\n   "+staleLine, header, spokenAgeOf(r.AgeSeconds))
		}
		fmt.Fprintf(&b, "\n   Now: %s\n   Written by %s (%s) %s, at %s (%d seconds before %s).",
			models.Quote(current), r.AuthorLabel, r.AuthorID, spokenAgeOf(r.AgeSeconds), r.WrittenAt, r.AgeSeconds, out.AsOf)
	}
	b.WriteString("\n\n" + onlyTheirWords)
	return b.String()
}

// spokenAgeOf is models.SpokenAge of an age in whole seconds.
func spokenAgeOf(seconds int64) string { return models.SpokenAge(time.Duration(seconds) * time.Second) }

// displayName is a patient id as a name: "ray" → "Ray".
func displayName(patient string) string {
	if patient == "" {
		return patient
	}
	return strings.ToUpper(patient[:1]) + patient[1:]
}
