package skill

import (
	"strings"
	"sync/atomic"
	"testing"

	"github.com/unsay/unsay/models"
)

// f16Revised is the physio's revision written while a part of the long
// (F3) retraction is held.
const f16Revised = "Revised during the hold."

// reviseF3 is what the speech principal does with a revision of the F3
// retraction's fact: the pending retraction now reaches v10 (v9 offered
// or not), v10 is the current fact, and Revisions moves.
func reviseF3(r *rig) {
	a := f3Retraction()
	a.Current, a.Again = ver("weight_bearing", 10, f16Revised, "Sarah Okafor, physio", 0), true
	r.care.setPending("ray", a)
	r.care.mu.Lock()
	r.care.facts["ray"][0] = a.Current
	r.care.mu.Unlock()
	r.care.revs.Add(1)
}

// afterTurnN runs f once, after the n-th call of Turn from now on.
func afterTurnN(r *rig, n int64, f func()) {
	var calls atomic.Int64
	var done atomic.Bool
	r.care.afterTurn = func() {
		if calls.Add(1) == n && done.CompareAndSwap(false, true) {
			f()
		}
	}
}

// partsOf asks "more" until the response stops asking for it (at most 8
// parts) and returns every part said, the first one given.
// cards holds each part's encoded response (its card's text is in it).
func partsOf(t *testing.T, r *rig, first ResponseEnvelope, firstBody []byte, session string, apl bool) (parts, bodies []string) {
	t.Helper()
	parts, bodies = []string{plain(first)}, []string{string(firstBody)}
	for i := 0; strings.HasSuffix(parts[len(parts)-1], MoreCue) && i < 8; i++ {
		out, b := r.turn(reqOpts{Type: TypeIntent, Intent: IntentMore, Session: session, APL: apl})
		parts, bodies = append(parts, plain(out)), append(bodies, string(b))
	}
	return parts, bodies
}

// short is s with each run of a repeated F3 phrase shown once.
func short(s string) string {
	for _, p := range []string{f3Heard, f3Current} {
		for strings.Contains(s, p+p) {
			s = strings.ReplaceAll(s, p+p, p)
		}
	}
	return s
}

// P-24, F16: a revision that overtakes a part of a long retraction (it is
// rebuilt from a fresh confirmation) is never offered as current by that
// part nor by any later one: the rebuilt part and every "more" after it
// speak and show only the words confirmed current at their own build, and
// the superseded v9 ("Ice & rest …") is never said as what the physio
// changed it to. Twin: TestOvertakenMultiPart_WithoutARevisionThePartsContinueAsCut.
func TestOvertakenMultiPart_ARevisionDuringAHeldPartIsNeverOfferedAsCurrentLater(t *testing.T) {
	for _, apl := range []bool{false, true} {
		for _, during := range []int{1, 2} {
			name := map[int]string{1: "part 1", 2: "part 2"}[during]
			if apl {
				name += " on a screen"
			}
			t.Run(name, func(t *testing.T) {
				r := f3Rig(t)
				if during == 1 {
					afterTurnN(r, 2, func() { reviseF3(r) }) // the turn's confirmation under the lock
				}
				out, b := r.turn(reqOpts{Session: "s16", APL: apl})
				if during == 2 {
					afterTurnN(r, 2, func() { reviseF3(r) })
				}
				parts, bodies := partsOf(t, r, out, b, "s16", apl)
				all := strings.Join(parts, "\n")
				if !strings.Contains(all, f16Revised) {
					t.Fatalf("the parts never said the revision %q:\n%s", f16Revised, short(all))
				}
				if !strings.Contains(r.logs.String(), "overtaken by a revision") {
					t.Fatalf("no rebuild logged: the revision did not overtake a part")
				}
				// After the revision, no part may say v9's words as what it
				// was changed to: the only place they may appear is
				// quoted as what he may have been told.
				for i := during - 1; i < len(parts); i++ {
					if j := strings.Index(parts[i], "changed it a minute ago: “Ice & rest"); j >= 0 {
						t.Errorf("part %d (after the revision) says the superseded v9 as the new instruction: %.200q", i+1, short(parts[i][j:]))
					}
					if apl && strings.Contains(bodies[i], "Ice \\u0026 rest") || strings.Contains(bodies[i], "Ice & rest") {
						if !strings.Contains(bodies[i], f16Revised) {
							t.Errorf("part %d (after the revision) shows the superseded v9, not the revision: %.300s", i+1, short(bodies[i]))
						}
					}
				}
				if got := heardSet(r.care.heardCalls())["care://ray/weight_bearing"]; got != 10 {
					t.Errorf("his walking instruction marked heard at version %d, want 10", got)
				}
			})
		}
	}
}

// The twin: with no revision the parts continue as cut — part 2 goes on
// where part 1 stopped, nothing restarts, and v9 is what the physio
// changed it to, marked heard by the last part.
func TestOvertakenMultiPart_WithoutARevisionThePartsContinueAsCut(t *testing.T) {
	r := f3Rig(t)
	out, b := r.turn(reqOpts{Session: "s16"})
	parts, _ := partsOf(t, r, out, b, "s16", false)
	all := strings.Join(parts, "\n")
	if n := strings.Count(all, "Stop —"); n != 1 {
		t.Fatalf("the retraction started %d times, want once:\n%s", n, short(all))
	}
	if !strings.Contains(all, "changed it a minute ago: “Ice & rest") {
		t.Fatalf("v9 was never said as the new instruction")
	}
	if strings.Contains(r.logs.String(), "overtaken") {
		t.Errorf("a part was rebuilt with no revision")
	}
	if got := heardSet(r.care.heardCalls())["care://ray/weight_bearing"]; got != 9 {
		t.Errorf("marked heard at version %d, want 9", got)
	}
	_ = models.MaxSpeakableValueRunes
}
