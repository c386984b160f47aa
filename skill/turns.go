package skill

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/unsay/unsay/apl"
	"github.com/unsay/unsay/models"
)

// What the skill says. Clinicians' words are quoted (models.Quote), never reworded.
const (
	textQuestion     = "What would you like to know?"
	textTopics       = "I can tell you about your walking, your blood thinner, your exercises, or who to call. Which would you like?"
	textTopicsPrompt = "You can ask about your walking, your blood thinner, your exercises, or who to call."
	textHelp         = "You can ask me: what's my walking instruction; tell me about my blood thinner; what are my exercises; or who do I call. You can also say: what changed."
	textNothingNew   = "Nothing has changed since you last heard your care notes."
	textNothingMore  = "There's nothing more to add."
	textNoRepeat     = "I haven't told you anything yet."
	textGoodbye      = "Goodbye."
	textSorry        = "Sorry, I can't reach your care notes right now. Please try again in a minute."
	textEmptyNotes   = "There is nothing in your care notes yet."
	textUnlinked     = "This device isn't linked to a care plan yet. Ask your carer for a six-digit code, then say: my code is, and the number."
	textLinkPrompt   = "Say: my code is, and the six digits."
	textCodeAsk      = "What is your six-digit code? Say: my code is, and the number."
	textCodeShape    = "A linking code has six digits. Say: my code is, and the number."
	textCodeWrong    = "That code didn't work. A code lasts ten minutes and works once. Ask your carer for a new one, then say: my code is, and the number."
	textCodeBlocked  = "Too many wrong codes were tried. Please wait fifteen minutes, then ask your carer for a new code."
	textLinkOff      = "Linking isn't set up here. Please ask your carer."
	textLinked       = "This device is now linked to your care plan."
	textMoreReprompt = "Say more to continue, or ask me something else."
	checkWithTeam    = "Please check it with your care team."
)

// Domains the skill names on its own (the launch speaks weight_bearing first).
const domainWeightBearing = "weight_bearing"

// ending says how a response that asks nothing ends.
type ending int

const (
	endAnswer ending = iota // true on a voice-only device; omitted with a screen
	endLeave                // true: the user is leaving
	endScreen               // omitted: keep the screen session, no microphone
)

type cardKind int

const (
	cardNone cardKind = iota
	cardCare
	cardHelp
	cardLink
)

// reply is what a handler wants said after the announcements.
type reply struct {
	segs     []segment
	question string // closing question: shouldEndSession false + reprompt
	reprompt string
	end      ending
	card     cardKind
	empty    bool // nothing to say: {"version":"1.0","response":{}}
	forget   bool // drop the session's Repeat/More state
}

// turn is one request from a resolved patient.
type turn struct {
	s       *Skill
	ctx     context.Context
	env     *RequestEnvelope
	now     time.Time
	patient string
	apl     bool

	prefix    []segment // said before the announcements (the link confirmation)
	anns      []segment // announcements rendered this turn, oldest first
	silent    []mark    // announcements with unchanged words: heard, nothing said
	announced map[models.URI]models.Announcement

	facts       []models.Version
	factsLoaded bool
	factsErr    error
}

func emptyResponse() ResponseEnvelope { return ResponseEnvelope{Version: "1.0"} }

// handled is a built response: the envelope, the marks of what it speaks,
// the patient they belong to, and the release of the patient's turn lock,
// which the caller holds until the marks are recorded.
type handled struct {
	out     ResponseEnvelope
	marks   []mark
	patient string
	release func()
}

func noop() {}

func result(out ResponseEnvelope, marks []mark, patient string) handled {
	return handled{out: out, marks: marks, patient: patient, release: noop}
}

// handle routes a verified request. For a linked patient it returns with
// the patient's turn lock held (release it after marking heard), so that a
// tick and an intent racing on this instance cannot both speak one
// announcement.
func (s *Skill) handle(ctx context.Context, env *RequestEnvelope) handled {
	req := &env.Request
	switch req.Type {
	case TypeSessionEnded:
		attrs := []any{"reason", req.Reason, "session", env.SessionID()}
		if req.Error != nil {
			attrs = append(attrs, "error_type", req.Error.Type, "error", req.Error.Message)
		}
		s.log.Info("alexa session ended", attrs...)
		s.sessions.delete(env.SessionID())
		return result(emptyResponse(), nil, "")
	case TypeExceptionEncounter:
		attrs := []any{"session", env.SessionID()}
		if req.Error != nil {
			attrs = append(attrs, "error_type", req.Error.Type, "error", req.Error.Message)
		}
		if req.Cause != nil {
			attrs = append(attrs, "cause", req.Cause.RequestID)
		}
		s.log.Warn("alexa exception encountered", attrs...)
		return result(emptyResponse(), nil, "")
	case TypeLaunch, TypeIntent, TypeAPLUserEvent:
	default:
		s.log.Info("alexa request type not handled", "type", req.Type)
		return result(emptyResponse(), nil, "")
	}
	now := s.now()
	if req.Type == TypeIntent && req.Intent.Name == IntentLinkDevice {
		return s.linkDevice(ctx, env, now)
	}
	patient, err := s.patientFor(ctx, env)
	if err != nil {
		s.log.Error("alexa linked patient", "err", err)
		return result(s.build(&turn{s: s, ctx: ctx, env: env, now: now}, reply{segs: say(textSorry), end: endLeave}))
	}
	if patient == "" {
		h := result(s.build(&turn{s: s, ctx: ctx, env: env, now: now, apl: env.SupportsAPL()}, s.unlinkedReplyFor(env)))
		s.offerAccountLinking(&h.out) // accountlink.go
		return h
	}
	release := s.lockPatient(patient)
	t := s.newTurn(ctx, env, now, patient)
	h := result(s.build(t, t.route()))
	h.release = release
	return h
}

func (s *Skill) newTurn(ctx context.Context, env *RequestEnvelope, now time.Time, patient string) *turn {
	return &turn{s: s, ctx: ctx, env: env, now: now, patient: patient, apl: env.SupportsAPL(),
		announced: map[models.URI]models.Announcement{}}
}

// patientFor returns the patient of the request's account-linking access
// token, else the one linked to its Alexa user by code, else
// DefaultPatient, else "" (unlinked).
func (s *Skill) patientFor(ctx context.Context, env *RequestEnvelope) (string, error) {
	if p, ok, err := s.accountLinkedPatient(ctx, env); err != nil || ok { // accountlink.go
		return p, err
	}
	if uid := env.UserID(); uid != "" && s.links != nil {
		p, _, ok, err := s.links.LinkedPatient(ctx, uid)
		if err != nil {
			return "", err
		}
		if ok && p != "" {
			return p, nil
		}
	}
	return s.cfg.DefaultPatient, nil
}

func say(texts ...string) []segment {
	out := make([]segment, 0, len(texts))
	for _, t := range texts {
		out = append(out, segment{Text: t})
	}
	return out
}

func unlinkedReply(env *RequestEnvelope) reply {
	switch {
	case env.Request.Type == TypeAPLUserEvent && env.Request.FirstArgument() == apl.ArgTick:
		return reply{empty: true}
	case env.Request.Type == TypeIntent && isLeaving(env.Request.Intent.Name):
		return reply{segs: say(textGoodbye), end: endLeave, forget: true}
	}
	return reply{question: textUnlinked, reprompt: textLinkPrompt, card: cardLink}
}

func isLeaving(intent string) bool {
	return intent == IntentStop || intent == IntentCancel || intent == IntentNavigateHome
}

// route answers a linked patient's turn: announcements first, then the
// request's own answer.
func (t *turn) route() reply {
	if err := t.announce(); err != nil {
		// Without the pending list nothing may be said before it (P-19).
		t.s.log.Error("alexa pending announcements", "patient", t.patient, "err", err)
		return reply{segs: say(textSorry), end: endLeave}
	}
	req := &t.env.Request
	switch req.Type {
	case TypeLaunch:
		return t.launch()
	case TypeAPLUserEvent:
		switch arg := req.FirstArgument(); arg {
		case apl.ArgTick:
			if !t.spokeAnything() {
				return reply{empty: true}
			}
			return reply{end: endScreen, card: cardCare}
		case apl.ArgWhatsChanged:
			return t.whatsChanged()
		default:
			t.s.log.Info("alexa APL user event not handled", "argument", arg, "token", req.Token)
			if !t.spokeAnything() {
				return reply{empty: true}
			}
			return reply{end: endScreen, card: cardCare}
		}
	}
	switch req.Intent.Name {
	case IntentCarePlan:
		return t.carePlan()
	case IntentWhatsChanged:
		return t.whatsChanged()
	case IntentMore:
		return t.more()
	case IntentRepeat:
		return t.repeat()
	case IntentStop, IntentCancel, IntentNavigateHome:
		return reply{segs: say(textGoodbye), end: endLeave, forget: true}
	case IntentHelp, IntentFallback:
		return reply{segs: say(textHelp), question: textQuestion, reprompt: textTopicsPrompt, card: cardHelp}
	default:
		t.s.log.Info("alexa intent not handled; answering as fallback", "intent", req.Intent.Name)
		return reply{segs: say(textHelp), question: textQuestion, reprompt: textTopicsPrompt, card: cardHelp}
	}
}

// announce renders the pending announcements, oldest first. An announcement
// whose words did not change is heard silently; one that cannot be rendered
// (assistant audience, another patient) is logged and never spoken.
func (t *turn) announce() error {
	pending, err := t.s.care.Pending(t.ctx, t.patient)
	if err != nil {
		return err
	}
	for _, a := range pending {
		if a.Patient != "" && a.Patient != t.patient || a.Current.Patient != t.patient {
			t.s.log.Error("alexa announcement for another patient skipped", "patient", t.patient, "id", a.ID)
			continue
		}
		text, err := a.Render(t.now)
		switch {
		case errors.Is(err, models.ErrUnchanged):
			t.silent = append(t.silent, mark{URI: a.URI(), Version: a.Current.N})
			continue
		case err != nil:
			t.s.log.Error("alexa announcement not spoken", "patient", t.patient, "id", a.ID, "err", err)
			continue
		}
		t.anns = append(t.anns, segment{Text: text, Marks: []mark{{URI: a.URI(), Version: a.Current.N}}, Fact: a.URI(), Pause: true})
		t.announced[a.URI()] = a
	}
	return nil
}

func (t *turn) spokeAnything() bool { return len(t.anns) > 0 || len(t.prefix) > 0 }

// loadFacts reads the patient's speakable facts once per turn, keeping only
// audience-user versions of this patient (defence in depth for P-1).
func (t *turn) loadFacts() ([]models.Version, error) {
	if t.factsLoaded {
		return t.facts, t.factsErr
	}
	t.factsLoaded = true
	all, err := t.s.care.Facts(t.ctx, t.patient)
	if err != nil {
		t.factsErr = err
		return nil, err
	}
	for _, v := range all {
		if v.Audience != models.AudienceUser || v.Patient != t.patient {
			t.s.log.Error("alexa fact skipped: not a speakable fact of this patient", "patient", t.patient, "uri", v.URI().String())
			continue
		}
		t.facts = append(t.facts, v)
	}
	return t.facts, nil
}

func (t *turn) launch() reply {
	facts, err := t.loadFacts()
	if err != nil {
		t.s.log.Error("alexa facts", "patient", t.patient, "err", err)
		return reply{segs: say(textSorry), end: endLeave}
	}
	var segs []segment
	var stale []models.Version
	for _, v := range facts {
		if _, done := t.announced[v.FactURI()]; done {
			continue
		}
		if v.Domain == domainWeightBearing {
			segs = append(segs, factSegment(v, t.now))
		} else if isStale(v, t.now) {
			stale = append(stale, v)
		}
	}
	if len(stale) > 0 {
		intro := "One thing needs checking."
		if len(stale) > 1 {
			intro = capitalize(models.SpellNumber(len(stale))) + " things need checking."
		}
		segs = append(segs, segment{Text: intro})
		for _, v := range stale {
			segs = append(segs, factSegment(v, t.now))
		}
	}
	if len(facts) == 0 && len(t.anns) == 0 {
		segs = append(segs, segment{Text: textEmptyNotes})
	}
	return reply{segs: segs, question: textQuestion, reprompt: textTopicsPrompt, card: cardCare}
}

func (t *turn) carePlan() reply {
	domain, ok := t.env.Request.Intent.Slots[SlotTopic].ResolvedID()
	if !ok || !models.ValidID(domain) {
		return reply{question: textTopics, reprompt: textTopics, card: cardCare}
	}
	facts, err := t.loadFacts()
	if err != nil {
		t.s.log.Error("alexa facts", "patient", t.patient, "err", err)
		return reply{segs: say(textSorry), end: endLeave}
	}
	for _, v := range facts {
		if v.Domain != domain {
			continue
		}
		if _, done := t.announced[v.FactURI()]; done {
			return reply{end: endAnswer, card: cardCare} // the announcement said it
		}
		return reply{segs: []segment{factSegment(v, t.now)}, end: endAnswer, card: cardCare}
	}
	return reply{segs: say(fmt.Sprintf("There is no %s instruction in your care notes.", models.Topic(domain))),
		question: textQuestion, reprompt: textTopicsPrompt, card: cardCare}
}

func (t *turn) whatsChanged() reply {
	if len(t.anns) == 0 {
		return reply{segs: say(textNothingNew), end: endAnswer, card: cardCare}
	}
	return reply{end: endAnswer, card: cardCare}
}

// withoutAnnounced drops segments about a fact announced this turn: what was
// said of it before is superseded.
func (t *turn) withoutAnnounced(segs []segment) []segment {
	var out []segment
	for _, s := range segs {
		if _, done := t.announced[s.Fact]; done && s.Fact != (models.URI{}) {
			continue
		}
		out = append(out, s)
	}
	return out
}

func (t *turn) more() reply {
	st := t.s.sessions.get(t.env.SessionID(), t.patient, t.now)
	rest := t.withoutAnnounced(st.rest)
	if len(rest) == 0 {
		return reply{segs: say(textNothingMore), question: textQuestion, reprompt: textTopicsPrompt, card: cardCare}
	}
	return reply{segs: rest, end: endAnswer, card: cardCare}
}

func (t *turn) repeat() reply {
	st := t.s.sessions.get(t.env.SessionID(), t.patient, t.now)
	last := t.withoutAnnounced(st.last)
	if len(last) == 0 && len(t.anns) == 0 {
		return reply{segs: say(textNoRepeat), question: textQuestion, reprompt: textTopicsPrompt, card: cardCare}
	}
	return reply{segs: last, end: endAnswer, card: cardCare}
}

// linkDevice redeems a six-digit code (100000–999999) and, once linked,
// answers like a launch for the new patient.
func (s *Skill) linkDevice(ctx context.Context, env *RequestEnvelope, now time.Time) handled {
	t := &turn{s: s, ctx: ctx, env: env, now: now, apl: env.SupportsAPL()}
	if s.links == nil {
		return result(s.build(t, reply{segs: say(textLinkOff), end: endLeave}))
	}
	code := strings.ReplaceAll(strings.TrimSpace(env.Request.Intent.Slots[SlotCode].Value), " ", "")
	switch {
	case code == "" || code == "?":
		return result(s.build(t, reply{question: textCodeAsk, reprompt: textLinkPrompt, card: cardLink}))
	case !validLinkCode(code):
		return result(s.build(t, reply{question: textCodeShape, reprompt: textLinkPrompt, card: cardLink}))
	}
	patient, err := s.links.RedeemLinkCode(ctx, env.UserID(), env.Context.System.APIEndpoint, code, now)
	switch {
	case errors.Is(err, ErrLinkBlocked):
		return result(s.build(t, reply{segs: say(textCodeBlocked), end: endLeave}))
	case errors.Is(err, ErrLinkCodeInvalid):
		return result(s.build(t, reply{question: textCodeWrong, reprompt: textLinkPrompt, card: cardLink}))
	case err != nil:
		s.log.Error("alexa link code", "err", err)
		return result(s.build(t, reply{segs: say(textSorry), end: endLeave}))
	case !models.ValidID(patient):
		s.log.Error("alexa link code: invalid patient id from Links", "patient", patient)
		return result(s.build(t, reply{segs: say(textSorry), end: endLeave}))
	}
	s.log.Info("alexa device linked", "patient", patient)
	release := s.lockPatient(patient)
	lt := s.newTurn(ctx, env, now, patient)
	lt.prefix = say(textLinked)
	if err := lt.announce(); err != nil {
		s.log.Error("alexa pending announcements", "patient", patient, "err", err)
		h := result(s.build(lt, reply{question: textQuestion, reprompt: textTopicsPrompt}))
		h.release = release
		return h
	}
	h := result(s.build(lt, lt.launch()))
	h.release = release
	return h
}

func validLinkCode(code string) bool {
	if len(code) != 6 || code[0] == '0' {
		return false
	}
	for i := 0; i < len(code); i++ {
		if code[i] < '0' || code[i] > '9' {
			return false
		}
	}
	return true
}

// build turns a reply into the response: prefix, announcements and answer
// in that order, cut to MaxSSMLChars, with the three-state
// shouldEndSession, the APL card when the device has a screen, and the
// marks of everything it speaks in full.
func (s *Skill) build(t *turn, r reply) (ResponseEnvelope, []mark, string) {
	out := emptyResponse()
	marks := append([]mark(nil), t.silent...)
	if r.empty && len(t.anns) == 0 && len(t.prefix) == 0 {
		return out, marks, t.patient
	}
	all := make([]segment, 0, len(t.prefix)+len(t.anns)+len(r.segs))
	all = append(append(append(all, t.prefix...), t.anns...), r.segs...)
	spoken, rest := fitSpeech(all, r.question, MaxSSMLChars)
	body := &out.Response
	switch {
	case len(rest) > 0:
		body.OutputSpeech = &OutputSpeech{Type: "SSML", SSML: renderSSML(spoken, MoreCue)}
		body.Reprompt = &Reprompt{OutputSpeech: OutputSpeech{Type: "SSML", SSML: renderSSML(nil, textMoreReprompt)}}
		body.ShouldEndSession = boolPtr(false)
	case r.question != "":
		body.OutputSpeech = &OutputSpeech{Type: "SSML", SSML: renderSSML(spoken, r.question)}
		rp := r.reprompt
		if rp == "" {
			rp = r.question
		}
		body.Reprompt = &Reprompt{OutputSpeech: OutputSpeech{Type: "SSML", SSML: renderSSML(nil, rp)}}
		body.ShouldEndSession = boolPtr(false)
	default:
		if hasText(spoken) {
			body.OutputSpeech = &OutputSpeech{Type: "SSML", SSML: renderSSML(spoken, "")}
		}
		switch {
		case r.end == endLeave:
			body.ShouldEndSession = boolPtr(true)
		case r.end == endAnswer && !t.apl:
			body.ShouldEndSession = boolPtr(true)
		}
	}
	for _, sg := range spoken {
		marks = append(marks, sg.Marks...)
	}
	if t.apl && r.end != endLeave {
		if d := t.card(r.card, spoken); d != nil {
			body.Directives = []Directive{*d}
		}
	}
	if sid := t.env.SessionID(); sid != "" && t.patient != "" {
		if r.forget {
			s.sessions.delete(sid)
		} else if hasText(spoken) {
			s.sessions.put(sid, sessionState{patient: t.patient, last: spoken, rest: rest}, t.now)
		}
	}
	return out, marks, t.patient
}

func hasText(segs []segment) bool {
	for _, s := range segs {
		if strings.TrimSpace(s.Text) != "" {
			return true
		}
	}
	return false
}

func boolPtr(b bool) *bool { return &b }

// card returns the RenderDocument for this turn: the retraction card when a
// retraction was spoken in full, else the requested card.
func (t *turn) card(kind cardKind, spoken []segment) *Directive {
	var retractions []models.Announcement
	for _, sg := range spoken {
		if a, ok := t.announced[sg.Fact]; ok && len(sg.Marks) > 0 && a.IsRetraction() {
			retractions = append(retractions, a)
		}
	}
	if len(retractions) > 0 {
		a := retractions[len(retractions)-1]
		withdrawn, _ := stripStaleHeader(a.Heard.Value)
		current, _ := stripStaleHeader(a.Current.Value)
		c := apl.RetractionCard{
			Title:     "Your " + models.Topic(a.Current.Domain) + " instruction has changed",
			Withdrawn: withdrawn,
			Current:   current,
			Author:    a.Current.AuthorLabel,
			Age:       models.SpokenAge(t.now.Sub(a.Current.WrittenAt)),
		}
		if n := len(retractions) - 1; n == 1 {
			c.More = "One other change was read out."
		} else if n > 1 {
			c.More = capitalize(models.SpellNumber(n)) + " other changes were read out."
		}
		return renderDirective(apl.Retraction(), apl.RetractionDatasource(c))
	}
	switch kind {
	case cardCare:
		facts, err := t.loadFacts()
		if err != nil {
			t.s.log.Error("alexa facts for the care card", "patient", t.patient, "err", err)
			return nil
		}
		c := apl.CareCard{Title: "Your care notes"}
		for _, v := range facts {
			value, hdr := stripStaleHeader(v.Value)
			c.Rows = append(c.Rows, apl.CareRow{
				Topic:  capitalize(models.Topic(v.Domain)),
				Text:   value,
				Author: v.AuthorLabel,
				Age:    models.SpokenAge(t.now.Sub(v.WrittenAt)),
				Stale:  hdr || v.IsStale(t.now),
			})
		}
		return renderDirective(apl.Care(), apl.CareDatasource(c))
	case cardHelp:
		return renderDirective(apl.Help(), apl.HelpDatasource(apl.HelpCard{
			Title:   "You can ask",
			Phrases: []string{"What's my walking instruction?", "Tell me about my blood thinner", "What are my exercises?", "Who do I call?", "What changed?"},
		}))
	case cardLink:
		return renderDirective(apl.Help(), apl.HelpDatasource(apl.HelpCard{
			Title:   "Link this device",
			Phrases: []string{"My code is …"},
			Note:    "Ask your carer for a six-digit code.",
		}))
	}
	return nil
}

func renderDirective(d apl.Doc, ds map[string]any) *Directive {
	return &Directive{Type: RenderDocumentType, Token: d.Token, Document: d.JSON, Datasources: ds}
}

// factSegment speaks one fact with its author and age; a stale one is
// spoken with its age first, marked past its review date (P-7).
func factSegment(v models.Version, now time.Time) segment {
	value, hdr := stripStaleHeader(v.Value)
	author := v.AuthorLabel
	if author == "" {
		author = "your care team"
	}
	age := models.SpokenAge(now.Sub(v.WrittenAt))
	topic := models.Topic(v.Domain)
	var text string
	if hdr || v.IsStale(now) {
		text = fmt.Sprintf("%s, %s wrote your %s instruction: %s It is now past its review date.", capitalize(age), models.Appositive(author), topic, models.Quote(value))
		if g := models.GlossSentence(value); g != "" {
			text += " " + g
		}
		text += " " + checkWithTeam
	} else {
		text = fmt.Sprintf("Your %s instruction from %s, %s: %s", topic, author, age, models.Quote(value))
		if g := models.GlossSentence(value); g != "" {
			text += " " + g
		}
	}
	return segment{Text: text, Marks: []mark{{URI: v.FactURI(), Version: v.N}}, Fact: v.FactURI()}
}

func isStale(v models.Version, now time.Time) bool {
	_, hdr := stripStaleHeader(v.Value)
	return hdr || v.IsStale(now)
}

// stripStaleHeader removes a leading "[STALE — …]" header (P-7), which the
// MCP server puts before a stale fact's text; the skill speaks staleness in
// its own words. It reports whether a header was there.
func stripStaleHeader(value string) (string, bool) {
	v := strings.TrimSpace(value)
	if !strings.HasPrefix(v, "[STALE") {
		return v, false
	}
	i := strings.Index(v, "]")
	if i < 0 {
		return v, false
	}
	return strings.TrimSpace(v[i+1:]), true
}

func capitalize(s string) string {
	r, n := utf8.DecodeRuneInString(s)
	if n == 0 {
		return s
	}
	return string(unicode.ToUpper(r)) + s[n:]
}
