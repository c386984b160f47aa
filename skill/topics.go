package skill

import (
	"slices"
	"strings"
	"unicode"

	"github.com/unsay/unsay/models"
)

// The topics Ray is offered and can ask about (finding T13). The
// interaction model's CareTopic slot type names four domains; a care team
// may write facts under any other domain ("wound_care"), which Alexa's
// entity resolution cannot resolve (ER_SUCCESS_NO_MATCH, the slot's value
// is what he said). Such an added topic is offered beside the four — in
// the help, the topic question and its reprompt, and the help card — and
// is answered when his words name it.

// modelTopic is one of CareTopic's values, in the order they are offered.
type modelTopic struct {
	domain string // the value's id
	choice string // "your walking", in "I can tell you about …"
	ask    string // "what's my walking instruction", in the help
	phrase string // "What's my walking instruction?", on the help card
}

// modelTopics are CareTopic's values (skill-package/interactionModels),
// "who to call" last as the help says it.
func modelTopics() []modelTopic {
	return []modelTopic{
		{"weight_bearing", "your walking", "what's my walking instruction", "What's my walking instruction?"},
		{"anticoagulant", "your blood thinner", "tell me about my blood thinner", "Tell me about my blood thinner"},
		{"exercise", "your exercises", "what are my exercises", "What are my exercises?"},
		{"contact", "who to call", "who do I call", "Who do I call?"},
	}
}

// MaxAddedTopics bounds how many added topics the help and the topic
// question name (the first in URI order), so the list stays short enough
// to follow by ear; every added topic is answered when asked for.
const MaxAddedTopics = 3

// addedTopics are the domains of this turn's speakable facts that
// CareTopic does not name, in the facts' order, at most MaxAddedTopics.
// The exercises' recording (exercise_clip) is not one: the exercises'
// answer offers it (clip.go).
func (t *turn) addedTopics() []string {
	var out []string
	for _, v := range t.facts {
		if isModelTopic(v.Domain) || v.Domain == domainExerciseClip || slices.Contains(out, v.Domain) {
			continue
		}
		if out = append(out, v.Domain); len(out) == MaxAddedTopics {
			break
		}
	}
	return out
}

func isModelTopic(domain string) bool {
	return slices.ContainsFunc(modelTopics(), func(m modelTopic) bool { return m.domain == domain })
}

// offered returns f of each model topic with the added topics' own
// (from add) before "who to call".
func (t *turn) offered(f func(modelTopic) string, add func(topic string) string) []string {
	mt := modelTopics()
	var out []string
	for _, m := range mt[:len(mt)-1] {
		out = append(out, f(m))
	}
	for _, d := range t.addedTopics() {
		out = append(out, add(models.Topic(d)))
	}
	return append(out, f(mt[len(mt)-1]))
}

// topicsQuestion asks which topic he wants: "I can tell you about your
// walking, your blood thinner, your exercises, your wound care, or who to
// call. Which would you like?"
func (t *turn) topicsQuestion() string {
	return "I can tell you about " + orList(t.choices()) + ". Which would you like?"
}

// topicsPrompt is the reprompt after an answer: "You can ask about your
// walking, …, or who to call."
func (t *turn) topicsPrompt() string {
	return "You can ask about " + orList(t.choices()) + "."
}

func (t *turn) choices() []string {
	return t.offered(func(m modelTopic) string { return m.choice }, func(topic string) string { return "your " + topic })
}

// helpText is the help: "You can ask me: what's my walking instruction;
// …; what's my wound care instruction; or who do I call. You can also
// say: what changed."
func (t *turn) helpText() string {
	asks := t.offered(func(m modelTopic) string { return m.ask }, func(topic string) string { return "what's my " + topic + " instruction" })
	last := len(asks) - 1
	return "You can ask me: " + strings.Join(asks[:last], "; ") + "; or " + asks[last] + ". You can also say: what changed."
}

// helpPhrases are the help card's phrases, the help's questions as
// written, then "What changed?".
func (t *turn) helpPhrases() []string {
	ps := t.offered(func(m modelTopic) string { return m.phrase }, func(topic string) string { return "What's my " + topic + " instruction?" })
	return append(ps, "What changed?")
}

// orList joins "a, b, or c" (the skill's spoken lists keep the comma
// before "or").
func orList(xs []string) string {
	if len(xs) == 1 {
		return xs[0]
	}
	return strings.Join(xs[:len(xs)-1], ", ") + ", or " + xs[len(xs)-1]
}

// topicWords are the words of a topic as compared: lower case, letters and
// digits only, without the words that carry no topic ("my", "the",
// "instruction", …) and a plural "s".
func topicWords(s string) []string {
	fields := strings.FieldsFunc(strings.ToLower(s), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
	var out []string
	for _, w := range fields {
		switch w {
		case "my", "the", "a", "an", "about", "on", "for", "of", "instruction", "instructions", "note", "notes", "please":
			continue
		}
		if len(w) > 3 && strings.HasSuffix(w, "s") && !strings.HasSuffix(w, "ss") {
			w = w[:len(w)-1]
		}
		out = append(out, w)
	}
	return out
}

// namedTopic finds the speakable fact whose added topic (a domain
// CareTopic does not name, exercise_clip included) his words name, when
// entity resolution matched nothing: the words, as topicWords, equal the
// topic's, or are some of its words — not only "care" — and name no other
// such fact. A model
// topic is never matched here (Alexa's resolution is the judge of those),
// and no words, or words naming two facts, match nothing. It returns the
// domain.
func (t *turn) namedTopic(said string) (string, bool) {
	words := topicWords(said)
	if len(words) == 0 {
		return "", false
	}
	partial := slices.ContainsFunc(words, func(w string) bool { return w != "care" })
	var some []string
	for _, v := range t.facts {
		if isModelTopic(v.Domain) {
			continue
		}
		tw := topicWords(models.Topic(v.Domain))
		if slices.Equal(words, tw) {
			return v.Domain, true
		}
		if partial && !slices.Contains(some, v.Domain) && !slices.ContainsFunc(words, func(w string) bool { return !slices.Contains(tw, w) }) {
			some = append(some, v.Domain)
		}
	}
	if len(some) == 1 {
		return some[0], true
	}
	return "", false
}
