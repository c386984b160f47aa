package apl

import (
	"encoding/json"
	"strings"
	"testing"
)

// frames returns every Frame object in v.
func frames(v any) []map[string]any {
	var out []map[string]any
	switch x := v.(type) {
	case map[string]any:
		if x["type"] == "Frame" {
			out = append(out, x)
		}
		for _, c := range x {
			out = append(out, frames(c)...)
		}
	case []any:
		for _, c := range x {
			out = append(out, frames(c)...)
		}
	}
	return out
}

func TestForRuntime_DeclaresNoVersionNewerThanTheDevice(t *testing.T) {
	t.Parallel()
	for _, d := range All() {
		for _, tc := range []struct {
			runtime, want string
			renders       bool
			oldFrames     bool // backgroundColor instead of background
		}{
			{"2024.3", Version, true, false},
			{"2026.1", Version, true, false},
			{"2023.3", "2023.3", true, false},
			{"2023.2", "2023.2", true, true},
			{"1.6", "1.6", true, true},
			{"1.4", "1.4", true, true},
			{"", MinRuntime, true, true},
			{"garbage", MinRuntime, true, true},
			{"1.3", "", false, false},
			{"1.0", "", false, false},
		} {
			got, ok := ForRuntime(d.JSON, tc.runtime)
			if ok != tc.renders {
				t.Errorf("%s on %q: renders = %v, want %v", d.Name, tc.runtime, ok, tc.renders)
				continue
			}
			if !ok {
				if got != nil {
					t.Errorf("%s on %q: a document for a runtime that cannot render it", d.Name, tc.runtime)
				}
				continue
			}
			m := decode(t, got)
			if m["version"] != tc.want {
				t.Errorf("%s on %q: version %v, want %s", d.Name, tc.runtime, m["version"], tc.want)
			}
			fs := frames(m)
			if len(fs) == 0 {
				t.Fatalf("%s: no Frame", d.Name)
			}
			for _, f := range fs {
				_, old := f["backgroundColor"]
				_, cur := f["background"]
				if old != tc.oldFrames || cur == tc.oldFrames {
					t.Errorf("%s on %q: Frame has backgroundColor=%v background=%v, want the %s property", d.Name, tc.runtime, old, cur,
						map[bool]string{true: "backgroundColor", false: "background"}[tc.oldFrames])
				}
			}
			if tc.want == Version && string(got) != string(d.JSON) {
				t.Errorf("%s on %q: a current runtime must get the document byte for byte", d.Name, tc.runtime)
			}
		}
	}
}

func TestDocuments_UseNoDeprecatedFramePropertyOrContainerBorder(t *testing.T) {
	t.Parallel()
	for _, d := range All() {
		for _, f := range frames(decode(t, d.JSON)) {
			if _, ok := f["backgroundColor"]; ok {
				t.Errorf("%s: Frame backgroundColor (deprecated from 2023.3; ForRuntime adds it for older runtimes)", d.Name)
			}
		}
		if strings.Contains(string(d.JSON), `"borderWidth"`) {
			t.Errorf("%s: borderWidth is a Frame property, not a Container's", d.Name)
		}
	}
}

func TestSpeakingOrder_LeadThenStaleThenPriority(t *testing.T) {
	t.Parallel()
	rows := []CareRow{
		{Topic: "Blood thinner", Stale: true, Priority: 0.85},
		{Topic: "Contact", Priority: 0.3},
		{Topic: "Exercise", Priority: 0.6},
		{Topic: "Old note", Stale: true, Priority: 0.1},
		{Topic: "Walking", Lead: true, Priority: 0.9},
		{Topic: "Clip", Priority: 0.55},
	}
	got := SpeakingOrder(rows)
	var names []string
	for _, r := range got {
		names = append(names, r.Topic)
	}
	want := "Walking,Blood thinner,Old note,Exercise,Clip,Contact"
	if strings.Join(names, ",") != want {
		t.Errorf("order %v, want %s", names, want)
	}
	if rows[0].Topic != "Blood thinner" {
		t.Errorf("SpeakingOrder reordered its argument")
	}
	raw, _ := json.Marshal(CareDatasource(CareCard{Rows: rows}))
	if i, j := strings.Index(string(raw), `"Walking"`), strings.Index(string(raw), `"Contact"`); i < 0 || j < i {
		t.Errorf("care datasource does not lead with walking: %s", raw)
	}
}
