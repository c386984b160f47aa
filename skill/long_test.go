package skill

import (
	"strings"
	"testing"
	"unicode"

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
		if n := runes(ssml(out)); n > MaxSSMLChars {
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
			escaped := runes(EscapeSSML(tt.value)) + runes(EscapeSSML(tt.author)) + 200 // the frame
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
