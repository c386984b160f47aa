package apl

import (
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

func decode(t *testing.T, raw []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("not JSON: %v", err)
	}
	return m
}

func TestDocuments_AreAPL2024_3WithTheirParameterAndToken(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for _, d := range All() {
		m := decode(t, d.JSON)
		if m["type"] != "APL" || m["version"] != Version {
			t.Errorf("%s: type %v version %v, want APL %s", d.Name, m["type"], m["version"], Version)
		}
		mt, _ := m["mainTemplate"].(map[string]any)
		params, _ := mt["parameters"].([]any)
		if len(params) != 1 || params[0] != d.Parameter {
			t.Errorf("%s: mainTemplate.parameters = %v, want [%s]", d.Name, params, d.Parameter)
		}
		if d.Token == "" || seen[d.Token] {
			t.Errorf("%s: token %q empty or reused", d.Name, d.Token)
		}
		seen[d.Token] = true
	}
}

// sendEvents returns the arguments of every SendEvent command in v.
func sendEvents(v any) [][]any {
	var out [][]any
	switch x := v.(type) {
	case map[string]any:
		if x["type"] == "SendEvent" {
			args, _ := x["arguments"].([]any)
			out = append(out, args)
		}
		for _, c := range x {
			out = append(out, sendEvents(c)...)
		}
	case []any:
		for _, c := range x {
			out = append(out, sendEvents(c)...)
		}
	}
	return out
}

func TestCareAndRetraction_TickEvery5sAndWhatsChangedButton(t *testing.T) {
	t.Parallel()
	for _, d := range []Doc{Care(), Retraction()} {
		m := decode(t, d.JSON)
		ticks, _ := m["handleTick"].([]any)
		if len(ticks) != 1 {
			t.Fatalf("%s: %d tick handlers, want 1", d.Name, len(ticks))
		}
		h := ticks[0].(map[string]any)
		if h["minimumDelay"] != float64(TickMillis) {
			t.Errorf("%s: minimumDelay %v, want %d", d.Name, h["minimumDelay"], TickMillis)
		}
		if ev := sendEvents(h["commands"]); len(ev) != 1 || len(ev[0]) != 1 || ev[0][0] != ArgTick {
			t.Errorf("%s: tick commands send %v, want [[tick]]", d.Name, ev)
		}
		found := false
		for _, ev := range sendEvents(m["mainTemplate"]) {
			if len(ev) == 1 && ev[0] == ArgWhatsChanged {
				found = true
			}
		}
		if !found {
			t.Errorf("%s: no SendEvent [whats_changed] button", d.Name)
		}
	}
	if ticks := decode(t, Help().JSON)["handleTick"]; ticks != nil {
		t.Errorf("help card must not tick: %v", ticks)
	}
}

var bindingRE = regexp.MustCompile(`\$\{(care|retraction|help|data)\.([a-zA-Z]+)`)

// TestDocuments_BindOnlyFieldsTheBuildersProduce proves every ${param.field}
// and ${data.field} a document reads is produced by its Go builder.
func TestDocuments_BindOnlyFieldsTheBuildersProduce(t *testing.T) {
	t.Parallel()
	sources := map[string]map[string]any{
		NameCare:       CareDatasource(CareCard{Title: "t", Rows: []CareRow{{Topic: "a", Text: "b", Author: "c", Age: "d", Stale: true}}}),
		NameRetraction: RetractionDatasource(RetractionCard{Title: "t", Withdrawn: "w", Current: "c", Author: "a", Age: "n"}),
		NameHelp:       HelpDatasource(HelpCard{Title: "t", Phrases: []string{"p"}}),
	}
	for _, d := range All() {
		raw, _ := json.Marshal(sources[d.Name])
		var ds map[string]map[string]any
		if err := json.Unmarshal(raw, &ds); err != nil {
			t.Fatal(err)
		}
		top := ds[d.Parameter]
		if top == nil {
			t.Fatalf("%s: builder has no %q key", d.Name, d.Parameter)
		}
		var rowKeys map[string]any
		if rows, ok := top["rows"].([]any); ok && len(rows) > 0 {
			rowKeys = rows[0].(map[string]any)
		}
		n := 0
		for _, m := range bindingRE.FindAllStringSubmatch(string(d.JSON), -1) {
			n++
			switch m[1] {
			case "data":
				if d.Name == NameCare {
					if _, ok := rowKeys[m[2]]; !ok {
						t.Errorf("%s binds ${data.%s}, builder rows lack it", d.Name, m[2])
					}
				}
			case d.Parameter:
				if _, ok := top[m[2]]; !ok {
					t.Errorf("%s binds ${%s.%s}, builder lacks it", d.Name, m[1], m[2])
				}
			default:
				t.Errorf("%s binds ${%s.%s}, not its parameter", d.Name, m[1], m[2])
			}
		}
		if n == 0 {
			t.Errorf("%s binds nothing", d.Name)
		}
	}
}

func TestDatasources_EscapeMarkupInEveryString(t *testing.T) {
	t.Parallel()
	evil := `<b>Rest & "ice"</b> <strike>x</strike>`
	all := []map[string]any{
		CareDatasource(CareCard{Title: evil, Rows: []CareRow{{Topic: evil, Text: evil, Author: evil, Age: evil}}}),
		RetractionDatasource(RetractionCard{Title: evil, Withdrawn: evil, Current: evil, Author: evil, Age: evil, More: evil}),
		HelpDatasource(HelpCard{Title: evil, Phrases: []string{evil}, Note: evil}),
	}
	for _, ds := range all {
		raw, _ := json.Marshal(ds)
		var s string
		var walk func(v any)
		walk = func(v any) {
			switch x := v.(type) {
			case string:
				s += x + "\n"
			case map[string]any:
				for _, c := range x {
					walk(c)
				}
			case []any:
				for _, c := range x {
					walk(c)
				}
			}
		}
		var v any
		_ = json.Unmarshal(raw, &v)
		walk(v)
		if strings.ContainsAny(s, "<>") {
			t.Errorf("unescaped markup in datasource: %q", s)
		}
		if !strings.Contains(s, "&lt;b&gt;Rest &amp; \"ice\"") {
			t.Errorf("escaped text missing or mangled: %q", s)
		}
	}
}

func TestEscapeText_LeavesPlainTextAlone(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"Full weight-bearing as tolerated.": "Full weight-bearing as tolerated.",
		"a<b":                               "a&lt;b",
		"déjà vu & co":                      "déjà vu &amp; co",
	} {
		if got := EscapeText(in); got != want {
			t.Errorf("EscapeText(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestCareDatasource_MarksOnlyStaleRowsAndClipsLongText(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("word ", 400)
	ds := CareDatasource(CareCard{Rows: []CareRow{
		{Topic: "Walking", Text: "Full.", Author: "Sarah Okafor, physio", Age: "just now", Lead: true},
		{Topic: "Blood thinner", Text: long, Author: "Dr Mensah, GP", Age: "nine days ago", Stale: true},
	}})
	rows := ds["care"].(careData).Rows
	if rows[0].Stale || rows[0].StaleNote != "" {
		t.Errorf("fresh row marked stale: %+v", rows[0])
	}
	if !rows[1].Stale || rows[1].StaleNote != StaleNote {
		t.Errorf("stale row not marked: %+v", rows[1])
	}
	if rows[0].Byline != "Sarah Okafor, physio · just now" {
		t.Errorf("byline %q", rows[0].Byline)
	}
	if n := len([]rune(rows[1].Text)); n > MaxCardTextRunes || !strings.HasSuffix(rows[1].Text, "…") {
		t.Errorf("long text not clipped: %d runes", n)
	}
}

// viewport conditions used by the documents: "${viewport.width < 1280 && viewport.height >= 600}".
var condRE = regexp.MustCompile(`viewport\.(width|height)\s*(<|>=)\s*(\d+)`)

func holds(when string, w, h int) bool {
	for _, m := range condRE.FindAllStringSubmatch(when, -1) {
		v := w
		if m[1] == "height" {
			v = h
		}
		n, _ := strconv.Atoi(m[3])
		if (m[2] == "<" && !(v < n)) || (m[2] == ">=" && !(v >= n)) {
			return false
		}
	}
	return true
}

// TestDocuments_TypeGrowsWithTheViewport evaluates each document's resource
// conditions for Echo Show 5, 8, 10 and 15 and proves the main text size
// strictly grows, with exactly one size override (or none, for the Show 5).
func TestDocuments_TypeGrowsWithTheViewport(t *testing.T) {
	t.Parallel()
	viewports := []struct {
		name string
		w, h int
	}{{"hubLandscapeSmall", 960, 480}, {"hubLandscapeMedium", 960, 600}, {"hubLandscapeLarge", 1280, 800}, {"hubLandscapeXLarge", 1920, 1080}}
	for _, d := range All() {
		m := decode(t, d.JSON)
		res, _ := m["resources"].([]any)
		prev := 0.0
		for i, vp := range viewports {
			size, overrides := 0.0, 0
			for _, r := range res {
				r := r.(map[string]any)
				when, conditional := r["when"].(string)
				if !conditional || holds(when, vp.w, vp.h) {
					if conditional {
						overrides++
					}
					dims, _ := r["dimensions"].(map[string]any)
					if s, ok := dims["textSize"].(string); ok {
						size, _ = strconv.ParseFloat(strings.TrimSuffix(s, "dp"), 64)
					}
				}
			}
			if (i == 0 && overrides != 0) || (i > 0 && overrides != 1) {
				t.Errorf("%s on %s: %d overrides apply", d.Name, vp.name, overrides)
			}
			if size <= prev || size < 30 {
				t.Errorf("%s on %s: textSize %vdp after %vdp (want growing, ≥ 30dp)", d.Name, vp.name, size, prev)
			}
			prev = size
		}
	}
}

// P-24 on the screen: a stale row and a stale retraction lead with the age
// and say it is past its review date; their fresh twins do not.
func TestDatasources_StaleFormsLeadWithTheAge(t *testing.T) {
	t.Parallel()
	care := CareDatasource(CareCard{Rows: []CareRow{
		{Topic: "Blood thinner", Text: "x", Author: "Dr Mensah, GP", Age: "nine days ago", Stale: true},
		{Topic: "Walking", Text: "y", Author: "Sarah Okafor, physio", Age: "nine days ago"},
	}})["care"].(careData).Rows
	if care[0].Byline != "Nine days ago · Dr Mensah, GP" || care[0].StaleNote != StaleNote {
		t.Errorf("stale row byline %q note %q", care[0].Byline, care[0].StaleNote)
	}
	if care[1].Byline != "Sarah Okafor, physio · nine days ago" {
		t.Errorf("fresh row byline %q", care[1].Byline)
	}
	stale := RetractionDatasource(RetractionCard{Current: "Full.", Author: "Sarah Okafor, physio", Age: "nine days ago", Stale: true})["retraction"].(retractionData)
	if !stale.Stale || !strings.HasPrefix(stale.Byline, "Nine days ago · Sarah Okafor, physio") || !strings.Contains(stale.Byline, "Please check it with your care team.") {
		t.Errorf("stale retraction byline %q", stale.Byline)
	}
	fresh := RetractionDatasource(RetractionCard{Current: "Full.", Author: "Sarah Okafor, physio", Age: "just now"})["retraction"].(retractionData)
	if fresh.Stale || fresh.StaleNote != "" || fresh.Byline != "Sarah Okafor, physio · just now" {
		t.Errorf("fresh retraction %+v", fresh)
	}
}

// F15: a card never drops words silently. A text longer than
// MaxCardTextRunes is shown cut — it ends with "…", the row (or the
// retraction) says cut and carries the note telling how to hear all of
// it — and Cut says so, so the skill does not count it as told. Twin: a
// text that fits is shown whole, with no note.
func TestDatasources_ALongTextIsMarkedCutAShortOneIsWhole(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("Take one tablet each morning with food. ", 15) + "Do NOT take it with ibuprofen."
	short := "Rivaroxaban 10 mg once daily."
	if !Cut(long) || Cut(short) || Cut(strings.Repeat("x", MaxCardTextRunes)+"  ") {
		t.Fatalf("Cut(long %d runes) = %v, Cut(short) = %v, Cut(exactly the limit) = %v", len([]rune(long)), Cut(long), Cut(short), Cut(strings.Repeat("x", MaxCardTextRunes)))
	}
	note := "Shortened here. Say: tell me about my blood thinner, to hear all of it."
	rows := CareDatasource(CareCard{Rows: []CareRow{
		{Topic: "Blood thinner", Text: long, CutNote: note, Lead: true},
		{Topic: "Contact", Text: short, CutNote: "never drawn"},
	}})["care"].(careData).Rows
	if r := rows[0]; !r.Cut || r.CutNote != note || !strings.HasSuffix(r.Text, "…") || strings.Contains(r.Text, "ibuprofen") {
		t.Errorf("long row = %+v, want cut, ending …, with its note", r)
	}
	if r := rows[1]; r.Cut || r.CutNote != "" || r.Text != short {
		t.Errorf("short row = %+v, want whole and no note", r)
	}
	if r := CareDatasource(CareCard{Rows: []CareRow{{Text: long}}})["care"].(careData).Rows[0]; r.CutNote != DefaultCutNote {
		t.Errorf("a cut row without a note of its own says %q, want %q", r.CutNote, DefaultCutNote)
	}
	for name, c := range map[string]RetractionCard{
		"the new words":       {Withdrawn: short, Current: long, CutNote: note},
		"the withdrawn words": {Withdrawn: long, Current: short, CutNote: note},
	} {
		d := RetractionDatasource(c)["retraction"].(retractionData)
		if !d.Cut || d.CutNote != note {
			t.Errorf("%s cut: %+v, want cut with the note", name, d)
		}
	}
	if d := RetractionDatasource(RetractionCard{Withdrawn: short, Current: short + " Twice.", CutNote: note})["retraction"].(retractionData); d.Cut || d.CutNote != "" || d.Current != short+" Twice." {
		t.Errorf("short retraction: %+v, want whole, no note", d)
	}
}

// The documents draw the note only when cut, under the text they cut.
func TestDocuments_DrawTheCutNoteOnlyWhenCut(t *testing.T) {
	t.Parallel()
	for _, d := range []Doc{Care(), Retraction()} {
		p := "data"
		if d.Name == NameRetraction {
			p = d.Parameter
		}
		if !strings.Contains(string(d.JSON), `"when": "${`+p+`.cut}",
`) || !strings.Contains(string(d.JSON), `"text": "${`+p+`.cutNote}"`) {
			t.Errorf("%s: no cut note drawn when ${%s.cut}", d.Name, p)
		}
	}
}
