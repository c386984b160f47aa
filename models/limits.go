package models

// MaxSpeakableValueRunes caps a speakable (audience user) fact's value:
// 6,000 characters (Unicode code points), so that one value with the longest
// retraction frame around it fits in one Alexa response. Assistant-only
// values are capped by MaxValueBytes alone: they are never spoken.
//
// The arithmetic, from Alexa's limit of 8,000 characters of outputSpeech
// (SSML included):
//
//	8,000  outputSpeech
//	− 102  "Stop — your {topic} instruction has changed. " (topic ≤ 64)
//	−  16  "I told you: “…”. " around the withdrawn words (a long withdrawn
//	       value is carried in its own response, after "more")
//	− 234  "{author label ≤ 200}, changed it {age ≤ 16}: “…”."
//	− 200  the gloss sentence ("In plain terms, … means …")
//	− 300  the stale lead (the age, "past its review date", the author)
//	−  40  the prompt to say "more"
//	− 150  SSML markup (<speak>, breaks, paragraphs)
//	= 6,958, rounded down to 6,000: the 958 left over absorb XML entity
//	  expansion (& < > " ' escaped as 4–6 characters each).
//
// POST /write (store.Validate) refuses a longer speakable value with a 400
// naming this limit.
const MaxSpeakableValueRunes = 6000
