package skill

import (
	"context"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/unsay/unsay/apl"
	"github.com/unsay/unsay/models"
)

func ssml(out ResponseEnvelope) string {
	if out.Response.OutputSpeech == nil {
		return ""
	}
	return out.Response.OutputSpeech.SSML
}

// plain is the SSML's text as a listener hears it (entities decoded, tags dropped).
func plain(out ResponseEnvelope) string {
	dec := xml.NewDecoder(strings.NewReader(ssml(out)))
	var b strings.Builder
	for {
		tok, err := dec.Token()
		if err != nil {
			break
		}
		if cd, ok := tok.(xml.CharData); ok {
			b.Write(cd)
		}
	}
	return b.String()
}

func endState(raw []byte) string {
	var m struct {
		Response map[string]json.RawMessage `json:"response"`
	}
	_ = json.Unmarshal(raw, &m)
	v, ok := m.Response["shouldEndSession"]
	if !ok {
		return "omitted"
	}
	return string(v)
}

func heardSet(calls []heardCall) map[string]int {
	m := map[string]int{}
	for _, c := range calls {
		m[c.URI] = c.Version
	}
	return m
}

func TestLaunch_SpeaksWalkingThenStaleThenAsks(t *testing.T) {
	r := newRig(t, nil)
	out, raw := r.turn(reqOpts{})
	s := ssml(out)
	iWalk := strings.Index(s, "Your walking instruction from Mr Adeyemi, surgical team, two days ago: “Partial weight-bearing")
	iStale := strings.Index(s, "Nine days ago, Dr Mensah, GP, wrote your blood thinner instruction")
	iAsk := strings.Index(s, textQuestion)
	if iWalk < 0 || iStale < iWalk || iAsk < iStale {
		t.Fatalf("order walking < stale < question broken: %q", s)
	}
	if strings.Contains(s, "Ankle pumps") || strings.Contains(s, "Ward 4") {
		t.Errorf("launch spoke a fresh non-walking fact: %q", s)
	}
	if endState(raw) != "false" || out.Response.Reprompt == nil {
		t.Errorf("asking launch: shouldEndSession %s, reprompt %v", endState(raw), out.Response.Reprompt)
	}
	if len(out.Response.Directives) != 0 {
		t.Errorf("APL directive without the APL interface: %+v", out.Response.Directives)
	}
	heard := heardSet(r.care.heardCalls())
	want := map[string]int{"care://ray/weight_bearing": 2, "care://ray/anticoagulant": 1}
	if len(heard) != len(want) || heard["care://ray/weight_bearing"] != 2 || heard["care://ray/anticoagulant"] != 1 {
		t.Errorf("marked heard %v, want exactly %v", heard, want)
	}
}

// P-24: on a screen every fact the care card draws is told at the version
// drawn (Ray read it there), on a screen device; the voice-only twin
// (TestLaunch_…WithoutAPL above) marks only what was spoken.
func TestLaunch_DrawsCareCardOnlyWithAPLAndEveryFactOnItIsTold(t *testing.T) {
	r := newRig(t, nil)
	out, raw := r.turn(reqOpts{APL: true})
	ds := out.Response.Directives
	if len(ds) != 1 || ds[0].Type != RenderDocumentType || ds[0].Token != apl.TokenCare {
		t.Fatalf("directives %+v, want one RenderDocument %s", ds, apl.TokenCare)
	}
	var doc map[string]any
	if err := json.Unmarshal(ds[0].Document, &doc); err != nil || doc["version"] != apl.Version {
		t.Fatalf("inline document: %v %v", err, doc["version"])
	}
	if !strings.Contains(string(raw), `"rows":[`) || strings.Count(string(raw), `"byline":`) != 4 {
		t.Errorf("care card must list all four facts: %s", raw)
	}
	if !strings.Contains(string(raw), `"staleNote":"Past its review date. Please check it with your care team."`) {
		t.Errorf("stale row not marked on the card")
	}
	// Exercise and contact are on the screen, not spoken: told all the same.
	heard := heardSet(r.care.heardCalls())
	want := map[string]int{"care://ray/weight_bearing": 2, "care://ray/anticoagulant": 1, "care://ray/exercise": 1, "care://ray/contact": 1}
	if !maps.Equal(heard, want) {
		t.Errorf("marked %v, want every fact on the card %v", heard, want)
	}
	for i, c := range r.care.heardCalls() {
		if !c.Told || r.care.hows[i].Device != models.DeviceScreen {
			t.Errorf("%+v marked %+v, want told on a screen", c, r.care.hows[i])
		}
	}
	if got := r.care.toldOffers(); len(got) != 4 {
		t.Errorf("told offers before the write = %v, want the four facts drawn", got)
	}
}

func TestLaunch_PendingRetractionFirstThenNeverAgain(t *testing.T) {
	r := newRig(t, nil)
	r.care.setPending("ray", retractionWB())
	out, raw := r.turn(reqOpts{APL: true})
	s := ssml(out)
	if !strings.HasPrefix(s, "<speak>Stop — your walking instruction has changed. I told you: “Partial weight-bearing") {
		t.Fatalf("retraction not first: %q", s)
	}
	if !strings.Contains(s, "Sarah Okafor, physio, changed it just now: “Full weight-bearing as tolerated.”") {
		t.Errorf("new instruction, author or age missing: %q", s)
	}
	if strings.Count(s, "Partial weight-bearing") != 1 {
		t.Errorf("the withdrawn walking instruction was repeated as current: %q", s)
	}
	if d := out.Response.Directives; len(d) != 1 || d[0].Token != apl.TokenRetraction {
		t.Fatalf("want the retraction card, got %+v", d)
	}
	if !strings.Contains(string(raw), `"byline":"Sarah Okafor, physio · just now"`) || !strings.Contains(string(raw), `"withdrawn":"Partial weight-bearing`) {
		t.Errorf("retraction card content: %s", raw)
	}
	if heardSet(r.care.heardCalls())["care://ray/weight_bearing"] != 3 {
		t.Errorf("retraction not marked heard at v3: %v", r.care.heardCalls())
	}
	again, _ := r.turn(reqOpts{Session: "s2"})
	if strings.Contains(ssml(again), "Stop —") {
		t.Errorf("retraction spoken twice: %q", ssml(again))
	}
}

func TestTurns_SpeakAnnouncementsOldestFirstOnEveryTurn(t *testing.T) {
	first := retractionWB()
	ex := ver("exercise", 2, "Heel slides fifteen times.", "Sarah Okafor, physio", time.Minute)
	exHeard := ver("exercise", 1, "Ankle pumps hourly.", "Sarah Okafor, physio", 24*time.Hour)
	second := models.Announcement{ID: 8, Patient: "ray", Heard: &exHeard, Current: ex}
	turns := []reqOpts{
		{Type: TypeIntent, Intent: IntentHelp},
		{Type: TypeIntent, Intent: IntentCarePlan, Slots: topicSlot("contact", "ER_SUCCESS_MATCH")},
		{Type: TypeIntent, Intent: IntentStop},
		{Type: TypeAPLUserEvent, Arguments: []any{"tick"}, APL: true},
	}
	for _, o := range turns {
		r := newRig(t, nil)
		r.care.setPending("ray", first, second)
		out, _ := r.turn(o)
		s := ssml(out)
		i1, i2 := strings.Index(s, "your walking instruction has changed"), strings.Index(s, "your exercise instruction has changed")
		if i1 < 0 || i2 < i1 {
			t.Errorf("%s %s: announcements missing or out of order: %q", o.Type, o.Intent, s)
		}
		if !strings.HasPrefix(s, "<speak>Stop — ") {
			t.Errorf("%s %s: something was said before the announcements: %q", o.Type, o.Intent, s)
		}
	}
}

func TestAnnouncement_UnchangedWordsAreHeardSilently(t *testing.T) {
	r := newRig(t, nil)
	a := retractionWB()
	a.Current.Value = a.Heard.Value
	r.care.setPending("ray", a)
	out, raw := r.turn(reqOpts{Type: TypeAPLUserEvent, Arguments: []any{"tick"}, APL: true})
	if string(raw) != `{"version":"1.0","response":{}}` {
		t.Fatalf("tick with nothing to say: %s", raw)
	}
	_ = out
	if heardSet(r.care.heardCalls())["care://ray/weight_bearing"] != 3 {
		t.Errorf("unchanged announcement not marked heard: %v", r.care.heardCalls())
	}
}

func TestTick_EmptyWhenNothingNewElseSpeaksAndDraws(t *testing.T) {
	r := newRig(t, nil)
	_, raw := r.turn(reqOpts{Type: TypeAPLUserEvent, Arguments: []any{"tick"}, APL: true})
	if string(raw) != `{"version":"1.0","response":{}}` {
		t.Fatalf("quiet tick: %s", raw)
	}
	if len(r.care.heardCalls()) != 0 {
		t.Errorf("quiet tick marked something heard: %v", r.care.heardCalls())
	}
	r.care.setPending("ray", retractionWB())
	out, raw := r.turn(reqOpts{Type: TypeAPLUserEvent, Arguments: []any{"tick"}, APL: true})
	if !strings.HasPrefix(ssml(out), "<speak>Stop — your walking instruction has changed.") {
		t.Errorf("tick did not speak the retraction: %q", ssml(out))
	}
	if endState(raw) != "omitted" {
		t.Errorf("tick answer: shouldEndSession %s, want omitted (screen session)", endState(raw))
	}
	if d := out.Response.Directives; len(d) != 1 || d[0].Token != apl.TokenRetraction {
		t.Errorf("tick did not draw the retraction card: %+v", d)
	}
}

// The clinician's timeline: every mark says when, on which kind of device,
// and whether Ray asked or the open card showed it unasked (the tick's
// care card: its rows are told; what the tick speaks is only offered, U10).
func TestMarkHeard_SaysHowTheResponseReachedRay(t *testing.T) {
	tests := []struct {
		name string
		o    reqOpts
		want models.Hearing
	}{
		{"a launch on an Echo Show", reqOpts{APL: true}, models.Hearing{Device: models.DeviceScreen, Via: models.ViaAsked}},
		{"a launch on a voice-only Echo", reqOpts{}, models.Hearing{Device: models.DeviceVoice, Via: models.ViaAsked}},
		{"the open card's tick", reqOpts{Type: TypeAPLUserEvent, Arguments: []any{"tick"}, APL: true}, models.Hearing{Device: models.DeviceScreen, Via: models.ViaCard}},
		{"a tap on the what-changed button", reqOpts{Type: TypeAPLUserEvent, Arguments: []any{"whats_changed"}, APL: true}, models.Hearing{Device: models.DeviceScreen, Via: models.ViaAsked}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t, nil)
			if tt.want.Via == models.ViaCard {
				// A first hearing: the tick draws the care card, whose rows it tells.
				r.care.setPending("ray", models.Announcement{ID: 3, Patient: "ray", Current: ver("wound_care", 1, "Keep the dressing dry.", "Nurse Patel", 0)})
			} else {
				r.care.setPending("ray", retractionWB())
			}
			r.turn(tt.o)
			r.care.mu.Lock()
			hows := slices.Clone(r.care.hows)
			r.care.mu.Unlock()
			if len(hows) == 0 {
				t.Fatal("nothing marked heard")
			}
			for _, h := range hows {
				if h.Device != tt.want.Device || h.Via != tt.want.Via || !h.At.Equal(r.clock()) {
					t.Errorf("how = %+v, want %+v at %v", h, tt.want, r.clock())
				}
			}
		})
	}
}

func TestUserEvent_WhatsChangedButtonActsLikeTheIntent(t *testing.T) {
	for _, o := range []reqOpts{
		{Type: TypeAPLUserEvent, Arguments: []any{"whats_changed"}, APL: true},
		{Type: TypeIntent, Intent: IntentWhatsChanged, APL: true},
	} {
		r := newRig(t, nil)
		out, raw := r.turn(o)
		if !strings.Contains(plain(out), textNothingNew) || endState(raw) != "omitted" {
			t.Errorf("%s: nothing new: %q end %s", o.Type, ssml(out), endState(raw))
		}
		r.care.setPending("ray", retractionWB())
		out, _ = r.turn(o)
		if !strings.HasPrefix(ssml(out), "<speak>Stop — ") || strings.Contains(plain(out), textNothingNew) {
			t.Errorf("%s: with a change: %q", o.Type, ssml(out))
		}
	}
}

func TestCarePlan_ResolvesSlotOnlyOnSuccessMatch(t *testing.T) {
	r := newRig(t, nil)
	out, raw := r.turn(reqOpts{Type: TypeIntent, Intent: IntentCarePlan, Slots: topicSlot("exercise", "ER_SUCCESS_MATCH")})
	if !strings.Contains(ssml(out), "Your exercise instruction from Sarah Okafor, physio, yesterday: “Ankle pumps hourly") {
		t.Errorf("match: %q", ssml(out))
	}
	if endState(raw) != "true" {
		t.Errorf("voice-only answer: shouldEndSession %s, want true", endState(raw))
	}
	for _, slots := range []map[string]Slot{topicSlot("weight_bearing", "ER_SUCCESS_NO_MATCH"), nil, {SlotTopic: {Name: SlotTopic, Value: "dinner"}}} {
		out, raw := r.turn(reqOpts{Type: TypeIntent, Intent: IntentCarePlan, Slots: slots})
		if !strings.Contains(ssml(out), coreTopicsQuestion) || endState(raw) != "false" || out.Response.Reprompt == nil {
			t.Errorf("no match %v: %q end %s", slots, ssml(out), endState(raw))
		}
		if strings.Contains(ssml(out), "Partial weight-bearing") {
			t.Errorf("no match spoke a fact: %q", ssml(out))
		}
	}
}

func TestCarePlan_WithScreenOmitsShouldEndSession(t *testing.T) {
	r := newRig(t, nil)
	out, raw := r.turn(reqOpts{Type: TypeIntent, Intent: IntentCarePlan, Slots: topicSlot("weight_bearing", "ER_SUCCESS_MATCH"), APL: true})
	if endState(raw) != "omitted" || len(out.Response.Directives) != 1 {
		t.Errorf("screen answer: end %s, directives %d", endState(raw), len(out.Response.Directives))
	}
}

func TestCarePlan_StaleFactSpokenWithItsAgeFirst(t *testing.T) {
	r := newRig(t, nil)
	out, _ := r.turn(reqOpts{Type: TypeIntent, Intent: IntentCarePlan, Slots: topicSlot("anticoagulant", "ER_SUCCESS_MATCH")})
	if !strings.HasPrefix(ssml(out), "<speak>Nine days ago, Dr Mensah, GP, wrote your blood thinner instruction") {
		t.Errorf("stale answer: %q", ssml(out))
	}
}

func TestCarePlan_StripsServedStaleHeader(t *testing.T) {
	r := newRig(t, nil)
	r.care.facts["ray"][2].Value = "[STALE — last changed yesterday by Sarah Okafor, physio; say this age aloud] Ankle pumps hourly."
	out, _ := r.turn(reqOpts{Type: TypeIntent, Intent: IntentCarePlan, Slots: topicSlot("exercise", "ER_SUCCESS_MATCH")})
	s := ssml(out)
	if strings.Contains(s, "[STALE") || !strings.Contains(s, "past its review date") || !strings.Contains(s, "“Ankle pumps hourly.”") {
		t.Errorf("served stale header: %q", s)
	}
}

func TestCarePlan_UnknownDomainSaysSoAndAsks(t *testing.T) {
	r := newRig(t, nil)
	out, raw := r.turn(reqOpts{Type: TypeIntent, Intent: IntentCarePlan, Slots: topicSlot("diet", "ER_SUCCESS_MATCH")})
	if !strings.Contains(ssml(out), "There is no diet instruction in your care notes.") || endState(raw) != "false" {
		t.Errorf("unknown domain: %q %s", ssml(out), endState(raw))
	}
}

func TestHelpAndFallback_AskWithHelpCard(t *testing.T) {
	for _, intent := range []string{IntentHelp, IntentFallback, "SomethingElseIntent"} {
		r := newRig(t, nil)
		out, raw := r.turn(reqOpts{Type: TypeIntent, Intent: intent, APL: true})
		if !strings.Contains(plain(out), "what changed") || endState(raw) != "false" || out.Response.Reprompt == nil {
			t.Errorf("%s: %q end %s", intent, ssml(out), endState(raw))
		}
		if d := out.Response.Directives; len(d) != 1 || d[0].Token != apl.TokenHelp {
			t.Errorf("%s: directives %+v", intent, d)
		}
		if len(r.care.heardCalls()) != 0 {
			t.Errorf("%s marked facts heard", intent)
		}
	}
}

func TestStopCancelNavigateHome_SayGoodbyeAndEnd(t *testing.T) {
	for _, intent := range []string{IntentStop, IntentCancel, IntentNavigateHome} {
		r := newRig(t, nil)
		out, raw := r.turn(reqOpts{Type: TypeIntent, Intent: intent, APL: true})
		if ssml(out) != "<speak>Goodbye.</speak>" || endState(raw) != "true" || len(out.Response.Directives) != 0 || out.Response.Reprompt != nil {
			t.Errorf("%s: %s", intent, raw)
		}
	}
}

// V6d: when the device's patient cannot be looked up (the store locked),
// "stop", "cancel" and "go home" still say "Goodbye." and end the session,
// marking nothing; the twin, any other request, says it cannot reach the
// notes.
func TestStop_WhenThePatientCannotBeLookedUpSaysGoodbye(t *testing.T) {
	for _, o := range []reqOpts{{Type: TypeIntent, Intent: IntentStop}, {Type: TypeIntent, Intent: IntentCancel},
		{Type: TypeIntent, Intent: IntentNavigateHome}, {Type: TypeLaunch}, {Type: TypeIntent, Intent: IntentHelp}} {
		r := newRig(t, nil)
		r.care.setPending("ray", retractionWB())
		r.links.lookErr = errors.New("database is locked")
		out, raw := r.turn(o)
		want := textSorry
		if isLeaving(o.Intent) {
			want = textGoodbye
		}
		if plain(out) != want || endState(raw) != "true" {
			t.Errorf("%s %s: %s, want %q and the session ended", o.Type, o.Intent, raw, want)
		}
		if len(r.care.heardCalls()) != 0 {
			t.Errorf("%s %s marked facts heard", o.Type, o.Intent)
		}
	}
}

func TestSessionEndedAndException_AnswerEmptyAndMarkNothing(t *testing.T) {
	for _, typ := range []string{TypeSessionEnded, TypeExceptionEncounter, "CanFulfillIntentRequest"} {
		r := newRig(t, nil)
		r.care.setPending("ray", retractionWB())
		_, raw := r.turn(reqOpts{Type: typ})
		if string(raw) != `{"version":"1.0","response":{}}` {
			t.Errorf("%s: %s", typ, raw)
		}
		if len(r.care.heardCalls()) != 0 || r.care.calls.Load() != 0 {
			t.Errorf("%s touched the care source", typ)
		}
	}
}

func TestRepeat_RepeatsTheLastAnswerInTheSession(t *testing.T) {
	r := newRig(t, nil)
	first, _ := r.turn(reqOpts{Type: TypeIntent, Intent: IntentCarePlan, Slots: topicSlot("contact", "ER_SUCCESS_MATCH"), Session: "sA"})
	again, _ := r.turn(reqOpts{Type: TypeIntent, Intent: IntentRepeat, Session: "sA"})
	if ssml(first) != ssml(again) {
		t.Errorf("repeat: %q, want %q", ssml(again), ssml(first))
	}
	other, raw := r.turn(reqOpts{Type: TypeIntent, Intent: IntentRepeat, Session: "sB"})
	if !strings.Contains(plain(other), textNoRepeat) || endState(raw) != "false" {
		t.Errorf("repeat in a new session: %q", ssml(other))
	}
}

func TestRepeat_DoesNotRepeatAnInstructionWithdrawnSince(t *testing.T) {
	r := newRig(t, nil)
	r.turn(reqOpts{Type: TypeIntent, Intent: IntentCarePlan, Slots: topicSlot("weight_bearing", "ER_SUCCESS_MATCH"), Session: "sA"})
	r.care.setPending("ray", retractionWB())
	out, _ := r.turn(reqOpts{Type: TypeIntent, Intent: IntentRepeat, Session: "sA"})
	s := ssml(out)
	if !strings.HasPrefix(s, "<speak>Stop — ") || strings.Count(s, "Partial weight-bearing") != 1 {
		t.Errorf("repeat after a revision must speak the retraction and not the old answer again: %q", s)
	}
}

// TestLongAnswer_CutAtSentenceAndRestHeardOnlyWithMore proves a 9,500-char
// answer is cut to ≤ 8,000 characters at a sentence boundary, is not marked
// heard until its rest is spoken with "more".
func TestLongAnswer_CutAtSentenceAndRestHeardOnlyWithMore(t *testing.T) {
	r := newRig(t, nil)
	var b strings.Builder
	for i := 0; b.Len() < 9500; i++ {
		b.WriteString("Walk to the door and back with the frame, slowly & carefully. ")
	}
	long := strings.TrimSpace(b.String())
	if len(long) < 9500 {
		t.Fatal("fixture too short")
	}
	r.care.facts["ray"][0].Value = long // weight_bearing
	out, raw := r.turn(reqOpts{Type: TypeIntent, Intent: IntentCarePlan, Slots: topicSlot("weight_bearing", "ER_SUCCESS_MATCH"), Session: "sL"})
	s := ssml(out)
	if n := speechLen(s); n > MaxSSMLChars {
		t.Fatalf("speech of %d chars, over %d", n, MaxSSMLChars)
	}
	if !strings.HasSuffix(s, "carefully. "+MoreCue+"</speak>") {
		t.Errorf("not cut at a sentence boundary with the cue: …%q", s[len(s)-80:])
	}
	if endState(raw) != "false" || out.Response.Reprompt == nil {
		t.Errorf("cut answer must ask: %s", endState(raw))
	}
	if _, ok := heardSet(r.care.heardCalls())["care://ray/weight_bearing"]; ok {
		t.Fatal("a cut fact was marked heard before its end was spoken")
	}
	rest, _ := r.turn(reqOpts{Type: TypeIntent, Intent: IntentMore, Session: "sL"})
	spoken := strings.TrimSuffix(strings.TrimPrefix(s, "<speak>"), " "+MoreCue+"</speak>") + " " +
		strings.TrimSuffix(strings.TrimPrefix(ssml(rest), "<speak>"), "</speak>")
	if !strings.Contains(spoken, strings.ReplaceAll(long, "&", "&amp;")) {
		t.Errorf("first part + more do not make the whole answer")
	}
	if heardSet(r.care.heardCalls())["care://ray/weight_bearing"] != 2 {
		t.Errorf("after more, the fact is heard: %v", r.care.heardCalls())
	}
	none, raw := r.turn(reqOpts{Type: TypeIntent, Intent: IntentMore, Session: "sL"})
	if !strings.Contains(plain(none), textNothingMore) || endState(raw) != "false" {
		t.Errorf("more with nothing left: %q", ssml(none))
	}
}

func TestSSML_DataFullOfXMLSpecialsIsWellFormed(t *testing.T) {
	r := newRig(t, nil)
	evil := `Take <b>2</b> & "don't" stop; x > y < z ]]> <!-- --> <break time="10s"/> &amp; 'quoted'`
	r.care.facts["ray"][0].Value = evil
	r.care.facts["ray"][0].AuthorLabel = `Dr <O'Brien> & "Partners"`
	r.care.setPending("ray", models.Announcement{ID: 1, Patient: "ray", Current: ver("exercise", 2, evil, `A & B <c>`, time.Minute)})
	for _, o := range []reqOpts{{}, {Type: TypeIntent, Intent: IntentCarePlan, Slots: topicSlot("weight_bearing", "ER_SUCCESS_MATCH"), Session: "x"}} {
		out, _ := r.turn(o)
		s := ssml(out)
		dec := xml.NewDecoder(strings.NewReader(s))
		var text strings.Builder
		elems := 0
		for {
			tok, err := dec.Token()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("SSML not well-formed: %v\n%s", err, s)
			}
			switch v := tok.(type) {
			case xml.StartElement:
				elems++
				if v.Name.Local != "speak" && v.Name.Local != "break" {
					t.Errorf("data became an element <%s>", v.Name.Local)
				}
			case xml.CharData:
				text.Write(v)
			}
		}
		if !strings.Contains(text.String(), evil) {
			t.Errorf("the value does not read back as written: %q", text.String())
		}
		r.care.setPending("ray")
	}
}

func TestResponse_StaysUnder120KBByDroppingTheCard(t *testing.T) {
	r := newRig(t, nil)
	var facts []models.Version
	for i := 0; i < 400; i++ {
		facts = append(facts, ver("note_"+strings.Repeat("x", 3)+string(rune('a'+i%26))+strings.Repeat("y", i%7)+"_"+string(rune('a'+i/26)), 1, strings.Repeat("<&> ", 200), "Dr X", time.Hour))
	}
	r.care.facts["ray"] = facts
	out, raw := r.turn(reqOpts{APL: true})
	if len(raw) > MaxResponseBytes {
		t.Fatalf("response of %d bytes", len(raw))
	}
	if len(out.Response.Directives) != 0 {
		t.Errorf("an oversized card was kept")
	}
	if out.Response.OutputSpeech == nil {
		t.Errorf("speech lost with the card")
	}
}

func TestUnlinkedDevice_HearsOnlyHowToLink(t *testing.T) {
	r := newRig(t, func(c *Config) { c.DefaultPatient = "" })
	r.care.setPending("ray", retractionWB())
	for _, o := range []reqOpts{{}, {Type: TypeIntent, Intent: IntentCarePlan, Slots: topicSlot("weight_bearing", "ER_SUCCESS_MATCH")}, {Type: TypeIntent, Intent: IntentHelp}} {
		out, raw := r.turn(o)
		if ssml(out) != "<speak>"+EscapeSSML(textUnlinked)+"</speak>" || endState(raw) != "false" {
			t.Errorf("unlinked %s %s: %s", o.Type, o.Intent, raw)
		}
	}
	_, raw := r.turn(reqOpts{Type: TypeAPLUserEvent, Arguments: []any{"tick"}, APL: true})
	if string(raw) != `{"version":"1.0","response":{}}` {
		t.Errorf("unlinked tick: %s", raw)
	}
	if r.care.calls.Load() != 0 || len(r.care.heardCalls()) != 0 {
		t.Error("an unlinked device reached the care source")
	}
}

func TestLinkDevice_RedeemsSixDigitCodeThenServesThePatient(t *testing.T) {
	r := newRig(t, func(c *Config) { c.DefaultPatient = "" })
	r.links.codes = map[string]string{"482913": "ray"}
	code := func(v string) map[string]Slot { return map[string]Slot{SlotCode: {Name: SlotCode, Value: v}} }
	// Wrong shapes never reach Links.
	for _, v := range []string{"", "?", "12345", "1234567", "012345", "12a456"} {
		out, raw := r.turn(reqOpts{Type: TypeIntent, Intent: IntentLinkDevice, Slots: code(v)})
		if endState(raw) != "false" || strings.Contains(ssml(out), "linked to your care plan") {
			t.Errorf("code %q: %s", v, raw)
		}
	}
	if len(r.links.redeems) != 0 {
		t.Fatalf("malformed codes reached Links: %v", r.links.redeems)
	}
	out, raw := r.turn(reqOpts{Type: TypeIntent, Intent: IntentLinkDevice, Slots: code("111111")})
	if !strings.Contains(plain(out), "didn't work") || endState(raw) != "false" {
		t.Errorf("wrong code: %s", raw)
	}
	out, _ = r.turn(reqOpts{Type: TypeIntent, Intent: IntentLinkDevice, Slots: code("482913")})
	s := ssml(out)
	if !strings.HasPrefix(s, "<speak>"+textLinked) || !strings.Contains(s, "Your walking instruction from") {
		t.Errorf("linked: %q", s)
	}
	if got := r.links.redeems[len(r.links.redeems)-1]; got != testUserID+"|https://api.eu.amazonalexa.com|482913" {
		t.Errorf("redeem call %q", got)
	}
	out, _ = r.turn(reqOpts{})
	if !strings.Contains(ssml(out), "Your walking instruction from") {
		t.Errorf("after linking, launch: %q", ssml(out))
	}
}

func TestLinkDevice_BlockedUserIsToldToWait(t *testing.T) {
	r := newRig(t, nil)
	r.links.blocked = true
	out, raw := r.turn(reqOpts{Type: TypeIntent, Intent: IntentLinkDevice, Slots: map[string]Slot{SlotCode: {Name: SlotCode, Value: "482913"}}})
	if !strings.Contains(ssml(out), "fifteen minutes") || endState(raw) != "true" {
		t.Errorf("blocked: %s", raw)
	}
}

func TestLinkDevice_GlobalPauseSaysHowLongItLasts(t *testing.T) {
	for _, tt := range []struct {
		wait time.Duration
		want string
	}{
		{4*time.Minute - 10*time.Second, "again in four minutes"},
		{30 * time.Second, "again in one minute."},
		{10 * time.Minute, "again in ten minutes"},
	} {
		r := newRig(t, nil)
		r.links.paused = t0.Add(tt.wait)
		out, raw := r.turn(reqOpts{Type: TypeIntent, Intent: IntentLinkDevice, Slots: map[string]Slot{SlotCode: {Name: SlotCode, Value: "482913"}}})
		if s := ssml(out); !strings.Contains(s, "paused for everyone") || !strings.Contains(s, tt.want) || strings.Contains(s, "fifteen") || endState(raw) != "true" {
			t.Errorf("paused for %v: %s; want %q", tt.wait, raw, tt.want)
		}
	}
	// Twin: one user's own block still says fifteen minutes, not a pause.
	r := newRig(t, nil)
	r.links.blocked = true
	out, _ := r.turn(reqOpts{Type: TypeIntent, Intent: IntentLinkDevice, Slots: map[string]Slot{SlotCode: {Name: SlotCode, Value: "482913"}}})
	if s := ssml(out); strings.Contains(s, "paused") || !strings.Contains(s, "fifteen minutes") {
		t.Errorf("a user's block: %q", s)
	}
}

func TestCareSourceFailure_SaysSorryAndMarksNothing(t *testing.T) {
	r := newRig(t, nil)
	r.care.failFact = errBoom
	out, raw := r.turn(reqOpts{})
	if !strings.Contains(plain(out), "can't reach your care notes") || endState(raw) != "true" {
		t.Errorf("facts failure: %s", raw)
	}
	if len(r.care.heardCalls()) != 0 {
		t.Errorf("marked heard on failure")
	}
}

func TestAssistantFactFromCareSource_IsNeverSpoken(t *testing.T) {
	r := newRig(t, nil)
	risk := ver("risk", 1, "High fall risk; over-reports exercise.", "Sarah Okafor, physio", time.Hour)
	risk.Audience = models.AudienceAssistant
	r.care.facts["ray"] = append(r.care.facts["ray"], risk)
	r.care.setPending("ray", models.Announcement{ID: 9, Patient: "ray", Current: risk})
	for _, o := range []reqOpts{{APL: true}, {Type: TypeIntent, Intent: IntentCarePlan, Slots: topicSlot("risk", "ER_SUCCESS_MATCH"), APL: true}} {
		_, raw := r.turn(o)
		if strings.Contains(string(raw), "fall risk") {
			t.Errorf("assistant-only content reached the response: %s", raw)
		}
	}
	for _, c := range r.care.heardCalls() {
		if strings.Contains(c.URI, "risk") {
			t.Errorf("assistant fact marked heard: %v", c)
		}
	}
}

// TestConcurrentTurns_SpeakOneAnnouncementOnce races ticks and a launch for
// one patient: the pending retraction is spoken by exactly one response.
func TestConcurrentTurns_SpeakOneAnnouncementOnce(t *testing.T) {
	r := newRig(t, nil)
	r.care.delay = 20 * time.Millisecond
	r.care.setPending("ray", retractionWB())
	const n = 12
	got := make(chan string, n)
	for i := 0; i < n; i++ {
		o := reqOpts{Type: TypeAPLUserEvent, Arguments: []any{"tick"}, APL: true}
		if i == 0 {
			o = reqOpts{}
		}
		go func() {
			code, b := r.post(envelope(o), testCertURL, "")
			if code != 200 {
				got <- "status error"
				return
			}
			got <- string(b)
		}()
	}
	spoken := 0
	for i := 0; i < n; i++ {
		if strings.Contains(<-got, "Stop — your walking instruction has changed") {
			spoken++
		}
	}
	if spoken != 1 {
		t.Fatalf("the retraction was spoken %d times, want once", spoken)
	}
}

// P-24 on a screen: Ray read his exercises on the care card, so when the
// physio revises them he hears "Stop — … I told you: …". Twin: on a
// voice-only device the exercises were never said, and the revision is a
// first hearing.
func TestCard_AFactReadOnTheScreenIsWithdrawnWhenRevised(t *testing.T) {
	for _, screen := range []bool{true, false} {
		t.Run(map[bool]string{true: "screen", false: "voice only"}[screen], func(t *testing.T) {
			r := newRig(t, nil)
			r.turn(reqOpts{APL: screen, Session: "s1"})
			r.care.revise(ver("exercise", 2, "Ankle pumps hourly only.", "Sarah Okafor, physio", 0), 9)
			out, _ := r.turn(reqOpts{APL: screen, Session: "s2"})
			s := plain(out)
			retraction := "Stop — your exercise instruction has changed. I told you: “Ankle pumps hourly; heel slides ten times, twice daily.” Sarah Okafor, physio, changed it just now: “Ankle pumps hourly only.”"
			if screen && !strings.HasPrefix(s, retraction) {
				t.Errorf("after the card showed it: %q, want it to open %q", s, retraction)
			}
			if !screen && (strings.Contains(s, "Stop —") || !strings.HasPrefix(s, "Your exercise instruction from Sarah Okafor, physio, just now: “Ankle pumps hourly only.”")) {
				t.Errorf("voice only: %q, want a first hearing", s)
			}
		})
	}
}

// A care card too large to send (the response over MaxResponseBytes loses
// its APL directive) showed nothing, so it told nothing; what was spoken
// is still told.
func TestCard_ACardNotSentTellsNothing(t *testing.T) {
	r := newRig(t, nil)
	for i := range 250 { // rows shown whole (at most MaxCardTextRunes), so only the size keeps them untold
		r.care.facts["ray"] = append(r.care.facts["ray"], ver(fmt.Sprintf("note_%03d", i), 1, strings.Repeat("Keep the leg raised. ", 28), "Nurse Patel", time.Hour))
	}
	out, _ := r.turn(reqOpts{APL: true})
	if len(out.Response.Directives) != 0 {
		t.Fatalf("the card was sent: the test needs a larger one")
	}
	heard := heardSet(r.care.heardCalls())
	if want := map[string]int{"care://ray/weight_bearing": 2, "care://ray/anticoagulant": 1}; !maps.Equal(heard, want) {
		t.Errorf("marked %v, want only what was spoken %v", heard, want)
	}
}

// "What changed?" right after a retraction — asked, or the card's button —
// says again the changes told in this session, from their current
// versions, never "nothing has changed". Twins: in a new session nothing
// has changed since he last heard his notes; a change revised since is
// announced anew instead.
func TestWhatsChanged_AfterARetractionInTheSessionSaysItAgain(t *testing.T) {
	recap := "Your walking instruction changed just now: I told you “" + wbV2Text + "”; Sarah Okafor, physio, changed it to “" + wbV3Text + "”"
	for name, ask := range map[string]reqOpts{
		"asked":      {Type: TypeIntent, Intent: IntentWhatsChanged},
		"the button": {Type: TypeAPLUserEvent, Arguments: []any{apl.ArgWhatsChanged}, APL: true},
	} {
		t.Run(name, func(t *testing.T) {
			r := newRig(t, nil)
			r.care.setPending("ray", retractionWB())
			r.care.facts["ray"][0] = retractionWB().Current
			if out, _ := r.turn(reqOpts{Session: "sW", APL: ask.APL}); !strings.HasPrefix(plain(out), "Stop — your walking instruction has changed.") {
				t.Fatalf("launch: %q", plain(out))
			}
			ask.Session = "sW"
			out, _ := r.turn(ask)
			if s := plain(out); !strings.HasPrefix(s, recap) || strings.Contains(s, "Stop —") || strings.Contains(s, textNothingNew) {
				t.Errorf("what changed = %q, want it to open %q", s, recap)
			}
			ask.Session = "sX"
			if out, _ := r.turn(ask); plain(out) != textNothingNew {
				t.Errorf("a new session: %q, want %q", plain(out), textNothingNew)
			}
		})
	}
	t.Run("revised since", func(t *testing.T) {
		r := newRig(t, nil)
		r.care.setPending("ray", retractionWB())
		r.care.facts["ray"][0] = retractionWB().Current
		r.turn(reqOpts{Session: "sW"})
		r.care.MarkHeard(context.Background(), "ray", retractionWB().URI(), 3, models.Hearing{})
		r.care.revise(ver("weight_bearing", 4, "Walk with one crutch.", "Sarah Okafor, physio", 0), 11)
		out, _ := r.turn(reqOpts{Type: TypeIntent, Intent: IntentWhatsChanged, Session: "sW"})
		if s := plain(out); !strings.HasPrefix(s, "Stop — your walking instruction has changed. I told you: “"+wbV3Text+"”") || strings.Contains(s, "changed it to “"+wbV3Text) {
			t.Errorf("what changed after a new revision = %q, want the new retraction only", s)
		}
	})
	t.Run("a first hearing", func(t *testing.T) {
		r := newRig(t, nil)
		v := ver("wound_care", 1, "Keep the dressing dry.", "Nurse Patel", 10*time.Minute)
		r.care.facts["ray"] = append(r.care.facts["ray"], v)
		r.care.setPending("ray", models.Announcement{ID: 3, Patient: "ray", Current: v})
		r.turn(reqOpts{Session: "sW"})
		out, _ := r.turn(reqOpts{Type: TypeIntent, Intent: IntentWhatsChanged, Session: "sW"})
		if s := plain(out); s != "Your wound care instruction is new: Nurse Patel wrote it ten minutes ago: “Keep the dressing dry.”" {
			t.Errorf("what changed = %q", s)
		}
	})
}

// The twin of TestConcurrentTurns_SpeakOneAnnouncementOnce: turns of one
// patient that owe nothing do not wait for each other (no turn lock), so
// their care source can confirm them together — here eight launches are
// all inside Turn at once, and each is answered.
func TestConcurrentTurns_OwingNothingRunTogether(t *testing.T) {
	r := newRig(t, nil)
	const n = 8
	r.care.together = n
	got := make(chan int, n)
	for range n {
		go func() {
			code, _ := r.post(envelope(reqOpts{}), testCertURL, "")
			got <- code
		}()
	}
	for range n {
		if code := <-got; code != 200 {
			t.Fatalf("status %d", code)
		}
	}
	if m := r.care.overlap.Load(); m != n {
		t.Fatalf("at most %d of %d launches were inside Turn at once: turns owing nothing were serialized", m, n)
	}
}

// F15, T15: a care-card row the card shows cut (apl.Cut: its end is not on
// the screen) is marked cut on the card and not counted as told by it, but
// it is offered (told, at the version drawn): he may have read its
// beginning, so a later revision withdraws it. Twin: the short rows beside
// it are whole on the card and told.
func TestCard_ARowShownCutIsMarkedSoNotToldButOffered(t *testing.T) {
	r := newRig(t, nil)
	long := strings.Repeat("Take one tablet each morning with food. ", 15) + "Do NOT take it with ibuprofen."
	r.care.facts["ray"][2] = ver("exercise", 1, long, "Sarah Okafor, physio", time.Hour)
	out, raw := r.turn(reqOpts{APL: true})
	if len(out.Response.Directives) != 1 || out.Response.Directives[0].Token != apl.TokenCare {
		t.Fatalf("directives %+v, want the care card", out.Response.Directives)
	}
	if strings.Contains(string(raw), "ibuprofen") {
		t.Fatalf("the test needs the card to cut the long row")
	}
	if !strings.Contains(string(raw), `"cut":true,"cutNote":"`+cardCutNote("exercise")+`"`) || strings.Count(string(raw), `"cut":true`) != 1 {
		t.Errorf("the cut row is not marked cut, or a whole row is: %s", raw)
	}
	heard := heardSet(r.care.heardCalls())
	want := map[string]int{"care://ray/weight_bearing": 2, "care://ray/anticoagulant": 1, "care://ray/contact": 1}
	if !maps.Equal(heard, want) {
		t.Errorf("marked %v, want the whole rows %v and not the cut one", heard, want)
	}
	if offers := r.care.toldOffers(); !slices.Contains(offers, "care://ray/exercise v1") {
		t.Errorf("told offers %v: the cut row (care://ray/exercise v1) is not offered", offers)
	}
}

// T15's twin in the other direction: a care card too large to send (the
// response over MaxResponseBytes loses its APL directive) offers none of
// the rows it would have shown cut.
func TestCard_ACutRowOfACardNotSentIsNotOffered(t *testing.T) {
	r := newRig(t, nil)
	long := strings.Repeat("Take one tablet each morning with food. ", 15) + "Do NOT take it with ibuprofen."
	r.care.facts["ray"][2] = ver("exercise", 1, long, "Sarah Okafor, physio", time.Hour)
	for i := range 250 {
		r.care.facts["ray"] = append(r.care.facts["ray"], ver(fmt.Sprintf("note_%03d", i), 1, strings.Repeat("Keep the leg raised. ", 28), "Nurse Patel", time.Hour))
	}
	out, _ := r.turn(reqOpts{APL: true})
	if len(out.Response.Directives) != 0 {
		t.Fatalf("the card was sent: the test needs a larger one")
	}
	for _, o := range r.care.toldOffers() {
		if strings.HasPrefix(o, "care://ray/exercise") || strings.HasPrefix(o, "care://ray/note_") {
			t.Errorf("a row of a card never sent was offered: %v", o)
		}
	}
}
