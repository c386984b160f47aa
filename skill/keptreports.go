package skill

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/unsay/unsay/models"
)

// Kept error reports (P-24, finding V5). Alexa sends an error report once
// and a 200 tells it nothing went wrong, so a report whose ledger call
// (CareSource.NotPlayed) fails because the store cannot commit — busy,
// locked by another process, down — is kept here, in memory, with the
// marks it was to re-open (their response ids included, so the ledger
// still applies one response's report once: finding F14), and applied
// again, in the order the reports came, until it succeeds: on a retry
// timer (keptRetryFirst doubling to keptRetryMax) and before each turn
// of the patient. Until it is applied, a turn of the patient says nothing
// as current (the "I can't reach your care notes" answer, naming the
// facts the kept report re-opens as changed): the facts it re-opens may
// owe a retraction that the ledger does not know yet. Only a report whose
// marks were refused (models.ErrReportRefused: malformed) is dropped.
//
// With Config.KeptReportsFile set, the kept reports are also saved there
// (keptfile.go) each time one is kept or applied, and New restores them:
// a report kept when the server stops or is killed is applied after it
// starts again, and until then its patient's turns say nothing as
// current, as before the stop. Without the file, or when saving to it
// fails (logged at ERROR), a report lives in memory only.
//
// At most keptPerPatient reports per patient and keptPatients patients are
// kept; a report beyond either is lost: logged at ERROR and counted
// (LostReports). So is every report still kept at Close that the file
// does not hold.

const (
	keptPerPatient = 16
	keptPatients   = 1024
	keptRetryFirst = time.Second
	keptRetryMax   = 30 * time.Second
	// keptTurnTimeout bounds the attempt before a turn, so that the turn
	// still answers within Alexa's deadline (AlexaResponseDeadline, 8 s)
	// when the store is still locked.
	keptTurnTimeout = 2 * time.Second
)

// errReportKept is what a turn's load answers while a report of the
// patient is kept, unapplied: nothing may be said as current.
var errReportKept = errors.New("skill: an error report the ledger could not take yet is kept; nothing said as current")

// keptReport is one kept error report: the session it came on and the
// marks to re-open.
type keptReport struct {
	session string
	marks   []models.Marked
}

// keptQueue is one patient's kept reports, oldest first, and its retry
// timer (nil when none is armed) with the delay it was armed with.
type keptQueue struct {
	reports []keptReport
	timer   *time.Timer
	delay   time.Duration
}

// keptReports holds every patient's kept reports. Its queues change only
// under the patient's turn lock (Skill.lockPatient) and mu; mu alone is
// held for reading.
type keptReports struct {
	mu     sync.Mutex
	queues map[string]*keptQueue
	closed bool
	lost   int
	first  time.Duration // the first retry's delay (keptRetryFirst; tests shorten it)
	// file is Config.KeptReportsFile ("": memory only); saved reports
	// whether it holds the queues as they are (the last save succeeded).
	file  string
	saved bool
	// ahead holds, per patient, the reports saved to the file before their
	// first ledger attempt (saveAhead) and not yet done: a crash while the
	// ledger waits on a locked store loses none of them.
	ahead map[string][]*keptReport
}

// saveAhead saves the report of session sid for patient in the
// kept-reports file before anything else is tried for it (write-ahead:
// its ledger attempt may wait ledgerTimeout on a locked store, and a
// server killed meanwhile would otherwise lose it), and returns the
// function that drops it again once it is applied, refused or kept in the
// queue. Without a file it does nothing. The caller holds the patient's
// turn lock.
func (s *Skill) saveAhead(patient, sid string, ms []models.Marked) (done func()) {
	k := &s.kept
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.file == "" || k.closed {
		return func() {}
	}
	r := &keptReport{session: sid, marks: ms}
	if k.ahead == nil {
		k.ahead = map[string][]*keptReport{}
	}
	k.ahead[patient] = append(k.ahead[patient], r)
	s.saveKeptLocked()
	return func() {
		k.mu.Lock()
		defer k.mu.Unlock()
		k.ahead[patient] = slices.DeleteFunc(k.ahead[patient], func(a *keptReport) bool { return a == r })
		if len(k.ahead[patient]) == 0 {
			delete(k.ahead, patient)
		}
		if !k.closed {
			s.saveKeptLocked()
		}
	}
}

// saveKeptLocked writes the queues to the kept-reports file, if there is one,
// and logs at ERROR when that fails (the reports then live in memory
// only until a later save succeeds). The caller holds k.mu.
func (s *Skill) saveKeptLocked() {
	k := &s.kept
	if k.file == "" {
		return
	}
	b, err := encodeKept(k.queues, k.ahead)
	if err == nil {
		err = writeKeptFile(k.file, b)
	}
	k.saved = err == nil
	if err != nil {
		s.log.Error("alexa error reports file NOT SAVED: it may not hold the reports kept now, so a restart before the store commits again may lose them (saving is tried again on each retry)", "file", k.file, "err", err)
	}
}

// restoreKept reads the kept-reports file and keeps every report it holds,
// in order, each patient's retry timer armed (keptRetryFirst). Errors are
// readKeptFile's.
func (s *Skill) restoreKept() error {
	k := &s.kept
	entries, err := readKeptFile(k.file)
	if err != nil {
		return err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.saved = true
	for _, e := range entries {
		q := k.queues[e.patient]
		if q == nil {
			if k.queues == nil {
				k.queues = map[string]*keptQueue{}
			}
			q = &keptQueue{delay: keptRetryFirst}
			k.queues[e.patient] = q
			patient := e.patient
			q.timer = time.AfterFunc(q.delay, func() { s.retryKept(patient) })
		}
		q.reports = append(q.reports, e.report)
	}
	for patient, q := range k.queues {
		s.log.Warn("alexa error reports restored: kept when the server last stopped; applied once the store commits, nothing said as current meanwhile",
			"patient", patient, "reports", len(q.reports), "file", k.file)
	}
	return nil
}

// withdrawn reports whether patient has a kept report, and the facts it
// re-opens whose words he had heard (a retraction owed), for the answer
// that says nothing as current.
func (k *keptReports) withdrawn(patient string) (changed []models.URI, kept bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	q := k.queues[patient]
	if q == nil {
		return nil, false
	}
	for _, r := range q.reports {
		for _, m := range r.marks {
			if !m.Confirmed && (m.HeardBefore > 0 || m.From > 0) {
				changed = append(changed, m.URI)
			}
		}
	}
	return changed, true
}

// keepReport keeps the report of session sid for patient, whose ledger
// call failed with err (nil: not tried, an older report is kept), and arms
// the patient's retry timer. The caller holds the patient's turn lock.
func (s *Skill) keepReport(patient, sid string, ms []models.Marked, err error) {
	k := &s.kept
	k.mu.Lock()
	defer k.mu.Unlock()
	q := k.queues[patient]
	switch {
	case k.closed, q == nil && len(k.queues) >= keptPatients, q != nil && len(q.reports) >= keptPerPatient:
		k.lost++
		s.log.Error("alexa error report LOST: the ledger could not take it and no more can be kept; its retraction may never be said",
			"patient", patient, "session", sid, "marks", len(ms), "lost", k.lost, "err", err)
		return
	}
	if q == nil {
		if k.queues == nil {
			k.queues = map[string]*keptQueue{}
		}
		q = &keptQueue{}
		k.queues[patient] = q
	}
	q.reports = append(q.reports, keptReport{session: sid, marks: ms})
	s.saveKeptLocked()
	attrs := []any{"patient", patient, "session", sid, "marks", len(ms), "kept", len(q.reports)}
	if err != nil {
		attrs = append(attrs, "err", err)
	} else {
		attrs = append(attrs, "behind", "earlier reports still kept")
	}
	s.log.Warn("alexa error report kept: the ledger could not take it; applied once the store commits again, nothing said as current meanwhile", attrs...)
	if q.timer == nil {
		q.delay = k.first
		if q.delay <= 0 {
			q.delay = keptRetryFirst
		}
		q.timer = time.AfterFunc(q.delay, func() { s.retryKept(patient) })
	}
}

// applyKept applies patient's kept reports, oldest first, each in one
// CareSource.NotPlayed call within timeout, until one fails for the
// store; it reports whether any is still kept. The caller holds the
// patient's turn lock.
func (s *Skill) applyKept(ctx context.Context, patient string, timeout time.Duration) (kept bool) {
	k := &s.kept
	for {
		k.mu.Lock()
		q := k.queues[patient]
		if q == nil || len(q.reports) == 0 {
			k.mu.Unlock()
			return false
		}
		r := q.reports[0]
		k.mu.Unlock()
		lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
		n, err := s.care.NotPlayed(lctx, patient, r.marks)
		cancel()
		if err != nil && !errors.Is(err, models.ErrReportRefused) {
			return true
		}
		k.mu.Lock()
		if q = k.queues[patient]; q != nil && len(q.reports) > 0 {
			q.reports = q.reports[1:]
			if len(q.reports) == 0 {
				if q.timer != nil {
					q.timer.Stop()
				}
				delete(k.queues, patient)
			}
			s.saveKeptLocked()
		}
		k.mu.Unlock()
		if err != nil {
			s.log.Error("alexa error report dropped: the ledger refused its marks", "patient", patient, "session", r.session, "marks", len(r.marks), "err", err)
			continue
		}
		s.log.Warn("alexa error report applied: the store commits again; its facts are re-opened and their announcements owed again",
			"patient", patient, "session", r.session, "facts", n, "marks", len(r.marks))
	}
}

// retryKept is the retry timer's: it applies patient's kept reports under
// the patient's turn lock and, while any is still kept, arms the timer
// again at twice the delay (at most keptRetryMax).
func (s *Skill) retryKept(patient string) {
	defer s.lockPatient(patient)() // keepReport, which arms it too, holds it
	kept := s.applyKept(context.Background(), patient, ledgerTimeout)
	k := &s.kept
	k.mu.Lock()
	defer k.mu.Unlock()
	q := k.queues[patient]
	if q == nil || k.closed {
		return
	}
	if !kept {
		q.timer = nil
		return
	}
	// The file again, each retry: a save that failed (a folder not
	// writable yet) or a file deleted meanwhile is made good.
	s.saveKeptLocked()
	q.delay = min(2*q.delay, keptRetryMax)
	q.timer = time.AfterFunc(q.delay, func() { s.retryKept(patient) })
}

// applyKeptFirst applies patient's kept reports, if he has any, before
// his turn (under his turn lock, released again; within keptTurnTimeout).
func (s *Skill) applyKeptFirst(ctx context.Context, patient string) {
	if _, kept := s.kept.withdrawn(patient); !kept {
		return
	}
	release := s.lockPatient(patient)
	defer release()
	s.applyKept(ctx, patient, keptTurnTimeout)
}

// LostReports is how many error reports were lost: not applied, because
// no more could be kept or the skill was closed with them still kept.
func (s *Skill) LostReports() int {
	s.kept.mu.Lock()
	defer s.kept.mu.Unlock()
	return s.kept.lost
}

// Close stops the retry timers. Every report still kept stays in the
// kept-reports file when the file holds it (logged at WARN: applied after
// the next start); otherwise it is lost, logged at ERROR with its patient.
// Reports that come after are lost too. Safe to call more than once.
func (s *Skill) Close() {
	k := &s.kept
	k.mu.Lock()
	defer k.mu.Unlock()
	k.closed = true
	for patient, q := range k.queues {
		if q.timer != nil {
			q.timer.Stop()
		}
		if k.file != "" && k.saved {
			s.log.Warn("alexa error reports still kept at shutdown are saved; applied after the server starts again",
				"patient", patient, "reports", len(q.reports), "file", k.file)
			delete(k.queues, patient)
			continue
		}
		k.lost += len(q.reports)
		s.log.Error("alexa error reports LOST at shutdown: the ledger never took them; their retractions may never be said",
			"patient", patient, "reports", len(q.reports), "lost", k.lost)
		delete(k.queues, patient)
	}
}
