package bridge

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestComplete_OffersOnlyThePatientsTheTokenIsBoundTo(t *testing.T) {
	h := newHarness(t)
	c := h.connect(h.tokenFor("carer", userScopes, time.Hour, "ray", "rachel"))
	ask := func(ref *mcp.CompleteReference, arg, value string) []string {
		t.Helper()
		res, err := c.cs.Complete(context.Background(), &mcp.CompleteParams{Ref: ref, Argument: mcp.CompleteParamsArgument{Name: arg, Value: value}})
		if err != nil {
			t.Fatal(err)
		}
		return res.Completion.Values
	}
	brief := &mcp.CompleteReference{Type: "ref/prompt", Name: PromptBriefCarer}
	if got := ask(brief, "patient", "ra"); !slices.Equal(got, []string{"rachel", "ray"}) {
		t.Fatalf("completions for ra = %v, want the token's patients [rachel ray]", got)
	}
	if got := ask(brief, "patient", "b"); len(got) != 0 {
		t.Fatalf("completions for b = %v, want none (no bound patient starts with b)", got)
	}
	if got := ask(&mcp.CompleteReference{Type: "ref/prompt", Name: "other"}, "patient", ""); len(got) != 0 {
		t.Fatalf("another prompt completed to %v", got)
	}
}
