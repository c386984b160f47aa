package skill

import (
	"strings"
	"sync"
	"testing"

	"github.com/unsay/unsay/models"
)

// wbV4Text is a third walking instruction, written while a response is held.
const wbV4Text = "Walk with one crutch."

// once runs f the first time the returned func is called.
func once(f func()) func() {
	var o sync.Once
	return func() { o.Do(f) }
}

// P-24, the last moment before the write: a revision that lands after the
// turn's confirmation, while its response is held with its offers recorded
// (a GC pause, a slow ledger write, a busy machine), is never spoken as
// current. The response is built again from a fresh confirmation, so Ray
// hears the new words now, and what was marked is the version he heard.
// The twin is TestOvertaken_WithoutARevisionTheResponseIsTheOneComputed.
func TestOvertaken_ARevisionWhileTheResponseIsHeldIsNotSpokenAsCurrent(t *testing.T) {
	walking := reqOpts{Type: TypeIntent, Intent: IntentCarePlan, Slots: topicSlot("weight_bearing", "ER_SUCCESS_MATCH")}
	t.Run("a plain answer", func(t *testing.T) {
		r := newRig(t, nil)
		r.care.onOffered = once(func() { r.care.revise(ver("weight_bearing", 3, wbV3Text, "Sarah Okafor, physio", 0), 9) })
		out, _ := r.turn(walking)
		if s := plain(out); strings.Contains(s, wbV2Text) || !strings.Contains(s, wbV3Text) {
			t.Fatalf("held while the physio revised it, the answer said %q: want %q, never %q", s, wbV3Text, wbV2Text)
		}
		if n := r.care.calls.Load(); n != 2 {
			t.Errorf("Turn called %d times, want 2 (the answer confirmed again once)", n)
		}
		for _, c := range r.care.heardCalls() {
			if c.URI == "care://ray/weight_bearing" && c.Version != 3 {
				t.Errorf("marked %+v, want only version 3 of his walking instruction", c)
			}
		}
		if !strings.Contains(r.logs.String(), "overtaken by a revision") {
			t.Errorf("the rebuild was not logged:\n%s", r.logs)
		}
	})
	t.Run("a retraction", func(t *testing.T) {
		r := newRig(t, nil)
		r.care.setPending("ray", retractionWB())
		r.care.facts["ray"][0] = retractionWB().Current
		r.care.onOffered = once(func() {
			// What the speech principal does with the physio's next
			// revision: the pending retraction now reaches v4, and v3
			// was offered.
			a := retractionWB()
			a.Current, a.Again = ver("weight_bearing", 4, wbV4Text, "Sarah Okafor, physio", 0), true
			r.care.setPending("ray", a)
			r.care.mu.Lock()
			r.care.facts["ray"][0] = a.Current
			r.care.mu.Unlock()
			r.care.revs.Add(1)
		})
		out, _ := r.turn(reqOpts{})
		s := plain(out)
		if strings.Contains(s, wbV3Text) || !strings.Contains(s, "I told you: “"+wbV2Text) || !strings.Contains(s, "changed it just now: “"+wbV4Text+"”") {
			t.Fatalf("held while the physio revised it again, the retraction said %q: want it to withdraw %q for %q, never say %q", s, wbV2Text, wbV4Text, wbV3Text)
		}
		if got := heardSet(r.care.heardCalls())["care://ray/weight_bearing"]; got != 4 {
			t.Errorf("his walking instruction marked heard at version %d, want 4", got)
		}
	})
}

// The twin: with no revision, the response is the one computed — one
// confirmation, no rebuild, the answer marked told. A revision between two
// turns rebuilds neither: each turn reads the count as its confirmation
// begins.
func TestOvertaken_WithoutARevisionTheResponseIsTheOneComputed(t *testing.T) {
	walking := reqOpts{Type: TypeIntent, Intent: IntentCarePlan, Slots: topicSlot("weight_bearing", "ER_SUCCESS_MATCH")}
	r := newRig(t, nil)
	out, _ := r.turn(walking)
	if s := plain(out); !strings.Contains(s, wbV2Text) {
		t.Fatalf("the answer said %q, want %q", s, wbV2Text)
	}
	r.care.revise(ver("weight_bearing", 3, wbV3Text, "Sarah Okafor, physio", 0), 9)
	out, _ = r.turn(reqOpts{Session: "s2"})
	if s := plain(out); !strings.HasPrefix(s, "Stop — your walking instruction has changed. I told you: “"+wbV2Text) {
		t.Fatalf("the next turn said %q, want the retraction", s)
	}
	// Turn runs twice for the retraction: once without the turn lock, once under it.
	if n := r.care.calls.Load(); n != 3 {
		t.Errorf("Turn called %d times, want 3 (no rebuild)", n)
	}
	if strings.Contains(r.logs.String(), "overtaken") {
		t.Errorf("a response was rebuilt with no revision during it:\n%s", r.logs)
	}
	if got := heardSet(r.care.heardCalls())["care://ray/weight_bearing"]; got != 3 {
		t.Errorf("his walking instruction marked heard at version %d, want 3", got)
	}
}

// A revision that lands after the confirmation but before the response's
// offers are recorded rebuilds it before anything is recorded: the
// superseded version is never offered, so no later turn says he may have
// heard it.
func TestOvertaken_ARevisionBeforeTheOffersAreRecordedLeavesTheStaleResponseUnoffered(t *testing.T) {
	r := newRig(t, nil)
	r.care.afterTurn = once(func() { r.care.revise(ver("weight_bearing", 3, wbV3Text, "Sarah Okafor, physio", 0), 9) })
	out, _ := r.turn(reqOpts{Type: TypeIntent, Intent: IntentCarePlan, Slots: topicSlot("weight_bearing", "ER_SUCCESS_MATCH")})
	if s := plain(out); strings.Contains(s, wbV2Text) || !strings.Contains(s, wbV3Text) {
		t.Fatalf("the answer said %q, want %q, never %q", s, wbV3Text, wbV2Text)
	}
	for _, o := range r.care.toldOffers() {
		if o == "care://ray/weight_bearing v2" {
			t.Errorf("the superseded version was offered: %v", r.care.toldOffers())
		}
	}
	if n := r.care.calls.Load(); n != 2 {
		t.Errorf("Turn called %d times, want 2", n)
	}
}

// The rebuild is bounded: when revisions keep overtaking the response
// (1 + maxRebuilds confirmations), Ray hears that his notes cannot be
// confirmed and which instruction he heard has changed — never a sentence
// as current — and nothing is marked.
func TestOvertaken_RevisionsThatKeepOvertakingGiveTheUnconfirmedAnswer(t *testing.T) {
	walking := reqOpts{Type: TypeIntent, Intent: IntentCarePlan, Slots: topicSlot("weight_bearing", "ER_SUCCESS_MATCH")}
	r := newRig(t, nil)
	r.turn(walking) // he was told v2
	told := len(r.care.heardCalls())
	calls := r.care.calls.Load()
	n := 2
	r.care.onOffered = func() {
		n++
		r.care.revise(ver("weight_bearing", n, "Walking instruction number "+models.SpellNumber(n)+".", "Sarah Okafor, physio", 0), int64(100+n))
	}
	out, _ := r.turn(reqOpts{Session: "s2"})
	s := plain(out)
	if !strings.HasPrefix(s, textUnreachable) || !strings.Contains(s, "Your walking instruction has changed since I last told you.") || !strings.HasSuffix(s, textTryAgain) {
		t.Fatalf("overtaken every time, the turn said %q, want the unconfirmed answer naming his walking instruction", s)
	}
	if strings.Contains(s, "Walking instruction number") || strings.Contains(s, wbV2Text) {
		t.Errorf("an instruction was said as current: %q", s)
	}
	if end := out.Response.ShouldEndSession; end == nil || !*end {
		t.Errorf("shouldEndSession = %v, want true", end)
	}
	if got := r.care.calls.Load() - calls; got != 1+maxRebuilds {
		t.Errorf("Turn called %d times, want %d (the turn, then %d rebuilds)", got, 1+maxRebuilds, maxRebuilds)
	}
	if calls := r.care.heardCalls(); len(calls) != told {
		t.Errorf("the unconfirmed answer marked %v", calls[told:])
	}
}
