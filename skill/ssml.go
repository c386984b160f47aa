package skill

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/unsay/unsay/models"
)

// Speech limits.
const (
	// MaxSSMLChars caps outputSpeech.ssml, tags included (8,000 characters).
	MaxSSMLChars = 8000
	// MoreCue ends a cut answer; "more" speaks the rest.
	MoreCue = "Say more to continue."
	// pause follows an announcement, before the answer (SSML, 500 ms).
	pause = `<break time="500ms"/>`
)

// mark is one fact version that counts as heard once its segment is spoken.
type mark struct {
	URI     models.URI // unversioned
	Version int
}

// segment is one unit of speech: plain text (escaped when rendered) and the
// facts that count as heard when the whole segment is in outputSpeech.
type segment struct {
	Text  string
	Marks []mark
	Fact  models.URI // the fact this segment speaks, if any (zero otherwise)
	Pause bool       // a 500 ms break after it
}

// EscapeSSML escapes a data string for SSML: & < > " ' become entities.
func EscapeSSML(s string) string { return ssmlEscaper.Replace(s) }

// ssmlEscaper is immutable and safe for concurrent use.
var ssmlEscaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;", "'", "&apos;")

// renderSSML builds "<speak>…</speak>" from segments and an optional closing
// sentence (a question or the more cue), escaping every text.
func renderSSML(segs []segment, closing string) string {
	var b strings.Builder
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
	}
	if closing != "" {
		add(EscapeSSML(closing))
	}
	b.WriteString("</speak>")
	return b.String()
}

func runes(s string) int { return utf8.RuneCountInString(s) }

// fitSpeech splits segs into what fits in MaxSSMLChars together with
// closing, and the rest. When something is cut, the spoken part must leave
// room for MoreCue instead of closing; a segment cut in the middle keeps its
// marks on the remainder (it was not heard in full), and the cut falls at
// the last sentence boundary that fits (else the last space, else a rune).
func fitSpeech(segs []segment, closing string, max int) (spoken, rest []segment) {
	if runes(renderSSML(segs, closing)) <= max {
		return segs, nil
	}
	budget := max - runes(renderSSML(nil, MoreCue)) - 1 // the joining space
	used := 0
	for i, s := range segs {
		t := strings.TrimSpace(s.Text)
		if t == "" {
			spoken = append(spoken, s)
			continue
		}
		cost := runes(EscapeSSML(t)) + 1
		if s.Pause {
			cost += runes(pause)
		}
		if used+cost <= budget {
			spoken = append(spoken, s)
			used += cost
			continue
		}
		head, tail := cutText(t, budget-used-1)
		if head != "" {
			spoken = append(spoken, segment{Text: head, Fact: s.Fact})
		}
		rest = append(rest, segment{Text: tail, Marks: s.Marks, Fact: s.Fact, Pause: s.Pause})
		rest = append(rest, segs[i+1:]...)
		return spoken, rest
	}
	return spoken, nil
}

// cutText splits text so that the escaped head has at most max runes, at
// the last sentence boundary that fits, else the last space, else a rune.
func cutText(text string, max int) (head, tail string) {
	if max <= 0 {
		return "", text
	}
	bestSentence, bestSpace, n := -1, -1, 0
	rs := []rune(text)
	for i, r := range rs {
		n += runes(EscapeSSML(string(r)))
		if n > max {
			break
		}
		if unicode.IsSpace(r) {
			bestSpace = i
			if i > 0 && endsSentence(rs[:i]) {
				bestSentence = i
			}
		}
		if i == len(rs)-1 {
			return text, ""
		}
	}
	cut := bestSentence
	if cut < 0 {
		cut = bestSpace
	}
	if cut <= 0 {
		// One unbroken word longer than the budget: cut at a rune.
		k, m := 0, 0
		for k < len(rs) {
			c := runes(EscapeSSML(string(rs[k])))
			if m+c > max {
				break
			}
			m += c
			k++
		}
		return string(rs[:k]), strings.TrimSpace(string(rs[k:]))
	}
	return strings.TrimSpace(string(rs[:cut])), strings.TrimSpace(string(rs[cut:]))
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
