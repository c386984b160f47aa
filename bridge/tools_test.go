package bridge

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/unsay/unsay/models"
)

func callWhatsChanged(t *testing.T, c *client, since string) (*mcp.CallToolResult, WhatsChangedOutput) {
	t.Helper()
	res, err := c.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: ToolWhatsChanged, Arguments: map[string]any{"since": since}})
	if err != nil {
		t.Fatalf("CallTool: %v", err)
	}
	var out WhatsChangedOutput
	if !res.IsError {
		b, _ := json.Marshal(res.StructuredContent)
		if err := json.Unmarshal(b, &out); err != nil {
			t.Fatalf("structured content %s: %v", b, err)
		}
	}
	return res, out
}

func TestWhatsChanged_DeclaresAnOutputSchemaAndTheCardAsItsUI(t *testing.T) {
	h := newHarness(t)
	c := h.connect(h.token("host", userScopes))
	tools, err := c.cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var tool *mcp.Tool
	for _, tl := range tools.Tools {
		if tl.Name == ToolWhatsChanged {
			tool = tl
		}
	}
	if tool == nil {
		t.Fatal("whats_changed not listed")
	}
	schema, _ := json.Marshal(tool.OutputSchema)
	for _, field := range []string{"asOf", "changes", "uri", "version", "value", "previousValue", "previousVersion", "authorId", "authorLabel", "writtenAt", "ageSeconds", "retraction"} {
		if !strings.Contains(string(schema), `"`+field+`"`) {
			t.Errorf("output schema lacks %q: %s", field, schema)
		}
	}
	ui, _ := tool.Meta["ui"].(map[string]any)
	if ui["resourceUri"] != EchoURI {
		t.Errorf("tool _meta.ui = %v, want resourceUri %s", tool.Meta["ui"], EchoURI)
	}
}

func TestWhatsChanged_ReturnsReadableRevisionsOldestFirstWithRetraction(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	user := h.connect(h.token("host", userScopes))
	if _, err := user.cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "care://ray/weight_bearing"}); err != nil {
		t.Fatal(err)
	}
	since := h.st.Now().Add(-time.Second).UTC().Format(time.RFC3339Nano)
	h.publish("risk", models.AudienceAssistant, "Fall risk HIGH; a second fall on the ward.")
	h.publish("weight_bearing", models.AudienceUser, "Full weight-bearing as tolerated.")
	h.publish("diet", models.AudienceUser, "Normal diet.")

	res, out := callWhatsChanged(t, user, since)
	if res.IsError {
		t.Fatalf("isError: %v", res.Content)
	}
	if asOf, err := time.Parse(time.RFC3339, out.AsOf); err != nil || time.Since(asOf) > time.Minute {
		t.Errorf("asOf %q", out.AsOf)
	}
	if len(out.Changes) != 2 || out.Changes[0].URI != "care://ray/weight_bearing" || out.Changes[1].URI != "care://ray/diet" {
		t.Fatalf("changes %+v, want weight_bearing then diet, nothing internal", out.Changes)
	}
	wb := out.Changes[0]
	if wb.Version != 3 || wb.PreviousVersion != 2 || !strings.HasPrefix(wb.PreviousValue, "Partial weight-bearing") ||
		wb.AuthorID != "okafor" || wb.AuthorLabel != "Sarah Okafor, physio" || wb.AgeSeconds < 0 {
		t.Errorf("weight_bearing entry %+v", wb)
	}
	if !strings.HasPrefix(wb.Retraction, "Stop — your walking instruction has changed.") || !strings.Contains(wb.Retraction, "about half your body weight") {
		t.Errorf("retraction %q", wb.Retraction)
	}
	if out.Changes[1].Retraction != "" || out.Changes[1].PreviousVersion != 0 {
		t.Errorf("a creation carries a previous version or retraction: %+v", out.Changes[1])
	}
	// Twin: a dual-scope caller sees the internal revision too, with no retraction.
	dual := h.connect(h.token("reasoner", dualScopes))
	_, dout := callWhatsChanged(t, dual, since)
	if len(dout.Changes) != 3 || dout.Changes[0].URI != "care-internal://ray/risk" || dout.Changes[0].Retraction != "" {
		t.Errorf("dual changes %+v", dout.Changes)
	}
}

func TestWhatsChanged_MalformedOrFutureSinceIsAToolError(t *testing.T) {
	h := newHarness(t)
	c := h.connect(h.token("host", userScopes))
	for _, since := range []string{"yesterday", "", "2026-13-01T00:00:00Z", h.st.Now().Add(time.Hour).UTC().Format(time.RFC3339)} {
		res, _ := callWhatsChanged(t, c, since)
		if !res.IsError {
			t.Errorf("since %q: not isError", since)
		}
	}
	res, out := callWhatsChanged(t, c, h.st.Now().Add(-time.Hour).UTC().Format(time.RFC3339))
	if res.IsError || out.AsOf == "" {
		t.Errorf("valid since: isError %v, out %+v", res.IsError, out)
	}
}

func TestBriefCarer_HasNoInternalTextEvenForADualScopeCaller(t *testing.T) {
	h := newHarness(t)
	dual := h.connect(h.token("reasoner", dualScopes))
	ctx := context.Background()
	// Control: this caller CAN read the internal facts directly.
	if _, err := dual.cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "care-internal://ray/risk"}); err != nil {
		t.Fatalf("control read: %v", err)
	}
	res, err := dual.cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: PromptBriefCarer, Arguments: map[string]string{"patient": "ray"}})
	if err != nil {
		t.Fatal(err)
	}
	text := res.Messages[0].Content.(*mcp.TextContent).Text
	for _, internal := range []string{"Fall risk", "Adherence", "gait cadence", "care-internal", "disputes"} {
		if strings.Contains(text, internal) {
			t.Errorf("brief_carer for a dual-scope caller contains %q:\n%s", internal, text)
		}
	}
	for _, speakable := range []string{"Partial weight-bearing", "Ankle pumps", "Dr Mensah, GP", "Sarah Okafor, physio"} {
		if !strings.Contains(text, speakable) {
			t.Errorf("brief_carer lacks %q:\n%s", speakable, text)
		}
	}
	var staleLine string
	for _, line := range strings.Split(text, "\n") {
		if strings.Contains(line, "Rivaroxaban") {
			staleLine = line
		}
	}
	if !strings.HasSuffix(staleLine, StalePromptSuffix) || !strings.Contains(staleLine, "nine days ago") {
		t.Errorf("stale line %q", staleLine)
	}
	if i, j := strings.Index(text, "A slow count from one to ten"), strings.Index(text, "Rivaroxaban"); i < 0 || j < 0 || i > j {
		t.Errorf("lines are not newest first:\n%s", text)
	}
	if _, err := dual.cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: PromptBriefCarer, Arguments: map[string]string{"patient": "../etc"}}); err == nil {
		t.Error("an invalid patient id was accepted")
	}
}

// TestBriefCarer_APatientTheTokenMayNotReadIsOneInvalidParamsOnBothEras:
// Ray's token asking for bob's handover was told "There are no speakable
// instructions on record for this patient" although bob has one — nothing
// leaked, but a carer was told something untrue. A patient the caller may
// not read — another patient's (bob, who has a speakable fact), one that
// does not exist (nobody), or any patient for a token without
// care.read.user — is one -32602 error on 2025-11-25 and on 2026-07-28,
// the same message but for the id asked, so absent and forbidden are
// indistinguishable. The twins: ray's handover for ray's token, and bob's
// for a token bound to bob, on both eras.
func TestBriefCarer_APatientTheTokenMayNotReadIsOneInvalidParamsOnBothEras(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	bobFact := storeInput("weight_bearing", models.AudienceUser, "Bob may walk with two sticks.")
	bobFact.Patient = "bob"
	if _, err := h.st.Publish(ctx, models.System("test", models.ScopeWrite), bobFact); err != nil {
		t.Fatal(err)
	}
	want := func(patient string) string {
		return fmt.Sprintf("Invalid params: patient %q: no care notes this token may read", patient)
	}
	brief := func(patient string) string {
		return fmt.Sprintf(`{"name":%q,"arguments":{"patient":%q}}`, PromptBriefCarer, patient)
	}
	legacyText := func(tok, patient string) (string, *jsonrpc.Error) {
		res, err := h.connect(tok).cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: PromptBriefCarer, Arguments: map[string]string{"patient": patient}})
		if err != nil {
			return "", wireError(t, err)
		}
		return res.Messages[0].Content.(*mcp.TextContent).Text, nil
	}
	ray := h.token("carer", userScopes)
	noSpeakable := h.token("reasoner", []models.Scope{models.ScopeReadAssistant})
	for _, tc := range []struct {
		name, tok, patient string
	}{
		{"another patient's", ray, "bob"},
		{"a patient nobody has", ray, "nobody"},
		{"a token without care.read.user", noSpeakable, "ray"},
	} {
		_, we := legacyText(tc.tok, tc.patient)
		if we == nil || we.Code != jsonrpc.CodeInvalidParams || we.Message != want(tc.patient) {
			t.Errorf("2025-11-25, %s: %v; want -32602 %q", tc.name, we, want(tc.patient))
		}
		st, f := h.modernCall(tc.tok, 1, "prompts/get", PromptBriefCarer, brief(tc.patient))
		code, msg, _ := errorOf(f)
		if code != jsonrpc.CodeInvalidParams || msg != want(tc.patient) {
			t.Errorf("2026-07-28, %s: HTTP %d, %d %q; want -32602 %q", tc.name, st, code, msg, want(tc.patient))
		}
	}
	// The twins: each token's own patient.
	bob := h.tokenFor("carer", userScopes, time.Hour, "bob")
	for _, tc := range []struct{ tok, patient, says string }{
		{ray, "ray", "Partial weight-bearing"},
		{bob, "bob", "Bob may walk with two sticks."},
	} {
		if text, we := legacyText(tc.tok, tc.patient); we != nil || !strings.Contains(text, tc.says) {
			t.Errorf("2025-11-25 handover for %s: %v\n%s", tc.patient, we, text)
		}
		_, f := h.modernCall(tc.tok, 2, "prompts/get", PromptBriefCarer, brief(tc.patient))
		if b, _ := json.Marshal(f["result"]); f["error"] != nil || !strings.Contains(string(b), tc.says) {
			t.Errorf("2026-07-28 handover for %s: %v", tc.patient, f)
		}
	}
}

func TestInstructions_TellTheHostToCallWhatsChangedAndRetractFirst(t *testing.T) {
	h := newHarness(t)
	c := h.connect(h.token("host", userScopes))
	in := c.cs.InitializeResult().Instructions
	for _, want := range []string{"whats_changed", "retraction FIRST", "never speak", `"care-internal"`} {
		if !strings.Contains(in, want) {
			t.Errorf("instructions lack %q", want)
		}
	}
	caps := c.cs.InitializeResult().Capabilities
	if caps.Resources == nil || !caps.Resources.Subscribe || !caps.Resources.ListChanged || caps.Logging == nil {
		t.Errorf("capabilities %+v", caps)
	}
	if v := c.cs.InitializeResult().ProtocolVersion; v != ProtocolVersion {
		t.Errorf("negotiated %q", v)
	}
}

func TestWhatsChanged_OnlyTheLatestRevisionOfAFactCarriesTheRetraction(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	user := h.connect(h.token("host", userScopes))
	if _, err := user.cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "care://ray/weight_bearing"}); err != nil {
		t.Fatal(err)
	}
	since := h.st.Now().Add(-time.Second).UTC().Format(time.RFC3339Nano)
	h.publish("weight_bearing", models.AudienceUser, "Toe-touch weight-bearing only.")
	h.publish("weight_bearing", models.AudienceUser, "Full weight-bearing as tolerated.")

	_, out := callWhatsChanged(t, user, since)
	if len(out.Changes) != 2 {
		t.Fatalf("changes %+v, want both revisions", out.Changes)
	}
	if out.Changes[0].Retraction != "" {
		t.Errorf("the superseded revision carries a retraction: %q", out.Changes[0].Retraction)
	}
	last := out.Changes[1].Retraction
	if !strings.Contains(last, "about half your body weight") || !strings.Contains(last, "Full weight-bearing as tolerated") || strings.Contains(last, "Toe-touch") {
		t.Errorf("latest retraction %q, want it to withdraw what was read and give the newest words only", last)
	}
	// Twin: a host that read nothing is withdrawn the version current at since.
	fresh := h.connect(h.token("other-host", userScopes))
	_, fout := callWhatsChanged(t, fresh, since)
	if r := fout.Changes[1].Retraction; !strings.Contains(r, "about half your body weight") || strings.Contains(r, "Toe-touch") {
		t.Errorf("retraction for a host that read nothing %q, want the version current at since withdrawn", r)
	}
}
