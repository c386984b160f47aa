package skill

import (
	"encoding/xml"
	"io"
	"strings"
	"testing"
	"unicode/utf8"
)

// speakText parses doc as XML and returns the character data inside it;
// ok is false when doc is not well-formed.
func speakText(doc string) (string, bool) {
	d := xml.NewDecoder(strings.NewReader(doc))
	var b strings.Builder
	for {
		tok, err := d.Token()
		if err == io.EOF {
			return b.String(), true
		}
		if err != nil {
			return "", false
		}
		if cd, ok := tok.(xml.CharData); ok {
			b.Write(cd)
		}
	}
}

// FuzzEscapeSSML: whatever the value, EscapeSSML leaves no markup
// character raw (& only opens one of the five entities), so a value can
// never close <speak> or open a tag. For text of XML characters, the
// escaped text inside <speak> is well-formed and reads back as exactly the
// input (nothing lost or added); for other input (control characters, U+FFFE,
// invalid UTF-8), the SSML is well-formed too and reads back as the input
// without those characters.
func FuzzEscapeSSML(f *testing.F) {
	for _, s := range []string{
		"Full weight-bearing as tolerated.",
		`Take "one" tablet & don't <stop> it`,
		"&amp; already escaped &lt;",
		"]]> <![CDATA[x]]>",
		"</speak><audio src=\"https://evil.example/a.mp3\"/><speak>",
		"Stop — I told you: “no weight”; déjà vu 🦴",
		"tab\tnew\nline\rcarriage",
		"vertical\vtab and NUL\x00 and \x1f",
		"\uFFFE\uFFFF non-characters",
		"invalid \xff\xfe utf-8",
		"",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out := EscapeSSML(s)
		if strings.ContainsAny(out, `<>"'`) {
			t.Fatalf("EscapeSSML(%q) = %q leaves a markup character raw", s, out)
		}
		for i := strings.IndexByte(out, '&'); i >= 0; i = strings.IndexByte(out, '&') {
			rest := out[i:]
			ok := false
			for _, e := range []string{"&amp;", "&lt;", "&gt;", "&quot;", "&apos;"} {
				if strings.HasPrefix(rest, e) {
					ok, out = true, rest[len(e):]
					break
				}
			}
			if !ok {
				t.Fatalf("EscapeSSML(%q): a raw & that opens no entity: %q", s, rest)
			}
		}
		doc := "<speak>" + EscapeSSML(s) + "</speak>"
		text, wellFormed := speakText(doc)
		clean := utf8.ValidString(s) && strings.IndexFunc(s, func(r rune) bool { return !xmlChar(r) }) < 0
		if clean {
			if !wellFormed {
				t.Fatalf("EscapeSSML(%q) inside <speak> is not well-formed XML: %q", s, doc)
			}
			// XML normalizes line ends (§2.11): CR LF and lone CR read back as LF.
			want := strings.ReplaceAll(strings.ReplaceAll(s, "\r\n", "\n"), "\r", "\n")
			if text != want {
				t.Fatalf("EscapeSSML(%q) reads back as %q", s, text)
			}
			return
		}
		// Forbidden characters are dropped (P-24), so the output is
		// well-formed whatever the input.
		if !wellFormed {
			t.Fatalf("EscapeSSML(%q) inside <speak> is not well-formed XML: %q", s, doc)
		}
		{
			// Invalid UTF-8 may be dropped or read as U+FFFD (as encoding/json
			// writes it); forbidden characters must be gone.
			strip := func(invalid string) string {
				w := strings.Map(func(r rune) rune {
					if !xmlChar(r) {
						return -1
					}
					return r
				}, strings.ToValidUTF8(s, invalid))
				return strings.ReplaceAll(strings.ReplaceAll(w, "\r\n", "\n"), "\r", "\n")
			}
			if text != strip("") && text != strip("\uFFFD") {
				t.Fatalf("EscapeSSML(%q) reads back as %q, want the input without forbidden characters %q", s, text, strip(""))
			}
		}
	})
}
