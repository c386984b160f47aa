// Package skillpackage holds the ASK CLI v2 skill package of the Care Notes
// skill — skill.json, interactionModels/custom/{en-US,en-GB}.json,
// response/display/{care,retraction,help}/document.json (the apl/ documents,
// byte for byte) and the ask-resources.json template — and writes the build
// copy that `ask deploy` uploads, with the public endpoint filled in.
//
//	go run ./skill-package/gen -public-url https://care.example.org -out build/ask
//	cd build/ask && ask deploy
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

//go:embed skill.json ask-resources.json interactionModels response
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
//	dst/skill-package/skill.json                       (endpoint filled in)
//	dst/skill-package/interactionModels/custom/*.json
//	dst/skill-package/response/display/<doc>/document.json   (from apl/)
//
// It replaces dst/skill-package wholesale and keeps dst/.ask (the ASK CLI's
// record of the deployed skill id), so a rebuild redeploys the same skill.
// Nothing is written when the options are invalid.
func Build(dst string, opt BuildOptions) error {
	manifest, err := Manifest(opt)
	if err != nil {
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
	return os.WriteFile(filepath.Join(dst, "ask-resources.json"), res, 0o644)
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
