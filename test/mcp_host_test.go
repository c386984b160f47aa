//go:build e2e

package e2e_test

import (
	"testing"
	"time"

	"github.com/unsay/unsay/test/harness"
)

// TestMCPHost_OfficialTypeScriptSDK drives the running server with the
// official MCP TypeScript SDK (js/mcp-host.mjs): paging, the STALE header,
// subscribe → updated after a signed write → the retraction in _meta,
// whats_changed against its advertised outputSchema, brief_carer, and a
// user-scoped session that never receives anything assistant-only.
func TestMCPHost_OfficialTypeScriptSDK(t *testing.T) {
	const part = "1 MCP TypeScript SDK host"
	node := needNode(t, part, "@modelcontextprotocol/sdk", "ajv")
	s := startServer(t, part)
	user := token(t, s, part, "care.read.user")
	dual := token(t, s, part, "care.read.user", "care.read.assistant")
	runChecks(t, node, "mcp-host.mjs", []string{
		"UNSAY_E2E_URL=" + s.URL, "TOKEN_USER=" + user, "TOKEN_DUAL=" + dual, "WRITE_SECRET=" + harness.WriteSecret,
	}, 2*time.Minute)
}
