//go:build e2e

package e2e_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/unsay/unsay/test/harness"
)

// Finding 3: a fact past its review date is said so in every form — an
// answer, a first hearing, the new sentence of a retraction — and marked
// on both APL cards, as the server judges it on its own clock (P-7, P-24).
// No fake clock: the demo seed's blood thinner is past its review date,
// and revisions are written with --stale-after a second or two ahead.

// careRows returns the care card's rows (topic → stale) of a reply, nil
// when it drew no care card.
func careRows(t *testing.T, r *harness.Reply) map[string]bool {
	t.Helper()
	for _, d := range r.Body.Response.Directives {
		ds, _ := json.Marshal(d["datasources"])
		var card struct {
			Care *struct {
				Rows []struct {
					Topic string `json:"topic"`
					Stale bool   `json:"stale"`
				} `json:"rows"`
			} `json:"care"`
		}
		if json.Unmarshal(ds, &card) == nil && card.Care != nil {
			out := map[string]bool{}
			for _, row := range card.Care.Rows {
				out[row.Topic] = row.Stale
			}
			return out
		}
	}
	return nil
}

// retractionStale reports whether a reply drew the retraction card, and
// whether it marks the new sentence stale.
func retractionStale(t *testing.T, r *harness.Reply) (drawn, stale bool) {
	t.Helper()
	for _, d := range r.Body.Response.Directives {
		ds, _ := json.Marshal(d["datasources"])
		var card struct {
			Retraction *struct {
				Stale bool `json:"stale"`
			} `json:"retraction"`
		}
		if json.Unmarshal(ds, &card) == nil && card.Retraction != nil {
			return true, card.Retraction.Stale
		}
	}
	return false, false
}

// waitPast waits, on the test's clock, until the review date a write made
// with --stale-after d at written has passed (the flag is sent to the
// second).
func waitPast(written time.Time, d time.Duration) {
	for until := written.Add(d + 1500*time.Millisecond); time.Now().Before(until); {
		time.Sleep(100 * time.Millisecond)
	}
}

func pastReview(speech string) bool {
	return strings.Contains(speech, "It is now past its review date.") && strings.Contains(speech, "Please check it with your care team.")
}

func TestSpeechStale_PastItsReviewDateIsSaidInEveryFormAndMarkedOnBothCards(t *testing.T) {
	s := startWith(t, safetyPart, harness.Options{Args: []string{"--alexa-verify=false", "--default-patient", "ray"}})
	dev := harness.NewDevice("ray") // an Echo Show: it draws the cards

	t.Run("an answer: the demo's blood thinner, age first, and amber on the care card", func(t *testing.T) {
		r := askUntilConfirmed(t, s, func() harness.Request {
			return dev.Intent("CarePlanIntent", topic("blood thinner", "anticoagulant"))
		})
		said := r.Speech()
		if !strings.HasPrefix(said, "Nine days ago, Dr Mensah, GP, wrote your blood thinner instruction:") || !pastReview(said) {
			t.Errorf("blood thinner said as %q", said)
		}
		rows := careRows(t, r)
		if !rows["Blood thinner"] || rows["Walking"] {
			t.Errorf("care card rows (topic → stale) = %v, want only the blood thinner stale", rows)
		}
	})

	t.Run("the positive twin: a fresh answer is said the ordinary way", func(t *testing.T) {
		said := ask(t, s, dev.Intent("CarePlanIntent", topic("walking", "weight_bearing"))).Speech()
		if !strings.HasPrefix(said, "Your walking instruction from") || strings.Contains(said, "review date") {
			t.Errorf("walking said as %q", said)
		}
	})

	t.Run("a first hearing and then an answer, once the review date passes", func(t *testing.T) {
		const value = "Ward 4 physio line, weekdays 8 to 6."
		written := time.Now()
		write(t, s, "contact", value, "--stale-after", "5s") // room for a slow machine before the fresh twin
		fresh := ask(t, s, dev.Intent("CarePlanIntent", topic("who to call", "contact"))).Speech()
		if !strings.Contains(fresh, "“"+value+"”") || strings.Contains(fresh, "review date") {
			t.Fatalf("before its review date: %q", fresh)
		}
		waitPast(written, 5*time.Second)
		r := ask(t, s, dev.Intent("CarePlanIntent", topic("who to call", "contact")))
		if said := r.Speech(); !strings.Contains(said, "wrote your contact instruction: “"+value+"”") || !pastReview(said) {
			t.Errorf("after its review date: %q", said)
		}
		if rows := careRows(t, r); !rows["Contact"] {
			t.Errorf("care card rows = %v, want the contact stale", rows)
		}

		// A fact he was never told (not even on the Echo Show's card, which
		// tells every fact it draws): a new one.
		const wound = "Keep the dressing dry for two more days."
		written = time.Now()
		write(t, s, "wound_care", wound, "--stale-after", "3s") // a 1 s review date was once past before a loaded machine's CLI sent it
		waitPast(written, 3*time.Second)
		if said := ask(t, s, dev.Intent("WhatsChangedIntent", nil)).Speech(); !strings.Contains(said, "wrote your wound care instruction: “"+wound+"”") || !pastReview(said) || strings.Contains(said, "Stop —") {
			t.Errorf("a first hearing past its review date: %q", said)
		}
	})

	t.Run("the new sentence of a retraction, and the retraction card", func(t *testing.T) {
		const value = "Full weight-bearing as tolerated."
		written := time.Now()
		write(t, s, "weight_bearing", value, "--stale-after", "3s")
		waitPast(written, 3*time.Second)
		r := ask(t, s, dev.Intent("CarePlanIntent", topic("walking", "weight_bearing")))
		said := r.Speech()
		if !strings.HasPrefix(said, "Stop — your walking instruction has changed.") || !strings.Contains(said, "changed it to: “"+value+"” It is now past its review date.") || !pastReview(said) {
			t.Errorf("retraction said as %q", said)
		}
		if drawn, stale := retractionStale(t, r); !drawn || !stale {
			t.Errorf("retraction card drawn=%v stale=%v, want a stale one", drawn, stale)
		}
	})
}
