package speech

import (
	"errors"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/unsay/unsay/models"
)

func readResult(uri, text string, meta mcp.Meta) *mcp.ReadResourceResult {
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: uri, Text: text, Meta: meta}}}
}

func goodMeta(version int) mcp.Meta {
	return mcp.Meta{
		"unsay/version":      float64(version), // as decoded from JSON
		"unsay/versionHash":  "ab",
		"unsay/prevHash":     "",
		"unsay/audience":     "user",
		"unsay/lastModified": "2026-03-02T09:00:00.000Z",
		"unsay/stale":        false,
		"unsay/author":       map[string]any{"authorId": "okafor", "authorLabel": "Sarah Okafor, physio"},
	}
}

func with(m mcp.Meta, k string, v any) mcp.Meta {
	out := mcp.Meta{}
	for key, val := range m {
		out[key] = val
	}
	if v == nil {
		delete(out, k)
	} else {
		out[k] = v
	}
	return out
}

func TestParseRead_ReadsTheMetaShape(t *testing.T) {
	now := time.Date(2026, 3, 3, 0, 0, 0, 0, time.UTC)
	v, err := parseRead(mustURI(t, wb), readResult(wb, "Full weight-bearing as tolerated.", goodMeta(2)), now)
	if err != nil {
		t.Fatal(err)
	}
	want := models.Version{Patient: "ray", Domain: "weight_bearing", N: 2, Audience: models.AudienceUser,
		Value: "Full weight-bearing as tolerated.", AuthorID: "okafor", AuthorLabel: "Sarah Okafor, physio",
		WrittenAt: time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC), Hash: "ab"}
	if v.Version != want {
		t.Fatalf("got %+v\nwant %+v", v.Version, want)
	}
	if v.Stale || v.IsStale(now) {
		t.Fatal("a fresh fact reads as stale")
	}
}

func TestParseRead_StripsTheStaleHeaderAndKeepsStaleness(t *testing.T) {
	now := time.Date(2026, 3, 9, 0, 0, 0, 0, time.UTC)
	header := "[STALE — last changed six days ago by Sarah Okafor, physio; say this age aloud]"
	for _, sep := range []string{" ", "\n", "\n\n"} {
		v, err := parseRead(mustURI(t, wb), readResult(wb, header+sep+"Partial weight-bearing.", with(goodMeta(1), "unsay/stale", true)), now)
		if err != nil {
			t.Fatal(err)
		}
		if v.Value != "Partial weight-bearing." {
			t.Errorf("sep %q: value = %q", sep, v.Value)
		}
		if !v.Stale || !v.IsStale(now) {
			t.Errorf("sep %q: staleness lost: %+v", sep, v)
		}
	}
	// With the server's staleAfter, it is kept exactly.
	sa := "2026-03-05T00:00:00.000Z"
	v, err := parseRead(mustURI(t, wb), readResult(wb, header+" x", with(with(goodMeta(1), "unsay/stale", true), "unsay/staleAfter", sa)), now)
	if err != nil {
		t.Fatal(err)
	}
	if !v.StaleAfter.Equal(time.Date(2026, 3, 5, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("StaleAfter = %v", v.StaleAfter)
	}
}

func TestParseRead_StripsSupersededOnlyWhereTheServerPutsIt(t *testing.T) {
	now := time.Now()
	v1 := wb + "/v1"
	got, err := parseRead(mustURI(t, v1), readResult(v1, "[SUPERSEDED — version 1 of 3]\nPartial weight-bearing.", goodMeta(1)), now)
	if err != nil {
		t.Fatal(err)
	}
	if got.Value != "Partial weight-bearing." {
		t.Errorf("versioned read value = %q", got.Value)
	}
	// Twin: a current, fresh value is the clinician's text as written, even
	// if it happens to start with a bracket.
	got, err = parseRead(mustURI(t, wb), readResult(wb, "[SUPERSEDED] is what the note says", goodMeta(3)), now)
	if err != nil {
		t.Fatal(err)
	}
	if got.Value != "[SUPERSEDED] is what the note says" {
		t.Errorf("current read value = %q", got.Value)
	}
}

func TestParseRead_AuthorShapes(t *testing.T) {
	tests := []struct {
		name      string
		meta      mcp.Meta
		id, label string
	}{
		{"object", goodMeta(1), "okafor", "Sarah Okafor, physio"},
		{"object with id/label", with(goodMeta(1), "unsay/author", map[string]any{"id": "okafor", "label": "Sarah Okafor, physio"}), "okafor", "Sarah Okafor, physio"},
		{"JSON string", with(goodMeta(1), "unsay/author", `{"authorId":"okafor","authorLabel":"Sarah Okafor, physio"}`), "okafor", "Sarah Okafor, physio"},
		{"plain string is the label", with(goodMeta(1), "unsay/author", "Sarah Okafor, physio"), "", "Sarah Okafor, physio"},
		{"flat keys", with(with(with(goodMeta(1), "unsay/author", nil), "unsay/authorId", "okafor"), "unsay/authorLabel", "Sarah Okafor, physio"), "okafor", "Sarah Okafor, physio"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, err := parseRead(mustURI(t, wb), readResult(wb, "x", tt.meta), time.Now())
			if err != nil {
				t.Fatal(err)
			}
			if v.AuthorID != tt.id || v.AuthorLabel != tt.label {
				t.Errorf("author = %q/%q, want %q/%q", v.AuthorID, v.AuthorLabel, tt.id, tt.label)
			}
		})
	}
}

func TestParseRead_RefusesWhatItCannotSpeakSafely(t *testing.T) {
	tests := []struct {
		name  string
		asked string
		res   *mcp.ReadResourceResult
	}{
		{"assistant audience under a care:// URI", wb, readResult(wb, "x", with(goodMeta(1), "unsay/audience", "assistant"))},
		{"no audience", wb, readResult(wb, "x", with(goodMeta(1), "unsay/audience", nil))},
		{"another version than asked", wb + "/v1", readResult(wb+"/v1", "x", goodMeta(2))},
		{"no version", wb, readResult(wb, "x", with(goodMeta(1), "unsay/version", nil))},
		{"fractional version", wb, readResult(wb, "x", with(goodMeta(1), "unsay/version", 1.5))},
		{"bad lastModified", wb, readResult(wb, "x", with(goodMeta(1), "unsay/lastModified", "yesterday"))},
		{"no author", wb, readResult(wb, "x", with(goodMeta(1), "unsay/author", nil))},
		{"contents of another fact", wb, readResult("care://ray/anticoagulant", "x", goodMeta(1))},
		{"no contents", wb, &mcp.ReadResourceResult{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseRead(mustURI(t, tt.asked), tt.res, time.Now())
			if !errors.Is(err, ErrBadResource) {
				t.Fatalf("err = %v, want ErrBadResource", err)
			}
		})
	}
	// Positive twin: the good shape is accepted for the same URIs.
	for _, asked := range []string{wb, wb + "/v1"} {
		if _, err := parseRead(mustURI(t, asked), readResult(asked, "x", goodMeta(1)), time.Now()); err != nil {
			t.Errorf("%s: %v", asked, err)
		}
	}
}

func TestBackoff_DelayGrowsWithJitterWithinBounds(t *testing.T) {
	b := Backoff{Min: 200 * time.Millisecond, Max: 10 * time.Second}
	for n := 0; n < 12; n++ {
		ceil := min(b.Min<<n, b.Max)
		for range 50 {
			d := b.Delay(n)
			if d < ceil/2 || d > ceil {
				t.Fatalf("Delay(%d) = %s, want in [%s, %s]", n, d, ceil/2, ceil)
			}
		}
	}
}

// The shapes bridge/resources.go serves: author label as a string, the id
// flat, latestVersion, headers on their own line.
func TestParseRead_TheBridgeShapes(t *testing.T) {
	now := time.Date(2026, 3, 9, 0, 0, 0, 0, time.UTC)
	bridge := func(n, latest int, stale bool) mcp.Meta {
		m := with(with(goodMeta(n), "unsay/author", "Sarah Okafor, physio"), "unsay/authorId", "okafor")
		m = with(m, "unsay/latestVersion", float64(latest))
		return with(m, "unsay/stale", stale)
	}
	tests := []struct {
		name, asked, text string
		meta              mcp.Meta
		value             string
		stale             bool
	}{
		{"superseded", wb + "/v1", "[SUPERSEDED — this is version 1; version 2 is current at care://ray/weight_bearing; do not speak this as current]\nPartial.", bridge(1, 2, false), "Partial.", false},
		{"stale current", wb, "[STALE — last changed six days ago by Sarah Okafor, physio; say this age aloud]\nFull.", bridge(2, 2, true), "Full.", true},
		{"stale latest read by version", wb + "/v2", "[STALE — last changed six days ago by Sarah Okafor, physio; say this age aloud]\nFull.", bridge(2, 2, true), "Full.", true},
		{"latest read by version keeps a bracketed value", wb + "/v2", "[Ward 4] call first.", bridge(2, 2, false), "[Ward 4] call first.", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, err := parseRead(mustURI(t, tt.asked), readResult(tt.asked, tt.text, tt.meta), now)
			if err != nil {
				t.Fatal(err)
			}
			if v.Value != tt.value || v.Stale != tt.stale || v.IsStale(now) != tt.stale {
				t.Errorf("got value %q stale %v/%v, want %q %v", v.Value, v.Stale, v.IsStale(now), tt.value, tt.stale)
			}
			if v.AuthorID != "okafor" || v.AuthorLabel != "Sarah Okafor, physio" {
				t.Errorf("author %q/%q", v.AuthorID, v.AuthorLabel)
			}
		})
	}
}
