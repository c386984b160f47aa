package speech

import (
	"context"
	"strings"
	"testing"

	"github.com/unsay/unsay/models"
)

// Finding F3: Ray heard the blood thinner's v1 for certain; a turn then
// offered the retraction to v2 (a part of it carrying v2's words was
// written, its delivery never confirmed); then v3, unlike both, is
// written. The next retraction withdraws v1 — what he was told, as told —
// and v2 — what he may have been told, as such — never v2 alone. Twin: when
// v3 says v1's words again, only v2 is withdrawn (v1 stands).
func TestWithdraw_ARetractionFromWordsHeMayHaveHeardAlsoWithdrawsTheWordsHeWasTold(t *testing.T) {
	const told, maybe = "Take rivaroxaban 10 mg once a day.", "Take TWO tablets of apixaban today."
	for _, tt := range []struct {
		name, latest string
		wantTold     bool
	}{
		{"v3 unlike both: both withdrawn", "Take ONE tablet of apixaban today.", true},
		{"twin: v3 says v1 again: only v2 withdrawn", told, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeCare(t)
			seedRay(f)
			p := startPrincipal(t, f, newTestDB(t), "ray")
			waitConnected(t, p)
			heardThenOffered(t, p, f, maybe)
			n := f.publish(anti, tt.latest)
			waitPending(t, p, anti, n)
			s := turnOf(t, p, "ray")
			got := spoken(t, s)
			a := s.Pending[0]
			if a.Heard == nil || a.Heard.Value != maybe || !a.HeardUnsure || a.Current.N != n {
				t.Fatalf("pending = %+v, want the retraction of %q (may have heard) by v%d", a, maybe, n)
			}
			if tt.wantTold {
				if a.Told == nil || a.Told.Value != told || a.Told.N != 1 {
					t.Fatalf("Told = %+v, want v1 %q", a.Told, told)
				}
				want := "Stop — " + models.RedeliveryPhrase + ": your blood thinner instruction has changed. I told you: “" + told + "” I may also have told you: “" + maybe + "”"
				if !strings.HasPrefix(got, want) || !strings.Contains(got, "“"+tt.latest+"”") {
					t.Errorf("spoken %q\nwant prefix %q", got, want)
				}
				return
			}
			if a.Told != nil || strings.Contains(got, "I told you") || !strings.Contains(got, "I may have told you: “"+maybe+"”") {
				t.Errorf("Told = %+v, spoken %q: want only v2 withdrawn", a.Told, got)
			}
		})
	}
}

// Finding F10: Ray heard the blood thinner's v1 for certain; the
// retraction to v2 was offered and never confirmed; then the one to v3
// (withdrawing v2) was offered and never confirmed either; then v4 is
// written. The next retraction withdraws v1 as told, and both v2 and v3
// as words he may have been told — never v3 alone. Twins: v4 saying v2's
// words again does not quote v2 as withdrawn (it is what she changed it
// to); with v3's delivery confirmed only v3 — what he heard — is withdrawn.
func TestWithdraw_TwoUnconfirmedOffersInARowAreBothWithdrawn(t *testing.T) {
	const v1, v2, v3 = "Take rivaroxaban 10 mg once a day.", "Take TWO tablets of apixaban today.", "Take ONE tablet of apixaban today."
	for _, tt := range []struct {
		name, v4  string
		confirmed bool // v3's delivery confirmed (MarkHeard)
		want      string
	}{
		{"v4 unlike all: v1 told, v2 and v3 may have been", "Stop apixaban; back to rivaroxaban 15 mg.", false,
			"I told you: “" + v1 + "” I may also have told you: “" + v2 + "” and “" + v3 + "”"},
		{"twin: v4 says v2's words again: v1 told, v3 may have been", v2, false,
			"I told you: “" + v1 + "” I may also have told you: “" + v3 + "”"},
		{"twin: v3 confirmed: only v3, as told", "Stop apixaban; back to rivaroxaban 15 mg.", true,
			"I told you: “" + v3 + "”"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeCare(t)
			seedRay(f)
			p := startPrincipal(t, f, newTestDB(t), "ray")
			waitConnected(t, p)
			heardThenOffered(t, p, f, v2) // offered; the process dies before MarkHeard
			n3 := f.publish(anti, v3)
			waitPending(t, p, anti, n3)
			s := turnOf(t, p, "ray")
			if len(s.Pending) != 1 || s.Pending[0].Current.N != n3 {
				t.Fatalf("the turn offers %+v, want the retraction to v%d", s.Pending, n3)
			}
			if err := p.Offered(context.Background(), "ray", []models.Offer{offerOf(s.Pending[0])}); err != nil {
				t.Fatal(err)
			}
			if tt.confirmed {
				if err := p.MarkHeard(context.Background(), "ray", s.Pending[0].URI(), n3, models.Hearing{}); err != nil {
					t.Fatal(err)
				}
			}
			n4 := f.publish(anti, tt.v4)
			waitPending(t, p, anti, n4)
			got := spoken(t, turnOf(t, p, "ray"))
			stop := "Stop — your blood thinner instruction has changed. "
			if !tt.confirmed {
				stop = "Stop — " + models.RedeliveryPhrase + ": your blood thinner instruction has changed. "
			}
			if want := stop + tt.want + " "; !strings.HasPrefix(got, want) || !strings.Contains(got, "changed it") || !strings.Contains(got, ": “"+tt.v4+"”") {
				t.Errorf("spoken %q\nwant prefix %q, then v4 as the change", got, want)
			}
		})
	}
}
