//go:build e2e

package e2e_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/unsay/unsay/test/harness"
)

// backlogAtMost waits until s's speech backlog is at most n: a delivered
// retraction's marks are committed.
func backlogAtMost(t *testing.T, s *harness.Server, n int) {
	t.Helper()
	var last string
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		_, speech := readyz(s.AdminURL)
		var st struct {
			Backlog *int `json:"backlog"`
		}
		_ = json.Unmarshal([]byte(speech), &st)
		if st.Backlog != nil && *st.Backlog <= n {
			return
		}
		last = speech
	}
	t.Fatalf("speech backlog never fell to %d (last %s)", n, last)
}

// Finding U8 (P-24), as the tester found it: in one session R1 (the
// launch) retracted v1→v2 (the seed's words → revision), the physio
// revised it again, and R2 (CarePlanIntent) retracted v2→v3; the server
// is killed (SIGKILL) and restarted, and Alexa's ENDPOINT_TIMEOUT report
// of R2 — the response it never got — reaches the new process echoing the
// attributes Alexa held, R1's. The record of R2's marks died with the old
// process's memory, but it is the heard ledger's too (written with R2's
// offers): the new process re-opens R2's marks, then R1's, and the next
// turn withdraws the seed's words as told and the first revision as words
// he may have heard. Twin: the report echoes R2's own attributes
// (DEVICE_COMMUNICATION_ERROR) — it re-opened R2 before the record was the
// ledger's too, and still does: the next turn withdraws the first revision
// as told.
func TestSpeechSafety_AnErrorReportAfterARestartStillOwesTheRetractionItsResponseCarried(t *testing.T) {
	const second = "Walk with one crutch only, indoors."
	for _, tt := range []struct {
		name, errType string
		echoR1        bool
	}{
		{"R2 timed out, R1's attributes echoed to the restarted server", "ENDPOINT_TIMEOUT", true},
		{"twin: R2 not played, its own attributes echoed to the restarted server", "DEVICE_COMMUNICATION_ERROR", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			heardAndRevised(t, dir)
			args := []string{"--alexa-verify=false", "--default-patient", "ray"}
			s := startWith(t, safetyPart, harness.Options{Dir: dir, Args: args})
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
			waitBacklog(t, s.URL)
			r2 := ask(t, s, dev.Intent("CarePlanIntent", topic("walking", "weight_bearing")))
			if !strings.HasPrefix(r2.Speech(), "Stop — your walking instruction has changed. I told you: “"+revision+"”") || !strings.Contains(r2.Speech(), second) {
				t.Fatalf("R2: %q", r2.Speech())
			}
			backlogAtMost(t, s, 0) // R2's marks are committed
			s.Kill()

			restarted := startWith(t, safetyPart, harness.Options{Dir: dir, Args: args})
			end := dev.SessionEnded("ERROR")
			end["session"].(map[string]any)["attributes"] = r2.Body.SessionAttributes
			if tt.echoR1 {
				end["session"].(map[string]any)["attributes"] = r1.Body.SessionAttributes
			}
			end["request"].(map[string]any)["error"] = map[string]any{"type": tt.errType, "message": "not played"}
			ask(t, restarted, end)
			next := launchUntilStop(t, restarted, dev)
			const again = "Stop — as I may not have told you properly: your walking instruction has changed. I told you: “"
			want := again + revision + "”"
			if tt.echoR1 {
				want = again + seed[0] + "” I may also have told you: “" + revision + "”"
			}
			if !strings.HasPrefix(next, want) || !strings.Contains(next, second) {
				t.Fatalf("after the error report on the restarted server: %q\nwant it to open %q and give %q\n%s", next, want, second, restarted.Output())
			}
		})
	}
}
