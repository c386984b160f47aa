//go:build e2e

package e2e_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/unsay/unsay/test/harness"
)

// TestBrowser_EchoCardInsideAnMCPAppsHost renders ui://unsay/echo as an MCP
// Apps view in a host's sandboxed iframe in headless Chromium (what Alexa+'s
// webview does): read over MCP with the official TypeScript SDK, the same
// bytes as /echo.html, no network of its own; it initializes with the host,
// draws the care_instruction result, and draws a revision written while it
// is open as the retraction, asking whats_changed through the host bridge
// (test/js/mcp-apps-host.mjs).
func TestBrowser_EchoCardInsideAnMCPAppsHost(t *testing.T) {
	const part = "6 headless Chromium"
	node := needNode(t, part, "playwright-core", "@modelcontextprotocol/sdk")
	chrome, ok := chromium()
	need(t, part, "Chromium (/usr/bin/chromium)", "apt-get install -y chromium", ok)
	s := startServer(t, part)
	reader := token(t, s, part, "care.read.user")
	_, err := s.Write(context.Background(), "ray", "weight_bearing", harness.DemoRevision, harness.DemoAuthor, harness.DemoAuthorLabel)
	pending(t, part, err)
	runChecks(t, node, "mcp-apps-host.mjs", []string{
		"UNSAY_E2E_URL=" + s.URL, "CHROMIUM=" + chrome, "TOKEN_READER=" + reader,
		"WRITE_SECRET=" + harness.WriteSecret, "ARTIFACTS=" + filepath.Join(testDir, "artifacts", "screenshots"),
	}, 3*time.Minute)
}
