package bridge

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/unsay/unsay/models"
)

// PromptBriefCarer is the name of the carer-handover prompt.
const PromptBriefCarer = "brief_carer"

// unreadablePatient is brief_carer's answer for a patient the caller may
// not read speakable facts of — another patient's (P-21), one that does
// not exist, or any patient for a caller without care.read.user: -32602
// (MCP prompts/get: invalid arguments) on both eras, with the same message
// for every cause, naming only the id asked for, so the answer does not
// tell a caller which patients exist (P-2). Never "there are no
// instructions", which would be untrue of a patient who has them.
func unreadablePatient(patient string) error {
	return invalidParams(fmt.Sprintf("patient %q: no care notes this token may read", patient))
}

// StalePromptSuffix ends a stale line of brief_carer (P-7).
const StalePromptSuffix = " — PAST ITS REVIEW DATE, say its age aloud"

func briefCarerPrompt() *mcp.Prompt {
	return &mcp.Prompt{
		Name:        PromptBriefCarer,
		Title:       "Brief a carer",
		Description: "A handover for a carer: every speakable instruction for the patient, newest revision first, with author and age. Built only from speakable facts.",
		Arguments: []*mcp.PromptArgument{{
			Name: "patient", Title: "Patient id", Description: "the patient's id, e.g. ray", Required: true,
		}},
	}
}

// briefCarer builds the handover through the caller's principal NARROWED to
// care.read.user, even for a caller holding both read scopes, so no code
// path here can read an assistant-only fact (P-10). Lines carry author and
// spoken age, latest revision first; a stale line ends with
// StalePromptSuffix. An invalid patient id is -32602; so is a patient the
// narrowed principal may not read (unreadablePatient), whether or not the
// patient exists. A readable patient with no speakable fact gets a
// handover that says so.
func (s *Server) briefCarer(ctx context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
	patient := ""
	if req.Params != nil {
		patient = req.Params.Arguments["patient"]
	}
	if !models.ValidID(patient) {
		return nil, invalidParams("patient must be a patient id like ray")
	}
	speakable := s.readPrincipal(req).Narrow(models.ScopeReadUser)
	if !speakable.CanRead(patient, models.AudienceUser) {
		return nil, unreadablePatient(patient)
	}
	facts, err := s.st.List(ctx, speakable)
	if err != nil {
		s.logger.ErrorContext(ctx, "brief_carer: store list failed", "err", err)
		return nil, fmt.Errorf("the care store could not be read")
	}
	now := s.now()
	var mine []models.Version
	for _, f := range facts {
		v := f.Current
		if v.Patient == patient && v.Audience == models.AudienceUser && speakable.CanRead(v.Patient, v.Audience) {
			mine = append(mine, v)
		}
	}
	slices.SortStableFunc(mine, func(a, b models.Version) int { return b.WrittenAt.Compare(a.WrittenAt) })
	var b strings.Builder
	fmt.Fprintf(&b, "Carer handover for %s. These are the current speakable instructions, newest revision first. "+
		"Say each one with its author and age; where a line is past its review date, say its age aloud.\n", patient)
	if len(mine) == 0 {
		b.WriteString("\nThere are no speakable instructions on record for this patient.\n")
	}
	for _, v := range mine {
		fmt.Fprintf(&b, "\n- %s: %s — %s, %s (version %d)", capitalize(models.Topic(v.Domain)), models.Quote(v.Value),
			v.AuthorLabel, models.SpokenAge(now.Sub(v.WrittenAt)), v.N)
		if v.IsStale(now) {
			b.WriteString(StalePromptSuffix)
		}
	}
	b.WriteString("\n")
	return &mcp.GetPromptResult{
		Description: "Carer handover for " + patient + " (speakable facts only)",
		Messages: []*mcp.PromptMessage{{
			Role:    "user",
			Content: &mcp.TextContent{Text: b.String()},
		}},
	}, nil
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
