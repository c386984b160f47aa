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
// CareTopic does not name, in the facts' order, each spoken name once
// (distinctAdded), at most MaxAddedTopics. The exercises' recording
// (exercise_clip) is not one: the exercises' answer offers it (clip.go).
func (t *turn) addedTopics() []string {
	var out []string
	for _, d := range t.distinctAdded() {
		if d == domainExerciseClip {
			continue
		}
		if out = append(out, d); len(out) == MaxAddedTopics {
			break
		}
	}
	return out
}

// distinctAdded are the domains of this turn's speakable facts that
// CareTopic does not name (exercise_clip included), in the facts' order,
// without the duplicates of a spoken name (finding V2): a domain whose
// spoken name, as topicWords, is a model topic's ("blood_thinner" is
// "blood thinner", the anticoagulant's) or an earlier added one's
// ("wound-care" before "wound_care") is dropped after the first. Entity
// resolution answers a model topic's words with the model topic, and the
// words of two same-named topics cannot say which is meant, so the
// dropped one is never offered or answered (two instructions of one name
// would otherwise both be said as current); each is logged at WARN, once
// a turn. The write API refuses such a topic (httpapi newTopicRefusal):
// only data stored before that gets here.
func (t *turn) distinctAdded() []string {
	if t.addedDone {
		return t.added
	}
	t.addedDone = true
	keys := map[string]string{} // spoken name → the topic that has it
	for _, m := range modelTopics() {
		for _, n := range []string{m.domain, models.Topic(m.domain), strings.TrimPrefix(m.choice, "your ")} {
			keys[topicKey(n)] = m.domain
		}
	}
	for _, v := range t.facts {
		if isModelTopic(v.Domain) || slices.Contains(t.added, v.Domain) {
			continue
		}
		k := topicKey(models.Topic(v.Domain))
		if first, dup := keys[k]; dup {
			if t.s != nil && t.s.log != nil {
				t.s.log.Warn("alexa added topic not offered or answered: another topic has its spoken name",
					"patient", t.patient, "domain", v.Domain, "name", k, "other", first)
			}
			continue
		}
		keys[k] = v.Domain
		t.added = append(t.added, v.Domain)
	}
	return t.added
}

// topicKey is a spoken name as topics are compared: its topicWords joined
// by spaces ("wound_care", "wound-care" and "Wound care" are "wound care").
func topicKey(s string) string { return strings.Join(topicWords(s), " ") }

func isModelTopic(domain string) bool {
	return slices.ContainsFunc(modelTopics(), func(m modelTopic) bool { return m.domain == domain })
}

// offered returns f of each model topic with added's own (from add)
// before "who to call".
func offered(added []string, f func(modelTopic) string, add func(topic string) string) []string {
	mt := modelTopics()
	var out []string
	for _, m := range mt[:len(mt)-1] {
		out = append(out, f(m))
	}
	for _, d := range added {
		out = append(out, add(models.Topic(d)))
	}
	return append(out, f(mt[len(mt)-1]))
}

func (t *turn) offered(f func(modelTopic) string, add func(topic string) string) []string {
	return offered(t.addedTopics(), f, add)
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

// topicsQuestionOf is the topic question after words that named several
// added topics ("wound" beside wound care and wound drain): it offers
// those (at most MaxAddedTopics) where the question offers the first
// added topics, so his answer can name one (finding V2).
func (t *turn) topicsQuestionOf(matched []string) string {
	if len(matched) < 2 {
		return t.topicsQuestion()
	}
	matched = matched[:min(len(matched), MaxAddedTopics)]
	return "I can tell you about " + orList(offered(matched, choice, yourTopic)) + ". Which would you like?"
}

func (t *turn) choices() []string { return t.offered(choice, yourTopic) }

func choice(m modelTopic) string { return m.choice }

func yourTopic(topic string) string { return "your " + topic }

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

// namedTopic finds the speakable fact whose added topic (distinctAdded: a
// domain CareTopic does not name, exercise_clip included, each spoken
// name once) his words name, when entity resolution matched nothing: the
// words, as topicWords, equal the topic's, or are some of its words — not
// only "care" — and name no other such fact. A model topic is never
// matched here (Alexa's resolution is the judge of those), and no words,
// or words naming two facts, match nothing. It returns the domain, or the
// added topics the words partly named (several: the topic question offers
// them, topicsQuestionOf).
func (t *turn) namedTopic(said string) (string, []string, bool) {
	words := topicWords(said)
	if len(words) == 0 {
		return "", nil, false
	}
	partial := slices.ContainsFunc(words, func(w string) bool { return w != "care" })
	var some []string
	for _, d := range t.distinctAdded() {
		tw := topicWords(models.Topic(d))
		if slices.Equal(words, tw) {
			return d, nil, true
		}
		if partial && !slices.ContainsFunc(words, func(w string) bool { return !slices.Contains(tw, w) }) {
			some = append(some, d)
		}
	}
	if len(some) == 1 {
		return some[0], nil, true
	}
	return "", some, false
}
