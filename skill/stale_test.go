package skill

import (
	"strings"
	"testing"
	"time"

	"github.com/unsay/unsay/apl"
	"github.com/unsay/unsay/models"
)

// Finding 3: a version the server served stale (ServedStale, no review
// date known here) is said age first with the warning in every form — an
// answer, a first hearing, the new sentence of a retraction — and marked on
// both cards, whatever the turn's clock says. Twin: the same version served
// fresh is said the ordinary way.
func TestStaleness_AVersionServedStaleIsSaidAgeFirstInEveryFormAndOnBothCards(t *testing.T) {
	anti := func(served bool) models.Version {
		v := ver("anticoagulant", 1, "Rivaroxaban 10 mg once daily.", "Dr Mensah, GP", 9*24*time.Hour)
		v.ServedStale = served
		return v
	}
	t.Run("an answer and the care card", func(t *testing.T) {
		for _, served := range []bool{true, false} {
			r := newRig(t, nil)
			r.care.facts["ray"][1] = anti(served)
			out, raw := r.turn(reqOpts{Type: TypeIntent, Intent: IntentCarePlan, Slots: topicSlot("anticoagulant", "ER_SUCCESS_MATCH"), APL: true})
			s := plain(out)
			stale := strings.HasPrefix(s, "Nine days ago, Dr Mensah, GP, wrote your blood thinner instruction:") && strings.HasSuffix(s, models.CheckWithTeam)
			amber := strings.Contains(string(raw), `"byline":"Nine days ago · Dr Mensah, GP"`) && strings.Contains(string(raw), apl.StaleNote)
			if stale != served || amber != served {
				t.Errorf("served stale %v: said %q (stale form %v), care card stale %v", served, s, stale, amber)
			}
		}
	})
	t.Run("a first hearing", func(t *testing.T) {
		r := newRig(t, nil)
		r.care.facts["ray"][1] = anti(true)
		r.care.setPending("ray", models.Announcement{ID: 5, Patient: "ray", Current: anti(true)})
		out, _ := r.turn(reqOpts{})
		if s := plain(out); !strings.HasPrefix(s, "Nine days ago, Dr Mensah, GP, wrote your blood thinner instruction: “Rivaroxaban 10 mg once daily.” "+models.PastReviewSentence) {
			t.Errorf("first hearing: %q", s)
		}
	})
	t.Run("the new sentence of a retraction and the retraction card", func(t *testing.T) {
		r := newRig(t, nil)
		a := retractionWB()
		a.Current.WrittenAt = t0.Add(-9 * 24 * time.Hour)
		a.Current.ServedStale = true
		r.care.setPending("ray", a)
		r.care.facts["ray"][0] = a.Current
		out, raw := r.turn(reqOpts{APL: true})
		if s := plain(out); !strings.Contains(s, "Nine days ago, Sarah Okafor, physio, changed it to: “"+wbV3Text+"” "+models.PastReviewSentence) {
			t.Errorf("retraction: %q", s)
		}
		if d := out.Response.Directives; len(d) != 1 || d[0].Token != apl.TokenRetraction || !strings.Contains(string(raw), `"stale":true`) {
			t.Errorf("retraction card not stale: %s", raw)
		}
	})
	t.Run("a STALE header left in a value counts as served stale", func(t *testing.T) {
		r := newRig(t, nil)
		v := anti(false)
		v.Value = "[STALE — last changed nine days ago by Dr Mensah, GP; say this age aloud]\n" + v.Value
		r.care.facts["ray"][1] = v
		out, _ := r.turn(reqOpts{Type: TypeIntent, Intent: IntentCarePlan, Slots: topicSlot("anticoagulant", "ER_SUCCESS_MATCH")})
		if s := plain(out); !strings.HasPrefix(s, "Nine days ago") || strings.Contains(s, "[STALE") {
			t.Errorf("said %q", s)
		}
	})
}

// Finding T12: when the walking instruction said first at launch is itself
// past its review date (flagged there), the count of the other stale
// facts says "other": "One other thing needs checking." Twin: with the
// walking instruction current, "One thing needs checking."; with two
// others stale, "Two other things need checking."
func TestLaunch_TheStaleCountSaysOtherWhenTheWalkingInstructionWasFlaggedFirst(t *testing.T) {
	for _, tc := range []struct {
		name                string
		walkStale, twoOther bool
		want                string
	}{
		{"walking stale, one other", true, false, "One other thing needs checking."},
		{"walking stale, two others", true, true, "Two other things need checking."},
		{"twin: walking current, one", false, false, "One thing needs checking."},
		{"twin: walking current, two", false, true, "Two things need checking."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, nil)
			if tc.walkStale {
				r.care.facts["ray"][0].StaleAfter = t0.Add(-time.Hour)
			}
			if tc.twoOther {
				r.care.facts["ray"][2].StaleAfter = t0.Add(-time.Hour)
			}
			out, _ := r.turn(reqOpts{})
			s := plain(out)
			if !strings.Contains(s, tc.want) {
				t.Errorf("launch %q, want %q", s, tc.want)
			}
			if tc.walkStale && strings.Count(s, "past its review date") != map[bool]int{false: 2, true: 3}[tc.twoOther] {
				t.Errorf("launch %q: every stale fact flagged?", s)
			}
		})
	}
}
