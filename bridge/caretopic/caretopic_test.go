package caretopic

import (
	"slices"
	"testing"
)

// A domain's names are its spoken name with "_", "-" and "." as spaces,
// and for a CareTopic value its names and synonyms too; an added domain
// has only its own.
func TestNames_AreTheSpokenNameNormalizedAndACareTopicValuesWords(t *testing.T) {
	m := Default()
	if m.Err != nil {
		t.Fatalf("the interaction models did not load: %v", m.Err)
	}
	for _, d := range []string{"wound_care", "wound-care", "wound.care", "Wound_Care"} {
		if got := m.Names(d); !slices.Equal(got, []string{"wound care"}) {
			t.Errorf("Names(%q) = %q, want [wound care]", d, got)
		}
	}
	for d, want := range map[string]string{"anticoagulant": "blood thinner", "weight_bearing": "crutches", "contact": "who to call"} {
		if got := m.Names(d); !slices.Contains(got, want) {
			t.Errorf("Names(%q) = %q, want it to hold %q", d, got, want)
		}
	}
	if !m.IsValue("anticoagulant") || m.IsValue("blood_thinner") {
		t.Errorf("IsValue: anticoagulant %v, blood_thinner %v; want true, false", m.IsValue("anticoagulant"), m.IsValue("blood_thinner"))
	}
}
