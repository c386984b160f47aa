// Package skillpackage holds the ASK CLI v2 skill package of the Care Notes
// skill — skill.json, interactionModels/custom/{en-US,en-GB}.json,
// response/display/{care,retraction,help}/document.json (the apl/ documents,
// byte for byte), the ask-resources.json template and accountLinking.json
// (the SMAPI account-linking request) — and the Alexa+ add-on manifest
// (alexa-plus/addon.json, addon.go), and writes the build copies that `ask
// deploy` and `alexa-ai deploy` upload, with the public endpoints filled in.
//
//	go run ./skill-package/gen -public-url https://care.example.org -alexa-link-client-id ID -out build/ask
//	cd build/ask && ask deploy
//	ask smapi update-account-linking-info -s SKILL_ID -g development --account-linking-request file:accountLinking.json
//
// Account linking is not part of the skill package (SMAPI takes it through
// its own accountLinkingClient resource), so accountLinking.json sits beside
// ask-resources.json, not inside skill-package/.
//
// The source folder also holds Go files, so deploy only from the build copy.
package skillpackage

import (
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/unsay/unsay/apl"
)

//go:embed skill.json ask-resources.json accountLinking.json interactionModels response alexa-plus/addon.json
var files embed.FS

// FS returns the committed skill package files (read-only).
func FS() fs.FS { return files }

// Locales are the interaction-model locales the package ships.
func Locales() []string { return []string{"en-US", "en-GB"} }

// ErrPublicURL: the public URL is not an absolute https URL without query or fragment.
var ErrPublicURL = errors.New("public URL must be https://host[/path] without query or fragment")

// SSL certificate types the manifest accepts for an HTTPS endpoint.
var sslTypes = map[string]bool{"Trusted": true, "Wildcard": true, "SelfSigned": true}

// BuildOptions shapes the build copy.
type BuildOptions struct {
	// PublicURL is the server's public base URL (https); the endpoint is PublicURL + "/alexa".
	PublicURL string
	// SSLCertificateType is Trusted (default), Wildcard or SelfSigned.
	SSLCertificateType string
	// PrivacyURL and TermsURL, when set, replace the placeholder URLs for every locale.
	PrivacyURL, TermsURL string
	// AccountLinking fills accountLinking.json.
	AccountLinking AccountLinkingOptions
	// AddOn shapes the Alexa+ add-on package (addon.go).
	AddOn AddOnOptions
}

// AccountLinkingOptions are the account-linking values only the operator
// knows: the OAuth client `unsay client add` made for Alexa (with Alexa's
// redirect URIs, from the developer console's Account Linking page).
type AccountLinkingOptions struct {
	// ClientID is the client's id; empty keeps the placeholder.
	ClientID string
	// ClientSecret is its secret; empty leaves it out (give it in the
	// developer console, or fill it in before the SMAPI call) — a secret in
	// a build directory is a secret on disk.
	ClientSecret string
}

// LinkScopes are the scopes Alexa asks for when linking: what the consent
// page grants (read the patient's care notes aloud), nothing more.
func LinkScopes() []string { return []string{"care.read.user"} }

// AccountLinking returns accountLinking.json for SMAPI's
// update-account-linking-info: the authorization code grant
// (type AUTH_CODE) against Unsay's embedded authorization server at
// PublicURL — authorizationUrl {public}/oauth/authorize, accessTokenUrl
// {public}/oauth/token, client authentication HTTP_BASIC, scopes
// LinkScopes, a default token lifetime of 300 s (the server's own
// expires_in wins), skipOnEnablement true (a device may link by voice with
// a six-digit code instead). PKCE has no field in ask-smapi-model 1.24.0:
// turn on "PKCE" on the developer console's Account Linking page — Unsay
// refuses an authorization request without S256 PKCE, so linking without it
// fails closed. Errors: ErrPublicURL.
func AccountLinking(opt BuildOptions) ([]byte, error) {
	ep, err := Endpoint(opt.PublicURL)
	if err != nil {
		return nil, err
	}
	base := strings.TrimSuffix(ep, "/alexa")
	raw, err := files.ReadFile("accountLinking.json")
	if err != nil {
		return nil, err
	}
	var m map[string]map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("accountLinking.json: %w", err)
	}
	req, ok := m["accountLinkingRequest"]
	if !ok {
		return nil, errors.New("accountLinking.json: no accountLinkingRequest object")
	}
	req["authorizationUrl"] = base + "/oauth/authorize"
	req["accessTokenUrl"] = base + "/oauth/token"
	req["scopes"] = LinkScopes()
	if opt.AccountLinking.ClientID != "" {
		req["clientId"] = opt.AccountLinking.ClientID
	}
	if opt.AccountLinking.ClientSecret != "" {
		req["clientSecret"] = opt.AccountLinking.ClientSecret
	}
	out, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(out, '\n'), nil
}

// Endpoint returns the /alexa endpoint for a public base URL, or an error
// wrapping ErrPublicURL.
func Endpoint(publicURL string) (string, error) {
	u, err := url.Parse(strings.TrimSpace(publicURL))
	if err != nil || u.Scheme != "https" || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return "", fmt.Errorf("%w: %q", ErrPublicURL, publicURL)
	}
	u.Path = strings.TrimRight(u.Path, "/") + "/alexa"
	return u.String(), nil
}

// Manifest returns skill.json with both endpoints (apis.custom and events)
// set to Endpoint(opt.PublicURL), indented.
func Manifest(opt BuildOptions) ([]byte, error) {
	ep, err := Endpoint(opt.PublicURL)
	if err != nil {
		return nil, err
	}
	ssl := opt.SSLCertificateType
	if ssl == "" {
		ssl = "Trusted"
	}
	if !sslTypes[ssl] {
		return nil, fmt.Errorf("sslCertificateType %q: want Trusted, Wildcard or SelfSigned", ssl)
	}
	raw, err := files.ReadFile("skill.json")
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("skill.json: %w", err)
	}
	manifest, ok := m["manifest"].(map[string]any)
	if !ok {
		return nil, errors.New("skill.json: no manifest object")
	}
	endpoint := map[string]any{"uri": ep, "sslCertificateType": ssl}
	manifest["apis"].(map[string]any)["custom"].(map[string]any)["endpoint"] = endpoint
	manifest["events"].(map[string]any)["endpoint"] = endpoint
	if opt.PrivacyURL != "" || opt.TermsURL != "" {
		locales := manifest["privacyAndCompliance"].(map[string]any)["locales"].(map[string]any)
		for _, l := range locales {
			l := l.(map[string]any)
			if opt.PrivacyURL != "" {
				l["privacyPolicyUrl"] = opt.PrivacyURL
			}
			if opt.TermsURL != "" {
				l["termsOfUseUrl"] = opt.TermsURL
			}
		}
	}
	out, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(out, '\n'), nil
}

// Build writes the deployable copy into dst:
//
//	dst/ask-resources.json
//	dst/accountLinking.json                            (AccountLinking; for ask smapi, not ask deploy)
//	dst/skill-package/skill.json                       (endpoint filled in)
//	dst/skill-package/interactionModels/custom/*.json
//	dst/skill-package/response/display/<doc>/document.json   (from apl/)
//	dst/alexa-plus/addon-package/addon.json            (AddOn; for `alexa-ai deploy` in dst/alexa-plus)
//
// It replaces dst/skill-package and dst/alexa-plus/addon-package wholesale
// and keeps dst/.ask (the ASK CLI's record of the deployed skill id) and
// the rest of dst/alexa-plus (the Alexa AI CLI's), so a rebuild redeploys
// the same skill and add-on. Nothing is written when the options are
// invalid.
func Build(dst string, opt BuildOptions) error {
	manifest, err := Manifest(opt)
	if err != nil {
		return err
	}
	linking, err := AccountLinking(opt)
	if err != nil {
		return err
	}
	addon, err := AddOn(opt)
	if err != nil {
		return err
	}
	if err := writeAddOn(dst, addon); err != nil {
		return err
	}
	pkg := filepath.Join(dst, "skill-package")
	if err := os.RemoveAll(pkg); err != nil {
		return err
	}
	write := func(rel string, b []byte) error {
		p := filepath.Join(pkg, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		return os.WriteFile(p, b, 0o644)
	}
	if err := write("skill.json", manifest); err != nil {
		return err
	}
	models, err := fs.Glob(files, "interactionModels/custom/*.json")
	if err != nil {
		return err
	}
	for _, m := range models {
		b, err := files.ReadFile(m)
		if err != nil {
			return err
		}
		if err := write(m, b); err != nil {
			return err
		}
	}
	for _, d := range apl.All() {
		if err := write(path.Join("response/display", d.Name, "document.json"), d.JSON); err != nil {
			return err
		}
	}
	res, err := files.ReadFile("ask-resources.json")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dst, "ask-resources.json"), res, 0o644); err != nil {
		return err
	}
	mode := os.FileMode(0o644)
	if opt.AccountLinking.ClientSecret != "" {
		mode = 0o600
	}
	return os.WriteFile(filepath.Join(dst, "accountLinking.json"), linking, mode)
}

// SyncDisplay rewrites srcDir/response/display/<doc>/document.json from the
// apl/ documents (run from the repository root after editing apl/documents).
func SyncDisplay(srcDir string) error {
	for _, d := range apl.All() {
		p := filepath.Join(srcDir, "response", "display", d.Name, "document.json")
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, d.JSON, 0o644); err != nil {
			return err
		}
	}
	return nil
}
