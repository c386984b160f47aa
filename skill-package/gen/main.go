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
// With -sync-display it instead rewrites skill-package/response/display from
// the apl/ documents. PUBLIC_URL in the environment is used when -public-url
// is not given.
package main

import (
	"flag"
	"fmt"
	"os"

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
	sync := flag.String("sync-display", "", "rewrite DIR/response/display from apl/ and exit (DIR is usually skill-package)")
	flag.Parse()
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
	if opt.AccountLinking.ClientSecret == "" {
		fmt.Println("  (no UNSAY_ALEXA_LINK_CLIENT_SECRET: give the client secret in the developer console; turn on PKCE there too)")
	}
}
