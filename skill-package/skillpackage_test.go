package skillpackage

import (
	"bytes"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/unsay/unsay/apl"
)

func readJSON(t *testing.T, fsys fs.FS, name string, v any) {
	t.Helper()
	b, err := fs.ReadFile(fsys, name)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
}

func TestDisplayDocuments_AreTheAPLDocumentsByteForByte(t *testing.T) {
	for _, d := range apl.All() {
		b, err := fs.ReadFile(FS(), "response/display/"+d.Name+"/document.json")
		if err != nil {
			t.Fatalf("%s: %v (run: go run ./skill-package/gen -sync-display skill-package)", d.Name, err)
		}
		if !bytes.Equal(b, d.JSON) {
			t.Errorf("response/display/%s/document.json differs from apl/documents (run: go run ./skill-package/gen -sync-display skill-package)", d.Name)
		}
	}
}

type languageModel struct {
	InvocationName string `json:"invocationName"`
	Intents        []struct {
		Name  string `json:"name"`
		Slots []struct {
			Name, Type string
		} `json:"slots"`
		Samples []string `json:"samples"`
	} `json:"intents"`
	Types []struct {
		Name   string `json:"name"`
		Values []struct {
			ID   string `json:"id"`
			Name struct {
				Value    string   `json:"value"`
				Synonyms []string `json:"synonyms"`
			} `json:"name"`
		} `json:"values"`
	} `json:"types"`
}

func loadModel(t *testing.T, locale string) languageModel {
	var m struct {
		InteractionModel struct {
			LanguageModel languageModel `json:"languageModel"`
		} `json:"interactionModel"`
	}
	readJSON(t, FS(), "interactionModels/custom/"+locale+".json", &m)
	return m.InteractionModel.LanguageModel
}

func TestInteractionModels_MapEverydayWordsToDomains(t *testing.T) {
	want := map[string]string{
		"walking": "weight_bearing", "weight": "weight_bearing", "crutches": "weight_bearing", "frame": "weight_bearing",
		"blood thinner": "anticoagulant", "tablet": "anticoagulant", "injection": "anticoagulant",
		"exercises": "exercise", "stretches": "exercise",
		"who do I call": "contact", "phone": "contact",
	}
	for _, loc := range Locales() {
		m := loadModel(t, loc)
		if m.InvocationName != "care notes" {
			t.Errorf("%s: invocation %q", loc, m.InvocationName)
		}
		got := map[string]string{}
		for _, ty := range m.Types {
			if ty.Name != "CareTopic" {
				continue
			}
			for _, v := range ty.Values {
				for _, w := range append([]string{v.Name.Value}, v.Name.Synonyms...) {
					if prev, dup := got[w]; dup {
						t.Errorf("%s: %q maps to %s and %s", loc, w, prev, v.ID)
					}
					got[w] = v.ID
				}
			}
		}
		for w, d := range want {
			if got[w] != d {
				t.Errorf("%s: %q → %q, want %q", loc, w, got[w], d)
			}
		}
	}
}

func TestInteractionModels_SamplesAreUniqueAndUseDeclaredSlots(t *testing.T) {
	for _, loc := range Locales() {
		m := loadModel(t, loc)
		seen := map[string]string{}
		for _, in := range m.Intents {
			slots := map[string]bool{}
			for _, s := range in.Slots {
				slots[s.Name] = true
			}
			if !strings.HasPrefix(in.Name, "AMAZON.") && len(in.Samples) < 10 {
				t.Errorf("%s %s: only %d samples", loc, in.Name, len(in.Samples))
			}
			for _, s := range in.Samples {
				if other, dup := seen[strings.ToLower(s)]; dup {
					t.Errorf("%s: sample %q in %s and %s", loc, s, other, in.Name)
				}
				seen[strings.ToLower(s)] = in.Name
				for _, part := range strings.Split(s, "{")[1:] {
					name := strings.SplitN(part, "}", 2)[0]
					if !slots[name] {
						t.Errorf("%s %s: sample %q uses undeclared slot %q", loc, in.Name, s, name)
					}
				}
				if strings.ContainsAny(s, ",!?;:\"") {
					t.Errorf("%s %s: sample %q has punctuation", loc, in.Name, s)
				}
			}
		}
	}
}

func TestManifest_DeclaresAPLViewportsNotificationsAndLocales(t *testing.T) {
	var m struct {
		Manifest struct {
			PublishingInformation struct {
				Locales map[string]json.RawMessage `json:"locales"`
			} `json:"publishingInformation"`
			PrivacyAndCompliance struct {
				Locales map[string]struct{ PrivacyPolicyUrl, TermsOfUseUrl string } `json:"locales"`
			} `json:"privacyAndCompliance"`
			Apis struct {
				Custom struct {
					Endpoint   struct{ URI, SslCertificateType string }
					Interfaces []struct {
						Type               string
						SupportedViewports []struct {
							Mode, Shape                              string
							MinWidth, MaxWidth, MinHeight, MaxHeight int
						}
					}
				}
			}
			Permissions []struct{ Name string }
			Events      struct {
				Publications  []struct{ EventName string }
				Subscriptions []struct{ EventName string }
				Endpoint      struct{ URI string }
			}
		}
	}
	readJSON(t, FS(), "skill.json", &m)
	mf := m.Manifest
	for _, loc := range Locales() {
		if _, ok := mf.PublishingInformation.Locales[loc]; !ok {
			t.Errorf("no publishing info for %s", loc)
		}
		if p := mf.PrivacyAndCompliance.Locales[loc]; p.PrivacyPolicyUrl == "" || p.TermsOfUseUrl == "" {
			t.Errorf("no privacy/terms URLs for %s", loc)
		}
	}
	if !strings.HasPrefix(mf.Apis.Custom.Endpoint.URI, "https://") || mf.Apis.Custom.Endpoint.SslCertificateType == "" {
		t.Errorf("endpoint %+v", mf.Apis.Custom.Endpoint)
	}
	covered := func(w, h int) bool {
		for _, in := range mf.Apis.Custom.Interfaces {
			for _, v := range in.SupportedViewports {
				if in.Type == "ALEXA_PRESENTATION_APL" && v.Mode == "HUB" && v.Shape == "RECTANGLE" &&
					w >= v.MinWidth && w <= v.MaxWidth && h >= v.MinHeight && h <= v.MaxHeight {
					return true
				}
			}
		}
		return false
	}
	for _, vp := range [][2]int{{960, 480}, {960, 600}, {1024, 600}, {1280, 800}, {1920, 1080}} {
		if !covered(vp[0], vp[1]) {
			t.Errorf("viewport %dx%d not in supportedViewports", vp[0], vp[1])
		}
	}
	if len(mf.Permissions) != 1 || mf.Permissions[0].Name != "alexa::devices:all:notifications:write" {
		t.Errorf("permissions %+v", mf.Permissions)
	}
	if len(mf.Events.Publications) != 1 || mf.Events.Publications[0].EventName != "AMAZON.MessageAlert.Activated" ||
		len(mf.Events.Subscriptions) != 1 || mf.Events.Subscriptions[0].EventName != "SKILL_PROACTIVE_SUBSCRIPTION_CHANGED" ||
		mf.Events.Endpoint.URI == "" {
		t.Errorf("events %+v", mf.Events)
	}
}

func TestEndpoint_AcceptsHTTPSOnly(t *testing.T) {
	good := map[string]string{
		"https://care.example.org":        "https://care.example.org/alexa",
		"https://care.example.org/":       "https://care.example.org/alexa",
		"https://care.example.org/unsay/": "https://care.example.org/unsay/alexa",
		"https://care.example.org:8443":   "https://care.example.org:8443/alexa",
	}
	for in, want := range good {
		if got, err := Endpoint(in); err != nil || got != want {
			t.Errorf("Endpoint(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"", "http://care.example.org", "care.example.org", "https://", "https://care.example.org/?x=1", "https://u@care.example.org"} {
		if _, err := Endpoint(in); !errors.Is(err, ErrPublicURL) {
			t.Errorf("Endpoint(%q): err %v, want ErrPublicURL", in, err)
		}
	}
}

func TestBuild_WritesDeployableCopyWithEndpointAndKeepsASKState(t *testing.T) {
	dst := t.TempDir()
	state := filepath.Join(dst, ".ask", "ask-states.json")
	if err := os.MkdirAll(filepath.Dir(state), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(state, []byte(`{"skillId":"amzn1.ask.skill.keep"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	stale := filepath.Join(dst, "skill-package", "stale.txt")
	_ = os.MkdirAll(filepath.Dir(stale), 0o755)
	_ = os.WriteFile(stale, []byte("x"), 0o644)

	if err := Build(dst, BuildOptions{PublicURL: "https://care.example.org", SSLCertificateType: "Wildcard", PrivacyURL: "https://care.example.org/privacy"}); err != nil {
		t.Fatal(err)
	}
	out := os.DirFS(dst)
	var m map[string]any
	readJSON(t, out, "skill-package/skill.json", &m)
	mf := m["manifest"].(map[string]any)
	for _, ep := range []any{mf["apis"].(map[string]any)["custom"].(map[string]any)["endpoint"], mf["events"].(map[string]any)["endpoint"]} {
		e := ep.(map[string]any)
		if e["uri"] != "https://care.example.org/alexa" || e["sslCertificateType"] != "Wildcard" {
			t.Errorf("endpoint %v", e)
		}
	}
	if !strings.Contains(mustRead(t, out, "skill-package/skill.json"), `"privacyPolicyUrl": "https://care.example.org/privacy"`) {
		t.Error("privacy URL not replaced")
	}
	for _, loc := range Locales() {
		if mustRead(t, out, "skill-package/interactionModels/custom/"+loc+".json") != mustRead(t, FS(), "interactionModels/custom/"+loc+".json") {
			t.Errorf("%s model not copied verbatim", loc)
		}
	}
	for _, d := range apl.All() {
		if mustRead(t, out, "skill-package/response/display/"+d.Name+"/document.json") != string(d.JSON) {
			t.Errorf("%s document not written", d.Name)
		}
	}
	var res struct {
		Profiles map[string]struct {
			SkillMetadata struct{ Src string } `json:"skillMetadata"`
		} `json:"profiles"`
	}
	readJSON(t, out, "ask-resources.json", &res)
	if res.Profiles["default"].SkillMetadata.Src != "./skill-package" {
		t.Errorf("ask-resources %+v", res)
	}
	if _, err := os.Stat(state); err != nil {
		t.Error("the ASK CLI state was removed")
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Error("a stale file survived in skill-package/")
	}
}

func TestBuild_WritesNothingForABadURL(t *testing.T) {
	dst := filepath.Join(t.TempDir(), "out")
	if err := Build(dst, BuildOptions{PublicURL: "http://care.example.org"}); !errors.Is(err, ErrPublicURL) {
		t.Fatalf("err %v", err)
	}
	if err := Build(dst, BuildOptions{PublicURL: "https://care.example.org", SSLCertificateType: "Bogus"}); err == nil {
		t.Fatal("bad certificate type accepted")
	}
	if _, err := os.Stat(dst); !os.IsNotExist(err) {
		t.Error("something was written")
	}
}

func mustRead(t *testing.T, fsys fs.FS, name string) string {
	t.Helper()
	b, err := fs.ReadFile(fsys, name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestAccountLinking_NamesTheEmbeddedAuthorizationServerAndOnlyTheSpeakableScope(t *testing.T) {
	b, err := AccountLinking(BuildOptions{PublicURL: "https://care.example.org", AccountLinking: AccountLinkingOptions{ClientID: "cli-abc"}})
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		R struct {
			Type, AuthorizationURL, AccessTokenURL, AccessTokenScheme, ClientID, ClientSecret string
			Scopes                                                                            []string
			SkipOnEnablement                                                                  bool
		} `json:"accountLinkingRequest"`
	}
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	r := m.R
	if r.Type != "AUTH_CODE" || r.AuthorizationURL != "https://care.example.org/oauth/authorize" || r.AccessTokenURL != "https://care.example.org/oauth/token" ||
		r.AccessTokenScheme != "HTTP_BASIC" || r.ClientID != "cli-abc" || r.ClientSecret != "" || !r.SkipOnEnablement {
		t.Fatalf("account linking %+v", r)
	}
	if len(r.Scopes) != 1 || r.Scopes[0] != "care.read.user" {
		t.Fatalf("scopes %v: Alexa may ask for care.read.user only", r.Scopes)
	}
	if _, err := AccountLinking(BuildOptions{PublicURL: "http://care.example.org"}); !errors.Is(err, ErrPublicURL) {
		t.Fatalf("an http public URL: %v", err)
	}
}

func TestBuild_WritesAccountLinkingBesideTheSkillPackageAndTheSecretPrivately(t *testing.T) {
	dst := t.TempDir()
	if err := Build(dst, BuildOptions{PublicURL: "https://care.example.org", AccountLinking: AccountLinkingOptions{ClientID: "c", ClientSecret: "s3"}}); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(dst, "accountLinking.json"))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("accountLinking.json with a client secret is mode %v, want 0600", fi.Mode().Perm())
	}
	if _, err := os.Stat(filepath.Join(dst, "skill-package", "accountLinking.json")); err == nil {
		t.Fatal("accountLinking.json inside skill-package/: ask deploy would upload it with the package")
	}
}
