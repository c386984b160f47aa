package skill

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
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
	return reportedRigWith(t, first, nil, fails...)
}

// reportedRigWith is reportedRig with the skill's Config changed by mutate.
func reportedRigWith(t *testing.T, first time.Duration, mutate func(*Config), fails ...error) (*rig, []models.Marked, func() []byte) {
	t.Helper()
	wbURI := models.NewURI(models.AudienceUser, "ray", "weight_bearing")
	r := newRig(t, mutate)
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

// restart stands for the server starting again after it stopped or died:
// a new Skill, on the same care source (the ledger outlives the process)
// with the old one's Config changed by mutate, served from a new address;
// nothing runs on the old skill any more (its retry timers are an hour
// away in these tests). It returns the new skill.
func (r *rig) restart(mutate func(*Config)) *Skill {
	r.t.Helper()
	cfg := r.skill.cfg
	if mutate != nil {
		mutate(&cfg)
	}
	s, err := New(cfg, r.care, r.links)
	if err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(s.Close)
	r.skill = s
	r.srv = httptest.NewServer(s)
	r.t.Cleanup(r.srv.Close)
	return s
}

// P-24, finding V5 after a restart: a report the store could not take is
// saved in the kept-reports file as it is kept, so a server that dies
// before the store commits again applies it after it starts — before the
// restarted server's first turn, which says the retraction again — and
// then removes the file. Twin: without the file, the restarted server
// knows nothing of the report and never applies it.
func TestKeptReports_AReportKeptWhenTheServerDiesIsAppliedAfterItStartsAgain(t *testing.T) {
	file := filepath.Join(t.TempDir(), "unsay.db.kept-reports")
	withFile := func(c *Config) { c.KeptReportsFile = file }
	r, want, report := reportedRigWith(t, time.Hour, withFile, errStoreLocked, errStoreLocked)
	r.postReport(report())
	if _, err := os.Stat(file); err != nil {
		t.Fatalf("the kept report was not saved: %v", err)
	}
	if calls := r.care.notPlayedCalls(); len(calls) != 0 {
		t.Fatalf("applied while the store was locked: %v", calls)
	}
	r.care.mu.Lock()
	r.care.failNotPlayed = nil // the store commits again, after the restart
	r.care.mu.Unlock()
	s := r.restart(nil)
	after, _ := r.turn(reqOpts{Session: "sG"})
	if got := plain(after); !strings.HasPrefix(got, saidAgain) {
		t.Errorf("the restarted server's first turn: %q", got)
	}
	if calls := r.care.notPlayedCalls(); len(calls) != 1 || !slices.Equal(calls[0], want) {
		t.Fatalf("applied %v, want once %v", calls, want)
	}
	if _, err := os.Stat(file); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the file outlived its last report: %v", err)
	}
	if n := s.LostReports(); n != 0 {
		t.Errorf("lost %d", n)
	}
	if l := linesWith(r.logs.String(), "alexa error reports restored"); len(l) != 1 || !strings.Contains(l[0], "patient=ray") {
		t.Errorf("want one restored line naming ray:\n%s", r.logs.String())
	}

	t.Run("twin: without the file the restart forgets it", func(t *testing.T) {
		r, _, report := reportedRig(t, time.Hour, errStoreLocked)
		r.postReport(report())
		r.restart(nil)
		r.turn(reqOpts{Session: "sG"})
		if calls := r.care.notPlayedCalls(); len(calls) != 0 {
			t.Fatalf("applied %v with no file to restore it from", calls)
		}
	})
}

// Finding V5: a report still kept when the server stops is not lost when
// the kept-reports file holds it (logged at WARN, applied after the next
// start); twin: when saving it failed (here: its folder is gone), it is
// logged NOT SAVED when kept and counted lost at Close, as without a file.
func TestKeptReports_AReportKeptAtCloseIsLostOnlyWhenItsFileCouldNotHoldIt(t *testing.T) {
	file := filepath.Join(t.TempDir(), "kept")
	r, _, report := reportedRigWith(t, time.Hour, func(c *Config) { c.KeptReportsFile = file }, errStoreLocked)
	r.postReport(report())
	r.skill.Close()
	if n := r.skill.LostReports(); n != 0 {
		t.Errorf("lost %d with the report saved", n)
	}
	if l := linesWith(r.logs.String(), "still kept at shutdown are saved"); len(l) != 1 || !strings.Contains(l[0], "level=WARN") {
		t.Errorf("want one WARN line saying it is saved:\n%s", r.logs.String())
	}
	entries, err := readKeptFile(file)
	if err != nil || len(entries) != 1 || entries[0].patient != "ray" {
		t.Fatalf("the file holds %+v (%v), want ray's report", entries, err)
	}

	t.Run("twin: unsaved, it is lost", func(t *testing.T) {
		gone := filepath.Join(t.TempDir(), "no-such-folder", "kept")
		r, _, report := reportedRigWith(t, time.Hour, func(c *Config) { c.KeptReportsFile = gone }, errStoreLocked)
		r.postReport(report())
		if l := linesWith(r.logs.String(), "NOT SAVED"); len(l) == 0 || !strings.Contains(l[0], "level=ERROR") {
			t.Errorf("want an ERROR line NOT SAVED:\n%s", r.logs.String())
		}
		r.skill.Close()
		if n := r.skill.LostReports(); n != 1 {
			t.Errorf("lost %d, want 1", n)
		}
	})
}

// A kept-reports file that is not one (another format, a forged patient
// or URI, trailing data) stops New with an error naming the file, rather
// than starting as if no report were owed; twin: an absent file, and the
// file encodeKept writes, start.
func TestKeptReports_ANewSkillRefusesAKeptReportsFileItCannotRead(t *testing.T) {
	dir := t.TempDir()
	good := `{"version":1,"reports":[{"patient":"ray","session":"sE","marks":[{"uri":"care://ray/weight_bearing","heardBefore":2,"from":2,"version":3,"response":"r1"}]}]}`
	for name, body := range map[string]string{
		"not JSON":           `kept`,
		"another version":    `{"version":2,"reports":[]}`,
		"an unknown field":   `{"version":1,"reports":[],"extra":1}`,
		"trailing data":      good + `{}`,
		"an invalid patient": `{"version":1,"reports":[{"patient":"Ray Smith","session":"s","marks":[]}]}`,
		"a versioned URI":    `{"version":1,"reports":[{"patient":"ray","session":"s","marks":[{"uri":"care://ray/weight_bearing/v2","version":2}]}]}`,
		"another's URI":      `{"version":1,"reports":[{"patient":"ray","session":"s","marks":[{"uri":"care://bob/weight_bearing","version":2}]}]}`,
		"version zero":       `{"version":1,"reports":[{"patient":"ray","session":"s","marks":[{"uri":"care://ray/weight_bearing","version":0}]}]}`,
	} {
		t.Run(name, func(t *testing.T) {
			file := filepath.Join(dir, strings.ReplaceAll(name, " ", "-"))
			if err := os.WriteFile(file, []byte(body), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := New(Config{KeptReportsFile: file}, rayCare(), nil)
			if err == nil || !strings.Contains(err.Error(), file) {
				t.Fatalf("New = %v, want an error naming %s", err, file)
			}
		})
	}
	t.Run("twin: absent, and as written, it starts", func(t *testing.T) {
		s, err := New(Config{KeptReportsFile: filepath.Join(dir, "absent")}, rayCare(), nil)
		if err != nil {
			t.Fatalf("absent: %v", err)
		}
		s.Close()
		file := filepath.Join(dir, "good")
		if err := os.WriteFile(file, []byte(good), 0o600); err != nil {
			t.Fatal(err)
		}
		s, err = New(Config{KeptReportsFile: file}, rayCare(), nil)
		if err != nil {
			t.Fatalf("as written: %v", err)
		}
		defer s.Close()
		if changed, kept := s.kept.withdrawn("ray"); !kept || len(changed) != 1 {
			t.Errorf("restored %v (kept %v), want the walking fact", changed, kept)
		}
	})
}

// Breakit13 #1: a report is in the kept-reports file before its first
// ledger attempt, which may wait ledgerTimeout on a locked store — a
// server killed during that wait applies it after it starts again. Twin:
// once its attempt succeeds the file is removed (nothing left to apply).
func TestKeptReports_AReportIsSavedBeforeItsFirstLedgerAttemptCanWait(t *testing.T) {
	file := filepath.Join(t.TempDir(), "unsay.db.kept-reports")
	withFile := func(c *Config) { c.KeptReportsFile = file }
	r, want, report := reportedRigWith(t, time.Hour, withFile)
	entered, unblock := make(chan struct{}), make(chan struct{})
	release := sync.OnceFunc(func() { close(unblock) })
	var first atomic.Bool
	r.care.mu.Lock()
	r.care.onNotPlayed = func() { // the old server's first attempt waits on the store
		if first.CompareAndSwap(false, true) {
			close(entered)
			<-unblock
		}
	}
	r.care.mu.Unlock()
	posted := make(chan struct{})
	oldSrv := httptest.NewServer(r.skill) // not the rig's: its turns wait for none in flight
	defer oldSrv.Close()
	defer release() // before the servers close, on every path
	old, body := oldSrv.URL, report()
	sig := r.pki.sign(body)
	go func() {
		defer close(posted)
		req, _ := http.NewRequest(http.MethodPost, old, bytes.NewReader(body))
		req.Header.Set(HeaderSignature256, sig)
		req.Header.Set(HeaderCertChainURL, testCertURL)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	<-entered
	entries, err := readKeptFile(file)
	if err != nil || len(entries) != 1 || !slices.Equal(entries[0].report.marks, want) {
		t.Fatalf("while the first attempt waits the file holds %+v (%v), want the report", entries, err)
	}
	r.restart(nil) // the server dies here; the new one restores the report
	after, _ := r.turn(reqOpts{Session: "sG"})
	if got := plain(after); !strings.HasPrefix(got, saidAgain) {
		t.Errorf("the restarted server's first turn: %q", got)
	}
	release()
	<-posted
	if calls := r.care.notPlayedCalls(); len(calls) == 0 || !slices.Equal(calls[0], want) {
		t.Errorf("applied %v, want %v", calls, want)
	}

	t.Run("twin: applied at once, the file is gone", func(t *testing.T) {
		file := filepath.Join(t.TempDir(), "kept")
		r, _, report := reportedRigWith(t, time.Hour, func(c *Config) { c.KeptReportsFile = file })
		r.postReport(report())
		if len(r.care.notPlayedCalls()) != 1 {
			t.Fatalf("not applied: %v", r.care.notPlayedCalls())
		}
		if _, err := os.Stat(file); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the file outlived the applied report: %v", err)
		}
	})
}

// Breakit13 #3: a save that failed is tried again on each retry, so a
// report kept while its folder was missing is in the file once the folder
// is back, before the store commits again. (Twin: the report is lost when
// the file never holds it — TestKeptReports_AReportKeptAtCloseIsLostOnlyWhenItsFileCouldNotHoldIt.)
func TestKeptReports_ASaveThatFailedIsMadeGoodOnARetry(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "later")
	file := filepath.Join(dir, "kept")
	fails := make([]error, 1000)
	for i := range fails {
		fails[i] = errStoreLocked
	}
	r, _, report := reportedRigWith(t, 5*time.Millisecond, func(c *Config) { c.KeptReportsFile = file }, fails...)
	r.postReport(report())
	if l := linesWith(r.logs.String(), "NOT SAVED"); len(l) == 0 {
		t.Fatalf("no NOT SAVED line:\n%s", r.logs.String())
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if entries, err := readKeptFile(file); err == nil && len(entries) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the file never held the kept report")
		}
		time.Sleep(5 * time.Millisecond)
	}
	r.skill.Close()
	if n := r.skill.LostReports(); n != 0 {
		t.Errorf("lost %d once saved", n)
	}
}
