package skill

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/unsay/unsay/apl"
	"github.com/unsay/unsay/models"
)

// Finding F3: a retraction too long for one response (6,000 characters
// that escape to more than 8,000 in SSML). Its withdrawn words are quoted
// shortened (MaxWithdrawnQuoteRunes, T9), so alone it always says
// some of the new words in its first part; f3Rig puts a first hearing
// before it that leaves its first part room only for withdrawn words.
const (
	f3Heard   = "Rest & ice <2h> "
	f3Current = "Ice & rest <3h> "
)

func f3Retraction() models.Announcement {
	heard := ver("weight_bearing", 8, strings.TrimSpace(strings.Repeat(f3Heard, models.MaxSpeakableValueRunes/len(f3Heard))), "Sarah Okafor, physio", time.Hour)
	cur := ver("weight_bearing", 9, strings.TrimSpace(strings.Repeat(f3Current, models.MaxSpeakableValueRunes/len(f3Current))), "Sarah Okafor, physio", time.Minute)
	return models.Announcement{ID: 7, Patient: "ray", Heard: &heard, Current: cur}
}

func f3Rig(t *testing.T) *rig {
	t.Helper()
	r := newRig(t, nil)
	a := f3Retraction()
	r.care.setPending("ray", a, f3Filler())
	r.care.facts["ray"][0] = a.Current
	r.care.facts["ray"] = append(r.care.facts["ray"], f3Filler().Current)
	return r
}

// f3Filler is a first hearing that fits whole in a response (so it is said
// first, ahead) and leaves the F3 retraction behind it about 150
// characters: its stop and the start of the words it withdraws.
func f3Filler() models.Announcement {
	budget := cutBudget(MaxSSMLChars)
	for n := MaxSSMLChars; n > 0; n-- {
		v := ver("ward_note", 1, strings.Repeat("w", n)+".", "Nurse Patel", time.Minute)
		a := models.Announcement{ID: 6, Patient: "ray", Current: v}
		text, err := a.Render(time.Now())
		if err != nil {
			panic(err)
		}
		if cost(annSegment(a, text)) <= budget-150 {
			return a
		}
	}
	panic("no filler")
}

// offeredVersions lists the versions of the F3 retraction offered, in
// order (not f3Filler's).
func offeredVersions(f *fakeCare) []int {
	var out []int
	for _, o := range f.announcementOffers() {
		if o.ID == f3Retraction().ID {
			out = append(out, o.Version)
		}
	}
	return out
}

// P-24, F3: a part of a multi-part retraction offers the version whose
// words it carries. Its first part, which says only "Stop — … I told you:
// “<v8> …” Say more to continue.", carries none of v9's words: it offers
// nothing, so a later revision withdraws v8 — what he was told — and not
// v9, which he never heard. Twin: the part that reaches v9's words offers
// v9, and the last part is what marks it heard.
func TestMultiPart_APartSayingOnlyTheWithdrawnWordsOffersNothingAndOneCarryingTheNewWordsOffersThem(t *testing.T) {
	r := f3Rig(t)
	out, _ := r.turn(reqOpts{Session: "sF3"})
	said := plain(out)
	if !strings.Contains(said, " Stop — your walking instruction has changed. I told you: “Rest & ice") || !strings.HasSuffix(said, MoreCue) || strings.Contains(said, "Ice & rest") {
		t.Fatalf("part 1 = %.100q … %.60q: want only the withdrawn words, cut for more", said, said[max(0, len(said)-60):])
	}
	if got := offeredVersions(r.care); len(got) != 0 {
		t.Fatalf("part 1 offered versions %v: it carries none of v9's words", got)
	}
	for i := 2; ; i++ {
		out, _ = r.turn(reqOpts{Type: TypeIntent, Intent: IntentMore, Session: "sF3"})
		said = plain(out)
		if strings.Contains(said, "Ice & rest") {
			break
		}
		if i > 5 || !strings.HasSuffix(said, MoreCue) {
			t.Fatalf("part %d never reached v9's words: %.100q", i, said)
		}
		if got := offeredVersions(r.care); len(got) != 0 {
			t.Fatalf("part %d offered %v carrying only withdrawn words", i, got)
		}
	}
	if got := offeredVersions(r.care); len(got) == 0 || got[len(got)-1] != 9 {
		t.Fatalf("the part carrying v9's words offered %v, want v9", got)
	}
	for i := 0; strings.HasSuffix(plain(out), MoreCue); i++ {
		if _, ok := heardSet(r.care.heardCalls())["care://ray/weight_bearing"]; ok {
			t.Fatalf("marked heard before its last part")
		}
		if i > 5 {
			t.Fatal("no last part")
		}
		out, _ = r.turn(reqOpts{Type: TypeIntent, Intent: IntentMore, Session: "sF3"})
	}
	if heardSet(r.care.heardCalls())["care://ray/weight_bearing"] != 9 {
		t.Errorf("the last part did not mark v9 heard: %v", r.care.heardCalls())
	}
}

// retractionData reads the retraction card's datasource from a response.
func retractionData(t *testing.T, raw []byte) (withdrawn, current string) {
	t.Helper()
	var m struct {
		Response struct {
			Directives []struct {
				Token       string `json:"token"`
				Datasources struct {
					Retraction struct {
						Withdrawn string `json:"withdrawn"`
						Current   string `json:"current"`
					} `json:"retraction"`
				} `json:"datasources"`
			} `json:"directives"`
		} `json:"response"`
	}
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	if len(m.Response.Directives) != 1 || m.Response.Directives[0].Token != apl.TokenRetraction {
		return "", ""
	}
	r := m.Response.Directives[0].Datasources.Retraction
	return r.Withdrawn, r.Current
}

// F3: while the first part of a multi-part retraction says "I told you:
// <old>", the Echo Show shows the retraction card (the old words struck
// through, the new ones), as for a short retraction — never the plain care
// card with the new words as a current row — and since the card shows the
// new words, the response offers them (he may have read them). Twin: on a
// voice-only device there is no card and the first part offers nothing.
func TestMultiPart_TheScreenShowsTheRetractionCardFromTheFirstPartAndItsNewWordsAreOffered(t *testing.T) {
	a := f3Retraction()
	r := f3Rig(t)
	out, raw := r.turn(reqOpts{Session: "sF3card", APL: true})
	if !strings.HasSuffix(plain(out), MoreCue) || strings.Contains(plain(out), "Ice & rest") {
		t.Fatalf("part 1 = %.100q: want the withdrawn words only, cut", plain(out))
	}
	withdrawn, current := retractionData(t, raw)
	if !strings.HasPrefix(withdrawn, apl.EscapeText(a.Heard.Value[:40])) || !strings.HasPrefix(current, apl.EscapeText(a.Current.Value[:40])) {
		t.Fatalf("card of part 1: directives %s…; want the retraction card (withdrawn v8, current v9)", string(raw[:min(len(raw), 300)]))
	}
	if got := offeredVersions(r.care); len(got) != 1 || got[0] != 9 {
		t.Errorf("offers of part 1 with the card = %v, want v9 (the card shows its words)", got)
	}
	out, raw = r.turn(reqOpts{Type: TypeIntent, Intent: IntentMore, Session: "sF3card", APL: true})
	if withdrawn, current := retractionData(t, raw); !strings.HasPrefix(withdrawn, apl.EscapeText(a.Heard.Value[:40])) || !strings.HasPrefix(current, apl.EscapeText(a.Current.Value[:40])) {
		t.Errorf("card of part 2 (%.60q): not the retraction card", plain(out))
	}

	voice := f3Rig(t)
	_, raw = voice.turn(reqOpts{Session: "sF3voice"})
	if w, _ := retractionData(t, raw); w != "" || strings.Contains(string(raw), `"directives"`) {
		t.Errorf("voice-only: a card was sent")
	}
	if got := offeredVersions(voice.care); len(got) != 0 {
		t.Errorf("voice-only part 1 offered %v, want nothing", got)
	}
}

// F3: a retraction that withdraws both the words he was told (Told) and
// those he may have been told (Heard, unsure) shows both struck through on
// the retraction card, the told ones first, and says both. Twin: without
// Told the card and the voice withdraw only the words he may have heard.
func TestCard_ARetractionWithdrawingBothTheToldAndTheMayHaveWordsShowsBoth(t *testing.T) {
	told := ver("weight_bearing", 8, "Rest and ice for two hours.", "Sarah Okafor, physio", 2*time.Hour)
	maybe := ver("weight_bearing", 9, "Ice and rest for three hours.", "Sarah Okafor, physio", time.Hour)
	cur := ver("weight_bearing", 10, wbV3Text, "Sarah Okafor, physio", time.Minute)
	for _, withTold := range []bool{true, false} {
		r := newRig(t, nil)
		a := models.Announcement{ID: 7, Patient: "ray", Heard: &maybe, Current: cur, Again: true, HeardUnsure: true}
		if withTold {
			a.Told = &told
		}
		r.care.setPending("ray", a)
		r.care.facts["ray"][0] = cur
		out, raw := r.turn(reqOpts{APL: true})
		withdrawn, current := retractionData(t, raw)
		said := plain(out)
		if current != apl.EscapeText(wbV3Text) {
			t.Fatalf("told %v: card current %q", withTold, current)
		}
		if withTold {
			if withdrawn != told.Value+" · "+maybe.Value || !strings.Contains(said, "I told you: “"+told.Value+"” I may also have told you: “"+maybe.Value+"”") {
				t.Errorf("both: card withdrawn %q, said %q", withdrawn, said)
			}
			continue
		}
		if withdrawn != maybe.Value || strings.Contains(said, told.Value) || !strings.Contains(said, "I may have told you: “"+maybe.Value+"”") {
			t.Errorf("may-have only: card withdrawn %q, said %q", withdrawn, said)
		}
	}
}

// F10: after two unconfirmed deliveries in a row the retraction withdraws
// what he was told (Told, v7) and both wordings he may have been told
// (MayAlso v8, Heard v9), oldest first, on the voice and struck through
// on the retraction card alike. Bounded: with five such wordings the
// newest three are said and shown, the older ones said as "earlier
// versions" ("…" on the card), and what he was told is never left out.
// Twin: with no MayAlso only v7 and v9 are withdrawn.
func TestCard_ARetractionAfterTwoUnconfirmedDeliveriesWithdrawsBothOnTheVoiceAndTheCard(t *testing.T) {
	v := func(n int, value string) models.Version {
		return ver("weight_bearing", n, value, "Sarah Okafor, physio", time.Duration(12-n)*time.Hour)
	}
	told, v5, v6, v7, maybe8, maybe9 := v(4, "Rest and ice for two hours."), v(5, "Stay in bed today."), v(6, "Walk to the door only."),
		v(7, "Walk to the bathroom only."), v(8, "Ice and rest for three hours."), v(9, "Walk with the frame indoors.")
	cur := ver("weight_bearing", 10, wbV3Text, "Sarah Okafor, physio", time.Minute)
	for _, tt := range []struct {
		name        string
		mayAlso     []models.Version
		said, shown string
	}{
		{"two in a row", []models.Version{maybe8},
			"I told you: “" + told.Value + "” I may also have told you: “" + maybe8.Value + "” and “" + maybe9.Value + "”",
			told.Value + " · " + maybe8.Value + " · " + maybe9.Value},
		{"five: the newest three", []models.Version{v5, v6, v7, maybe8},
			"I told you: “" + told.Value + "” I may also have told you: “" + v7.Value + "”, “" + maybe8.Value + "” and “" + maybe9.Value + "”, " + models.EarlierVersions + ".",
			told.Value + " · … · " + v7.Value + " · " + maybe8.Value + " · " + maybe9.Value},
		{"twin: one", nil,
			"I told you: “" + told.Value + "” I may also have told you: “" + maybe9.Value + "”",
			told.Value + " · " + maybe9.Value},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t, nil)
			r.care.setPending("ray", models.Announcement{ID: 7, Patient: "ray", Heard: &maybe9, Current: cur, Again: true, HeardUnsure: true, Told: &told, MayAlso: tt.mayAlso})
			r.care.facts["ray"][0] = cur
			out, raw := r.turn(reqOpts{APL: true})
			withdrawn, current := retractionData(t, raw)
			said := plain(out)
			if current != apl.EscapeText(wbV3Text) || !strings.Contains(said, tt.said) {
				t.Errorf("said %q\nwant it to hold %q (card current %q)", said, tt.said, current)
			}
			if withdrawn != apl.EscapeText(tt.shown) {
				t.Errorf("card withdrawn %q, want %q", withdrawn, apl.EscapeText(tt.shown))
			}
		})
	}
}
