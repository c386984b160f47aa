//go:build e2e

package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/unsay/unsay/test/harness"
)

// The speech-safety suite (P-24): heard means delivered, across a SIGKILL;
// /readyz tells the truth about the speech principal.

const safetyPart = "8 speech safety (P-24)"

const revision = "Full weight-bearing as tolerated."

// launch sends a LaunchRequest from dev to s (verification off) and returns
// what Ray hears.
func launch(t *testing.T, s *harness.Server, dev *harness.Device) string {
	t.Helper()
	c := &harness.AlexaClient{URL: s.URL + "/alexa"}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := c.Send(ctx, dev.Launch())
	if err != nil || r.Status != http.StatusOK {
		t.Fatalf("launch: %v %d %s", err, r.Status, r.Raw)
	}
	return r.Speech()
}

// launchUntilStop launches until a turn opens with "Stop" (right after a
// restart the speech principal may still be syncing and the skill then
// says it cannot reach the notes; such a turn marks nothing).
func launchUntilStop(t *testing.T, s *harness.Server, dev *harness.Device) string {
	t.Helper()
	var said string
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		said = launch(t, s, dev)
		if !strings.Contains(said, "can't reach your care notes") {
			return said
		}
	}
	return said
}

// heardAndRevised starts a server on dir, lets Ray hear his walking
// instruction, has the physio revise it, waits until the speech principal
// holds the retraction, and stops the server.
func heardAndRevised(t *testing.T, dir string) {
	t.Helper()
	s := startWith(t, safetyPart, harness.Options{Dir: dir, Args: []string{"--alexa-verify=false", "--default-patient", "ray"}})
	dev := harness.NewDevice("ray")
	first := launchUntilStop(t, s, dev)
	if !strings.Contains(first, "Your walking instruction from") {
		t.Fatalf("first launch: %q", first)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := s.Write(ctx, "ray", "weight_bearing", revision, "okafor", "Sarah Okafor, physio"); err != nil {
		t.Fatal(err)
	}
	waitBacklog(t, s.AdminURL)
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
}

// waitOutput waits until the server printed want.
func waitOutput(t *testing.T, s *harness.Server, want string) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if strings.Contains(s.Output(), want) {
			return
		}
	}
	t.Fatalf("the server never printed %q:\n%s", want, s.Output())
}

// waitOutputAfter waits until the server printed want after the first
// mark bytes of its output.
func waitOutputAfter(t *testing.T, s *harness.Server, mark int, want string) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if strings.Contains(s.Output()[mark:], want) {
			return
		}
	}
	t.Fatalf("the server never printed %q after its first %d bytes:\n%s", want, mark, s.Output())
}

// A server killed (SIGKILL) after the response carrying the retraction was
// written but before the heard ledger's commit: the retraction is spoken
// again on the next turn, saying so — repeated, never lost. And once
// delivered and committed, it is not spoken again.
func TestSpeechSafety_KillBetweenTheResponseWriteAndTheLedgerCommitTheRetractionIsSpokenAgain(t *testing.T) {
	dir := t.TempDir()
	heardAndRevised(t, dir)

	paused := startWith(t, safetyPart, harness.Options{Dir: dir, Args: []string{"--alexa-verify=false", "--default-patient", "ray"},
		Env: []string{"UNSAY_TEST_ALEXA_PAUSE=before-heard:60s"}})
	dev := harness.NewDevice("ray")
	said := launchUntilStop(t, paused, dev)
	if !strings.HasPrefix(said, "Stop — your walking instruction has changed.") || !strings.Contains(said, revision) {
		t.Fatalf("the paused server's launch: %q", said)
	}
	waitOutput(t, paused, "TEST PAUSE: holding an Alexa response before-heard")
	paused.Kill() // the response reached Ray; the ledger never heard of it

	s := startWith(t, safetyPart, harness.Options{Dir: dir, Args: []string{"--alexa-verify=false", "--default-patient", "ray"}})
	again := launchUntilStop(t, s, dev)
	if !strings.HasPrefix(again, "Stop — as I may not have told you properly: your walking instruction has changed.") || !strings.Contains(again, revision) {
		t.Fatalf("after the kill the next turn = %q, want the retraction again, saying so", again)
	}
	if after := launch(t, s, dev); strings.Contains(after, "Stop —") || !strings.Contains(after, revision) {
		t.Fatalf("once delivered it was spoken again, or the revision is not current: %q", after)
	}
}

// A server killed after it built the response but before it wrote it:
// Ray never got it, and the next turn speaks the retraction.
func TestSpeechSafety_KillBeforeTheResponseWriteTheRetractionIsSpokenOnTheNextTurn(t *testing.T) {
	dir := t.TempDir()
	heardAndRevised(t, dir)

	paused := startWith(t, safetyPart, harness.Options{Dir: dir, Args: []string{"--alexa-verify=false", "--default-patient", "ray"},
		Env: []string{"UNSAY_TEST_ALEXA_PAUSE=before-write:60s"}})
	waitBacklog(t, paused.AdminURL)
	dev := harness.NewDevice("ray")
	got := make(chan error, 1)
	go func() {
		c := &harness.AlexaClient{URL: paused.URL + "/alexa", HTTP: &http.Client{Timeout: 90 * time.Second}}
		r, err := c.Send(context.Background(), dev.Launch())
		if err == nil {
			err = fmt.Errorf("a response arrived from a server killed before writing it: %d %s", r.Status, r.Raw)
		}
		got <- err
	}()
	waitOutput(t, paused, "TEST PAUSE: holding an Alexa response before-write")
	paused.Kill()
	if err := <-got; strings.Contains(err.Error(), "a response arrived") {
		t.Fatal(err)
	}

	s := startWith(t, safetyPart, harness.Options{Dir: dir, Args: []string{"--alexa-verify=false", "--default-patient", "ray"}})
	next := launchUntilStop(t, s, dev)
	if !strings.HasPrefix(next, "Stop — ") || !strings.Contains(next, "your walking instruction has changed.") || !strings.Contains(next, revision) {
		t.Fatalf("after the kill the next turn = %q, want the retraction", next)
	}
}

// A server killed after a plain answer ("what's my walking instruction?")
// was written but before the heard ledger's commit: the answer was offered
// before the write, so the physio's revision in the next life withdraws
// what he was told, saying so — never a first hearing of the new words
// with no "Stop".
func TestSpeechSafety_KillAfterAPlainAnswerBeforeTheLedgerCommitTheRevisionIsARetraction(t *testing.T) {
	dir := t.TempDir()
	args := []string{"--alexa-verify=false", "--default-patient", "ray"}
	paused := startWith(t, safetyPart, harness.Options{Dir: dir, Args: args, Env: []string{"UNSAY_TEST_ALEXA_PAUSE=before-heard:60s"}})
	dev := harness.NewDevice("ray")
	said := askUntilConfirmed(t, paused, func() harness.Request {
		return dev.Intent("CarePlanIntent", topic("walking", "weight_bearing"))
	}).Speech()
	old := harness.Quoted(said)
	if !strings.HasPrefix(said, "Your walking instruction from") || len(old) != 1 {
		t.Fatalf("the plain answer: %q", said)
	}
	waitPaused(t, paused, 1)
	paused.Kill() // the answer reached Ray; the ledger never heard of it

	s := startWith(t, safetyPart, harness.Options{Dir: dir, Args: args})
	write(t, s, "weight_bearing", revision)
	next := askUntilConfirmed(t, s, func() harness.Request { return dev.Intent("WhatsChangedIntent", nil) }).Speech()
	want := "Stop — as I may not have told you properly: your walking instruction has changed. I may have told you: “" + old[0] + "”"
	if !strings.HasPrefix(next, want) || !strings.Contains(next, revision) {
		t.Fatalf("after the kill and the revision the next turn = %q\nwant it to open %q and give %q", next, want, revision)
	}
}

// Alexa's error report: Ray's Echo did not play the response that carried
// the retraction (SessionEndedRequest, reason ERROR, the response's
// session attributes echoed back). The retraction is owed again and the
// next turn says it, saying so. Twin: a session he ended himself
// (USER_INITIATED) re-opens nothing.
func TestSpeechSafety_AnErrorReportFromAlexaBringsTheRetractionBack(t *testing.T) {
	for _, reason := range []string{"ERROR", "USER_INITIATED"} {
		t.Run(reason, func(t *testing.T) {
			dir := t.TempDir()
			heardAndRevised(t, dir)
			s := startWith(t, safetyPart, harness.Options{Dir: dir, Args: []string{"--alexa-verify=false", "--default-patient", "ray"}})
			dev := harness.NewDevice("ray")
			var r *harness.Reply
			for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
				if r = ask(t, s, dev.Launch()); !strings.Contains(r.Speech(), "can't reach your care notes") {
					break
				}
			}
			if !strings.HasPrefix(r.Speech(), "Stop — your walking instruction has changed.") || r.Body.SessionAttributes["marked"] == nil {
				t.Fatalf("launch: %q, attributes %v", r.Speech(), r.Body.SessionAttributes)
			}
			end := dev.SessionEnded(reason)
			end["session"].(map[string]any)["attributes"] = r.Body.SessionAttributes
			if reason == "ERROR" {
				end["request"].(map[string]any)["error"] = map[string]any{"type": "DEVICE_COMMUNICATION_ERROR", "message": "not played"}
			}
			ask(t, s, end)
			next := launch(t, s, dev)
			if reason == "ERROR" && (!strings.HasPrefix(next, "Stop — as I may not have told you properly: your walking instruction has changed.") || !strings.Contains(next, revision)) {
				t.Fatalf("after the error report: %q, want the retraction again, saying so", next)
			}
			if reason != "ERROR" && strings.Contains(next, "Stop —") {
				t.Fatalf("after %s the retraction was said again: %q", reason, next)
			}
		})
	}
}

// Finding B1: Alexa's error report for session S1's response (the one
// that carried the retraction) arrives late, after a new session S2 told
// Ray the new words plainly and the physio revised them again, and S3's
// retraction of them was written in full. S3 is a later confirmed
// delivery — of a newer version, and of a retraction — so the report
// never rolls the ledger back past it: the next turn tells the latest
// words plainly, no "Stop — I told you …" again. (Before finding U2 the
// later delivery here was S2's plain telling alone; that telling is no
// delivery of the retraction:
// TestSpeechSafety_ALateErrorReportForARetractionToldOnlyPlainlySinceBringsItBack.)
// Twin: with no later delivery the report brings the retraction back
// (TestSpeechSafety_AnErrorReportFromAlexaBringsTheRetractionBack).
func TestSpeechSafety_ALateErrorReportNeverRollsBackPastALaterDelivery(t *testing.T) {
	const second = "Walk with one crutch only, indoors."
	dir := t.TempDir()
	heardAndRevised(t, dir)
	s := startWith(t, safetyPart, harness.Options{Dir: dir, Args: []string{"--alexa-verify=false", "--default-patient", "ray"}})
	dev := harness.NewDevice("ray")
	var r *harness.Reply
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if r = ask(t, s, dev.Launch()); !strings.Contains(r.Speech(), "can't reach your care notes") {
			break
		}
	}
	if !strings.HasPrefix(r.Speech(), "Stop — your walking instruction has changed.") || r.Body.SessionAttributes["marked"] == nil {
		t.Fatalf("S1 launch: %q, attributes %v", r.Speech(), r.Body.SessionAttributes)
	}
	end := dev.SessionEnded("ERROR") // S1's report, sent after S3
	end["session"].(map[string]any)["attributes"] = r.Body.SessionAttributes
	end["request"].(map[string]any)["error"] = map[string]any{"type": "ENDPOINT_TIMEOUT", "message": "late"}
	if s2 := launch(t, s, dev); strings.Contains(s2, "Stop —") || !strings.Contains(s2, revision) {
		t.Fatalf("S2 launch: %q, want %q told plainly", s2, revision)
	}
	write(t, s, "weight_bearing", second)
	waitBacklog(t, s.AdminURL)
	if s3 := launch(t, s, dev); !strings.HasPrefix(s3, "Stop — your walking instruction has changed. I told you: “"+revision+"”") || !strings.Contains(s3, second) {
		t.Fatalf("S3 launch: %q, want the retraction of %q", s3, revision)
	}
	ask(t, s, end)
	if next := launch(t, s, dev); strings.Contains(next, "Stop —") || !strings.Contains(next, second) {
		t.Fatalf("after S1's late error report: %q, want %q plainly, no retraction again", next, second)
	}
}

// Finding U2 (P-24: losing a retraction is worse than repeating one):
// Echo A's session S1 carries the retraction ("Stop — … I told you: “…”
// … changed it: “…”"), then Echo B — or a new session on the same Echo —
// tells the new words plainly, written in full, and only then does
// Alexa's late error report for S1 arrive (Alexa sends it after its own
// timeout). The plain telling gave Ray the new words, never that they
// withdraw the ones he was told, so the retraction is owed again: the
// next turn says it, saying so, with the old words quoted as told — and
// once. Twins: the later delivery a retraction
// (TestSpeechSafety_ALateErrorReportNeverRollsBackPastALaterDelivery);
// both reports
// (TestSpeechSafety_BothResponsesReportedNotPlayedInEitherOrderLeaveTheRetractionOwed).
func TestSpeechSafety_ALateErrorReportForARetractionToldOnlyPlainlySinceBringsItBack(t *testing.T) {
	for _, tt := range []struct {
		name    string
		another bool // the plain telling on another Echo
	}{
		{"another Echo told the new words plainly", true},
		{"a new session on the same Echo told them plainly", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			heardAndRevised(t, dir)
			s := startWith(t, safetyPart, harness.Options{Dir: dir, Args: []string{"--alexa-verify=false", "--default-patient", "ray"}})
			echoA := harness.NewDevice("echoA")
			echoB := echoA
			if tt.another {
				echoB = harness.NewDevice("echoB")
			}
			var r *harness.Reply
			for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
				if r = ask(t, s, echoA.Intent("CarePlanIntent", topic("walking", "weight_bearing"))); !strings.Contains(r.Speech(), "can't reach your care notes") {
					break
				}
			}
			told := r.Speech()
			if !strings.HasPrefix(told, "Stop — your walking instruction has changed. I told you: “") || r.Body.SessionAttributes["marked"] == nil {
				t.Fatalf("S1 on Echo A: %q, attributes %v", told, r.Body.SessionAttributes)
			}
			old := harness.Quoted(told)[0]
			end := echoA.SessionEnded("ERROR") // S1's report, sent after the plain telling
			end["session"].(map[string]any)["attributes"] = r.Body.SessionAttributes
			end["request"].(map[string]any)["error"] = map[string]any{"type": "ENDPOINT_TIMEOUT", "message": "late"}
			plain := ask(t, s, echoB.Intent("CarePlanIntent", topic("walking", "weight_bearing"))).Speech()
			if strings.Contains(plain, "Stop —") || !strings.Contains(plain, "Your walking instruction from") || !strings.Contains(plain, revision) {
				t.Fatalf("the plain telling: %q, want %q told plainly", plain, revision)
			}
			ask(t, s, end)
			next := launch(t, s, echoA)
			want := "Stop — as I may not have told you properly: your walking instruction has changed. I told you: “" + old + "”"
			if !strings.HasPrefix(next, want) || !strings.Contains(next, revision) {
				t.Fatalf("after S1's late error report: %q\nwant it to open %q and give %q", next, want, revision)
			}
			if again := launch(t, s, echoA); strings.Contains(again, "Stop —") || !strings.Contains(again, revision) {
				t.Fatalf("the turn after the retraction: %q, want %q told plainly, the retraction said once", again, revision)
			}
		})
	}
}

// The double failure (P-24: losing a retraction is worse than repeating
// one): S1's response carrying the retraction and S2's response telling
// the new words plainly were both written in full, and Alexa reports both
// not played (SessionEndedRequest ERROR), in either order. S2's telling
// carries what it may have confirmed (session attribute "confirmed"), and
// its report undoes that; S1's report is never held back by a plain
// telling (finding U2): the next turn says the retraction again, saying
// so, once. Twins: S2 played
// (TestSpeechSafety_ALateErrorReportForARetractionToldOnlyPlainlySinceBringsItBack)
// and no S2 at all (TestSpeechSafety_AnErrorReportFromAlexaBringsTheRetractionBack).
func TestSpeechSafety_BothResponsesReportedNotPlayedInEitherOrderLeaveTheRetractionOwed(t *testing.T) {
	for _, s2First := range []bool{false, true} {
		name := "S1's report first"
		if s2First {
			name = "S2's report first"
		}
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			heardAndRevised(t, dir)
			s := startWith(t, safetyPart, harness.Options{Dir: dir, Args: []string{"--alexa-verify=false", "--default-patient", "ray"}})
			dev := harness.NewDevice("ray")
			var r1 *harness.Reply
			for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
				if r1 = ask(t, s, dev.Launch()); !strings.Contains(r1.Speech(), "can't reach your care notes") {
					break
				}
			}
			if !strings.HasPrefix(r1.Speech(), "Stop — your walking instruction has changed.") || r1.Body.SessionAttributes["marked"] == nil {
				t.Fatalf("S1 launch: %q, attributes %v", r1.Speech(), r1.Body.SessionAttributes)
			}
			end1 := dev.SessionEnded("ERROR")
			end1["session"].(map[string]any)["attributes"] = r1.Body.SessionAttributes
			end1["request"].(map[string]any)["error"] = map[string]any{"type": "ENDPOINT_TIMEOUT", "message": "late"}
			r2 := ask(t, s, dev.Launch())
			if strings.Contains(r2.Speech(), "Stop —") || !strings.Contains(r2.Speech(), revision) || r2.Body.SessionAttributes["confirmed"] == nil {
				t.Fatalf("S2 launch: %q, attributes %v; want %q told plainly, carrying its confirmation", r2.Speech(), r2.Body.SessionAttributes, revision)
			}
			end2 := dev.SessionEnded("ERROR")
			end2["session"].(map[string]any)["attributes"] = r2.Body.SessionAttributes
			end2["request"].(map[string]any)["error"] = map[string]any{"type": "DEVICE_COMMUNICATION_ERROR", "message": "not played"}
			if s2First {
				ask(t, s, end2)
				ask(t, s, end1)
			} else {
				ask(t, s, end1)
				ask(t, s, end2)
			}
			next := launch(t, s, dev)
			if !strings.HasPrefix(next, "Stop — as I may not have told you properly: your walking instruction has changed.") || !strings.Contains(next, revision) {
				t.Fatalf("after both error reports: %q, want the retraction again, saying so", next)
			}
			if again := launch(t, s, dev); strings.Contains(again, "Stop —") {
				t.Fatalf("the turn after the retraction was said again: %q, want it said once", again)
			}
		})
	}
}

// Finding T8 (P-24): the double failure of
// TestSpeechSafety_BothResponsesReportedNotPlayedInEitherOrderLeaveTheRetractionOwed,
// with revisions landing between the two reports. S1's retraction (v1→v2)
// and S2's plain telling of v2 are both written in full and both reported
// not played; after S2's report the physio saves v2's words again (v3:
// the ledger settles what he heard on v3, no delivery) and then new words
// (v4), and only then does S1's report arrive — for v2, which heard now
// only rests on. (Before finding U2 S1's report came first, held back by
// S2's confirmation; a plain telling no longer holds a retraction's report
// back.) The retraction Ray is owed withdraws
// what he last heard for certain, v1, as told and v2's words as words he
// may have heard: never v2's words as told with v1 left unnamed. Twin:
// with no revision between the reports the same double failure is
// TestSpeechSafety_BothResponsesReportedNotPlayedInEitherOrderLeaveTheRetractionOwed.
func TestSpeechSafety_ARevisionBetweenTwoNotPlayedReportsStillWithdrawsFromWhatRayLastHeardForCertain(t *testing.T) {
	const v4 = "Full weight-bearing; you no longer need the crutches."
	dir := t.TempDir()
	heardAndRevised(t, dir)
	s := startWith(t, safetyPart, harness.Options{Dir: dir, Args: []string{"--alexa-verify=false", "--default-patient", "ray"}})
	dev := harness.NewDevice("ray")
	var r1 *harness.Reply
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if r1 = ask(t, s, dev.Launch()); !strings.Contains(r1.Speech(), "can't reach your care notes") {
			break
		}
	}
	told := r1.Speech()
	if !strings.HasPrefix(told, "Stop — your walking instruction has changed. I told you: “Partial weight-bearing") || r1.Body.SessionAttributes["marked"] == nil {
		t.Fatalf("S1 launch: %q, attributes %v", told, r1.Body.SessionAttributes)
	}
	v1 := told[strings.Index(told, "“")+len("“") : strings.Index(told, "”")]
	// Each report ends its own session: made before the next launch.
	notPlayed := func(r *harness.Reply) harness.Request {
		end := dev.SessionEnded("ERROR")
		end["session"].(map[string]any)["attributes"] = r.Body.SessionAttributes
		end["request"].(map[string]any)["error"] = map[string]any{"type": "DEVICE_COMMUNICATION_ERROR", "message": "not played"}
		return end
	}
	end1 := notPlayed(r1)
	r2 := ask(t, s, dev.Launch())
	if strings.Contains(r2.Speech(), "Stop —") || !strings.Contains(r2.Speech(), revision) || r2.Body.SessionAttributes["confirmed"] == nil {
		t.Fatalf("S2 launch: %q, attributes %v; want %q told plainly, carrying its confirmation", r2.Speech(), r2.Body.SessionAttributes, revision)
	}
	end2 := notPlayed(r2)
	ask(t, s, end2) // undoes S2's confirmation of v2

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	mark := len(s.Output())
	if _, err := s.Write(ctx, "ray", "weight_bearing", revision, "okafor", "Sarah Okafor, physio", "--stale-after", "720h"); err != nil {
		t.Fatal(err) // the same words, now with a review date
	}
	waitOutputAfter(t, s, mark, "dropped=true") // v3 says v2's words: what he heard settles on v3
	mark = len(s.Output())
	if _, err := s.Write(ctx, "ray", "weight_bearing", v4, "okafor", "Sarah Okafor, physio"); err != nil {
		t.Fatal(err)
	}
	waitOutputAfter(t, s, mark, "dropped=false") // v3→v4 owed
	ask(t, s, end1)

	next := launch(t, s, dev)
	want := "Stop — as I may not have told you properly: your walking instruction has changed. I told you: “" + v1 + "” I may also have told you: “" + revision + "”"
	if !strings.HasPrefix(next, want) || !strings.Contains(next, v4) {
		t.Fatalf("after both error reports: %q\nwant it to open %q and give %q", next, want, v4)
	}
	if again := launch(t, s, dev); strings.Contains(again, "Stop —") || !strings.Contains(again, v4) {
		t.Fatalf("the turn after the retraction: %q, want %q told plainly, the retraction said once", again, v4)
	}
}

// Finding F14: Alexa delivers S1's error report twice (a retry, or a
// resend that arrives late: the same request, the same session attributes
// and response id). The first brings the retraction back, and S3 says it
// again, in full; the repeat then changes nothing S3's delivery settled:
// the next turn tells the new words plainly, no "Stop —" again. Twin: a
// first report — S3's own — still brings it back.
func TestSpeechSafety_ARepeatedNotPlayedReportForAResponseChangesNothingALaterDeliveryConfirmed(t *testing.T) {
	for _, repeat := range []bool{true, false} {
		name := "S1's report delivered again"
		if !repeat {
			name = "twin: S3's own first report"
		}
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			heardAndRevised(t, dir)
			s := startWith(t, safetyPart, harness.Options{Dir: dir, Args: []string{"--alexa-verify=false", "--default-patient", "ray"}})
			dev := harness.NewDevice("ray")
			var r1 *harness.Reply
			for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
				if r1 = ask(t, s, dev.Launch()); !strings.Contains(r1.Speech(), "can't reach your care notes") {
					break
				}
			}
			if !strings.HasPrefix(r1.Speech(), "Stop — your walking instruction has changed.") || r1.Body.SessionAttributes["response"] == nil {
				t.Fatalf("S1 launch: %q, attributes %v", r1.Speech(), r1.Body.SessionAttributes)
			}
			end1 := dev.SessionEnded("ERROR")
			end1["session"].(map[string]any)["attributes"] = r1.Body.SessionAttributes
			end1["request"].(map[string]any)["error"] = map[string]any{"type": "DEVICE_COMMUNICATION_ERROR", "message": "not played"}
			ask(t, s, end1)
			r3 := ask(t, s, dev.Launch())
			if !strings.HasPrefix(r3.Speech(), "Stop — as I may not have told you properly: your walking instruction has changed.") || !strings.Contains(r3.Speech(), revision) {
				t.Fatalf("S3 after S1's report: %q, want the retraction again, saying so", r3.Speech())
			}
			second := end1 // the very same report, as Alexa retries it
			if !repeat {
				second = dev.SessionEnded("ERROR")
				second["session"].(map[string]any)["attributes"] = r3.Body.SessionAttributes
				second["request"].(map[string]any)["error"] = map[string]any{"type": "DEVICE_COMMUNICATION_ERROR", "message": "not played"}
			}
			ask(t, s, second)
			next := launch(t, s, dev)
			if repeat && (strings.Contains(next, "Stop —") || !strings.Contains(next, revision)) {
				t.Fatalf("after S1's report again: %q, want %q told plainly, no retraction again", next, revision)
			}
			if !repeat && (!strings.HasPrefix(next, "Stop — as I may not have told you properly: your walking instruction has changed.") || !strings.Contains(next, revision)) {
				t.Fatalf("after S3's report: %q, want the retraction again, saying so", next)
			}
		})
	}
}

// Finding T1: Alexa never received the response that carried the
// retraction (ENDPOINT_TIMEOUT: written by the server's clock in time,
// late by Alexa's, or lost on the way), so its error report cannot echo
// that response's session attributes — in a new session it carries none.
// The skill re-opens what the session's last response marked from its own
// record: the next turn says the retraction again, saying so. Twin: the
// session went on past the retraction to a turn that marked nothing (Alexa
// accepted the retraction's response; the report is of the later one) —
// nothing is re-opened and the next turn tells the new words plainly.
func TestSpeechSafety_AnErrorReportWithoutTheFailedResponsesAttributesStillBringsItsRetractionBack(t *testing.T) {
	for _, tt := range []struct {
		name      string
		laterTurn bool
	}{
		{"the retraction's response timed out, reported with no attributes", false},
		{"twin: a later turn that marked nothing timed out", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			heardAndRevised(t, dir)
			s := startWith(t, safetyPart, harness.Options{Dir: dir, Args: []string{"--alexa-verify=false", "--default-patient", "ray"}})
			dev := harness.NewDevice("ray")
			var r *harness.Reply
			for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
				if r = ask(t, s, dev.Launch()); !strings.Contains(r.Speech(), "can't reach your care notes") {
					break
				}
			}
			if !strings.HasPrefix(r.Speech(), "Stop — your walking instruction has changed.") || r.Body.SessionAttributes["marked"] == nil {
				t.Fatalf("launch: %q, attributes %v", r.Speech(), r.Body.SessionAttributes)
			}
			if tt.laterTurn {
				if h := ask(t, s, dev.Intent("AMAZON.HelpIntent", nil)); h.Body.SessionAttributes != nil || strings.Contains(h.Speech(), "Stop —") {
					t.Fatalf("help: %q, attributes %v; want nothing marked", h.Speech(), h.Body.SessionAttributes)
				}
			}
			end := dev.SessionEnded("ERROR") // no attributes: Alexa never had the failed response's
			end["request"].(map[string]any)["error"] = map[string]any{"type": "ENDPOINT_TIMEOUT", "message": "timeout"}
			ask(t, s, end)
			next := launch(t, s, dev)
			if tt.laterTurn {
				if strings.Contains(next, "Stop —") || !strings.Contains(next, revision) {
					t.Fatalf("after the later turn's report: %q, want %q told plainly, no retraction again", next, revision)
				}
				return
			}
			if !strings.HasPrefix(next, "Stop — as I may not have told you properly: your walking instruction has changed. I told you: “") || !strings.Contains(next, revision) {
				t.Fatalf("after the error report: %q, want the retraction again, saying so", next)
			}
		})
	}
}

// Finding T1, in a longer session: R1 retracted v1→v2 (the seed's words
// → revision), the physio revised it again, and R2 in the same session
// retracted v2→v3; Alexa then reports INVALID_RESPONSE — it refused R2 —
// echoing the attributes it held, R1's. The skill re-opens R2's marks
// from its record, then R1's: the next turn withdraws the seed's words as
// told and the first revision as words he may have heard (a repeat if R1
// played, never a loss). Twin: the report echoes R2's own attributes
// (DEVICE_COMMUNICATION_ERROR: Alexa had R2 and could not play it) — only
// R2 is re-opened: the next turn withdraws the first revision as told.
func TestSpeechSafety_AnErrorReportEchoingAnEarlierResponseReopensTheLastOneToo(t *testing.T) {
	const second = "Walk with one crutch only, indoors."
	for _, tt := range []struct {
		name, errType string
		echoR1        bool
	}{
		{"R2 refused, R1's attributes echoed", "INVALID_RESPONSE", true},
		{"twin: R2 not played, its own attributes echoed", "DEVICE_COMMUNICATION_ERROR", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			heardAndRevised(t, dir)
			s := startWith(t, safetyPart, harness.Options{Dir: dir, Args: []string{"--alexa-verify=false", "--default-patient", "ray"}})
			dev := harness.NewDevice("ray")
			var r1 *harness.Reply
			for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
				if r1 = ask(t, s, dev.Launch()); !strings.Contains(r1.Speech(), "can't reach your care notes") {
					break
				}
			}
			seed := harness.Quoted(r1.Speech())
			if !strings.HasPrefix(r1.Speech(), "Stop — your walking instruction has changed.") || len(seed) < 2 || seed[1] != revision {
				t.Fatalf("R1: %q", r1.Speech())
			}
			write(t, s, "weight_bearing", second)
			waitBacklog(t, s.AdminURL)
			r2 := ask(t, s, dev.Intent("CarePlanIntent", topic("walking", "weight_bearing")))
			if !strings.HasPrefix(r2.Speech(), "Stop — your walking instruction has changed. I told you: “"+revision+"”") || !strings.Contains(r2.Speech(), second) {
				t.Fatalf("R2: %q", r2.Speech())
			}
			end := dev.SessionEnded("ERROR")
			end["session"].(map[string]any)["attributes"] = r2.Body.SessionAttributes
			if tt.echoR1 {
				end["session"].(map[string]any)["attributes"] = r1.Body.SessionAttributes
			}
			end["request"].(map[string]any)["error"] = map[string]any{"type": tt.errType, "message": "not played"}
			ask(t, s, end)
			next := launch(t, s, dev)
			const again = "Stop — as I may not have told you properly: your walking instruction has changed. I told you: “"
			want := again + revision + "”"
			if tt.echoR1 {
				want = again + seed[0] + "” I may also have told you: “" + revision + "”"
			}
			if !strings.HasPrefix(next, want) || !strings.Contains(next, second) {
				t.Fatalf("after the error report: %q\nwant it to open %q and give %q", next, want, second)
			}
		})
	}
}

// A client that gives up (Alexa after its deadline, here after 1 s) and
// closes its connection while the response carrying the retraction is
// held before its write: the response is written into a dead connection,
// so nothing is heard, and the next turn says the retraction again,
// saying so.
func TestSpeechSafety_AResponseWrittenIntoAClosedConnectionIsSpokenAgain(t *testing.T) {
	dir := t.TempDir()
	heardAndRevised(t, dir)

	s := startWith(t, safetyPart, harness.Options{Dir: dir, Args: []string{"--alexa-verify=false", "--default-patient", "ray"},
		Env: []string{"UNSAY_TEST_ALEXA_PAUSE=before-write:3s"}})
	waitBacklog(t, s.AdminURL)
	dev := harness.NewDevice("ray")
	c := &harness.AlexaClient{URL: s.URL + "/alexa", HTTP: &http.Client{Timeout: time.Second}}
	if r, err := c.Send(context.Background(), dev.Launch()); err == nil {
		t.Fatalf("the held response arrived within a second: %d %s", r.Status, r.Raw)
	}
	waitOutput(t, s, "alexa response written after Alexa closed the connection; what it offered stays offered")
	again := launchUntilStop(t, s, dev) // held 3 s, then delivered
	if !strings.HasPrefix(again, "Stop — as I may not have told you properly: your walking instruction has changed.") || !strings.Contains(again, revision) {
		t.Fatalf("after the hang-up the next turn = %q, want the retraction again, saying so", again)
	}
}

// A revision that lands while the response carrying the previous one is
// held before its write (its offers recorded; in production a GC pause or
// a slow ledger write): the response is built again from a fresh
// confirmation, so it never says the superseded words as current, and Ray
// hears the newest ones now (the breakit report's F4).
func TestSpeechSafety_ARevisionWhileTheResponseIsHeldIsNotSpokenAsCurrent(t *testing.T) {
	dir := t.TempDir()
	heardAndRevised(t, dir)

	s := startWith(t, safetyPart, harness.Options{Dir: dir, Args: []string{"--alexa-verify=false", "--default-patient", "ray"},
		Env: []string{"UNSAY_TEST_ALEXA_PAUSE=before-write:6s"}})
	waitBacklog(t, s.AdminURL)
	dev := harness.NewDevice("ray")
	got := make(chan string, 1)
	go func() {
		c := &harness.AlexaClient{URL: s.URL + "/alexa", HTTP: &http.Client{Timeout: 90 * time.Second}}
		r, err := c.Send(context.Background(), dev.Launch())
		if err != nil || r.Status != http.StatusOK {
			got <- fmt.Sprintf("launch failed: %v", err)
			return
		}
		got <- r.Speech()
	}()
	waitOutput(t, s, "TEST PAUSE: holding an Alexa response before-write")
	const newer = "Partial weight-bearing again, with the frame."
	write(t, s, "weight_bearing", newer)
	said := <-got
	if strings.Contains(said, "changed it just now: “"+revision+"”") || !strings.HasPrefix(said, "Stop — ") || !strings.Contains(said, "“"+newer+"”") {
		t.Fatalf("revised while held, the response said %q: want the retraction to %q, never %q as current", said, newer, revision)
	}
	waitOutput(t, s, "alexa response overtaken by a revision before it was written; built again")
}

// stallProxy stands between the speech principal and /mcp: it can freeze
// every event stream (GET) while requests still flow, or cut every
// connection and refuse new ones.
type stallProxy struct {
	srv     *httptest.Server
	target  atomic.Pointer[url.URL]
	stalled atomic.Bool
	cut     atomic.Bool
	mu      sync.Mutex
	thaw    chan struct{} // closed when the stall ends
}

func newStallProxy(t *testing.T) *stallProxy {
	p := &stallProxy{thaw: make(chan struct{})}
	rp := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(p.target.Load())
			r.Out.Host = r.Out.URL.Host
		},
		FlushInterval: -1,
		ModifyResponse: func(resp *http.Response) error {
			// The speech principal's event stream: the standalone GET
			// stream of a 2025-11-25 session, or a 2026-07-28
			// subscriptions/listen response.
			if resp.Request.Method == http.MethodGet || resp.Request.Header.Get("Mcp-Method") == "subscriptions/listen" {
				resp.Body = &stallBody{p: p, rc: resp.Body}
			}
			return nil
		},
	}
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p.cut.Load() || p.target.Load() == nil {
			http.Error(w, "proxy cut", http.StatusBadGateway)
			return
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(p.srv.Close)
	return p
}

func (p *stallProxy) stall(on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if on {
		p.thaw = make(chan struct{})
	} else {
		close(p.thaw)
	}
	p.stalled.Store(on)
}

func (p *stallProxy) setCut(on bool) {
	p.cut.Store(on)
	if on {
		p.srv.CloseClientConnections()
	}
}

type stallBody struct {
	p  *stallProxy
	rc io.ReadCloser
}

// Read holds whatever the stream delivers while the proxy is stalled,
// including bytes a read already in progress returns.
func (b *stallBody) Read(buf []byte) (int, error) {
	n, err := b.rc.Read(buf)
	for b.p.stalled.Load() {
		b.p.mu.Lock()
		thaw := b.p.thaw
		b.p.mu.Unlock()
		<-thaw
	}
	return n, err
}

func (b *stallBody) Close() error { return b.rc.Close() }

// readyz returns /readyz's status and the speech principal's part.
func readyz(base string) (int, string) {
	resp, err := http.Get(base + "/readyz")
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	var body struct {
		Speech json.RawMessage `json:"speech"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&body)
	return resp.StatusCode, string(body.Speech)
}

// waitReady waits up to limit for /readyz to answer status and returns how
// long it took.
func waitReady(t *testing.T, base string, status int, limit time.Duration, what string) time.Duration {
	t.Helper()
	start := time.Now()
	var last string
	for time.Since(start) < limit {
		code, speech := readyz(base)
		if code == status {
			return time.Since(start)
		}
		last = fmt.Sprintf("%d %s", code, speech)
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%s: /readyz not %d within %s (last %s)", what, status, limit, last)
	return 0
}

// /readyz tells the truth: 503 within a few seconds of the speech
// principal's event stream being stalled (a change the store committed
// goes unread) or cut, and 200 again once it recovers.
func TestSpeechSafety_Readyz503WhenTheSpeechStreamIsStalledOrCutAnd200WhenItRecovers(t *testing.T) {
	proxy := newStallProxy(t)
	s := startWith(t, safetyPart, harness.Options{Args: []string{"--speech-patient", "ray", "--speech-mcp-url", proxy.srv.URL + "/mcp"}})
	u, _ := url.Parse(s.URL)
	proxy.target.Store(u)
	waitReady(t, s.AdminURL, http.StatusOK, 30*time.Second, "at start")

	// Stalled: the stream delivers nothing; a revision is committed.
	proxy.stall(true)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := s.Write(ctx, "ray", "weight_bearing", revision, "okafor", "Sarah Okafor, physio"); err != nil {
		t.Fatal(err)
	}
	d503 := waitReady(t, s.AdminURL, http.StatusServiceUnavailable, 15*time.Second, "stream stalled")
	proxy.stall(false)
	d200 := waitReady(t, s.AdminURL, http.StatusOK, 20*time.Second, "stall over")
	t.Logf("stalled stream: /readyz 503 %s after the write, 200 %s after the stall ended", d503.Round(10*time.Millisecond), d200.Round(10*time.Millisecond))
	if code, speech := readyz(s.AdminURL); code != http.StatusOK || !strings.Contains(speech, `"backlog":1`) {
		t.Errorf("after recovering: %d %s, want ready with the revision queued", code, speech)
	}

	// Cut: every connection closed, new ones refused.
	proxy.setCut(true)
	dCut := waitReady(t, s.AdminURL, http.StatusServiceUnavailable, 15*time.Second, "stream cut")
	proxy.setCut(false)
	dBack := waitReady(t, s.AdminURL, http.StatusOK, 30*time.Second, "cut over")
	t.Logf("cut stream: /readyz 503 %s after the cut, 200 %s after it was restored", dCut.Round(10*time.Millisecond), dBack.Round(10*time.Millisecond))
}

// hearAll sends req and then "more" in the same session until the answer
// is said whole; it returns every part's speech and the replies.
func hearAll(t *testing.T, s *harness.Server, dev *harness.Device, req harness.Request) (string, []*harness.Reply) {
	t.Helper()
	r := ask(t, s, req)
	replies := []*harness.Reply{r}
	said := r.Speech()
	for i := 0; strings.HasSuffix(r.Speech(), "Say more to continue."); i++ {
		if i > 10 {
			t.Fatalf("more than 10 parts: %.200q", said)
		}
		r = ask(t, s, dev.Intent("MoreIntent", nil))
		replies = append(replies, r)
		said += " " + r.Speech()
	}
	return said, replies
}

// Finding F3, whole-program: v8 (6,000 characters that escape to more than
// 8,000) is heard in full; the retraction to v9 is started and the session
// ends after its first part; then v10 is written. The next retraction
// withdraws v8, the words Ray heard, as told. Since T9 the first part
// quotes v8 shortened ("… and the rest of that older instruction") and
// starts v9's words, on both devices — so v9 is withdrawn too, as words he
// may have been told (on an Echo Show the retraction card also showed
// them; never the care card with them as a plain current row).
func TestSpeechSafety_AnUnfinishedLongRetractionIsWithdrawnByTheWordsRayWasTold(t *testing.T) {
	const v8unit, v9unit, v10 = "Rest & ice <2h> ", "Ice & rest <3h> ", "Full weight-bearing as tolerated."
	v8 := strings.TrimSpace(strings.Repeat(v8unit, 6000/len(v8unit)))
	v9 := strings.TrimSpace(strings.Repeat(v9unit, 6000/len(v9unit)))
	for _, screen := range []bool{false, true} {
		t.Run(map[bool]string{false: "voice-only", true: "Echo Show"}[screen], func(t *testing.T) {
			s := startWith(t, safetyPart, harness.Options{Dir: t.TempDir(), Args: []string{"--alexa-verify=false", "--default-patient", "ray"}})
			dev := harness.NewDevice("ray")
			dev.APL = screen
			launchUntilStop(t, s, dev) // he hears his walking instruction
			write(t, s, "weight_bearing", v8)
			if said, _ := hearAll(t, s, dev, dev.Launch()); !strings.HasPrefix(said, "Stop — your walking instruction has changed.") || !strings.Contains(said, "Rest & ice <2h>") {
				t.Fatalf("v8's retraction: %.200q", said)
			}
			write(t, s, "weight_bearing", v9)
			part1 := ask(t, s, dev.Launch())
			said := part1.Speech()
			if !strings.HasPrefix(said, "Stop — your walking instruction has changed. I told you: “Rest & ice <2h>") || !strings.HasSuffix(said, "Say more to continue.") ||
				!strings.Contains(said, "…” and the rest of that older instruction. Sarah Okafor, physio, changed it just now: “Ice & rest <3h>") {
				t.Fatalf("v9's retraction, part 1: %.600q … want v8's words shortened, then v9's, cut", said)
			}
			if screen {
				if d := part1.Body.Response.Directives; len(d) != 1 || d[0]["token"] != "unsay-retraction-card" {
					t.Errorf("the card during part 1: %v, want the retraction card", part1.DirectiveTypes())
				}
			}
			ask(t, s, dev.SessionEnded("USER_INITIATED"))
			write(t, s, "weight_bearing", v10)
			next, _ := hearAll(t, s, dev, dev.Launch())
			if !strings.Contains(next, "I told you: “Rest & ice <2h>") || !strings.Contains(next, "“"+v10+"”") {
				t.Fatalf("after v10: %.300q, want v8 withdrawn as told and v10 said", next)
			}
			if !strings.Contains(next, "I may also have told you: “Ice & rest <3h>") {
				t.Errorf("after v10 (screen %v): v9, whose words part 1 began, is not withdrawn: %.600q", screen, next)
			}
		})
	}
}

// Finding F16, whole-program: a retraction too long for one response
// (v9, 6,000 characters that escape to more than 8,000) is heard part by
// part; the part that completes it — the only one that marks anything,
// so the only one the test pause holds — is held, and the physio revises
// the instruction meanwhile. That part is built again from a fresh
// confirmation: it restarts the retraction ("as I may not have told you
// properly") and no part after the revision says v9 as what she changed
// it to; the newest words are said last, and heard. Twin (no revision):
// the parts continue as cut, the retraction is said once, ending with v9.
func TestSpeechSafety_ARevisionWhileAPartOfALongRetractionIsHeldRestartsItFromTheNewWords(t *testing.T) {
	const v9unit, newer = "Ice & rest <3h> ", "Revised during the hold."
	v9 := strings.TrimSpace(strings.Repeat(v9unit, 6000/len(v9unit)))
	for _, revise := range []bool{true, false} {
		t.Run(map[bool]string{true: "revised while held", false: "no revision"}[revise], func(t *testing.T) {
			s := startWith(t, safetyPart, harness.Options{Dir: t.TempDir(), Args: []string{"--alexa-verify=false", "--default-patient", "ray"},
				Env: []string{"UNSAY_TEST_ALEXA_PAUSE=before-write:3s"}})
			dev := harness.NewDevice("ray")
			launchUntilStop(t, s, dev) // he hears his walking instruction (held 3 s)
			write(t, s, "weight_bearing", v9)
			type result struct {
				said  string
				parts []string
			}
			got := make(chan result, 1)
			go func() {
				c := &harness.AlexaClient{URL: s.URL + "/alexa", HTTP: &http.Client{Timeout: 90 * time.Second}}
				var res result
				req := dev.Launch()
				for i := 0; i < 10; i++ {
					ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
					r, err := c.Send(ctx, req)
					cancel()
					if err != nil || r.Status != http.StatusOK {
						res.parts = append(res.parts, fmt.Sprintf("POST /alexa failed: %v", err))
						break
					}
					res.parts = append(res.parts, r.Speech())
					if !strings.HasSuffix(r.Speech(), "Say more to continue.") {
						break
					}
					req = dev.Intent("MoreIntent", nil)
				}
				res.said = strings.Join(res.parts, " ")
				got <- res
			}()
			if revise {
				waitOutput(t, s, "TEST PAUSE: holding an Alexa response before-write\" for=3s request=IntentRequest intent=MoreIntent")
				write(t, s, "weight_bearing", newer)
			}
			res := <-got
			short := strings.ReplaceAll(res.said, v9unit, "")
			if !revise {
				if n := strings.Count(res.said, "Stop —"); n != 1 || !strings.Contains(res.said, "changed it just now: “Ice & rest") || strings.Contains(res.said, newer) {
					t.Fatalf("without a revision: %d starts, %.600q: want the parts continued as cut, once, ending with v9", n, short)
				}
				if strings.Contains(s.Output(), "overtaken") {
					t.Errorf("a part was rebuilt with no revision")
				}
				return
			}
			restart := -1
			for i, p := range res.parts {
				if strings.HasPrefix(p, "Stop — as I may not have told you properly:") {
					restart = i
					break
				}
			}
			if restart < 1 {
				t.Fatalf("revised while a part was held, no part restarted the retraction: %.800q", short)
			}
			waitOutput(t, s, "alexa response overtaken by a revision before it was written; built again")
			for i, p := range res.parts[restart:] {
				if j := strings.Index(p, "changed it just now: “Ice & rest"); j >= 0 {
					t.Errorf("part %d, built after the revision, says the superseded v9 as the new instruction: %.200q", restart+i+1, p[j:])
				}
			}
			if !strings.Contains(res.parts[len(res.parts)-1], "changed it just now: “"+newer+"”") {
				t.Errorf("the last part = %.300q, want it to end the retraction with %q", res.parts[len(res.parts)-1], newer)
			}
			if again := launch(t, s, dev); strings.Contains(again, "Stop —") {
				t.Errorf("after the whole retraction was heard the next turn said %.200q, want it heard once", again)
			}
		})
	}
}

// Finding F10, whole-program: Ray hears his walking instruction (v1) for
// certain; v2's retraction is spoken and the server is killed (SIGKILL)
// before the heard ledger's commit; v3's retraction — withdrawing v1 as
// told and v2 as words he may have heard — is spoken and the server is
// killed again. Then v4 is written. Its retraction withdraws v1 as told
// and both v2 and v3 as words he may have been told, oldest first — the
// old binary withdrew v1 and v3 and left v2 standing. Twin: when v3's
// retraction is delivered and committed, v4's withdraws v3 alone, as told.
func TestSpeechSafety_TwoUnconfirmedDeliveriesInARowAreBothWithdrawnByTheNextRevision(t *testing.T) {
	const v2, v3, v4 = revision, "Partial weight-bearing with the frame.", "Walk with one crutch indoors."
	args := []string{"--alexa-verify=false", "--default-patient", "ray"}
	pause := []string{"UNSAY_TEST_ALEXA_PAUSE=before-heard:60s"}
	for _, confirmed := range []bool{false, true} {
		t.Run(map[bool]string{false: "both unconfirmed", true: "twin: the second confirmed"}[confirmed], func(t *testing.T) {
			dir := t.TempDir()
			dev := harness.NewDevice("ray")
			s := startWith(t, safetyPart, harness.Options{Dir: dir, Args: args})
			first := launchUntilStop(t, s, dev)
			v1 := harness.WalkingSentence(first)
			if !strings.Contains(first, "Your walking instruction from") || v1 == "" {
				t.Fatalf("first launch: %q", first)
			}
			write(t, s, "weight_bearing", v2)
			waitBacklog(t, s.AdminURL)
			if err := s.Stop(); err != nil {
				t.Fatal(err)
			}

			// v2's retraction reaches Ray; the ledger never hears of it.
			p1 := startWith(t, safetyPart, harness.Options{Dir: dir, Args: args, Env: pause})
			if said := launchUntilStop(t, p1, dev); !strings.HasPrefix(said, "Stop — your walking instruction has changed. I told you: “"+v1+"”") || !strings.Contains(said, "“"+v2+"”") {
				t.Fatalf("v2's retraction: %q", said)
			}
			waitOutput(t, p1, "TEST PAUSE: holding an Alexa response before-heard")
			p1.Kill()

			// v3's retraction reaches him; killed again unless confirmed.
			env := pause
			if confirmed {
				env = nil
			}
			p2 := startWith(t, safetyPart, harness.Options{Dir: dir, Args: args, Env: env})
			write(t, p2, "weight_bearing", v3)
			want3 := "Stop — as I may not have told you properly: your walking instruction has changed. I told you: “" + v1 + "” I may also have told you: “" + v2 + "”"
			if said := launchUntilStop(t, p2, dev); !strings.HasPrefix(said, want3) || !strings.Contains(said, ": “"+v3+"”") {
				t.Fatalf("v3's retraction: %q\nwant it to open %q", said, want3)
			}
			if confirmed {
				if err := p2.Stop(); err != nil {
					t.Fatal(err)
				}
			} else {
				waitOutput(t, p2, "TEST PAUSE: holding an Alexa response before-heard")
				p2.Kill()
			}

			s2 := startWith(t, safetyPart, harness.Options{Dir: dir, Args: args})
			write(t, s2, "weight_bearing", v4)
			next := launchUntilStop(t, s2, dev)
			want := "Stop — as I may not have told you properly: your walking instruction has changed. I told you: “" + v1 + "” I may also have told you: “" + v2 + "” and “" + v3 + "”"
			if confirmed {
				want = "Stop — your walking instruction has changed. I told you: “" + v3 + "”"
			}
			if !strings.HasPrefix(next, want+" ") || !strings.Contains(next, ": “"+v4+"”") {
				t.Fatalf("after v4: %q\nwant it to open %q and give %q", next, want, v4)
			}
			if confirmed && (strings.Contains(next, v1) || strings.Contains(next, v2)) {
				t.Errorf("after a confirmed v3, v4's retraction quotes an older version: %q", next)
			}
			if after := launch(t, s2, dev); strings.Contains(after, "Stop —") || !strings.Contains(after, v4) {
				t.Errorf("once delivered it was spoken again, or v4 is not current: %q", after)
			}
		})
	}
}

// linkNew links dev to patient through `unsay link --json` and
// LinkDeviceIntent and returns what the link's response said and drew.
func linkNew(t *testing.T, s *harness.Server, dev *harness.Device, patient string) *harness.Reply {
	t.Helper()
	out, err := harness.Run(context.Background(), bin, "link", "--url", s.URL, "--patient", patient, "--json")
	if err != nil {
		t.Fatal(err)
	}
	var l struct {
		Code string `json:"code"`
	}
	if err := json.Unmarshal([]byte(out), &l); err != nil || l.Code == "" {
		t.Fatalf("unsay link --json printed %q: %v", out, err)
	}
	return ask(t, s, dev.Intent("LinkDeviceIntent", map[string]any{"code": map[string]any{"name": "code", "value": l.Code}}))
}

// Finding T15, whole-program, as the tester did it: a fresh patient's
// exercise instruction is longer than the care card shows (700 characters
// over its 600), so the Echo Show's card at the link shows it cut; his
// contact instruction is short and shown whole. Both are revised. The next
// turn withdraws both: the contact words as told ("I told you"), the cut
// exercise row's as words he may have read ("I may have told you") — the
// old binary said the exercise stop order as a first instruction.
func TestSpeechSafety_ARowTheCareCardShowedCutIsWithdrawnWhenRevised(t *testing.T) {
	var rules []string
	for i := 1; i < 40; i++ {
		rules = append(rules, fmt.Sprintf("Exercise rule %d: do it slowly and carefully.", i))
	}
	long := strings.TrimSpace(strings.Join(rules, " ")[:700])
	s := startWith(t, safetyPart, harness.Options{Dir: t.TempDir(), Args: []string{"--alexa-verify=false"}})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, f := range [][2]string{{"weight_bearing", "Walk with the frame."}, {"exercise", long}, {"contact", "Call ward 5."}} {
		if _, err := s.Write(ctx, "pat2", f[0], f[1], "okafor", "Sarah Okafor, physio"); err != nil {
			t.Fatal(err)
		}
	}
	dev := harness.NewDevice("pat2")
	linked := linkNew(t, s, dev, "pat2")
	if !strings.Contains(linked.Speech(), "Walk with the frame.") || !strings.Contains(string(linked.Raw), `"cut":true`) {
		t.Fatalf("the link's response: %.300q; the test needs its care card to show the exercise row cut: %.2000s", linked.Speech(), linked.Raw)
	}
	ask(t, s, dev.SessionEnded("USER_INITIATED"))
	for _, f := range [][2]string{{"exercise", "STOP all exercises until reviewed."}, {"contact", "Call ward 6."}} {
		if _, err := s.Write(ctx, "pat2", f[0], f[1], "okafor", "Sarah Okafor, physio"); err != nil {
			t.Fatal(err)
		}
	}
	waitBacklog(t, s.AdminURL)
	said, _ := hearAll(t, s, dev, dev.Launch())
	if !strings.Contains(said, "your contact instruction has changed. I told you: “Call ward 5.”") {
		t.Errorf("the contact row, shown whole, is not withdrawn as told: %q", said)
	}
	i := strings.Index(said, "your exercise instruction has changed.")
	if i < 0 || !strings.Contains(said[i:], "may have told you: “Exercise rule 1: do it slowly and carefully.") || !strings.Contains(said[i:], "“STOP all exercises until reviewed.”") {
		t.Errorf("the exercise row, shown cut, is not withdrawn before the stop order: %q", said)
	}
}

// Finding U10, whole-program, as the tester did it: an Echo Show left on
// the care card speaks a revision at its next 5 s tick, to a room that may
// be empty. That retraction is only offered: later ticks of the session
// stay silent about it, Ray's next turn — a new session — still opens with
// it, saying he may not have been told properly, and only then is it heard
// ("what changed?" afterwards: nothing has changed).
func TestSpeechSafety_ARetractionTheCardsTickSpokeUnaskedIsSaidAgainAtRaysNextTurn(t *testing.T) {
	s := startWith(t, safetyPart, harness.Options{Dir: t.TempDir(), Args: []string{"--alexa-verify=false", "--default-patient", "ray"}})
	dev := harness.NewDevice("ray")
	if first := launchUntilStop(t, s, dev); !strings.Contains(first, "Your walking instruction from") {
		t.Fatalf("first launch: %q", first)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := s.Write(ctx, "ray", "weight_bearing", revision, "okafor", "Sarah Okafor, physio"); err != nil {
		t.Fatal(err)
	}
	waitBacklog(t, s.URL)
	const stop = "Stop — your walking instruction has changed."
	if said := ask(t, s, dev.UserEvent("tick")).Speech(); !strings.HasPrefix(said, stop) || !strings.Contains(said, revision) {
		t.Fatalf("the card's tick after the write: %q", said)
	}
	for i := 0; i < 2; i++ {
		if said := ask(t, s, dev.UserEvent("tick")).Speech(); said != "" {
			t.Fatalf("tick %d after the one that spoke said %q, want nothing", i+2, said)
		}
	}
	ask(t, s, dev.SessionEnded("USER_INITIATED"))
	if said := launch(t, s, dev); !strings.HasPrefix(said, "Stop — as I may not have told you properly: your walking instruction has changed.") || !strings.Contains(said, revision) {
		t.Fatalf("Ray's next turn after the tick spoke unasked: %q", said)
	}
	ask(t, s, dev.SessionEnded("USER_INITIATED"))
	dev.Launch()
	if said := ask(t, s, dev.Intent("WhatsChangedIntent", nil)).Speech(); !strings.Contains(said, "Nothing has changed") {
		t.Errorf("what changed, once heard: %q", said)
	}
}

// Finding U5, whole-program, as the tester did it: the exercise retraction
// (a 5,900-character instruction) is cut for "more"; walking is revised
// before Ray says "more". The next part says the walking retraction first
// and then introduces the rest of the exercise instruction again — never
// runs it on from the new walking words.
func TestSpeechSafety_TheRestOfACutRetractionAfterANewRetractionIsIntroducedAgain(t *testing.T) {
	s := startWith(t, safetyPart, harness.Options{Dir: t.TempDir(), Args: []string{"--alexa-verify=false", "--default-patient", "ray"}})
	dev := harness.NewDevice("ray")
	if first := launchUntilStop(t, s, dev); !strings.Contains(first, "Your walking instruction from") {
		t.Fatalf("first launch: %q", first)
	}
	ask(t, s, dev.SessionEnded("USER_INITIATED"))
	var b strings.Builder
	for i := 1; b.Len() < 5900; i++ {
		fmt.Fprintf(&b, "Piece %d & heel & toe & knee a. ", i)
	}
	long := strings.TrimSpace(b.String())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := s.Write(ctx, "ray", "exercise", long, "okafor", "Sarah Okafor, physio"); err != nil {
		t.Fatal(err)
	}
	waitBacklog(t, s.URL)
	dev.Launch() // a new session (not sent)
	topic := harness.Slot("topic", "exercise", "CareTopic", "exercise", "exercise")
	part1 := ask(t, s, dev.Intent("CarePlanIntent", map[string]any{"topic": topic})).Speech()
	if !strings.HasPrefix(part1, "Stop — your exercise instruction has changed.") || !strings.HasSuffix(part1, "Say more to continue.") {
		t.Fatalf("part 1: %.200q … %.80q", part1, part1[max(0, len(part1)-80):])
	}
	const walk = "Touch-toe weight-bearing, frame at all times."
	if _, err := s.Write(ctx, "ray", "weight_bearing", walk, "okafor", "Sarah Okafor, physio"); err != nil {
		t.Fatal(err)
	}
	part2 := ask(t, s, dev.Intent("MoreIntent", nil)).Speech()
	i := strings.Index(part2, "“"+walk+"”")
	if !strings.HasPrefix(part2, "Stop — your walking instruction has changed.") || i < 0 {
		t.Fatalf("part 2 does not open with the walking retraction: %.300q", part2)
	}
	if next := strings.TrimSpace(part2[i+len("“"+walk+"”"):]); !strings.HasPrefix(next, "Back to your changed exercise instruction, continuing the new words: “Piece ") {
		t.Errorf("after the walking retraction part 2 says %.200q: want the exercise instruction introduced again", next)
	}
}
