package speech

import (
	"context"
	"fmt"
	"sync"

	"github.com/unsay/unsay/models"
)

// Turn returns what the skill may say to patient now (P-24): his speakable
// facts and the announcements he is owed, every version confirmed current
// with the MCP server at speak time, in one round trip within
// ConfirmTimeout — each fact is read afresh (concurrently), and with it
// each version he heard that is not in memory. A fact read at a newer
// version than the principal knew (its notification is late, or its event
// stream stalled) is reconciled with the heard ledger first, so the turn
// speaks its retraction rather than a superseded sentence. Staleness is
// the server's at that read (P-7), so every form is judged at speak time.
//
// When it cannot confirm — no session, a timeout, a transport error — it
// returns an error wrapping ErrUnconfirmed and a Snapshot holding only
// Withdrawn (from the durable ledger): nothing may be said as current. The
// session is then re-established, and State is not ready until it is.
// An invalid patient id is ErrInvalidArgument.
func (p *Principal) Turn(ctx context.Context, patient string) (models.Snapshot, error) {
	if !models.ValidID(patient) {
		return models.Snapshot{}, fmt.Errorf("%w: patient id", ErrInvalidArgument)
	}
	asked := ctx
	ctx, cancel := context.WithTimeout(ctx, p.cfg.ConfirmTimeout)
	defer cancel()
	rows, err := p.ledger.Pending(ctx, patient)
	if err != nil {
		return models.Snapshot{}, fmt.Errorf("%w: %w", ErrUnconfirmed, err)
	}
	var up upstream
	var known []models.Version
	var synced bool
	heard := map[string]bool{} // versioned URIs he heard that are in memory
	p.do(func(st *state) {
		if st.connected {
			up = st.up
		}
		synced = st.synced[patient] && st.patients[patient]
		known = st.factsOf(patient)
		for _, r := range rows {
			if r.From > 0 {
				u, err := models.ParseURI(r.URI)
				if err == nil {
					_, heard[u.WithVersion(r.From).String()] = st.versions[u.WithVersion(r.From).String()]
				}
			}
		}
	})
	if up == nil {
		return withdrawn(rows), fmt.Errorf("%w: %w", ErrUnconfirmed, ErrNotConnected)
	}
	facts, err := p.confirm(ctx, up, patient, synced, rows, heard)
	if err != nil {
		if asked.Err() == nil { // not the caller giving up
			p.confirmFailed(up, err)
		}
		return withdrawn(rows), fmt.Errorf("%w: %w", ErrUnconfirmed, err)
	}
	p.do(func(st *state) { st.confirmFailing = false })

	// A fact now newer than the ledger knew is reconciled before anything
	// is said, so a late notification cannot make this turn stale.
	byURI := map[string]models.Version{}
	for _, v := range facts {
		byURI[v.FactURI().String()] = v
	}
	knownN := map[string]int{}
	for _, v := range known {
		knownN[v.FactURI().String()] = v.N
	}
	moved := false
	for _, v := range facts {
		if n, ok := knownN[v.FactURI().String()]; ok && v.N <= n {
			continue // read and reconciled before
		}
		if err := p.reconcile(ctx, up, v); err != nil {
			return withdrawn(rows), fmt.Errorf("%w: %w", ErrUnconfirmed, err)
		}
		moved = true
	}
	if moved {
		if rows, err = p.ledger.Pending(ctx, patient); err != nil {
			return withdrawn(rows), fmt.Errorf("%w: %w", ErrUnconfirmed, err)
		}
	}
	anns, err := p.announcements(ctx, up, patient, rows, func(u models.URI, n int) (models.Version, error) {
		v, ok := byURI[u.String()]
		if !ok || v.N != n {
			return models.Version{}, fmt.Errorf("%w: %s v%d", errNotCurrent, u, n)
		}
		return v, nil
	})
	if err != nil {
		return withdrawn(rows), fmt.Errorf("%w: %w", ErrUnconfirmed, err)
	}
	return models.Snapshot{Facts: facts, Pending: anns}, nil
}

// confirm reads, concurrently, the current version of each of patient's
// facts (listing them first when they are not yet known; otherwise in a
// round shared with the turns confirming at the same moment, see
// confirmCurrent) and each version he heard of a pending announcement that
// is not in memory. A fact the server no longer serves to this principal is
// left out; any other failure is returned.
func (p *Principal) confirm(ctx context.Context, up upstream, patient string, synced bool, rows []row, inMemory map[string]bool) ([]models.Version, error) {
	if !synced {
		return p.listFacts(ctx, up, patient, p.cfg.ConfirmTimeout)
	}
	var heard []models.URI
	for _, r := range rows {
		if r.From == 0 {
			continue
		}
		if u, err := models.ParseURI(r.URI); err == nil && !inMemory[u.WithVersion(r.From).String()] {
			heard = append(heard, u.WithVersion(r.From))
		}
	}
	errs := make([]error, len(heard))
	var wg sync.WaitGroup
	for i, u := range heard {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := p.readAt(ctx, up, u, false)
			if isGone(err) {
				p.log.Warn("speech: fact not confirmed; not spoken", "uri", u.String(), "err", err)
				err = nil
			}
			errs[i] = err
		}()
	}
	facts, err := p.confirmCurrent(ctx, patient)
	wg.Wait()
	if err != nil {
		return nil, err
	}
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return facts, nil
}

// confirmFailed marks the principal not ready and ends the session, so the
// next one is established and re-read from scratch.
func (p *Principal) confirmFailed(up upstream, err error) {
	p.log.Warn("speech: cannot confirm the care notes at speak time; reconnecting", "session", up.ID(), "err", err)
	p.do(func(st *state) {
		if st.up == up {
			st.confirmFailing = true
		}
	})
	go func() { _ = up.Close() }()
}

// withdrawn lists the facts whose heard version the ledger knows is
// superseded: pending retractions.
func withdrawn(rows []row) models.Snapshot {
	var out models.Snapshot
	for _, r := range rows {
		if r.From == 0 {
			continue
		}
		if u, err := models.ParseURI(r.URI); err == nil {
			out.Withdrawn = append(out.Withdrawn, u)
		}
	}
	return out
}

// Offered records, durably, that the pending announcements ids of patient
// are in a response about to be written to Alexa. Until MarkHeard settles
// them (after the write succeeded) they stay owed, and a later turn speaks
// them again saying so ("as I may not have told you properly", P-24).
func (p *Principal) Offered(ctx context.Context, patient string, ids []int64) error {
	if !models.ValidID(patient) {
		return fmt.Errorf("%w: patient id", ErrInvalidArgument)
	}
	if err := p.ledger.Offered(ctx, ids); err != nil {
		return err
	}
	return nil
}
