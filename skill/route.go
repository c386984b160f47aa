package skill

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/unsay/unsay/apl"
	"github.com/unsay/unsay/models"
)

// Domains the skill names on its own (the launch speaks weight_bearing first).
const domainWeightBearing = "weight_bearing"

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

	// What the care source confirmed current at speak time (P-24).
	snap    models.Snapshot
	facts   []models.Version // the patient's speakable facts
	current map[models.URI]models.Version
	session sessionState // this Alexa session's Repeat and More state

	// The care source's revision count for the patient just before the
	// confirmation began (counted: it has one and snap was confirmed).
	counted bool
	revs    uint64

	// held: a tick left unsaid an announcement an earlier tick of this
	// session spoke at the same version (announce, U10); heldSegs are the
	// segments of the session's last response that spoke it.
	held     bool
	heldSegs []segment

	// added: distinctAdded's domains, computed once a turn (addedDone).
	added     []string
	addedDone bool
}

// handled is a built response: the envelope, the marks of what it speaks
// in full, the announcements it carries (Offered before it is written),
// the patient they belong to, and the release of the patient's turn lock,
// which the caller holds until the marks are recorded.
type handled struct {
	out     ResponseEnvelope
	marks   []mark
	offered []models.Offer
	// cardOffered are the offers of what the APL card shows (the new words
	// of the retraction it draws; the rows the care card shows cut, told):
	// recorded only if the card is sent.
	cardOffered []models.Offer
	patient     string
	release     func()
	// For the session attributes (AttrMarked): what he heard of each fact
	// before this turn, and the version each announcement it speaks
	// withdraws (0: a first hearing).
	heardBefore map[models.URI]int
	from        map[models.URI]int
	// sent is its id and marks as its session attributes name them (set
	// by offer), for the session's record of its last response.
	sent sentResponse
	// The turn it was built from and how it was answered (route, or the
	// launch after linking), to build it again when a revision overtakes
	// it (skill.go, overtaken); turn nil: nothing it says was confirmed.
	turn  *turn
	route func(*turn) reply
}

func noop() {}

// handle routes a verified request. For a linked patient owed an
// announcement it returns with the patient's turn lock held (release it
// after marking heard), so that a tick and an intent racing on this
// instance cannot both speak one announcement.
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
		h := handled{out: emptyResponse(), release: noop}
		if req.Reason == ReasonError {
			h.patient = s.notPlayed(ctx, env) // notplayed.go; the patient, for the response's log lines
		}
		return h
	case TypeExceptionEncounter:
		attrs := []any{"session", env.SessionID()}
		if req.Error != nil {
			attrs = append(attrs, "error_type", req.Error.Type, "error", req.Error.Message)
		}
		if req.Cause != nil {
			attrs = append(attrs, "cause", req.Cause.RequestID)
		}
		s.log.Warn("alexa exception encountered", attrs...)
		return handled{out: emptyResponse(), release: noop}
	case TypeLaunch, TypeIntent, TypeAPLUserEvent:
	default:
		s.log.Info("alexa request type not handled", "type", req.Type)
		return handled{out: emptyResponse(), release: noop}
	}
	now := s.now()
	if req.Type == TypeIntent && req.Intent.Name == IntentLinkDevice {
		return s.linkDevice(ctx, env, now)
	}
	patient, err := s.patientFor(ctx, env)
	if err != nil {
		s.log.Error("alexa linked patient", "err", err)
		if req.Type == TypeIntent && isLeaving(req.Intent.Name) {
			// He asked to stop: the session ends as asked, marking nothing
			// (finding V6d; what is owed stays owed).
			return s.build(&turn{s: s, ctx: ctx, env: env, now: now}, reply{segs: say(textGoodbye), end: endLeave, forget: true})
		}
		return s.build(&turn{s: s, ctx: ctx, env: env, now: now}, reply{segs: say(textSorry), end: endLeave})
	}
	if patient == "" {
		h := s.build(&turn{s: s, ctx: ctx, env: env, now: now, apl: env.SupportsAPL()}, s.unlinkedReplyFor(env))
		s.offerAccountLinking(&h.out) // accountlink.go
		return h
	}
	s.applyKeptFirst(ctx, patient) // an error report the ledger could not take yet (keptreports.go)
	t := s.newTurn(ctx, env, now, patient)
	r := t.route()
	release := noop
	if len(t.snap.Pending) > 0 {
		// Something is owed: the turn is decided again, and spoken, under
		// the patient's turn lock, so that two turns racing on this instance
		// cannot both speak one announcement. A turn that owes nothing
		// cannot, and runs without it (concurrent turns of one patient then
		// share the care source's confirmation).
		release = s.lockPatient(patient)
		t = s.newTurn(ctx, env, s.now(), patient)
		r = t.route()
	}
	h := s.build(t, r)
	h.release = release
	h.turn, h.route = t, (*turn).route
	return h
}

func (s *Skill) newTurn(ctx context.Context, env *RequestEnvelope, now time.Time, patient string) *turn {
	return &turn{s: s, ctx: ctx, env: env, now: now, patient: patient, apl: env.SupportsAPL(),
		announced: map[models.URI]models.Announcement{}, current: map[models.URI]models.Version{},
		session: s.sessions.get(env.SessionID(), patient, now)}
}

// patientFor returns the patient of the request's account-linking access
// token, else the one linked to its Alexa user by code, else
// DefaultPatient when it carries no token, else "" (unlinked).
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
	return s.defaultPatientFor(env), nil // accountlink.go: not for a refused token
}

func say(texts ...string) []segment {
	out := make([]segment, 0, len(texts))
	for _, t := range texts {
		if t != "" {
			out = append(out, segment{Text: t})
		}
	}
	return out
}

func isLeaving(intent string) bool {
	return intent == IntentStop || intent == IntentCancel || intent == IntentNavigateHome
}

// route answers a linked patient's turn: what the care source confirms
// current, announcements first, then the request's own answer. When it
// cannot confirm, nothing is said as current (P-24).
func (t *turn) route() reply {
	req := &t.env.Request
	if err := t.load(); err != nil {
		t.s.log.Error("alexa care notes not confirmed; nothing said as current", "patient", t.patient, "err", err)
		if req.Type == TypeAPLUserEvent && req.FirstArgument() != apl.ArgWhatsChanged {
			return reply{empty: true} // a tick says nothing it cannot stand behind
		}
		if req.Type == TypeIntent && isLeaving(req.Intent.Name) {
			return reply{segs: say(textGoodbye), end: endLeave, forget: true}
		}
		return reply{segs: say(textUnreachable, changedSince(t.snap.Withdrawn), textTryAgain), end: endLeave}
	}
	t.announce()
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
		case apl.ArgPlayClip:
			return t.playClip() // clip.go
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
	case IntentPlayClip:
		return t.playClip() // clip.go
	case IntentMore:
		return t.more()
	case IntentRepeat:
		return t.repeat()
	case IntentStop, IntentCancel, IntentNavigateHome:
		return t.leave()
	case IntentHelp, IntentFallback:
		return t.help()
	default:
		t.s.log.Info("alexa intent not handled; answering as fallback", "intent", req.Intent.Name)
		return t.help()
	}
}

// LeavingSpeechChars bounds what Stop, Cancel and Navigate Home say
// before "Goodbye." (800 characters of SSML, under a minute): the session
// must end when he asks (Alexa certification), so no answer is cut for
// "more" then.
const LeavingSpeechChars = 800

// leave ends the session when he asks to stop. Announcements that fit
// whole within LeavingSpeechChars are still said first — stop first, a
// short retraction is worth the seconds (P-19) — and marked heard; one
// that does not fit is not started: it stays owed, whole, for his next
// turn, and he is told which instruction changed (never its new words,
// which are not said then). Nothing is cut for "more".
func (t *turn) leave() reply {
	var keep []segment
	var owed []models.Announcement
	used := 0
	for _, a := range t.anns {
		if c := cost(a); used+c <= LeavingSpeechChars {
			keep = append(keep, a)
			used += c
			continue
		}
		if a.ann != nil {
			owed = append(owed, *a.ann)
		}
	}
	t.anns = keep
	return reply{segs: say(owedOnLeaving(owed), textGoodbye), end: endLeave, forget: true}
}

// help names what he can ask, the care team's added topics among them
// (topics.go).
func (t *turn) help() reply {
	return reply{segs: say(t.helpText()), question: textQuestion, reprompt: t.topicsPrompt(), card: cardHelp}
}

// load asks the care source for this turn's confirmed snapshot, keeping
// only audience-user versions of this patient (defence in depth for P-1).
func (t *turn) load() error {
	if changed, kept := t.s.kept.withdrawn(t.patient); kept {
		// The facts a kept error report re-opens may owe a retraction the
		// ledger does not know yet (P-24, finding V5).
		t.snap = models.Snapshot{Withdrawn: changed}
		return errReportKept
	}
	rc := t.s.revisions
	if rc != nil {
		t.revs = rc.Revisions(t.patient) // before the confirmation's reads begin
	}
	snap, err := t.s.care.Turn(t.ctx, t.patient)
	t.snap = snap
	if err != nil {
		return err
	}
	t.counted = rc != nil
	for _, v := range snap.Facts {
		if v.Audience != models.AudienceUser || v.Patient != t.patient {
			t.s.log.Error("alexa fact skipped: not a speakable fact of this patient", "patient", t.patient, "uri", v.URI().String())
			continue
		}
		v = staleAt(v)
		t.facts = append(t.facts, v)
		t.current[v.FactURI()] = v
	}
	return nil
}

// staleAt returns v with its staleness as served: a STALE header a care
// source left in its value (defence in depth: the speech principal strips
// it by the read contract) is removed, and makes it stale (ServedStale).
func staleAt(v models.Version) models.Version {
	if value, hdr := models.StripStaleHeader(v.Value); hdr {
		v.Value = value
		v.ServedStale = true
	}
	return v
}

// announce renders the pending announcements, retractions first, oldest
// first. An announcement whose words did not change is heard silently; one
// that cannot be rendered (assistant audience, another patient) is logged
// and never spoken. On "more", an announcement whose rest this session
// still holds, at the same version, is continued rather than restarted;
// on another question its rest is said first, then the answer (G4).
func (t *turn) announce() {
	for _, a := range t.snap.Pending {
		if a.Patient != "" && a.Patient != t.patient || a.Current.Patient != t.patient {
			t.s.log.Error("alexa announcement for another patient skipped", "patient", t.patient, "id", a.ID)
			continue
		}
		a.Current = staleAt(a.Current)
		if a.Heard != nil {
			h := staleAt(*a.Heard)
			a.Heard = &h
		}
		if a.Told != nil {
			h := staleAt(*a.Told)
			a.Told = &h
		}
		if len(a.MayAlso) > 0 {
			may := make([]models.Version, len(a.MayAlso))
			for i, v := range a.MayAlso {
				may[i] = staleAt(v)
			}
			a.MayAlso = may
		}
		text, err := a.RenderShortened(t.now, shortenWithdrawn)
		switch {
		case errors.Is(err, models.ErrUnchanged):
			t.silent = append(t.silent, mark{URI: a.URI(), Version: a.Current.N})
			continue
		case err != nil:
			t.s.log.Error("alexa announcement not spoken", "patient", t.patient, "id", a.ID, "err", err)
			continue
		}
		t.announced[a.URI()] = a
		if t.isMore() && t.continues(a) {
			continue
		}
		if req := t.env.Request; !t.unasked() && !(req.Type == TypeIntent && (isLeaving(req.Intent.Name) || req.Intent.Name == IntentRepeat)) && t.continues(a) {
			// Asked something else while this session holds the rest of
			// a's rendering, cut for "more": he heard its start, so he
			// hears its rest and then what he asked. Restarting it at
			// every question kept what he asked out of reach (breakit8 G4).
			// Asking to leave is not a question (leave keeps it owed whole),
			// and "say that again" says it again from its start.
			if rest := t.restOf(a); len(rest) > 0 {
				t.anns = append(t.anns, rest...)
				continue
			}
		}
		if t.unasked() && t.heldBack(a) {
			// The card's tick spoke it before, at this version, and it
			// is still owed (offered, never heard: U10): the card shows
			// it; it is said again when he next asks, not every 5 s.
			t.held = true
			continue
		}
		t.anns = append(t.anns, annSegment(a, text))
		if a.Current.Audio != nil { // "… Here is the new one." (a first hearing: "Here it is.") and the clip (clip.go)
			lead := textClipHere
			if a.IsRetraction() {
				lead = textClipNew
			}
			t.anns = append(t.anns, t.clipSegment(a.Current, lead))
		}
	}
}

func annSegment(a models.Announcement, text string) segment {
	return segment{Text: text, Marks: []mark{{URI: a.URI(), Version: a.Current.N}}, Fact: a.URI(), Version: a.Current.N, Ann: a.ID, Pause: true, ann: &a,
		newFrom: newWordsAt(a, text)}
}

// newWordsAt is where, in a's rendering text, the words of a.Current begin
// (in runes; 0 for a first hearing, which says nothing else): a retraction
// says the words it withdraws first, and Current's are the last quoted —
// nothing after them (a gloss, the review-date warning) is quoted. A part of
// text that ends at or before it carries none of Current's words.
func newWordsAt(a models.Announcement, text string) int {
	if a.Heard == nil {
		return 0
	}
	text = strings.TrimSpace(text)
	i := strings.LastIndex(text, models.Quote(a.Current.Value))
	if i < 0 {
		return 0
	}
	return utf8.RuneCountInString(text[:i]) + 1 // past the opening quotation mark
}

// unasked reports whether the turn is the open card's tick: whatever it
// speaks, it speaks unasked, to a room that may be empty (U10).
func (t *turn) unasked() bool {
	return t.env.Request.Type == TypeAPLUserEvent && t.env.Request.FirstArgument() == apl.ArgTick
}

// heldBack reports whether a tick of this session already spoke a at its
// version, whole or a part of it cut for "more" (segments flagged unasked
// in the session's last response or the rest it holds), and keeps the
// last response's segments of it (heldSegs) for the session's record.
// Only what a tick spoke is held back: a response he asked for whose
// delivery failed is spoken again by the next tick, and its card drawn.
func (t *turn) heldBack(a models.Announcement) bool {
	found := false
	for i, segs := range [][]segment{t.session.last, t.session.rest} {
		for _, sg := range segs {
			if sg.unasked && sg.Ann == a.ID && sg.Version == a.Current.N {
				found = true
				if i == 0 {
					t.heldSegs = append(t.heldSegs, sg)
				}
			}
		}
	}
	return found
}

func (t *turn) isMore() bool {
	return t.env.Request.Type == TypeIntent && t.env.Request.Intent.Name == IntentMore
}

// continues reports whether this session's rest continues a, at a's version.
func (t *turn) continues(a models.Announcement) bool {
	for _, s := range t.session.rest {
		if s.Ann == a.ID && s.Version == a.Current.N {
			return true
		}
	}
	return false
}

// restOf returns the segments of a's rendering this session still holds
// for "more", as they may be said now (stillCurrent); none when a's
// version is no longer the one confirmed current.
func (t *turn) restOf(a models.Announcement) []segment {
	var mine []segment
	for _, s := range t.session.rest {
		if s.Ann == a.ID && s.Version == a.Current.N {
			mine = append(mine, s)
		}
	}
	return t.stillCurrent(mine)
}

func (t *turn) spokeAnything() bool { return len(t.anns) > 0 || len(t.prefix) > 0 }

func (t *turn) launch() reply {
	var segs []segment
	var stale []models.Version
	flagged := false // the walking instruction said first is itself past its review date
	for _, v := range t.facts {
		if _, done := t.announced[v.FactURI()]; done {
			continue
		}
		if v.Domain == domainWeightBearing {
			segs = append(segs, t.factSegment(v))
			flagged = flagged || v.IsStale(t.now)
		} else if v.IsStale(t.now) {
			stale = append(stale, v)
		}
	}
	if len(stale) > 0 {
		// Counted after the walking instruction, already flagged when it is
		// stale too: "One other thing needs checking." (finding T12).
		other := ""
		if flagged {
			other = " other"
		}
		intro := "One" + other + " thing needs checking."
		if len(stale) > 1 {
			intro = capitalize(models.SpellNumber(len(stale))) + other + " things need checking."
		}
		segs = append(segs, segment{Text: intro})
		for _, v := range stale {
			segs = append(segs, t.factSegment(v))
		}
	}
	if len(t.facts) == 0 && len(t.anns) == 0 {
		segs = append(segs, segment{Text: textEmptyNotes})
	}
	return reply{segs: segs, question: textQuestion, reprompt: t.topicsPrompt(), card: cardCare}
}

func (t *turn) carePlan() reply {
	slot := t.env.Request.Intent.Slots[SlotTopic]
	domain, ok := slot.ResolvedID()
	var matched []string
	if !ok {
		domain, matched, ok = t.namedTopic(slot.Value) // a topic the care team added (topics.go)
	}
	if !ok || !models.ValidID(domain) {
		q := t.topicsQuestionOf(matched)
		return reply{question: q, reprompt: q, card: cardCare}
	}
	for _, v := range t.facts {
		if v.Domain != domain {
			continue
		}
		if _, done := t.announced[v.FactURI()]; done {
			return reply{end: endAnswer, card: cardCare} // the announcement said it
		}
		if q := t.clipFollowUp(domain); q != "" { // clip.go: the exercises' recording
			return reply{segs: []segment{t.factSegment(v)}, question: q, reprompt: q, card: cardCare}
		}
		return reply{segs: []segment{t.factSegment(v)}, end: endAnswer, card: cardCare}
	}
	return reply{segs: say(fmt.Sprintf("There is no %s instruction in your care notes.", models.Topic(domain))),
		question: textQuestion, reprompt: t.topicsPrompt(), card: cardCare}
}

// whatsChanged answers "what changed?": the announcements owed, spoken
// first; else the changes he was told earlier in this session, each said
// again if its version is still current (RenderRecap, judged now); else
// that nothing has changed since he last heard his care notes.
func (t *turn) whatsChanged() reply {
	if len(t.anns) > 0 || len(t.announced) > 0 {
		return reply{end: endAnswer, card: cardCare}
	}
	var segs []segment
	for _, a := range t.session.changes {
		cur, ok := t.current[a.URI()]
		if !ok || cur.N != a.Current.N {
			continue // superseded since: its own announcement says so
		}
		a.Current = cur
		if text, err := models.RenderRecap(a, t.now); err == nil {
			segs = append(segs, segment{Text: text, Fact: a.URI(), Version: cur.N, Pause: true})
		}
	}
	if len(segs) == 0 {
		return reply{segs: say(textNothingNew), end: endAnswer, card: cardCare}
	}
	return reply{segs: segs, end: endAnswer, card: cardCare}
}

// changes is this session's changes after a response that spoke spoken:
// the earlier ones, each replaced by a later announcement of its fact
// spoken in full now (a segment carrying its marks), in the order heard.
func (t *turn) changes(spoken []segment) []models.Announcement {
	out := append([]models.Announcement(nil), t.session.changes...)
	for _, sg := range spoken {
		a, ok := t.announced[sg.Fact]
		if !ok || sg.Ann != a.ID || len(sg.Marks) == 0 {
			continue
		}
		out = slices.DeleteFunc(out, func(c models.Announcement) bool { return c.URI() == a.URI() })
		out = append(out, a)
	}
	return out
}

// stillCurrent keeps the segments of an earlier response that may be said
// again now: each about no fact, or about the version of its fact that was
// confirmed current this turn and not announced anew this turn (what was
// said of it before is superseded). A whole rendering is rendered again at
// now, so a review date passed since is said (P-24).
func (t *turn) stillCurrent(segs []segment) []segment {
	var out []segment
	for _, s := range segs {
		if s.Fact == (models.URI{}) {
			out = append(out, s)
			continue
		}
		cur, ok := t.current[s.Fact]
		if !ok || cur.N != s.Version {
			continue
		}
		if a, done := t.announced[s.Fact]; done && (a.ID != s.Ann || t.speaksNow(a.ID)) {
			continue // superseded, or said again first this turn
		}
		out = append(out, t.rerender(s, cur))
	}
	return out
}

// speaksNow reports whether this turn's announcements say announcement id
// (so an earlier response's segments of it are not said again after it).
func (t *turn) speaksNow(id int64) bool {
	for _, a := range t.anns {
		if a.Ann == id {
			return true
		}
	}
	return false
}

// rerender renders a whole fact or announcement segment again at now from
// the version confirmed current.
func (t *turn) rerender(s segment, cur models.Version) segment {
	switch {
	case s.clip != nil:
		return t.clipSegment(cur, s.clipLead)
	case s.fact != nil:
		return t.factSegment(cur)
	case s.ann != nil:
		a := *s.ann
		a.Current = cur
		if text, err := a.RenderShortened(t.now, shortenWithdrawn); err == nil {
			return annSegment(a, text)
		}
	}
	return s
}

func (t *turn) more() reply {
	rest := t.stillCurrent(t.session.rest)
	if len(rest) == 0 {
		return reply{segs: say(textNothingMore), question: textQuestion, reprompt: t.topicsPrompt(), card: cardCare}
	}
	return reply{segs: rest, question: t.session.question, reprompt: t.session.reprompt, end: endAnswer, card: cardCare}
}

// repeat says the last response of this session again — the question too,
// keeping the session open when it asked one — never a superseded
// instruction (the retraction comes first instead).
func (t *turn) repeat() reply {
	last := t.stillCurrent(t.session.last)
	rest := t.stillCurrent(t.session.rest)
	if len(last) == 0 && len(t.anns) == 0 && t.session.question == "" {
		return reply{segs: say(textNoRepeat), question: textQuestion, reprompt: t.topicsPrompt(), card: cardCare}
	}
	return reply{segs: last, rest: rest, question: t.session.question, reprompt: t.session.reprompt, end: endAnswer, card: cardCare}
}

// factSegment speaks one fact with its author and age at the turn's time
// (models.RenderFact, its gloss from the skill's memory of them); a stale
// one is spoken with its age first, past its review date (P-7).
func (t *turn) factSegment(v models.Version) segment {
	text, err := t.s.glosses.RenderFact(v, t.now)
	if err != nil {
		return segment{}
	}
	return segment{Text: text, Marks: []mark{{URI: v.FactURI(), Version: v.N, Told: true}}, Fact: v.FactURI(), Version: v.N, fact: &v}
}
