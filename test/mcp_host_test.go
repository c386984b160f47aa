//go:build e2e

package e2e_test

import (
	"testing"
	"time"

	"github.com/unsay/unsay/test/harness"
)

// TestMCPHost_OfficialTypeScriptSDK drives the running server with the
// official MCP TypeScript SDK v1 (js/mcp-host.mjs, 2025-11-25 sessions):
// paging, the STALE header, subscribe → updated after a signed write → the
// retraction in _meta, whats_changed against its advertised outputSchema,
// brief_carer, and a user-scoped session that never receives anything
// assistant-only.
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

// TestMCPHost_OfficialTypeScriptSDKv2On20260728 drives the same main job
// with the official TypeScript SDK v2 client (js/mcp-host-v2.mjs), pinned
// to 2026-07-28: server/discover, paging, the STALE header,
// subscriptions/listen → the tagged updated after a signed write → the
// re-read naming the version read before carries the retraction; a
// user-scoped listen never acknowledges or receives a care-internal URI.
func TestMCPHost_OfficialTypeScriptSDKv2On20260728(t *testing.T) {
	const part = "1 MCP TypeScript SDK host"
	node := needNode(t, part, "@modelcontextprotocol/client", "ajv")
	s := startServer(t, part)
	user := token(t, s, part, "care.read.user")
	dual := token(t, s, part, "care.read.user", "care.read.assistant")
	runChecks(t, node, "mcp-host-v2.mjs", []string{
		"UNSAY_E2E_URL=" + s.URL, "TOKEN_USER=" + user, "TOKEN_DUAL=" + dual, "WRITE_SECRET=" + harness.WriteSecret,
	}, 2*time.Minute)
}
