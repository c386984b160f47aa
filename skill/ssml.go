package skill

import (
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/rivo/uniseg"

	"github.com/unsay/unsay/models"
)

// Speech limits.
const (
	// MaxSSMLChars caps outputSpeech.ssml, tags included (8,000 characters,
	// models.MaxSpeechChars), measured by speechLen (UTF-16 code units).
	MaxSSMLChars = models.MaxSpeechChars
	// MoreCue ends a cut answer; "more" speaks the rest.
	MoreCue = "Say more to continue."
	// pause follows an announcement, before the answer (SSML, 500 ms).
	pause = `<break time="500ms"/>`
)

// mark is one fact version that counts as heard once its segment is spoken:
// as an announcement, or — Told — as a plain fact, which never settles a
// pending retraction (P-19). Card: a row of the Echo Show's care card —
// told only when the card is actually sent.
type mark struct {
	URI     models.URI // unversioned
	Version int
	Told    bool
	Card    bool
}

// segment is one unit of speech: plain text (escaped when rendered) and the
// facts that count as heard when the whole segment is in outputSpeech.
type segment struct {
	Text    string
	Marks   []mark
	Fact    models.URI // the fact this segment speaks, if any (zero otherwise)
	Version int        // the version of Fact it speaks
	Ann     int64      // the announcement it speaks, if any (its queue id)
	Pause   bool       // a 500 ms break after it
	// newFrom is where, in the trimmed Text, the words of Version begin (in
	// runes): a retraction first says the words it withdraws, so a part cut
	// from it before newFrom carries none of Version's words and offers
	// nothing (carriesVersion). 0: from the start (the conservative default).
	newFrom int
	// What it was rendered from, when it is a whole rendering (not a part
	// cut for "more"): Repeat renders it again at the time it is repeated.
	fact *models.Version
	ann  *models.Announcement
	// Audio is the https:// URL of a clip played after Text (SSML <audio>,
	// clip.go); clip is the version it plays and clipLead its lead-in.
	Audio    string
	clip     *models.Version
	clipLead string
	// unasked: the open card's tick spoke it (U10); kept with the
	// session's record, so later ticks hold it back (turn.heldBack).
	unasked bool
	// cont is set on the rest of a segment cut for "more" (fitSpeech):
	// what it continues, so that a later response that says anything
	// before it introduces it again (resumed, finding U5).
	cont continuation
}

// continuation is what the rest of a cut segment continues: the topic of
// its fact ("" when it speaks none), whether it is part of a retraction,
// whether it begins in the words the retraction withdraws (old) and
// whether it begins inside a quotation. resumed: its text already begins
// with the introduction.
type continuation struct {
	cut, retraction, old, inQuote, resumed bool
	topic                                  string
}

// resumeIntro is what a continuation is introduced with when something
// else was said before it (U5, P-24): the instruction named again, and its
// quotation reopened when it begins inside one — "Back to your changed
// exercise instruction, continuing the new words: “" — so that heard after
// an announcement it cannot be taken for that announcement's words.
func resumeIntro(c continuation) string {
	what := "where I left off"
	if c.topic != "" {
		what = "your " + c.topic + " instruction"
		if c.retraction {
			what = "your changed " + c.topic + " instruction"
		}
	}
	var s string
	switch {
	case c.retraction && c.old:
		s = "Back to " + what + ", continuing what I told you before:"
	case c.retraction && c.inQuote:
		s = "Back to " + what + ", continuing the new words:"
	case c.inQuote:
		s = "Back to " + what + ", continuing:"
	default:
		s = "Back to " + what + ":"
	}
	if c.inQuote {
		return s + " “"
	}
	return s + " "
}

// resumed is s, the rest of a cut segment, introduced again (resumeIntro):
// the words of its version still begin where they did, after the
// introduction, which carries none of them.
func (s segment) resumed() segment {
	intro := resumeIntro(s.cont)
	s.Text = intro + strings.TrimSpace(s.Text)
	s.newFrom += utf8.RuneCountInString(intro)
	s.cont.resumed = true
	return s
}

// resume introduces again every continuation in segs that follows
// something said (U5): the rest of a cut answer heard after an
// announcement owed since, or after anything else, is named again. A
// continuation said first is left as it is: it goes on from the part
// before it.
func resume(segs []segment) []segment {
	said := false
	for i, s := range segs {
		if s.cont.cut && !s.cont.resumed && said && strings.TrimSpace(s.Text) != "" {
			segs[i] = s.resumed()
		}
		said = said || strings.TrimSpace(s.Text) != "" || s.Audio != ""
	}
	return segs
}

// continuationOf is what the rest of s, cut after head, continues.
func continuationOf(s segment, head string, tailFrom int) continuation {
	c := s.cont
	if head == "" {
		return c // nothing of s was said: its rest is s itself
	}
	if !c.cut {
		c = continuation{cut: true, retraction: s.ann != nil && s.ann.IsRetraction() || s.newFrom > 0}
		if s.Fact != (models.URI{}) {
			c.topic = models.Topic(s.Fact.Domain)
		}
	}
	open := c.inQuote && !c.resumed // the head begins where s did
	for _, r := range head {
		switch r {
		case '“':
			open = true
		case '”':
			open = false
		}
	}
	c.inQuote, c.old, c.resumed = open, c.retraction && tailFrom > 0, false
	return c
}

// carriesVersion reports whether s carries any of the words of s.Version
// (P-24): a whole rendering or a first hearing always does; a part cut from
// a retraction only once it reaches past the words it withdraws.
func (s segment) carriesVersion() bool {
	return utf8.RuneCountInString(strings.TrimSpace(s.Text)) > s.newFrom
}

// EscapeSSML escapes a data string for SSML: & < > " ' become entities, and
// every character XML 1.0 forbids (NUL, the C0 controls but tab, line feed
// and carriage return, U+FFFE, U+FFFF, lone surrogates, invalid UTF-8) is
// dropped — defence in depth: /write refuses them (P-24).
func EscapeSSML(s string) string { return ssmlEscaper.Replace(dropNonXML(s)) }

// xmlChar reports whether r may be spoken: XML 1.0 allows it in character
// data (§2.2 Char) and it is not DEL or a C1 control (U+007F…U+009F, which
// XML allows but no voice says).
func xmlChar(r rune) bool {
	if r >= 0x7F && r <= 0x9F {
		return false
	}
	return r == 0x9 || r == 0xA || r == 0xD || (r >= 0x20 && r <= 0xD7FF) || (r >= 0xE000 && r <= 0xFFFD) || (r >= 0x10000 && r <= 0x10FFFF)
}

// dropNonXML removes what XML 1.0 cannot carry and what no voice says
// (xmlChar), returning s itself when there is nothing to remove.
func dropNonXML(s string) string {
	ok := func(r rune, n int) bool { return xmlChar(r) && (r != utf8.RuneError || n > 1) }
	clean := true
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if !ok(r, n) {
			clean = false
			break
		}
		i += n
	}
	if clean {
		return s
	}
	var b strings.Builder
	for len(s) > 0 {
		r, n := utf8.DecodeRuneInString(s)
		if ok(r, n) {
			b.WriteString(s[:n])
		}
		s = s[n:]
	}
	return b.String()
}

// errIllFormed: a response's SSML is not well-formed XML; it is never sent.
var errIllFormed = errors.New("SSML is not well-formed")

// checkSSML parses ssml with encoding/xml: one <speak> root holding text,
// <break/> elements and empty <audio src="https://…"/> elements (at most
// models.AlexaMaxAudioPerResponse) only. A response whose outputSpeech or
// reprompt fails is never sent, and marks nothing (P-24).
func checkSSML(ssml string) error {
	dec := xml.NewDecoder(strings.NewReader(ssml))
	depth, roots, audios, inAudio := 0, 0, 0, 0 // inAudio: the depth inside an <audio>, 0 outside
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("%w: %v", errIllFormed, err)
		}
		switch el := tok.(type) {
		case xml.StartElement:
			if inAudio > 0 {
				return fmt.Errorf("%w: <audio> must be empty", errIllFormed)
			}
			if depth == 0 {
				roots++
				if el.Name.Local != "speak" {
					return fmt.Errorf("%w: root <%s>", errIllFormed, el.Name.Local)
				}
			} else if el.Name.Local == "audio" {
				if err := checkAudioElement(el, depth); err != nil {
					return err
				}
				if audios++; audios > models.AlexaMaxAudioPerResponse {
					return fmt.Errorf("%w: more than %d <audio> elements", errIllFormed, models.AlexaMaxAudioPerResponse)
				}
				inAudio = depth + 1
			} else if el.Name.Local != "break" {
				return fmt.Errorf("%w: element <%s>", errIllFormed, el.Name.Local)
			}
			depth++
		case xml.EndElement:
			if depth == inAudio {
				inAudio = 0
			}
			depth--
		case xml.CharData:
			if inAudio > 0 && strings.TrimSpace(string(el)) != "" {
				return fmt.Errorf("%w: <audio> must be empty", errIllFormed)
			}
			if depth == 0 && strings.TrimSpace(string(el)) != "" {
				return fmt.Errorf("%w: text outside <speak>", errIllFormed)
			}
		}
	}
	if roots != 1 || depth != 0 {
		return fmt.Errorf("%w: want one <speak> root", errIllFormed)
	}
	return nil
}

// ssmlEscaper is immutable and safe for concurrent use.
var ssmlEscaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;", "'", "&apos;")

// renderSSML builds "<speak>…</speak>" from segments and an optional closing
// sentence (a question or the more cue), escaping every text.
func renderSSML(segs []segment, closing string) string {
	var b strings.Builder
	n := len("<speak></speak>") + len(closing) + 16
	for _, s := range segs {
		n += len(s.Text) + len(pause) + 8 // escaping may add a little more
	}
	b.Grow(n)
	b.WriteString("<speak>")
	first := true
	add := func(s string) {
		if !first {
			b.WriteByte(' ')
		}
		first = false
		b.WriteString(s)
	}
	for _, s := range segs {
		if t := strings.TrimSpace(s.Text); t != "" {
			add(EscapeSSML(t))
			if s.Pause {
				b.WriteString(pause)
			}
		}
		if s.Audio != "" {
			b.WriteString(audioTag(s.Audio))
		}
	}
	if closing != "" {
		add(EscapeSSML(closing))
	}
	b.WriteString("</speak>")
	return b.String()
}

// speechLen is the length of s against Alexa's 8,000-character limit on
// outputSpeech, counted in UTF-16 code units: a character outside the
// Basic Multilingual Plane (an emoji, many CJK ideographs) counts twice,
// the larger of the two ways the limit may be counted, so a response
// within it is within either.
func speechLen(s string) int {
	n := 0
	for _, r := range s {
		n += utf16.RuneLen(r)
	}
	return n
}

// cost is what a segment adds to the SSML: its escaped text, the joining
// space and its pause.
func cost(s segment) int {
	c := 0
	if s.Audio != "" {
		c = speechLen(audioTag(s.Audio))
	}
	t := strings.TrimSpace(s.Text)
	if t == "" {
		return c
	}
	c += speechLen(EscapeSSML(t)) + 1
	if s.Pause {
		c += speechLen(pause)
	}
	return c
}

// cutBudget is what a response cut for "more" has for its segments.
func cutBudget(max int) int { return max - speechLen(renderSSML(nil, MoreCue)) - 1 }

// ahead orders a turn's speech when it does not fit in one response, so
// that no announcement blocks the ones queued behind it (P-24): after the
// prefix, every announcement that fits whole (in queue order: retractions
// first), then those that do not (the first is cut, its rest said with
// "more"), then the answer. When everything fits, the order is unchanged.
func ahead(prefix, anns, answer []segment, closing string, max int) []segment {
	all := make([]segment, 0, len(prefix)+len(anns)+len(answer))
	all = append(append(append(all, prefix...), anns...), answer...)
	if speechLen(renderSSML(all, closing)) <= max {
		return all
	}
	budget, used := cutBudget(max), 0
	for _, s := range prefix {
		used += cost(s)
	}
	var fit, over []segment
	for _, a := range anns {
		if c := cost(a); used+c <= budget {
			fit = append(fit, a)
			used += c
		} else {
			over = append(over, a)
		}
	}
	out := make([]segment, 0, len(all))
	out = append(append(append(append(out, prefix...), fit...), over...), answer...)
	return out
}

// fitSpeech splits segs into what fits in MaxSSMLChars together with
// closing, and the rest. When something is cut, the spoken part must leave
// room for MoreCue instead of closing; a segment cut in the middle keeps its
// marks on the remainder (it was not heard in full), and the cut falls at
// the last sentence boundary that fits (else the last space, else a rune).
func fitSpeech(segs []segment, closing string, max int) (spoken, rest []segment) {
	if speechLen(renderSSML(segs, closing)) <= max {
		return segs, nil
	}
	budget := max - speechLen(renderSSML(nil, MoreCue)) - 1 // the joining space
	used := 0
	for i, s := range segs {
		t := strings.TrimSpace(s.Text)
		if t == "" && s.Audio == "" {
			spoken = append(spoken, s)
			continue
		}
		c := cost(s)
		if used+c <= budget {
			spoken = append(spoken, s)
			used += c
			continue
		}
		head, tail := cutTextFrom(t, budget-used-1, s.newFrom)
		if head != "" {
			spoken = append(spoken, segment{Text: head, Fact: s.Fact, Version: s.Version, Ann: s.Ann, newFrom: s.newFrom})
		}
		// The tail is the end of t: where Version's words begin in it moves
		// back by what the head took.
		tailFrom := s.newFrom - (utf8.RuneCountInString(t) - utf8.RuneCountInString(tail))
		if tailFrom < 0 {
			tailFrom = 0
		}
		// The clip, if any, follows the words it closes: it goes with the rest.
		rest = append(rest, segment{Text: tail, Marks: s.Marks, Fact: s.Fact, Version: s.Version, Ann: s.Ann, Pause: s.Pause,
			Audio: s.Audio, clip: s.clip, clipLead: s.clipLead, newFrom: tailFrom, cont: continuationOf(s, head, tailFrom)})
		rest = append(rest, segs[i+1:]...)
		return spoken, rest
	}
	return spoken, nil
}

// cutText splits text so that the escaped head is at most max long (speechLen), at
// the last sentence boundary that fits, else the last space, else the last
// extended grapheme cluster boundary (Unicode UAX #29: an emoji keeps its
// skin-tone modifier and joiners, a letter its combining marks) —
// and so that each side carries words of the value (P-24): when text
// quotes a value (“…”), the head takes at least the opening quote and one
// character of it, so the frame ("Your walking instruction from …, just
// now:") is never said without its words; and the tail is never only
// quotation marks and punctuation.
func cutText(text string, max int) (head, tail string) { return cutTextFrom(text, max, 0) }

// cutTextFrom is cutText for a text whose new words begin at rune from (a
// retraction's, segment.newFrom; 0: none): when the first of them fits in
// the head, the head takes it and the cut falls within the new words, so a
// part that reaches them says some of them — never only the words it
// withdraws (finding T9, P-24).
func cutTextFrom(text string, max, from int) (head, tail string) {
	if max <= 0 {
		return "", text
	}
	rs := []rune(text)
	fit, n := 0, 0 // fit: how many runes of text fit escaped in max (n: their speechLen)
	for fit < len(rs) {
		c := speechLen(EscapeSSML(string(rs[fit])))
		if n+c > max {
			break
		}
		n += c
		fit++
	}
	if fit == len(rs) {
		return text, ""
	}
	lo, hi := 1, fit // the cut: head is rs[:cut]
	if open := slices.Index(rs, '“'); open >= 0 && open+2 <= fit {
		lo = open + 2
	}
	if from > 0 && from+1 <= fit && from+1 > lo {
		lo = from + 1
	}
	for last := len(rs) - 1; last >= 0; last-- {
		if !wordless(rs[last]) {
			hi = min(hi, last) // the tail keeps rs[last]
			break
		}
	}
	if lo > hi { // a frame longer than a part (never within the write limits)
		lo = 1
	}
	starts := clusterStarts(rs) // a cut falls only between grapheme clusters
	cut := -1
	for i := hi; i >= lo && cut < 0; i-- { // the last sentence boundary
		if starts[i] && unicode.IsSpace(rs[i]) && endsSentence(rs[:i]) {
			cut = i
		}
	}
	for i := hi; i >= lo && cut < 0; i-- { // else the last space
		if starts[i] && unicode.IsSpace(rs[i]) {
			cut = i
		}
	}
	for i := hi; i >= lo && cut < 0; i-- { // else the last cluster boundary
		if starts[i] {
			cut = i
		}
	}
	if cut < 0 {
		cut = hi // one cluster longer than a part (never within the write limits): at a rune
	}
	return strings.TrimSpace(string(rs[:cut])), strings.TrimSpace(string(rs[cut:]))
}

// clusterStarts reports, for each rune of rs (and len(rs)), whether an
// extended grapheme cluster starts there (UAX #29, github.com/rivo/uniseg):
// the places text may be cut without splitting a character as read.
func clusterStarts(rs []rune) []bool {
	starts := make([]bool, len(rs)+1)
	g, i := uniseg.NewGraphemes(string(rs)), 0
	for g.Next() {
		starts[i] = true
		i += len(g.Runes())
	}
	starts[len(rs)] = true
	return starts
}

// wordless reports whether r carries no word: a space, a quotation mark or
// sentence punctuation.
func wordless(r rune) bool {
	return unicode.IsSpace(r) || strings.ContainsRune(`“”‘’"'.,;:!?—–-()[]`, r)
}

// endsSentence reports whether rs ends a sentence: . ! or ? optionally
// followed by closing quotes or brackets.
func endsSentence(rs []rune) bool {
	i := len(rs) - 1
	for i >= 0 && strings.ContainsRune(`”’"')]`, rs[i]) {
		i--
	}
	return i >= 0 && strings.ContainsRune(".!?", rs[i])
}

// MaxWithdrawnQuoteRunes caps each quote of withdrawn words the voice says
// in a retraction (runes of the trimmed value): a longer one is quoted up
// to the last space within the cap (else the last grapheme-cluster
// boundary, UAX #29), and said to go on (models.ShortenedQuote), so that
// however long the old words were — values may hold 6,000 characters — the
// new ones start in the first part of a response cut for "more" (finding
// T9, P-24). The new words are never shortened; the card keeps its own
// limit (apl.MaxCardTextRunes).
const MaxWithdrawnQuoteRunes = 300

// shortenWithdrawn is the voice's models.Shortener (MaxWithdrawnQuoteRunes).
func shortenWithdrawn(value string) (head string, cut bool) {
	rs := []rune(strings.TrimSpace(value))
	if len(rs) <= MaxWithdrawnQuoteRunes {
		return string(rs), false
	}
	starts := clusterStarts(rs)
	end := MaxWithdrawnQuoteRunes
	for end > 1 && !starts[end] {
		end--
	}
	for i := end; i > MaxWithdrawnQuoteRunes/2; i-- { // a word boundary that keeps most of it
		if starts[i] && unicode.IsSpace(rs[i]) {
			end = i
			break
		}
	}
	return strings.TrimRightFunc(string(rs[:end]), func(r rune) bool { return unicode.IsSpace(r) || strings.ContainsRune(",;:—–-", r) }), true
}
