package models

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// glossTermsByRegexp is Glosses decided by the regular expressions alone,
// without the substring prefilter (matcher.possible).
func glossTermsByRegexp(text string) []string {
	if qualifierRE.re.MatchString(text) {
		return nil
	}
	levels := 0
	for _, m := range levelREs {
		if m.re.MatchString(text) {
			levels++
		}
	}
	if levels > 1 || actionRE.re.MatchString(text) {
		return nil
	}
	trimmed := strings.TrimSpace(text)
	var out []string
	var wb *GlossEntry
	for i, g := range glossary {
		loc := g.match.re.FindStringIndex(trimmed)
		if loc == nil || g.WeightBearing && loc[0] != 0 {
			continue
		}
		if g.WeightBearing {
			wb = &glossary[i]
		}
		out = append(out, g.Term)
	}
	if len(out) > 0 && !onlyPlainWords(text, wb) {
		return nil
	}
	return out
}

func glossTerms(text string) []string {
	var out []string
	for _, g := range Glosses(text) {
		out = append(out, g.Term)
	}
	return out
}

// The prefilter only skips regular expressions that cannot match: on
// fixtures, every case variant of them, Unicode case folds (ſ, K, ’) and
// random sentences of the patterns' own words, Glosses answers exactly as
// the regular expressions alone do.
func TestGlosses_PrefilterAnswersAsTheRegularExpressionsAlone(t *testing.T) {
	texts := []string{
		"Full weight-bearing as tolerated.",
		"full weight bearing as tolerated",
		"Partial weight-bearing, about half your body weight, with the frame.",
		"Non-weight-bearing on the left leg.",
		"No weight through the left leg until review.",
		"Toe-touch weight-bearing only.",
		"Avoid hip flexion past 90 degrees.",
		"Take rivaroxaban 10 mg once a day.",
		"Stop rivaroxaban before the dental work.",
		"Don't do hip flexion.",
		"Don’t do hip flexion.",
		"Hip ﬂexion exercises twice a day.",
		"Riva\u017foxaban", "ſtop rivaroxaban", "Full weight-bearing as tolerated; K",
		"HIP FLEXION", "RIVAROXABAN", "FULL WEIGHT-BEARING AS TOLERATED", "nOt rivaroxaban",
		"", " ", "Walk with a frame.", "Full weight-bearing as tolerated, then partial weight-bearing.",
	}
	var words []string
	for _, m := range append(append([]matcher{qualifierRE, actionRE}, levelREs...), func() []matcher {
		var ms []matcher
		for _, g := range glossary {
			ms = append(ms, g.match)
		}
		return ms
	}()...) {
		words = append(words, m.needles...)
	}
	words = append(words, "the", "leg", "as", "tolerated", "-", "bearing", "weight", "full", "ſ", "’t", "K", ".", ",")
	rng := rand.New(rand.NewPCG(17, 17))
	for range 3000 {
		n := 1 + rng.IntN(6)
		parts := make([]string, n)
		for i := range parts {
			parts[i] = words[rng.IntN(len(words))]
		}
		texts = append(texts, strings.Join(parts, []string{" ", "", "-", ", "}[rng.IntN(4)]))
	}
	for _, base := range slices.Clone(texts) {
		texts = append(texts, strings.ToUpper(base), flipCase(base, rng))
	}
	for _, text := range texts {
		if got, want := glossTerms(text), glossTermsByRegexp(text); !slices.Equal(got, want) {
			t.Errorf("Glosses(%q) = %q, the regular expressions alone say %q", text, got, want)
		}
	}
}

func flipCase(s string, rng *rand.Rand) string {
	b := []rune(s)
	for i, r := range b {
		if rng.IntN(2) == 0 {
			b[i] = []rune(strings.ToUpper(string(r)))[0]
		}
	}
	return string(b)
}

func BenchmarkGlossSentence(b *testing.B) {
	for b.Loop() {
		GlossSentence("Partial weight-bearing, about half your body weight, with the frame.")
	}
}

func BenchmarkGlossesByRegexpAlone(b *testing.B) {
	for b.Loop() {
		glossTermsByRegexp("Partial weight-bearing, about half your body weight, with the frame.")
	}
}
