package skill

import (
	"context"
	"crypto/x509"
	"errors"
	"net/http"
	"testing"
	"time"
)

// FuzzVerifyRequestBody signs whatever body the fuzzer makes with the test
// leaf key and verifies it as a request from Alexa. Whatever the body:
// Verify does not panic; a refusal wraps one of the verification errors;
// an accepted body is this skill's (applicationId), within the timestamp
// window, and its parsed envelope answers the helpers the handler uses.
// Bodies are refused before any download when they do not parse or are
// for another skill (the fetch count stays at one: the chain, cached).
func FuzzVerifyRequestBody(f *testing.F) {
	p := getPKI(f)
	for _, o := range []reqOpts{
		{},
		{Type: TypeIntent, Intent: "WhatsChangedIntent"},
		{Type: TypeIntent, Intent: IntentLinkDevice, Slots: map[string]Slot{"code": {Name: "code", Value: "123456"}}},
		{Type: TypeSessionEnded},
		{Type: "AlexaSkillEvent.SkillEnabled", Timestamp: t0.Add(-time.Hour)},
		{APL: true, Arguments: []any{"tick"}},
		{SkillID: "amzn1.ask.skill.other"},
		{Timestamp: t0.Add(-151 * time.Second)},
		{Extra: ".déjà vu \u2028"},
	} {
		f.Add(envelope(o))
	}
	for _, s := range []string{"", "{", "null", "[]", `{"request":{"timestamp":"2026-11-29T10:00:00Z"}}`, `{"version":"1.0","request":null,"context":null}`} {
		f.Add([]byte(s))
	}
	roots := x509.NewCertPool()
	roots.AddCert(p.root)
	fetcher := &countingFetcher{pem: p.chainPEM}
	v, err := NewVerifier(VerifierConfig{SkillID: testSkillID, Roots: roots, Fetcher: fetcher, Clock: func() time.Time { return t0 }})
	if err != nil {
		f.Fatal(err)
	}
	sentinels := []error{ErrMissingHeader, ErrCertURL, ErrCertificate, ErrSignature, ErrMalformed, ErrTimestamp, ErrSkillID, ErrReplay}
	f.Fuzz(func(t *testing.T, body []byte) {
		h := http.Header{}
		h.Set(HeaderCertChainURL, testCertURL)
		// A wrong signature first (cheap): only a body that passes every check
		// before the signature is worth an RSA signature.
		h.Set(HeaderSignature256, "c2lnbmF0dXJl")
		env, err := v.Verify(context.Background(), h, body)
		if env != nil {
			t.Fatalf("a body with a wrong signature was accepted: %q", body)
		}
		if errors.Is(err, ErrSignature) {
			h.Set(HeaderSignature256, p.sign(body))
			env, err = v.Verify(context.Background(), h, body)
		}
		if n := fetcher.n.Load(); n > 1 {
			t.Fatalf("%d certificate downloads for one URL", n)
		}
		if err != nil {
			if env != nil {
				t.Fatalf("a refusal (%v) returned an envelope", err)
			}
			known := false
			for _, s := range sentinels {
				known = known || errors.Is(err, s)
			}
			if !known {
				t.Fatalf("refusal %v wraps no verification error", err)
			}
			return
		}
		if got := env.Context.System.Application.ApplicationID; got != testSkillID {
			t.Fatalf("accepted a request for skill %q", got)
		}
		ts, perr := time.Parse(time.RFC3339, env.Request.Timestamp)
		tol := TimestampTolerance
		if env.Request.IsSkillEvent() {
			tol = SkillEventTolerance
		}
		if perr != nil || ts.Sub(t0) > tol || t0.Sub(ts) > tol {
			t.Fatalf("accepted timestamp %q outside ±%s of %s", env.Request.Timestamp, tol, t0)
		}
		_ = env.SupportsAPL()
		_ = env.UserID()
		_ = env.SessionID()
		_ = env.Request.FirstArgument()
		// The same authentic body with one flipped byte is refused.
		if len(body) > 0 {
			bad := []byte(string(body))
			bad[len(bad)/2] ^= 0x01
			if _, err := v.Verify(context.Background(), h, bad); err == nil && string(bad) != string(body) {
				t.Fatalf("a body altered after signing was accepted: %q", bad)
			}
		}
	})
}
