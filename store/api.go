// Package store is Unsay's live care store: facts per patient and domain,
// every write a new hash-chained version (P-5), read under the audience
// partition (P-1, P-2, P-21), an HMAC-chained audit log (P-14), a change feed
// in commit order, and the deterministic demo seed (P-15).
//
// Files, one job each: api.go the types and errors callers use; store.go
// the Store, Open and Close; validate.go the one write validator; publish.go
// the write path (Publish, the replay cache); read.go the reads under the
// partition (Read, List, History, Since); feed.go the change feed (Watch);
// verify.go the chain verdicts; audit.go the audit log; seal.go sealing at
// rest; seed.go the demo seed and Rekey; link.go device linking; lease.go
// named leases; startup.go the fail-closed start check; stmt.go prepared
// statements; dialect.go and dialect_postgres.go the backends (SQLite
// embedded by default, Postgres for several instances).
package store

import (
	"errors"
	"time"

	"github.com/unsay/unsay/models"
)

// Errors. Match with errors.Is.
var (
	// ErrNotFound is the one answer for a read that does not succeed:
	// forbidden, absent, malformed, another patient's, a missing version (P-2, P-21).
	ErrNotFound = errors.New("resource not found")
	// ErrAudienceChange: a write tried to change a domain's audience (P-3). Nothing was written.
	ErrAudienceChange = errors.New("a domain's audience cannot change")
	// ErrForbidden: the principal may not write (no care.write, or not bound to the patient).
	ErrForbidden = errors.New("forbidden")
	// ErrInvalid wraps every *ValidationError.
	ErrInvalid = errors.New("invalid input")
)

// ValidationError names the field that failed validation. errors.Is(err, ErrInvalid) is true.
type ValidationError struct {
	Field  string // "patient", "domain", "audience", "value", "authorId", "authorLabel", "priority", "staleAfter"
	Reason string // human-readable, safe to show to the caller (never echoes the value)
}

func (e *ValidationError) Error() string { return e.Field + ": " + e.Reason }
func (e *ValidationError) Unwrap() error { return ErrInvalid }

// PublishInput is one write. WrittenAt is never taken from input: the store
// stamps it from its own clock (P-12, I-5).
type PublishInput struct {
	Patient     string
	Domain      string
	Audience    models.Audience
	Value       string // 1 byte … models.MaxValueBytes of UTF-8
	AuthorID    string
	AuthorLabel string
	StaleAfter  time.Time // zero: never stale
	Priority    float64   // 0…1
	// IdempotencyKey, when non-empty, makes the write apply at most once
	// within the replay window (600 s): a second Publish with the same key
	// returns the first result with Replayed = true and writes nothing (P-12).
	IdempotencyKey string
	// Audit, when set, is the audit row of this write attempt: if the write
	// commits a new version, the row (outcome accepted, reason ok, URI the
	// new versioned URI) is appended in the same transaction, so a write
	// costs one durable commit and cannot land without its row (P-14).
	// PublishResult.Audited says whether that happened; otherwise (replay,
	// unchanged, error) the caller appends its own row.
	Audit *AuditEntry
}

// PublishResult is what a committed (or replayed) write produced.
type PublishResult struct {
	Version  models.Version
	Created  bool // Version.N == 1: a creation, not a change (P-8)
	Replayed bool // IdempotencyKey seen before: nothing new was written
	Audited  bool // PublishInput.Audit was appended with the new version
	// Unchanged: the write repeated the current version (value, audience,
	// authorId, authorLabel, staleAfter and priority all equal); nothing
	// was written and Version, Seq are the current version's.
	Unchanged bool
	Seq       int64
}

// ReadResult is one version as served, with the fact's latest version number
// so a caller can tell a superseded version (Version.N < Latest).
type ReadResult struct {
	Version models.Version
	Latest  int
}

// Change is one committed revision on the change feed. It carries no value
// (P-9): subscribers re-read through the partition.
type Change struct {
	Seq      int64      // monotonic, gap-free per store, in commit order
	URI      models.URI // unversioned
	Version  int
	Audience models.Audience
	Created  bool // Version == 1
	At       time.Time
}

// AuditReason is the closed set of audit reasons (P-14).
type AuditReason string

const (
	ReasonOK             AuditReason = "ok"
	ReasonBadSignature   AuditReason = "bad_signature"
	ReasonStaleTimestamp AuditReason = "stale_timestamp"
	ReasonReplay         AuditReason = "replay"
	ReasonInvalid        AuditReason = "invalid"
	ReasonTooLarge       AuditReason = "too_large"
	ReasonAudienceChange AuditReason = "audience_change"
	ReasonForbidden      AuditReason = "forbidden"
	ReasonWrongPatient   AuditReason = "wrong_patient"
)

// AuditEntry is one row of the audit log: every write attempt, accepted or
// refused (P-14). Actor is the verified principal ("hmac" for signed writes).
type AuditEntry struct {
	Seq     int64
	At      time.Time
	Actor   string
	URI     string // as asked; may be empty when the body did not parse
	Outcome string // "accepted" | "refused"
	Reason  AuditReason
	Via     string // "hmac" | "bearer" | "seed" | "cli"
	Author  string // the authorId asserted in the body, when any
	MAC     string // lowercase hex HMAC chaining this row to the previous one
}

// VerifyResult is a chain verdict (P-5). BrokenAt is the first version whose
// stored hash, or at-rest seal, disagrees; 0 when intact.
type VerifyResult struct {
	URI      string
	Versions []VersionReceipt
	Intact   bool
	BrokenAt int
}

// VersionReceipt is what /verify may show of one version: hashes and times,
// never the value.
type VersionReceipt struct {
	N         int
	Hash      string
	PrevHash  string
	WrittenAt time.Time
	AuthorID  string
	AtRest    *AtRestReceipt // nil when stored as plaintext
}

// AtRestReceipt describes how a version's value is sealed (P-6): never plaintext.
type AtRestReceipt struct {
	Provider string `json:"provider"`
	KeyID    string `json:"keyId"`
	AAD      string `json:"aad"`
	Nonce    string `json:"nonce"` // hex
	Tag      string `json:"tag"`   // hex
}
