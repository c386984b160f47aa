package skill

import (
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/unsay/unsay/models"
)

// wordless reports whether s carries no word of a value: only spaces,
// quotation marks and sentence punctuation.
func wordlessText(s string) bool {
	for _, r := range s {
		if !unicode.IsSpace(r) && !strings.ContainsRune(`“”‘’"'.,;:!?—–-()[]`, r) {
			return false
		}
	}
	return true
}

// sayAll speaks a first hearing of value in a fresh rig, then "more" until
// it ends; it returns every part as heard (cue removed).
func sayAll(t *testing.T, value, author string) []string {
	t.Helper()
	r := newRig(t, nil)
	v := ver("longamp", 1, value, author, 0)
	r.care.facts["ray"] = append(r.care.facts["ray"], v)
	r.care.setPending("ray", models.Announcement{ID: 9, Patient: "ray", Current: v})
	var parts []string
	out, _ := r.turn(reqOpts{Session: "sLong"})
	for i := 0; ; i++ {
		if n := speechLen(ssml(out)); n > MaxSSMLChars {
			t.Fatalf("part %d of %d characters", i, n)
		}
		p := plain(out)
		more := strings.HasSuffix(p, MoreCue)
		parts = append(parts, strings.TrimSpace(strings.TrimSuffix(p, MoreCue)))
		if !more {
			return parts
		}
		if i > 20 {
			t.Fatalf("more than 20 parts")
		}
		out, _ = r.turn(reqOpts{Type: TypeIntent, Intent: IntentMore, Session: "sLong"})
	}
}

// Finding 7: a value whose characters escape to entities in SSML ("&" is
// five characters) is cut on its escaped length, so every part carries
// some of the value — the frame ("Your … instruction from …, just now:")
// is never sent without its words — and it takes no more parts than its
// escaped length needs.
func TestLongValue_EveryPartCarriesTheValuesWordsAndNoPartIsWasted(t *testing.T) {
	for _, tt := range []struct {
		name, value, author string
	}{
		{"6,000 ampersands and a 200-character author label", strings.Repeat("&", models.MaxSpeakableValueRunes), strings.Repeat("L", 200)},
		{"6,000 less-thans", strings.Repeat("<", models.MaxSpeakableValueRunes), "Sarah Okafor, physio"},
		{"words with ampersands", strings.TrimSpace(strings.Repeat("rest & walk ", models.MaxSpeakableValueRunes/12)), "Sarah Okafor, physio"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			parts := sayAll(t, tt.value, tt.author)
			escaped := speechLen(EscapeSSML(tt.value)) + speechLen(EscapeSSML(tt.author)) + 200 // the frame
			if most := escaped/cutBudget(MaxSSMLChars) + 1; len(parts) > most {
				t.Errorf("%d parts, want at most %d for %d escaped characters", len(parts), most, escaped)
			}
			whole := ""
			for i, p := range parts {
				quoted := p
				if i == 0 {
					_, quoted, _ = strings.Cut(p, "“")
				}
				if wordlessText(quoted) {
					t.Errorf("part %d of %d carries none of the value: %.120q", i+1, len(parts), p)
				}
				whole += p
			}
			if strings.Count(whole, tt.value[:1]) < strings.Count(tt.value, tt.value[:1]) {
				t.Errorf("the parts do not carry the whole value")
			}
		})
	}
}

// Twin: a value that fits is said in one part.
func TestLongValue_AValueThatFitsIsOnePart(t *testing.T) {
	if parts := sayAll(t, strings.Repeat("&", 1000), "Sarah Okafor, physio"); len(parts) != 1 {
		t.Fatalf("%d parts", len(parts))
	}
}

// longRetraction is a pending retraction of the exercise instruction: its
// new words (5,900 characters that escape to more than 8,000) are more
// than one response holds.
func longRetraction() models.Announcement {
	long := strings.TrimSpace(strings.Repeat("Walk to the door & back <then rest>. ", 160))
	heard := ver("exercise", 1, strings.ReplaceAll(long, "rest", "sit"), "Sarah Okafor, physio", 24*time.Hour)
	cur := ver("exercise", 2, long, "Sarah Okafor, physio", time.Minute)
	return models.Announcement{ID: 4, Patient: "ray", Heard: &heard, Current: cur}
}

// Finding 6: Stop and Cancel end the session even while a long retraction
// is pending — it is not started (never cut for "more"), stays owed whole,
// and he is told which instruction changed; his next turn says it.
func TestLeaving_StopAndCancelEndTheSessionWhileALongRetractionIsOwed(t *testing.T) {
	for _, intent := range []string{IntentStop, IntentCancel, IntentNavigateHome} {
		t.Run(intent, func(t *testing.T) {
			r := newRig(t, nil)
			a := longRetraction()
			r.care.setPending("ray", a)
			r.care.facts["ray"][2] = a.Current
			first, raw := r.turn(reqOpts{Session: "sS", APL: true})
			if !strings.HasSuffix(plain(first), MoreCue) || endState(raw) != "false" {
				t.Fatalf("launch: want the long retraction's first part: %.80q end %s", plain(first), endState(raw))
			}
			if o := r.care.announcementOffers(); len(o) != 1 || o[0].ID != a.ID || o[0].Version != 2 {
				t.Fatalf("offers after its first part = %+v: a part heard is an offer (a revert withdraws it)", o)
			}
			out, raw := r.turn(reqOpts{Type: TypeIntent, Intent: intent, Session: "sS", APL: true})
			said := plain(out)
			if endState(raw) != "true" || strings.Contains(said, MoreCue) || out.Response.Reprompt != nil {
				t.Fatalf("%s: session not ended: %q end %s", intent, said, endState(raw))
			}
			if strings.Contains(said, "Walk to the door") || !strings.HasPrefix(said, "Your exercise instruction has changed since I last told you.") || !strings.HasSuffix(said, "Goodbye.") {
				t.Errorf("%s said %q", intent, said)
			}
			if _, ok := heardSet(r.care.heardCalls())["care://ray/exercise"]; ok {
				t.Fatalf("the retraction was marked heard though never spoken whole")
			}
			// He heard its first part: the next turn says it from its start,
			// saying so.
			next, _ := r.turn(reqOpts{Session: "sS2"})
			if !strings.HasPrefix(plain(next), "Stop — "+models.RedeliveryPhrase+": your exercise instruction has changed.") {
				t.Errorf("next turn: %.120q, want the retraction from its start, said again", plain(next))
			}
		})
	}
}

// Twin: a short retraction pending is said whole before "Goodbye." — stop
// first — the session ends, and it is heard.
func TestLeaving_AShortRetractionIsSaidBeforeGoodbye(t *testing.T) {
	r := newRig(t, nil)
	r.care.setPending("ray", retractionWB())
	r.care.facts["ray"][0] = retractionWB().Current
	out, raw := r.turn(reqOpts{Type: TypeIntent, Intent: IntentStop})
	said := plain(out)
	if endState(raw) != "true" || !strings.HasPrefix(said, "Stop — your walking instruction has changed.") || !strings.HasSuffix(said, "Goodbye.") || strings.Contains(said, "since I last told you") {
		t.Fatalf("stop with a short retraction: %q end %s", said, endState(raw))
	}
	if heardSet(r.care.heardCalls())["care://ray/weight_bearing"] != 3 {
		t.Errorf("not marked heard: %v", r.care.heardCalls())
	}
}

// An emoji is one code point but two UTF-16 code units; Alexa's
// 8,000-character limit may count either, so every part of 6,000 emoji
// stays within it counted in UTF-16 units (measured here independently),
// and the whole value is still said. Twin: 6,000 letters fit in as many
// parts as their length needs, measured the same way.
func TestLongValue_PartsFitAlexasLimitCountedInUTF16Units(t *testing.T) {
	for _, value := range []string{strings.Repeat("🦵", models.MaxSpeakableValueRunes), strings.Repeat("a ", models.MaxSpeakableValueRunes/2)} {
		r := newRig(t, nil)
		v := ver("longemoji", 1, value, "Sarah Okafor, physio", 0)
		r.care.facts["ray"] = append(r.care.facts["ray"], v)
		r.care.setPending("ray", models.Announcement{ID: 9, Patient: "ray", Current: v})
		out, _ := r.turn(reqOpts{Session: "sEmoji"})
		said := 0
		for i := 0; ; i++ {
			s := ssml(out)
			if n := len(utf16.Encode([]rune(s))); n > MaxSSMLChars {
				t.Fatalf("%.10q…: part %d has %d UTF-16 units, over %d", value, i+1, n, MaxSSMLChars)
			}
			said += strings.Count(s, value[:utf8.RuneLen([]rune(value)[0])])
			if !strings.HasSuffix(plain(out), MoreCue) {
				break
			}
			if i > 20 {
				t.Fatal("more than 20 parts")
			}
			out, _ = r.turn(reqOpts{Type: TypeIntent, Intent: IntentMore, Session: "sEmoji"})
		}
		if want := strings.Count(value, value[:utf8.RuneLen([]rune(value)[0])]); said < want {
			t.Errorf("%.10q…: %d of %d characters said", value, said, want)
		}
	}
}

// DEL and the C1 controls are allowed by XML but spoken by no voice: the
// escaper drops them (defence in depth behind the write validator); the
// twins, tab and line breaks, and ordinary text are kept.
func TestEscapeSSML_DropsDELAndC1ControlsAndKeepsTabsAndLineBreaks(t *testing.T) {
	for in, want := range map[string]string{
		"Rest\x7f the leg.":  "Rest the leg.",
		"Rest\u0085\u0080.":  "Rest.",
		"Rest.\tWalk.\nSit.": "Rest.\tWalk.\nSit.",
		"Reposo & descanso.": "Reposo &amp; descanso.",
	} {
		if got := EscapeSSML(in); got != want {
			t.Errorf("EscapeSSML(%q) = %q, want %q", in, got, want)
		}
	}
}

// Finding T9: a retraction of one 6,000-character value by another says
// the new words in its first part — the withdrawn words are quoted
// shortened (MaxWithdrawnQuoteRunes) and it says so — whether the
// old words were heard for certain or only offered; the new words are
// then said whole across "more". Twin: short withdrawn words are quoted
// whole, with nothing said about shortening.
func TestLongValue_ARetractionOfLongWordsSaysTheNewWordsInItsFirstPart(t *testing.T) {
	unit := func(s string) string {
		return strings.TrimSpace(strings.Repeat(s, models.MaxSpeakableValueRunes/len(s)))
	}
	oldV := ver("exercise", 7, unit("Plan X: slide the heel & bend <10 times>. "), "Sarah Okafor, physio", time.Hour)
	mayV := ver("exercise", 8, unit("Plan Y: rest the leg & ice it <20 min>. "), "Sarah Okafor, physio", time.Hour)
	newV := ver("exercise", 9, unit("Plan Z: no exercises today & keep the leg up <all day>. "), "Sarah Okafor, physio", time.Minute)
	for name, tc := range map[string]struct {
		a      models.Announcement
		quotes int
	}{
		"heard":              {models.Announcement{ID: 3, Patient: "ray", Heard: &oldV, Current: newV}, 1},
		"heard and may-have": {models.Announcement{ID: 3, Patient: "ray", Heard: &mayV, Told: &oldV, HeardUnsure: true, Current: newV}, 2},
	} {
		a := tc.a
		t.Run(name, func(t *testing.T) {
			r := newRig(t, nil)
			r.care.setPending("ray", a)
			r.care.facts["ray"][2] = a.Current
			out, _ := r.turn(reqOpts{Session: "sT9"})
			said := plain(out)
			if !strings.HasSuffix(said, MoreCue) {
				t.Fatalf("the test needs a retraction longer than one response: %.200q", said)
			}
			if !strings.Contains(said, "changed it a minute ago: “Plan Z: no exercises today & keep") {
				t.Fatalf("part 1 (%d characters) does not start the new words: %.600q", len(said), said)
			}
			if n := strings.Count(said, "…” "+models.ShortenedQuote); n != tc.quotes {
				t.Errorf("%d shortened quotes, want %d: %.600q", n, tc.quotes, said)
			}
			for _, q := range []string{"Plan X: slide the heel", "Plan Y: rest the leg"} {
				if strings.Count(said, q) > 1+MaxWithdrawnQuoteRunes/len(q) {
					t.Errorf("more of %q quoted than the cap: %.600q", q, said)
				}
			}
			whole := said
			for i := 0; strings.HasSuffix(whole, MoreCue) && i < 5; i++ {
				o, _ := r.turn(reqOpts{Type: TypeIntent, Intent: IntentMore, Session: "sT9"})
				whole = strings.TrimSuffix(whole, MoreCue) + " " + plain(o)
			}
			if !strings.Contains(strings.Join(strings.Fields(whole), " "), newV.Value) {
				t.Errorf("the new words are not said whole across more")
			}
		})
	}
	t.Run("twin: short withdrawn words are quoted whole", func(t *testing.T) {
		short := ver("exercise", 7, "Plan X: slide the heel ten times.", "Sarah Okafor, physio", time.Hour)
		a := models.Announcement{ID: 3, Patient: "ray", Heard: &short, Current: newV}
		r := newRig(t, nil)
		r.care.setPending("ray", a)
		r.care.facts["ray"][2] = a.Current
		out, _ := r.turn(reqOpts{Session: "sT9b"})
		said := plain(out)
		if !strings.Contains(said, "I told you: “Plan X: slide the heel ten times.” Sarah Okafor") || strings.Contains(said, models.ShortenedQuote) {
			t.Errorf("short withdrawn words: %.300q", said)
		}
	})
}

// breakit8 G4: a retraction too long for one response is cut for "more";
// when Ray asks something else instead ("who do I call") in the same
// session, he hears the rest of that retraction — not its start again —
// and then what he asked. Restarting it at every question kept the
// number he asked for out of reach. Twin: in a new session the retraction
// is said again from its start, told so, as before; so is it on "say that
// again" in the same session.
func TestLongValue_AQuestionAskedWhileACutRetractionIsOwedGetsItsRestThenTheAnswer(t *testing.T) {
	const unit = "Plan Z: rest & ice & lift & wait & rest <now>. "
	oldV := ver("exercise", 7, "Plan X: slide the heel ten times.", "Sarah Okafor, physio", time.Hour)
	newV := ver("exercise", 9, strings.Repeat(unit, models.MaxSpeakableValueRunes/len(unit)-1)+"The end of plan Z.", "Sarah Okafor, physio", time.Minute)
	contact := reqOpts{Type: TypeIntent, Intent: IntentCarePlan, Slots: topicSlot("contact", "ER_SUCCESS_MATCH")}
	for _, sameSession := range []bool{true, false} {
		name := "the same session: the rest, then the answer"
		if !sameSession {
			name = "twin: a new session: the retraction from its start"
		}
		t.Run(name, func(t *testing.T) {
			r := newRig(t, nil)
			r.care.setPending("ray", models.Announcement{ID: 3, Patient: "ray", Heard: &oldV, Current: newV})
			r.care.facts["ray"][2] = newV
			out, _ := r.turn(reqOpts{Session: "sG4"})
			if first := plain(out); !strings.HasPrefix(first, "Stop — ") || !strings.HasSuffix(first, MoreCue) {
				t.Fatalf("the test needs a retraction longer than one response: %.200q … %q", first, first[max(0, len(first)-200):])
			}
			if sameSession {
				again, _ := r.turn(reqOpts{Type: TypeIntent, Intent: IntentRepeat, Session: "sG4"})
				if p := plain(again); !strings.HasPrefix(p, "Stop — ") {
					t.Errorf("say that again after the first part: %.200q, want the retraction from its start", p)
				}
			}
			ask := contact
			ask.Session = "sG4"
			if !sameSession {
				ask.Session = "sG4b"
			}
			var said []string
			for i := 0; i < 5; i++ {
				o, _ := r.turn(ask)
				p := plain(o)
				said = append(said, p)
				if !strings.HasSuffix(p, MoreCue) {
					break
				}
				ask = reqOpts{Type: TypeIntent, Intent: IntentMore, Session: ask.Session}
			}
			all := strings.Join(said, " ")
			if sameSession {
				if strings.HasPrefix(said[0], "Stop — ") {
					t.Errorf("the question restarted the retraction: %.200q", said[0])
				}
				if !strings.Contains(said[0], "The end of plan Z.") || !strings.Contains(said[0], "Your contact instruction") {
					t.Errorf("the question's response: %.300q … %.300q; want the retraction's rest and then the contact answer", said[0], said[0][max(0, len(said[0])-300):])
				}
				return
			}
			if !strings.HasPrefix(said[0], "Stop — ") {
				t.Errorf("a new session did not say the retraction from its start: %.200q", said[0])
			}
			if !strings.Contains(all, "Your contact instruction") {
				t.Errorf("the contact answer never came: %.300q", all)
			}
		})
	}
}
