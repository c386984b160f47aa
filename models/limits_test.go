package models

import (
	"testing"
	"unicode/utf8"
)

// TestMaxValueBytesHoldsTheLongestSpeakableValueInAnyScript: the byte cap
// applies to every value, so it must hold MaxSpeakableValueRunes characters
// of the widest UTF-8 encoding; otherwise long Chinese or emoji text is
// refused by bytes before it reaches the character limit the README gives.
func TestMaxValueBytesHoldsTheLongestSpeakableValueInAnyScript(t *testing.T) {
	if need := MaxSpeakableValueRunes * utf8.UTFMax; MaxValueBytes < need {
		t.Fatalf("MaxValueBytes = %d, but %d characters of 4-byte UTF-8 take %d bytes", MaxValueBytes, MaxSpeakableValueRunes, need)
	}
}
