package cmd

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/unsay/unsay/store"
)

// TestAsk_APLVersionThatIsNoneIsRefusedNamingTheValidOnes: `--apl-version
// banana` was sent as runtime.maxVersion. It is refused before anything
// is sent (exit 2), naming the flag, the value and the versions it takes;
// the twins — an older Echo Show's 1.6 and a year version — are asked.
func TestAsk_APLVersionThatIsNoneIsRefusedNamingTheValidOnes(t *testing.T) {
	for _, v := range []string{"banana", "", "1.10", "2024", "7.0", "2024.3 ", "2021.9", "2020.1", "2022.0"} {
		r := unsay(t, nil, "ask", "--url", "http://127.0.0.1:1", "--apl-version", v, "open care notes")
		if r.code != 2 || r.stdout != "" {
			t.Errorf("--apl-version %q: exit %d, stdout %q; want 2 and nothing asked", v, r.code, r.stdout)
		}
		for _, w := range []string{"--apl-version", "1.0 to 1.9", "2022.1"} {
			if !strings.Contains(r.stderr, w) {
				t.Errorf("--apl-version %q: message lacks %q: %s", v, w, r.stderr)
			}
		}
	}
	s := startServe(t)
	for _, v := range []string{"1.6", "2022.1", "2023.2", "2024.3"} {
		r := unsay(t, nil, "ask", "--url", s.url, "--apl-version", v, "open care notes")
		if r.code != 0 || !strings.Contains(r.stdout, "Ray hears:") {
			t.Errorf("--apl-version %s: exit %d\n%s%s", v, r.code, r.stdout, r.stderr)
		}
	}
}

// TestWrite_StaleAfterNowOrInThePastIsRefusedAtTheFlag: `--stale-after
// -1h` (or a date gone by) made an instruction past its review date the
// moment it was written. Refused (exit 2) naming the flag and the forms it
// takes; nothing is sent.
func TestWrite_StaleAfterNowOrInThePastIsRefusedAtTheFlag(t *testing.T) {
	for _, v := range []string{"-1h", "0s", "2020-01-01T00:00:00Z", "tomorrow"} {
		r := unsay(t, nil, "write", "--url", "http://127.0.0.1:1", "--patient", "ray", "--domain", "weight_bearing",
			"--value", "Full weight-bearing as tolerated.", "--author", "okafor", "--author-label", "Sarah Okafor, physio", "--stale-after", v)
		if r.code != 2 {
			t.Errorf("--stale-after %s: exit %d, want 2: %s", v, r.code, r.stderr)
		}
		for _, w := range []string{"--stale-after", v, "a time in the future", "a positive duration from now (72h)"} {
			if !strings.Contains(r.stderr, w) {
				t.Errorf("--stale-after %s: message lacks %q: %s", v, w, r.stderr)
			}
		}
	}
}

// TestParseStaleAfter_TakesAFutureTimeOrAPositiveDuration: the twins of
// the refusals above, and the refusals themselves, at a fixed now.
func TestParseStaleAfter_TakesAFutureTimeOrAPositiveDuration(t *testing.T) {
	now := time.Date(2026, 10, 9, 9, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		in, want string
		ok       bool
	}{
		{"72h", "2026-10-12T09:00:00Z", true},
		{"1m", "2026-10-09T09:01:00Z", true},
		{"2026-10-12T09:00:00Z", "2026-10-12T09:00:00Z", true},
		{"2026-10-12T10:00:00+01:00", "2026-10-12T10:00:00+01:00", true},
		{"-1h", "", false},
		{"0s", "", false},
		{"2026-10-09T09:00:00Z", "", false}, // now is not after now
		{"2020-01-01T00:00:00Z", "", false},
		{"next week", "", false},
	} {
		got, err := parseStaleAfter(tc.in, now)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("parseStaleAfter(%q) = %q, %v; want %q (ok %v)", tc.in, got, err, tc.want, tc.ok)
		}
	}
}

// TestWrite_AWriteSecretUnder32BytesIsRefusedBeforeSending: a short
// UNSAY_WRITE_SECRET got the server's "401 signature does not match" — no
// hint that serve refuses such a secret, so no server can hold it. Now
// exit 2 saying so, nothing sent; the twin: a 32-byte secret that is not
// the server's is sent and refused by the server (exit 1, its words).
func TestWrite_AWriteSecretUnder32BytesIsRefusedBeforeSending(t *testing.T) {
	s := startServe(t)
	args := []string{"write", "--url", s.url, "--patient", "ray", "--domain", "weight_bearing",
		"--value", "Full weight-bearing as tolerated.", "--author", "okafor", "--author-label", "Sarah Okafor, physio"}
	short := unsay(t, []string{"UNSAY_WRITE_SECRET=short"}, args...)
	if short.code != 2 || !strings.Contains(short.stderr, "UNSAY_WRITE_SECRET is 5 bytes") || !strings.Contains(short.stderr, "under 32 bytes") {
		t.Errorf("short secret: exit %d, %q; want 2 naming the 32-byte minimum", short.code, short.stderr)
	}
	other := unsay(t, []string{"UNSAY_WRITE_SECRET=" + strings.Repeat("x", 32)}, args...)
	if other.code != 1 || !strings.Contains(other.stderr, "401") || strings.Contains(other.stderr, "under 32 bytes") {
		t.Errorf("a 32-byte secret not the server's: exit %d, %q; want the server's 401", other.code, other.stderr)
	}
}

// TestToken_ATTLBeyondTheCapIsRefusedNamingIt: `--ttl 100000h` minted an
// 11-year development token without comment, and with --db a ttl over a
// day failed with the authorization server's own words. Both are refused
// at the flag (exit 2, no token) naming the cap; the twins at the caps
// mint a token living that long.
func TestToken_ATTLBeyondTheCapIsRefusedNamingIt(t *testing.T) {
	db := filepath.Join(t.TempDir(), "unsay.db")
	st, err := store.Open(t.Context(), store.Options{DSN: db, AuditKey: []byte(store.DevAuditKey)})
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--ttl", "100000h"}, "at most 720h (30 days)"},
		{[]string{"--ttl", "721h"}, "at most 720h (30 days)"},
		{[]string{"--ttl", "25h", "--db", db}, "at most 24h"},
	} {
		r := unsay(t, nil, append([]string{"token", "--patient", "ray", "--scope", "care.read.user", "--sub", "t"}, tc.args...)...)
		if r.code != 2 || r.stdout != "" || !strings.Contains(r.stderr, "--ttl") || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%v: exit %d, stdout %q, %q; want 2, no token, naming %q", tc.args, r.code, r.stdout, r.stderr, tc.want)
		}
	}
	for _, tc := range []struct {
		args []string
		life time.Duration
	}{
		{[]string{"--ttl", "720h"}, 720 * time.Hour},
		{[]string{"--ttl", "24h", "--db", db}, 24 * time.Hour},
	} {
		r := unsay(t, nil, append([]string{"token", "--patient", "ray", "--scope", "care.read.user", "--sub", "t"}, tc.args...)...)
		if r.code != 0 {
			t.Fatalf("%v: exit %d, %s", tc.args, r.code, r.stderr)
		}
		c := jwtClaims(t, r.stdout)
		exp, iat := c["exp"].(float64), c["iat"].(float64)
		if got := time.Duration(exp-iat) * time.Second; got != tc.life {
			t.Errorf("%v: the token lives %s, want %s", tc.args, got, tc.life)
		}
	}
}

// TestToken_ASubjectNoAuthorIDCanMatchIsRefusedAtTheFlag: `--sub 'bad sub'`
// minted a token whose subject can never equal an authorId. Refused (exit
// 2, no token) naming the flag and the characters it takes; the twins
// (okafor, an email-like subject) mint a token.
func TestToken_ASubjectNoAuthorIDCanMatchIsRefusedAtTheFlag(t *testing.T) {
	for _, tc := range []struct {
		sub string
		ok  bool
	}{
		{"bad sub", false},
		{"Okafor", false},
		{"a|b", false},
		{strings.Repeat("a", 65), false},
		{"okafor", true},
		{"sarah.okafor@clinic:physio-1", true},
	} {
		r := unsay(t, nil, "token", "--patient", "ray", "--scope", "care.write", "--sub", tc.sub)
		if tc.ok {
			if r.code != 0 || strings.Count(strings.TrimSpace(r.stdout), ".") != 2 {
				t.Errorf("--sub %q: exit %d, stdout %q, %s; want a token", tc.sub, r.code, r.stdout, r.stderr)
			}
			continue
		}
		if r.code != 2 || r.stdout != "" || !strings.Contains(r.stderr, "--sub") || !strings.Contains(r.stderr, "a-z 0-9 _ . @ : -") {
			t.Errorf("--sub %q: exit %d, stdout %q, %q; want 2, no token, naming the flag and its characters", tc.sub, r.code, r.stdout, r.stderr)
		}
	}
}
