package harness

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Model is the part of an ASK interaction model (skill-package/
// interactionModels/custom/<locale>.json) that the harness uses to build
// slots the way Alexa's entity resolution would.
type Model struct {
	InteractionModel struct {
		LanguageModel struct {
			InvocationName string `json:"invocationName"`
			Intents        []struct {
				Name  string `json:"name"`
				Slots []struct {
					Name string `json:"name"`
					Type string `json:"type"`
				} `json:"slots"`
				Samples []string `json:"samples"`
			} `json:"intents"`
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

// ModelPath is the interaction model file for locale under the repository.
func ModelPath(root, locale string) string {
	return filepath.Join(root, "skill-package", "interactionModels", "custom", locale+".json")
}

// LoadModel reads an interaction model file.
func LoadModel(path string) (*Model, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var m Model
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &m, nil
}

// IntentNames lists every intent in the model, in file order.
func (m *Model) IntentNames() []string {
	var out []string
	for _, in := range m.InteractionModel.LanguageModel.Intents {
		out = append(out, in.Name)
	}
	return out
}

// SlotType returns the type of intent's slot, or "" when there is none.
func (m *Model) SlotType(intent, slot string) string {
	for _, in := range m.InteractionModel.LanguageModel.Intents {
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
	for _, t := range m.InteractionModel.LanguageModel.Types {
		if t.Name != typ {
			continue
		}
		for _, v := range t.Values {
			cands := append([]string{v.Name.Value}, v.Name.Synonyms...)
			for _, c := range cands {
				if strings.EqualFold(strings.TrimSpace(c), strings.TrimSpace(spoken)) {
					return Slot(slot, spoken, typ, v.Name.Value, v.ID), nil
				}
			}
		}
	}
	return Slot(slot, spoken, typ, "", ""), nil
}
