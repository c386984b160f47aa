package models

import (
	"fmt"
	"sync"
	"testing"
	"time"
)

var memoTexts = []string{
	"Full weight-bearing as tolerated.",
	"Full weight-bearing as tolerated is forbidden for six weeks.",
	"Partial weight-bearing, about half your body weight, with the frame.",
	"Keep hip flexion under 90 degrees.",
	"Stop rivaroxaban. Start apixaban 5 mg twice a day.",
	"Rivaroxaban 10 mg once a day.",
	"Ankle pumps every hour while awake; heel slides ten times, twice a day; keep hip flexion under 90 degrees.",
	"No weight through the operated leg; transfers with the frame only.",
	"Non-weight-bearing until 15 January.",
	"",
}

func TestGlossMemo_AnswersAsGlossSentenceDoes(t *testing.T) {
	var m GlossMemo
	for round := range 3 { // first worked out, then from memory
		for _, text := range memoTexts {
			if got, want := m.Sentence(text), GlossSentence(text); got != want {
				t.Errorf("round %d, %q: memo says %q, GlossSentence %q", round, text, got, want)
			}
		}
	}
	var glossed int
	for _, text := range memoTexts {
		if m.Sentence(text) != "" {
			glossed++
		}
	}
	if glossed == 0 || glossed == len(memoTexts) {
		t.Fatalf("%d of %d texts glossed: the table must hold both kinds", glossed, len(memoTexts))
	}
	var none *GlossMemo
	if got, want := none.Sentence(memoTexts[0]), GlossSentence(memoTexts[0]); got != want {
		t.Errorf("nil memo: %q, want %q", got, want)
	}
}

func TestGlossMemo_HoldsAtMostItsBoundAndStillAnswersPastIt(t *testing.T) {
	var m GlossMemo
	for i := range GlossMemoTexts + 50 {
		m.Sentence(fmt.Sprintf("Keep hip flexion under %d degrees.", i))
	}
	if n := len(m.memo); n > GlossMemoTexts {
		t.Fatalf("memo holds %d texts, bound %d", n, GlossMemoTexts)
	}
	for _, text := range memoTexts {
		if got, want := m.Sentence(text), GlossSentence(text); got != want {
			t.Errorf("full memo, %q: %q, want %q", text, got, want)
		}
	}
}

func TestGlossMemo_RenderFactSaysWhatRenderFactSays(t *testing.T) {
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	var m GlossMemo
	var wg sync.WaitGroup
	for _, text := range memoTexts[:9] {
		v := Version{Patient: "ray", Domain: "mobility", N: 2, Value: text, Audience: AudienceUser,
			AuthorLabel: "Sarah Okafor, physio", WrittenAt: now.Add(-10 * time.Minute)}
		want, err := RenderFact(v, now)
		if err != nil {
			t.Fatal(err)
		}
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if got, err := m.RenderFact(v, now); err != nil || got != want {
					t.Errorf("memo renders %q (%v), want %q", got, err, want)
				}
			}()
		}
	}
	wg.Wait()
	v := Version{Patient: "ray", Domain: "mobility", N: 1, Value: "Fall risk high.", Audience: AudienceAssistant}
	if _, err := m.RenderFact(v, now); err != ErrAssistantAudience {
		t.Errorf("assistant-only version: err %v, want ErrAssistantAudience", err)
	}
}

func BenchmarkGlossMemo_DemoNote(b *testing.B) {
	var m GlossMemo
	text := "Ankle pumps every hour while awake; heel slides ten times, twice a day; keep hip flexion under 90 degrees."
	for b.Loop() {
		m.Sentence(text)
	}
}
