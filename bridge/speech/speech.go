package speech

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/unsay/unsay/models"
)

// Facts returns the patient's current speakable facts (care:// only),
// sorted by URI, as last read. Values carry no STALE header; a fact served
// stale has ServedStale set, so Version.IsStale is true at any time. It answers from memory once the patient's
// facts have been listed; before that (or for a patient the principal does
// not follow) it lists and reads over the current session, returning
// ErrNotConnected when there is none. An invalid patient id is
// ErrInvalidArgument. What is spoken comes from Turn, which confirms.
func (p *Principal) Facts(ctx context.Context, patient string) ([]models.Version, error) {
	if !models.ValidID(patient) {
		return nil, fmt.Errorf("%w: patient id", ErrInvalidArgument)
	}
	var out []models.Version
	var up upstream
	var cached bool
	p.do(func(st *state) {
		if cached = st.synced[patient] && st.patients[patient]; cached {
			out = st.factsOf(patient)
		}
		up = st.up
	})
	if cached {
		return out, nil
	}
	if up == nil {
		return nil, fmt.Errorf("%w: facts of %s not yet read", ErrNotConnected, patient)
	}
	return p.listFacts(ctx, up, patient, p.cfg.RequestTimeout)
}

// listFacts lists and reads patient's care:// facts over up, each request
// within timeout.
func (p *Principal) listFacts(ctx context.Context, up upstream, patient string, timeout time.Duration) ([]models.Version, error) {
	lctx, cancel := context.WithTimeout(ctx, timeout)
	listed, err := up.List(lctx, patient)
	cancel()
	if err != nil {
		return nil, err
	}
	var out []models.Version
	for _, r := range listed {
		u, ok := speakableFact(r)
		if !ok || u.Patient != patient {
			continue
		}
		v, err := p.read(ctx, up, u, true)
		if err != nil {
			if isGone(err) {
				continue
			}
			return nil, err
		}
		out = append(out, v)
	}
	sortByURI(out)
	return out, nil
}

// Pending returns the announcements Ray has yet to hear, as last read —
// retractions of what he heard first, then first hearings, each oldest
// first (P-17, P-19): for each fact at most one, from the version he last
// heard (Heard; nil when he never heard it: a first hearing) to the latest
// (Current). Both versions' words are read back over MCP (or from memory
// of an earlier read) — the queue holds none. An announcement whose words
// did not change (models.ErrUnchanged) is dropped, never returned. It
// returns ErrNotConnected while no session is up (a revision may be waiting
// on the server: saying "nothing has changed" then could be false), after
// waiting up to SettleTimeout for notifications already received to be
// read; ErrInvalidArgument for an invalid patient id. On error nothing is
// returned and nothing is dropped or marked. What is spoken comes from
// Turn, which confirms every version with the server first.
func (p *Principal) Pending(ctx context.Context, patient string) ([]models.Announcement, error) {
	if !models.ValidID(patient) {
		return nil, fmt.Errorf("%w: patient id", ErrInvalidArgument)
	}
	if err := p.settle(ctx); err != nil {
		return nil, err
	}
	rows, err := p.ledger.Pending(ctx, patient)
	if err != nil {
		return nil, err
	}
	return p.announcements(ctx, nil, patient, rows, func(u models.URI, n int) (models.Version, error) {
		return p.versionAt(ctx, nil, u, n)
	})
}

// announcements turns ledger rows into announcements: current(uri, to)
// gives each one's latest version, versionAt the one he heard. Rows whose
// words did not change are dropped from the ledger; rows that cannot be
// read are left pending and skipped. Retractions come first.
func (p *Principal) announcements(ctx context.Context, up upstream, patient string, rows []row, current func(models.URI, int) (models.Version, error)) ([]models.Announcement, error) {
	now := p.cfg.Clock()
	var out []models.Announcement
	var unchanged []int64
	for _, r := range rows {
		u, err := models.ParseURI(r.URI)
		if err != nil || u.Audience() != models.AudienceUser {
			p.log.Error("speech: ledger holds an unspeakable URI", "id", r.ID)
			continue
		}
		cur, err := current(u, r.To)
		if err != nil {
			if isGone(err) || errors.Is(err, errNotCurrent) {
				p.log.Warn("speech: pending version not spoken", "uri", r.URI, "version", r.To, "err", err)
				continue
			}
			return nil, err
		}
		a := models.Announcement{ID: r.ID, Patient: patient, Current: cur, Again: r.Offered}
		if r.From > 0 {
			hv, err := p.versionAt(ctx, up, u, r.From)
			if err != nil {
				if isGone(err) {
					p.log.Warn("speech: heard version unreadable", "uri", r.URI, "version", r.From, "err", err)
					continue
				}
				return nil, err
			}
			a.Heard = &hv
		}
		if _, err := a.Render(now); err != nil {
			if errors.Is(err, models.ErrUnchanged) {
				unchanged = append(unchanged, r.ID)
			} else {
				p.log.Error("speech: announcement cannot be rendered", "uri", r.URI, "err", err)
			}
			continue
		}
		out = append(out, a)
	}
	for _, id := range unchanged {
		if err := p.ledger.Drop(ctx, id); err != nil {
			return nil, err
		}
	}
	if len(unchanged) > 0 {
		p.ledgerChanged(ctx)
	}
	// Stop first: every withdrawal of something he heard comes before news
	// he never heard, each group oldest first (P-17, P-19).
	sort.SliceStable(out, func(a, b int) bool { return out[a].IsRetraction() && !out[b].IsRetraction() })
	return out, nil
}

// errNotCurrent: a pending announcement's latest version is not the one
// confirmed current at speak time; it is not spoken this turn.
var errNotCurrent = errors.New("speech: not the version confirmed current")

// MarkHeard records that Ray heard the announcement of the fact uri (an
// unversioned care:// URI of patient) at version — a retraction or a first
// hearing the skill delivered. version is what he last heard, even when a
// newer version was written meanwhile or the ledger held a newer one
// (P-19): an offer up to version is confirmed, a pending announcement that
// reaches no further is cleared, one that reaches further now withdraws
// version, and a newer version already read is reconciled against it at
// once (a revert written during his turn withdraws what the turn told
// him). how says when, on which kind of device and how it came to be
// said; the delivery log keeps it for the clinician's timeline (how.At
// zero: the principal's clock). The skill calls it only for what it
// actually delivered, after the response carrying it was written (P-24).
// It is durable when it returns nil. A malformed patient, URI or version
// (< 1) is ErrInvalidArgument.
func (p *Principal) MarkHeard(ctx context.Context, patient string, uri models.URI, version int, how models.Hearing) error {
	if err := checkFact(patient, uri, version); err != nil {
		return err
	}
	if err := p.ledger.MarkHeard(ctx, patient, uri.String(), version, how); err != nil {
		return err
	}
	var cur models.Version
	var newer bool
	p.do(func(st *state) {
		for k, v := range st.versions { // older versions are read back over MCP if ever needed
			if v.FactURI() == uri && v.N < version {
				delete(st.versions, k)
			}
		}
		cur, newer = st.current[uri.String()]
		newer = newer && cur.N > version
	})
	if newer {
		if err := p.reconcile(ctx, nil, cur); err != nil {
			// Durable already; the next turn reconciles before it speaks.
			p.log.Warn("speech: heard, but the newer version not reconciled yet", "uri", uri.String(), "version", version, "latest", cur.N, "err", err)
		}
	}
	p.ledgerChanged(ctx)
	return nil
}

// MarkTold records that version of the fact uri was spoken to Ray as a
// plain fact — an answer, not an announcement. It never settles a pending
// retraction: he heard the new words, not that they withdraw the ones he
// was told before, so the retraction stays owed (P-19, P-24). Otherwise the
// heard version moves forward to version (never back) and a pending first
// hearing it covers is cleared. The skill calls it after the response
// carrying the fact was written; how is logged as for MarkHeard. Errors
// as MarkHeard.
func (p *Principal) MarkTold(ctx context.Context, patient string, uri models.URI, version int, how models.Hearing) error {
	if err := checkFact(patient, uri, version); err != nil {
		return err
	}
	changed, err := p.ledger.markTold(ctx, patient, uri.String(), version, how)
	if err != nil {
		return err
	}
	if changed { // a told answer he had heard already changes nothing to wake for
		p.ledgerChanged(ctx)
	}
	return nil
}

// NotPlayed records that Alexa did not play responses that had marked ms
// (a SessionEndedRequest with reason ERROR: INVALID_RESPONSE,
// DEVICE_COMMUNICATION_ERROR, INTERNAL_SERVICE_ERROR, ENDPOINT_TIMEOUT):
// in one transaction, each fact whose heard version is still the one
// marked goes back to the version he heard before, the version marked is
// offered, and the announcement is owed again — spoken next turn saying
// so ("as I may not have told you properly", P-24). A later confirmed
// delivery that moved heard is never undone. One that told the heard
// version again plainly (MarkTold) never delivered a retraction: a
// retraction's report rolls back all the same, and the next turn says it
// with the words he heard before quoted as told (finding U2); only a
// first hearing's rollback is held back by it (B1: the telling said all
// that one said) until that response is reported not played too — an
// entry with Confirmed (HeardBefore and From 0) — and then it is done;
// either order of the two reports leaves the announcement owed. Calling
// it twice changes nothing more. Entries with a
// Response already reported (the same response's report delivered again)
// change nothing: the ledger remembers each response id whose report it
// applied for a day (finding F14). A malformed patient or entry (not an
// unversioned care:// fact of patient, Version < 1, HeardBefore or From
// negative or not below Version, not 0 with Confirmed, or a Response not
// "" nor of models.ValidID's form) is ErrInvalidArgument and nothing is
// changed; that error wraps models.ErrReportRefused too, so the skill
// drops the report rather than keeping it for a retry as it keeps one the
// store could not commit (finding V5). It reports how many facts it
// re-opened; the caller (the skill) logs the report, once (T14).
func (p *Principal) NotPlayed(ctx context.Context, patient string, ms []models.Marked) (reopened int, err error) {
	defer func() {
		if errors.Is(err, ErrInvalidArgument) {
			err = fmt.Errorf("%w: %w", models.ErrReportRefused, err) // never worth a retry (finding V5)
		}
	}()
	if !models.ValidID(patient) {
		return 0, fmt.Errorf("%w: patient id", ErrInvalidArgument)
	}
	rows := make([]marked, 0, len(ms))
	for _, m := range ms {
		if err := checkFact(patient, m.URI, m.Version); err != nil {
			return 0, err
		}
		if m.HeardBefore < 0 || m.From < 0 || m.HeardBefore >= m.Version || m.From >= m.Version ||
			m.Confirmed && (m.HeardBefore != 0 || m.From != 0) {
			return 0, fmt.Errorf("%w: %s: heard before v%d, from v%d, marked v%d", ErrInvalidArgument, m.URI, m.HeardBefore, m.From, m.Version)
		}
		if m.Response != "" && !models.ValidID(m.Response) {
			return 0, fmt.Errorf("%w: %s: response id %q", ErrInvalidArgument, m.URI, m.Response)
		}
		rows = append(rows, marked{URI: m.URI.String(), HeardBefore: m.HeardBefore, From: m.From, Version: m.Version, Confirmed: m.Confirmed, Response: m.Response})
	}
	if len(rows) == 0 {
		return 0, nil
	}
	n, err := p.ledger.NotPlayed(ctx, patient, rows)
	if err != nil {
		return 0, err
	}
	p.ledgerChanged(ctx)
	return n, nil
}

// checkFact validates a fact version of patient named by the skill.
func checkFact(patient string, uri models.URI, version int) error {
	switch {
	case !models.ValidID(patient):
		return fmt.Errorf("%w: patient id", ErrInvalidArgument)
	case uri.Audience() != models.AudienceUser:
		return fmt.Errorf("%w: %s is not a care:// fact", ErrInvalidArgument, uri)
	case uri.Patient != patient:
		return fmt.Errorf("%w: %s is not a fact of patient %s", ErrInvalidArgument, uri, patient)
	case uri.Version != 0:
		return fmt.Errorf("%w: %s: pass the unversioned fact URI", ErrInvalidArgument, uri)
	case version < 1:
		return fmt.Errorf("%w: version %d < 1", ErrInvalidArgument, version)
	}
	if _, err := models.ParseURI(uri.String()); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidArgument, err)
	}
	return nil
}

// WaitPending blocks until an announcement reaching at least version of
// uri (unversioned care:// URI) is queued for patient, then returns nil —
// the point where the speech principal holds what it will render. It
// returns ErrNotAnnounced when the ledger settles that version without an
// announcement (Ray heard it or newer, or the words did not change), and
// ctx.Err() when ctx ends first.
func (p *Principal) WaitPending(ctx context.Context, patient string, uri models.URI, version int) error {
	if !models.ValidID(patient) || uri.Patient != patient || uri.Version != 0 || uri.Audience() != models.AudienceUser || version < 1 {
		return fmt.Errorf("%w: WaitPending(%q, %s, %d)", ErrInvalidArgument, patient, uri, version)
	}
	for {
		var ch chan struct{}
		p.do(func(st *state) { ch = st.changed })
		heard, pendingTo, err := p.ledger.Status(ctx, patient, uri.String())
		if err != nil {
			return err
		}
		if pendingTo >= version {
			return nil
		}
		if heard >= version {
			return fmt.Errorf("%w: %s v%d (heard v%d)", ErrNotAnnounced, uri, version, heard)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ch:
		}
	}
}

// AddPatientTimeout bounds how long AddPatient waits for the new session's sync.
const AddPatientTimeout = 5 * time.Second

// AddPatient follows a newly linked patient: with TokenSource set, the
// session ends and the next one is opened with a token for the enlarged
// patient set (the server binds a session to subject and patients); then
// the principal lists and subscribes to the patient's care:// facts and
// reads them. When a session is up it returns once that is done (or with
// its error; at most AddPatientTimeout under a TokenSource); with no
// session it returns nil at once and the next session subscribes. An
// invalid id is ErrInvalidArgument.
func (p *Principal) AddPatient(ctx context.Context, patient string) error {
	if !models.ValidID(patient) {
		return fmt.Errorf("%w: patient id", ErrInvalidArgument)
	}
	var up upstream
	var synced chan struct{}
	var listed chan error
	known := false
	p.do(func(st *state) {
		if known = st.patients[patient]; known {
			return
		}
		st.patients[patient] = true
		up = st.up
		if p.cfg.TokenSource != nil {
			st.tokenGen++
			synced = make(chan struct{})
			st.syncWaiters = append(st.syncWaiters, syncWaiter{patient: patient, ch: synced})
			return
		}
		if up != nil {
			listed = make(chan error, 1)
			st.work.relist = true
			st.work.listWaiters = append(st.work.listWaiters, listed)
		}
	})
	p.compete(patient)
	switch {
	case known:
		return nil
	case synced != nil:
		if up != nil {
			_ = up.Close() // the next session's token is bound to him too
		}
		wctx, cancel := context.WithTimeout(ctx, AddPatientTimeout)
		defer cancel()
		select {
		case <-synced:
			return nil
		case <-wctx.Done():
			return fmt.Errorf("speech: following %s: %w", patient, wctx.Err())
		}
	case listed != nil:
		select {
		case err := <-listed:
			return err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// SettleTimeout bounds how long Pending waits for notifications already
// received to be read and reconciled.
const SettleTimeout = 2 * time.Second

// settle makes Pending answer only from an up-to-date ledger: it returns
// ErrNotConnected while no MCP session is up and synced, and waits, up to
// SettleTimeout, for notifications already received to be processed.
func (p *Principal) settle(ctx context.Context) error {
	timeout := time.NewTimer(SettleTimeout)
	defer timeout.Stop()
	for {
		var connected, idle bool
		var ch chan struct{}
		p.do(func(st *state) {
			connected = st.connected
			idle = !st.busy && st.work.empty()
			if connected && !idle {
				ch = make(chan struct{})
				st.idleWaiters = append(st.idleWaiters, ch)
			}
		})
		if !connected {
			return fmt.Errorf("%w: the care notes are being re-read", ErrNotConnected)
		}
		if idle {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-timeout.C:
			return fmt.Errorf("%w: still catching up", ErrNotConnected)
		case <-ch:
		}
	}
}
