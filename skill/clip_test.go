package skill

import (
	"strings"
	"testing"
	"time"

	"github.com/unsay/unsay/models"
)

const clipURL = "https://care.example.org/audio/opaque-token"

// clipVersion is the exercise count as the speech principal holds it: what
// the clip is and the signed URL read with it over MCP.
func clipVersion(n int, value, url string, expires time.Time, sha string) models.Version {
	v := ver("exercise_clip", n, value, "Sarah Okafor, physio", 20*time.Hour)
	v.Audio = &models.Audio{MIMEType: models.AudioMPEG, Size: 54000, Duration: 9 * time.Second, SHA256: sha,
		AlexaPlayable: true, URL: url, URLExpires: expires}
	return v
}

func withClip(r *rig, v models.Version) {
	r.care.mu.Lock()
	r.care.facts["ray"] = append(r.care.facts["ray"], v)
	r.care.mu.Unlock()
}

func ssmlOf(out ResponseEnvelope) string {
	if out.Response.OutputSpeech == nil {
		return ""
	}
	return out.Response.OutputSpeech.SSML
}

func TestPlayClip_PlaysTheCountAtItsHTTPSURLAfterItsDescription(t *testing.T) {
	r := newRig(t, nil)
	withClip(r, clipVersion(2, "A slow count from one to ten.", clipURL, t0.Add(5*time.Minute), "aa"))
	out, _ := r.turn(reqOpts{Type: TypeIntent, Intent: IntentPlayClip})
	ssml := ssmlOf(out)
	want := `Your exercise count recording from Sarah Okafor, physio, 20 hours ago: “A slow count from one to ten.” Here it is.<audio src="` + clipURL + `"/>`
	if !strings.Contains(ssml, want) {
		t.Fatalf("SSML = %s\nwant it to contain %s", ssml, want)
	}
	if err := checkSSML(ssml); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, h := range r.care.heardCalls() {
		found = found || h.URI == "care://ray/exercise_clip" && h.Version == 2
	}
	if !found {
		t.Fatalf("the clip played was not marked heard: %v", r.care.heardCalls())
	}
}

// The twins of playing: a URL that is not https (loopback development), or
// has expired, is described and never put in <audio>.
func TestPlayClip_DescribesAndNeverPlaysAClipWithoutALiveHTTPSURL(t *testing.T) {
	for _, tc := range []struct {
		name string
		url  string
		exp  time.Duration
	}{{"http on loopback", "http://127.0.0.1:8080/audio/opaque", 5 * time.Minute}, {"expired", clipURL, -time.Second}, {"no URL", "", 0}} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, nil)
			withClip(r, clipVersion(2, "A slow count from one to ten.", tc.url, t0.Add(tc.exp), "aa"))
			out, _ := r.turn(reqOpts{Type: TypeIntent, Intent: IntentPlayClip})
			ssml := ssmlOf(out)
			if strings.Contains(ssml, "<audio") || !strings.Contains(ssml, "A slow count from one to ten.") || !strings.Contains(ssml, EscapeSSML(textClipCannot)) {
				t.Fatalf("SSML = %s; want the description and %q, no <audio>", ssml, textClipCannot)
			}
		})
	}
}

func TestPlayClip_NoClipSaysSo(t *testing.T) {
	r := newRig(t, nil)
	out, _ := r.turn(reqOpts{Type: TypeIntent, Intent: IntentPlayClip})
	if ssml := ssmlOf(out); !strings.Contains(ssml, textNoClip) || strings.Contains(ssml, "<audio") {
		t.Fatalf("SSML = %s", ssml)
	}
}

// A clip the physio re-recorded is retracted like text, first, then the
// new one is played — even under the same words.
func TestPlayClip_ARevisedClipIsRetractedFirstThenTheNewOneIsPlayed(t *testing.T) {
	r := newRig(t, nil)
	cur := clipVersion(3, "A slow count from one to ten.", clipURL, t0.Add(5*time.Minute), "bb")
	cur.WrittenAt = t0.Add(-10 * time.Minute)
	heard := clipVersion(2, "A slow count from one to ten.", "", time.Time{}, "aa")
	withClip(r, cur)
	r.care.setPending("ray", models.Announcement{ID: 9, Patient: "ray", Heard: &heard, Current: cur})
	out, _ := r.turn(reqOpts{Type: TypeIntent, Intent: IntentCarePlan, Slots: topicSlot("weight_bearing", "ER_SUCCESS_MATCH")})
	ssml := ssmlOf(out)
	stop := strings.Index(ssml, "Stop — your exercise count has changed.")
	audio := strings.Index(ssml, `Here is the new one.<audio src="`+clipURL+`"/>`)
	answer := strings.Index(ssml, "walking instruction")
	if stop < 0 || audio < stop || answer < audio {
		t.Fatalf("SSML = %s\nwant the clip's retraction, then the new clip, then the answer", ssml)
	}
	if !strings.Contains(ssml, "Sarah Okafor, physio, recorded a new one ten minutes ago") {
		t.Fatalf("the retraction does not name its author and age: %s", ssml)
	}
	if err := checkSSML(ssml); err != nil {
		t.Fatal(err)
	}
	// The same sound and the same words: nothing to retract (the twin).
	same := heard
	same.Audio = &models.Audio{MIMEType: models.AudioMPEG, SHA256: "bb"}
	if _, err := (models.Announcement{Heard: &same, Current: cur}).Render(t0); err != models.ErrUnchanged {
		t.Fatalf("same words, same sound: %v, want ErrUnchanged", err)
	}
}

func TestCheckSSML_AudioMustBeAnEmptyHTTPSElement(t *testing.T) {
	for _, tc := range []struct {
		ssml string
		ok   bool
	}{
		{`<speak>Here it is.<audio src="https://a.example/x"/></speak>`, true},
		{`<speak><audio src="http://a.example/x"/></speak>`, false},
		{`<speak><audio src="https://a.example/x">spoken instead</audio></speak>`, false},
		{`<speak><audio src="https://a.example/x"><break time="1s"/></audio></speak>`, false},
		{`<speak><audio href="https://a.example/x"/></speak>`, false},
		{`<speak>` + strings.Repeat(`<audio src="https://a.example/x"/>`, 6) + `</speak>`, false},
		{`<speak>` + strings.Repeat(`<audio src="https://a.example/x"/>`, 5) + `</speak>`, true},
	} {
		if err := checkSSML(tc.ssml); (err == nil) != tc.ok {
			t.Errorf("checkSSML(%s) = %v, want ok=%v", tc.ssml, err, tc.ok)
		}
	}
}

// On an Echo Show the card plays it too: its play button (drawn only when
// the clip can be played) sends play_clip, answered with the clip.
func TestPlayClip_TheEchoShowCardHasAPlayButtonThatPlaysIt(t *testing.T) {
	r := newRig(t, nil)
	withClip(r, clipVersion(2, "A slow count from one to ten.", clipURL, t0.Add(5*time.Minute), "aa"))
	out, raw := r.turn(reqOpts{Type: TypeLaunch, APL: true})
	if !strings.Contains(string(raw), `"clipButton":"Play the exercise count"`) {
		t.Fatalf("the care card has no play button: %s", raw)
	}
	_ = out
	out, _ = r.turn(reqOpts{Type: TypeAPLUserEvent, APL: true, Arguments: []any{"play_clip"}})
	if ssml := ssmlOf(out); !strings.Contains(ssml, `<audio src="`+clipURL+`"/>`) {
		t.Fatalf("play_clip: %s", ssml)
	}
	// The twin: no playable clip, no button.
	r2 := newRig(t, nil)
	withClip(r2, clipVersion(2, "A slow count from one to ten.", "http://127.0.0.1:8080/audio/x", t0.Add(5*time.Minute), "aa"))
	if _, raw := r2.turn(reqOpts{Type: TypeLaunch, APL: true}); !strings.Contains(string(raw), `"clipButton":""`) {
		t.Fatalf("a clip that cannot play has a button: %s", raw)
	}
}

// The exercise topic's follow-up: the instruction, then how to hear the
// count — only when there is one he can hear now (the twin has none).
func TestCarePlan_TheExercisesOfferTheirRecordedCount(t *testing.T) {
	r := newRig(t, nil)
	withClip(r, clipVersion(2, "A slow count from one to ten.", clipURL, t0.Add(5*time.Minute), "aa"))
	out, _ := r.turn(reqOpts{Type: TypeIntent, Intent: IntentCarePlan, Slots: topicSlot("exercise", "ER_SUCCESS_MATCH")})
	if ssml := ssmlOf(out); !strings.Contains(ssml, "Ankle pumps") || !strings.Contains(ssml, "Say: play my exercise count, to hear the count Sarah Okafor, physio, recorded.") {
		t.Fatalf("SSML = %s", ssml)
	}
	if out.Response.ShouldEndSession == nil || *out.Response.ShouldEndSession {
		t.Fatal("the follow-up question must keep the microphone open")
	}
	plain := newRig(t, nil)
	out, _ = plain.turn(reqOpts{Type: TypeIntent, Intent: IntentCarePlan, Slots: topicSlot("exercise", "ER_SUCCESS_MATCH")})
	if strings.Contains(ssmlOf(out), "play my exercise count") {
		t.Fatalf("offered a count that does not exist: %s", ssmlOf(out))
	}
}

// Alexa plays at most 240 s of audio in one response: clips past it are
// described instead (the first is played: the twin).
func TestLimitClips_DescribesClipsPastAlexasLimits(t *testing.T) {
	long := clipVersion(2, "A long count.", clipURL, t0.Add(time.Minute), "aa")
	long.Audio.Duration = 200 * time.Second
	seg := func() segment { return segment{Text: textClipHere, Audio: clipURL, clip: &long} }
	out := limitClips([]segment{seg(), seg()})
	if out[0].Audio != clipURL || out[1].Audio != "" || out[1].Text != textClipCannot {
		t.Fatalf("limitClips = %+v", out)
	}
	short := clipVersion(2, "A count.", clipURL, t0.Add(time.Minute), "aa")
	var many []segment
	for range 6 {
		many = append(many, segment{Text: textClipHere, Audio: clipURL, clip: &short})
	}
	if out := limitClips(many); out[4].Audio == "" || out[5].Audio != "" {
		t.Fatalf("six 9 s clips: the sixth must be described, the fifth played")
	}
}
