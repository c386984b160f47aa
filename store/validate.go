package store

import (
	"fmt"
	"math"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/unsay/unsay/models"
)

// maxAuthorLabelBytes caps an author label: 200 bytes of UTF-8.
const maxAuthorLabelBytes = 200

// ValidAuthorID reports whether s is an acceptable authorId: 1–64 bytes of
// [a-z0-9_.@:-] (lowercase, no spaces, no '|').
func ValidAuthorID(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || strings.IndexByte("_.@:-", c) >= 0) {
			return false
		}
	}
	return true
}

// validate checks in and returns it normalized (StaleAfter in UTC and
// truncated to ms; an empty AuthorLabel becomes AuthorID). Errors are
// *ValidationError, which never echo the value.
func validate(in PublishInput) (PublishInput, error) {
	bad := func(field, reason string) (PublishInput, error) {
		return PublishInput{}, &ValidationError{Field: field, Reason: reason}
	}
	switch {
	case !models.ValidID(in.Patient):
		return bad("patient", "must be 1–64 characters of [a-z0-9_.-]")
	case !models.ValidID(in.Domain):
		return bad("domain", "must be 1–64 characters of [a-z0-9_.-]")
	case !in.Audience.Valid():
		return bad("audience", `must be "user" or "assistant"`)
	case in.Value == "" || strings.TrimSpace(in.Value) == "":
		return bad("value", "must not be empty")
	case len(in.Value) > models.MaxValueBytes:
		return bad("value", fmt.Sprintf("must be at most %d bytes", models.MaxValueBytes))
	case !utf8.ValidString(in.Value):
		return bad("value", "must be valid UTF-8")
	case !ValidAuthorID(in.AuthorID):
		return bad("authorId", "must be 1–64 characters of [a-z0-9_.@:-]")
	case len(in.AuthorLabel) > maxAuthorLabelBytes:
		return bad("authorLabel", fmt.Sprintf("must be at most %d bytes", maxAuthorLabelBytes))
	case !utf8.ValidString(in.AuthorLabel) || strings.ContainsFunc(in.AuthorLabel, unicode.IsControl):
		return bad("authorLabel", "must be printable UTF-8")
	case math.IsNaN(in.Priority) || in.Priority < 0 || in.Priority > 1:
		return bad("priority", "must be between 0 and 1")
	case !in.StaleAfter.IsZero() && in.StaleAfter.Before(time.UnixMilli(1)):
		return bad("staleAfter", "must be after 1970")
	case len(in.IdempotencyKey) > 256:
		return bad("idempotencyKey", "must be at most 256 bytes")
	}
	in.AuthorLabel = strings.TrimSpace(in.AuthorLabel)
	if in.AuthorLabel == "" {
		in.AuthorLabel = in.AuthorID
	}
	if !in.StaleAfter.IsZero() {
		in.StaleAfter = in.StaleAfter.UTC().Truncate(time.Millisecond)
	}
	return in, nil
}
