package models

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// ErrNotCareURI is returned by ParseURI for anything that is not a strict
// care URI. Callers that answer a client must not reveal which rule failed
// (P-2); the wrapped message is for logs and tests.
var ErrNotCareURI = errors.New("not a care URI")

// URI names a fact, or one version of it:
//
//	care://{patient}/{domain}            speakable, audience user
//	care-internal://{patient}/{domain}   assistant-only, audience assistant
//	…/v{n}                               version n ≥ 1 of that fact
//
// Patient and domain are lowercase [a-z0-9_.-]+ (not "." or "..").
type URI struct {
	Scheme  string // "care" or "care-internal", a row of the partition table
	Patient string
	Domain  string
	Version int // 0 names the fact (its current version); n ≥ 1 names version n
}

// NewURI returns the unversioned URI of a fact of audience a. It panics on an
// unknown audience, which is a programming error.
func NewURI(a Audience, patient, domain string) URI {
	p, ok := PartitionForAudience(a)
	if !ok {
		panic(fmt.Sprintf("models.NewURI: unknown audience %q", a))
	}
	return URI{Scheme: p.Scheme, Patient: patient, Domain: domain}
}

// ParseURI parses a care URI strictly. It rejects an unknown scheme, a query
// or fragment, empty or upper-case segments, a trailing slash, "//", "/3"
// without the v, "v0" and leading zeros ("v01"). Every accepted string
// round-trips: ParseURI(s).String() == s. Errors wrap ErrNotCareURI.
func ParseURI(s string) (URI, error) {
	scheme, rest, ok := strings.Cut(s, "://")
	if !ok {
		return URI{}, fmt.Errorf("%w: no scheme", ErrNotCareURI)
	}
	if _, ok := PartitionForScheme(scheme); !ok {
		return URI{}, fmt.Errorf("%w: unknown scheme", ErrNotCareURI)
	}
	segs := strings.Split(rest, "/")
	if len(segs) < 2 || len(segs) > 3 {
		return URI{}, fmt.Errorf("%w: want {patient}/{domain}[/v{n}]", ErrNotCareURI)
	}
	u := URI{Scheme: scheme, Patient: segs[0], Domain: segs[1]}
	if !ValidID(u.Patient) {
		return URI{}, fmt.Errorf("%w: bad patient segment", ErrNotCareURI)
	}
	if !ValidID(u.Domain) {
		return URI{}, fmt.Errorf("%w: bad domain segment", ErrNotCareURI)
	}
	if len(segs) == 3 {
		n, ok := parseVersionSegment(segs[2])
		if !ok {
			return URI{}, fmt.Errorf("%w: bad version segment", ErrNotCareURI)
		}
		u.Version = n
	}
	return u, nil
}

// parseVersionSegment accepts "v{n}" with n ≥ 1, decimal, no leading zero.
func parseVersionSegment(seg string) (int, bool) {
	digits, ok := strings.CutPrefix(seg, "v")
	if !ok || digits == "" || len(digits) > 9 || digits[0] == '0' {
		return 0, false
	}
	for _, c := range digits {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	n, err := strconv.Atoi(digits)
	return n, err == nil
}

// ValidID reports whether s is a valid patient or domain id: 1–64 characters
// of [a-z0-9_.-], and not "." or "..".
func ValidID(s string) bool {
	if s == "" || len(s) > 64 || s == "." || s == ".." {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-') {
			return false
		}
	}
	return true
}

// String formats the URI canonically.
func (u URI) String() string {
	s := u.Scheme + "://" + u.Patient + "/" + u.Domain
	if u.Version > 0 {
		s += "/v" + strconv.Itoa(u.Version)
	}
	return s
}

// Audience is the audience the scheme names (the first of P-1's two checks).
func (u URI) Audience() Audience {
	p, _ := PartitionForScheme(u.Scheme)
	return p.Audience
}

// Unversioned returns the URI of the fact itself (Version 0).
func (u URI) Unversioned() URI { u.Version = 0; return u }

// WithVersion returns the URI of version n of the same fact.
func (u URI) WithVersion(n int) URI { u.Version = n; return u }

// Key is "patient/domain", the fact's identity independent of scheme.
func (u URI) Key() string { return u.Patient + "/" + u.Domain }
