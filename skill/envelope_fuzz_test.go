package skill

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"
)

// FuzzParseEnvelope_DecodesAsEncodingJSONDoes holds ParseEnvelope (the
// segmentio decoder) to encoding/json's semantics on any body: both refuse
// it, or both accept it and decode the same envelope — so the faster
// decoder changes no request's meaning (unknown fields, case-insensitive
// names, duplicate keys, escapes, invalid UTF-8, numbers, nulls).
func FuzzParseEnvelope_DecodesAsEncodingJSONDoes(f *testing.F) {
	for _, o := range []reqOpts{
		{},
		{APL: true, Arguments: []any{"tick", 3, nil, map[string]any{"a": []any{1.5}}}},
		{Type: TypeIntent, Intent: IntentLinkDevice, Slots: map[string]Slot{"code": {Name: "code", Value: "123456"}}},
		{Type: TypeSessionEnded},
		{Type: "AlexaSkillEvent.SkillEnabled", Timestamp: t0.Add(-time.Hour)},
		{Extra: ".déjà vu \u2028 \ufeff"},
	} {
		f.Add(envelope(o))
	}
	for _, s := range []string{
		"", "{", "null", "[]", "{}", `{"request":null}`, `{"REQUEST":{"TYPE":"LaunchRequest"}}`,
		`{"request":{"type":"A"},"request":{"type":"B"}}`,
		`{"request":{"type":"\ud800\u00e9\"\\\/\b\f\n\r\t"}}`,
		"{\"request\":{\"type\":\"\xff\xfe\xc3\x28\"}}",
		`{"request":{"timestamp":"2026-11-29T10:00:00Z","locale":1}}`,
		`{"session":{"new":"true"}}`, `{"session":{"new":true,"attributes":{"x":[1,{"y":null}]}}}`,
		`{"context":{"Viewport":{"pixelWidth":1.5e3}}}`, `{"context":{"Viewport":{"pixelWidth":-0}}}`,
		`{"request":{}} trailing`, `{"request":{}}{}`, " \n{\"version\":\"1.0\"}\t",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		want := new(RequestEnvelope)
		wantErr := json.Unmarshal(body, want)
		got, gotErr := ParseEnvelope(body)
		if (wantErr == nil) != (gotErr == nil) {
			t.Fatalf("encoding/json err %v, ParseEnvelope err %v, for %q", wantErr, gotErr, body)
		}
		if wantErr == nil && !reflect.DeepEqual(got, want) {
			t.Fatalf("decoded differently from encoding/json for %q:\n got %+v\nwant %+v", body, got, want)
		}
	})
}
