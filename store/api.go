// Package store is Unsay's live care store: facts per patient and domain,
// every write a new hash-chained version (P-5) whose head is signed at
// commit (P-26), read under the audience partition (P-1, P-2, P-21), an
// HMAC-chained audit log (P-14), a change feed in commit order, and the
// deterministic demo seed (P-15).
//
// Files, one job each: api.go the types and errors callers use; store.go
// the Store, Open and Close; validate.go the one write validator;
// publish.go the write path (Publish, the replay cache); read.go the reads
// under the partition (Read, List, History, Since); feed.go the change feed
// (Watch); hash.go the version hash (P-5); verify.go the chain verdicts;
// heads.go the chain and audit heads signed outside the database (P-26);
// health.go whether writes can commit (WriteHealth); audit.go the audit
// log; seal.go sealing at rest; seed.go the demo seed and Rekey; link.go
// device linking; oauth.go and oauth_link.go the embedded authorization
// server's clients, grants, codes and keys; audio.go, audio_hash.go and
// audio_read.go the clips a fact may carry; lease.go named leases;
// startup.go the fail-closed start check; stmt.go prepared statements;
// dialect.go and dialect_postgres.go the backends (SQLite embedded by
// default, Postgres for several instances), their migrations and their
// placeholders. DB hands the handle and dialect to the parts that keep
// tables of their own in the same database (bridge/speech's ledger,
// skill/proactive's budget).
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
	// ErrNeedsAssistantWrite: the write names an assistant-only fact — its
	// audience is assistant, or its domain's is — and the principal lacks
	// care.write.assistant. The same error whether or not the domain
	// exists, and before any read, so it tells nothing about which domains
	// are assistant-only beyond what the write itself asked. Nothing was
	// written. errors.Is(err, ErrForbidden) is true too.
	ErrNeedsAssistantWrite error = forbiddenError("writing an assistant-only fact needs care.write.assistant")
	// ErrInvalid wraps every *ValidationError.
	ErrInvalid = errors.New("invalid input")
	// ErrAbandoned: the caller's context ended (a client hung up) before
	// the write took the store's write lock; nothing was written. Once the
	// lock is held a write commits whatever happens to the caller, so a
	// write is either abandoned or committed, never uncertain. The error
	// also wraps the context's error.
	ErrAbandoned = errors.New("the write was abandoned before it committed")
	// ErrUnavailable is wrapped by every *UnavailableError: the store
	// cannot commit writes right now (a full or read-only disk, an
	// unreachable database). Nothing was written.
	ErrUnavailable = errors.New("the store cannot commit writes right now")
)

// forbiddenError is an ErrForbidden with its own message.
type forbiddenError string

func (e forbiddenError) Error() string        { return string(e) }
func (e forbiddenError) Is(target error) bool { return target == ErrForbidden }

// UnavailableError says why writes cannot commit: errors.Is(err,
// ErrUnavailable) is true, and errors.As reaches the database's own error.
// POST /write answers it 503 with Retry-After; WriteHealth reports it.
type UnavailableError struct {
	// Reason is safe to show an operator or a client: "the disk is full",
	// "the database is read-only", "the database is unreachable", "the
	// database is busy" (another process held SQLite's write lock past the
	// busy timeout), …
	Reason string
	// RetryAfter is a sensible wait before trying again.
	RetryAfter time.Duration
	// Err is the database's error.
	Err error
}

func (e *UnavailableError) Error() string   { return ErrUnavailable.Error() + ": " + e.Reason }
func (e *UnavailableError) Unwrap() []error { return []error{ErrUnavailable, e.Err} }

// ValidationError names the field that failed validation. errors.Is(err, ErrInvalid) is true.
type ValidationError struct {
	Field  string // "patient", "domain", "audience", "value", "authorId", "authorLabel", "priority", "staleAfter", "audio", "audioType"
	Reason string // human-readable, safe to show to the caller (never echoes the value)
}

func (e *ValidationError) Error() string { return e.Field + ": " + e.Reason }
func (e *ValidationError) Unwrap() error { return ErrInvalid }

// PublishInput is one write. WrittenAt is never taken from input: the store
// stamps it from its own clock (P-5, P-12).
type PublishInput struct {
	Patient     string
	Domain      string
	Audience    models.Audience
	Value       string // 1 byte … models.MaxValueBytes of UTF-8; speakable: ≤ models.MaxSpeakableValueRunes characters
	AuthorID    string
	AuthorLabel string
	StaleAfter  time.Time // zero: never stale
	Priority    float64   // 0…1
	// Audio, when set, is a clip the version carries besides its
	// description (Value), of type AudioType ("audio/mpeg" or "audio/wav";
	// Validate normalizes aliases): at most models.MaxAudioBytes, its
	// container checked, and for a speakable fact an MP3 Alexa plays
	// (Validate, InspectAudio). It is hashed (AudioVersionHash, P-5) and
	// sealed with the value's AAD (P-6).
	Audio     []byte
	AudioType string
	audioInfo AudioInfo // set by Validate
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
	// ReasonRateLimited: a source made too many refused, unauthenticated
	// attempts and was answered 429 without its attempt being examined.
	ReasonRateLimited AuditReason = "rate_limited"
	// ReasonAbandoned: the client hung up before the write committed
	// (Outcome "abandoned"); nothing was written.
	ReasonAbandoned AuditReason = "abandoned"
	// ReasonUnavailable: the store could not commit (ErrUnavailable).
	ReasonUnavailable AuditReason = "unavailable"
)

// Audit outcomes (AuditEntry.Outcome).
const (
	OutcomeAccepted  = "accepted"  // with ReasonOK, and only with it
	OutcomeRefused   = "refused"   // with any reason but ok and abandoned
	OutcomeAbandoned = "abandoned" // with ReasonAbandoned, and only with it
)

// AuditEntry is one row of the audit log: every write attempt, accepted,
// refused or abandoned (P-14). Actor is the verified principal ("hmac" for
// signed writes).
//
// Repeats collapse: a refused or abandoned attempt identical to the log's
// last row (same actor, uri, outcome, reason, via and author) within
// AuditRepeatWindow of that row's last attempt is not appended; the last
// row's Count grows and its LastAt moves instead, so a flood of identical
// refusals costs one row (its MAC and the signed head are recomputed).
type AuditEntry struct {
	Seq     int64
	At      time.Time // the first attempt this row stands for
	Actor   string
	URI     string // as asked; may be empty when the body did not parse
	Outcome string // OutcomeAccepted | OutcomeRefused | OutcomeAbandoned
	Reason  AuditReason
	Via     string // "hmac" | "bearer" | "seed" | "cli"
	Author  string // the authorId asserted in the body, when any
	// Count is how many identical attempts the row stands for: 0 or 1 on
	// input means one (a caller that batched attempts passes their number).
	Count int64
	// LastAt is the last attempt's time when Count > 1; zero otherwise.
	LastAt time.Time
	MAC    string // lowercase hex HMAC chaining this row to the previous one
}

// VerifyResult is a chain verdict (P-5, P-26). BrokenAt is the first
// version whose stored hash, at-rest seal or head signature disagrees; 0
// when intact. Problem says what disagreed there ("" when intact); a
// rewritten chain with recomputed hashes reads ProblemHeadSignature.
type VerifyResult struct {
	URI      string
	Versions []VersionReceipt
	Intact   bool
	BrokenAt int
	Problem  string
	// Head is the chain's head (its latest version) as signed at commit.
	Head *SignedHead
}

// SignedHead is a chain head (a fact's latest version, or the audit log's
// last row) and its Ed25519 signature, made at commit with a key that is
// not in the database (P-26).
type SignedHead struct {
	N         int64  // the version number, or the audit log's row count
	Hash      string // the version hash, or the audit log's last MAC
	Signature string // base64 (standard, padded) Ed25519 signature; "" when unsigned
	KeyID     string // KeyID of the public key that verifies it
	Valid     bool   // the signature verifies under the verifier's public key
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
	// Signature is the head signature made when this version was committed
	// (base64 Ed25519; "" for a version written before heads were signed).
	Signature string
	KeyID     string
}

// AtRestReceipt describes how a version's value is sealed (P-6): never plaintext.
type AtRestReceipt struct {
	Provider string `json:"provider"`
	KeyID    string `json:"keyId"`
	AAD      string `json:"aad"`
	Nonce    string `json:"nonce"` // hex
	Tag      string `json:"tag"`   // hex
}
