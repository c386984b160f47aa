package store

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/unsay/unsay/models"
)

// VersionHash is the chain hash of one version (P-5): the lowercase hex
// SHA-256 of the UTF-8 concatenation, with no separators, of
//
//	prevHash                 lowercase hex; "" for version 1
//	CanonicalString(value)   RFC 8785 (JCS) serialization of the value as a JSON string
//	writtenAt                UTC, milliseconds, models.TimeLayout ("2006-01-02T15:04:05.000Z")
//	authorID
//
// The value is the plaintext, never sealed bytes: a seal carries a random
// nonce, so hashing it would prove nothing about what the clinician wrote.
func VersionHash(prevHash, value string, writtenAt time.Time, authorID string) string {
	h := sha256.New()
	h.Write([]byte(prevHash))
	h.Write([]byte(CanonicalString(value)))
	h.Write([]byte(writtenAt.UTC().Format(models.TimeLayout)))
	h.Write([]byte(authorID))
	return hex.EncodeToString(h.Sum(nil))
}

// CanonicalString serializes s as a JSON string the way RFC 8785 (JCS,
// §3.2.2.2, i.e. ECMAScript JSON.stringify) does: it escapes only '"', '\'
// and the control characters U+0000…U+001F (as \b \t \n \f \r or \u00xx,
// lowercase hex). '<', '>', '&', U+2028 and U+2029 are written as is,
// unlike encoding/json's default. Invalid UTF-8 bytes become U+FFFD (the
// store refuses such values before they get here).
func CanonicalString(s string) string {
	var b strings.Builder
	b.Grow(len(s) + 2)
	b.WriteByte('"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"':
				b.WriteString(`\"`)
			case c == '\\':
				b.WriteString(`\\`)
			case c == '\b':
				b.WriteString(`\b`)
			case c == '\t':
				b.WriteString(`\t`)
			case c == '\n':
				b.WriteString(`\n`)
			case c == '\f':
				b.WriteString(`\f`)
			case c == '\r':
				b.WriteString(`\r`)
			case c < 0x20:
				const hexdigits = "0123456789abcdef"
				b.WriteString(`\u00`)
				b.WriteByte(hexdigits[c>>4])
				b.WriteByte(hexdigits[c&0xf])
			default:
				b.WriteByte(c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		b.WriteRune(r) // RuneError for invalid bytes
		i += size
	}
	b.WriteByte('"')
	return b.String()
}
