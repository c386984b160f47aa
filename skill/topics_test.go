package skill

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/unsay/unsay/apl"
	"github.com/unsay/unsay/models"
)

// The topic question and help for the demo patient, whose care team added
// no topic: the interaction model's four.
const (
	coreTopicsQuestion = "I can tell you about your walking, your blood thinner, your exercises, or who to call. Which would you like?"
	coreTopicsPrompt   = "You can ask about your walking, your blood thinner, your exercises, or who to call."
	coreHelp           = "You can ask me: what's my walking instruction; tell me about my blood thinner; what are my exercises; or who do I call. You can also say: what changed."
)

// saidSlot is the topic slot as Alexa sends words CareTopic does not
// resolve: the words, and ER_SUCCESS_NO_MATCH.
func saidSlot(words string) map[string]Slot {
	s := topicSlot("", "ER_SUCCESS_NO_MATCH")
	sl := s[SlotTopic]
	sl.Value = words
	s[SlotTopic] = sl
	return s
}

func reprompt(out ResponseEnvelope) string {
	if out.Response.Reprompt == nil {
		return ""
	}
	return out.Response.Reprompt.OutputSpeech.SSML
}

// helpPhrasesOf reads the help card's phrases from a response.
func helpPhrasesOf(t *testing.T, raw []byte) []string {
	t.Helper()
	var m struct {
		Response struct {
			Directives []struct {
				Token       string `json:"token"`
				Datasources struct {
					Help struct {
						Phrases []string `json:"phrases"`
					} `json:"help"`
				} `json:"datasources"`
			} `json:"directives"`
		} `json:"response"`
	}
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	if len(m.Response.Directives) != 1 || m.Response.Directives[0].Token != apl.TokenHelp {
		t.Fatalf("no help card in %s", raw)
	}
	return m.Response.Directives[0].Datasources.Help.Phrases
}

const woundText = "Keep the dressing dry; change it every two days."

// withWoundCare adds the care team's wound_care fact (a domain CareTopic
// does not name) and an assistant-only fall_risk fact to the demo patient.
func withWoundCare(r *rig) {
	r.care.facts["ray"] = append(r.care.facts["ray"], ver("wound_care", 1, woundText, "Sarah Okafor, physio", time.Hour))
	risk := ver("fall_risk", 1, "Fall risk high; family disputes the discharge.", "Dr Mensah, GP", time.Hour)
	risk.Audience = models.AudienceAssistant
	r.care.facts["ray"] = append(r.care.facts["ray"], risk)
}

// T13: the help, its reprompt and its card name a topic the care team
// added beside the interaction model's four; an assistant-only fact's
// domain is never named. Twin: with no added topic they name the four.
func TestHelp_NamesTheTopicsTheCareTeamAddedAndNoAssistantOnlyOne(t *testing.T) {
	r := newRig(t, nil)
	out, raw := r.turn(reqOpts{Type: TypeIntent, Intent: IntentHelp, APL: true})
	if !strings.Contains(plain(out), coreHelp) || !strings.Contains(reprompt(out), coreTopicsPrompt) {
		t.Errorf("no added topic: help %q, reprompt %q", plain(out), reprompt(out))
	}
	want := []string{"What's my walking instruction?", "Tell me about my blood thinner", "What are my exercises?", "Who do I call?", "What changed?"}
	if got := helpPhrasesOf(t, raw); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("card phrases %q, want %q", got, want)
	}

	withWoundCare(r)
	out, raw = r.turn(reqOpts{Type: TypeIntent, Intent: IntentHelp, APL: true})
	wantHelp := "You can ask me: what's my walking instruction; tell me about my blood thinner; what are my exercises; what's my wound care instruction; or who do I call. You can also say: what changed."
	if !strings.Contains(plain(out), wantHelp) {
		t.Errorf("help %q, want it to contain %q", plain(out), wantHelp)
	}
	if rp := reprompt(out); !strings.Contains(rp, "your exercises, your wound care, or who to call.") {
		t.Errorf("reprompt %q does not offer wound care", rp)
	}
	if got := helpPhrasesOf(t, raw); !strings.Contains(strings.Join(got, "|"), "What are my exercises?|What's my wound care instruction?|Who do I call?") {
		t.Errorf("card phrases %q do not offer wound care", got)
	}
	for _, s := range []string{plain(out), reprompt(out), string(raw)} {
		if strings.Contains(s, "fall risk") || strings.Contains(s, "fall_risk") || strings.Contains(s, "Fall risk") {
			t.Errorf("an assistant-only fact's topic reached the response: %q", s)
		}
	}
}

// T13: his words for a topic the care team added answer it — the whole
// topic or a word of it that names no other fact; words naming nothing
// get the topic question, which offers the added topic. Twin: words of a
// model topic that Alexa did not resolve are still not matched here
// (TestCarePlan_ResolvesSlotOnlyOnSuccessMatch).
func TestCarePlan_AnswersATopicTheCareTeamAddedByItsWords(t *testing.T) {
	for _, tc := range []struct {
		said   string
		answer bool
	}{
		{"wound care", true},
		{"my wound care instructions", true},
		{"Wound", true},
		{"dinner", false},
		{"care", false},
		{"", false},
		{"fall risk", false}, // assistant-only: never spoken
	} {
		r := newRig(t, nil)
		withWoundCare(r)
		out, _ := r.turn(reqOpts{Type: TypeIntent, Intent: IntentCarePlan, Slots: saidSlot(tc.said)})
		got := plain(out)
		if strings.Contains(got, "Fall risk") {
			t.Errorf("%q: an assistant-only fact was spoken: %q", tc.said, got)
		}
		if answered := strings.Contains(got, "Your wound care instruction from Sarah Okafor, physio") && strings.Contains(got, woundText); answered != tc.answer {
			t.Errorf("%q: answered %v, want %v: %q", tc.said, answered, tc.answer, got)
		}
		if !tc.answer && !strings.Contains(got, "your exercises, your wound care, or who to call. Which would you like?") {
			t.Errorf("%q: the topic question does not offer wound care: %q", tc.said, got)
		}
	}
}

// T13: a word shared by two added topics names neither (the topic
// question asks), and each topic's own words name it.
func TestCarePlan_AWordSharedByTwoAddedTopicsAsksWhich(t *testing.T) {
	r := newRig(t, nil)
	withWoundCare(r)
	r.care.facts["ray"] = append(r.care.facts["ray"], ver("wound_drain", 1, "The drain comes out on Friday.", "Ward 4 nurse", time.Hour))
	out, _ := r.turn(reqOpts{Type: TypeIntent, Intent: IntentCarePlan, Slots: saidSlot("wound")})
	if got := plain(out); strings.Contains(got, woundText) || strings.Contains(got, "The drain comes out") ||
		!strings.Contains(got, "your wound care, your wound drain, or who to call") {
		t.Errorf("\"wound\" with two wound topics: %q", got)
	}
	for said, want := range map[string]string{"wound drain": "The drain comes out on Friday.", "wound care": woundText} {
		out, _ := r.turn(reqOpts{Type: TypeIntent, Intent: IntentCarePlan, Slots: saidSlot(said)})
		if !strings.Contains(plain(out), want) {
			t.Errorf("%q: %q, want %q", said, plain(out), want)
		}
	}
}

// The help and the topic question name at most MaxAddedTopics added
// topics, so the list stays short enough to follow by ear; one named
// beyond them is still answered.
func TestHelp_NamesAtMostMaxAddedTopicsButAnswersEveryOne(t *testing.T) {
	r := newRig(t, nil)
	names := []string{"diet", "dressing", "driving", "sleep", "stairs"}
	for _, d := range names {
		r.care.facts["ray"] = append(r.care.facts["ray"], ver(d, 1, "About "+d+".", "Ward 4 nurse", time.Hour))
	}
	out, _ := r.turn(reqOpts{Type: TypeIntent, Intent: IntentHelp})
	n := 0
	for _, d := range names {
		if strings.Contains(plain(out), "what's my "+d+" instruction") {
			n++
		}
	}
	if n != MaxAddedTopics {
		t.Errorf("help names %d added topics, want %d: %q", n, MaxAddedTopics, plain(out))
	}
	out, _ = r.turn(reqOpts{Type: TypeIntent, Intent: IntentCarePlan, Slots: saidSlot("stairs")})
	if !strings.Contains(plain(out), "About stairs.") {
		t.Errorf("an added topic beyond the help's list is not answered: %q", plain(out))
	}
}

// V2: an added topic whose spoken name is a model topic's (blood_thinner,
// walking) or an earlier added topic's (wound-care beside wound_care) is
// not offered: the help, its card and the topic question name each spoken
// topic once. Twin: an added topic with a name of its own (blood test) is
// still offered beside them.
func TestHelp_NamesEachSpokenTopicOnce(t *testing.T) {
	r := newRig(t, nil)
	for _, d := range []string{"blood_thinner", "walking", "wound_care", "wound-care", "blood_test"} {
		r.care.facts["ray"] = append(r.care.facts["ray"], ver(d, 1, "About "+d+".", "Ward 4 nurse", time.Hour))
	}
	help, raw := r.turn(reqOpts{Type: TypeIntent, Intent: IntentHelp, APL: true})
	question, _ := r.turn(reqOpts{Type: TypeIntent, Intent: IntentCarePlan, Slots: saidSlot("dinner")})
	card := strings.Join(helpPhrasesOf(t, raw), "|")
	for _, s := range []struct{ what, text string }{
		{"help", plain(help)}, {"reprompt", reprompt(help)}, {"card", card}, {"question", plain(question)},
	} {
		low := strings.ReplaceAll(strings.ToLower(s.text), "-", " ")
		for _, name := range []string{"blood thinner", "walking", "wound care"} {
			if n := strings.Count(low, name); n != 1 {
				t.Errorf("%s names %q %d times, want once: %q", s.what, name, n, s.text)
			}
		}
		if !strings.Contains(low, "blood test") {
			t.Errorf("%s does not offer the distinctly named blood test: %q", s.what, s.text)
		}
	}
}

// V2: words naming two stored topics of one spoken name (wound_care and
// wound-care) answer one of them, never both as current, every time; an
// added topic named like a model topic (blood_thinner) is never answered
// by its words. Twin: a distinctly named added topic (blood test) is
// answered by its words.
func TestCarePlan_TwoStoredTopicsOfOneSpokenNameAreNeverBothSaid(t *testing.T) {
	r := newRig(t, nil)
	for _, d := range []string{"wound_care", "wound-care", "blood_thinner", "blood_test"} {
		r.care.facts["ray"] = append(r.care.facts["ray"], ver(d, 1, "About "+d+".", "Ward 4 nurse", time.Hour))
	}
	for _, said := range []string{"wound care", "wound", "my wound care instructions"} {
		got := plain(first(r.turn(reqOpts{Type: TypeIntent, Intent: IntentCarePlan, Slots: saidSlot(said)})))
		if n := strings.Count(got, "About wound_care.") + strings.Count(got, "About wound-care."); n != 1 {
			t.Errorf("%q: %d wound care instructions said, want one: %q", said, n, got)
		}
	}
	if got := plain(first(r.turn(reqOpts{Type: TypeIntent, Intent: IntentCarePlan, Slots: saidSlot("blood thinner")}))); strings.Contains(got, "About blood_thinner.") {
		t.Errorf("the added blood_thinner was answered by the model topic's words: %q", got)
	}
	if got := plain(first(r.turn(reqOpts{Type: TypeIntent, Intent: IntentCarePlan, Slots: saidSlot("blood test")}))); !strings.Contains(got, "About blood_test.") {
		t.Errorf("the distinctly named blood test is not answered: %q", got)
	}
}

// V2: words that name several added topics ("wound") get the topic
// question offering those topics, not the first MaxAddedTopics added ones,
// so his answer can name one. Twin: words naming none get the question
// with the first added topics.
func TestCarePlan_AWordNamingSeveralAddedTopicsAsksWithThem(t *testing.T) {
	r := newRig(t, nil)
	for _, d := range []string{"diet", "dressing", "driving", "wound_care", "wound_drain"} {
		r.care.facts["ray"] = append(r.care.facts["ray"], ver(d, 1, "About "+d+".", "Ward 4 nurse", time.Hour))
	}
	out, _ := r.turn(reqOpts{Type: TypeIntent, Intent: IntentCarePlan, Slots: saidSlot("wound")})
	want := "I can tell you about your walking, your blood thinner, your exercises, your wound care, your wound drain, or who to call. Which would you like?"
	if got := plain(out); !strings.Contains(got, want) || strings.Contains(got, "About ") || !strings.Contains(reprompt(out), "your wound drain") {
		t.Errorf("\"wound\": %q (reprompt %q), want %q", got, reprompt(out), want)
	}
	out, _ = r.turn(reqOpts{Type: TypeIntent, Intent: IntentCarePlan, Slots: saidSlot("dinner")})
	want = "I can tell you about your walking, your blood thinner, your exercises, your diet, your dressing, your driving, or who to call. Which would you like?"
	if got := plain(out); !strings.Contains(got, want) {
		t.Errorf("\"dinner\": %q, want %q", got, want)
	}
}

func first(out ResponseEnvelope, _ []byte) ResponseEnvelope { return out }
