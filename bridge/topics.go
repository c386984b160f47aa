package bridge

import (
	"slices"
	"strings"
	"sync"

	"github.com/unsay/unsay/bridge/caretopic"
	"github.com/unsay/unsay/models"
)

// CareTopicSlotType is the custom slot type of CarePlanIntent's topic in
// the skill's interaction models (caretopic.SlotType).
const CareTopicSlotType = caretopic.SlotType

// topicIndex resolves a topic in a person's words to a domain with the
// same names and synonyms the custom skill's interaction models give
// CareTopic (every locale the skill package ships, read by caretopic), so
// care_instruction understands what CarePlanIntent understands. It is
// built once and never changed.
type topicIndex struct {
	phrase map[string]string // normalized name or synonym → domain
	name   map[string]string // domain → its spoken name (the value's name)
	err    error             // why the interaction models could not be read (then only domain names resolve)
}

// careTopics is the index of the skill package's interaction models.
var careTopics = sync.OnceValue(func() *topicIndex { return fromModel(caretopic.Default()) })

func fromModel(m *caretopic.Model) *topicIndex {
	return &topicIndex{phrase: m.Phrase, name: m.Name, err: m.Err}
}

// fillerWords are dropped from a topic that matched nothing as said
// ("my walking instruction" → "walking").
var fillerWords = map[string]bool{"my": true, "the": true, "about": true, "instruction": true, "instructions": true,
	"note": true, "notes": true, "care": true, "plan": true, "what": true, "whats": true, "s": true}

// resolve returns the domain a topic names, among domains (those the
// caller may read): a CareTopic name or synonym, else a domain's own id
// ("weight_bearing", "weight bearing") or its spoken topic (models.Topic);
// each tried as said, then without filler words. A phrase of the model
// whose domain is not in domains still resolves (to a domain the caller
// has no fact of: the answer is then "none").
func (ix *topicIndex) resolve(topic string, domains map[string]bool) (string, bool) {
	said := normalizeTopic(topic)
	var words []string
	for _, w := range strings.Fields(said) {
		if !fillerWords[w] {
			words = append(words, w)
		}
	}
	for _, k := range []string{said, strings.Join(words, " ")} {
		if k == "" {
			continue
		}
		if d, ok := ix.phrase[k]; ok {
			return d, true
		}
		for _, d := range sortedKeys(domains) {
			if k == normalizeTopic(d) || k == normalizeTopic(models.Topic(d)) || k == normalizeTopic(ix.spokenName(d)) {
				return d, true
			}
		}
	}
	return "", false
}

// spokenName is what a domain is called: its CareTopic name ("who to
// call"), else models.Topic.
func (ix *topicIndex) spokenName(domain string) string {
	if n, ok := ix.name[domain]; ok {
		return n
	}
	return models.Topic(domain)
}

// spokenTopics are the spoken names of domains, sorted.
func (ix *topicIndex) spokenTopics(domains map[string]bool) []string {
	out := make([]string, 0, len(domains))
	for d := range domains {
		out = append(out, ix.spokenName(d))
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// normalizeTopic is caretopic.Normalize: "weight_bearing" → "weight bearing".
func normalizeTopic(s string) string { return caretopic.Normalize(s) }

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
