package bridge

import "github.com/modelcontextprotocol/go-sdk/mcp"

// MCP Apps (the io.modelcontextprotocol/ui extension, specification
// 2026-01-26): ui://unsay/echo is the view both tools link to with
// _meta.ui.resourceUri. Its resource metadata, on the resources/list entry
// and on the resources/read contents alike:
//
//   - csp: the card needs no network inside a host — it gets its data
//     through the host bridge (ui/notifications/tool-result, and
//     resources/read proxied by the host), never by fetching /mcp with a
//     token of its own — so it declares no connect or resource domain: the
//     host's secure default (no connections, nothing loaded from elsewhere);
//   - prefersBorder false: the card draws its own frame.

// echoUIMeta is the _meta of ui://unsay/echo: {"ui": {"csp": {…},
// "prefersBorder": false}}.
func echoUIMeta() mcp.Meta {
	return mcp.Meta{"ui": map[string]any{
		"csp":           map[string]any{"connectDomains": []string{}, "resourceDomains": []string{}},
		"prefersBorder": false,
	}}
}
