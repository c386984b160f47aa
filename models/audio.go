package models

import (
	"fmt"
	"strings"
	"time"
)

// Audio MIME types a version may carry besides its description text. The
// store accepts these two (store.Validate); a speakable clip must be an MP3
// that Alexa's SSML <audio> plays (AlexaPlayable).
const (
	AudioMPEG = "audio/mpeg" // MP3: MPEG audio Layer III frames
	AudioWAV  = "audio/wav"  // RIFF/WAVE, PCM
)

// MaxAudioBytes caps a version's audio: 1 MiB (1,048,576 bytes) — 174 s of
// MP3 at Alexa's 48 kbps.
const MaxAudioBytes = 1 << 20

// Alexa's limits for SSML <audio> (Speech Synthesis Markup Language
// reference, "audio": developer.amazon.com/docs/custom-skills/
// speech-synthesis-markup-language-ssml-reference.html#audio): an MP3 of
// MPEG version 2 at 48 kbps and 16000, 22050 or 24000 Hz, served over
// HTTPS with a trusted certificate, at most 240 s long; at most five
// <audio> elements and 240 s of audio in one response.
const (
	AlexaAudioBitrate        = 48000 // bits per second, every frame
	AlexaMaxAudio            = 240 * time.Second
	AlexaMaxAudioPerResponse = 5
)

// AlexaSampleRate reports whether hz is a sample rate Alexa's SSML <audio>
// accepts: 16000, 22050 or 24000 (the MPEG-2 Layer III rates).
func AlexaSampleRate(hz int) bool { return hz == 16000 || hz == 22050 || hz == 24000 }

// Audio is the sound a version carries: an exercise pacer clip for the
// patient, a recording for the assistant's reasoning. Its bytes are hashed
// into the version's chain hash (P-5) and sealed like the value (P-6).
type Audio struct {
	MIMEType string        // AudioMPEG or AudioWAV
	Size     int           // bytes, 1 … MaxAudioBytes
	Duration time.Duration // from the container's headers, to the millisecond
	SHA256   string        // lowercase hex SHA-256 of the bytes
	// AlexaPlayable: an MP3 Alexa's SSML <audio> accepts (MPEG-2 Layer III,
	// 48 kbps, an AlexaSampleRate, at most AlexaMaxAudio). Every speakable
	// clip is (store.Validate refuses one that is not).
	AlexaPlayable bool
	// Data are the bytes. Nil where only the description travels: lists,
	// and the speech principal, which keeps the URL instead.
	Data []byte
	// URL is a signed, short-lived URL at which the server serves the
	// bytes (GET /audio/{token}), set on reads of a speakable clip
	// (MetaAudioURL); "" otherwise. Alexa plays only an https:// URL.
	URL string
	// URLExpires is when URL stops being served (UTC); zero without URL.
	URLExpires time.Time
}

// HasAudio reports whether v carries a clip.
func (v Version) HasAudio() bool { return v.Audio != nil }

// SameSound reports whether a and b carry the same bytes (both nil: true).
func SameSound(a, b *Audio) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return a.SHA256 == b.SHA256 && a.MIMEType == b.MIMEType
}

// renderClipRetraction is RenderRetraction for a current version that
// carries a clip (P-17, record fields only):
//
//  1. stop first: "Stop — your {topic} has changed."
//  2. the withdrawn words: "I told you: “{heard.Value}”"
//  3. the new clip's description with author and age: "{author} recorded
//     a new one {age}: “{current.Value}”" — age first and the review-date
//     warning when current is past its review date (P-7, P-24).
//
// The skill plays the new clip after it ("Here is the new one."). It is
// ErrUnchanged only when both the words and the sound are the same.
func renderClipRetraction(heard, current, by Version, now time.Time, again bool, w Withdrawal) (string, error) {
	if strings.TrimSpace(heard.Value) == strings.TrimSpace(current.Value) && SameSound(heard.Audio, current.Audio) {
		return "", ErrUnchanged
	}
	topic := Topic(current.Domain)
	stop := fmt.Sprintf("Stop — your %s has changed.", topic)
	if again {
		stop = fmt.Sprintf("Stop — %s: your %s has changed.", RedeliveryPhrase, topic)
	}
	parts := []string{stop, withdrawn(w)}
	age := SpokenAge(now.Sub(by.WrittenAt))
	who := Appositive(speaker(by.AuthorLabel))
	if current.IsStale(now) {
		parts = append(parts, fmt.Sprintf("%s, %s recorded a new one: %s", capitalize(age), who, Quote(current.Value)), PastReviewSentence, CheckWithTeam)
		return strings.Join(parts, " "), nil
	}
	parts = append(parts, fmt.Sprintf("%s recorded a new one %s: %s", capitalize(who), age, Quote(current.Value)))
	return strings.Join(parts, " "), nil
}

// renderClip is RenderFact for a version that carries a clip: "Your
// {topic} recording from {author}, {age}: “{description}”", or age first
// with the review-date warning when v is stale (P-7). The skill plays the
// clip after it.
func renderClip(v Version, now time.Time) string {
	age := SpokenAge(now.Sub(v.WrittenAt))
	topic := Topic(v.Domain)
	if v.IsStale(now) {
		return fmt.Sprintf("%s, %s recorded your %s: %s %s %s", capitalize(age), Appositive(speaker(v.AuthorLabel)), topic, Quote(v.Value), PastReviewSentence, CheckWithTeam)
	}
	return fmt.Sprintf("Your %s recording from %s, %s: %s", topic, speaker(v.AuthorLabel), age, Quote(v.Value))
}

// WithoutAudioData returns v with its clip's bytes dropped (the clip's
// type, size, digest and URL kept): what a holder of many versions keeps.
func (v Version) WithoutAudioData() Version {
	if v.Audio != nil && v.Audio.Data != nil {
		a := *v.Audio
		a.Data = nil
		v.Audio = &a
	}
	return v
}
