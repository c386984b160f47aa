package models

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func readVersion(n int, value string, staleAfter time.Time) Version {
	v := wb(n, value, "Sarah Okafor, physio", 2*time.Hour)
	v.AuthorID = "okafor"
	v.Hash = strings.Repeat(fmt.Sprint(n), 64)[:64]
	if n > 1 {
		v.PrevHash = strings.Repeat(fmt.Sprint(n-1), 64)[:64]
	}
	v.StaleAfter = staleAfter
	return v
}

// jsonRoundTrip sends m through JSON as the wire does (numbers → float64).
func jsonRoundTrip(t *testing.T, m map[string]any) map[string]any {
	t.Helper()
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// The read contract round-trips: what the server writes (NewReadMeta, Map,
// ReadText) the speech side decodes (ParseReadMeta, DecodeRead) to the same
// record fields and the value as written — fresh, stale, superseded, with a
// retraction, version 1 without a previous hash.
func TestReadContract_RoundTripsThroughJSON(t *testing.T) {
	t.Parallel()
	past := demoNow.Add(-time.Hour)
	tests := []struct {
		name       string
		v          Version
		latest     int
		retraction string
		wantStale  bool
		header     string
	}{
		{"fresh current", readVersion(2, "Full weight-bearing as tolerated.", time.Time{}), 2, "", false, ""},
		{"stale current", readVersion(2, "Rivaroxaban 10 mg once daily.", past), 2, "", true, "[STALE — "},
		{"superseded, stale or not", readVersion(1, "No weight through the leg.", past), 3, "", false, "[SUPERSEDED — "},
		{"with a retraction", readVersion(3, "Toe-touch only.", time.Time{}), 3, "Stop — your walking instruction has changed.", false, ""},
		{"version 1, a value that opens with a bracket", readVersion(1, "[Ward 4] call first.", time.Time{}), 1, "", false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m := NewReadMeta(tt.v, tt.latest, demoNow)
			m.Retraction = tt.retraction
			text := ReadText(tt.v, m, demoNow)
			if !strings.HasPrefix(text, tt.header) || (tt.header == "" && text != tt.v.Value) {
				t.Fatalf("ReadText = %q, want header %q", text, tt.header)
			}
			wire := jsonRoundTrip(t, m.Map())
			got, err := ParseReadMeta(wire)
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(m, got); d != "" {
				t.Fatalf("ParseReadMeta(Map()) (-want +got):\n%s", d)
			}
			if got.Stale != tt.wantStale {
				t.Errorf("stale = %v, want %v", got.Stale, tt.wantStale)
			}
			v, _, err := DecodeRead(tt.v.URI(), text, wire)
			if err != nil {
				t.Fatal(err)
			}
			want := tt.v
			want.StaleAfter, want.Priority = time.Time{}, 0 // not on the wire: staleness travels as unsay/stale
			want.ServedStale = tt.wantStale
			if d := cmp.Diff(want, v); d != "" {
				t.Fatalf("DecodeRead (-want +got):\n%s", d)
			}
		})
	}
}

// Map writes exactly the documented keys: unsay/retraction only when set.
func TestReadMeta_MapWritesTheContractKeys(t *testing.T) {
	t.Parallel()
	m := NewReadMeta(readVersion(2, "x", time.Time{}), 2, demoNow)
	keys := func(m map[string]any) []string {
		var out []string
		for k := range m {
			out = append(out, k)
		}
		return out
	}
	want := []string{MetaVersion, MetaLatest, MetaVersionHash, MetaPrevHash, MetaAudience, MetaLastModified, MetaStale, MetaAuthor, MetaAuthorID}
	if got := m.Map(); len(got) != len(want) {
		t.Fatalf("keys %v, want %v", keys(got), want)
	}
	for _, k := range want {
		if _, ok := m.Map()[k]; !ok {
			t.Errorf("key %s missing", k)
		}
	}
	m.Retraction = "Stop."
	if m.Map()[MetaRetraction] != "Stop." {
		t.Errorf("retraction not written")
	}
}

// U15: a read of the latest version whose review date is still ahead
// carries it (unsay/staleAfter), and the version decoded from it turns
// stale when the date passes without being read again; a version already
// stale, a superseded one and one with no review date carry no date.
func TestReadMeta_CarriesAReviewDateStillAheadSoTheHolderTurnsStaleAtIt(t *testing.T) {
	t.Parallel()
	due := demoNow.Add(time.Hour)
	v := readVersion(2, "Walk with the frame.", due)
	raw, err := json.Marshal(NewReadMeta(v, 2, demoNow).Map())
	if err != nil {
		t.Fatal(err)
	}
	var meta map[string]any
	if err := json.Unmarshal(raw, &meta); err != nil {
		t.Fatal(err)
	}
	if meta[MetaStaleAfter] != due.UTC().Format(TimeLayout) {
		t.Fatalf("%s = %v, want %s", MetaStaleAfter, meta[MetaStaleAfter], due.UTC().Format(TimeLayout))
	}
	got, _, err := DecodeRead(v.URI().Unversioned(), ReadText(v, NewReadMeta(v, 2, demoNow), demoNow), meta)
	if err != nil {
		t.Fatal(err)
	}
	if got.IsStale(demoNow) || !got.IsStale(due) || !got.IsStale(due.Add(time.Minute)) {
		t.Errorf("decoded version: stale now %v, at its review date %v; want false then true", got.IsStale(demoNow), got.IsStale(due))
	}
	for name, m := range map[string]ReadMeta{
		"already stale":  NewReadMeta(readVersion(2, "x", demoNow.Add(-time.Hour)), 2, demoNow),
		"superseded":     NewReadMeta(readVersion(1, "x", due), 2, demoNow),
		"no review date": NewReadMeta(readVersion(2, "x", time.Time{}), 2, demoNow),
	} {
		if _, ok := m.Map()[MetaStaleAfter]; ok {
			t.Errorf("%s: %s written", name, MetaStaleAfter)
		}
	}
}

func TestParseReadMeta_RefusesWhatIsNotTheContract(t *testing.T) {
	t.Parallel()
	good := func() map[string]any {
		return jsonRoundTrip(t, NewReadMeta(readVersion(2, "x", time.Time{}), 2, demoNow).Map())
	}
	tests := []struct {
		name string
		edit func(m map[string]any)
	}{
		{"no version", func(m map[string]any) { delete(m, MetaVersion) }},
		{"version 0", func(m map[string]any) { m[MetaVersion] = 0.0 }},
		{"fractional version", func(m map[string]any) { m[MetaVersion] = 1.5 }},
		{"version as a string", func(m map[string]any) { m[MetaVersion] = "2" }},
		{"latest below version", func(m map[string]any) { m[MetaLatest] = 1.0 }},
		{"no latest", func(m map[string]any) { delete(m, MetaLatest) }},
		{"unknown audience", func(m map[string]any) { m[MetaAudience] = "everyone" }},
		{"bad time", func(m map[string]any) { m[MetaLastModified] = "yesterday" }},
		{"empty author label", func(m map[string]any) { m[MetaAuthor] = "" }},
		{"author as an object", func(m map[string]any) { m[MetaAuthor] = map[string]any{"authorLabel": "x"} }},
		{"no author id", func(m map[string]any) { delete(m, MetaAuthorID) }},
		{"stale as a string", func(m map[string]any) { m[MetaStale] = "false" }},
		{"retraction as a number", func(m map[string]any) { m[MetaRetraction] = 1.0 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m := good()
			tt.edit(m)
			if _, err := ParseReadMeta(m); !errors.Is(err, ErrReadFormat) {
				t.Fatalf("ParseReadMeta = %v, want ErrReadFormat", err)
			}
		})
	}
	if _, err := ParseReadMeta(good()); err != nil {
		t.Fatalf("the contract itself: %v", err)
	}
}

func TestDecodeRead_RefusesAnotherVersionOrAnotherAudience(t *testing.T) {
	t.Parallel()
	v := readVersion(2, "Full weight-bearing.", time.Time{})
	m := NewReadMeta(v, 2, demoNow)
	wire := jsonRoundTrip(t, m.Map())
	if _, _, err := DecodeRead(v.FactURI().WithVersion(1), v.Value, wire); !errors.Is(err, ErrReadFormat) {
		t.Errorf("asked v1, served v2: %v", err)
	}
	internal := NewURI(AudienceAssistant, "ray", "weight_bearing")
	if _, _, err := DecodeRead(internal, v.Value, wire); !errors.Is(err, ErrReadFormat) {
		t.Errorf("a user record under care-internal://: %v", err)
	}
	m.Audience = AudienceAssistant
	if _, _, err := DecodeRead(v.FactURI(), v.Value, jsonRoundTrip(t, m.Map())); !errors.Is(err, ErrReadFormat) {
		t.Errorf("an assistant record under care:// (P-1): %v", err)
	}
	// Twins: the version asked for, by its own or the fact's URI.
	for _, u := range []URI{v.FactURI(), v.URI()} {
		if _, _, err := DecodeRead(u, v.Value, wire); err != nil {
			t.Errorf("DecodeRead(%s) = %v", u, err)
		}
	}
}

func TestReadValue_StripsOnlyTheHeaderTheServerPutThere(t *testing.T) {
	t.Parallel()
	stale := ReadMeta{Version: 2, Latest: 2, Stale: true}
	fresh := ReadMeta{Version: 2, Latest: 2}
	old := ReadMeta{Version: 1, Latest: 2}
	v := readVersion(2, "Eat normally.", time.Time{})
	tests := []struct {
		name, text string
		m          ReadMeta
		want       string
	}{
		{"stale", StaleHeader(v, demoNow) + "\nEat normally.", stale, "Eat normally."},
		{"superseded", SupersededHeader(readVersion(1, "", time.Time{}), 2) + "\nEat less.", old, "Eat less."},
		{"fresh value that looks like a header", "[STALE — not a header]\nEat normally.", fresh, "[STALE — not a header]\nEat normally."},
		{"stale, but no header line", "[Ward 4] call first.", stale, "[Ward 4] call first."},
		{"superseded meta, stale header", StaleHeader(v, demoNow) + "\nx", old, StaleHeader(v, demoNow) + "\nx"},
	}
	for _, tt := range tests {
		if got := ReadValue(tt.text, tt.m); got != tt.want {
			t.Errorf("%s: ReadValue = %q, want %q", tt.name, got, tt.want)
		}
	}
}

func TestStripStaleHeader(t *testing.T) {
	t.Parallel()
	v := readVersion(2, "x", time.Time{})
	if got, ok := StripStaleHeader(StaleHeader(v, demoNow) + "\nEat normally."); !ok || got != "Eat normally." {
		t.Errorf("StripStaleHeader = %q, %v", got, ok)
	}
	if got, ok := StripStaleHeader("[Ward 4] call first."); ok || got != "[Ward 4] call first." {
		t.Errorf("a value in brackets: %q, %v", got, ok)
	}
}

func ExampleParseURI() {
	u, err := ParseURI("care://ray/weight_bearing/v2")
	if err != nil {
		panic(err)
	}
	fmt.Println(u.Patient, u.Domain, u.Version, u.Audience(), u.Unversioned())
	_, err = ParseURI("care://ray/weight_bearing/2")
	fmt.Println(errors.Is(err, ErrNotCareURI))
	// Output:
	// ray weight_bearing 2 user care://ray/weight_bearing
	// true
}

func ExampleRenderRetraction() {
	now := time.Date(2026, 10, 8, 9, 14, 0, 0, time.UTC)
	heard := Version{Patient: "ray", Domain: "weight_bearing", N: 2, Audience: AudienceUser,
		Value: "Partial weight-bearing, about half your body weight.", AuthorLabel: "Mr Adeyemi, surgical team", WrittenAt: now.Add(-48 * time.Hour)}
	current := Version{Patient: "ray", Domain: "weight_bearing", N: 3, Audience: AudienceUser,
		Value: "Full weight-bearing as tolerated.", AuthorLabel: "Sarah Okafor, physio", WrittenAt: now.Add(-10 * time.Minute)}
	s, err := RenderRetraction(heard, current, now)
	if err != nil {
		panic(err)
	}
	fmt.Println(s)
	// Output:
	// Stop — your walking instruction has changed. I told you: “Partial weight-bearing, about half your body weight.” Sarah Okafor, physio, changed it ten minutes ago: “Full weight-bearing as tolerated.” In plain terms, full weight-bearing as tolerated means as much weight as is comfortable.
}

func ExampleDecodeRead() {
	now := time.Date(2026, 10, 8, 9, 14, 0, 0, time.UTC)
	v := Version{Patient: "ray", Domain: "anticoagulant", N: 1, Audience: AudienceUser, Value: "Rivaroxaban 10 mg once daily.",
		AuthorID: "mensah", AuthorLabel: "Dr Mensah, GP", WrittenAt: now.Add(-9 * 24 * time.Hour), StaleAfter: now.Add(-24 * time.Hour)}
	m := NewReadMeta(v, 1, now) // the server
	text := ReadText(v, m, now)
	fmt.Println(text)
	got, meta, err := DecodeRead(v.FactURI(), text, m.Map()) // the speech principal
	if err != nil {
		panic(err)
	}
	fmt.Printf("%q stale=%v\n", got.Value, meta.Stale)
	// Output:
	// [STALE — last changed nine days ago by Dr Mensah, GP; say this age aloud]
	// Rivaroxaban 10 mg once daily.
	// "Rivaroxaban 10 mg once daily." stale=true
}

// A list entry's _meta round-trips through JSON to the version, hash and
// staleness at the list's time (fresh and past its review date), and
// what is not that shape is refused — so a client confirms a version from
// a list only when the server described it.
func TestListMeta_RoundTripsAndRefusesWhatIsNotTheContract(t *testing.T) {
	t.Parallel()
	for _, stale := range []bool{false, true} {
		staleAfter := demoNow.Add(time.Hour)
		if stale {
			staleAfter = demoNow.Add(-time.Minute)
		}
		v := readVersion(3, "x", staleAfter)
		got, err := ParseListMeta(jsonRoundTrip(t, NewListMeta(v, demoNow).Map()))
		if err != nil {
			t.Fatalf("stale=%v: %v", stale, err)
		}
		if want := (ListMeta{Version: 3, VersionHash: v.Hash, Stale: stale}); got != want {
			t.Fatalf("stale=%v: ParseListMeta = %+v, want %+v", stale, got, want)
		}
	}
	good := func() map[string]any {
		return jsonRoundTrip(t, NewListMeta(readVersion(2, "x", time.Time{}), demoNow).Map())
	}
	for name, edit := range map[string]func(map[string]any){
		"no meta at all":     func(m map[string]any) { clear(m) },
		"no version":         func(m map[string]any) { delete(m, MetaVersion) },
		"fractional version": func(m map[string]any) { m[MetaVersion] = 2.5 },
		"empty hash":         func(m map[string]any) { m[MetaVersionHash] = "" },
		"no stale":           func(m map[string]any) { delete(m, MetaStale) },
		"stale as a string":  func(m map[string]any) { m[MetaStale] = "true" },
	} {
		m := good()
		edit(m)
		if _, err := ParseListMeta(m); !errors.Is(err, ErrReadFormat) {
			t.Errorf("%s: ParseListMeta = %v, want ErrReadFormat", name, err)
		}
	}
}
