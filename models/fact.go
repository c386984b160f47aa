package models

import (
	"strings"
	"time"
)

// MaxValueBytes caps a fact's value, for every audience: 24 KiB (24,576
// bytes) of UTF-8. It is large enough that a speakable value of
// MaxSpeakableValueRunes characters fits in any script (6,000 × 4 bytes,
// utf8.UTFMax, = 24,000), so the character limit is the one a speakable
// value meets first; an assistant-only value has only this limit.
const MaxValueBytes = 24 << 10

// TimeLayout formats every timestamp that enters a hash: UTC, milliseconds (P-5).
const TimeLayout = "2006-01-02T15:04:05.000Z"

// Version is one immutable revision of a fact. N counts from 1 per
// (patient, domain); Hash chains it to N-1 (P-5).
type Version struct {
	Patient     string
	Domain      string
	N           int
	Audience    Audience
	Value       string // plaintext, as the clinician wrote it
	AuthorID    string
	AuthorLabel string    // "Sarah Okafor, physio"
	WrittenAt   time.Time // server clock, UTC, truncated to milliseconds
	StaleAfter  time.Time // zero: never stale
	// ServedStale: the server judged this version past its review date
	// when it served it (unsay/stale, P-7), whatever StaleAfter says — a
	// reader that got no review date, only the judgement. Staleness never
	// ends, so IsStale holds at every time after (P-24).
	ServedStale bool
	Priority    float64 // 0…1, a hint for hosts (P-4: never a control)
	PrevHash    string  // lowercase hex; "" for N == 1
	Hash        string  // lowercase hex SHA-256
	// Audio is the clip the version carries besides its description
	// (Value); nil for a text-only version (audio.go).
	Audio *Audio
}

// URI returns the versioned URI care://patient/domain/v{N}.
func (v Version) URI() URI { return NewURI(v.Audience, v.Patient, v.Domain).WithVersion(v.N) }

// FactURI returns the unversioned URI of the fact this version belongs to.
func (v Version) FactURI() URI { return NewURI(v.Audience, v.Patient, v.Domain) }

// IsStale reports whether the version is past its review date at now
// (P-7): served stale (ServedStale), or now is at or after StaleAfter.
func (v Version) IsStale(now time.Time) bool {
	return v.ServedStale || (!v.StaleAfter.IsZero() && !now.Before(v.StaleAfter))
}

// Fact is the current state of one (patient, domain): its latest version and
// how many versions exist.
type Fact struct {
	Current  Version
	Versions int
}

// Topic is the spoken name of a domain ("weight_bearing" → "walking").
// Unknown domains are spoken with underscores as spaces.
func Topic(domain string) string {
	switch domain {
	case "weight_bearing":
		return "walking"
	case "anticoagulant":
		return "blood thinner"
	case "exercise":
		return "exercise"
	case "exercise_clip":
		return "exercise count"
	case "contact":
		return "contact"
	}
	return strings.ReplaceAll(domain, "_", " ")
}
