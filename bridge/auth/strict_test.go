package auth

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/unsay/unsay/models"
)

// rawHS256 signs a hand-written header and payload (so both can break JSON
// rules a library would never emit) with the test secret.
func rawHS256(header, payload string) string {
	enc := base64.RawURLEncoding
	signing := enc.EncodeToString([]byte(header)) + "." + enc.EncodeToString([]byte(payload))
	mac := hmac.New(sha256.New, []byte(testSecret))
	mac.Write([]byte(signing))
	return signing + "." + enc.EncodeToString(mac.Sum(nil))
}

// TestVerify_RefusesStringDatesCritHeadersAndDuplicateClaims: the
// smaller ones, each signed correctly so only the rule can refuse it, each
// next to its valid twin.
func TestVerify_RefusesStringDatesCritHeadersAndDuplicateClaims(t *testing.T) {
	t.Parallel()
	v := newVerifier(t, testConfig())
	exp := testNow.Add(time.Hour).Unix()
	num := func(n int64) string { return strconv.FormatInt(n, 10) }
	payload := func(extra string) string {
		return `{"sub":"okafor","aud":"` + testURL + `/mcp","exp":` + num(exp) + `,"scope":"care.read.user","patients":["ray"]` + extra + `}`
	}
	stdHeader := `{"alg":"HS256","typ":"JWT"}`
	cases := []struct {
		name    string
		header  string
		payload string
		wantErr bool
	}{
		{"valid", stdHeader, payload(""), false},
		{"exp as a string", stdHeader, strings.Replace(payload(""), `"exp":`+num(exp), `"exp":"`+num(exp)+`"`, 1), true},
		{"nbf as a string", stdHeader, payload(`,"nbf":"` + num(testNow.Unix()) + `"`), true},
		{"nbf as a number", stdHeader, payload(`,"nbf":` + num(testNow.Unix())), false},
		{"iat as a string", stdHeader, payload(`,"iat":"` + num(testNow.Unix()) + `"`), true},
		{"crit header naming an extension", `{"alg":"HS256","typ":"JWT","crit":["exp"]}`, payload(""), true},
		{"an unknown header without crit", `{"alg":"HS256","typ":"JWT","x-ext":1}`, payload(""), false},
		{"duplicate scope, the second wider", stdHeader, payload(`,"scope":"care.read.user care.read.assistant"`), true},
		{"duplicate sub", stdHeader, payload(`,"sub":"mallory"`), true},
		{"duplicate inside a nested object", stdHeader, payload(`,"cnf":{"a":1,"a":2}`), true},
		{"the same name in two nested objects", stdHeader, payload(`,"x":{"a":1},"y":{"a":2}`), false},
		{"duplicate header member", `{"alg":"HS256","alg":"none"}`, payload(""), true},
		{"payload is an array", stdHeader, `[` + payload("") + `]`, true},
		{"data after the payload object", stdHeader, payload("") + `{}`, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := v.Verify(t.Context(), rawHS256(tc.header, tc.payload), nil)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tc.wantErr)
			}
		})
	}
}

func TestVerify_RefusesAnOversizedTokenBeforeDecoding(t *testing.T) {
	t.Parallel()
	v := newVerifier(t, testConfig())
	big := rawHS256(`{"alg":"HS256"}`, `{"pad":"`+strings.Repeat("a", MaxTokenBytes)+`"}`)
	if _, err := v.Verify(t.Context(), big, nil); err == nil || !strings.Contains(err.Error(), "over") {
		t.Fatalf("oversized token: %v", err)
	}
}

// The cap's twin, at the size it exists for: the speech principal's own
// token bound to 1,000 patients with 36-character ids is under it and
// verifies, naming them all (P-18: one server follows that many patients).
func TestVerify_ATokenBoundToAThousandPatientsIsUnderTheCapAndVerifies(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	v := newVerifier(t, cfg)
	patients := make([]string, 1000)
	for i := range patients {
		patients[i] = fmt.Sprintf("patient-%028d", i)
	}
	tok, err := Mint(cfg, "unsay-speech", []models.Scope{models.ScopeReadUser}, patients, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if len(tok) > MaxTokenBytes {
		t.Fatalf("token of %d bytes is over the %d-byte cap", len(tok), MaxTokenBytes)
	}
	ti, err := v.Verify(t.Context(), tok, nil)
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	if p, ok := PrincipalOf(ti); !ok || len(p.Patients) != len(patients) || !p.CanAccessPatient(patients[999]) {
		t.Errorf("principal %+v (ok %v): want bound to all %d patients", p.Subject, ok, len(patients))
	}
}
