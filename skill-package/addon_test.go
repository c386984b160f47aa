package skillpackage

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func addOnDoc(t *testing.T, opt BuildOptions) map[string]any {
	t.Helper()
	b, err := AddOn(opt)
	if err != nil {
		t.Fatalf("AddOn: %v", err)
	}
	if p := AddOnProblems(b); p != nil {
		t.Fatalf("the generated addon.json has problems: %v", p)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestAddOn_NamesThePublicMCPEndpointAndPassesTheStructuralCheck: the
// generated manifest points Alexa+ at PUBLIC_URL/mcp over HTTPS, enables
// account linking, lists one copy of the listing per locale with its
// country, puts the icons under the assets URL, and passes AddOnProblems.
func TestAddOn_NamesThePublicMCPEndpointAndPassesTheStructuralCheck(t *testing.T) {
	m := addOnDoc(t, BuildOptions{PublicURL: "https://care.example.org/", PrivacyURL: "https://care.example.org/privacy",
		AddOn: AddOnOptions{Locales: []string{"en-GB", "en-US"}, AssetsURL: "https://cdn.example.org/unsay/"}})
	ep := m["integrations"].([]any)[0].(map[string]any)["config"].(map[string]any)["endpoints"].(map[string]any)["default"].(map[string]any)
	if ep["uri"] != "https://care.example.org/mcp" || ep["type"] != "HTTPS" {
		t.Errorf("endpoint %v", ep)
	}
	listing := m["storeListing"].(map[string]any)
	if fmt.Sprint(listing["distributionCountries"]) != "[GB US]" {
		t.Errorf("countries %v", listing["distributionCountries"])
	}
	locales := listing["locales"].(map[string]any)
	if len(locales) != 2 || locales["en-GB"] == nil || locales["en-US"] == nil {
		t.Fatalf("locales %v", locales)
	}
	gb := locales["en-GB"].(map[string]any)
	if gb["privacyAndCompliance"].(map[string]any)["privacyPolicyUrl"] != "https://care.example.org/privacy" {
		t.Errorf("privacy %v", gb["privacyAndCompliance"])
	}
	icons := gb["mediaAssets"].(map[string]any)["icons"].(map[string]any)["light"].([]any)
	if len(icons) != 6 || icons[0].(map[string]any)["uri"] != "https://cdn.example.org/unsay/icon-72x72.png" {
		t.Errorf("icons %v", icons)
	}
	if m["accountLinking"].(map[string]any)["enabled"] != true {
		t.Errorf("accountLinking %v", m["accountLinking"])
	}
	// The default: en-US only, the committed placeholders.
	d := addOnDoc(t, BuildOptions{PublicURL: "https://care.example.org"})
	if l := d["storeListing"].(map[string]any)["locales"].(map[string]any); len(l) != 1 || l["en-US"] == nil {
		t.Errorf("default locales %v", l)
	}
}

// TestAddOnProblems_RefusesEachBrokenManifest: every rule of the
// structural check refuses its broken twin of a good manifest (and the good
// one passes, above).
func TestAddOnProblems_RefusesEachBrokenManifest(t *testing.T) {
	good, err := AddOn(BuildOptions{PublicURL: "https://care.example.org"})
	if err != nil {
		t.Fatal(err)
	}
	loc := func(m map[string]any) map[string]any {
		return m["storeListing"].(map[string]any)["locales"].(map[string]any)["en-US"].(map[string]any)
	}
	endpoint := func(m map[string]any) map[string]any {
		return m["integrations"].([]any)[0].(map[string]any)["config"].(map[string]any)["endpoints"].(map[string]any)["default"].(map[string]any)
	}
	for _, tc := range []struct {
		name   string
		mutate func(m map[string]any)
		want   string
	}{
		{"manifest version", func(m map[string]any) { m["manifestVersion"] = "2.0" }, "manifestVersion"},
		{"no countries", func(m map[string]any) { m["storeListing"].(map[string]any)["distributionCountries"] = []any{} }, "distributionCountries"},
		{"long name", func(m map[string]any) { loc(m)["name"].(map[string]any)["value"] = strings.Repeat("n", AddOnMaxName+1) }, "name"},
		{"no spoken form", func(m map[string]any) { delete(loc(m)["name"].(map[string]any), "spokenForm") }, "spokenForm"},
		{"long short description", func(m map[string]any) { loc(m)["shortDescription"] = strings.Repeat("s", AddOnMaxShortDescription+1) }, "shortDescription"},
		{"empty full description", func(m map[string]any) { loc(m)["fullDescription"] = "" }, "fullDescription"},
		{"no example phrase", func(m map[string]any) { loc(m)["examplePhrases"] = []any{} }, "example phrases"},
		{"http privacy URL", func(m map[string]any) {
			loc(m)["privacyAndCompliance"].(map[string]any)["privacyPolicyUrl"] = "http://care.example.org/privacy"
		}, "privacyPolicyUrl"},
		{"an icon size missing", func(m map[string]any) {
			icons := loc(m)["mediaAssets"].(map[string]any)["icons"].(map[string]any)
			icons["light"] = icons["light"].([]any)[1:]
		}, "no 72x72 icon"},
		{"http endpoint", func(m map[string]any) { endpoint(m)["uri"] = "http://care.example.org/mcp" }, "default endpoint"},
		{"endpoint not /mcp", func(m map[string]any) { endpoint(m)["uri"] = "https://care.example.org/alexa" }, "default endpoint"},
		{"not MCP", func(m map[string]any) { m["integrations"].([]any)[0].(map[string]any)["type"] = "SKILL" }, "default endpoint"},
		{"no integration", func(m map[string]any) { m["integrations"] = []any{} }, "integrations"},
		{"no account linking", func(m map[string]any) { delete(m, "accountLinking") }, "accountLinking"},
	} {
		var m map[string]any
		_ = json.Unmarshal(good, &m)
		tc.mutate(m)
		b, _ := json.Marshal(m)
		p := AddOnProblems(b)
		if !strings.Contains(strings.Join(p, "\n"), tc.want) {
			t.Errorf("%s: problems %q, want one about %s", tc.name, p, tc.want)
		}
	}
	if p := AddOnProblems([]byte("[]")); p == nil {
		t.Error("a JSON array passed")
	}
}

// TestAddOn_EveryExamplePhraseReachesATool: each example phrase of the
// listing is something a tool answers — "what changed" (whats_changed), or
// a topic of the skill's CareTopic slot type (care_instruction) — so the
// listing promises nothing the add-on does not do.
func TestAddOn_EveryExamplePhraseReachesATool(t *testing.T) {
	var topics []string
	for _, ty := range loadModel(t, "en-US").Types {
		if ty.Name != "CareTopic" {
			continue
		}
		for _, v := range ty.Values {
			topics = append(topics, append([]string{v.Name.Value}, v.Name.Synonyms...)...)
		}
	}
	d := addOnDoc(t, BuildOptions{PublicURL: "https://care.example.org"})
	for _, x := range d["storeListing"].(map[string]any)["locales"].(map[string]any)["en-US"].(map[string]any)["examplePhrases"].([]any) {
		p := strings.ToLower(x.(string))
		ok := strings.Contains(p, "changed")
		for _, tp := range topics {
			ok = ok || strings.Contains(" "+p+" ", " "+strings.ToLower(tp)+" ")
		}
		if !ok {
			t.Errorf("example phrase %q reaches no tool", x)
		}
	}
}

// TestAddOn_RefusesBadOptionsAndBuildWritesNothing: a non-https public
// URL, an unknown locale and a non-https assets URL are refused, and Build
// then writes nothing; with good options Build writes
// alexa-plus/addon-package/addon.json, replacing that folder and keeping
// the Alexa AI CLI's own files beside it.
func TestAddOn_RefusesBadOptionsAndBuildWritesNothing(t *testing.T) {
	for _, tc := range []struct {
		opt  BuildOptions
		want error
	}{
		{BuildOptions{PublicURL: "http://care.example.org"}, ErrPublicURL},
		{BuildOptions{PublicURL: "https://care.example.org", AddOn: AddOnOptions{Locales: []string{"fr-FR"}}}, ErrAddOn},
		{BuildOptions{PublicURL: "https://care.example.org", AddOn: AddOnOptions{AssetsURL: "http://cdn.example.org"}}, ErrAddOn},
		{BuildOptions{PublicURL: "https://care.example.org", TermsURL: "ftp://x"}, ErrAddOn},
	} {
		if _, err := AddOn(tc.opt); !errors.Is(err, tc.want) {
			t.Errorf("%+v: %v, want %v", tc.opt, err, tc.want)
		}
		dst := t.TempDir()
		if err := Build(dst, tc.opt); !errors.Is(err, tc.want) {
			t.Errorf("Build %+v: %v", tc.opt, err)
		}
		if entries, _ := os.ReadDir(dst); len(entries) != 0 {
			t.Errorf("Build wrote %d entries for bad options", len(entries))
		}
	}
	dst := t.TempDir()
	cli := filepath.Join(dst, "alexa-plus", ".alexa-ai", "state.json")
	stale := filepath.Join(dst, "alexa-plus", "addon-package", "old.json")
	for _, p := range []string{cli, stale} {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("{}"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := Build(dst, BuildOptions{PublicURL: "https://care.example.org"}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dst, "alexa-plus", "addon-package", "addon.json"))
	if err != nil || AddOnProblems(b) != nil || !strings.Contains(string(b), `"uri": "https://care.example.org/mcp"`) {
		t.Fatalf("addon.json: %v %v", err, AddOnProblems(b))
	}
	if _, err := os.Stat(cli); err != nil {
		t.Error("Build removed the Alexa AI CLI's own files")
	}
	if _, err := os.Stat(stale); err == nil {
		t.Error("Build kept a stale file in addon-package")
	}
}
