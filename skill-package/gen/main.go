// Command gen writes the deployable copy of the Care Notes skill package
// with the public endpoint filled in (the `make skill-package` step):
//
//	go run ./skill-package/gen -public-url https://care.example.org -alexa-link-client-id ID -out build/ask
//	cd build/ask && ask deploy
//	ask smapi update-account-linking-info -s SKILL_ID -g development --account-linking-request file:accountLinking.json
//
// The account-linking client comes from `unsay client add --name "Care Notes
// for Alexa" --redirect-uri …` (Alexa's redirect URIs are on the developer
// console's Account Linking page); its secret is read only from
// UNSAY_ALEXA_LINK_CLIENT_SECRET.
// It also writes the Alexa+ add-on package, alexa-plus/addon-package/addon.json
// (MCP endpoint URL/mcp), for `cd OUT/alexa-plus && alexa-ai deploy`.
// With -sync-display it instead rewrites skill-package/response/display from
// the apl/ documents. PUBLIC_URL in the environment is used when -public-url
// is not given.
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"

	skillpackage "github.com/unsay/unsay/skill-package"
)

func main() {
	var opt skillpackage.BuildOptions
	out := flag.String("out", "build/ask", "directory to write ask-resources.json and skill-package/ into")
	flag.StringVar(&opt.PublicURL, "public-url", os.Getenv("PUBLIC_URL"), "the server's public https base URL; the endpoint is URL/alexa (env PUBLIC_URL)")
	flag.StringVar(&opt.SSLCertificateType, "ssl-certificate-type", "Trusted", "Trusted, Wildcard or SelfSigned")
	flag.StringVar(&opt.PrivacyURL, "privacy-url", "", "privacy policy URL for every locale (default: the committed placeholder)")
	flag.StringVar(&opt.TermsURL, "terms-url", "", "terms of use URL for every locale (default: the committed placeholder)")
	flag.StringVar(&opt.AccountLinking.ClientID, "alexa-link-client-id", os.Getenv("UNSAY_ALEXA_LINK_CLIENT_ID"), "the OAuth client id `unsay client add` made for Alexa account linking (env UNSAY_ALEXA_LINK_CLIENT_ID)")
	opt.AccountLinking.ClientSecret = os.Getenv("UNSAY_ALEXA_LINK_CLIENT_SECRET")
	var locales string
	flag.StringVar(&locales, "addon-locales", envOr("UNSAY_ADDON_LOCALES", "en-US"), "comma-separated locales of the Alexa+ add-on's store listing: en-US, en-GB (env UNSAY_ADDON_LOCALES)")
	flag.StringVar(&opt.AddOn.AssetsURL, "addon-assets-url", os.Getenv("UNSAY_ADDON_ASSETS_URL"), "https base URL of the add-on's icons, served as URL/icon-{72x72,64x64,88x88,126x126,180x180,241x241}.png; default: the committed placeholder (env UNSAY_ADDON_ASSETS_URL)")
	sync := flag.String("sync-display", "", "rewrite DIR/response/display from apl/ and exit (DIR is usually skill-package)")
	flag.Parse()
	for _, l := range strings.Split(locales, ",") {
		if l = strings.TrimSpace(l); l != "" {
			opt.AddOn.Locales = append(opt.AddOn.Locales, l)
		}
	}
	if *sync != "" {
		if err := skillpackage.SyncDisplay(*sync); err != nil {
			fmt.Fprintln(os.Stderr, "gen:", err)
			os.Exit(1)
		}
		return
	}
	if err := skillpackage.Build(*out, opt); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
	ep, _ := skillpackage.Endpoint(opt.PublicURL)
	fmt.Printf("wrote %s (endpoint %s); deploy with: cd %s && ask deploy\n", *out, ep, *out)
	fmt.Printf("account linking: ask smapi update-account-linking-info -s SKILL_ID -g development --account-linking-request file:%s/accountLinking.json\n", *out)
	if opt.AccountLinking.ClientID == "" {
		fmt.Println("  (no -alexa-link-client-id: make one with unsay client add --name \"Care Notes for Alexa\" --redirect-uri <Alexa's redirect URLs>)")
	}
	mcp, _ := skillpackage.MCPEndpoint(opt.PublicURL)
	fmt.Printf("Alexa+ add-on (MCP endpoint %s): cd %s/alexa-plus && alexa-ai deploy   (the Alexa AI CLI; it needs Node 24)\n", mcp, *out)
	fmt.Println("  then: alexa-ai configure-account-linking --addon-id ADDON_ID --stage development --client-id CLIENT (a client with both grants:")
	fmt.Println("  unsay client add --name \"Care Notes for Alexa+\" --grant authorization_code --grant client_credentials --redirect-uri <Alexa's>)")
	if opt.AddOn.AssetsURL == "" {
		fmt.Println("  (no -addon-assets-url: addon.json names placeholder icons; serve six PNG icons and give their base URL)")
	}
	if opt.AccountLinking.ClientSecret == "" {
		fmt.Println("  (no UNSAY_ALEXA_LINK_CLIENT_SECRET: give the client secret in the developer console; turn on PKCE there too)")
	}
}

// envOr is the environment variable name, or def when it is unset or empty.
func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
