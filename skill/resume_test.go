package skill

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/unsay/unsay/models"
)

// u5Exercise is a 5,900-character exercise instruction (it escapes to
// more than one response: every "&" is five characters of SSML).
func u5Exercise() string {
	var b strings.Builder
	for i := 1; b.Len() < 5900; i++ {
		fmt.Fprintf(&b, "Piece %d & heel & toe & knee a. ", i)
	}
	return strings.TrimSpace(b.String())
}

// u5Rig is the tester's session: exercise v5 → v6 (u5Exercise) owed, walking
// v2 told in another session (so a revision of it is a retraction), and the
// exercise retraction's first part spoken in session mo2, cut for "more".
func u5Rig(t *testing.T, apl bool) (*rig, string) {
	t.Helper()
	r := newRig(t, nil)
	r.turn(reqOpts{Session: "mo1"}) // the launch tells walking v2
	heard := ver("exercise", 5, "Ankle pumps hourly; heel slides ten times, twice daily.", "Sarah Okafor, physio", time.Hour)
	cur := ver("exercise", 6, u5Exercise(), "Sarah Okafor, physio", time.Minute)
	r.care.mu.Lock()
	r.care.facts["ray"][2] = cur
	r.care.mu.Unlock()
	r.care.setPending("ray", models.Announcement{ID: 20, Patient: "ray", Heard: &heard, Current: cur})
	out, _ := r.turn(reqOpts{Type: TypeIntent, Intent: IntentCarePlan, Slots: topicSlot("exercise", "ER_SUCCESS_MATCH"), Session: "mo2", APL: apl})
	part1 := plain(out)
	if !strings.HasPrefix(part1, "Stop — your exercise instruction has changed.") || !strings.HasSuffix(part1, MoreCue) {
		t.Fatalf("the test needs the exercise retraction cut for more: %.120q … %.60q", part1, part1[max(0, len(part1)-60):])
	}
	return r, part1
}

// walkingV496 is the tester's write: walking becomes touch-toe.
func walkingV496() models.Version {
	return ver("weight_bearing", 496, "Touch-toe weight-bearing, frame at all times.", "Sarah Okafor, physio", 0)
}

// afterQuote returns what s says after its first occurrence of q (the
// words of the announcement said first), "" when q is absent.
func afterQuote(s, q string) string {
	i := strings.Index(s, q)
	if i < 0 {
		return ""
	}
	return strings.TrimSpace(s[i+len(q):])
}

// P-24, U5: when an announcement owed since is said before the rest of a cut
// answer, the rest is introduced again — named, its quotation reopened — so
// it cannot be heard as part of the announcement said before it (here: the
// rest of the exercise instruction as if it were the new walking one). The
// quotation marks of the response balance, and the whole of the exercise
// instruction is still said across the parts and marked heard at the end.
// Twin: with nothing said before it, "more" continues where it stopped,
// without a re-introduction.
func TestMore_TheRestOfACutAnswerAfterAnInsertedAnnouncementIsIntroducedAgain(t *testing.T) {
	for _, apl := range []bool{false, true} {
		t.Run(fmt.Sprintf("apl=%v", apl), func(t *testing.T) {
			r, part1 := u5Rig(t, apl)
			r.care.revise(walkingV496(), 21)
			out, _ := r.turn(reqOpts{Type: TypeIntent, Intent: IntentMore, Session: "mo2", APL: apl})
			part2 := plain(out)
			newWalk := models.Quote(walkingV496().Value)
			if !strings.HasPrefix(part2, "Stop — your walking instruction has changed.") || !strings.Contains(part2, newWalk) {
				t.Fatalf("part 2 does not open with the walking retraction: %.300q", part2)
			}
			next := afterQuote(part2, newWalk)
			const intro = "Back to your changed exercise instruction, continuing the new words: “Piece "
			if !strings.HasPrefix(next, intro) {
				t.Fatalf("after the walking retraction part 2 says %.160q, want the exercise instruction introduced again (%q)", next, intro)
			}
			if o, c := strings.Count(part2, "“"), strings.Count(part2, "”"); o != c {
				t.Errorf("part 2 opens %d quotations and closes %d: %.200q … %.120q", o, c, part2, part2[max(0, len(part2)-120):])
			}
			whole := strings.TrimSuffix(part1, MoreCue) + " " + strings.Replace(next, intro, "Piece ", 1)
			for i := 0; strings.HasSuffix(whole, MoreCue) && i < 5; i++ {
				o, _ := r.turn(reqOpts{Type: TypeIntent, Intent: IntentMore, Session: "mo2", APL: apl})
				whole = strings.TrimSuffix(whole, MoreCue) + " " + plain(o)
			}
			if !strings.Contains(strings.Join(strings.Fields(whole), " "), u5Exercise()) {
				t.Errorf("the exercise instruction is not said whole across the parts")
			}
			h := heardSet(r.care.heardCalls())
			if h["care://ray/exercise"] != 6 || h["care://ray/weight_bearing"] != 496 {
				t.Errorf("heard %v: want exercise v6 and walking v496", h)
			}
		})
	}
	t.Run("twin: nothing said before the rest, more continues where it stopped", func(t *testing.T) {
		r, part1 := u5Rig(t, false)
		out, _ := r.turn(reqOpts{Type: TypeIntent, Intent: IntentMore, Session: "mo2"})
		part2 := plain(out)
		if strings.Contains(part2, "Back to") || strings.Contains(part2, "Stop —") {
			t.Fatalf("part 2 = %.200q: want the rest without an introduction", part2)
		}
		whole := strings.TrimSuffix(part1, MoreCue) + " " + part2
		for i := 0; strings.HasSuffix(whole, MoreCue) && i < 5; i++ {
			o, _ := r.turn(reqOpts{Type: TypeIntent, Intent: IntentMore, Session: "mo2"})
			whole = strings.TrimSuffix(whole, MoreCue) + " " + plain(o)
		}
		if !strings.Contains(strings.Join(strings.Fields(whole), " "), u5Exercise()) {
			t.Errorf("the exercise instruction is not said whole across the parts")
		}
	})
}

// P-24, U5: "repeat" after a part that continued a cut answer, with an
// announcement owed since, says the announcement and then the repeated part
// introduced again, never run on from the announcement's words. Twin:
// without one owed, the part is repeated as it was said.
func TestRepeat_ARepeatedContinuationAfterAnInsertedAnnouncementIsIntroducedAgain(t *testing.T) {
	for _, insert := range []bool{true, false} {
		t.Run(fmt.Sprintf("inserted=%v", insert), func(t *testing.T) {
			r, _ := u5Rig(t, false)
			out, _ := r.turn(reqOpts{Type: TypeIntent, Intent: IntentMore, Session: "mo2"})
			part2 := plain(out)
			if insert {
				r.care.revise(walkingV496(), 21)
			}
			out, _ = r.turn(reqOpts{Type: TypeIntent, Intent: IntentRepeat, Session: "mo2"})
			again := plain(out)
			if !insert {
				if strings.TrimSuffix(again, MoreCue) != strings.TrimSuffix(part2, MoreCue) && !strings.HasPrefix(part2, strings.TrimSuffix(again, MoreCue)) {
					t.Fatalf("repeat = %.120q, want part 2 again (%.120q)", again, part2)
				}
				return
			}
			next := afterQuote(again, models.Quote(walkingV496().Value))
			if !strings.HasPrefix(next, "Back to your changed exercise instruction, continuing the new words: “") {
				t.Fatalf("repeat after the walking retraction says %.160q: want the exercise part introduced again", next)
			}
		})
	}
}

// P-24, U5: wherever a retraction is cut, its rest said after something
// else is introduced again, naming the changed instruction and which words
// it continues — "what I told you before" while it is still in the words
// withdrawn, "the new words" within the new ones — with its quotation
// reopened, so that every quotation it says is closed and none is opened
// without its words. Twin: the rest said first is left as it was cut.
func TestResume_EveryCutOfARetractionIsIntroducedAgainWithItsQuotationsBalanced(t *testing.T) {
	heard := ver("weight_bearing", 2, "Partial weight-bearing, about half your body weight, with crutches at all times.", "Mr Adeyemi, surgical team", 2*24*time.Hour)
	cur := ver("weight_bearing", 3, "Full weight-bearing as tolerated; walk with one stick outdoors and none indoors.", "Sarah Okafor, physio", 0)
	a := models.Announcement{ID: 7, Patient: "ray", Heard: &heard, Current: cur}
	text, err := a.RenderShortened(t0, shortenWithdrawn)
	if err != nil {
		t.Fatal(err)
	}
	whole := annSegment(a, text)
	seen := map[string]bool{}
	for max := cost(whole) - 1; max > speechLen(renderSSML(nil, MoreCue))+40; max-- {
		spoken, rest := fitSpeech([]segment{whole}, "", max)
		if len(rest) == 0 || len(spoken) == 0 {
			continue
		}
		tail := rest[0]
		first := resume([]segment{tail})[0]
		if first.Text != tail.Text {
			t.Fatalf("max %d: the rest said first was changed: %q", max, first.Text)
		}
		got := resume([]segment{{Text: "Stop — your exercise instruction has changed."}, tail})[1]
		kind := "the new words"
		if tail.newFrom > 0 {
			kind = "what I told you before"
		}
		if !strings.HasPrefix(got.Text, "Back to your changed walking instruction") {
			t.Fatalf("max %d: the rest %q is not introduced again: %q", max, tail.Text, got.Text)
		}
		if strings.Contains(got.Text[:strings.IndexAny(got.Text, ":")], "continuing") && !strings.Contains(got.Text, kind) {
			t.Errorf("max %d: the rest %q introduced as %q, want it to say it continues %s", max, tail.Text, got.Text, kind)
		}
		if o, c := strings.Count(got.Text, "“"), strings.Count(got.Text, "”"); o != c {
			t.Errorf("max %d: %d quotations opened and %d closed in %q", max, o, c, got.Text)
		}
		if !got.carriesVersion() && tail.carriesVersion() {
			t.Errorf("max %d: the introduction hid the new words of %q", max, tail.Text)
		}
		seen[kind] = true
	}
	if !seen["the new words"] || !seen["what I told you before"] {
		t.Errorf("the cuts tried reached only %v", seen)
	}
}
