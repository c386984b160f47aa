package skill

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/rivo/uniseg"
)

// F6: a long text is cut between extended grapheme clusters — an emoji
// keeps its skin-tone modifier and its joiners, a letter its combining
// marks, an Indic consonant its vowel sign — within the same budget
// (speechLen of the escaped head, UTF-16 units). Twins: plain text with no
// space is still cut at the last rune that fits, and text with sentences
// at the last sentence boundary, as before.
func TestCutText_CutsBetweenGraphemeClusters(t *testing.T) {
	for _, tc := range []struct {
		name, unit string
		max        int
	}{
		{"thumbs up with skin tone", "👍🏽", 7999},
		{"thumbs up with skin tone, odd budget", "👍🏽", 7998},
		{"ZWJ family", "👨‍👩‍👧", 7995},
		{"flag (regional indicators)", "🇬🇧", 7997},
		{"decomposed accent", "e\u0301", 7999},
		{"two combining marks", "a\u0323\u0302", 7999},
		{"Devanagari consonant and vowel sign", "कि", 7999},
		{"keycap", "1\ufe0f\u20e3", 7999},
	} {
		t.Run(tc.name, func(t *testing.T) {
			text := strings.Repeat(tc.unit, 6000/utf8.RuneCountInString(tc.unit)+1000)
			head, tail := cutText(text, tc.max)
			if head == "" || tail == "" || head+tail != text {
				t.Fatalf("head %d + tail %d bytes do not make the text (%d)", len(head), len(tail), len(text))
			}
			if n := speechLen(EscapeSSML(head)); n > tc.max {
				t.Errorf("head is %d long, over %d", n, tc.max)
			}
			if uniseg.GraphemeClusterCount(head)+uniseg.GraphemeClusterCount(tail) != uniseg.GraphemeClusterCount(text) {
				t.Errorf("the cut splits a grapheme cluster: head ends %q, tail begins %q", lastRunes(head, 4), firstRunes(tail, 4))
			}
			if !strings.HasSuffix(head, tc.unit) || !strings.HasPrefix(tail, tc.unit) {
				t.Errorf("head ends %q, tail begins %q; want whole %q on each side", lastRunes(head, 4), firstRunes(tail, 4), tc.unit)
			}
			if n := speechLen(EscapeSSML(head + tc.unit)); n <= tc.max {
				t.Errorf("head (%d) stops a whole cluster short of the budget %d", speechLen(EscapeSSML(head)), tc.max)
			}
		})
	}
	t.Run("plain text without a space: at the last rune that fits", func(t *testing.T) {
		head, tail := cutText(strings.Repeat("a&", 5000), 7998)
		if speechLen(EscapeSSML(head)) != 7998 || !strings.HasPrefix(tail, "a&") && !strings.HasPrefix(tail, "&") {
			t.Errorf("head %d long (want 7998), tail begins %q", speechLen(EscapeSSML(head)), firstRunes(tail, 3))
		}
	})
	t.Run("sentences: at the last sentence boundary", func(t *testing.T) {
		text := strings.Repeat("Walk to the door. ", 40) + "Rest."
		head, tail := cutText(text, 100)
		if head != strings.TrimSpace(strings.Repeat("Walk to the door. ", 5)) || !strings.HasPrefix(tail, "Walk to the door.") {
			t.Errorf("head %q, tail begins %q", head, firstRunes(tail, 20))
		}
	})
}

func lastRunes(s string, n int) string {
	r := []rune(s)
	return string(r[max(0, len(r)-n):])
}

func firstRunes(s string, n int) string {
	r := []rune(s)
	return string(r[:min(n, len(r))])
}

// T9: the voice quotes withdrawn words of at most MaxWithdrawnQuoteRunes,
// cut at the last space within the cap — else between grapheme clusters,
// never inside an emoji sequence or a letter with its marks — and says
// it cut them. Twin: words within the cap are quoted whole.
func TestShortenWithdrawn_CutsLongWordsAtAWordOrClusterBoundaryAndKeepsShortOnesWhole(t *testing.T) {
	words := strings.Repeat("slide the heel ", 40)
	family := strings.Repeat("👩‍👩‍👧‍👦", 200) // one cluster of 7 runes each, no spaces
	marks := strings.Repeat("é", 400)        // e + U+0301: one cluster of 2 runes
	for _, v := range []string{words, family, marks} {
		head, cut := shortenWithdrawn(v)
		if !cut || head == "" || utf8.RuneCountInString(head) > MaxWithdrawnQuoteRunes || !strings.HasPrefix(v, head) {
			t.Fatalf("%.20q: head %.40q (%d runes) cut %v", v, head, utf8.RuneCountInString(head), cut)
		}
		if uniseg.GraphemeClusterCount(head)+uniseg.GraphemeClusterCount(v[len(head):]) != uniseg.GraphemeClusterCount(v) {
			t.Errorf("%.20q: cut inside a grapheme cluster", v)
		}
	}
	if head, _ := shortenWithdrawn(words); !strings.HasSuffix(head, "heel") && !strings.HasSuffix(head, "the") && !strings.HasSuffix(head, "slide") {
		t.Errorf("words cut inside a word: …%q", head[len(head)-20:])
	}
	short := "Walk with the frame."
	if head, cut := shortenWithdrawn(short); cut || head != short {
		t.Errorf("short words: %q cut %v", head, cut)
	}
	if head, cut := shortenWithdrawn(strings.Repeat("a", MaxWithdrawnQuoteRunes)); cut || len(head) != MaxWithdrawnQuoteRunes {
		t.Errorf("words at the cap were cut")
	}
}

// T9: a part cut from a retraction whose new words begin within it takes
// some of them, even when a sentence ends just before them (the withdrawn
// words) and none within them. Twin: a text with no new words (from 0) is
// cut at that sentence end as before.
func TestCutTextFrom_APartThatReachesTheNewWordsSaysSomeOfThem(t *testing.T) {
	text := "Stop — your walking instruction has changed. I told you: “Rest.” Sarah changed it just now: “" + strings.Repeat("ice and rest ", 50) + "”"
	from := utf8.RuneCountInString(text[:strings.LastIndex(text, "“")]) + 1
	head, _ := cutTextFrom(text, 200, from)
	if !strings.Contains(head, "just now: “ice") {
		t.Errorf("head %q: none of the new words", head)
	}
	if head, _ := cutTextFrom(text, 200, 0); !strings.HasSuffix(head, "“Rest.”") {
		t.Errorf("twin: head %q, want the cut at the last sentence end", head)
	}
}
