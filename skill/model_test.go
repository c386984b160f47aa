package skill

import (
	"encoding/json"
	"io/fs"
	"slices"
	"strings"
	"testing"

	skillpackage "github.com/unsay/unsay/skill-package"
)

// TestInteractionModels_MatchTheRouter proves, for every locale, that each
// intent the router handles is in the model and each custom intent in the
// model is handled, with the slots the handlers read.
func TestInteractionModels_MatchTheRouter(t *testing.T) {
	handled := HandledIntents()
	for _, loc := range skillpackage.Locales() {
		b, err := fs.ReadFile(skillpackage.FS(), "interactionModels/custom/"+loc+".json")
		if err != nil {
			t.Fatal(err)
		}
		var m struct {
			InteractionModel struct {
				LanguageModel struct {
					Intents []struct {
						Name  string
						Slots []struct{ Name, Type string }
					}
				}
			}
		}
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("%s: %v", loc, err)
		}
		inModel := map[string]map[string]string{}
		for _, in := range m.InteractionModel.LanguageModel.Intents {
			slots := map[string]string{}
			for _, s := range in.Slots {
				slots[s.Name] = s.Type
			}
			inModel[in.Name] = slots
			if !strings.HasPrefix(in.Name, "AMAZON.") && !slices.Contains(handled, in.Name) {
				t.Errorf("%s: custom intent %s is in the model but not handled", loc, in.Name)
			}
		}
		for _, name := range handled {
			if _, ok := inModel[name]; !ok {
				t.Errorf("%s: handled intent %s is not in the model", loc, name)
			}
		}
		if inModel[IntentCarePlan][SlotTopic] != "CareTopic" || inModel[IntentLinkDevice][SlotCode] != "AMAZON.NUMBER" {
			t.Errorf("%s: slots %v / %v", loc, inModel[IntentCarePlan], inModel[IntentLinkDevice])
		}
	}
}
