package models

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

var demoNow = time.Date(2026, 10, 8, 9, 14, 0, 0, time.UTC)

func wb(n int, value, label string, ago time.Duration) Version {
	return Version{Patient: "ray", Domain: "weight_bearing", N: n, Audience: AudienceUser, Value: value,
		AuthorID: "x", AuthorLabel: label, WrittenAt: demoNow.Add(-ago)}
}

func TestRenderRetraction_StopFirstThenHeardThenNewWithAuthorAndAge(t *testing.T) {
	t.Parallel()
	heard := wb(1, "No weight through the operated leg; transfers with the frame only.", "Mr Adeyemi, surgical team", 4*24*time.Hour)
	cur := wb(3, "Full weight-bearing as tolerated.", "Sarah Okafor, physio", 30*time.Second)
	got, err := RenderRetraction(heard, cur, demoNow)
	if err != nil {
		t.Fatal(err)
	}
	want := "Stop — your walking instruction has changed. " +
		"I told you: “No weight through the operated leg; transfers with the frame only.” " +
		"Sarah Okafor, physio, changed it 30 seconds ago: “Full weight-bearing as tolerated.” " +
		"In plain terms, full weight-bearing as tolerated means as much weight as is comfortable."
	if got != want {
		t.Fatalf("RenderRetraction =\n%s\nwant\n%s", got, want)
	}
	iStop, iHeard, iNew := strings.Index(got, "Stop"), strings.Index(got, "No weight"), strings.Index(got, "Full weight")
	if iStop != 0 || !(iStop < iHeard && iHeard < iNew) {
		t.Fatalf("order: stop %d, heard %d, new %d", iStop, iHeard, iNew)
	}
}

func TestRenderRetraction_QuotesAddAFullStopOnce(t *testing.T) {
	t.Parallel()
	heard := wb(1, "Partial weight-bearing", "A", time.Hour)
	cur := wb(2, "Full weight-bearing as tolerated!", "B", time.Hour)
	got, err := RenderRetraction(heard, cur, demoNow)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(got, "“Partial weight-bearing.”") || !strings.Contains(got, "“Full weight-bearing as tolerated!”") {
		t.Fatalf("quotes not normalised: %s", got)
	}
}

func TestRenderRetraction_RefusesAssistantAudience(t *testing.T) {
	t.Parallel()
	user := wb(1, "Partial weight-bearing.", "A", time.Hour)
	internal := Version{Patient: "ray", Domain: "weight_bearing", N: 2, Audience: AudienceAssistant, Value: "Fall risk HIGH.", AuthorLabel: "B"}
	for name, pair := range map[string][2]Version{"current internal": {user, internal}, "heard internal": {internal, user}} {
		got, err := RenderRetraction(pair[0], pair[1], demoNow)
		if !errors.Is(err, ErrAssistantAudience) || got != "" {
			t.Errorf("%s: RenderRetraction = %q, %v; want ErrAssistantAudience and nothing to say", name, got, err)
		}
	}
	// Positive twin: two user versions render.
	if _, err := RenderRetraction(user, wb(2, "Full weight-bearing as tolerated.", "B", time.Hour), demoNow); err != nil {
		t.Fatalf("user → user: %v", err)
	}
	if _, err := RenderFirstHearing(internal, demoNow); !errors.Is(err, ErrAssistantAudience) {
		t.Fatalf("RenderFirstHearing(internal) err = %v", err)
	}
}

func TestRenderRetraction_UnchangedWordsSayNothing(t *testing.T) {
	t.Parallel()
	a := wb(1, "Partial weight-bearing.", "A", time.Hour)
	b := wb(2, "  Partial weight-bearing.  ", "B", time.Minute)
	if got, err := RenderRetraction(a, b, demoNow); !errors.Is(err, ErrUnchanged) || got != "" {
		t.Fatalf("RenderRetraction(same words) = %q, %v; want ErrUnchanged", got, err)
	}
	c := wb(2, "Partial weight-bearing, half your weight.", "B", time.Minute)
	if _, err := RenderRetraction(a, c, demoNow); err != nil {
		t.Fatalf("changed words: %v", err)
	}
}

func TestRenderRetraction_RefusesVersionsOfDifferentFacts(t *testing.T) {
	t.Parallel()
	a := wb(1, "Partial weight-bearing.", "A", time.Hour)
	b := a
	b.Domain, b.Value = "exercise", "Ankle pumps."
	if _, err := RenderRetraction(a, b, demoNow); !errors.Is(err, ErrDifferentFact) {
		t.Fatalf("err = %v, want ErrDifferentFact", err)
	}
}

func TestGlosses_RestateEachTermOfTheGlossary(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ text, want string }{
		{"Full weight-bearing as tolerated.", "In plain terms, full weight-bearing as tolerated means as much weight as is comfortable."},
		{"Partial weight-bearing with the frame.", "In plain terms, partial weight-bearing means only some of your weight."},
		{"Non-weight-bearing on the left leg.", "In plain terms, non-weight-bearing means no weight at all."},
		{"No weight through the operated leg.", "In plain terms, non-weight-bearing means no weight at all."},
		{"Keep hip flexion under 90 degrees.", "In plain terms, hip flexion means bending at the hip."},
		{"Rivaroxaban 10 mg once a day.", "In plain terms, rivaroxaban means the blood-thinning tablet."},
		{"Ankle pumps every hour.", ""},
	} {
		if got := GlossSentence(tc.text); got != tc.want {
			t.Errorf("GlossSentence(%q) = %q, want %q", tc.text, got, tc.want)
		}
	}
}

func TestGlosses_NeverAdvise(t *testing.T) {
	t.Parallel()
	advice := []string{"should", "must", "try", "don't", "do not", "you can", "safe", "take", "call"}
	for _, g := range glossary {
		for _, w := range advice {
			if strings.Contains(strings.ToLower(g.Gloss), w) {
				t.Errorf("gloss for %q (%q) carries advice word %q", g.Term, g.Gloss, w)
			}
		}
	}
}

func TestGlosses_FailSafeOnQualifiers(t *testing.T) {
	t.Parallel()
	for _, q := range []string{"not", "never", "avoid", "until", "unless", "except", "instead", "rather than", "no longer"} {
		text := "Full weight-bearing as tolerated " + q + " the review; rivaroxaban daily."
		if g := Glosses(text); len(g) != 0 {
			t.Errorf("qualifier %q: glosses %v, want none", q, g)
		}
	}
	if g := Glosses("Full weight-bearing as tolerated, don't rush; rivaroxaban daily."); len(g) != 0 {
		t.Errorf("n't: glosses %v, want none", g)
	}
	// Positive twin: the same sentence without a qualifier is glossed.
	if g := Glosses("Full weight-bearing as tolerated with the frame; rivaroxaban daily."); len(g) != 2 {
		t.Errorf("unqualified: %d glosses, want 2", len(g))
	}
}

// An action word fails every entry safe, not only the weight-bearing
// ones: "Stop rivaroxaban. Start apixaban 5 mg twice a day." ended its
// retraction on "In plain terms, rivaroxaban means the blood-thinning
// tablet" — as if to stop blood thinners (finding U11). Twin: the same
// terms without an action word are glossed.
func TestGlosses_FailSafeOnActionWords(t *testing.T) {
	t.Parallel()
	for _, w := range []string{"stop", "hold", "wait", "before", "after", "cancel", "withdraw", "suspend", "pause", "revoke", "reverse", "delay",
		"switch", "swap", "replace", "change", "stopped", "changing", "switched"} {
		for _, text := range []string{"Partial weight-bearing " + w + " the X-ray.", "Rivaroxaban 10 mg, " + w + " the X-ray.", "Keep hip flexion under 90 degrees " + w + " the X-ray."} {
			if g := Glosses(text); len(g) != 0 {
				t.Errorf("action word %q in %q: glosses %v, want none", w, text, g)
			}
		}
	}
	for _, text := range []string{"Stop rivaroxaban. Start apixaban 5 mg twice a day.", "Switch from rivaroxaban to apixaban.", "Rivaroxaban is replaced by apixaban.",
		// V1: inflections and stops without a verb.
		"Rivaroxaban discontinued.", "Rivaroxaban: withdrawn by the surgeon.", "No more rivaroxaban.", "Quit rivaroxaban.", "End rivaroxaban now.",
		"Omit rivaroxaban tonight.", "Rivaroxaban: none.", "Rivaroxaban 0 mg.", "Rivaroxaban was an error.", "Rivaroxaban is cancelled; take apixaban.",
		"Partial weight-bearing: cancelled.", "Partial weight-bearing was a mistake; put no weight on it.",
		// W1: a date fails safe, so a course's end date does too (it was glossed before).
		"Rivaroxaban 10 mg once a day, for a course due to end on 28 November 2026."} {
		if g := GlossSentence(text); g != "" {
			t.Errorf("%q: %q, want no gloss", text, g)
		}
	}
	for _, text := range []string{
		"Partial weight-bearing with the frame.",
		"Rivaroxaban 10 mg once a day.",
		"Keep hip flexion under 90 degrees.",
		"Ankle pumps every hour while awake; heel slides ten times, twice a day; keep hip flexion under 90 degrees.",
		"Rivaroxaban 10 mg once a day, for a course of 28 days.",
	} {
		if g := Glosses(text); len(g) != 1 {
			t.Errorf("no action word in %q: %d glosses, want 1", text, len(g))
		}
	}
}

// A gloss is said only over words that cannot forbid, end, defer or
// condition the term (plainWords): the deny-lists missed each of these,
// and Ray's turn ended on the forbidden level's meaning — "… is
// forbidden for six weeks.” In plain terms, full weight-bearing as
// tolerated means as much weight as is comfortable." (finding W1). Twin:
// the plain instructions Ray's care team writes are still glossed.
func TestGlosses_FailSafeOnAnyWordThatIsNotPlainlyAPlaceCountOrTime(t *testing.T) {
	t.Parallel()
	for _, text := range []string{
		"Full weight-bearing as tolerated is forbidden for six weeks.",
		"Full weight-bearing as tolerated: NO. Keep to the frame.",
		"Full weight-bearing as tolerated is prohibited.",
		"Full weight-bearing as tolerated is unsafe for you.",
		"Full weight-bearing as tolerated from 15 January; for now keep to the frame.",
		"Full weight-bearing as tolerated on 15 January.",
		"Full weight-bearing as tolerated in six weeks.",
		"Full weight-bearing as tolerated at the review.",
		"Non-weight-bearing is over: walk normally now.",
		"Partial weight-bearing is finished; walk freely.",
		"Partial weight-bearing later.",
		"Rivaroxaban is contraindicated.",
		"Rivaroxaban 10 mg once a day — ask your GP first.",
		"Hip flexion bad.",
		"Partial weight-bearing with the frame (Ärztin: nein).",
		// Finding G1: with a weight-bearing level, a number, count, time or
		// quantity defers or limits it; a symbol, a combining mark or a
		// date in digits can negate or defer any term.
		"Full weight-bearing as tolerated: week 6.",
		"Full weight-bearing as tolerated: week six.",
		"Full weight-bearing as tolerated 15/01/2027.",
		"Full weight-bearing as tolerated 15.01.",
		"Full weight-bearing as tolerated, day 42.",
		"Full weight-bearing as tolerated, with crutches, 6 weeks.",
		"Full weight-bearing as tolerated with two crutches for six weeks.",
		"Full weight-bearing as tolerated, about half your body weight.",
		"Full weight-bearing as tolerated; half.",
		"Partial weight-bearing, about 0% of your body weight.",
		"Partial weight-bearing, about 100% of your body weight.",
		"Partial weight-bearing, 20 kg.",
		"Full weight-bearing as tolerated ✗",
		"Full weight-bearing as tolerated ~~",
		"Full weight-bearing as tolerated\u0338.",
		"Full weight-bearing as tolerated → frame.",
		"Keep hip flexion under 90 degrees ✗",
		"Keep hip flexion under 90 degrees from 15/01.",
		"Rivaroxaban 10 mg once a day, 15.01.",
		"Rivaroxaban 2.5 mg twice a day.",
	} {
		if g := GlossSentence(text); g != "" {
			t.Errorf("%q: %q, want no gloss", text, g)
		}
	}
	for _, text := range []string{
		"Full weight-bearing as tolerated.",
		"Full weight-bearing as tolerated with two crutches.",
		"Full weight-bearing as tolerated, using the frame on the stairs.",
		"Partial weight-bearing, about half your body weight, with the frame.",
		"Partial weight-bearing (half your weight) with the frame.",
		"Non-weight-bearing on the left leg.",
		"No weight through the operated leg.",
		"Keep hip flexion under 90 degrees.",
		"Rivaroxaban 10 mg once a day.",
		"Take rivaroxaban 10 mg each evening with food.",
		"Ankle pumps every hour while awake; keep hip flexion under 90 degrees.",
	} {
		if g := GlossSentence(text); g == "" {
			t.Errorf("%q: no gloss, want one", text)
		}
	}
}

func TestGlosses_FailSafeOnTwoWeightBearingLevels(t *testing.T) {
	t.Parallel()
	if g := Glosses("Partial weight-bearing, moving to full weight-bearing as tolerated."); len(g) != 0 {
		t.Fatalf("two levels: glosses %v, want none", g)
	}
	if g := Glosses("Partial weight-bearing, moving on to the stairs."); len(g) != 1 {
		t.Fatalf("one level: %d glosses, want 1", len(g))
	}
}

func TestGlosses_WeightBearingTermMustOpenTheText(t *testing.T) {
	t.Parallel()
	if g := Glosses("On the ward, partial weight-bearing."); len(g) != 0 {
		t.Fatalf("term not at the start: glosses %v, want none", g)
	}
}

func TestRenderFirstHearing_NoIToldYou(t *testing.T) {
	t.Parallel()
	got, err := RenderFirstHearing(wb(1, "Full weight-bearing as tolerated.", "Sarah Okafor, physio", 2*time.Hour), demoNow)
	if err != nil {
		t.Fatal(err)
	}
	want := "Your walking instruction from Sarah Okafor, physio, two hours ago: “Full weight-bearing as tolerated.” " +
		"In plain terms, full weight-bearing as tolerated means as much weight as is comfortable."
	if got != want {
		t.Fatalf("RenderFirstHearing =\n%s\nwant\n%s", got, want)
	}
}

// P-24: a review date that has passed is judged at speak time, in every
// form, and every stale form leads with the age and says it is past its
// review date.
func TestRender_StaleFormsLeadWithTheAgeAndSayPastReview(t *testing.T) {
	t.Parallel()
	stale := func(v Version) Version { v.StaleAfter = demoNow.Add(-time.Minute); return v }
	heard := wb(1, "Partial weight-bearing.", "Mr Adeyemi, surgical team", 9*24*time.Hour)
	cur := wb(2, "Ankle pumps hourly.", "Sarah Okafor, physio", 9*24*time.Hour)
	tests := []struct {
		name   string
		render func(Version) (string, error)
		lead   string // how the fact's own sentence opens in the stale form
	}{
		{"fact", func(v Version) (string, error) { return RenderFact(v, demoNow) }, "Nine days ago, Sarah Okafor, physio, wrote your walking instruction: “Ankle pumps hourly.”"},
		{"first hearing", func(v Version) (string, error) {
			return Announcement{Current: v}.Render(demoNow)
		}, "Nine days ago, Sarah Okafor, physio, wrote your walking instruction"},
		{"the new sentence of a retraction", func(v Version) (string, error) {
			return Announcement{Heard: &heard, Current: v}.Render(demoNow)
		}, "Nine days ago, Sarah Okafor, physio, changed it to: “Ankle pumps hourly.”"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := tt.render(stale(cur))
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(got, tt.lead) || !strings.Contains(got, PastReviewSentence) || !strings.HasSuffix(got, CheckWithTeam) {
				t.Errorf("stale form = %q, want %q …, %q and %q last", got, tt.lead, PastReviewSentence, CheckWithTeam)
			}
			// Twin: the same version one minute before its review date is
			// said the ordinary way.
			fresh := cur
			fresh.StaleAfter = demoNow.Add(time.Minute)
			got, err = tt.render(fresh)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(got, "review date") || strings.Contains(got, "Nine days ago") || !strings.Contains(got, "nine days ago") {
				t.Errorf("fresh form = %q, want the age in its ordinary place", got)
			}
		})
	}
}

func TestAnnouncement_AgainSaysItMayNotHaveBeenToldProperly(t *testing.T) {
	t.Parallel()
	heard := wb(1, "Partial weight-bearing.", "Mr Adeyemi, surgical team", time.Hour)
	cur := wb(2, "Full weight-bearing as tolerated.", "Sarah Okafor, physio", time.Minute)
	r, err := Announcement{Heard: &heard, Current: cur, Again: true}.Render(demoNow)
	if err != nil || !strings.HasPrefix(r, "Stop — as I may not have told you properly: your walking instruction has changed. I told you: “Partial") {
		t.Errorf("retraction again = %q, %v", r, err)
	}
	f, err := Announcement{Current: cur, Again: true}.Render(demoNow)
	if err != nil || !strings.HasPrefix(f, "As I may not have told you properly: your walking instruction from Sarah Okafor") {
		t.Errorf("first hearing again = %q, %v", f, err)
	}
	// Twin: delivered once, said plainly.
	if r, _ := (Announcement{Heard: &heard, Current: cur}).Render(demoNow); strings.Contains(r, RedeliveryPhrase) {
		t.Errorf("plain retraction = %q", r)
	}
}

// P-24: a retraction of words he only may have heard (offered, delivery
// never confirmed) quotes them as such — "I may have told you: …" — never
// as words he was told, in the retraction and in the recap.
// Twin: words he heard for certain are "I told you: …".
func TestAnnouncement_WordsHeMayHaveHeardAreNeverQuotedAsTold(t *testing.T) {
	t.Parallel()
	heard := wb(2, "Full weight-bearing, no frame needed.", "Sarah Okafor, physio", time.Hour)
	cur := wb(3, "Partial weight-bearing with the frame.", "Sarah Okafor, physio", time.Minute)
	unsure := Announcement{Heard: &heard, Current: cur, Again: true, HeardUnsure: true}
	r, err := unsure.Render(demoNow)
	if err != nil || !strings.Contains(r, "I may have told you: “Full weight-bearing") || strings.Contains(r, "I told you") {
		t.Errorf("unsure retraction = %q, %v", r, err)
	}
	if rc, err := RenderRecap(unsure, demoNow); err != nil || !strings.Contains(rc, "I may have told you “Full") || strings.Contains(rc, "I told you") {
		t.Errorf("unsure recap = %q, %v", rc, err)
	}
	sure := Announcement{Heard: &heard, Current: cur, Again: true}
	if r, err := sure.Render(demoNow); err != nil || !strings.Contains(r, "I told you: “Full weight-bearing") || strings.Contains(r, "may have told") {
		t.Errorf("retraction of words heard for certain = %q, %v", r, err)
	}
}

// P-19, P-24 (finding F3): a retraction from words he only may have heard
// (v9, offered) also withdraws, when set, the words he heard for certain
// (Told, v8) — first, as told — so they are never left standing. Twins:
// without Told only the words he may have heard are quoted; Told is
// ignored when Heard is words he heard for certain.
func TestAnnouncement_ARetractionFromWordsHeMayHaveHeardAlsoWithdrawsTheWordsHeWasTold(t *testing.T) {
	t.Parallel()
	told := wb(8, "Rest and ice for two hours.", "Sarah Okafor, physio", 2*time.Hour)
	maybe := wb(9, "Ice and rest for three hours.", "Sarah Okafor, physio", time.Hour)
	cur := wb(10, "Full weight-bearing as tolerated.", "Sarah Okafor, physio", time.Minute)
	both := Announcement{Heard: &maybe, Current: cur, Again: true, HeardUnsure: true, Told: &told}
	r, err := both.Render(demoNow)
	want := "Stop — " + RedeliveryPhrase + ": your walking instruction has changed. I told you: “Rest and ice for two hours.” I may also have told you: “Ice and rest for three hours.” Sarah Okafor, physio, changed it a minute ago: “Full weight-bearing as tolerated.”"
	if err != nil || !strings.HasPrefix(r, want) {
		t.Errorf("both = %q, %v\nwant prefix %q", r, err, want)
	}
	only := both
	only.Told = nil
	if r, err := only.Render(demoNow); err != nil || strings.Contains(r, "Rest and ice") || !strings.Contains(r, "I may have told you: “Ice and rest") {
		t.Errorf("without Told = %q, %v", r, err)
	}
	sure := both
	sure.HeardUnsure = false
	if r, err := sure.Render(demoNow); err != nil || strings.Contains(r, "Rest and ice") || !strings.Contains(r, "I told you: “Ice and rest") {
		t.Errorf("heard for certain = %q, %v", r, err)
	}
}

// P-19, P-24 (finding F10): after two unconfirmed deliveries in a row
// the retraction withdraws the words he heard for certain (v1, as told)
// and both versions he may have heard (v2 in MayAlso, v3 the one it
// withdraws from), oldest first — never v3 alone. Bounded: of more than
// MaxMayHaveQuoted wordings he may have heard only the newest are quoted
// and the rest are said as earlier versions, while the words he heard for
// certain are always quoted. Twin: with no MayAlso the F3 wording stands.
func TestAnnouncement_ARetractionWithdrawsEveryWordingHeMayHaveHeardTheNewestQuoted(t *testing.T) {
	t.Parallel()
	v := func(n int, value string) Version {
		return wb(n, value, "Sarah Okafor, physio", time.Duration(10-n)*time.Hour)
	}
	v1, v2, v3, v4, v5, v6 := v(1, "Toe-touch weight-bearing."), v(2, "Partial weight-bearing."), v(3, "Non-weight-bearing."),
		v(4, "Walk with two crutches."), v(5, "Walk with one crutch."), v(6, "Walk with a stick.")
	cur := wb(7, "Walk without aids.", "Sarah Okafor, physio", time.Minute)
	stop := "Stop — " + RedeliveryPhrase + ": your walking instruction has changed. "
	news := " Sarah Okafor, physio, changed it a minute ago: “Walk without aids.”"
	for _, tt := range []struct {
		name string
		a    Announcement
		want string
	}{
		{"two offers in a row: both withdrawn, after what he was told",
			Announcement{Heard: &v3, HeardUnsure: true, Told: &v1, MayAlso: []Version{v2}},
			"I told you: “Toe-touch weight-bearing.” I may also have told you: “Partial weight-bearing.” and “Non-weight-bearing.”"},
		{"three: all quoted",
			Announcement{Heard: &v4, HeardUnsure: true, Told: &v1, MayAlso: []Version{v3, v2}},
			"I told you: “Toe-touch weight-bearing.” I may also have told you: “Partial weight-bearing.”, “Non-weight-bearing.” and “Walk with two crutches.”"},
		{"five: the newest three quoted, the rest said as earlier versions, what he was told kept",
			Announcement{Heard: &v6, HeardUnsure: true, Told: &v1, MayAlso: []Version{v2, v3, v4, v5}},
			"I told you: “Toe-touch weight-bearing.” I may also have told you: “Walk with two crutches.”, “Walk with one crutch.” and “Walk with a stick.”, " + EarlierVersions + "."},
		{"never heard any for certain: may have, all of them",
			Announcement{Heard: &v3, HeardUnsure: true, MayAlso: []Version{v2}},
			"I may have told you: “Partial weight-bearing.” and “Non-weight-bearing.”"},
		{"heard for certain, an older offer left unread: earlier versions too",
			Announcement{Heard: &v3, Earlier: true},
			"I told you: “Non-weight-bearing.” I may also have told you earlier versions."},
		{"twin: no other offer, the F3 wording",
			Announcement{Heard: &v3, HeardUnsure: true, Told: &v1},
			"I told you: “Toe-touch weight-bearing.” I may also have told you: “Non-weight-bearing.”"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			a := tt.a
			a.Current, a.Again = cur, true
			r, err := a.Render(demoNow)
			if want := stop + tt.want + news; err != nil || r != want {
				t.Errorf("Render = %q, %v\nwant     %q", r, err, want)
			}
			w := a.Withdrawn()
			if len(w.MayHave) > MaxMayHaveQuoted {
				t.Errorf("Withdrawn quotes %d he may have heard, more than %d", len(w.MayHave), MaxMayHaveQuoted)
			}
			if a.Told != nil && (w.Told == nil || w.Told.N != a.Told.N) {
				t.Errorf("Withdrawn dropped what he heard for certain: %+v", w)
			}
		})
	}
}

// MaxSpeakableValueRunes holds: the longest frame a value is spoken in —
// a repeated retraction, a 64-character topic, a 200-byte author label,
// the stale words and a gloss — stays within SpeechFrameChars even when
// every character of the label escapes to a six-character entity.
func TestLimits_TheLongestRetractionFrameFitsBesideAValueAtTheLimit(t *testing.T) {
	t.Parallel()
	label := strings.Repeat(`"`, 200)
	domain := strings.Repeat("d", 64)
	heard := Version{Patient: "ray", Domain: domain, N: 1, Audience: AudienceUser, Value: "x", AuthorLabel: label, WrittenAt: demoNow.Add(-9999 * 24 * time.Hour)}
	cur := heard
	cur.N, cur.Value, cur.StaleAfter = 2, "Full weight-bearing as tolerated", demoNow.Add(-time.Hour)
	s, err := Announcement{Heard: &heard, Current: cur, Again: true}.Render(demoNow)
	if err != nil {
		t.Fatal(err)
	}
	frame := strings.Replace(s, cur.Value, "", 1)
	escaped := len([]rune(frame)) + 5*strings.Count(frame, `"`)
	const tags = len("<speak></speak>") + len(`<break time="500ms"/>`) + len(" Say more to continue. What would you like to know?")
	if escaped+tags > SpeechFrameChars {
		t.Fatalf("frame of %d characters (escaped, with tags) > SpeechFrameChars %d", escaped+tags, SpeechFrameChars)
	}
	if MaxSpeakableValueRunes+SpeechFrameChars > MaxSpeechChars {
		t.Fatalf("limits do not add up")
	}
}

// RenderRecap: a change said again on "what changed?", fresh and past its
// review date (age first), a retraction and a first hearing.
func TestRenderRecap_SaysTheChangeAgainAgeFirstWhenStale(t *testing.T) {
	now := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	heard := Version{Patient: "ray", Domain: "weight_bearing", N: 2, Audience: AudienceUser, Value: "Partial weight-bearing.", AuthorLabel: "Mr Adeyemi"}
	cur := Version{Patient: "ray", Domain: "weight_bearing", N: 3, Audience: AudienceUser, Value: "Walk with one crutch", AuthorLabel: "Sarah Okafor, physio", WrittenAt: now.Add(-5 * time.Minute)}
	stale := cur
	stale.WrittenAt, stale.StaleAfter = now.Add(-9*24*time.Hour), now.Add(-time.Hour)
	for _, tt := range []struct {
		name string
		a    Announcement
		want string
	}{
		{"retraction", Announcement{Heard: &heard, Current: cur}, "Your walking instruction changed five minutes ago: I told you “Partial weight-bearing.”; Sarah Okafor, physio, changed it to “Walk with one crutch.”"},
		{"stale retraction", Announcement{Heard: &heard, Current: stale}, "Nine days ago, Sarah Okafor, physio, changed your walking instruction. I told you “Partial weight-bearing.”; it is now “Walk with one crutch.” " + PastReviewSentence + " " + CheckWithTeam},
		{"first hearing", Announcement{Current: cur}, "Your walking instruction is new: Sarah Okafor, physio, wrote it five minutes ago: “Walk with one crutch.”"},
		{"stale first hearing", Announcement{Current: stale}, "Nine days ago, Sarah Okafor, physio, wrote a new walking instruction: “Walk with one crutch.” " + PastReviewSentence + " " + CheckWithTeam},
	} {
		got, err := RenderRecap(tt.a, now)
		if err != nil || got != tt.want {
			t.Errorf("%s: %q, %v\nwant %q", tt.name, got, err, tt.want)
		}
	}
	assistant := cur
	assistant.Audience = AudienceAssistant
	if _, err := RenderRecap(Announcement{Current: assistant}, now); !errors.Is(err, ErrAssistantAudience) {
		t.Errorf("assistant-only: %v", err)
	}
}

// T9: with a Shortener (the voice's), each withdrawn quote it cuts ends
// "…” and the rest of that older instruction", the sentence closed after
// the last; the new words are never passed to it. Twin: Render (no
// Shortener, the assistant's tools) quotes every wording whole.
func TestAnnouncement_RenderShortenedSaysAShortenedWithdrawnQuoteWasShortened(t *testing.T) {
	t.Parallel()
	v1 := wb(1, "Toe-touch weight-bearing with the frame for six weeks.", "Sarah Okafor, physio", 3*time.Hour)
	v2 := wb(2, "Partial weight-bearing with two crutches for two weeks.", "Sarah Okafor, physio", 2*time.Hour)
	cur := wb(3, "Walk without aids as far as is comfortable today.", "Sarah Okafor, physio", time.Minute)
	var asked []string
	firstTwo := func(v string) (string, bool) {
		asked = append(asked, v)
		f := strings.Fields(v)
		return strings.Join(f[:2], " "), true
	}
	a := Announcement{Heard: &v2, HeardUnsure: true, Told: &v1, Current: cur}
	got, err := a.RenderShortened(demoNow, firstTwo)
	if err != nil {
		t.Fatal(err)
	}
	want := "Stop — your walking instruction has changed. I told you: “Toe-touch weight-bearing…” " + ShortenedQuote + ". I may also have told you: “Partial weight-bearing…” " + ShortenedQuote + ". Sarah Okafor, physio, changed it a minute ago: “Walk without aids as far as is comfortable today.”"
	if got != want {
		t.Errorf("shortened:\n got %q\nwant %q", got, want)
	}
	if slices.Contains(asked, cur.Value) {
		t.Errorf("the new words were passed to the shortener: %q", asked)
	}
	whole, err := a.Render(demoNow)
	if err != nil || strings.Contains(whole, ShortenedQuote) || !strings.Contains(whole, "“"+v1.Value+"”") || !strings.Contains(whole, "“"+v2.Value+"”") {
		t.Errorf("twin, Render: %q %v", whole, err)
	}
}
