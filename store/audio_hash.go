package store

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"time"

	"github.com/unsay/unsay/models"
)

// AudioVersionHash is VersionHash for a version that carries a clip (P-5).
// The canonical JSON of its value is the RFC 8785 (JCS) object
//
//	{"audioSha256":"<lowercase hex SHA-256 of the bytes>","mimeType":"<type>","text":"<description>"}
//
// (keys sorted, no whitespace, each string as CanonicalString) in place of
// the JSON string of a text value; prevHash, writtenAt and authorID are
// concatenated around it exactly as in VersionHash. So the hash covers the
// audio bytes, a text-only version's hash (every hash written before audio
// existed, and the pinned vectors) is unchanged, and no text value can
// serialize like an audio one (a JSON string starts with '"', an object
// with '{'). A holder of the blob contents of a resources/read can
// recompute it: the SHA-256 of the blob, its mimeType, and the text.
func AudioVersionHash(prevHash, text, mimeType, audioSHA256 string, writtenAt time.Time, authorID string) string {
	h := sha256.New()
	h.Write([]byte(prevHash))
	h.Write([]byte(canonicalAudioValue(text, mimeType, audioSHA256)))
	h.Write([]byte(writtenAt.UTC().Format(models.TimeLayout)))
	h.Write([]byte(authorID))
	return hex.EncodeToString(h.Sum(nil))
}

// canonicalAudioValue is the JCS object AudioVersionHash hashes.
func canonicalAudioValue(text, mimeType, audioSHA256 string) string {
	var b strings.Builder
	b.WriteString(`{"audioSha256":`)
	b.WriteString(CanonicalString(audioSHA256))
	b.WriteString(`,"mimeType":`)
	b.WriteString(CanonicalString(mimeType))
	b.WriteString(`,"text":`)
	b.WriteString(CanonicalString(text))
	b.WriteByte('}')
	return b.String()
}

// hashOf is the chain hash of v over its plaintext: AudioVersionHash when
// v carries a clip (v.Audio.SHA256 must be the digest of its bytes),
// VersionHash otherwise.
func hashOf(v models.Version) string {
	if v.Audio != nil {
		return AudioVersionHash(v.PrevHash, v.Value, v.Audio.MIMEType, v.Audio.SHA256, v.WrittenAt, v.AuthorID)
	}
	return VersionHash(v.PrevHash, v.Value, v.WrittenAt, v.AuthorID)
}

func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
