package bridge

import (
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// P-2's golden file: what every channel answers a speakable-scope caller
// for a URI it may not read, one that does not exist, one that is
// malformed and a version that does not exist — read, subscribe, a list
// cursor the server did not issue, and /verify — with the asked URI (or
// cursor) written as {asked}. Within each group of one channel every case
// must have the same shape, so the answer tells the caller nothing about
// why; the file pins the shapes themselves. Regenerate with:
// go test ./bridge -run ErrorShapes -update
const errorShapesGolden = "testdata/p2_error_shapes.golden.json"

// errorShape is one answer, normalized.
type errorShape struct {
	Channel string          `json:"channel"`
	Case    string          `json:"case"`
	Group   string          `json:"group"` // cases that must not be told apart
	Status  int             `json:"status,omitempty"`
	Answer  json.RawMessage `json:"answer"` // the JSON-RPC error, or the HTTP body
}

// normalize replaces asked (JSON-escaped as it is on the wire) by {asked}
// and re-indents the JSON.
func normalize(t *testing.T, raw []byte, asked string) json.RawMessage {
	t.Helper()
	esc, _ := json.Marshal(asked)
	s := string(raw)
	if asked != "" {
		s = strings.ReplaceAll(s, strings.Trim(string(esc), `"`), "{asked}")
	}
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("not JSON: %v: %s", err, raw)
	}
	out, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestErrorShapes_P2_EveryChannelAnswersTheSameGoldenShapes(t *testing.T) {
	h := newHarness(t)
	tok := h.token("host", userScopes)
	sid := h.rawInit(tok)

	unreadable := []struct{ name, uri string }{
		{"forbidden", "care-internal://ray/risk"},
		{"forbidden through the speakable scheme", "care://ray/risk"},
		{"absent", "care://ray/nonsense"},
		{"another patient's", "care://someone/weight_bearing"},
		{"malformed", "care://ray/weight_bearing/3"},
		{"unknown scheme", "app://nope"},
	}
	versions := []struct{ name, uri string }{
		{"missing version", "care://ray/weight_bearing/v9"},
		{"forbidden version", "care-internal://ray/risk/v1"},
	}
	var got []errorShape
	id := 10
	call := func(channel, group, name, method, params, asked string) {
		t.Helper()
		id++
		frame := h.rawCall(tok, sid, id, method, params)
		e, ok := frame["error"]
		if !ok {
			t.Errorf("%s %s (%s): no error in %v", channel, name, asked, frame)
			return
		}
		raw, _ := json.Marshal(e)
		got = append(got, errorShape{Channel: channel, Case: name, Group: group, Answer: normalize(t, raw, asked)})
	}
	q := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	for _, c := range append(unreadable, versions...) {
		call("resources/read", "not found", c.name, "resources/read", `{"uri":`+q(c.uri)+`}`, c.uri)
	}
	// A subscription names a fact, by its canonical unversioned URI: one
	// shaped like a care URI but not canonical (a version, existing or not;
	// a malformed path) is refused for its shape alone, the same whether
	// anything exists behind it; anything else unreadable is not found.
	for _, c := range unreadable {
		group := "not found"
		if c.name == "malformed" {
			group = "not canonical"
		}
		call("resources/subscribe", group, c.name, "resources/subscribe", `{"uri":`+q(c.uri)+`}`, c.uri)
	}
	for _, c := range append(versions, struct{ name, uri string }{"existing version", "care://ray/weight_bearing/v1"}) {
		call("resources/subscribe", "not canonical", c.name, "resources/subscribe", `{"uri":`+q(c.uri)+`}`, c.uri)
	}
	first := h.rawCall(tok, sid, 2, "resources/list", `{}`)
	next, _ := first["result"].(map[string]any)["nextCursor"].(string)
	if next == "" {
		t.Fatalf("the first page issued no cursor: %v", first)
	}
	for _, c := range []struct{ name, cursor string }{
		{"never issued", "bogus"},
		{"tampered", next[:len(next)-2] + map[bool]string{true: "BB", false: "AA"}[strings.HasSuffix(next, "AA")]},
		{"naming an internal URI", "c1.Y2FyZS1pbnRlcm5hbDovL3JheS9yaXNr.AAAA"},
		{"a URI, not a cursor", "care://ray/contact"},
	} {
		call("resources/list cursor", "not issued", c.name, "resources/list", `{"cursor":`+q(c.cursor)+`}`, c.cursor)
	}
	for _, c := range append(unreadable, versions...) {
		r := h.do("GET", "/verify?uri="+url.QueryEscape(c.uri), tok, nil, "")
		got = append(got, errorShape{Channel: "GET /verify", Case: c.name, Group: "not found", Status: r.status, Answer: normalize(t, r.body, c.uri)})
	}

	// The property, whatever the file says: one shape per group.
	first0 := map[string]errorShape{}
	for _, g := range got {
		k := g.Channel + " / " + g.Group
		f, seen := first0[k]
		if !seen {
			first0[k] = g
			continue
		}
		if d := cmp.Diff(string(f.Answer), string(g.Answer)); d != "" || f.Status != g.Status {
			t.Errorf("%s: %q and %q are told apart (status %d vs %d):\n%s", k, f.Case, g.Case, f.Status, g.Status, d)
		}
	}
	if first0["GET /verify / not found"].Status != http.StatusNotFound {
		t.Errorf("/verify answered %d, want 404", first0["GET /verify / not found"].Status)
	}

	out, err := json.MarshalIndent(got, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	out = append(out, '\n')
	if goldenUpdate() {
		if err := os.MkdirAll(filepath.Dir(errorShapesGolden), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(errorShapesGolden, out, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(errorShapesGolden)
	if err != nil {
		t.Fatalf("%v (run go test ./bridge -run ErrorShapes -update)", err)
	}
	if d := cmp.Diff(string(want), string(out)); d != "" {
		t.Errorf("the error shapes differ from %s (-want +got); if the change is meant, run go test ./bridge -run ErrorShapes -update\n%s", errorShapesGolden, d)
	}
}
