//go:build e2e

package e2e_test

import (
	"path/filepath"
	"testing"
	"time"
)

// TestOAuth_OfficialTypeScriptSDKSignsInByItself runs js/oauth-sdk.mjs: the
// MCP TypeScript SDK's own OAuth client, from only the /mcp URL, with the
// consent page driven in headless Chromium, then a refresh and a
// revocation (see the script's header).
func TestOAuth_OfficialTypeScriptSDKSignsInByItself(t *testing.T) {
	node := needNode(t, oauthPart, "@modelcontextprotocol/sdk", "playwright-core")
	chrome, ok := chromium()
	need(t, oauthPart, "Chromium (/usr/bin/chromium)", "apt-get install -y chromium", ok)
	s := startServer(t, oauthPart, "--alexa-verify=false")
	runChecks(t, node, "oauth-sdk.mjs", []string{
		"UNSAY_E2E_URL=" + s.URL, "CHROMIUM=" + chrome, "LINK_CODE=" + linkCodeFor(t, s),
		"UNSAY_BIN=" + bin, "UNSAY_DB=" + s.DB, "ARTIFACTS=" + filepath.Join(testDir, "artifacts", "oauth"),
	}, 3*time.Minute)
}
