package httpapi

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/unsay/unsay/models"
	"github.com/unsay/unsay/store"
)

// FuzzWriteBody drives the /write body through the HTTP layer's shape
// check and the store's one validator, as handleWrite does. The corpus is
// committed in testdata/fuzz/FuzzWriteBody; run it longer with
//
//	go test -run '^$' -fuzz FuzzWriteBody -fuzztime 60s ./bridge/httpapi/
//
// Properties: nothing panics; every refusal names a documented field (or
// "body") and never quotes the value; whatever passes holds only
// characters XML 1.0 allows in its value, label and domain, a speakable
// value within models.MaxSpeakableValueRunes, and survives a re-encoding
// unchanged (the server means what the signed bytes say).
func FuzzWriteBody(f *testing.F) {
	for _, seed := range []string{
		string(writeBody(nil)),
		string(writeBody(func(m map[string]any) { m["staleAfter"], m["priority"] = "2026-10-09T09:00:00Z", 0.5 })),
		string(writeBody(func(m map[string]any) { m["audience"] = "assistant" })),
		`{"patient":"ray","domain":"weight_bearing","audience":"user","value":"a\u0000b","authorId":"okafor","authorLabel":"S"}`,
		`{"patient":"ray","domain":"weight_bearing","audience":"user","value":"\ud800","authorId":"okafor","authorLabel":"S"}`,
		`{"patient":"ray","domain":"weight_bearing","audience":"user","value":"\ud83e\uddb5","authorId":"okafor","authorLabel":"S"}`,
		`{"patient":"ray","PATIENT":"bob","domain":"d","audience":"user","value":"v","authorId":"a","authorLabel":"S"}`,
		`{"patient":"ray","patient":"bob"}`,
		`{"value":"` + strings.Repeat("é", models.MaxSpeakableValueRunes+1) + `"}`,
		`{"priority":"high"}`,
		`{"staleAfter":"tomorrow"}`,
		`[1,2,3]`, `null`, `{}`, `{"patient":"ray"} {}`, "{\"value\":\"\xff\"}",
	} {
		f.Add([]byte(seed))
	}
	fields := map[string]bool{"body": true}
	for k := range writeKeys {
		fields[k] = true
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, verr := parseWriteRequest(body)
		if verr != nil {
			// An unknown key is named as sent (when short and printable);
			// anything else names a documented field or "body".
			if verr.Field == "" || len(verr.Field) > 64 || !utf8.ValidString(verr.Field) {
				t.Fatalf("refusal names field %q", verr.Field)
			}
			if !fields[verr.Field] && !strings.HasPrefix(verr.Reason, "unknown field") {
				t.Fatalf("refusal names undocumented field %q: %s", verr.Field, verr.Reason)
			}
			return
		}
		in, verr := req.input()
		if verr != nil {
			t.Fatalf("input() refused what parseWriteRequest accepted: %v", verr)
		}
		valid, err := store.Validate(in)
		var ve *store.ValidationError
		if err != nil {
			if !errors.As(err, &ve) || !fields[ve.Field] {
				t.Fatalf("Validate = %v, want a ValidationError naming a documented field", err)
			}
			if len(in.Value) >= 16 && strings.Contains(ve.Reason, in.Value) {
				t.Fatalf("the refusal quotes the value: %q", ve.Reason)
			}
			return
		}
		for name, s := range map[string]string{"value": valid.Value, "authorLabel": valid.AuthorLabel, "domain": valid.Domain} {
			if !xmlText(s) {
				t.Fatalf("%s %q passed with a character XML 1.0 forbids", name, s)
			}
		}
		if valid.Audience == models.AudienceUser && utf8.RuneCountInString(valid.Value) > models.MaxSpeakableValueRunes {
			t.Fatalf("a speakable value of %d characters passed", utf8.RuneCountInString(valid.Value))
		}
		again, err := json.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		req2, verr := parseWriteRequest(again)
		if verr != nil {
			t.Fatalf("re-encoded request refused: %v", verr)
		}
		samePriority := (req.Priority == nil) == (req2.Priority == nil) && (req.Priority == nil || *req.Priority == *req2.Priority)
		if !samePriority || req2.Value != req.Value || req2.AuthorLabel != req.AuthorLabel || req2.AuthorID != req.AuthorID ||
			req2.Patient != req.Patient || req2.Domain != req.Domain || req2.Audience != req.Audience || req2.StaleAfter != req.StaleAfter {
			t.Fatalf("re-encoded request parses differently: %+v vs %+v", req2, req)
		}
	})
}

// xmlText is the XML 1.0 Char production, written independently of the
// store's check.
func xmlText(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		ok := r == 0x9 || r == 0xA || r == 0xD || r >= 0x20 && r <= 0xD7FF || r >= 0xE000 && r <= 0xFFFD || r >= 0x10000 && r <= 0x10FFFF
		if !ok {
			return false
		}
	}
	return true
}
