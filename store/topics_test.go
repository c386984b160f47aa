package store

import (
	"slices"
	"testing"

	"github.com/unsay/unsay/models"
)

// TestTopics_NamesThePatientsDomainsOfBothAudiencesSortedAndNoOnesElse:
// the write API names a patient's other topics after a new topic's first
// version. The answer holds every domain of that patient (assistant-only
// ones too: names, never values), sorted, once each however many
// versions, and nothing of another patient; a patient with no facts has
// none.
func TestTopics_NamesThePatientsDomainsOfBothAudiencesSortedAndNoOnesElse(t *testing.T) {
	s, _ := openTest(t, newClock())
	mustPublish(t, s, writer, in("weight_bearing", models.AudienceUser, "Non-weight-bearing."))
	mustPublish(t, s, writer, in("weight_bearing", models.AudienceUser, "Full weight-bearing as tolerated."))
	mustPublish(t, s, writer, in("anticoagulant", models.AudienceAssistant, "Check INR."))
	sue := in("exercise", models.AudienceUser, "Heel slides.")
	sue.Patient = "sue"
	mustPublish(t, s, models.System("test", models.ScopeWrite), sue)
	for _, tc := range []struct {
		patient string
		want    []Topic
	}{
		{"ray", []Topic{{"anticoagulant", models.AudienceAssistant}, {"weight_bearing", models.AudienceUser}}},
		{"sue", []Topic{{"exercise", models.AudienceUser}}},
		{"rayy", nil},
	} {
		got, err := s.Topics(t.Context(), tc.patient)
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("Topics(%s) = %v, %v; want %v", tc.patient, got, err, tc.want)
		}
	}
}

// TestKnownFact_IsTrueOnlyForAFactThisProcessCommitted: KnownFact lets the
// write API skip its new-topic query for a revision, so it must never say
// true of a domain with no fact (a mistyped "walkng" would then be saved
// unchecked), of another patient's fact, or across audiences' patients;
// it says true once this process committed a version of the fact.
func TestKnownFact_IsTrueOnlyForAFactThisProcessCommitted(t *testing.T) {
	s, _ := openTest(t, newClock())
	if s.KnownFact("ray", "weight_bearing") {
		t.Fatal("KnownFact is true before any version was written")
	}
	mustPublish(t, s, writer, in("weight_bearing", models.AudienceUser, "Non-weight-bearing."))
	mustPublish(t, s, writer, in("anticoagulant", models.AudienceAssistant, "Check INR."))
	for _, tc := range []struct {
		patient, domain string
		want            bool
	}{
		{"ray", "weight_bearing", true},
		{"ray", "anticoagulant", true},
		{"ray", "walkng", false},
		{"sue", "weight_bearing", false},
		{"rayy", "weight_bearing", false},
	} {
		if got := s.KnownFact(tc.patient, tc.domain); got != tc.want {
			t.Errorf("KnownFact(%s, %s) = %v, want %v", tc.patient, tc.domain, got, tc.want)
		}
	}
}
