package skill

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/unsay/unsay/models"
)

// errStoreLocked is the heard ledger's answer while another process holds
// the database's write lock (finding V5's log line).
var errStoreLocked = errors.New("store: heard ledger: begin: context deadline exceeded")

// reportedRig is a rig whose launch on session sE spoke the walking
// retraction (v2 → v3, now marked heard) and whose care source fails the
// next NotPlayed calls with fails; it returns the rig, the marks the
// retraction's error report must re-open and a maker of that report (a
// new request id each), not yet posted.
func reportedRig(t *testing.T, first time.Duration, fails ...error) (*rig, []models.Marked, func() []byte) {
	t.Helper()
	wbURI := models.NewURI(models.AudienceUser, "ray", "weight_bearing")
	r := newRig(t, nil)
	r.skill.kept.first = first
	t.Cleanup(r.skill.Close)
	if err := r.care.MarkHeard(context.Background(), "ray", wbURI, 2, models.Hearing{}); err != nil {
		t.Fatal(err)
	}
	r.care.setPending("ray", retractionWB())
	r.care.facts["ray"][0] = retractionWB().Current
	out, _ := r.turn(reqOpts{Session: "sE"})
	if !strings.HasPrefix(plain(out), "Stop — your walking instruction has changed.") {
		t.Fatalf("launch: %q", plain(out))
	}
	attrs := attributesOf(t, out)
	id, _ := attrs[AttrResponse].(string)
	want := []models.Marked{
		{URI: wbURI, HeardBefore: 2, From: 2, Version: 3, Response: id},
		{URI: models.NewURI(models.AudienceUser, "ray", "anticoagulant"), Version: 1, Response: id},
	}
	r.care.mu.Lock()
	r.care.failNotPlayed = fails
	r.care.mu.Unlock()
	return r, want, func() []byte { return sessionEnded(t, "sE", ReasonError, attrs) }
}

func (r *rig) postReport(report []byte) {
	r.t.Helper()
	if code, b := r.post(report, testCertURL, ""); code != 200 {
		r.t.Fatalf("error report: %d %s", code, b)
	}
}

const saidAgain = "Stop — as I may not have told you properly: your walking instruction has changed. I told you: “" + wbV2Text + "”"

// P-24, finding V5: an error report the store cannot commit (locked,
// busy, down) is kept and applied, with its marks and response id, once
// the store commits again — here before the patient's next turn — and the
// turn between says nothing as current: not the new words as a plain
// fact, only that the walking instruction changed and the notes cannot be
// reached. Twin: a report the ledger takes at once is applied once, and
// never again.
func TestKeptReports_AReportTheStoreCouldNotTakeIsAppliedOnceItCommitsAndNothingIsSaidAsCurrentMeanwhile(t *testing.T) {
	r, want, report := reportedRig(t, time.Hour, errStoreLocked, errStoreLocked)
	r.postReport(report())
	if calls := r.care.notPlayedCalls(); len(calls) != 0 {
		t.Fatalf("applied while the store was locked: %v", calls)
	}
	between, _ := r.turn(reqOpts{Session: "sF"})
	s := plain(between)
	if strings.Contains(s, wbV3Text) || !strings.HasPrefix(s, textUnreachable+" Your walking instruction has changed since I last told you.") {
		t.Errorf("the turn while the report was kept: %q", s)
	}
	after, _ := r.turn(reqOpts{Session: "sG"})
	if s := plain(after); !strings.HasPrefix(s, saidAgain) {
		t.Errorf("once the store commits: %q", s)
	}
	if calls := r.care.notPlayedCalls(); len(calls) != 1 || !slices.Equal(calls[0], want) {
		t.Fatalf("applied %v, want once %v", calls, want)
	}
	r.turn(reqOpts{Session: "sH"})
	if calls := r.care.notPlayedCalls(); len(calls) != 1 {
		t.Errorf("applied again: %v", calls)
	}
	logs := r.logs.String()
	if k, a := linesWith(logs, "alexa error report kept"), linesWith(logs, "alexa error report applied"); len(k) != 1 || len(a) != 1 || !strings.Contains(a[0], "patient=ray") {
		t.Errorf("want one kept and one applied line naming ray:\n%s", logs)
	}
	if n := r.skill.LostReports(); n != 0 {
		t.Errorf("lost %d", n)
	}

	t.Run("twin: applied at once, once", func(t *testing.T) {
		r, want, report := reportedRig(t, time.Hour)
		r.postReport(report())
		if calls := r.care.notPlayedCalls(); len(calls) != 1 || !slices.Equal(calls[0], want) {
			t.Fatalf("applied %v, want %v", calls, want)
		}
		after, _ := r.turn(reqOpts{Session: "sF"})
		if s := plain(after); !strings.HasPrefix(s, saidAgain) {
			t.Errorf("next turn: %q", s)
		}
		r.turn(reqOpts{Session: "sG"})
		if r.care.notPlayedTries != 1 || len(linesWith(r.logs.String(), "alexa error report kept")) != 0 {
			t.Errorf("tried %d times, logs:\n%s", r.care.notPlayedTries, r.logs.String())
		}
	})
}

// P-24, finding V5: a kept report is applied by its retry timer too, with
// no turn to prompt it (the next turn then says the retraction at once).
func TestKeptReports_AKeptReportIsAppliedByItsRetryTimerWithoutATurn(t *testing.T) {
	r, want, report := reportedRig(t, time.Millisecond, errStoreLocked, errStoreLocked, errStoreLocked)
	r.postReport(report())
	deadline := time.Now().Add(10 * time.Second)
	for len(r.care.notPlayedCalls()) == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if calls := r.care.notPlayedCalls(); len(calls) != 1 || !slices.Equal(calls[0], want) {
		t.Fatalf("applied %v, want %v", calls, want)
	}
	if _, kept := r.skill.kept.withdrawn("ray"); kept {
		t.Error("still kept once applied")
	}
	after, _ := r.turn(reqOpts{Session: "sF"})
	if s := plain(after); !strings.HasPrefix(s, saidAgain) {
		t.Errorf("next turn: %q", s)
	}
}

// Finding V5: only the store's failures are kept. A report whose marks
// the ledger refused (models.ErrReportRefused: trying again changes
// nothing) is not kept and blocks no turn; twin: the store's failure is
// kept (the first test).
func TestKeptReports_AReportWhoseMarksWereRefusedIsNotKept(t *testing.T) {
	r, _, report := reportedRig(t, time.Millisecond, fmt.Errorf("%w: speech: invalid argument", models.ErrReportRefused))
	r.postReport(report())
	after, _ := r.turn(reqOpts{Session: "sF"})
	if s := plain(after); strings.HasPrefix(s, textUnreachable) {
		t.Errorf("a refused report blocked the turn: %q", s)
	}
	if _, kept := r.skill.kept.withdrawn("ray"); kept || r.care.notPlayedTries != 1 {
		t.Errorf("kept %v, tried %d", kept, r.care.notPlayedTries)
	}
	if len(linesWith(r.logs.String(), "the ledger refused it")) != 1 {
		t.Errorf("logs:\n%s", r.logs.String())
	}
}

// Finding V5: the queue is bounded — a report beyond keptPerPatient, and
// every report still kept at Close, is counted lost and logged at ERROR;
// twin: up to the bound none is lost.
func TestKeptReports_ReportsBeyondTheBoundOrKeptAtCloseAreCountedLost(t *testing.T) {
	fails := make([]error, 10*keptPerPatient)
	for i := range fails {
		fails[i] = errStoreLocked
	}
	r, _, report := reportedRig(t, time.Hour, fails...)
	for range keptPerPatient {
		r.postReport(report())
	}
	if n := r.skill.LostReports(); n != 0 {
		t.Fatalf("lost %d within the bound", n)
	}
	r.postReport(report())
	if n := r.skill.LostReports(); n != 1 {
		t.Fatalf("lost %d beyond the bound, want 1", n)
	}
	r.skill.Close()
	if n := r.skill.LostReports(); n != 1+keptPerPatient {
		t.Fatalf("lost %d after Close, want %d", n, 1+keptPerPatient)
	}
	if l := linesWith(r.logs.String(), "LOST"); len(l) != 2 || !strings.Contains(l[0], "level=ERROR") {
		t.Errorf("lost lines: %q", l)
	}
}
