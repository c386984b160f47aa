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
