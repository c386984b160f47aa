package models

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Errors returned by RenderRetraction.
var (
	// ErrAssistantAudience: an assistant-only version can never be spoken (P-1, P-17).
	ErrAssistantAudience = errors.New("assistant-audience version cannot be rendered for speech")
	// ErrUnchanged: the current version repeats the words that were heard; nothing to withdraw.
	ErrUnchanged = errors.New("the words did not change")
	// ErrDifferentFact: heard and current are not versions of the same fact.
	ErrDifferentFact = errors.New("versions belong to different facts")
)

// Words of the review-date warning a stale fact is spoken with, in every
// form (P-7, P-24), and of an announcement spoken again because its
// delivery could not be confirmed (P-24).
const (
	PastReviewSentence = "It is now past its review date."
	CheckWithTeam      = "Please check it with your care team."
	RedeliveryPhrase   = "as I may not have told you properly"
)

// RenderRetraction builds the sentence that withdraws what the patient heard
// (P-17), only from record fields:
//
//  1. stop first: "Stop — your {topic} instruction has changed."
//  2. the withdrawn sentence: "I told you: “{heard.Value}”"
//  3. the new one: "{current.AuthorLabel} changed it {age}: “{current.Value}”";
//     when current is past its review date at now (P-7, P-24) it leads with
//     the age and says so: "{Age}, {author} changed it to: “…” It is now
//     past its review date. … Please check it with your care team."
//  4. glosses from a closed glossary that restate and never advise (see Glosses).
//
// heard is the version the patient actually heard (P-19), not necessarily
// current.N-1. It returns ErrAssistantAudience if either version is
// assistant-only, ErrDifferentFact if they name different facts, and
// ErrUnchanged when the words are the same (after trimming space). When
// current carries a clip, the sentence is the clip's (renderClipRetraction:
// "Stop — your exercise count has changed. …"), and ErrUnchanged needs the
// same sound as well as the same words.
func RenderRetraction(heard, current Version, now time.Time) (string, error) {
	return RenderRetractionBy(heard, current, current, now)
}

// RenderRetractionBy is RenderRetraction naming changer — the version that
// first said current's words (ChangedBy), or current — as who changed them
// and when: a later version that only renewed the words (a new review
// date, author or priority) is never named as the change (breakit8 G6).
// Errors are RenderRetraction's.
func RenderRetractionBy(heard, current, changer Version, now time.Time) (string, error) {
	return renderRetraction(heard, current, changer, now, false, Withdrawal{Told: &heard})
}

// MaxRenewalsBack bounds how many versions before a retraction's current
// version ChangedBy reads back: 8.
const MaxRenewalsBack = 8

// ChangedBy returns, for a retraction of heard by current, the version
// that first said current's words: the oldest of the versions after heard,
// read back from current one by one through read (version n of the fact;
// false: it cannot be read), that say them (SaysTheSameAs) — the later
// ones only renewed them (breakit8 G6). Nil when current is that version,
// and when the version before it cannot be read (the retraction then names
// current's author); at most MaxRenewalsBack versions are read.
func ChangedBy(heard, current Version, read func(n int) (Version, bool)) *Version {
	var by *Version
	for n := current.N - 1; n > heard.N && n >= current.N-MaxRenewalsBack; n-- {
		v, ok := read(n)
		if !ok || !v.SaysTheSameAs(current) {
			break
		}
		by = &v
	}
	return by
}

// SaysTheSameAs reports whether v says w's words: the same text (after
// trimming space) and the same sound (SameSound). A version that says its
// predecessor's words only renewed them (a new review date, author or
// priority): nothing changed for Ray (P-19).
func (v Version) SaysTheSameAs(w Version) bool {
	return strings.TrimSpace(v.Value) == strings.TrimSpace(w.Value) && SameSound(v.Audio, w.Audio)
}

// toldYou introduces the withdrawn words: "I told you: " when he heard them
// for certain, "I may have told you: " when they were only offered (P-24).
func toldYou(unsure bool) string {
	if unsure {
		return "I may have told you: "
	}
	return "I told you: "
}

// EarlierVersions closes the list of words he may have heard when older
// ones are withdrawn unquoted (Withdrawal.Earlier).
const EarlierVersions = "and earlier versions"

// ShortenedQuote follows a quote of withdrawn words that was shortened
// (Withdrawal.Shorten): "I told you: “Part 1 of the plan…” and the rest of
// that older instruction."
const ShortenedQuote = "and the rest of that older instruction"

// quoteWithdrawn quotes withdrawn words: Quote(value), or — when shorten
// cuts it — its head in quotation marks ending "…”", then " " +
// ShortenedQuote, with no closing period (cut reports it).
func quoteWithdrawn(value string, shorten Shortener) (q string, cut bool) {
	v := strings.TrimSpace(value)
	if shorten == nil {
		return Quote(v), false
	}
	head, cut := shorten(v)
	if head = strings.TrimSpace(head); !cut || head == "" {
		return Quote(v), false
	}
	return "“" + head + "…” " + ShortenedQuote, true
}

// withdrawn is what a retraction says of the words it withdraws (P-19,
// P-24): "I told you: “{told}”" for the words he heard for certain, then
// those he may have heard — "I may also have told you: “…”" ("I may have
// told you: “…”" when it withdraws no words he heard for certain), several
// as "“a” and “b”" or "“a”, “b” and “c”", followed by ", and earlier
// versions." when older ones are withdrawn unquoted ("I may also have told
// you earlier versions." when none is quoted). With w.Shorten each quote
// it cuts is shortened and says so: "I told you: “Part 1 of the plan:
// slide the heel…” and the rest of that older instruction."
// (quoteWithdrawn).
func withdrawn(w Withdrawal) string {
	var parts []string
	if w.Told != nil {
		q, cut := quoteWithdrawn(w.Told.Value, w.Shorten)
		if cut {
			q += "."
		}
		parts = append(parts, toldYou(false)+q)
	}
	intro := toldYou(true)
	if w.Told != nil {
		intro = "I may also have told you: "
	}
	switch {
	case len(w.MayHave) > 0:
		quoted := make([]string, len(w.MayHave))
		var cut bool
		for i, v := range w.MayHave {
			quoted[i], cut = quoteWithdrawn(v.Value, w.Shorten)
		}
		s := intro + JoinAnd(quoted)
		switch {
		case w.Earlier:
			s += ", " + EarlierVersions + "."
		case cut: // the last one was shortened: close the sentence
			s += "."
		}
		parts = append(parts, s)
	case w.Earlier:
		parts = append(parts, strings.TrimSuffix(intro, ": ")+" earlier versions.")
	}
	return strings.Join(parts, " ")
}

// JoinAnd joins items as spoken: "a", "a and b", "a, b and c" ("" for
// none).
func JoinAnd(items []string) string {
	if len(items) < 2 {
		return strings.Join(items, "")
	}
	return strings.Join(items[:len(items)-1], ", ") + " and " + items[len(items)-1]
}

// renderRetraction is the retraction of heard by current, naming by's
// author and age as the change (Announcement.Changer).
func renderRetraction(heard, current, by Version, now time.Time, again bool, w Withdrawal) (string, error) {
	if heard.Audience != AudienceUser || current.Audience != AudienceUser {
		return "", ErrAssistantAudience
	}
	if heard.Patient != current.Patient || heard.Domain != current.Domain {
		return "", ErrDifferentFact
	}
	if current.Audio != nil {
		return renderClipRetraction(heard, current, by, now, again, w) // audio.go
	}
	if strings.TrimSpace(heard.Value) == strings.TrimSpace(current.Value) {
		return "", ErrUnchanged
	}
	stop := fmt.Sprintf("Stop — your %s instruction has changed.", Topic(current.Domain))
	if again {
		stop = fmt.Sprintf("Stop — %s: your %s instruction has changed.", RedeliveryPhrase, Topic(current.Domain))
	}
	parts := []string{stop, withdrawn(w)}
	age := SpokenAge(now.Sub(by.WrittenAt))
	g := GlossSentence(current.Value)
	if current.IsStale(now) {
		parts = append(parts, fmt.Sprintf("%s, %s changed it to: %s", capitalize(age), Appositive(speaker(by.AuthorLabel)), Quote(current.Value)), PastReviewSentence)
		if g != "" {
			parts = append(parts, g)
		}
		parts = append(parts, CheckWithTeam)
		return strings.Join(parts, " "), nil
	}
	parts = append(parts, fmt.Sprintf("%s changed it %s: %s", capitalize(Appositive(speaker(by.AuthorLabel))), age, Quote(current.Value)))
	if g != "" {
		parts = append(parts, g)
	}
	return strings.Join(parts, " "), nil
}

// RenderRecap is how a change Ray was told earlier in the conversation is
// said again when he asks "what changed?" (a's Current is the version
// still current; a.Heard the version its retraction withdrew, nil for a
// first hearing), judged at now like every form (P-24):
//
//	"Your {topic} instruction changed {age}: I told you “{heard}”;
//	{author} changed it to “{current}” {gloss}"
//	"Your {topic} instruction is new: {author} wrote it {age}: “{current}” {gloss}"
//
// or, when current is past its review date at now, age first: "{Age},
// {author} changed your {topic} instruction. I told you “…”; it is now
// “…” It is now past its review date. {gloss} Please check it with your
// care team." (a first hearing: "{Age}, {author} wrote a new {topic}
// instruction: “…” …"). A recording is named, not replayed ("Your
// exercise count recording changed {age}."). It returns
// ErrAssistantAudience for an assistant-only version.
func RenderRecap(a Announcement, now time.Time) (string, error) {
	cur := a.Current
	if cur.Audience != AudienceUser || a.Heard != nil && a.Heard.Audience != AudienceUser {
		return "", ErrAssistantAudience
	}
	age := SpokenAge(now.Sub(cur.WrittenAt))
	topic := Topic(cur.Domain)
	stale := cur.IsStale(now)
	who := Appositive(speaker(cur.AuthorLabel))
	var s string
	switch {
	case cur.Audio != nil && stale:
		return fmt.Sprintf("%s, your %s recording changed. %s %s", capitalize(age), topic, PastReviewSentence, CheckWithTeam), nil
	case cur.Audio != nil:
		return fmt.Sprintf("Your %s recording changed %s.", topic, age), nil
	case a.Heard != nil && stale:
		s = fmt.Sprintf("%s, %s changed your %s instruction. %s %s; it is now %s %s", capitalize(age), who, topic, strings.TrimSuffix(toldYou(a.HeardUnsure), ": "), Quote(a.Heard.Value), Quote(cur.Value), PastReviewSentence)
	case a.Heard != nil:
		s = fmt.Sprintf("Your %s instruction changed %s: %s %s; %s changed it to %s", topic, age, strings.TrimSuffix(toldYou(a.HeardUnsure), ": "), Quote(a.Heard.Value), who, Quote(cur.Value))
	case stale:
		s = fmt.Sprintf("%s, %s wrote a new %s instruction: %s %s", capitalize(age), who, topic, Quote(cur.Value), PastReviewSentence)
	default:
		s = fmt.Sprintf("Your %s instruction is new: %s wrote it %s: %s", topic, who, age, Quote(cur.Value))
	}
	if g := GlossSentence(cur.Value); g != "" {
		s += " " + g
	}
	if stale {
		s += " " + CheckWithTeam
	}
	return s, nil
}

// Appositive closes a label that carries its own comma ("Sarah Okafor,
// physio") so it reads as a subject: "Sarah Okafor, physio, changed it".
func Appositive(label string) string {
	if strings.Contains(label, ",") {
		return label + ","
	}
	return label
}

// speaker is the author label as spoken; "your care team" when it is empty.
func speaker(label string) string {
	if strings.TrimSpace(label) == "" {
		return "your care team"
	}
	return label
}

// RenderFact is how one speakable fact is spoken — answering a question,
// at Launch, and as the first hearing of a fact he never heard (P-19: no
// "I told you"):
//
//	"Your {topic} instruction from {author label}, {age}: “{value}” {gloss}"
//
// or, when v is past its review date at now (P-7, P-24), age first:
//
//	"{Age}, {author label} wrote your {topic} instruction: “{value}” It is
//	now past its review date. {gloss} Please check it with your care team."
//
// A version carrying a clip is spoken as a recording ("Your {topic}
// recording from …"; renderClip). It returns ErrAssistantAudience for an
// assistant-only version.
func RenderFact(v Version, now time.Time) (string, error) {
	return renderFact(v, now, GlossSentence)
}

// renderFact is RenderFact with the gloss sentence of a text given by gloss
// (GlossSentence, or a GlossMemo's memory of it).
func renderFact(v Version, now time.Time, gloss func(text string) string) (string, error) {
	if v.Audience != AudienceUser {
		return "", ErrAssistantAudience
	}
	if v.Audio != nil {
		return renderClip(v, now), nil // audio.go
	}
	age := SpokenAge(now.Sub(v.WrittenAt))
	topic := Topic(v.Domain)
	g := gloss(v.Value)
	if v.IsStale(now) {
		s := fmt.Sprintf("%s, %s wrote your %s instruction: %s %s", capitalize(age), Appositive(speaker(v.AuthorLabel)), topic, Quote(v.Value), PastReviewSentence)
		if g != "" {
			s += " " + g
		}
		return s + " " + CheckWithTeam, nil
	}
	s := fmt.Sprintf("Your %s instruction from %s, %s: %s", topic, speaker(v.AuthorLabel), age, Quote(v.Value))
	if g != "" {
		s += " " + g
	}
	return s, nil
}

// RenderFirstHearing is what the patient hears of a fact he never heard
// before (a creation, or his first time): RenderFact, with no "I told you"
// (P-19). It returns ErrAssistantAudience for an assistant-only version.
func RenderFirstHearing(v Version, now time.Time) (string, error) { return RenderFact(v, now) }

// capitalize upper-cases the first letter of s.
func capitalize(s string) string {
	r, n := utf8.DecodeRuneInString(s)
	if n == 0 {
		return s
	}
	return string(unicode.ToUpper(r)) + s[n:]
}

// Quote wraps a clinician's words in curly quotes, ending them with a full
// stop when they carry no closing punctuation: “Full weight-bearing.”
func Quote(value string) string {
	v := strings.TrimSpace(value)
	if v != "" && !strings.ContainsAny(v[len(v)-1:], ".!?") {
		v += "."
	}
	return "“" + v + "”"
}

// GlossEntry is one term of the closed glossary and its plain restatement.
type GlossEntry struct {
	Term          string // the clinician's term, lower case
	Gloss         string // what it means, in plain words; never advice
	WeightBearing bool   // a weight-bearing level: stricter rules apply
	match         matcher
}

func entry(term, gloss string, wb bool, alternates ...string) GlossEntry {
	alts := append([]string{term}, alternates...)
	quoted := make([]string, len(alts))
	for i, a := range alts {
		quoted[i] = regexp.QuoteMeta(a)
	}
	return GlossEntry{Term: term, Gloss: gloss, WeightBearing: wb,
		match: matcher{regexp.MustCompile(`(?i)\b(?:` + strings.Join(quoted, "|") + `)\b`), alts}}
}

// matcher is a case-insensitive pattern and needles: ASCII lower-case
// strings one of which every match of re in ASCII text contains, lower-
// cased. In ASCII text that holds none of them re cannot match, and a
// substring search answers for the much slower regexp (a turn renders
// several facts, each through a dozen patterns). Text that is not all
// ASCII is always matched by re itself ((?i) folds ſ to s, K to k, …).
type matcher struct {
	re      *regexp.Regexp
	needles []string
}

// folded is a text as the matchers look at it.
type folded struct {
	text  string
	lower string // strings.ToLower(text) when ascii
	ascii bool
}

func fold(text string) folded {
	for i := 0; i < len(text); i++ {
		if text[i] >= 0x80 {
			return folded{text: text}
		}
	}
	return folded{text: text, lower: strings.ToLower(text), ascii: true}
}

// possible reports whether m.re may match f: false only when it cannot.
func (m matcher) possible(f folded) bool {
	if !f.ascii {
		return true
	}
	for _, n := range m.needles {
		if strings.Contains(f.lower, n) {
			return true
		}
	}
	return false
}

func (m matcher) matchString(f folded) bool { return m.possible(f) && m.re.MatchString(f.text) }

func (m matcher) findStringIndex(f folded) []int {
	if !m.possible(f) {
		return nil
	}
	return m.re.FindStringIndex(f.text)
}

// glossary is closed: five entries, each restating the clinician's words.
var glossary = []GlossEntry{
	entry("full weight-bearing as tolerated", "as much weight as is comfortable", true),
	entry("partial weight-bearing", "only some of your weight", true),
	entry("non-weight-bearing", "no weight at all", true, "no weight through"),
	entry("hip flexion", "bending at the hip", false),
	entry("rivaroxaban", "the blood-thinning tablet", false),
}

var (
	qualifierRE = matcher{regexp.MustCompile(`(?i)\b(?:not|never|avoid|until|unless|except|instead|rather than|no longer)\b|n['’]t\b`),
		[]string{"not", "never", "avoid", "until", "unless", "except", "instead", "rather than", "no longer", "n't"}}
	// actionRE matches stems, so inflections fail safe too ("cancelled",
	// "withdrawn", "discontinued"; finding V1), and the words of a stop
	// without a verb ("no more", "none", a zero dose, "error", "mistake");
	// "end" only as a command at the start of a sentence ("End rivaroxaban
	// now."), not "a course due to end on 28 November".
	actionRE = matcher{regexp.MustCompile(`(?i)\b(?:stop|hold|wait|before|after|cancel|withdr[ae]w|suspend|pause|revok|revers|delay|switch|swap|replac|chang|discontinu|ceas|quit|omit|drop|remov|no more|none|nil|zero|0 ?mg|error|mistake|wrong|instead)\w*|(?:^|[.;:!?]\s*)end\b`),
		[]string{"stop", "hold", "wait", "before", "after", "cancel", "withdr", "suspend", "pause", "revok", "revers", "delay", "switch", "swap", "replac", "chang",
			"discontinu", "ceas", "quit", "end", "omit", "drop", "remov", "no more", "none", "nil", "zero", "0", "error", "mistake", "wrong", "instead"}}
	// levelREs name the distinct weight-bearing levels; two in one text make it ambiguous.
	levelREs = []matcher{
		{regexp.MustCompile(`(?i)\bfull weight[- ]bearing\b`), []string{"full weight"}},
		{regexp.MustCompile(`(?i)\bpartial weight[- ]bearing\b`), []string{"partial weight"}},
		{regexp.MustCompile(`(?i)\bnon[- ]weight[- ]bearing\b|\bno weight through\b`), []string{"non", "no weight through"}},
		{regexp.MustCompile(`(?i)\btoe[- ]touch weight[- ]bearing\b`), []string{"toe"}},
	}
)

// plainWords are the only words, besides the glossary's terms and
// numbers, that a glossed text may hold: words that place, count or time
// an instruction already in force and cannot negate, end, defer or
// condition it. The closed list is the rule; qualifierRE and actionRE
// stay as a second line. A deny-list alone missed "forbidden",
// "prohibited", "unsafe", "is over", "finished", a bare "NO" and a start
// date ("from 15 January; for now keep to the frame"), and the gloss then
// restated the withdrawn term as the last thing Ray heard (finding W1,
// P-24: a sentence not confirmed as meant is not said). So a date, a
// verb of state ("is", "was") or any word not listed fails the gloss safe.
var plainWords = func() map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(`a an the with on at of to and your each every per about under while for
		frame frames crutch crutches stick sticks walker leg legs left right operated side hip hips knee body weight half
		degrees degree mg tablet tablets dose day days daily week weeks hour hours morning mornings evening evenings
		night nights bedtime food meal meals ankle pumps heel slides stairs course times time awake
		keep walk walking use using moving take taking
		once twice one two three four five six seven eight nine ten`) {
		m[w] = true
	}
	return m
}()

// numberWords are the counts plainWords holds in words.
var numberWords = func() map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields("once twice one two three four five six seven eight nine ten") {
		m[w] = true
	}
	return m
}()

// walkingAids are what a count may go with beside a weight-bearing level
// ("with two crutches").
var walkingAids = map[string]bool{"crutch": true, "crutches": true, "stick": true, "sticks": true}

// wordRE splits a text into words: letters, digits, hyphens and
// apostrophes (so "x-ray" and "don't" are one word each).
var wordRE = regexp.MustCompile(`[\p{L}\p{N}'’-]+`)

// numberJoinRE finds digits joined by a separator: dates ("15/01/2027",
// "15.01"), times ("9:30"), decimals ("2.5") — none of them a plain count.
var numberJoinRE = regexp.MustCompile(`\d\s*[./:,]\s*\d`)

// plainChars reports whether text holds only letters, digits, spaces and
// sentence punctuation (, . ; : ' ’ - and brackets): a symbol ("✗", "~~",
// "%", "/", "→") or a combining mark (U+0338 strikes the word it follows
// through on a card) can negate or qualify words the closed word lists
// never see (finding G1).
func plainChars(text string) bool {
	for _, r := range text {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsSpace(r):
		case strings.ContainsRune(",.;:'’-()", r):
		default:
			return false
		}
	}
	return !numberJoinRE.MatchString(text)
}

// onlyPlainWords reports whether text, outside the glossary's terms, holds
// only plain characters (plainChars) and words: numbers and plainWords
// (case-insensitive). When wb is the weight-bearing entry that applies, a
// number or a count in words is plain only before a walking aid ("with
// two crutches"), and "half" only with partial weight-bearing ("only some
// of your weight"): with a level, a number defers or limits it ("Full
// weight-bearing as tolerated: week 6.", "…, day 42.", "… for six weeks")
// and "half" contradicts full or none (finding G1), and the gloss would
// restate the level as in force, whole, now.
func onlyPlainWords(text string, wb *GlossEntry) bool {
	rest, f := text, fold(text)
	for _, g := range glossary {
		if g.match.possible(f) { // a term the text cannot hold is not looked for
			rest = g.match.re.ReplaceAllString(rest, " ")
		}
	}
	if !plainChars(rest) {
		return false
	}
	words := wordRE.FindAllString(rest, -1)
	for i, w := range words {
		w = strings.Trim(strings.ToLower(w), "'’-")
		number := w != "" && (strings.Trim(w, "0123456789") == "" || numberWords[w])
		switch {
		case w == "":
		case wb != nil && number:
			if i+1 == len(words) || !walkingAids[strings.ToLower(words[i+1])] {
				return false
			}
		case wb != nil && w == "half":
			if wb.Term != "partial weight-bearing" {
				return false
			}
		case plainWords[w] || number:
		default:
			return false
		}
	}
	return true
}

// Glosses returns the glossary entries that apply to text, in glossary
// order. It fails safe, returning none, when a word of the text outside
// the glossary's terms and numbers is not one of plainWords (finding W1:
// "… is forbidden", "… from 15 January") — with a weight-bearing level,
// when it holds a number not counting walking aids, or "half" beside full
// or no weight (finding G1: "…: week 6.", "… about half your body
// weight") —, when it holds a
// symbol, a combining mark or a date ("✗", "15/01/2027"; plainChars), when the text carries a qualifier
// (not, never, avoid, until, unless, except, instead, rather than, no longer,
// n't), an action word or its inflection (stop, hold, wait, before, after,
// cancel, withdraw, suspend, pause, revoke, reverse, delay, switch, swap,
// replace, change, discontinue, cease, quit, end, omit, drop, remove, and
// "no more", "none", a zero dose, "error", "mistake", "wrong":
// "Stop rivaroxaban. Start apixaban …" must not end on what rivaroxaban
// is — finding U11) or names more than one weight-bearing level; a
// weight-bearing entry applies only when the text starts with its term.
func Glosses(text string) []GlossEntry {
	f := fold(text)
	if qualifierRE.matchString(f) {
		return nil
	}
	levels := 0
	for _, re := range levelREs {
		if re.matchString(f) {
			levels++
		}
	}
	if levels > 1 || actionRE.matchString(f) {
		return nil
	}
	trimmed := fold(strings.TrimSpace(text))
	var out []GlossEntry
	for _, g := range glossary {
		loc := g.match.findStringIndex(trimmed)
		if loc == nil {
			continue
		}
		if g.WeightBearing && loc[0] != 0 {
			continue
		}
		out = append(out, g)
	}
	if len(out) == 0 { // most texts name no term: nothing to check
		return nil
	}
	var wb *GlossEntry
	for i := range out {
		if out[i].WeightBearing {
			wb = &out[i]
		}
	}
	if !onlyPlainWords(text, wb) {
		return nil
	}
	return out
}

// GlossSentence renders Glosses(text) as one sentence —
// "In plain terms, hip flexion means bending at the hip." — or "" when none apply.
func GlossSentence(text string) string {
	gs := Glosses(text)
	if len(gs) == 0 {
		return ""
	}
	parts := make([]string, len(gs))
	for i, g := range gs {
		parts[i] = g.Term + " means " + g.Gloss
	}
	return "In plain terms, " + strings.Join(parts, ", and ") + "."
}
