package models

// Speech limits. One Alexa response carries at most MaxSpeechChars of
// outputSpeech SSML, tags included (Alexa's limit). A speakable value is
// spoken inside a frame — the stop, the topic, the author label, the age,
// the review-date warning, the gloss, the SSML tags and the closing cue —
// that SpeechFrameChars bounds; a value of MaxSpeakableValueRunes then fits
// in one response together with the longest frame around it.
//
// A value longer than that in SSML (characters that escape to entities,
// or a retraction that also quotes withdrawn words — on the voice each
// quote of those is shortened to at most 300 characters, finding T9) is
// still spoken whole: the
// skill cuts it at sentence or word boundaries across "more" and marks it
// heard only when its last part was delivered (P-24).
const (
	// MaxSpeechChars is Alexa's cap on outputSpeech.ssml: 8,000 characters.
	MaxSpeechChars = 8000
	// SpeechFrameChars bounds everything a response says around one quoted
	// value: 2,000 characters (the longest retraction frame, with a
	// 64-character topic, a 200-byte author label even when every character
	// of it escapes to an entity, the redelivery and review-date words, the
	// longest gloss, the SSML tags and the more cue, is under 1,900).
	SpeechFrameChars = 2000
	// MaxSpeakableValueRunes is the longest speakable (audience user) value
	// POST /write accepts: 6,000 characters (Unicode code points), so that
	// the value and the longest retraction frame fit in one response.
	MaxSpeakableValueRunes = MaxSpeechChars - SpeechFrameChars
)
