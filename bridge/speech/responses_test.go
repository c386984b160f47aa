package speech

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/unsay/unsay/models"
)

// Finding U8: the principal keeps the record of a response's marks in the
// heard ledger with its offers, and refuses a malformed one whole — its
// offers unrecorded too, nothing partial. Twin: a well-formed record is
// read back, marks and all, through another handle on the same ledger.
func TestOfferedResponse_RefusesAMalformedRecordWholeAndKeepsAWellFormedOne(t *testing.T) {
	wbURI := models.NewURI(models.AudienceUser, "ray", "weight_bearing")
	bobURI := models.NewURI(models.AudienceUser, "bob", "weight_bearing")
	const id, session = "0123456789abcdef0123456789abcdef", "amzn1.echo-api.session.u8"
	good := func() models.SentResponse {
		return models.SentResponse{Session: session, ID: id, Marks: []models.Marked{{URI: wbURI, HeardBefore: 0, From: 0, Version: 1, Response: id}}}
	}
	for _, tt := range []struct {
		name   string
		mutate func(*models.SentResponse)
		want   string // "" for the twin
	}{
		{"a session id with a space", func(s *models.SentResponse) { s.Session = "amzn1 session" }, "session id"},
		{"a response id not of ValidID's form", func(s *models.SentResponse) { s.ID = "ABC DEF" }, "response id"},
		{"a replaced id not of ValidID's form", func(s *models.SentResponse) { s.Replaces = "../x" }, "replaced response id"},
		{"a mark of another patient", func(s *models.SentResponse) { s.Marks[0].URI = bobURI }, "not a fact of patient ray"},
		{"a mark of another response", func(s *models.SentResponse) { s.Marks[0].Response = "ffffffffffffffffffffffffffffffff" }, "mark of response"},
		{"a mark whose heard-before is not below its version", func(s *models.SentResponse) { s.Marks[0].HeardBefore = 1 }, "heard before v1"},
		{"twin: well formed", func(*models.SentResponse) {}, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeCare(t)
			seedRay(f)
			db := newTestDB(t)
			p := startPrincipal(t, f, db, "ray")
			waitConnected(t, p)
			ctx := context.Background()
			sent := good()
			tt.mutate(&sent)
			err := p.OfferedResponse(ctx, "ray", []models.Offer{{URI: wbURI, Version: 1, Told: true}}, sent)
			other := openDB(t, db)
			recs, rerr := other.SentResponses(ctx, "ray", session, time.Time{})
			facts, ferr := other.Facts(ctx, "ray")
			if rerr != nil || ferr != nil {
				t.Fatal(rerr, ferr)
			}
			if tt.want != "" {
				if !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), tt.want) {
					t.Fatalf("OfferedResponse = %v; want ErrInvalidArgument naming %q", err, tt.want)
				}
				if len(recs) != 0 || len(facts[wbURI.String()].Offered) != 0 {
					t.Fatalf("a refused record left %+v recorded, offers %v", recs, facts[wbURI.String()].Offered)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := []models.LedgerMark{{URI: wbURI.String(), Version: 1, Response: id}}
			if len(recs) != 1 || recs[0].Response != id || !slices.Equal(recs[0].Marks, want) || !slices.Equal(facts[wbURI.String()].Offered, []int{1}) {
				t.Fatalf("recorded %+v, offers %v; want response %s marking %+v, v1 offered", recs, facts[wbURI.String()].Offered, id, want)
			}
			back, err := p.SentResponses(ctx, "ray", session)
			if err != nil || len(back) != 1 || !slices.Equal(back[0].Marks, sent.Marks) {
				t.Fatalf("SentResponses = %+v, %v; want %+v", back, err, sent.Marks)
			}
		})
	}
}
