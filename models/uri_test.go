package models

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseURI_AcceptsStrictCareURIs(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in       string
		want     URI
		audience Audience
	}{
		{"care://ray/weight_bearing", URI{Scheme: "care", Patient: "ray", Domain: "weight_bearing"}, AudienceUser},
		{"care-internal://ray/risk", URI{Scheme: "care-internal", Patient: "ray", Domain: "risk"}, AudienceAssistant},
		{"care://ray/weight_bearing/v1", URI{Scheme: "care", Patient: "ray", Domain: "weight_bearing", Version: 1}, AudienceUser},
		{"care://ray/weight_bearing/v12", URI{Scheme: "care", Patient: "ray", Domain: "weight_bearing", Version: 12}, AudienceUser},
		{"care://p-1.x/d_2.y-z", URI{Scheme: "care", Patient: "p-1.x", Domain: "d_2.y-z"}, AudienceUser},
		{"care-internal://ray/gait_note/v3", URI{Scheme: "care-internal", Patient: "ray", Domain: "gait_note", Version: 3}, AudienceAssistant},
	} {
		t.Run(tc.in, func(t *testing.T) {
			t.Parallel()
			u, err := ParseURI(tc.in)
			if err != nil {
				t.Fatalf("ParseURI(%q): %v", tc.in, err)
			}
			if d := cmp.Diff(tc.want, u); d != "" {
				t.Fatalf("ParseURI(%q) (-want +got):\n%s", tc.in, d)
			}
			if u.String() != tc.in {
				t.Fatalf("String() = %q, want %q (round trip)", u.String(), tc.in)
			}
			if u.Audience() != tc.audience {
				t.Fatalf("Audience() = %q, want %q", u.Audience(), tc.audience)
			}
		})
	}
}

func TestParseURI_RejectsEverythingElse(t *testing.T) {
	t.Parallel()
	for _, in := range []string{
		"",
		"care://ray/weight_bearing/3",    // version without the v
		"care://ray/weight_bearing/v0",   // versions start at 1
		"care://ray/weight_bearing/v01",  // leading zero
		"care://ray/weight_bearing/v",    // no digits
		"care://ray/weight_bearing/v-1",  // sign
		"care://ray/weight_bearing/v1x",  // trailing junk
		"care://ray/weight_bearing/",     // trailing slash
		"care://ray/weight_bearing/v1/",  // trailing slash after version
		"care://ray//weight_bearing",     // empty segment
		"care:///weight_bearing",         // empty patient
		"care://ray/",                    // empty domain
		"care://ray",                     // no domain
		"care://Ray/weight_bearing",      // upper case patient
		"care://ray/Weight_Bearing",      // upper case domain
		"CARE://ray/weight_bearing",      // upper case scheme
		"care-external://ray/risk",       // unknown scheme
		"ui://unsay/echo",                // another scheme we serve, not a care URI
		"https://ray/weight_bearing",     // unknown scheme
		"care:/ray/weight_bearing",       // one slash
		"care//ray/weight_bearing",       // no colon
		"care://ray/weight_bearing?x=1",  // query
		"care://ray/weight_bearing#frag", // fragment
		"care://ray/weight bearing",      // space
		"care://ray/../risk",             // dot-dot segment
		"care://ray/./risk",              // dot segment
		"care://ray/weight_bearing/v1/v2",
		"care://ray/weight%5Fbearing", // percent-encoding
		"care://ray/wéight",
		"care://ray/weight_bearing/v1234567890", // absurd version
	} {
		t.Run(in, func(t *testing.T) {
			t.Parallel()
			if u, err := ParseURI(in); err == nil {
				t.Fatalf("ParseURI(%q) = %+v, want an error", in, u)
			} else if !errors.Is(err, ErrNotCareURI) {
				t.Fatalf("ParseURI(%q) error %v does not wrap ErrNotCareURI", in, err)
			}
		})
	}
}

func TestURI_VersionHelpers(t *testing.T) {
	t.Parallel()
	u := NewURI(AudienceAssistant, "ray", "risk")
	if got := u.WithVersion(2).String(); got != "care-internal://ray/risk/v2" {
		t.Fatalf("WithVersion(2) = %q", got)
	}
	if got := u.WithVersion(2).Unversioned().String(); got != "care-internal://ray/risk" {
		t.Fatalf("Unversioned() = %q", got)
	}
	if u.Key() != "ray/risk" {
		t.Fatalf("Key() = %q", u.Key())
	}
}

// FuzzParseURI: ParseURI never panics, and every accepted string
// round-trips byte for byte and names a partition's audience.
func FuzzParseURI(f *testing.F) {
	for _, s := range []string{
		"care://ray/weight_bearing", "care-internal://ray/risk/v2", "care://ray/weight_bearing/3",
		"care://ray/x/v01", "care://ray//x", "care://ray/x/", "CARE://a/b", "care://a/b?q", "care://a/b#f", "",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		u, err := ParseURI(s)
		if err != nil {
			if !errors.Is(err, ErrNotCareURI) {
				t.Fatalf("ParseURI(%q): error %v does not wrap ErrNotCareURI", s, err)
			}
			return
		}
		if u.String() != s {
			t.Fatalf("ParseURI(%q).String() = %q: not a byte-for-byte round trip", s, u.String())
		}
		if !u.Audience().Valid() {
			t.Fatalf("ParseURI(%q) accepted a scheme with no audience", s)
		}
		if u.Version < 0 {
			t.Fatalf("ParseURI(%q) gave version %d", s, u.Version)
		}
	})
}
