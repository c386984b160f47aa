package oauth

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxClientNameRunes caps a client's self-chosen name (client_name): 100
// characters (Unicode code points).
const MaxClientNameRunes = 100

// checkClientName is the rule for a client_name a client chose itself, in
// a dynamic registration (RFC 7591) or a Client ID Metadata Document, and
// for the operator's `unsay client add`: the consent page shows the name to
// the person granting access, so it must read as what it is. The name must
// be valid UTF-8 of at most MaxClientNameRunes characters with no control
// character (Cc: tab and line breaks included), no line or paragraph
// separator (Zl, Zp), no private-use character (Co) and no format
// character (Cf) — which takes in the bidirectional controls (U+202A–U+202E,
// U+2066–U+2069, U+200E, U+200F, U+061C) that can make "Unsay" display as
// another name — except U+200C and U+200D (zero-width non-joiner and
// joiner), which Persian and Indic scripts and emoji sequences need and
// which reorder nothing — and no blank-looking filler (the Hangul fillers
// U+115F, U+1160, U+3164, U+FFA0 and the other default-ignorable code
// points, U+2800 BRAILLE PATTERN BLANK, U+FFFC), which can pad "Dr Mensah,
// GP (NHS)" past a trimmed end (finding V6c). The error is the RFC 7591 error_description of an
// invalid_client_metadata answer; it names the character by its code
// point, never echoes it.
func checkClientName(name string) error {
	if !utf8.ValidString(name) {
		return fmt.Errorf("client_name must be valid UTF-8")
	}
	if n := utf8.RuneCountInString(name); n > MaxClientNameRunes {
		return fmt.Errorf("client_name must be at most %d characters (this one has %d)", MaxClientNameRunes, n)
	}
	for i, r := range []rune(name) {
		if what := nameCharProblem(r); what != "" {
			return fmt.Errorf("client_name must be plain text shown as written: U+%04X at character %d is %s", r, i+1, what)
		}
	}
	return nil
}

// nameCharProblem says what is wrong with r in a client name, or "".
func nameCharProblem(r rune) string {
	switch {
	case r == '\u200C' || r == '\u200D':
		return ""
	case isBidiControl(r):
		return "a bidirectional control character, which can make a name display as another"
	case unicode.Is(unicode.Cc, r):
		return "a control character"
	case unicode.Is(unicode.Cf, r):
		return "an invisible format character"
	case unicode.In(r, unicode.Zl, unicode.Zp):
		return "a line or paragraph separator"
	case unicode.Is(unicode.Co, r):
		return "a private-use character"
	case r == 0x2800 || r == 0xFFFC || unicode.Is(unicode.Other_Default_Ignorable_Code_Point, r):
		return "a blank-looking filler, which can pad a name to look like another"
	}
	return ""
}

// isBidiControl reports the explicit bidirectional formatting characters
// (Unicode UAX #9, §2): embeddings, overrides, isolates and marks.
func isBidiControl(r rune) bool {
	return r >= '\u202A' && r <= '\u202E' || r >= '\u2066' && r <= '\u2069' ||
		r == '\u200E' || r == '\u200F' || r == '\u061C'
}

// displayClientName is a stored client name made safe to show, for a name
// stored before checkClientName existed or by a path that skipped it: every
// character checkClientName refuses is dropped (invalid UTF-8 as well),
// spaces are trimmed, and a name over MaxClientNameRunes characters is cut
// with "…". The page still isolates it (<bdi>, or U+2068…U+2069 in the
// title), so even right-to-left letters cannot reorder the words around it.
func displayClientName(name string) string {
	var b strings.Builder
	n := 0
	for _, r := range strings.ToValidUTF8(name, "") {
		if nameCharProblem(r) != "" {
			continue
		}
		if n == MaxClientNameRunes {
			b.WriteString("…")
			break
		}
		b.WriteRune(r)
		n++
	}
	return strings.TrimSpace(b.String())
}
