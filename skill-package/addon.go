package skillpackage

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// The Alexa+ add-on (Amazon's "Alexa+ MCP Toolkit"): Alexa+ is the MCP
// client of Unsay's /mcp. Its deployment description is the add-on
// package the Alexa AI CLI uploads — `alexa-ai deploy`, run in a project
// folder that holds addon-package/addon.json (the CLI zips addon-package/
// and uploads it; CreateAddOnUpload in Amazon's Add-on API). addon.json is
// the manifest: manifestVersion "1.0"; storeListing (distribution
// countries, and per locale the name with its spoken form, the short and
// full descriptions, example phrases, privacy and terms URLs, and icons in
// six sizes); integrations — one of type "MCP" whose default endpoint is
// {"type": "HTTPS", "uri": PUBLIC_URL + "/mcp"}; accountLinking enabled
// (the OAuth client itself is configured with `alexa-ai
// configure-account-linking`). Alexa+ registers the tools and resources at
// deploy time, so the add-on is redeployed whenever they change.
//
// Amazon publishes no JSON schema for addon.json; AddOnProblems checks the
// structure and the limits the add-on documentation states, offline (the
// CLI needs Node 24).

// AddOnIconSizes are the icon sizes an add-on's store listing carries.
func AddOnIconSizes() []string {
	return []string{"72x72", "64x64", "88x88", "126x126", "180x180", "241x241"}
}

// addOnCountries maps the locales the add-on can be listed in (the skill's
// own) to their distribution country.
var addOnCountries = map[string]string{"en-US": "US", "en-GB": "GB"}

// AddOnLocales are the locales an add-on listing may be written for.
func AddOnLocales() []string { return []string{"en-US", "en-GB"} }

// Listing limits (Alexa+ add-on store listing).
const (
	AddOnMaxName             = 30
	AddOnMaxShortDescription = 123
	AddOnMaxFullDescription  = 4000
)

// AddOnOptions are the add-on's values only the operator knows.
type AddOnOptions struct {
	// Locales the listing is written for (each a copy of the committed
	// en-US listing); empty means en-US. Each must be in AddOnLocales.
	Locales []string
	// AssetsURL is the https base URL of the icons, served as
	// {AssetsURL}/icon-{size}.png; empty keeps the placeholder host.
	AssetsURL string
}

// ErrAddOn: an add-on option is not valid.
var ErrAddOn = errors.New("invalid add-on option")

// MCPEndpoint returns the /mcp endpoint for a public base URL, or an error
// wrapping ErrPublicURL.
func MCPEndpoint(publicURL string) (string, error) {
	ep, err := Endpoint(publicURL)
	if err != nil {
		return "", err
	}
	return strings.TrimSuffix(ep, "/alexa") + "/mcp", nil
}

// AddOn returns addon-package/addon.json for the Alexa AI CLI: the
// committed alexa-plus/addon.json with the MCP endpoint MCPEndpoint(
// opt.PublicURL), the privacy and terms URLs of opt (when set), the icons
// under opt.AddOn.AssetsURL (when set), and one listing per locale with
// its distribution country. Errors wrap ErrPublicURL or ErrAddOn.
func AddOn(opt BuildOptions) ([]byte, error) {
	ep, err := MCPEndpoint(opt.PublicURL)
	if err != nil {
		return nil, err
	}
	locales := opt.AddOn.Locales
	if len(locales) == 0 {
		locales = []string{"en-US"}
	}
	for _, l := range locales {
		if _, ok := addOnCountries[l]; !ok {
			return nil, fmt.Errorf("%w: locale %q: want one of %s", ErrAddOn, l, strings.Join(AddOnLocales(), ", "))
		}
	}
	assets := strings.TrimRight(opt.AddOn.AssetsURL, "/")
	if assets != "" {
		if u, err := url.Parse(assets); err != nil || u.Scheme != "https" || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
			return nil, fmt.Errorf("%w: assets URL %q: want https://host[/path]", ErrAddOn, opt.AddOn.AssetsURL)
		}
	}
	for name, v := range map[string]string{"privacy": opt.PrivacyURL, "terms": opt.TermsURL} {
		if u, err := url.Parse(v); v != "" && (err != nil || u.Scheme != "https" || u.Host == "") {
			return nil, fmt.Errorf("%w: %s URL %q: want https", ErrAddOn, name, v)
		}
	}
	raw, err := files.ReadFile("alexa-plus/addon.json")
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("alexa-plus/addon.json: %w", err)
	}
	listing, ok := m["storeListing"].(map[string]any)
	if !ok {
		return nil, errors.New("alexa-plus/addon.json: no storeListing object")
	}
	src, ok := listing["locales"].(map[string]any)["en-US"].(map[string]any)
	if !ok {
		return nil, errors.New("alexa-plus/addon.json: no en-US listing")
	}
	if opt.PrivacyURL != "" || opt.TermsURL != "" {
		pc := src["privacyAndCompliance"].(map[string]any)
		if opt.PrivacyURL != "" {
			pc["privacyPolicyUrl"] = opt.PrivacyURL
		}
		if opt.TermsURL != "" {
			pc["termsOfUseUrl"] = opt.TermsURL
		}
	}
	if assets != "" {
		icons := src["mediaAssets"].(map[string]any)["icons"].(map[string]any)
		light := make([]any, 0, len(AddOnIconSizes()))
		for _, size := range AddOnIconSizes() {
			light = append(light, map[string]any{"size": size, "uri": assets + "/icon-" + size + ".png"})
		}
		icons["light"] = light
	}
	out := map[string]any{}
	var countries []string
	for _, l := range locales {
		copied, err := deepCopy(src)
		if err != nil {
			return nil, err
		}
		out[l] = copied
		if c := addOnCountries[l]; !slices.Contains(countries, c) {
			countries = append(countries, c)
		}
	}
	slices.Sort(countries)
	listing["locales"] = out
	listing["distributionCountries"] = countries
	integrations, ok := m["integrations"].([]any)
	if !ok || len(integrations) != 1 {
		return nil, errors.New("alexa-plus/addon.json: want exactly one integration")
	}
	integrations[0].(map[string]any)["config"].(map[string]any)["endpoints"].(map[string]any)["default"] =
		map[string]any{"type": "HTTPS", "uri": ep}
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

func deepCopy(v any) (any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var out any
	return out, json.Unmarshal(b, &out)
}

// writeAddOn writes dst/alexa-plus/addon-package/addon.json, replacing
// dst/alexa-plus/addon-package wholesale and keeping the rest of
// dst/alexa-plus (the Alexa AI CLI's own project files).
func writeAddOn(dst string, addon []byte) error {
	pkg := filepath.Join(dst, "alexa-plus", "addon-package")
	if err := os.RemoveAll(pkg); err != nil {
		return err
	}
	if err := os.MkdirAll(pkg, 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(pkg, "addon.json"), addon, 0o644)
}

// AddOnProblems checks an addon.json against the structure the Alexa AI
// CLI expects and the listing limits, and returns every problem found
// (none: nil): manifestVersion "1.0"; distribution countries; each
// locale's name (1…AddOnMaxName characters, with an IPA spoken form),
// descriptions (1…AddOnMaxShortDescription and 1…AddOnMaxFullDescription
// characters), example phrases (1…5, none empty or over 200 characters),
// https privacy and terms URLs, https icons in every AddOnIconSizes size;
// exactly one integration, of type MCP, whose default endpoint is HTTPS
// with an https URI ending in /mcp; accountLinking.enabled a boolean.
func AddOnProblems(raw []byte) []string {
	var doc struct {
		ManifestVersion string `json:"manifestVersion"`
		StoreListing    struct {
			DistributionCountries []string `json:"distributionCountries"`
			Locales               map[string]struct {
				Name struct {
					Value      string `json:"value"`
					SpokenForm struct {
						Format string `json:"format"`
						Value  string `json:"value"`
					} `json:"spokenForm"`
				} `json:"name"`
				ShortDescription     string   `json:"shortDescription"`
				FullDescription      string   `json:"fullDescription"`
				ExamplePhrases       []string `json:"examplePhrases"`
				PrivacyAndCompliance struct {
					PrivacyPolicyURL string `json:"privacyPolicyUrl"`
					TermsOfUseURL    string `json:"termsOfUseUrl"`
				} `json:"privacyAndCompliance"`
				MediaAssets struct {
					Icons struct {
						Light []struct{ Size, URI string } `json:"light"`
					} `json:"icons"`
				} `json:"mediaAssets"`
			} `json:"locales"`
		} `json:"storeListing"`
		Integrations []struct {
			Type   string `json:"type"`
			Config struct {
				Endpoints struct {
					Default struct{ Type, URI string } `json:"default"`
				} `json:"endpoints"`
			} `json:"config"`
		} `json:"integrations"`
		AccountLinking *struct {
			Enabled *bool `json:"enabled"`
		} `json:"accountLinking"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		return []string{"not JSON of the add-on manifest's shape: " + err.Error()}
	}
	var out []string
	bad := func(f string, a ...any) { out = append(out, fmt.Sprintf(f, a...)) }
	https := func(s string) bool {
		u, err := url.Parse(s)
		return err == nil && u.Scheme == "https" && u.Host != ""
	}
	runes := func(s string) int { return len([]rune(s)) }
	if doc.ManifestVersion != "1.0" {
		bad("manifestVersion %q, want \"1.0\"", doc.ManifestVersion)
	}
	if len(doc.StoreListing.DistributionCountries) == 0 {
		bad("storeListing.distributionCountries is empty")
	}
	if len(doc.StoreListing.Locales) == 0 {
		bad("storeListing.locales is empty")
	}
	for l, loc := range doc.StoreListing.Locales {
		if n := runes(loc.Name.Value); n == 0 || n > AddOnMaxName {
			bad("%s: name %q is %d characters, want 1…%d", l, loc.Name.Value, n, AddOnMaxName)
		}
		if loc.Name.SpokenForm.Format != "ipa" || strings.TrimSpace(loc.Name.SpokenForm.Value) == "" {
			bad("%s: name.spokenForm wants format ipa and a value", l)
		}
		if n := runes(loc.ShortDescription); n == 0 || n > AddOnMaxShortDescription {
			bad("%s: shortDescription is %d characters, want 1…%d", l, n, AddOnMaxShortDescription)
		}
		if n := runes(loc.FullDescription); n == 0 || n > AddOnMaxFullDescription {
			bad("%s: fullDescription is %d characters, want 1…%d", l, n, AddOnMaxFullDescription)
		}
		if n := len(loc.ExamplePhrases); n == 0 || n > 5 {
			bad("%s: %d example phrases, want 1…5", l, n)
		}
		for _, p := range loc.ExamplePhrases {
			if strings.TrimSpace(p) == "" || runes(p) > 200 {
				bad("%s: example phrase %q: want 1…200 characters", l, p)
			}
		}
		if !https(loc.PrivacyAndCompliance.PrivacyPolicyURL) || !https(loc.PrivacyAndCompliance.TermsOfUseURL) {
			bad("%s: privacyPolicyUrl and termsOfUseUrl must be https URLs", l)
		}
		sizes := map[string]bool{}
		for _, ic := range loc.MediaAssets.Icons.Light {
			if !https(ic.URI) {
				bad("%s: icon %s: %q is not an https URL", l, ic.Size, ic.URI)
			}
			sizes[ic.Size] = true
		}
		for _, s := range AddOnIconSizes() {
			if !sizes[s] {
				bad("%s: no %s icon", l, s)
			}
		}
	}
	if len(doc.Integrations) != 1 {
		bad("%d integrations, want exactly one (MCP)", len(doc.Integrations))
	}
	for _, in := range doc.Integrations {
		ep := in.Config.Endpoints.Default
		if in.Type != "MCP" || ep.Type != "HTTPS" || !https(ep.URI) || !strings.HasSuffix(ep.URI, "/mcp") {
			bad("integration %s: default endpoint %s %q, want MCP over HTTPS at https://…/mcp", in.Type, ep.Type, ep.URI)
		}
	}
	if doc.AccountLinking == nil || doc.AccountLinking.Enabled == nil {
		bad("accountLinking.enabled is missing")
	}
	slices.Sort(out)
	return out
}
