package models

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func clipVersion(n int, value string, bytes []byte) Version {
	v := readVersion(n, value, time.Time{})
	v.Domain = "exercise_clip"
	v.Audio = &Audio{MIMEType: AudioMPEG, Size: len(bytes), Duration: 9 * time.Second, SHA256: sha256Hex(bytes), AlexaPlayable: true, Data: bytes}
	return v
}

// The audio keys round-trip through JSON; each refusal has its twin.
func TestDecodeReadAudio_RoundTripsAndRefusesWhatIsNotTheSameRecord(t *testing.T) {
	clip := []byte("frames of a count")
	v := clipVersion(2, "A slow count.", clip)
	u, _ := ParseURI("care://ray/exercise_clip")
	a := *v.Audio
	a.URL, a.URLExpires = "https://care.example.org/audio/tok", demoNow.Add(5*time.Minute)
	meta := jsonRoundTrip(t, AudioMeta(NewReadMeta(v, 2, demoNow), a))
	got, err := DecodeReadAudio(u, v, AudioMPEG, clip, meta)
	if err != nil {
		t.Fatal(err)
	}
	if got.SHA256 != a.SHA256 || got.Duration != 9*time.Second || !got.AlexaPlayable || got.URL != a.URL || !got.URLExpires.Equal(a.URLExpires) || string(got.Data) != string(clip) {
		t.Fatalf("DecodeReadAudio = %+v", got)
	}
	other := clipVersion(3, "A slow count.", clip)
	for _, tc := range []struct {
		name string
		v    Version
		typ  string
		blob []byte
		meta map[string]any
	}{
		{"another version's text", other, AudioMPEG, clip, meta},
		{"a flipped byte", v, AudioMPEG, []byte("frames of a cound"), meta},
		{"an unknown type", v, "audio/ogg", clip, meta},
		{"no bytes", v, AudioMPEG, nil, meta},
		{"a URL that is not http(s)", v, AudioMPEG, clip, with(meta, MetaAudioURL, "javascript:alert(1)")},
		{"a URL without its expiry", v, AudioMPEG, clip, with(meta, MetaAudioURLExpires, nil)},
		{"no duration", v, AudioMPEG, clip, with(meta, MetaAudioDuration, nil)},
	} {
		if _, err := DecodeReadAudio(u, tc.v, tc.typ, tc.blob, tc.meta); !errors.Is(err, ErrReadFormat) {
			t.Errorf("%s: %v, want ErrReadFormat", tc.name, err)
		}
	}
	// No URL at all is fine: an assistant-only or superseded clip.
	plain := jsonRoundTrip(t, AudioMeta(NewReadMeta(v, 2, demoNow), *v.Audio))
	if got, err := DecodeReadAudio(u, v, AudioMPEG, clip, plain); err != nil || got.URL != "" {
		t.Fatalf("without a URL: %+v, %v", got, err)
	}
}

func with(m map[string]any, k string, v any) map[string]any {
	out := map[string]any{}
	for key, val := range m {
		out[key] = val
	}
	if v == nil {
		delete(out, k)
	} else {
		out[k] = v
	}
	return out
}

func TestRenderRetraction_AClipIsWithdrawnByItsSoundAsWellAsItsWords(t *testing.T) {
	heard := clipVersion(2, "A slow count from one to ten.", []byte("first recording"))
	cur := clipVersion(3, "A slow count from one to ten.", []byte("second recording"))
	cur.WrittenAt = demoNow.Add(-10 * time.Minute)
	s, err := RenderRetraction(heard, cur, demoNow)
	if err != nil {
		t.Fatal(err)
	}
	want := "Stop — your exercise count has changed. I told you: “A slow count from one to ten.” Sarah Okafor, physio, recorded a new one ten minutes ago: “A slow count from one to ten.”"
	if s != want {
		t.Fatalf("RenderRetraction =\n%s\nwant\n%s", s, want)
	}
	if _, err := RenderRetraction(heard, clipVersion(3, heard.Value, []byte("first recording")), demoNow); !errors.Is(err, ErrUnchanged) {
		t.Fatalf("the same words and sound: %v, want ErrUnchanged", err)
	}
	// A text version he heard, replaced by a clip: withdrawn too.
	text := heard
	text.Audio = nil
	if _, err := RenderRetraction(text, cur, demoNow); err != nil {
		t.Fatalf("text → clip: %v", err)
	}
	stale := cur
	stale.StaleAfter = demoNow.Add(-time.Minute)
	if s, _ := RenderRetraction(heard, stale, demoNow); !strings.HasPrefix(s, "Stop") || !strings.Contains(s, PastReviewSentence) || !strings.Contains(s, "Ten minutes ago, Sarah Okafor, physio, recorded a new one") {
		t.Fatalf("stale clip retraction: %s", s)
	}
	again, _ := renderRetraction(heard, cur, cur, demoNow, true, Withdrawal{Told: &heard})
	if !strings.HasPrefix(again, "Stop — "+RedeliveryPhrase+": your exercise count has changed.") {
		t.Fatalf("redelivery: %s", again)
	}
}

func TestRenderFact_AClipIsSpokenAsARecording(t *testing.T) {
	v := clipVersion(2, "A slow count from one to ten.", []byte("x"))
	v.WrittenAt = demoNow.Add(-20 * time.Hour)
	s, err := RenderFact(v, demoNow)
	if err != nil || s != "Your exercise count recording from Sarah Okafor, physio, 20 hours ago: “A slow count from one to ten.”" {
		t.Fatalf("RenderFact = %q, %v", s, err)
	}
	v.Audience = AudienceAssistant
	if _, err := RenderFact(v, demoNow); !errors.Is(err, ErrAssistantAudience) {
		t.Fatalf("an assistant clip: %v", err)
	}
}
