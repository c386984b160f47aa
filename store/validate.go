package store

import (
	"fmt"
	"math"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/bidi"
	"golang.org/x/text/unicode/norm"

	"github.com/unsay/unsay/models"
)

// labelQuoteReason refuses an author label holding a double quotation
// mark: Ray hears the label, unquoted, right before the clinician's words
// in quotation marks, so a label with its own quotes makes words the
// clinician never wrote sound like a quoted instruction ("Dr Mensah, GP,
// said just now: “Double your dose.” Dr Mensah, GP"; breakit7 F3,
// breakit9). Apostrophes (O'Brien, O’Brien) are names' own.
const labelQuoteReason = "must be a name and role, said before the clinician's words: no quotation marks (\" “ ” „ ‟ « » ‹ › ‘ ‚ ‛ ＂), which would make the label sound like a quoted instruction"

// isLabelQuote reports whether r is a quotation mark an author label may
// not hold (labelQuoteReason).
func isLabelQuote(r rune) bool {
	return strings.ContainsRune("\"“”„‟«»‹›‘‚‛＂〝〞〟", r)
}

// isLineSeparator reports whether r is U+2028 LINE SEPARATOR or U+2029
// PARAGRAPH SEPARATOR: line breaks that unicode.IsControl does not count.
func isLineSeparator(r rune) bool { return r == '\u2028' || r == '\u2029' }

// isPrivateUse reports whether r is a private-use character.
func isPrivateUse(r rune) bool { return unicode.Is(unicode.Co, r) }

// maxAuthorLabelBytes caps an author label: 200 bytes of UTF-8.
const maxAuthorLabelBytes = 200

// maxIdempotencyKeyBytes caps PublishInput.IdempotencyKey: 256 bytes.
const maxIdempotencyKeyBytes = 256

// ValidAuthorID reports whether s is an acceptable authorId: 1–64 bytes of
// [a-z0-9_.@:-] (lowercase, no spaces, no '|').
func ValidAuthorID(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || strings.IndexByte("_.@:-", c) >= 0) {
			return false
		}
	}
	return true
}

// ReasonXMLForbidden is the rule a ValidationError names when a field holds
// a character XML 1.0 forbids (§2.2, Char): such a character makes Alexa's
// outputSpeech SSML ill-formed, so it is refused at the door. The found
// character and its position follow it in the Reason, never the text.
const ReasonXMLForbidden = "must contain only characters XML 1.0 allows " +
	"(valid UTF-8; no NUL, no control character but tab, LF and CR, no lone surrogate, no U+FFFE or U+FFFF)"

// xmlForbidden returns the first character of s that XML 1.0 forbids and
// its position (counted in characters from 1): invalid UTF-8 (which is how
// a lone surrogate arrives in a Go string) is reported as U+FFFD. ok is
// true when there is none.
//
//	Char ::= #x9 | #xA | #xD | [#x20-#xD7FF] | [#xE000-#xFFFD] | [#x10000-#x10FFFF]
func xmlForbidden(s string) (r rune, at int, ok bool) {
	at = 0
	for i := 0; i < len(s); {
		c, size := utf8.DecodeRuneInString(s[i:])
		at++
		if c == utf8.RuneError && size <= 1 {
			return utf8.RuneError, at, false
		}
		switch {
		case c == 0x9, c == 0xA, c == 0xD:
		case c < 0x20, c >= 0xD800 && c <= 0xDFFF, c == 0xFFFE, c == 0xFFFF:
			return c, at, false
		}
		i += size
	}
	return 0, 0, true
}

// xmlReason is ReasonXMLForbidden with what was found and where.
func xmlReason(s string) (string, bool) {
	r, at, ok := xmlForbidden(s)
	if ok {
		return "", true
	}
	what := fmt.Sprintf("U+%04X", r)
	if r == utf8.RuneError {
		what = "invalid UTF-8"
	}
	return fmt.Sprintf("%s: found %s at character %d", ReasonXMLForbidden, what, at), false
}

// isOtherControl reports whether r is a control character other than tab,
// LF and CR: DEL and the C1 controls (U+007F…U+009F), which XML 1.0 allows
// but no voice says and no screen shows (xmlForbidden refuses the C0 ones
// first).
func isOtherControl(r rune) bool {
	return unicode.IsControl(r) && r != '\t' && r != '\n' && r != '\r'
}

// otherControlReason names the first control character of s that
// isOtherControl refuses and its position (in characters, from 1); s holds one.
func otherControlReason(s string) string {
	r, at := firstRune(s, isOtherControl)
	return fmt.Sprintf("must contain no control character but tab, LF and CR: found U+%04X at character %d", r, at)
}

// isVisible reports whether r is seen on a card or heard when spoken by
// itself: a letter, number, punctuation or symbol (categories L, N, P, S)
// that is not blank-looking — not a default-ignorable code point (the
// Hangul fillers U+115F, U+1160, U+3164, U+FFA0, which are letters; the
// variation selectors; U+034F COMBINING GRAPHEME JOINER), nor U+2800
// BRAILLE PATTERN BLANK (a symbol with no dot), nor U+FFFC OBJECT
// REPLACEMENT CHARACTER (a placeholder for an object the text does not
// carry: a box on the card, nothing spoken; finding U14). Spaces, format characters
// (category Cf: U+200B ZERO WIDTH SPACE, U+2060 WORD JOINER, U+00AD SOFT
// HYPHEN, the direction marks, tags …) and combining marks (category M,
// which show only on a character before them) are not visible by
// themselves; a value may hold them beside a visible one (finding T7).
func isVisible(r rune) bool {
	switch {
	case !unicode.In(r, unicode.L, unicode.N, unicode.P, unicode.S):
		return false
	case r == 0x2800, r == 0xFFFC, unicode.In(r, unicode.Other_Default_Ignorable_Code_Point, unicode.Variation_Selector):
		return false
	}
	return true
}

// isWordChar reports whether r is a visible letter or number: a speakable
// value needs one (finding V7).
func isWordChar(r rune) bool {
	return isVisible(r) && (unicode.IsLetter(r) || unicode.IsNumber(r))
}

// wordlessReason is why a speakable value of punctuation, symbols or emoji
// alone is refused: a retraction would end "changed it just now: “.”",
// silence said as the new instruction.
const wordlessReason = "a speakable value must hold a word (a letter or number in any script): punctuation, symbols or emoji alone " +
	"would be spoken as nothing, or as a symbol's name, as Ray's new instruction"

// invisibleReason is why a value or label of no visible character is
// refused (isVisible).
const invisibleReason = "must hold at least one visible character (a letter, number, punctuation or symbol): spaces, " +
	"invisible format characters (such as U+200B ZERO WIDTH SPACE, U+2060 WORD JOINER, U+00AD SOFT HYPHEN), fillers " +
	"(U+3164 HANGUL FILLER, U+2800 BRAILLE PATTERN BLANK), U+FFFC OBJECT REPLACEMENT CHARACTER, variation selectors and combining marks alone would be spoken and shown as nothing"

// isBidiControl reports whether r is a Unicode bidirectional control
// (Bidi_Control: the marks and the embedding, override and isolate
// controls).
func isBidiControl(r rune) bool { return unicode.Is(unicode.Bidi_Control, r) }

// isBidiOverride reports whether r is a bidirectional embedding, override
// or isolate control (U+202A–U+202E, U+2066–U+2069): each reorders the
// text after it on a screen, so "10 mg" can show as "gm 01" on Ray's card
// while the voice says it in order. The marks (U+061C, U+200E, U+200F)
// only set the direction of the neutral characters next to them, which
// mixed-script instructions need.
func isBidiOverride(r rune) bool {
	return r >= 0x202A && r <= 0x202E || r >= 0x2066 && r <= 0x2069
}

// firstRune returns the first rune of s that f holds for and its position
// (in characters, from 1); at is 0 when there is none.
func firstRune(s string, f func(rune) bool) (r rune, at int) {
	n := 0
	for _, c := range s {
		n++
		if f(c) {
			return c, n
		}
	}
	return 0, 0
}

// bidiOverrideReason names the first control of s that isBidiOverride
// refuses and its position (in characters, from 1); s holds one.
func bidiOverrideReason(s string) string {
	r, at := firstRune(s, isBidiOverride)
	return fmt.Sprintf("must show as it is spoken: no bidirectional embedding, override or isolate (U+202A–U+202E, U+2066–U+2069), "+
		"which reorders the text on the screen: found U+%04X at character %d", r, at)
}

// isStrikeMark reports whether r is a combining mark drawn over the
// letter before it — an overlay (canonical combining class 1: U+0334–U+0338
// strokes and slashes, U+20D2…) or an enclosing mark (category Me, such as
// U+20E0 the prohibition sign) other than U+20E3, the keycap emoji need:
// "Do n\u0336o\u0336t\u0336 put weight…" shows the "not" struck out on Ray's
// card while the voice says it (finding G7).
func isStrikeMark(r rune) bool {
	if r < 0x0300 {
		return false
	}
	if unicode.Is(unicode.Me, r) {
		return r != 0x20E3
	}
	return unicode.Is(unicode.Mn, r) && norm.NFD.PropertiesString(string(r)).CCC() == 1
}

// strikeMarkReason names the first mark of s that isStrikeMark refuses; s holds one.
func strikeMarkReason(s string) string {
	r, at := firstRune(s, isStrikeMark)
	return fmt.Sprintf("must show as it is spoken: no combining mark drawn over a letter (a stroke, slash or enclosing sign such as U+0336 or U+20E0), "+
		"which shows the word struck out or forbidden on the screen while the voice says it: found U+%04X at character %d", r, at)
}

// hiddenTag returns the first Unicode tag character of s (U+E0000–U+E007F)
// that is not part of an emoji tag sequence (U+1F3F4, then tags U+E0020–
// U+E007E, ended by U+E007F CANCEL TAG: the flags of England, Scotland,
// Wales), and its position in characters from 1; ok is false when there is
// none. Tags show as nothing on any card or page, yet language models read
// them as text: hidden words handed to an MCP host that no clinician
// reviewing the note can see (finding G9).
func hiddenTag(s string) (r rune, at int, ok bool) {
	inFlag := false
	for _, c := range s {
		at++
		isTag := c >= 0xE0000 && c <= 0xE007F
		switch {
		case c == 0x1F3F4:
			inFlag = true
		case inFlag && c >= 0xE0020 && c <= 0xE007E:
		case inFlag && c == 0xE007F:
			inFlag = false
		case isTag:
			return c, at, true
		default:
			inFlag = false
		}
	}
	return 0, 0, false
}

// hasHiddenTag reports whether s holds a tag character hiddenTag finds.
func hasHiddenTag(s string) bool { _, _, ok := hiddenTag(s); return ok }

// hiddenTagReason names the first tag character of s that hiddenTag
// refuses and its position; s holds one.
func hiddenTagReason(s string) string {
	r, at, _ := hiddenTag(s)
	return fmt.Sprintf("must hold no hidden text: no Unicode tag character (U+E0000–U+E007F) outside an emoji flag, "+
		"which shows as nothing but is read as text by an assistant: found U+%04X at character %d", r, at)
}

// isRightToLeft reports whether r is a right-to-left letter (bidi class R
// or AL: Hebrew, Arabic, Syriac, Thaana, N'Ko …).
func isRightToLeft(r rune) bool {
	if !unicode.IsLetter(r) {
		return false // the marks themselves are of class R and AL
	}
	p, _ := bidi.LookupRune(r)
	return p.Class() == bidi.R || p.Class() == bidi.AL
}

// isRTLMark reports whether r is a right-to-left direction mark: U+200F
// RIGHT-TO-LEFT MARK or U+061C ARABIC LETTER MARK.
func isRTLMark(r rune) bool { return r == 0x200F || r == 0x061C }

// rtlMarkReason is why a value holding a right-to-left mark but no
// right-to-left letter is refused: the marks make the digits and
// punctuation between them a right-to-left run, so "\u200f01632\u200f
// \u200f960\u200f \u200f412\u200f" shows as "412 960 01632" on Ray's card
// while the voice says it in order (finding G2); mixed-script text, the
// marks' use, holds a right-to-left letter.
const rtlMarkReason = "must show as it is spoken: a right-to-left mark (U+200F, U+061C) is for text with right-to-left letters; " +
	"without them it reorders the numbers on the screen"

// Validate is THE write validator (POST /write only checks the body's
// shape, then calls it; Publish calls it again). It checks in and returns it
// normalized: Value and AuthorLabel by NormalizeWords, StaleAfter in UTC
// truncated to ms.
// Errors are *ValidationError (errors.Is ErrInvalid) naming the field and
// the rule, never echoing the value:
//
//   - patient, domain: 1–64 characters of [a-z0-9_.-];
//   - audience: "user" or "assistant";
//   - value: not blank, and at least one visible character (isVisible: a
//     value of only spaces, format characters such as U+200B or U+00AD,
//     fillers such as U+3164 or U+2800, variation selectors or combining
//     marks would be spoken and shown as nothing), and for a speakable
//     (user) value a letter or number (isWordChar: ".", "…" or an emoji
//     alone would be said as the new instruction); characters XML 1.0 allows (ReasonXMLForbidden)
//     and no control character but tab, LF and CR (DEL and C1 included);
//     and no bidirectional embedding, override or isolate (the card and the
//     clinician's page must show the words in the order they are spoken),
//     no right-to-left mark without a right-to-left letter (isRTLMark), no
//     combining mark drawn over a letter (isStrikeMark), no tag character
//     outside an emoji flag (hiddenTag; in the author label too);
//     a speakable (user) value at most models.MaxSpeakableValueRunes
//     characters (code points, whatever the script); any value, of either
//     audience, at most models.MaxValueBytes bytes of UTF-8, which 6,000
//     characters of any script always fit in;
//   - authorId: 1–64 characters of [a-z0-9_.@:-];
//   - authorLabel: not blank, at least one visible character, at most 200 bytes, characters XML 1.0 allows
//     no control character at all (it is spoken on one line) and no
//     bidirectional control (it is shown as a name: it must read as written);
//   - priority: 0…1; staleAfter: zero or after 1970;
//   - idempotencyKey: at most 256 bytes;
//   - audio, audioType (optional, together): audio/mpeg or audio/wav (and
//     their aliases, normalized), at most models.MaxAudioBytes, a whole
//     container of that type (InspectAudio: RIFF/WAVE chunks, or MP3 frame
//     headers back to back — a mislabelled file is refused saying what it
//     is), and for a speakable (user) fact an MP3 that Alexa's SSML
//     <audio> plays (MPEG-2 Layer III, 48 kbps, 16000/22050/24000 Hz, at
//     most 240 s), since every speakable clip is played on the Echo.
//
// A patient, domain or authorId holding an XML-forbidden character is
// refused with ReasonXMLForbidden, otherwise with its own pattern.
func Validate(in PublishInput) (PublishInput, error) {
	bad := func(field, reason string) (PublishInput, error) {
		return PublishInput{}, &ValidationError{Field: field, Reason: reason}
	}
	in.Value, in.AuthorLabel = NormalizeWords(in.Value), NormalizeWords(in.AuthorLabel)
	for _, f := range []struct{ name, v string }{
		{"patient", in.Patient}, {"domain", in.Domain}, {"authorId", in.AuthorID},
		{"value", in.Value}, {"authorLabel", in.AuthorLabel},
	} {
		if reason, ok := xmlReason(f.v); !ok {
			return bad(f.name, reason)
		}
	}
	switch {
	case !models.ValidID(in.Patient):
		return bad("patient", "must be 1–64 characters of [a-z0-9_.-]")
	case !models.ValidID(in.Domain):
		return bad("domain", "must be 1–64 characters of [a-z0-9_.-]")
	case !in.Audience.Valid():
		return bad("audience", `must be "user" or "assistant"`)
	case strings.TrimSpace(in.Value) == "":
		return bad("value", "must not be empty")
	case !strings.ContainsFunc(in.Value, isVisible):
		return bad("value", invisibleReason)
	case in.Audience == models.AudienceUser && !strings.ContainsFunc(in.Value, isWordChar):
		return bad("value", wordlessReason)
	case strings.ContainsFunc(in.Value, isOtherControl):
		return bad("value", otherControlReason(in.Value))
	case strings.ContainsFunc(in.Value, isBidiOverride):
		return bad("value", bidiOverrideReason(in.Value))
	case strings.ContainsFunc(in.Value, isStrikeMark):
		return bad("value", strikeMarkReason(in.Value))
	case hasHiddenTag(in.Value):
		return bad("value", hiddenTagReason(in.Value))
	case strings.ContainsFunc(in.Value, isRTLMark) && !strings.ContainsFunc(in.Value, isRightToLeft):
		return bad("value", rtlMarkReason)
	case in.Audience == models.AudienceUser && utf8.RuneCountInString(in.Value) > models.MaxSpeakableValueRunes:
		return bad("value", fmt.Sprintf("a speakable value must be at most %d characters (Unicode code points, in any script), "+
			"what one Alexa response can carry with a retraction around it (this one has %d); "+
			"split it into several facts, or make it assistant-only (at most %d bytes of UTF-8)",
			models.MaxSpeakableValueRunes, utf8.RuneCountInString(in.Value), models.MaxValueBytes))
	case len(in.Value) > models.MaxValueBytes:
		return bad("value", fmt.Sprintf("must be at most %d bytes of UTF-8 (this one has %d); "+
			"a speakable value is also limited to %d characters, which always fit in that",
			models.MaxValueBytes, len(in.Value), models.MaxSpeakableValueRunes))
	case !ValidAuthorID(in.AuthorID):
		return bad("authorId", "must be 1–64 characters of [a-z0-9_.@:-]")
	case strings.TrimSpace(in.AuthorLabel) == "":
		return bad("authorLabel", "must not be empty")
	case !strings.ContainsFunc(in.AuthorLabel, isVisible):
		return bad("authorLabel", invisibleReason)
	case len(in.AuthorLabel) > maxAuthorLabelBytes:
		return bad("authorLabel", fmt.Sprintf("must be at most %d bytes", maxAuthorLabelBytes))
	case strings.ContainsFunc(in.AuthorLabel, unicode.IsControl):
		return bad("authorLabel", "must be printable: no control characters, tab and line breaks included")
	case hasHiddenTag(in.AuthorLabel):
		return bad("authorLabel", hiddenTagReason(in.AuthorLabel))
	case strings.ContainsFunc(in.AuthorLabel, isBidiControl):
		return bad("authorLabel", "must read as written: no bidirectional control character (U+061C, U+200E, U+200F, U+202A–U+202E, U+2066–U+2069), which can make one name display as another")
	case strings.ContainsFunc(in.AuthorLabel, isLabelQuote):
		return bad("authorLabel", labelQuoteReason)
	case strings.ContainsFunc(in.AuthorLabel, isLineSeparator):
		return bad("authorLabel", "must be printable: no control characters, tab and line breaks included (U+2028, U+2029 are line breaks)")
	case strings.ContainsFunc(in.AuthorLabel, isStrikeMark):
		return bad("authorLabel", strikeMarkReason(in.AuthorLabel))
	case strings.ContainsFunc(in.AuthorLabel, isPrivateUse):
		return bad("authorLabel", "must show the same everywhere: no private-use character (U+E000–U+F8FF and planes 15–16), which each device draws its own way")
	case math.IsNaN(in.Priority) || in.Priority < 0 || in.Priority > 1:
		return bad("priority", "must be between 0 and 1")
	case !in.StaleAfter.IsZero() && in.StaleAfter.Before(time.UnixMilli(1)):
		return bad("staleAfter", "must be after 1970")
	case len(in.IdempotencyKey) > maxIdempotencyKeyBytes:
		return bad("idempotencyKey", fmt.Sprintf("must be at most %d bytes", maxIdempotencyKeyBytes))
	}
	t, info, err := validateAudio(in) // audio.go
	if err != nil {
		return PublishInput{}, err
	}
	in.AudioType, in.audioInfo = t, info
	if !in.StaleAfter.IsZero() {
		in.StaleAfter = in.StaleAfter.UTC().Truncate(time.Millisecond)
	}
	return in, nil
}

// NormalizeWords returns s as it is stored: in Unicode NFC, with the
// spaces that only stop a line from breaking (U+00A0 NO-BREAK SPACE, the
// fixed-width spaces U+2000–U+200A, U+202F, U+205F) as U+0020 and the
// invisible break and hyphenation hints (U+200B ZERO WIDTH SPACE, U+00AD
// SOFT HYPHEN, U+2060 WORD JOINER, U+FEFF) dropped — unless that would
// leave no visible character, for Validate to refuse as such —, runs of
// spaces as one, no space before a line break, and no leading or trailing
// white space; tabs and line breaks are kept as written. Words that look
// and sound the same are then the same bytes, so a revision that differs
// from the current words only in Unicode form (NFD pasted from another
// system), in spaces or in what a word processor pastes around them is
// "unchanged", not a retraction whose old and new words sound alike
// (findings U13, G3). Invalid UTF-8 is left to the validator.
func NormalizeWords(s string) string {
	if !utf8.ValidString(s) {
		return s
	}
	s = norm.NFC.String(s)
	if folded := dropJoinersInLatinWords(strings.Map(foldPasted, s)); strings.ContainsFunc(folded, isVisible) {
		s = folded
	}
	s = strings.TrimSpace(s)
	var b strings.Builder
	b.Grow(len(s))
	spaces := 0
	for _, r := range s {
		if r == ' ' {
			spaces++
			continue
		}
		if spaces > 0 && r != '\n' && r != '\r' {
			b.WriteByte(' ')
		}
		spaces = 0
		b.WriteRune(r)
	}
	return b.String()
}

// dropJoinersInLatinWords drops each zero-width joiner or non-joiner
// (U+200D, U+200C) and variation selector (U+FE00–U+FE0F) that stands
// between two Latin letters ("walk\u200ding"): there it changes neither how
// the word looks nor how it sounds (R1). Where a script or an emoji needs
// one — a ZWJ emoji sequence, an Indic half-form, a keycap "1\ufe0f\u20e3" —
// a neighbour is not a Latin letter and it stays.
func dropJoinersInLatinWords(s string) string {
	if !strings.ContainsAny(s, "\u200c\u200d") && !strings.ContainsFunc(s, isVariationSelector) {
		return s
	}
	rs := []rune(s)
	latin := func(i int) bool {
		return i >= 0 && i < len(rs) && unicode.IsLetter(rs[i]) && unicode.Is(unicode.Latin, rs[i])
	}
	out := rs[:0:0]
	for i, r := range rs {
		if (r == 0x200C || r == 0x200D || isVariationSelector(r)) && latin(i-1) && latin(i+1) {
			continue
		}
		out = append(out, r)
	}
	return string(out)
}

// isVariationSelector reports whether r is one of U+FE00–U+FE0F.
func isVariationSelector(r rune) bool { return r >= 0xFE00 && r <= 0xFE0F }

// foldPasted maps a no-break, fixed-width or ideographic space to U+0020
// and a line or paragraph separator to a line break, and drops an
// invisible break, hyphenation hint or formatting character — zero-width
// space, soft hyphen, word joiner, BOM, the invisible math operators
// U+2061–U+2064, the Mongolian vowel separator, the combining grapheme
// joiner and the musical formatting controls U+1D173–U+1D17A
// (NormalizeWords; breakit8 G3, breakit9); any other rune is itself. The
// joiners emoji and scripts need (U+200D, U+200C), variation selectors and
// the direction marks stay.
func foldPasted(r rune) rune {
	switch {
	case r == 0x00A0, r >= 0x2000 && r <= 0x200A, r == 0x202F, r == 0x205F, r == 0x3000:
		return ' '
	case r == 0x2028, r == 0x2029:
		return '\n'
	case r == 0x200B, r == 0x00AD, r == 0x2060, r == 0xFEFF, r >= 0x2061 && r <= 0x2064,
		r == 0x180E, r == 0x034F, r >= 0x1D173 && r <= 0x1D17A:
		return -1
	}
	return r
}
