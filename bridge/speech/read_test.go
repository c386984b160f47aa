package speech

import (
	"encoding/json"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/unsay/unsay/models"
)

func readResult(uri, text string, meta mcp.Meta) *mcp.ReadResourceResult {
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: uri, Text: text, Meta: meta}}}
}

// goodMeta is the read contract for version n of 3 of a fact, after a JSON
// round trip (numbers are float64), as the server writes it.
func goodMeta(t testing.TB, n int) mcp.Meta {
	t.Helper()
	v := models.Version{Patient: "ray", Domain: "weight_bearing", N: n, Audience: models.AudienceUser, Value: "x",
		AuthorID: "okafor", AuthorLabel: "Sarah Okafor, physio", WrittenAt: time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC), Hash: "ab"}
	b, err := json.Marshal(models.NewReadMeta(v, 3, time.Date(2026, 3, 3, 0, 0, 0, 0, time.UTC)).Map())
	if err != nil {
		t.Fatal(err)
	}
	var m mcp.Meta
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
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

// The golden file bridge/testdata/read_contract.golden.json is what the
// real MCP server writes (go test ./bridge -run Golden -update): the speech
// side decodes each of its reads to the value the clinician wrote, with
// the staleness the server judged.
func TestParseRead_DecodesWhatTheBridgeWrites(t *testing.T) {
	b, err := os.ReadFile("../testdata/read_contract.golden.json")
	if err != nil {
		t.Fatal(err)
	}
	var reads []struct {
		Asked    string                `json:"asked"`
		Contents *mcp.ResourceContents `json:"contents"`
	}
	if err := json.Unmarshal(b, &reads); err != nil {
		t.Fatal(err)
	}
	readAt := time.Date(2026, 10, 8, 9, 14, 0, 0, time.UTC)
	want := []struct {
		n     int
		value string
		stale bool
		label string
	}{
		{2, "Partial weight-bearing, about half your body weight, with the frame.", false, "Mr Adeyemi, surgical team"},
		{1, "Rivaroxaban 10 mg once a day, for a course due to end on 4 October 2026.", true, "Dr Mensah, GP"},
		{1, "No weight through the operated leg; transfers with the frame only.", false, "Mr Adeyemi, surgical team"},
		{3, "Full weight-bearing as tolerated.", false, "Sarah Okafor, physio"},
	}
	if len(reads) != len(want) {
		t.Fatalf("golden file holds %d reads, want %d", len(reads), len(want))
	}
	for i, r := range reads {
		u := mustURI(t, r.Asked)
		v, latest, err := parseRead(u, &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{r.Contents}})
		if err != nil {
			t.Fatalf("%s: %v", r.Asked, err)
		}
		w := want[i]
		if v.N != w.n || v.Value != w.value || v.IsStale(readAt) != w.stale || v.AuthorLabel != w.label || v.Audience != models.AudienceUser || latest < v.N {
			t.Errorf("%s: got v%d %q stale=%v by %q (latest %d), want v%d %q stale=%v by %q", r.Asked, v.N, v.Value, v.IsStale(readAt), v.AuthorLabel, latest, w.n, w.value, w.stale, w.label)
		}
		if v.Hash == "" || v.WrittenAt.IsZero() {
			t.Errorf("%s: chain fields lost: %+v", r.Asked, v)
		}
	}
}

// Staleness is the server's judgement when read (P-7, P-24): a version
// served stale is stale at any time — also at a turn's "now", which the
// skill takes before the confirming read; one served fresh has no review
// date here and is fresh at any time.
func TestParseRead_AVersionServedStaleIsStaleEvenAtATimeBeforeTheRead(t *testing.T) {
	turnNow := time.Date(2026, 3, 9, 0, 0, 0, 0, time.UTC) // the skill's clock, read first
	header := "[STALE — last changed six days ago by Sarah Okafor, physio; say this age aloud]"
	v, _, err := parseRead(mustURI(t, wb), readResult(wb, header+"\nPartial weight-bearing.", with(goodMeta(t, 3), models.MetaStale, true)))
	if err != nil {
		t.Fatal(err)
	}
	if v.Value != "Partial weight-bearing." || !v.IsStale(turnNow) || !v.IsStale(turnNow.Add(-time.Hour)) {
		t.Errorf("stale read = %q, stale at the turn's now = %v", v.Value, v.IsStale(turnNow))
	}
	// Twin: served fresh, fresh at any time — and its text is kept as written.
	v, _, err = parseRead(mustURI(t, wb), readResult(wb, "[Ward 4] call first.", goodMeta(t, 3)))
	if err != nil {
		t.Fatal(err)
	}
	if v.Value != "[Ward 4] call first." || v.IsStale(turnNow) || v.IsStale(turnNow.Add(1000*time.Hour)) {
		t.Errorf("fresh read = %q stale=%v", v.Value, v.IsStale(turnNow))
	}
}

func TestParseRead_RefusesWhatItCannotSpeakSafely(t *testing.T) {
	tests := []struct {
		name  string
		asked string
		res   *mcp.ReadResourceResult
		named int // the version readiness still counts as seen
	}{
		{"assistant audience under a care:// URI", wb, readResult(wb, "x", with(goodMeta(t, 1), models.MetaAudience, "assistant")), 3},
		{"no audience", wb, readResult(wb, "x", with(goodMeta(t, 1), models.MetaAudience, nil)), 3},
		{"another version than asked", wb + "/v1", readResult(wb+"/v1", "x", goodMeta(t, 2)), 3},
		{"no version", wb, readResult(wb, "x", with(with(goodMeta(t, 1), models.MetaVersion, nil), models.MetaLatest, nil)), 0},
		{"fractional version", wb, readResult(wb, "x", with(goodMeta(t, 1), models.MetaVersion, 1.5)), 3},
		{"bad lastModified", wb, readResult(wb, "x", with(goodMeta(t, 1), models.MetaLastModified, "yesterday")), 3},
		{"no author", wb, readResult(wb, "x", with(goodMeta(t, 1), models.MetaAuthor, nil)), 3},
		{"contents of another fact", wb, readResult("care://ray/anticoagulant", "x", goodMeta(t, 1)), 0},
		{"no contents", wb, &mcp.ReadResourceResult{}, 0},
		{"a care-internal URI asked", "care-internal://ray/risk", readResult("care-internal://ray/risk", "x", with(goodMeta(t, 1), models.MetaAudience, "assistant")), 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, named, err := parseRead(mustURI(t, tt.asked), tt.res)
			if !errors.Is(err, ErrBadResource) {
				t.Fatalf("err = %v, want ErrBadResource", err)
			}
			if named != tt.named {
				t.Errorf("named version %d, want %d", named, tt.named)
			}
		})
	}
	// Positive twin: the contract is accepted for the same URIs.
	for _, asked := range []string{wb, wb + "/v1"} {
		if _, _, err := parseRead(mustURI(t, asked), readResult(asked, "x", goodMeta(t, 1))); err != nil {
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
