package alexaask

import (
	"encoding/json"
	"io/fs"
	"strings"
	"testing"
	"time"

	"github.com/unsay/unsay/skill"
	skillpackage "github.com/unsay/unsay/skill-package"
)

func model(t *testing.T, locale string) *Model {
	t.Helper()
	raw, err := fs.ReadFile(skillpackage.FS(), "interactionModels/custom/"+locale+".json")
	if err != nil {
		t.Fatal(err)
	}
	m, err := ParseModel(raw)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestUnderstand_MatchesTheSkillPackagesModel(t *testing.T) {
	t.Parallel()
	for _, locale := range skillpackage.Locales() {
		m := model(t, locale)
		for _, tc := range []struct {
			say, intent, slot, value, id string
		}{
			{"what's my walking instruction", "CarePlanIntent", "topic", "walking", "weight_bearing"},
			{"What’s my walking instruction?", "CarePlanIntent", "topic", "walking", "weight_bearing"},
			{"what about my crutches", "CarePlanIntent", "topic", "crutches", "weight_bearing"},
			{"remind me about my walking frame", "CarePlanIntent", "topic", "walking frame", "weight_bearing"},
			{"tell me about my blood thinner", "CarePlanIntent", "topic", "blood thinner", "anticoagulant"},
			{"who do I call", "CarePlanIntent", "topic", "who do i call", "contact"},
			{"alexa, ask care notes what changed", "WhatsChangedIntent", "", "", ""},
			{"what changed", "WhatsChangedIntent", "", "", ""},
			{"my code is four two seven one nine three", "LinkDeviceIntent", "code", "427193", ""},
			{"my code is 427193", "LinkDeviceIntent", "code", "427193", ""},
			{"help", "AMAZON.HelpIntent", "", "", ""},
			{"stop", "AMAZON.StopIntent", "", "", ""},
			{"say that again", "AMAZON.RepeatIntent", "", "", ""},
			{"tell me more", "MoreIntent", "", "", ""},
			{"the weather in paris", FallbackIntent, "", "", ""},
		} {
			got := m.Understand(tc.say)
			if got.Launch || got.Intent != tc.intent {
				t.Errorf("%s %q: launch=%v intent %q, want %s", locale, tc.say, got.Launch, got.Intent, tc.intent)
				continue
			}
			if tc.slot == "" {
				continue
			}
			v := got.Slots[tc.slot]
			if v.Value != tc.value || v.ResolvedID != tc.id {
				t.Errorf("%s %q: slot %s = %+v, want value %q id %q", locale, tc.say, tc.slot, v, tc.value, tc.id)
			}
		}
		for _, say := range []string{"", "open care notes", "Alexa, open care notes", "start care notes", "care notes"} {
			if got := m.Understand(say); !got.Launch {
				t.Errorf("%s %q: %+v, want a launch", locale, say, got)
			}
		}
	}
}

func TestUnderstand_AnUnknownTopicStaysUnresolvedNotGuessed(t *testing.T) {
	t.Parallel()
	m := model(t, "en-GB")
	got := m.Understand("what's my diet instruction")
	if got.Intent != "CarePlanIntent" || got.Slots["topic"].Value != "diet" || got.Slots["topic"].ResolvedID != "" {
		t.Errorf("%+v: want CarePlanIntent with an unresolved topic \"diet\"", got)
	}
	// A bare slot sample ("{topic}") never swallows an unknown phrase.
	if got := m.Understand("purple elephants"); got.Intent != FallbackIntent {
		t.Errorf("%+v: want the fallback", got)
	}
}

// TestRequest_IsAnEnvelopeTheSkillReads decodes the built request with the
// skill's own types: the intent, the slot's resolution id (what CarePlan
// reads), the APL interface and the session.
func TestRequest_IsAnEnvelopeTheSkillReads(t *testing.T) {
	t.Parallel()
	m := model(t, "en-GB")
	d := &Device{SkillID: "amzn1.ask.skill.x", Screen: true, APLVersion: "1.6"}
	now := time.Date(2026, 10, 13, 10, 0, 0, 0, time.UTC)
	first := d.Request(m.Understand("what's my walking instruction"), now)
	var env skill.RequestEnvelope
	if err := json.Unmarshal(first.JSON(), &env); err != nil {
		t.Fatal(err)
	}
	if env.Request.Type != skill.TypeIntent || env.Request.Intent.Name != skill.IntentCarePlan {
		t.Fatalf("request %+v", env.Request)
	}
	if id, ok := env.Request.Intent.Slots[skill.SlotTopic].ResolvedID(); !ok || id != "weight_bearing" {
		t.Errorf("resolved id %q %v, want weight_bearing", id, ok)
	}
	if !env.Session.New || env.Context.System.Application.ApplicationID != "amzn1.ask.skill.x" || env.APLMaxVersion() != "1.6" || !env.SupportsAPL() {
		t.Errorf("envelope %+v", env)
	}
	if env.Request.Timestamp != "2026-10-13T10:00:00Z" {
		t.Errorf("timestamp %q", env.Request.Timestamp)
	}
	second := d.Request(m.Understand("more"), now)
	if second.Session.New || second.Session.SessionID != first.Session.SessionID {
		t.Errorf("the second turn must continue the session: %+v", second.Session)
	}
	// An unresolved topic carries ER_SUCCESS_NO_MATCH, which the skill reads as no topic.
	var un skill.RequestEnvelope
	_ = json.Unmarshal(d.Request(m.Understand("what's my diet instruction"), now).JSON(), &un)
	if _, ok := un.Request.Intent.Slots[skill.SlotTopic].ResolvedID(); ok || !strings.Contains(string(d.Request(m.Understand("what's my diet instruction"), now).JSON()), "ER_SUCCESS_NO_MATCH") {
		t.Errorf("unresolved topic: %+v", un.Request.Intent.Slots)
	}
	// A device without a screen lists no APL interface.
	dot := &Device{}
	var denv skill.RequestEnvelope
	_ = json.Unmarshal(dot.Request(Match{Launch: true}, now).JSON(), &denv)
	if denv.SupportsAPL() || denv.Request.Type != skill.TypeLaunch {
		t.Errorf("echo dot: %+v", denv)
	}
}

func TestReadAnswer_PlainSpeechAndTheCard(t *testing.T) {
	t.Parallel()
	raw := []byte(`{"version":"1.0","response":{"outputSpeech":{"type":"SSML","ssml":"<speak>Stop &amp; listen: <break time=\"300ms\"/>“Full.”</speak>"},
	"directives":[{"type":"Alexa.Presentation.APL.RenderDocument","token":"unsay-retraction-card","datasources":{"retraction":{"title":"Your walking instruction has changed","withdrawnLabel":"No longer","withdrawn":"Partial &amp; frame.","currentLabel":"Now","current":"Full.","byline":"Sarah Okafor, physio · just now"}}}]}}`)
	a, err := ReadAnswer(raw)
	if err != nil {
		t.Fatal(err)
	}
	if a.Heard != "Stop & listen: “Full.”" {
		t.Errorf("heard %q", a.Heard)
	}
	if a.CardName != "retraction" || len(a.Card) < 3 || !strings.Contains(strings.Join(a.Card, "\n"), "No longer (struck through): Partial & frame.") {
		t.Errorf("card %q %q", a.CardName, a.Card)
	}
	if _, err := ReadAnswer([]byte("not json")); err == nil {
		t.Error("a non-envelope answer was read")
	}
}
