package store

import (
	_ "embed" // the demo seed's clips
)

// The demo seed's clips, generated once at development time (espeak-ng,
// sox and lame from Debian; see seeddata/README.md) and committed, so the
// seed is deterministic (P-15) and nothing at build or test time needs
// those tools.
var (
	// seedExerciseClip is a slow count from one to ten (9.0 s): MP3,
	// MPEG-2 Layer III, 48 kbps, 24000 Hz, mono — what Alexa's SSML
	// <audio> plays.
	//go:embed seeddata/exercise_clip.mp3
	seedExerciseClip []byte
	// seedGaitNote is a spoken left-right cadence (2.9 s): WAV, PCM,
	// 8000 Hz, 8 bits, mono. Assistant-only: never played.
	//go:embed seeddata/gait_note.wav
	seedGaitNote []byte
)

// withAudio adds a clip to a seed record.
func withAudio(r seedRecord, mimeType string, b []byte) seedRecord {
	r.in.AudioType, r.in.Audio = mimeType, b
	return r
}
