//go:build e2e

package e2e_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/unsay/unsay/test/harness"
)

// unplayedRig is a server on which Ray heard his walking instruction (v1)
// and the physio revised it (v2, revision), with the first launch since,
// T1, which retracted v1→v2, and v1's words.
func unplayedRig(t *testing.T) (*harness.Server, *harness.Device, *harness.Reply, string) {
	t.Helper()
	dir := t.TempDir()
	heardAndRevised(t, dir)
	s := startWith(t, safetyPart, harness.Options{Dir: dir, Args: []string{"--alexa-verify=false", "--default-patient", "ray"}})
	dev := harness.NewDevice("ray")
	r := askUntilConfirmed(t, s, dev.Launch)
	said := r.Speech()
	if !strings.HasPrefix(said, "Stop — your walking instruction has changed. I told you: “") {
		t.Fatalf("first launch after the revision: %q", said)
	}
	return s, dev, r, said[strings.Index(said, "“")+len("“") : strings.Index(said, "”")]
}

// notPlayedReport is Alexa's SessionEndedRequest ERROR for r, the last
// response on dev's session, which it ends: r's own session attributes
// echoed, DEVICE_COMMUNICATION_ERROR. Made right after r, sent when the
// test chooses.
func notPlayedReport(dev *harness.Device, r *harness.Reply) harness.Request {
	end := dev.SessionEnded("ERROR")
	end["session"].(map[string]any)["attributes"] = r.Body.SessionAttributes
	end["request"].(map[string]any)["error"] = map[string]any{"type": "DEVICE_COMMUNICATION_ERROR", "message": "not played"}
	return end
}

// retractionTurn revises the walking instruction to words, waits until
// the speech principal owes it, and returns the next launch, a
// retraction.
func retractionTurn(t *testing.T, s *harness.Server, dev *harness.Device, words string) *harness.Reply {
	t.Helper()
	write(t, s, "weight_bearing", words)
	waitBacklog(t, s.AdminURL)
	r := ask(t, s, dev.Launch())
	if !strings.HasPrefix(r.Speech(), "Stop — ") || !strings.Contains(r.Speech(), words) {
		t.Fatalf("launch after %q: %q, want its retraction", words, r.Speech())
	}
	return r
}

// Finding G8 (P-24), as the tester found it: Ray heard v1 for certain; T1
// retracted v1→v2 and T2 v2→v3, each in its own session, each written in
// full; then Alexa reports both not played, T1's first. T1's report came
// while T2 still stood, and was dropped: the next turn said "I told you:
// “v2”" — words he never got — and v1, the words he heard for certain,
// was never withdrawn. Now that report is remembered, and the next turn
// withdraws v1 as told and v2 as words he may have heard. Twin: the
// reports in the reverse order, which worked before, say the same.
func TestSpeechSafety_TwoUnplayedRetractionsReportedInEitherOrderWithdrawWhatRayLastHeardForCertain(t *testing.T) {
	const third = "Walk with one crutch only, indoors."
	for _, t1First := range []bool{true, false} {
		name := "T1's report first, as Alexa sends them"
		if !t1First {
			name = "twin: T2's report first"
		}
		t.Run(name, func(t *testing.T) {
			s, dev, t1, v1 := unplayedRig(t)
			end1 := notPlayedReport(dev, t1)
			t2 := retractionTurn(t, s, dev, third)
			if want := "I told you: “" + revision + "”"; !strings.Contains(t2.Speech(), want) {
				t.Fatalf("T2: %q, want it to say %q", t2.Speech(), want)
			}
			reports := []harness.Request{end1, notPlayedReport(dev, t2)}
			if !t1First {
				reports[0], reports[1] = reports[1], reports[0]
			}
			for _, r := range reports {
				ask(t, s, r)
			}
			next := launch(t, s, dev)
			want := "Stop — as I may not have told you properly: your walking instruction has changed. I told you: “" + v1 + "” I may also have told you: “" + revision + "”"
			if !strings.HasPrefix(next, want) || !strings.Contains(next, third) {
				t.Fatalf("after both error reports: %q\nwant it to open %q and give %q", next, want, third)
			}
		})
	}
}

// Finding G5 (P-24), as the tester found it: Ray heard v1 for certain;
// T1 retracted v1→v2 and was reported not played; T2 then said "I told
// you: “v1” I may also have told you: “v2” … changed it: “v3”" and was
// reported not played too. T2's delivery had cleared v2 as a wording he
// may have heard, and its rollback put back v3 alone: T3 withdrew v1 and
// v3 and never v2. Now the rollback puts back what the delivery cleared,
// and T3 withdraws both. Twin: T2 played (no report of it): T3 withdraws
// v3 as told, nothing else.
func TestSpeechSafety_EveryWordingOfSeveralUnplayedRetractionsInARowIsWithdrawn(t *testing.T) {
	const third, fourth = "Walk with one crutch only, indoors.", "Walk without crutches indoors; one crutch outside."
	for _, reportT2 := range []bool{true, false} {
		name := "T1 and T2 reported not played"
		if !reportT2 {
			name = "twin: T2 played"
		}
		t.Run(name, func(t *testing.T) {
			s, dev, t1, v1 := unplayedRig(t)
			ask(t, s, notPlayedReport(dev, t1))
			t2 := retractionTurn(t, s, dev, third)
			if want := "I told you: “" + v1 + "” I may also have told you: “" + revision + "”"; !strings.Contains(t2.Speech(), want) {
				t.Fatalf("T2: %q, want it to say %q", t2.Speech(), want)
			}
			want := "Stop — your walking instruction has changed. I told you: “" + third + "”"
			end2 := notPlayedReport(dev, t2)
			if reportT2 {
				ask(t, s, end2)
				want = "Stop — as I may not have told you properly: your walking instruction has changed. I told you: “" + v1 + "” I may also have told you: “" + revision + "” and “" + third + "”"
			}
			t3 := retractionTurn(t, s, dev, fourth)
			if !strings.HasPrefix(t3.Speech(), want) {
				t.Fatalf("T3: %q\nwant it to open %q", t3.Speech(), want)
			}
		})
	}
}

// Finding G6: Ray heard v1; Sarah Okafor changed it (v2), and before his
// next turn Mr Adeyemi saved the same words again with a review date
// (v3, a renewal). The retraction names Sarah Okafor as who changed it —
// not the clinician who only renewed her words — and gives v3's words.
// Twin: when Mr Adeyemi's v3 says new words, he is named.
func TestSpeechSafety_ARetractionNamesWhoChangedTheWordsNotWhoRenewedThem(t *testing.T) {
	const newWords = "Walk with one crutch only, indoors."
	for _, tt := range []struct {
		name, v3, changer string
	}{
		{"a same-words renewal: Sarah Okafor named", revision, "Sarah Okafor, physio"},
		{"twin: new words: Mr Adeyemi named", newWords, "Mr Adeyemi, surgical team"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			heardAndRevised(t, dir)
			s := startWith(t, safetyPart, harness.Options{Dir: dir, Args: []string{"--alexa-verify=false", "--default-patient", "ray"}})
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if _, err := s.Write(ctx, "ray", "weight_bearing", tt.v3, "adeyemi", "Mr Adeyemi, surgical team", "--stale-after", "720h"); err != nil {
				t.Fatal(err)
			}
			waitBacklog(t, s.AdminURL)
			said := launchUntilStop(t, s, harness.NewDevice("ray"))
			want := tt.changer + ", changed it just now: “" + tt.v3 + "”"
			if !strings.HasPrefix(said, "Stop — your walking instruction has changed.") || !strings.Contains(said, want) {
				t.Fatalf("launch: %q\nwant it to say %q", said, want)
			}
		})
	}
}
