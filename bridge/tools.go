package bridge

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/unsay/unsay/models"
)

// WhatsChangedInput is the whats_changed tool's input.
type WhatsChangedInput struct {
	Since string `json:"since" jsonschema:"RFC 3339 timestamp; revisions written strictly after it are returned. Must not be later than the server clock."`
}

// WhatsChangedOutput is the whats_changed tool's structured output.
type WhatsChangedOutput struct {
	AsOf    string     `json:"asOf" jsonschema:"the server clock when the answer was built, RFC 3339 UTC"`
	Changes []Revision `json:"changes" jsonschema:"every revision since 'since' the caller may read, oldest first (only each fact's latest when olderRevisionsOmitted is set)"`
	// OlderRevisionsOmitted is set when the window held more revisions than
	// one answer carries: Changes then holds each fact's latest revision
	// only (with its retraction and previous words), and this counts the
	// earlier revisions left out.
	OlderRevisionsOmitted int `json:"olderRevisionsOmitted,omitempty" jsonschema:"set when more revisions were written since 'since' than one answer carries: changes then holds only each fact's latest revision (with its retraction), and this counts the earlier ones left out"`
}

// DefaultWhatsChangedLimit bounds one whats_changed answer: 200
// revisions. A window with more is answered with each fact's latest
// revision only; one in which more facts than that changed is a tool error
// naming the limit.
const DefaultWhatsChangedLimit = 200

// Revision is one entry of whats_changed.
type Revision struct {
	URI             string `json:"uri" jsonschema:"the fact's unversioned URI"`
	Version         int    `json:"version" jsonschema:"the version written"`
	Value           string `json:"value" jsonschema:"the clinician's words; starts with a [STALE …] header when the fact is past its review date"`
	PreviousValue   string `json:"previousValue,omitempty" jsonschema:"the words of version-1, absent for a creation"`
	PreviousVersion int    `json:"previousVersion,omitempty" jsonschema:"version-1, absent for a creation"`
	AuthorID        string `json:"authorId"`
	AuthorLabel     string `json:"authorLabel"`
	WrittenAt       string `json:"writtenAt" jsonschema:"RFC 3339 UTC with milliseconds"`
	AgeSeconds      int64  `json:"ageSeconds" jsonschema:"seconds between writtenAt and asOf"`
	Stale           bool   `json:"stale" jsonschema:"past its review date at asOf"`
	Retraction      string `json:"retraction,omitempty" jsonschema:"the sentence to speak FIRST, on the latest revision of each fact only: it withdraws the version this session last read (or, if it read none, the version current at since) and gives the newest words. Absent for earlier revisions, assistant-only facts, creations and unchanged words."`
}

// ToolWhatsChanged is the name of the tool.
const ToolWhatsChanged = "whats_changed"

// whatsChangedOutputSchema is the inferred schema of WhatsChangedOutput
// with "changes" typed as an array: the SDK infers ["null","array"] for a
// slice, but the answer always carries an array (empty when nothing
// changed).
func whatsChangedOutputSchema() *jsonschema.Schema {
	sch, err := jsonschema.For[WhatsChangedOutput](nil)
	if err != nil {
		panic("bridge: whats_changed output schema: " + err.Error()) // a static type: cannot fail
	}
	if c := sch.Properties["changes"]; c != nil {
		c.Types = nil
		c.Type = "array"
	}
	return sch
}

func whatsChangedTool() *mcp.Tool {
	return &mcp.Tool{
		OutputSchema: whatsChangedOutputSchema(),
		Name:         ToolWhatsChanged,
		Title:        "What changed in the care plan",
		Description: "Call this before answering any care question, and when the patient or a carer asks what changed. Returns every revision written after 'since' that you may read, " +
			"oldest first, with the previous words and a ready-made retraction. Withdraw before you answer: if an entry has a retraction, speak it first, word for word. " +
			"If an entry is past its review date, say its age aloud.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: boolPtr(false)},
		// MCP Apps: the UI resource a host may render with this tool's
		// result (_meta.ui; the flat "ui/resourceUri" key is deprecated).
		Meta: mcp.Meta{"ui": map[string]any{"resourceUri": EchoURI}},
	}
}

func boolPtr(b bool) *bool { return &b }

// errSince is the tool-level error for a bad 'since'; it becomes a result
// with isError: true (not a protocol error).
var errSince = errors.New("since")

// errWindow is the tool-level error for a window too large for one answer.
var errWindow = errors.New("too many changes")

func (s *Server) whatsChangedLimit() int {
	if s.cfg.WhatsChangedLimit > 0 {
		return s.cfg.WhatsChangedLimit
	}
	return DefaultWhatsChangedLimit
}

// whatsChanged implements the tool: every revision since in.Since readable
// by the request's principal, oldest first. A malformed or future 'since'
// is a tool error (isError: true).
func (s *Server) whatsChanged(ctx context.Context, req *mcp.CallToolRequest, in WhatsChangedInput) (*mcp.CallToolResult, WhatsChangedOutput, error) {
	now := s.now()
	since, err := time.Parse(time.RFC3339Nano, in.Since)
	if err != nil {
		return nil, WhatsChangedOutput{}, fmt.Errorf("%w: %q is not an RFC 3339 timestamp such as 2026-10-04T09:00:00Z", errSince, truncate(in.Since, 64))
	}
	if since.After(now) {
		return nil, WhatsChangedOutput{}, fmt.Errorf("%w: %s is later than the server clock %s", errSince, since.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339))
	}
	p := s.readPrincipal(req)
	// The store reads at most limit+1 revisions: a longer window comes back
	// as each fact's latest revision (with its first in the window) and a
	// count of those left out, so memory is bounded by the answer.
	limit := s.whatsChangedLimit()
	win, err := s.st.SinceAtMost(ctx, p, since, limit)
	if err != nil {
		s.logger.ErrorContext(ctx, "whats_changed: store since failed", "err", err)
		return nil, WhatsChangedOutput{}, errors.New("the care store could not be read; try again")
	}
	if win.Facts > limit {
		return nil, WhatsChangedOutput{}, fmt.Errorf("%w: %d facts you may read changed since %s, more than the %d one answer carries; ask again with a later since, or read each fact you need (resources/read carries its retraction)",
			errWindow, win.Facts, since.UTC().Format(time.RFC3339), limit)
	}
	versions, first, omitted := win.Versions, win.First, win.Omitted
	st, _ := s.sessionOf(req)
	// One retraction per fact, on its latest revision: it withdraws what the
	// host last spoke and names the newest words, never a superseded one.
	last := map[models.URI]int{}
	for _, v := range versions {
		u := v.FactURI()
		last[u] = max(last[u], v.N)
	}
	// versionAt returns version n of fact u: from the window itself, or read
	// once through the partition and remembered (each is needed both as one
	// entry's previous value and as the version withdrawn).
	known := make(map[models.URI]models.Version, len(versions))
	for _, v := range versions {
		known[v.URI()] = v
	}
	versionAt := func(u models.URI, n int) (models.Version, bool) {
		k := u.WithVersion(n)
		if v, ok := known[k]; ok {
			return v, true
		}
		pr, err := s.st.Read(ctx, p, k.String())
		if err != nil {
			return models.Version{}, false
		}
		known[k] = pr.Version
		return pr.Version, true
	}
	out := WhatsChangedOutput{AsOf: now.UTC().Format(models.TimeLayout), Changes: make([]Revision, 0, len(versions)), OlderRevisionsOmitted: omitted}
	for _, v := range versions {
		if !p.CanRead(v.Patient, v.Audience) { // defence in depth (P-1)
			continue
		}
		r := Revision{
			URI:         v.FactURI().String(),
			Version:     v.N,
			Value:       v.Value,
			AuthorID:    v.AuthorID,
			AuthorLabel: v.AuthorLabel,
			WrittenAt:   v.WrittenAt.UTC().Format(models.TimeLayout),
			AgeSeconds:  int64(now.Sub(v.WrittenAt) / time.Second),
			Stale:       v.IsStale(now),
		}
		if r.Stale {
			r.Value = models.StaleHeader(v, now) + "\n" + v.Value
		}
		if v.N > 1 {
			if pv, ok := versionAt(v.FactURI(), v.N-1); ok {
				r.PreviousValue = pv.Value
				r.PreviousVersion = pv.N
			}
		}
		if v.N != last[v.FactURI()] {
			out.Changes = append(out.Changes, r)
			continue
		}
		// The retraction withdraws what this session read; a session that
		// read nothing of the fact gets withdrawn the version that was
		// current at since (the one before the window's first revision).
		var prev *models.Version
		read, readIt := models.Version{}, false
		if st != nil {
			read, readIt = st.lastReadOf(v.FactURI())
		}
		if readIt {
			if read.N < v.N {
				prev = &read
			}
		} else if f := first[v.FactURI()]; f > 1 {
			if pv, ok := versionAt(v.FactURI(), f-1); ok {
				prev = &pv
			}
		}
		if prev != nil {
			r.Retraction = s.retraction(ctx, p, *prev, v, now)
		}
		out.Changes = append(out.Changes, r)
	}
	return whatsChangedResult(out, since), out, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
