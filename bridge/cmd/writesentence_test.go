package cmd

import (
	"strings"
	"testing"
	"time"

	"github.com/unsay/unsay/bridge/httpapi"
	"github.com/unsay/unsay/models"
)

// The sentence after an accepted write says what Ray will hear: a new
// speakable topic is announced at his next turn (a first hearing, P-19),
// a revision is a retraction, an assistant-only fact is never spoken — each
// case with its own words, so a wrong branch fails.
func TestWriteSentence_SaysWhatRayWillHear(t *testing.T) {
	user := httpapi.WriteRequest{Patient: "ray", Domain: "walking", Audience: models.AudienceUser}
	assistant := user
	assistant.Audience = models.AudienceAssistant
	typo := user
	typo.Domain = "walkng"
	typoAssistant := assistant
	typoAssistant.Domain = "walkng"
	for _, tt := range []struct {
		name   string
		req    httpapi.WriteRequest
		answer string
		want   string
	}{
		{"a new topic", user, `{"uri":"care://ray/walking/v1","version":1}`, "saved care://ray/walking as version 1 (a new topic); Ray will hear it at his next turn"},
		{"a revision", user, `{"uri":"care://ray/walking/v3","version":3}`, "saved care://ray/walking as version 3; Ray will hear the retraction at his next turn"},
		// T17: a revision with the previous words and a new author or
		// review date is saved with no retraction; the sentence does not
		// promise one.
		{"a revision says the retraction needs changed words", user, `{"uri":"care://ray/walking/v3","version":3}`,
			"Ray will hear the retraction at his next turn if its words changed (a new author, review date or priority with the same words is not retracted)"},
		{"assistant-only", assistant, `{"uri":"care-internal://ray/walking/v1","version":1}`, "assistant-only: it is never spoken to Ray"},
		{"a new patient", user, `{"uri":"care://ray/walking/v1","version":1,"newPatient":true}`, `but "ray" had no care notes before this: a new patient`},
		{"a new patient, assistant-only", assistant, `{"uri":"care-internal://ray/walking/v1","version":1,"newPatient":true}`, "this change did not reach them"},
		{"a new topic of a patient on record (--new-topic)", typo, `{"uri":"care://ray/walkng/v1","version":1,"newTopic":true,"topics":["exercise","walking"]}`,
			"saved care://ray/walkng as version 1, a new topic for ray (his other topics: exercise, walking); Ray will hear it at his next turn"},
		{"a new topic, assistant-only", typoAssistant, `{"uri":"care-internal://ray/walkng/v1","version":1,"newTopic":true,"topics":["walking"]}`, "assistant-only: it is never spoken to Ray"},
		{"unchanged", user, `{"uri":"care://ray/walking/v2","version":2,"unchanged":true}`, "unchanged: care://ray/walking is already version 2"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := writeSentence(tt.req, []byte(tt.answer)); !strings.Contains(got, tt.want) {
				t.Errorf("writeSentence = %q, want it to contain %q", got, tt.want)
			}
		})
	}
}

// TestLinkSentence_NamesThePatientTheCodeIsFor: `unsay link --patient bob`
// said "Ray says …"; the sentence names the patient linked (the twin: ray).
func TestLinkSentence_NamesThePatientTheCodeIsFor(t *testing.T) {
	answer := []byte(`{"code":"113682","expiresAt":"2026-12-02T02:01:00Z"}`)
	for _, tt := range []struct{ patient, want, not string }{
		{"bob", "Bob says “my code is 1 1 3 6 8 2”", "Ray"},
		{"ray", "Ray says “my code is 1 1 3 6 8 2”", "Bob"},
	} {
		got := linkSentence(answer, tt.patient, time.UTC)
		if !strings.Contains(got, tt.want) || strings.Contains(got, tt.not) {
			t.Errorf("linkSentence for %s = %q, want %q", tt.patient, got, tt.want)
		}
	}
}
