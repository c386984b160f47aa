// Package caretopic reads the CareTopic slot type of the custom skill's
// interaction models: the domains Alexa's entity resolution names and the
// words (names and synonyms) people call them by. The bridge resolves a
// person's topic with it (care_instruction) and the write API refuses a
// new topic whose spoken name is already another topic's (finding V2).
package caretopic

import (
	"fmt"
	"io/fs"
	"slices"
	"strings"
	"sync"
	"unicode"

	"github.com/unsay/unsay/models"
	skillpackage "github.com/unsay/unsay/skill-package"
	"github.com/unsay/unsay/skill/alexaask"
)

// SlotType is the custom slot type of CarePlanIntent's topic in the
// skill's interaction models: its values' ids are domains, their names
// and synonyms what people call them ("crutches" → weight_bearing).
const SlotType = "CareTopic"

// Model is CareTopic as read from every locale's interaction model. It is
// built once and never changed.
type Model struct {
	Phrase map[string]string // Normalize(name or synonym) → domain; the first locale (sorted by file) wins a phrase two values share
	Name   map[string]string // domain → its spoken name (the value's name, as written)
	Err    error             // why a model could not be read (then its phrases are missing)
}

// Default is the Model of the skill package's committed interaction models.
var Default = sync.OnceValue(func() *Model { return Load(skillpackage.FS()) })

// Load reads CareTopic from every interactionModels/custom/*.json of fsys,
// each parsed by alexaask.ParseModel (the parser `unsay ask` uses).
// A model that does not parse leaves Err set and the others' phrases in
// place.
func Load(fsys fs.FS) *Model {
	m := &Model{Phrase: map[string]string{}, Name: map[string]string{}}
	files, err := fs.Glob(fsys, "interactionModels/custom/*.json")
	if err != nil || len(files) == 0 {
		m.Err = fmt.Errorf("caretopic: no interaction models in the skill package (%v)", err)
		return m
	}
	slices.Sort(files)
	for _, f := range files {
		raw, err := fs.ReadFile(fsys, f)
		if err != nil {
			m.Err = fmt.Errorf("caretopic: %s: %w", f, err)
			continue
		}
		lm, err := alexaask.ParseModel(raw)
		if err != nil {
			m.Err = fmt.Errorf("caretopic: %s: %w", f, err)
			continue
		}
		for _, v := range lm.Types[SlotType] {
			if !models.ValidID(v.ID) {
				continue
			}
			if _, ok := m.Name[v.ID]; !ok && v.Name != "" {
				m.Name[v.ID] = v.Name
			}
			for _, p := range append([]string{v.Name}, v.Synonyms...) {
				if k := Normalize(p); k != "" {
					if _, taken := m.Phrase[k]; !taken {
						m.Phrase[k] = v.ID
					}
				}
			}
		}
	}
	if len(m.Phrase) == 0 && m.Err == nil {
		m.Err = fmt.Errorf("caretopic: no %s slot type in the interaction models", SlotType)
	}
	return m
}

// IsValue reports whether domain is one of CareTopic's values.
func (m *Model) IsValue(domain string) bool {
	_, ok := m.Name[domain]
	return ok
}

// Names are the normalized words a domain is asked for by: its spoken
// name (models.Topic), and for a CareTopic value its name and synonyms;
// sorted, each once. "wound_care" and "wound-care" both give ["wound
// care"]; "anticoagulant" gives "blood thinner", "warfarin", ….
func (m *Model) Names(domain string) []string {
	out := []string{Normalize(models.Topic(domain))}
	for p, d := range m.Phrase {
		if d == domain {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return slices.Compact(slices.DeleteFunc(out, func(s string) bool { return s == "" }))
}

// Normalize lower-cases s, turns every run of characters other than
// letters and digits into one space, and trims: "Who do I call?" → "who do
// i call", "weight_bearing" → "weight bearing", "wound-care" → "wound
// care", "what's" → "what s".
func Normalize(s string) string {
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
