package harness

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/unsay/unsay/skill/alexaask"
)

// Model is an ASK interaction model (skill-package/interactionModels/
// custom/<locale>.json) as `unsay ask` parses it (alexaask.ParseModel),
// with what the harness adds: slots built the way Alexa's entity
// resolution would.
type Model struct{ *alexaask.Model }

// ModelPath is the interaction model file for locale under the repository.
func ModelPath(root, locale string) string {
	return filepath.Join(root, "skill-package", "interactionModels", "custom", locale+".json")
}

// LoadModel reads an interaction model file. Errors name the path and
// wrap alexaask.ErrModel when its JSON is not shaped as ASK expects.
func LoadModel(path string) (*Model, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	m, err := alexaask.ParseModel(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &Model{m}, nil
}

// SlotType returns the type of intent's slot, or "" when there is none.
func (m *Model) SlotType(intent, slot string) string {
	for _, in := range m.Intents {
		if in.Name != intent {
			continue
		}
		for _, s := range in.Slots {
			if s.Name == slot {
				return s.Type
			}
		}
	}
	return ""
}

// Slot resolves spoken against intent's slot type like Alexa's entity
// resolution (case-insensitive match on a value or one of its synonyms) and
// returns the slot object: ER_SUCCESS_MATCH with the value's name and id, or
// ER_SUCCESS_NO_MATCH. It returns an error if the intent has no such slot.
func (m *Model) Slot(intent, slot, spoken string) (map[string]any, error) {
	typ := m.SlotType(intent, slot)
	if typ == "" {
		return nil, fmt.Errorf("interaction model: intent %s has no slot %s", intent, slot)
	}
	for _, v := range m.Types[typ] {
		for _, c := range append([]string{v.Name}, v.Synonyms...) {
			if strings.EqualFold(strings.TrimSpace(c), strings.TrimSpace(spoken)) {
				return Slot(slot, spoken, typ, v.Name, v.ID), nil
			}
		}
	}
	return Slot(slot, spoken, typ, "", ""), nil
}
