package models

import (
	"slices"
	"strings"
)

// Principal is the verified caller: who it is, what its token lets it do and
// which patients its token is bound to. Principals come only from a verified
// token or from trusted server code (P-13).
type Principal struct {
	// Subject is the token's "sub" claim, recorded as the audit actor (P-14).
	Subject string
	// Scopes are the token's scopes; never widened after verification.
	Scopes []Scope
	// Patients are the patient ids the token is bound to (P-21). A principal
	// with no patients can read nothing. The single entry "*" binds to every
	// patient; only server-internal principals (seeding, rekey, offline
	// verify) are built that way.
	Patients []string
}

// AllPatients is the Patients entry that binds a principal to every patient.
const AllPatients = "*"

// Can reports whether the principal holds scope s.
func (p Principal) Can(s Scope) bool { return slices.Contains(p.Scopes, s) }

// CanAccessPatient reports whether the principal is bound to patient (P-21).
func (p Principal) CanAccessPatient(patient string) bool {
	for _, id := range p.Patients {
		if id == AllPatients || id == patient {
			return true
		}
	}
	return false
}

// CanRead reports whether the principal may read records of audience a for
// patient: both the audience's read scope and the patient binding (P-1, P-21).
// Callers must also check the URI scheme against the record (the store does).
func (p Principal) CanRead(patient string, a Audience) bool {
	s := ReadScope(a)
	return s != "" && p.Can(s) && p.CanAccessPatient(patient)
}

// CanReadURI reports whether the principal may read what u names by its
// scheme's scope and patient binding. The record's own audience is checked
// separately by the store (P-1's second check).
func (p Principal) CanReadURI(u URI) bool { return p.CanRead(u.Patient, u.Audience()) }

// Narrow returns a copy holding only those of p's scopes that are also in
// keep. It never widens: a scope p lacks is not added (P-10).
func (p Principal) Narrow(keep ...Scope) Principal {
	out := Principal{Subject: p.Subject, Patients: slices.Clone(p.Patients)}
	for _, s := range p.Scopes {
		if slices.Contains(keep, s) && !slices.Contains(out.Scopes, s) {
			out.Scopes = append(out.Scopes, s)
		}
	}
	return out
}

// ScopeString joins the scopes with spaces, as in an OAuth "scope" claim.
func (p Principal) ScopeString() string {
	parts := make([]string, len(p.Scopes))
	for i, s := range p.Scopes {
		parts[i] = string(s)
	}
	return strings.Join(parts, " ")
}

// System returns a server-internal principal bound to every patient with
// the given scopes. It is for trusted code paths only (seeding, rekey,
// offline verification) and is never built from a request.
func System(subject string, scopes ...Scope) Principal {
	return Principal{Subject: subject, Scopes: slices.Clone(scopes), Patients: []string{AllPatients}}
}
