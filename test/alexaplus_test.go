//go:build e2e

package e2e_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"

	"github.com/unsay/unsay/test/harness"
)

// alexaPlusClient speaks MCP as Alexa+'s client does (Amazon's "MCP
// Client and App Lifecycle" page): raw JSON-RPC over Streamable HTTP POSTs,
// initialize with protocolVersion 2025-03-26 and roots, no
// MCP-Protocol-Version header (2025-03-26 has none), and never a GET
// stream — request/response only.
type alexaPlusClient struct {
	t       *testing.T
	url     string
	token   string
	session string
	id      int
}

// call posts one JSON-RPC request and returns its result (or fails on a
// JSON-RPC error).
func (c *alexaPlusClient) call(method string, params any) map[string]any {
	c.t.Helper()
	c.id++
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": fmt.Sprintf("%x-%d", c.id, c.id), "method": method, "params": params})
	resp := c.post(body)
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		c.t.Fatalf("%s: HTTP %d %s", method, resp.StatusCode, b)
	}
	if sid := resp.Header.Get("Mcp-Session-Id"); sid != "" && c.session == "" {
		c.session = sid
	}
	frame := readReply(c.t, resp)
	if e, ok := frame["error"]; ok {
		c.t.Fatalf("%s: JSON-RPC error %v", method, e)
	}
	res, _ := frame["result"].(map[string]any)
	return res
}

func (c *alexaPlusClient) notify(method string) {
	c.t.Helper()
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "method": method})
	resp := c.post(body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		c.t.Fatalf("%s: HTTP %d", method, resp.StatusCode)
	}
}

func (c *alexaPlusClient) post(body []byte) *http.Response {
	c.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, c.url, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+c.token)
	if c.session != "" {
		req.Header.Set("Mcp-Session-Id", c.session)
	}
	resp, err := (&http.Client{Timeout: 20 * time.Second}).Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	return resp
}

// readReply returns the JSON-RPC response of a POST: the JSON body, or
// the first SSE event carrying an id.
func readReply(t *testing.T, resp *http.Response) map[string]any {
	t.Helper()
	b, _ := io.ReadAll(resp.Body)
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("reply %q: %v", b, err)
		}
		return m
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if data, ok := strings.CutPrefix(sc.Text(), "data:"); ok {
			var m map[string]any
			if json.Unmarshal([]byte(strings.TrimSpace(data)), &m) == nil && m["id"] != nil {
				return m
			}
		}
	}
	t.Fatalf("no JSON-RPC response in %q", b)
	return nil
}

// initialize sends Amazon's sample initialize payload and
// notifications/initialized, and returns the initialize result.
func (c *alexaPlusClient) initialize() map[string]any {
	c.t.Helper()
	res := c.call("initialize", map[string]any{
		"protocolVersion": "2025-03-26",
		"capabilities":    map[string]any{"roots": map[string]any{"listChanged": true}},
		"clientInfo":      map[string]any{"name": "Alexa+ MCP Client", "version": "1.0.0"},
	})
	c.notify("notifications/initialized")
	return res
}

// tool calls a tool and returns its one text block and its result.
func (c *alexaPlusClient) tool(name string, args map[string]any) (string, map[string]any) {
	c.t.Helper()
	res := c.call("tools/call", map[string]any{"name": name, "arguments": args})
	content, _ := res["content"].([]any)
	if len(content) != 1 {
		c.t.Fatalf("%s: %d content blocks, want one text block: %v", name, len(content), res)
	}
	block, _ := content[0].(map[string]any)
	text, _ := block["text"].(string)
	if block["type"] != "text" || text == "" {
		c.t.Fatalf("%s: content %v", name, block)
	}
	return text, res
}

// TestOAuth_AlexaPlusAddOnRegistersThenALinkedCustomerHearsTheWithdrawalFirst
// plays Alexa+ against the real binary, as its MCP Toolkit does: one OAuth
// client with both grants (`unsay client add`); at registration a
// client_credentials token initializes at 2025-03-26 and lists the tools
// (care_instruction, whats_changed, the card as their MCP Apps view) but
// reads no patient; a carer links the account (authorization_code + PKCE
// S256 through the consent page with a six-digit code); the customer's
// session — never a GET stream — asks for the walking instruction, the
// physio revises it with `unsay write`, and both tools' text blocks (all a
// 2025-03-26 host sees) open with the withdrawal of what it was told.
func TestOAuth_AlexaPlusAddOnRegistersThenALinkedCustomerHearsTheWithdrawalFirst(t *testing.T) {
	s := startServer(t, oauthPart, "--alexa-verify=false")
	ctx := context.Background()
	const redirect = "http://127.0.0.1:9/alexa-plus/callback"
	out, err := harness.Run(ctx, bin, "client", "add", "--name", "Care Notes for Alexa+", "--redirect-uri", redirect,
		"--grant", "authorization_code", "--grant", "client_credentials", "--db", s.DB)
	if err != nil {
		t.Fatal(err)
	}
	creds := map[string]string{}
	for _, line := range strings.Split(out, "\n") {
		if k, v, ok := strings.Cut(line, "\t"); ok {
			creds[k] = v
		}
	}
	if creds["client_id"] == "" || creds["client_secret"] == "" {
		t.Fatalf("unsay client add printed %q", out)
	}

	// Amazon's checklist: the authorization server metadata lists both
	// grants and S256.
	asm, err := oauthex.GetAuthServerMeta(ctx, s.URL+"/.well-known/oauth-authorization-server", s.URL, http.DefaultClient)
	if err != nil || !slices.Contains(asm.GrantTypesSupported, "client_credentials") || !slices.Contains(asm.GrantTypesSupported, "authorization_code") ||
		!slices.Contains(asm.CodeChallengeMethodsSupported, "S256") {
		t.Fatalf("authorization server metadata %+v: %v (want both grants and S256)", asm, err)
	}

	// Registration: the service token lists tools and reads nobody.
	cc := clientcredentials.Config{ClientID: creds["client_id"], ClientSecret: creds["client_secret"], TokenURL: s.URL + "/oauth/token"}
	service, err := cc.Token(ctx)
	if err != nil {
		t.Fatalf("client_credentials: %v", err)
	}
	reg := &alexaPlusClient{t: t, url: s.URL + "/mcp", token: service.AccessToken}
	init := reg.initialize()
	if init["protocolVersion"] != "2025-03-26" {
		t.Fatalf("initialize negotiated %v, want 2025-03-26 (what Alexa+ sends)", init["protocolVersion"])
	}
	caps, _ := init["capabilities"].(map[string]any)
	if caps["tools"] == nil || caps["resources"] == nil {
		t.Fatalf("capabilities %v: want tools and resources", caps)
	}
	tools, _ := reg.call("tools/list", map[string]any{})["tools"].([]any)
	names := map[string]bool{}
	for _, x := range tools {
		tl, _ := x.(map[string]any)
		name, _ := tl["name"].(string)
		names[name] = true
		meta, _ := tl["_meta"].(map[string]any)
		ui, _ := meta["ui"].(map[string]any)
		if ui["resourceUri"] != "ui://unsay/echo" {
			t.Errorf("tool %s: _meta.ui %v, want resourceUri ui://unsay/echo", name, meta["ui"])
		}
	}
	if !names["care_instruction"] || !names["whats_changed"] {
		t.Fatalf("tools/list with the registration token: %v", names)
	}
	resources, _ := reg.call("resources/list", map[string]any{})["resources"].([]any)
	for _, x := range resources {
		if r, _ := x.(map[string]any); strings.HasPrefix(fmt.Sprint(r["uri"]), "care") {
			t.Errorf("the registration token listed %v", r["uri"])
		}
	}
	text, _ := reg.tool("care_instruction", map[string]any{"topic": "walking"})
	if strings.Contains(text, "weight") || strings.Contains(strings.ToLower(text), "ray") || !strings.Contains(text, "No patient's care notes are linked") {
		t.Fatalf("the registration token's care_instruction: %s", text)
	}

	// Account linking: authorization_code with PKCE S256 through the consent page.
	conf := &oauth2.Config{ClientID: creds["client_id"], ClientSecret: creds["client_secret"], RedirectURL: redirect,
		Scopes: []string{"care.read.user"}, Endpoint: oauth2.Endpoint{AuthURL: s.URL + "/oauth/authorize", TokenURL: s.URL + "/oauth/token", AuthStyle: oauth2.AuthStyleInHeader}}
	verifier := oauth2.GenerateVerifier()
	back := consentWith(t, conf.AuthCodeURL("alexa-plus", oauth2.S256ChallengeOption(verifier), oauth2.SetAuthURLParam("resource", s.URL+"/mcp")), linkCodeFor(t, s))
	linked, err := conf.Exchange(ctx, back.Query().Get("code"), oauth2.VerifierOption(verifier))
	if err != nil {
		t.Fatal(err)
	}

	// The customer's session: 2025-03-26, no GET stream.
	cust := &alexaPlusClient{t: t, url: s.URL + "/mcp", token: linked.AccessToken}
	if v := cust.initialize()["protocolVersion"]; v != "2025-03-26" {
		t.Fatalf("the linked session negotiated %v", v)
	}
	text, res := cust.tool("care_instruction", map[string]any{"topic": "walking"})
	if !strings.Contains(text, "Now: “Partial weight-bearing") || strings.Contains(text, "SAY THIS FIRST") {
		t.Fatalf("the first answer:\n%s", text)
	}
	if sc, _ := res["structuredContent"].(map[string]any); sc == nil {
		t.Error("no structuredContent beside the text (hosts of 2025-06-18 and later read it)")
	}
	since := time.Now().UTC().Add(-2 * time.Second).Format(time.RFC3339Nano)
	if _, err := s.Write(ctx, "ray", "weight_bearing", "Full weight-bearing as tolerated.", "okafor", "Sarah Okafor, physio"); err != nil {
		t.Fatal(err)
	}

	const withdrawal = "Stop — your walking instruction has changed. I told you: “Partial weight-bearing"
	text, _ = cust.tool("whats_changed", map[string]any{"since": since})
	if i, j := strings.Index(text, withdrawal), strings.Index(text, "Revisions, oldest first"); i < 0 || j < i ||
		!strings.Contains(text[:j], "“Full weight-bearing as tolerated.”") || !strings.Contains(text[:j], "Sarah Okafor, physio") {
		t.Fatalf("whats_changed does not open with the withdrawal:\n%s", text)
	}
	text, res = cust.tool("care_instruction", map[string]any{"topic": "crutches"})
	if !strings.HasPrefix(text, "SAY THIS FIRST") || !strings.Contains(text, withdrawal) ||
		strings.Index(text, withdrawal) > strings.Index(text, "Now: “Full weight-bearing as tolerated.”") {
		t.Fatalf("care_instruction after the revision does not open with the withdrawal:\n%s", text)
	}
	sc, _ := res["structuredContent"].(map[string]any)
	ins, _ := sc["instructions"].([]any)
	if len(ins) != 1 {
		t.Fatalf("structured: %v", sc)
	}
	first, _ := ins[0].(map[string]any)
	if r, _ := first["retraction"].(string); !strings.HasPrefix(r, "Stop — your walking instruction has changed.") || first["previousValue"] == nil {
		t.Errorf("structured instruction %v: want the retraction and previousValue", first)
	}
	if hit := containsAny(text, harness.AssistantOnlyPhrases); hit != "" {
		t.Errorf("assistant-only text %q reached the customer's session", hit)
	}
}
