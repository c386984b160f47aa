package bridge

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"slices"
	"strings"
	"sync"
	"unicode"

	"github.com/unsay/unsay/models"
	skillpackage "github.com/unsay/unsay/skill-package"
)

// CareTopicSlotType is the custom slot type of CarePlanIntent's topic in
// the skill's interaction models: its values' ids are domains, their names
// and synonyms what people call them ("crutches" → weight_bearing).
const CareTopicSlotType = "CareTopic"

// topicIndex resolves a topic in a person's words to a domain with the
// same names and synonyms the custom skill's interaction models give
// CareTopic (every locale the skill package ships), so care_instruction
// understands what CarePlanIntent understands. It is built once and never
// changed.
type topicIndex struct {
	phrase map[string]string // normalized name or synonym → domain
	name   map[string]string // domain → its spoken name (the value's name)
	err    error             // why the interaction models could not be read (then only domain names resolve)
}

// careTopics is the index of the skill package's interaction models.
var careTopics = sync.OnceValue(func() *topicIndex { return loadTopics(skillpackage.FS()) })

// loadTopics reads CareTopic from every interactionModels/custom/*.json of
// fsys. A model that does not parse leaves err set and the others' phrases
// in place.
func loadTopics(fsys fs.FS) *topicIndex {
	ix := &topicIndex{phrase: map[string]string{}, name: map[string]string{}}
	files, err := fs.Glob(fsys, "interactionModels/custom/*.json")
	if err != nil || len(files) == 0 {
		ix.err = fmt.Errorf("bridge: no interaction models in the skill package (%v)", err)
		return ix
	}
	slices.Sort(files)
	for _, f := range files {
		raw, err := fs.ReadFile(fsys, f)
		if err != nil {
			ix.err = fmt.Errorf("bridge: %s: %w", f, err)
			continue
		}
		var doc struct {
			InteractionModel struct {
				LanguageModel struct {
					Types []struct {
						Name   string `json:"name"`
						Values []struct {
							ID   string `json:"id"`
							Name struct {
								Value    string   `json:"value"`
								Synonyms []string `json:"synonyms"`
							} `json:"name"`
						} `json:"values"`
					} `json:"types"`
				} `json:"languageModel"`
			} `json:"interactionModel"`
		}
		if err := json.Unmarshal(raw, &doc); err != nil {
			ix.err = fmt.Errorf("bridge: %s: %w", f, err)
			continue
		}
		for _, t := range doc.InteractionModel.LanguageModel.Types {
			if t.Name != CareTopicSlotType {
				continue
			}
			for _, v := range t.Values {
				if !models.ValidID(v.ID) {
					continue
				}
				if _, ok := ix.name[v.ID]; !ok && v.Name.Value != "" {
					ix.name[v.ID] = v.Name.Value
				}
				for _, p := range append([]string{v.Name.Value}, v.Name.Synonyms...) {
					if k := normalizeTopic(p); k != "" {
						if _, taken := ix.phrase[k]; !taken {
							ix.phrase[k] = v.ID
						}
					}
				}
			}
		}
	}
	if len(ix.phrase) == 0 && ix.err == nil {
		ix.err = fmt.Errorf("bridge: no %s slot type in the interaction models", CareTopicSlotType)
	}
	return ix
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

// normalizeTopic lower-cases s, turns every run of characters other than
// letters and digits into one space, and trims: "Who do I call?" → "who do
// i call", "weight_bearing" → "weight bearing", "what's" → "what s".
func normalizeTopic(s string) string {
	var b strings.Builder
	space := false
	for _, r := range strings.ToLower(s) {
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			if space && b.Len() > 0 {
				b.WriteByte(' ')
			}
			space = false
			b.WriteRune(r)
			continue
		}
		space = true
	}
	return b.String()
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
