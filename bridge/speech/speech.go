package speech

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/unsay/unsay/models"
)

// Facts returns the patient's current speakable facts (care:// only),
// sorted by URI. Values carry no STALE header; a fact served stale has a
// StaleAfter at or before the time it was read, so Version.IsStale(now)
// is true. It answers from the memory filled by reads over MCP once the
// patient's facts have been listed; before that (or for a patient the
// principal does not follow) it lists and reads over the current session,
// returning ErrNotConnected when there is none. An invalid patient id is
// ErrInvalidArgument.
func (p *Principal) Facts(ctx context.Context, patient string) ([]models.Version, error) {
	if !models.ValidID(patient) {
		return nil, fmt.Errorf("%w: patient id", ErrInvalidArgument)
	}
	p.mu.Lock()
	if p.synced[patient] && p.patients[patient] {
		var out []models.Version
		for _, v := range p.current {
			if v.Patient == patient {
				out = append(out, v)
			}
		}
		p.mu.Unlock()
		sortByURI(out)
		return out, nil
	}
	cs := p.cs
	p.mu.Unlock()
	if cs == nil {
		return nil, fmt.Errorf("%w: facts of %s not yet read", ErrNotConnected, patient)
	}
	listed, err := p.listAll(ctx, cs)
	if err != nil {
		return nil, err
	}
	var out []models.Version
	for _, s := range listed {
		u, err := models.ParseURI(s)
		if err != nil || u.Audience() != models.AudienceUser || u.Version != 0 || u.Patient != patient {
			continue
		}
		v, err := p.read(ctx, cs, u)
		if err != nil {
			if isResourceError(err) {
				continue
			}
			return nil, err
		}
		out = append(out, v)
	}
	sortByURI(out)
	return out, nil
}

func sortByURI(vs []models.Version) {
	sort.Slice(vs, func(i, j int) bool { return vs[i].FactURI().String() < vs[j].FactURI().String() })
}

// Pending returns the announcements Ray has yet to hear — retractions of
// what he heard first, then first hearings, each oldest first (P-17, P-19):
// for each fact at most one, from the version he last heard
// (Heard; nil when he never heard it: a first hearing) to the latest
// (Current). Both versions' words are read back over MCP (or from memory
// of an earlier read) — the queue holds none. An announcement whose words
// did not change (models.ErrUnchanged) is dropped, never returned. It
// returns ErrNotConnected when a version must be read and no session is up,
// and ErrInvalidArgument for an invalid patient id; on error nothing is
// returned and nothing is dropped or marked.
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
	now := p.cfg.Clock()
	var out []models.Announcement
	var unchanged []int64
	for _, r := range rows {
		u, err := models.ParseURI(r.URI)
		if err != nil || u.Audience() != models.AudienceUser {
			p.log.Error("speech: ledger holds an unspeakable URI", "id", r.ID)
			continue
		}
		cur, err := p.versionAt(ctx, nil, u, r.To)
		if err != nil {
			if isResourceError(err) {
				p.log.Warn("speech: pending version unreadable", "uri", r.URI, "version", r.To, "err", err)
				continue
			}
			return nil, err
		}
		a := models.Announcement{ID: r.ID, Patient: patient, Current: cur}
		if r.From > 0 {
			hv, err := p.versionAt(ctx, nil, u, r.From)
			if err != nil {
				if isResourceError(err) {
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

// MarkHeard records that Ray heard version of the fact uri (an unversioned
// care:// URI of patient): the heard ledger moves forward to version
// (never back), pending announcements that reach no further are cleared,
// and one that reaches further now starts from version. The skill calls it
// only for what it actually put in a response — a retraction, a first
// hearing or a fact told at Launch. It is durable when it returns nil.
// A malformed patient, URI or version (< 1) is ErrInvalidArgument.
func (p *Principal) MarkHeard(ctx context.Context, patient string, uri models.URI, version int) error {
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
	if err := p.ledger.MarkHeard(ctx, patient, uri.String(), version); err != nil {
		return err
	}
	p.mu.Lock()
	for k, v := range p.versions {
		if v.FactURI() == uri && v.N < version {
			delete(p.versions, k)
		}
	}
	p.mu.Unlock()
	p.ledgerChanged(ctx)
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
		p.mu.Lock()
		ch := p.changed
		p.mu.Unlock()
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

// AddPatient follows a newly linked patient: with TokenSource set, a new
// token is fetched for the enlarged patient set; then the principal
// re-lists and subscribes to the patient's care:// facts and reads them.
// When a session is up it returns once that is done (or with its error);
// with no session it returns nil at once and the next session subscribes.
// An invalid id is ErrInvalidArgument.
func (p *Principal) AddPatient(ctx context.Context, patient string) error {
	if !models.ValidID(patient) {
		return fmt.Errorf("%w: patient id", ErrInvalidArgument)
	}
	p.mu.Lock()
	if p.patients[patient] {
		p.mu.Unlock()
		return nil
	}
	p.patients[patient] = true
	if p.cfg.Leased {
		p.passive[patient] = true
	}
	if p.cfg.TokenSource != nil {
		p.tokenGen++
	}
	cs := p.cs
	p.mu.Unlock()
	if p.cfg.TokenSource != nil {
		// A token bound to a new patient set is a new MCP session identity
		// (the server binds a session to subject and patients): end this
		// session with the token it was opened with, then reconnect with a
		// fresh one, and wait for the new session's sync.
		if cs != nil {
			_ = cs.Close()
		}
		if err := p.refreshToken(ctx); err != nil {
			return err
		}
		return p.waitSynced(ctx, patient)
	}
	if cs == nil {
		return nil
	}
	done := make(chan error, 1)
	p.mu.Lock()
	p.listWaiters = append(p.listWaiters, done)
	p.mu.Unlock()
	p.poke()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// AddPatientTimeout bounds how long AddPatient waits for the new session's sync.
const AddPatientTimeout = 5 * time.Second

// waitSynced waits until a session is up whose sync covered patient.
func (p *Principal) waitSynced(ctx context.Context, patient string) error {
	ctx, cancel := context.WithTimeout(ctx, AddPatientTimeout)
	defer cancel()
	for {
		p.mu.Lock()
		ok := p.connected && p.synced[patient]
		changed := p.changed
		p.mu.Unlock()
		if ok {
			return nil
		}
		t := time.NewTimer(10 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("speech: following %s: %w", patient, ctx.Err())
		case <-changed:
			t.Stop()
		case <-t.C:
		}
	}
}

// State is the speech principal's health, as served in /readyz.
type State struct {
	// Connected: an MCP session is up and its initial sync (list, subscribe,
	// read) completed.
	Connected bool `json:"connected"`
	// LastEventAt is when the last notification arrived or the last sync
	// completed; zero before the first.
	LastEventAt time.Time `json:"lastEventAt"`
	// Backlog counts announcements queued for every patient, not yet heard.
	Backlog int `json:"backlog"`
	// Patients are the followed patient ids, sorted.
	Patients []string `json:"patients"`
}

// State returns a snapshot of the principal's health.
func (p *Principal) State() State {
	patients := p.patientList()
	p.mu.Lock()
	defer p.mu.Unlock()
	return State{Connected: p.connected, LastEventAt: p.lastEventAt, Backlog: p.backlog, Patients: patients}
}

// Collectors returns the principal's Prometheus gauges, for the caller to
// register: unsay_speech_connected (1 or 0), unsay_speech_backlog
// (announcements queued) and unsay_speech_last_event_timestamp_seconds
// (Unix seconds of LastEventAt; 0 before the first event).
func (p *Principal) Collectors() []prometheus.Collector {
	return []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "unsay_speech_connected",
			Help: "1 when the speech principal's MCP session is up and synced, else 0.",
		}, func() float64 {
			if p.State().Connected {
				return 1
			}
			return 0
		}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "unsay_speech_backlog",
			Help: "Announcements queued for patients and not yet heard.",
		}, func() float64 { return float64(p.State().Backlog) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "unsay_speech_last_event_timestamp_seconds",
			Help: "Unix time of the last MCP notification or completed sync, in seconds.",
		}, func() float64 {
			t := p.State().LastEventAt
			if t.IsZero() {
				return 0
			}
			return float64(t.UnixNano()) / 1e9
		}),
	}
}

// SettleTimeout bounds how long Pending waits for notifications already
// received to be read and reconciled.
const SettleTimeout = 2 * time.Second

// settle makes Pending answer only from an up-to-date ledger: it returns
// ErrNotConnected while no MCP session is up (a revision may be waiting
// on the server: saying "nothing has changed" then could be false), and
// waits, up to SettleTimeout, for notifications already received to be
// processed.
func (p *Principal) settle(ctx context.Context) error {
	deadline := time.Now().Add(SettleTimeout)
	for {
		p.mu.Lock()
		connected := p.connected
		busy := len(p.workURIs) > 0 || p.relist || p.fullSync || p.draining
		changed := p.changed
		p.mu.Unlock()
		if !connected {
			return fmt.Errorf("%w: the care notes are being re-read", ErrNotConnected)
		}
		if !busy {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%w: still catching up", ErrNotConnected)
		}
		t := time.NewTimer(10 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-changed:
			t.Stop()
		case <-t.C:
		}
	}
}
