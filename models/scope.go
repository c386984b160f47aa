package models

// Scope is an OAuth 2.0 scope carried by a bearer token (RFC 6749 §3.3).
type Scope string

// The scopes Unsay understands. A token's scopes are the only source of a
// principal's rights (P-13).
const (
	// ScopeReadUser reads speakable facts: the care:// scheme, audience user.
	ScopeReadUser Scope = "care.read.user"
	// ScopeReadAssistant reads assistant-only facts: care-internal://, audience assistant.
	ScopeReadAssistant Scope = "care.read.assistant"
	// ScopeWrite publishes a revision of a speakable fact through POST
	// /write. It is needed for every write.
	ScopeWrite Scope = "care.write"
	// ScopeWriteAssistant, together with ScopeWrite, publishes a revision of
	// an assistant-only fact. A writer without it is refused every
	// assistant-only domain alike, whether or not the domain exists.
	// A verified HMAC signature (a clinician system) holds both.
	ScopeWriteAssistant Scope = "care.write.assistant"
	// ScopeLink creates device-linking codes through POST /link (a carer).
	// ScopeWrite does not imply it, and it implies no write.
	ScopeLink Scope = "care.link"
)

// AllScopes lists every scope, in the order advertised in scopes_supported.
func AllScopes() []Scope {
	return []Scope{ScopeReadUser, ScopeReadAssistant, ScopeWrite, ScopeWriteAssistant, ScopeLink}
}

// Valid reports whether s is one of the scopes above.
func (s Scope) Valid() bool {
	switch s {
	case ScopeReadUser, ScopeReadAssistant, ScopeWrite, ScopeWriteAssistant, ScopeLink:
		return true
	}
	return false
}

// Audience says who a fact is for. It is fixed per domain for the life of the
// domain (P-3) and is checked, together with the URI scheme, on every read (P-1).
type Audience string

const (
	// AudienceUser facts may be spoken to the patient.
	AudienceUser Audience = "user"
	// AudienceAssistant facts exist only for the assistant's reasoning and
	// must never reach the patient's ears.
	AudienceAssistant Audience = "assistant"
)

// Valid reports whether a is user or assistant.
func (a Audience) Valid() bool { return a == AudienceUser || a == AudienceAssistant }

// Partition is one row of the table that binds a URI scheme to the audience
// of the records it names, the scope needed to read them and the scope
// needed (besides ScopeWrite) to write them.
type Partition struct {
	Scheme     string
	Audience   Audience
	Scope      Scope // to read
	WriteScope Scope // to write, with ScopeWrite
}

// partitions is THE table: nothing else in the code puts a scheme string
// next to a scope string (P-1, P-4).
var partitions = [...]Partition{
	{Scheme: "care", Audience: AudienceUser, Scope: ScopeReadUser, WriteScope: ScopeWrite},
	{Scheme: "care-internal", Audience: AudienceAssistant, Scope: ScopeReadAssistant, WriteScope: ScopeWriteAssistant},
}

// Partitions returns a copy of the scheme ↔ audience ↔ scope table.
func Partitions() []Partition { p := partitions; return p[:] }

// PartitionForScheme returns the row for a URI scheme ("care", "care-internal").
func PartitionForScheme(scheme string) (Partition, bool) {
	for _, p := range partitions {
		if p.Scheme == scheme {
			return p, true
		}
	}
	return Partition{}, false
}

// PartitionForAudience returns the row for an audience.
func PartitionForAudience(a Audience) (Partition, bool) {
	for _, p := range partitions {
		if p.Audience == a {
			return p, true
		}
	}
	return Partition{}, false
}

// ReadScope is the scope needed to read records of audience a, or "" for an
// unknown audience.
func ReadScope(a Audience) Scope {
	p, _ := PartitionForAudience(a)
	return p.Scope
}

// WriteScope is the scope needed, besides ScopeWrite, to write records of
// audience a (ScopeWrite itself for user, ScopeWriteAssistant for
// assistant), or "" for an unknown audience.
func WriteScope(a Audience) Scope {
	p, _ := PartitionForAudience(a)
	return p.WriteScope
}

// CanWrite reports whether the principal may write records of audience a
// for patient: ScopeWrite, the audience's write scope (WriteScope) and the
// patient binding (P-21).
func (p Principal) CanWrite(patient string, a Audience) bool {
	s := WriteScope(a)
	return s != "" && p.Can(ScopeWrite) && p.Can(s) && p.CanAccessPatient(patient)
}
