package bridge

import (
	"context"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/unsay/unsay/models"
)

// complete answers completion/complete. The one completable argument is
// brief_carer's patient: the patients the caller's token is bound to whose
// id starts with the typed value, sorted — never a patient the caller
// cannot read (P-21). Any other reference or argument completes to nothing.
func (s *Server) complete(_ context.Context, req *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
	values := []string{}
	prm := req.Params
	if prm != nil && prm.Ref != nil && prm.Ref.Type == "ref/prompt" && prm.Ref.Name == PromptBriefCarer && prm.Argument.Name == "patient" {
		p := s.readPrincipal(req)
		for _, id := range p.Patients {
			if id != models.AllPatients && strings.HasPrefix(id, prm.Argument.Value) && p.Can(models.ScopeReadUser) {
				values = append(values, id)
			}
		}
		slices.Sort(values)
		values = slices.Compact(values)
	}
	return &mcp.CompleteResult{Completion: mcp.CompletionResultDetails{Values: values, Total: len(values)}}, nil
}
