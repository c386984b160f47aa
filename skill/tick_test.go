package skill

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/unsay/unsay/apl"
	"github.com/unsay/unsay/models"
)

func tick(session string) reqOpts {
	return reqOpts{Type: TypeAPLUserEvent, Arguments: []any{apl.ArgTick}, APL: true, Session: session}
}

func contactV(n int, value string) models.Version {
	return ver("contact", n, value, "Ward 4 admin", 0)
}

// tkRig is the tester's session tkA2: "who to call" answered on the Echo
// Show (the care card on screen), then a write makes contact v5.
func tkRig(t *testing.T) *rig {
	t.Helper()
	r := newRig(t, nil)
	out, _ := r.turn(reqOpts{Type: TypeIntent, Intent: IntentCarePlan, Slots: topicSlot("contact", "ER_SUCCESS_MATCH"), APL: true, Session: "tkA2"})
	if !strings.Contains(plain(out), "Ward 4 physio line") {
		t.Fatalf("who to call: %q", plain(out))
	}
	r.care.revise(contactV(5, "Call the fracture clinic on 0161 555 0100."), 30)
	return r
}

// P-24, U10: a retraction the care card's tick speaks unasked — to a room
// that may be empty — is offered, never marked heard, so the next turn Ray
// asks, in a new session, still opens with it, saying it may not have been
// told properly; that turn marks it heard. The screen still shows the
// retraction card. Twin: the same retraction spoken in a turn he asked (a
// tap on the card's what-changed button) is heard: the next session's
// "what changed?" says nothing has changed.
func TestTick_ARetractionSpokenUnaskedIsOfferedNotHeard(t *testing.T) {
	const stop = "Stop — your contact instruction has changed."
	for _, next := range []struct {
		name string
		o    reqOpts
	}{
		{"who do I call", reqOpts{Type: TypeIntent, Intent: IntentCarePlan, Slots: topicSlot("contact", "ER_SUCCESS_MATCH"), Session: "tkB"}},
		{"what changed", reqOpts{Type: TypeIntent, Intent: IntentWhatsChanged, Session: "tkB"}},
	} {
		t.Run(next.name, func(t *testing.T) {
			r := tkRig(t)
			out, _ := r.turn(tick("tkA2"))
			if !strings.HasPrefix(plain(out), stop) {
				t.Fatalf("the tick did not speak the retraction: %q", plain(out))
			}
			if d := out.Response.Directives; len(d) != 1 || d[0].Token != apl.TokenRetraction {
				t.Errorf("the tick did not draw the retraction card: %+v", d)
			}
			if h := heardSet(r.care.heardCalls())["care://ray/contact"]; h != 1 {
				t.Fatalf("after the tick contact is marked v%d, want still v1 (offered only): %v", h, r.care.heardCalls())
			}
			offered := false
			for _, o := range r.care.announcementOffers() {
				offered = offered || o.ID == 30 && o.Version == 5
			}
			if !offered {
				t.Errorf("the tick's retraction was not recorded as offered: %v", r.care.announcementOffers())
			}
			out, _ = r.turn(next.o)
			if s := plain(out); !strings.HasPrefix(s, "Stop — "+models.RedeliveryPhrase+": your contact instruction has changed.") {
				t.Fatalf("the next asked turn = %q, want the retraction again, saying so", s)
			}
			if h := heardSet(r.care.heardCalls())["care://ray/contact"]; h != 5 {
				t.Errorf("the asked turn did not mark v5 heard: %v", r.care.heardCalls())
			}
		})
	}
	t.Run("twin: asked on the screen, it is heard", func(t *testing.T) {
		r := tkRig(t)
		out, _ := r.turn(reqOpts{Type: TypeAPLUserEvent, Arguments: []any{apl.ArgWhatsChanged}, APL: true, Session: "tkA2"})
		if !strings.HasPrefix(plain(out), stop) {
			t.Fatalf("the button did not speak the retraction: %q", plain(out))
		}
		if h := heardSet(r.care.heardCalls())["care://ray/contact"]; h != 5 {
			t.Fatalf("asked, contact marked v%d, want v5", h)
		}
		out, _ = r.turn(reqOpts{Type: TypeIntent, Intent: IntentWhatsChanged, Session: "tkB"})
		if s := plain(out); s != textNothingNew {
			t.Errorf("what changed after hearing it = %q, want %q", s, textNothingNew)
		}
	})
}

// P-24, U10: the ticks of a card left open speak an unasked retraction
// once, not every five seconds: a later tick of the same session stays
// silent (the card keeps showing it) while it is owed at that version.
// Twin: a further revision of the fact is spoken by the next tick, which
// draws the card again with the new words and withdraws the words the
// first tick may have said.
func TestTick_ALaterTickDoesNotRepeatWhatAnEarlierSpokeButSpeaksANewRevision(t *testing.T) {
	r := tkRig(t)
	if out, _ := r.turn(tick("tkA2")); !strings.HasPrefix(plain(out), "Stop — your contact instruction has changed.") {
		t.Fatalf("first tick: %q", plain(out))
	}
	for i := 0; i < 3; i++ {
		if _, raw := r.turn(tick("tkA2")); string(raw) != `{"version":"1.0","response":{}}` {
			t.Fatalf("tick %d after the one that spoke: %s", i+2, raw)
		}
	}
	// The ledger extends the owed retraction: it withdraws v1, which he
	// was told, and v5, which the first tick may have said (MayAlso).
	v1, v5, v6 := ver("contact", 1, "Ward 4 physio line weekdays 9 to 5; out of hours call 111.", "Ward 4 admin", 0), contactV(5, "Call the fracture clinic on 0161 555 0100."), contactV(6, "Call the ward on 0161 555 0199.")
	r.care.mu.Lock()
	r.care.facts["ray"][3] = v6
	r.care.mu.Unlock()
	r.care.setPending("ray", models.Announcement{ID: 30, Patient: "ray", Heard: &v1, MayAlso: []models.Version{v5}, Current: v6})
	r.care.revs.Add(1)
	out, raw := r.turn(tick("tkA2"))
	if s := plain(out); !strings.Contains(s, "Stop — ") || !strings.Contains(s, "I may also have told you: “Call the fracture clinic") || !strings.Contains(s, "0161 555 0199") {
		t.Fatalf("the tick after a new revision = %q", s)
	}
	if !strings.Contains(string(raw), "0161 555 0199") || out.Response.Directives == nil {
		t.Errorf("the card was not drawn again with the new words: %s", raw)
	}
	if h := heardSet(r.care.heardCalls())["care://ray/contact"]; h != 1 {
		t.Errorf("ticks marked contact v%d heard, want v1 still", h)
	}
}

// P-24, U10: a retraction too long for one response, spoken unasked by a
// tick, is not started again by every later tick: they stay silent, and
// "more" continues it where the tick stopped. Twin: a new session's turn
// says it from the start, saying it may not have been told properly.
func TestTick_ALongRetractionATickBeganIsNotBegunAgainByTheNextTick(t *testing.T) {
	for _, then := range []string{"more", "a new session"} {
		t.Run(then, func(t *testing.T) {
			r := newRig(t, nil)
			heard := ver("exercise", 5, "Ankle pumps hourly; heel slides ten times, twice daily.", "Sarah Okafor, physio", time.Hour)
			cur := ver("exercise", 6, u5Exercise(), "Sarah Okafor, physio", time.Minute)
			r.care.facts["ray"][2] = cur
			r.care.setPending("ray", models.Announcement{ID: 20, Patient: "ray", Heard: &heard, Current: cur})
			out, _ := r.turn(tick("tkL"))
			if s := plain(out); !strings.HasPrefix(s, "Stop — your exercise instruction has changed.") || !strings.HasSuffix(s, MoreCue) {
				t.Fatalf("the tick did not begin the long retraction: %.100q", s)
			}
			if _, raw := r.turn(tick("tkL")); string(raw) != `{"version":"1.0","response":{}}` {
				t.Fatalf("the next tick: %.200s", raw)
			}
			if then == "more" {
				out, _ = r.turn(reqOpts{Type: TypeIntent, Intent: IntentMore, Session: "tkL", APL: true})
				if s := plain(out); strings.HasPrefix(s, "Stop") || !strings.HasPrefix(s, "Piece") {
					t.Errorf("more after the tick = %.100q, want the rest", s)
				}
				return
			}
			out, _ = r.turn(reqOpts{Session: "tkM"})
			if s := plain(out); !strings.HasPrefix(s, "Stop — "+models.RedeliveryPhrase+": your exercise instruction has changed.") {
				t.Errorf("a new session = %.120q, want the retraction from the start, saying so", s)
			}
		})
	}
}

// P-24, U10: only what a tick spoke is held back from later ticks. A
// response he asked for on the screen that carried the retraction but was
// not delivered (written after Alexa's deadline) is spoken by the next
// tick, saying so, and its retraction card drawn — the screen never keeps
// the old words for want of a delivery. Twin (TestTick_ALaterTick…): what
// a tick spoke is not spoken by the next one.
func TestTick_AnAskedResponseThatWasNotDeliveredIsSpokenByTheNextTick(t *testing.T) {
	r := tkRig(t)
	var once sync.Once
	r.care.onTurn = func(context.Context) { once.Do(func() { r.setNow(t0.Add(AlexaResponseDeadline + time.Second)) }) }
	out, _ := r.turn(reqOpts{Type: TypeIntent, Intent: IntentCarePlan, Slots: topicSlot("contact", "ER_SUCCESS_MATCH"), APL: true, Session: "tkA2"})
	r.care.onTurn = nil
	if !strings.HasPrefix(plain(out), "Stop — your contact instruction has changed.") || heardSet(r.care.heardCalls())["care://ray/contact"] != 1 {
		t.Fatalf("the test needs the asked retraction undelivered: %q, heard %v", plain(out), r.care.heardCalls())
	}
	out, _ = r.turn(tick("tkA2"))
	if s := plain(out); !strings.HasPrefix(s, "Stop — "+models.RedeliveryPhrase+": your contact instruction has changed.") {
		t.Fatalf("the tick after an undelivered answer = %q, want the retraction again", s)
	}
	if d := out.Response.Directives; len(d) != 1 || d[0].Token != apl.TokenRetraction {
		t.Errorf("the tick did not draw the retraction card: %+v", d)
	}
}

// P-24, U10: "repeat" right after a tick spoke a retraction says it once —
// first, saying it may not have been told properly — never twice, and
// marks it heard. Twin: "repeat" after he heard it asked says it once
// again.
func TestRepeat_AfterATickSpokeARetractionItIsSaidOnce(t *testing.T) {
	for _, first := range []reqOpts{tick("tkA2"), {Type: TypeAPLUserEvent, Arguments: []any{apl.ArgWhatsChanged}, APL: true, Session: "tkA2"}} {
		t.Run(first.Arguments[0].(string), func(t *testing.T) {
			r := tkRig(t)
			r.turn(first)
			out, _ := r.turn(reqOpts{Type: TypeIntent, Intent: IntentRepeat, APL: true, Session: "tkA2"})
			s := plain(out)
			if n := strings.Count(s, "your contact instruction has changed."); n != 1 {
				t.Fatalf("repeat said the retraction %d times: %q", n, s)
			}
			if heardSet(r.care.heardCalls())["care://ray/contact"] != 5 {
				t.Errorf("repeat did not mark it heard: %v", r.care.heardCalls())
			}
		})
	}
}
