package bridge

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// modernMeta is the per-request _meta of a 2026-07-28 request.
const modernMeta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"raw","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}`

// modernHeaders are the request headers of a 2026-07-28 request for method
// (and Mcp-Name for name, when non-empty).
func modernHeaders(method, name string) map[string]string {
	h := map[string]string{"MCP-Protocol-Version": ModernProtocolVersion, "Mcp-Method": method}
	if name != "" {
		h["Mcp-Name"] = name
	}
	return h
}

// withMeta puts modernMeta into a JSON params object ("{}" or "{...}").
func withMeta(params string) string {
	params = strings.TrimSpace(params)
	if params == "" || params == "{}" {
		return "{" + modernMeta + "}"
	}
	return "{" + modernMeta + "," + strings.TrimPrefix(params, "{")
}

// modernCall makes one 2026-07-28 request (no session) and returns the HTTP
// status and the response frame (from an SSE or a JSON body).
func (h *harness) modernCall(tok string, id int, method, name, params string) (int, map[string]any) {
	h.t.Helper()
	r := h.do("POST", "/mcp", tok, modernHeaders(method, name),
		fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`, id, method, withMeta(params)))
	return r.status, responseFrame(h.t, r)
}

// responseFrame is the JSON-RPC response (a frame with an id) of r's body.
func responseFrame(t testing.TB, r rawResp) map[string]any {
	t.Helper()
	for _, ev := range parseSSE(r.body) {
		var m map[string]any
		if err := json.Unmarshal(ev.data, &m); err == nil && m["id"] != nil {
			return m
		}
	}
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("no JSON-RPC frame in HTTP %d %q", r.status, r.body)
	}
	return m
}

// errorOf returns a frame's JSON-RPC error code and message (0, "" for a result).
func errorOf(m map[string]any) (int, string, map[string]any) {
	e, ok := m["error"].(map[string]any)
	if !ok {
		return 0, "", nil
	}
	code, _ := e["code"].(float64)
	msg, _ := e["message"].(string)
	data, _ := e["data"].(map[string]any)
	return int(code), msg, data
}

// listenStream is an open subscriptions/listen response stream.
type listenStream struct {
	status int
	frames chan map[string]any // every frame, in order; closed when the stream ends
	cancel func()
}

// openListen sends subscriptions/listen with the given notifications
// object and delivers the frames of its response stream.
func (h *harness) openListen(tok string, id int, notifications string) *listenStream {
	h.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"subscriptions/listen","params":{%s,"notifications":%s}}`, id, modernMeta, notifications)
	req, _ := http.NewRequestWithContext(ctx, "POST", h.base+"/mcp", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range modernHeaders("subscriptions/listen", "") {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		h.t.Fatalf("subscriptions/listen: %v", err)
	}
	ls := &listenStream{status: resp.StatusCode, frames: make(chan map[string]any, 256), cancel: cancel}
	h.t.Cleanup(cancel)
	go func() {
		defer close(ls.frames)
		defer resp.Body.Close()
		rd := bufio.NewReader(resp.Body)
		var data []byte
		for {
			line, err := rd.ReadString('\n')
			if err != nil {
				return
			}
			line = strings.TrimRight(line, "\r\n")
			switch {
			case line == "" && len(data) > 0:
				var m map[string]any
				if json.Unmarshal(data, &m) == nil {
					ls.frames <- m
				}
				data = nil
			case strings.HasPrefix(line, "data:"):
				data = append(data, strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " ")...)
			case strings.HasPrefix(line, "{"): // an application/json body
				var m map[string]any
				if json.Unmarshal([]byte(line), &m) == nil {
					ls.frames <- m
				}
			}
		}
	}()
	return ls
}

// next returns the next frame within 5 s, failing the test otherwise; ok
// is false when the stream ended.
func (ls *listenStream) next(t testing.TB) (map[string]any, bool) {
	t.Helper()
	select {
	case m, ok := <-ls.frames:
		return m, ok
	case <-time.After(5 * time.Second):
		t.Fatal("no frame on the listen stream within 5 s")
		return nil, false
	}
}

// quiet returns the frames that arrive within d (the stream stays open).
func (ls *listenStream) quiet(d time.Duration) []map[string]any {
	var out []map[string]any
	deadline := time.After(d)
	for {
		select {
		case m, ok := <-ls.frames:
			if !ok {
				return out
			}
			out = append(out, m)
		case <-deadline:
			return out
		}
	}
}

func TestModernSmoke(t *testing.T) {
	h := newHarness(t)
	tok := h.token("host", userScopes)
	st, m := h.modernCall(tok, 1, "server/discover", "", "{}")
	t.Logf("discover %d %v", st, m)
	st, m = h.modernCall(tok, 2, "resources/read", "care-internal://ray/risk", `{"uri":"care-internal://ray/risk"}`)
	t.Logf("read %d %v", st, m)
	st, m = h.modernCall(tok, 3, "resources/list", "", `{}`)
	t.Logf("list %d %v", st, m)
	ls := h.openListen(tok, 9, `{"resourceSubscriptions":["care://ray/weight_bearing","care-internal://ray/risk"],"resourcesListChanged":true}`)
	f, _ := ls.next(t)
	t.Logf("listen %d first %v", ls.status, f)
	h.publish("weight_bearing", "user", "Full weight.")
	f, _ = ls.next(t)
	t.Logf("listen next %v", f)
}
