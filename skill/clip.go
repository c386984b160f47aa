package skill

import (
	"encoding/xml"
	"fmt"
	"strings"
	"time"

	"github.com/unsay/unsay/models"
)

// Clips: "play my exercise count" (PlayClipIntent) plays the recording his
// physio made for him, and a clip the physio revised is retracted like text
// and then played ("Stop — your exercise count has changed. … Here is the
// new one."). Alexa's SSML <audio> plays only an MP3 at an https:// URL
// (models.AlexaAudioBitrate and the other limits); the URL is the signed,
// short-lived one the speech principal read over MCP with the clip
// (models.MetaAudioURL), so this package still never reaches the store
// (P-18). Where the URL is not https — a server on loopback http during
// development — or has expired, the clip is described, never played, and
// the skill says so.

// domainExerciseClip is the clip "play my exercise count" plays first.
const domainExerciseClip = "exercise_clip"

// What the skill says around a clip, in its own words.
const (
	textClipHere   = "Here it is."
	textClipNew    = "Here is the new one."
	textClipCannot = "I can't play the recording from here, so I've told you what it holds."
	textNoClip     = "There is no recording in your care notes."
)

// playable reports whether v's clip can be put in an SSML <audio> now: an
// MP3 Alexa plays, at an https:// URL that has not expired at now.
func (t *turn) playable(v models.Version) bool {
	a := v.Audio
	return a != nil && a.AlexaPlayable && a.MIMEType == models.AudioMPEG &&
		strings.HasPrefix(a.URL, "https://") && t.now.Before(a.URLExpires)
}

// clipSegment plays v's clip after lead ("Here it is."), or says why it
// cannot be played. Either way it marks v heard: he heard its words
// (P-19), and a revision of it will be retracted.
func (t *turn) clipSegment(v models.Version, lead string) segment {
	s := segment{Marks: []mark{{URI: v.FactURI(), Version: v.N}}, Fact: v.FactURI(), Version: v.N, clip: &v, clipLead: lead}
	if t.playable(v) {
		s.Text, s.Audio = lead, v.Audio.URL
		return s
	}
	if v.Audio != nil && v.Audio.URL != "" && !strings.HasPrefix(v.Audio.URL, "https://") {
		t.s.log.Info("alexa clip described, not played: its URL is not https (a development server?)", "uri", v.URI().String())
	}
	s.Text = textClipCannot
	return s
}

// playClip answers PlayClipIntent: the exercise count (else the first
// speakable fact carrying a clip) — its description with author and age
// (models.RenderFact), then the clip. A clip just announced this turn was
// played with its announcement.
func (t *turn) playClip() reply {
	var clip *models.Version
	for i, v := range t.facts {
		if v.Audio == nil {
			continue
		}
		if clip == nil || v.Domain == domainExerciseClip {
			clip = &t.facts[i]
		}
	}
	if clip == nil {
		return reply{segs: say(textNoClip), question: textQuestion, reprompt: t.topicsPrompt(), card: cardCare}
	}
	if _, done := t.announced[clip.FactURI()]; done {
		return reply{end: endAnswer, card: cardCare}
	}
	return reply{segs: []segment{t.factSegment(*clip), t.clipSegment(*clip, textClipHere)}, end: endAnswer, card: cardCare}
}

// clipFollowUp is the question that follows the exercise instruction when
// his physio recorded a count he can hear now: "Say: play my exercise
// count, to hear the count Sarah Okafor, physio, recorded." ("" otherwise).
func (t *turn) clipFollowUp(domain string) string {
	if domain != "exercise" {
		return ""
	}
	for _, v := range t.facts {
		if v.Domain == domainExerciseClip && t.playable(v) {
			return "Say: play my exercise count, to hear the count " + models.Appositive(v.AuthorLabel) + " recorded."
		}
	}
	return ""
}

// limitClips keeps a response within Alexa's limits on SSML audio — at
// most models.AlexaMaxAudioPerResponse <audio> elements and
// models.AlexaMaxAudio of audio in all — by describing, not playing, every
// clip past them (in speaking order, so retractions keep theirs).
func limitClips(segs []segment) []segment {
	n, total := 0, time.Duration(0)
	for i, s := range segs {
		if s.Audio == "" || s.clip == nil || s.clip.Audio == nil {
			continue
		}
		if n+1 > models.AlexaMaxAudioPerResponse || total+s.clip.Audio.Duration > models.AlexaMaxAudio {
			segs[i].Text, segs[i].Audio = textClipCannot, ""
			continue
		}
		n++
		total += s.clip.Audio.Duration
	}
	return segs
}

// audioTag is the SSML element that plays the clip at url.
func audioTag(url string) string { return `<audio src="` + EscapeSSML(url) + `"/>` }

// checkAudioElement: an <audio> in SSML has one attribute, src, an
// https:// URL, and no content (Alexa's rule; content would be spoken
// only where it cannot play).
func checkAudioElement(el xml.StartElement, depth int) error {
	if depth < 1 || len(el.Attr) != 1 || el.Attr[0].Name.Local != "src" || !strings.HasPrefix(el.Attr[0].Value, "https://") {
		return fmt.Errorf("%w: <audio> needs exactly src=\"https://…\"", errIllFormed)
	}
	return nil
}
