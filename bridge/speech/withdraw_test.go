package speech

import (
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
