package speech

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/unsay/unsay/models"
)

// Turn returns what the skill may say to patient now (P-24): his speakable
// facts and the announcements he is owed, every version confirmed current
// with the MCP server at speak time, in one round trip within
// ConfirmTimeout — each fact is read afresh (concurrently), with it each
// version he heard that is not in memory, and the list of his facts, so a
// fact created just before the turn is heard in it as news. Every fact
// read is then reconciled with the heard ledger before anything is said:
// one newer than what he heard is a retraction in this very turn (or a
// first hearing), never spoken as a plain answer — whether its
// notification is late, its event stream stalled, or the principal read it
// a moment ago and has not yet queued it. Staleness is the server's at
// that read (P-7), so every form is judged at speak time.
//
// When it cannot confirm — no session, a timeout, a transport error, a
// pending announcement whose version the server will not confirm — it
// returns an error wrapping ErrUnconfirmed and a Snapshot holding only
// Withdrawn (from the durable ledger): nothing may be said as current. The
// session is then re-established, and State is not ready until it is.
// Snapshot.Heard holds what the heard ledger says he heard of each fact.
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
	var synced bool
	heard := map[string]bool{} // versioned URIs he heard that are in memory
	p.do(func(st *state) {
		if st.connected {
			up = st.up
		}
		synced = st.synced[patient] && st.patients[patient]
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

	facts, rows, lf, err := p.reconcileTurn(ctx, up, patient, facts, rows)
	if err != nil {
		return withdrawn(rows), fmt.Errorf("%w: %w", ErrUnconfirmed, err)
	}
	byURI := map[string]models.Version{}
	for _, v := range facts {
		byURI[v.FactURI().String()] = v
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
	// What he heard, as the ledger holds it now: reconcileTurn's last read
	// of it, unless that read may be out of date — its last round
	// reconciled a fact (a settle moves what he heard), or announcements
	// left a row out (a dropped one moves it too) — then read afresh.
	if lf == nil || len(anns) != len(rows) {
		if lf, err = p.ledger.Facts(ctx, patient); err != nil {
			return withdrawn(rows), fmt.Errorf("%w: %w", ErrUnconfirmed, err)
		}
	}
	snap := models.Snapshot{Facts: facts, Pending: anns, Heard: map[models.URI]int{}}
	for uri, f := range lf {
		if u, err := models.ParseURI(uri); err == nil && f.Heard > 0 {
			snap.Heard[u] = f.Heard
		}
	}
	for i, a := range snap.Pending {
		if a.Heard == nil {
			continue // a first hearing withdraws nothing
		}
		// A retraction from a version he only may have heard quotes it as
		// such ("I may have told you: …", P-24).
		heard := snap.Heard[a.URI()]
		a.HeardUnsure = heard != a.Heard.N
		if a.HeardUnsure {
			// It also withdraws the older words he heard for certain,
			// unless the latest says them again (P-19): those are what he
			// was told.
			if a.Told, err = p.toldAlso(ctx, up, a, heard); err != nil {
				return withdrawn(rows), fmt.Errorf("%w: %w", ErrUnconfirmed, err)
			}
		}
		a.ChangedBy = p.changedBy(ctx, up, a)
		// And every other version he may have heard (finding F10).
		if a.MayAlso, a.Earlier, err = p.mayAlso(ctx, up, a, lf[a.URI().String()].Offered, heard); err != nil {
			return withdrawn(rows), fmt.Errorf("%w: %w", ErrUnconfirmed, err)
		}
		snap.Pending[i] = a
	}
	return snap, nil
}

// changedBy returns, for the retraction a, the version that first said
// a.Current's words (models.ChangedBy: the retraction names who changed
// them and when, never who renewed them; breakit8 G6), each version read
// back over up. Nil when a.Current is that version, and when a version
// cannot be read back.
func (p *Principal) changedBy(ctx context.Context, up upstream, a models.Announcement) *models.Version {
	u := a.Current.FactURI()
	return models.ChangedBy(*a.Heard, a.Current, func(n int) (models.Version, bool) {
		v, err := p.versionAt(ctx, up, u, n)
		return v, err == nil
	})
}

// mayAlso returns, for the retraction a (its Heard, HeardUnsure and Told
// set), the other versions of its fact he may have heard — of offered
// (ascending; the ledger's unconfirmed offers), those newer than heard
// (what he heard for certain) other than a.Heard and a.Current — whose
// words differ from those of a.Heard, a.Told, a.Current (and sound, for a
// clip) and one another, oldest first, so the retraction withdraws them
// too (P-19, P-24; finding F10). The newest are kept: with a.Heard when it
// is one he may have heard, at most models.MaxMayHaveQuoted in all.
// earlier reports that an older one was left out — over that bound, or no
// longer served — so the retraction says it withdraws earlier versions as
// well; past the bound the rest are not read, so it may say so of words
// it already quoted (a repeat, never a loss). It reads each version at
// most once (from memory when read before).
func (p *Principal) mayAlso(ctx context.Context, up upstream, a models.Announcement, offered []int, heard int) (may []models.Version, earlier bool, err error) {
	room := models.MaxMayHaveQuoted
	if a.HeardUnsure {
		room-- // a.Heard is quoted as one he may have heard
	}
	said := []string{strings.TrimSpace(a.Heard.Value)}
	if a.Told != nil {
		said = append(said, strings.TrimSpace(a.Told.Value))
	}
	cur := strings.TrimSpace(a.Current.Value)
	for i := len(offered) - 1; i >= 0; i-- {
		n := offered[i]
		if n <= heard || n == a.Heard.N || n == a.Current.N {
			continue
		}
		if len(may) == room {
			earlier = true
			break
		}
		v, err := p.versionAt(ctx, up, a.URI(), n)
		if err != nil {
			if isGone(err) {
				p.log.Warn("speech: offered version unreadable", "uri", a.URI().String(), "version", n, "err", err)
				earlier = true
				continue
			}
			return nil, false, err
		}
		w := strings.TrimSpace(v.Value)
		if slices.Contains(said, w) || w == cur && models.SameSound(v.Audio, a.Current.Audio) {
			continue
		}
		said = append(said, w)
		may = append(may, v)
	}
	slices.Reverse(may)
	return may, earlier, nil
}

// toldAlso returns version heard of a's fact — what he heard for certain,
// older than the version a withdraws as one he may have heard — when its
// words differ from both that version's and the latest's, so the
// retraction withdraws it as well (P-19, P-24); nil when there is none
// (never heard, or the same words) or it is no longer served.
func (p *Principal) toldAlso(ctx context.Context, up upstream, a models.Announcement, heard int) (*models.Version, error) {
	if a.Heard == nil || heard <= 0 || heard >= a.Heard.N {
		return nil, nil
	}
	v, err := p.versionAt(ctx, up, a.URI(), heard)
	if err != nil {
		if isGone(err) {
			p.log.Warn("speech: heard version unreadable", "uri", a.URI().String(), "version", heard, "err", err)
			return nil, nil
		}
		return nil, err
	}
	w := strings.TrimSpace(v.Value)
	if w == strings.TrimSpace(a.Heard.Value) || w == strings.TrimSpace(a.Current.Value) && models.SameSound(v.Audio, a.Current.Audio) {
		return nil, nil
	}
	return &v, nil
}

// reconcileRounds bounds how often a turn re-reads a fact the ledger knows
// a newer version of than the turn's own read (written meanwhile).
const reconcileRounds = 3

// reconcileTurn brings the ledger up to the facts this turn confirmed,
// before anything is said (P-19, P-24): each fact read at a version the
// ledger has not decided on — newer than what he heard, beyond any pending
// announcement, and not his untouched starting point — is reconciled now,
// so it is announced in this turn. A fact the ledger already knows a newer
// version of than the turn's read (the principal read it meanwhile: a
// pending announcement, or a heard or offered version beyond it) is read
// again, so what is said is the newest confirmed — never words the ledger
// has already settled past. It returns the facts and the pending rows to
// speak from, with what the ledger holds of each fact as last read — nil
// when its last round reconciled a fact after that read (a settle moves
// what he heard) — or an error when they cannot be brought to agree.
func (p *Principal) reconcileTurn(ctx context.Context, up upstream, patient string, facts []models.Version, rows []row) ([]models.Version, []row, map[string]models.FactLedger, error) {
	for round := 0; ; round++ {
		lf, err := p.ledger.Facts(ctx, patient)
		if err != nil {
			return facts, rows, nil, err
		}
		pendingTo := map[string]int{}
		for _, r := range rows {
			pendingTo[r.URI] = r.To
		}
		moved := false
		var ahead []int // indexes of facts the ledger knows a newer version of
		for i, v := range facts {
			uri := v.FactURI().String()
			f, to := lf[uri], pendingTo[uri]
			switch {
			case to > v.N, f.Heard > v.N, f.LastOffered() > v.N:
				ahead = append(ahead, i) // written after this turn's read, and seen already
			case v.N <= f.Heard, to == v.N, f.Heard == 0 && len(f.Offered) == 0 && v.N <= f.Baseline:
				// decided before: heard, pending, or his starting point
			default:
				if err := p.reconcile(ctx, up, v); err != nil {
					return facts, rows, nil, err
				}
				moved = true
			}
		}
		if moved {
			if rows, err = p.ledger.Pending(ctx, patient); err != nil {
				return facts, rows, nil, err
			}
		}
		if len(ahead) == 0 && !moved {
			return facts, rows, lf, nil
		}
		if round+1 >= reconcileRounds {
			if len(ahead) == 0 {
				return facts, rows, nil, nil // reconciling may have settled a fact: lf is from before it
			}
			return facts, rows, nil, fmt.Errorf("%w: %s is being revised", errNotCurrent, facts[ahead[0]].FactURI())
		}
		for _, i := range ahead {
			v, err := p.readAt(ctx, up, facts[i].FactURI(), true)
			if err != nil {
				return facts, rows, nil, err
			}
			facts[i] = v
		}
	}
}

// confirm reads, concurrently, the current version of each of patient's
// facts with the list of resources (a fact the list names that is not yet
// known is read too), in a round of reads shared with the turns confirming
// at the same moment that began after this call (confirmCurrent), and each
// version he heard of a pending announcement that is not in memory; when
// his facts are not yet known it lists and reads everything afresh. A
// fact the server no longer serves to this principal is left out; any
// other failure is returned.
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
	heardErr := make(chan error, 1)
	go func() {
		_, err := p.readAll(ctx, up, heard) // versioned reads only fill the cache
		heardErr <- err
	}()
	facts, err := p.confirmCurrent(ctx, patient)
	if herr := <-heardErr; err == nil {
		err = herr
	}
	if err != nil {
		return nil, err
	}
	return facts, nil
}

// readAll reads targets concurrently and returns the unversioned ones (the
// facts' current versions; versioned reads only fill the cache). A target
// the server no longer serves to this principal is left out; any other
// failure is returned.
func (p *Principal) readAll(ctx context.Context, up upstream, targets []models.URI) ([]models.Version, error) {
	type result struct {
		v   models.Version
		err error
	}
	results := make([]result, len(targets))
	var wg sync.WaitGroup
	for i, u := range targets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			v, err := p.readAt(ctx, up, u, u.Version == 0)
			results[i] = result{v, err}
		}()
	}
	wg.Wait()
	var facts []models.Version
	for i, r := range results {
		switch {
		case r.err == nil:
			if targets[i].Version == 0 {
				facts = append(facts, r.v)
			}
		case isGone(r.err):
			p.log.Warn("speech: fact not confirmed; not spoken", "uri", targets[i].String(), "err", r.err)
		default:
			return nil, r.err
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

// Offered records, durably and in one transaction, that offers of patient
// — announcements, and versions of facts told plainly (models.Offer.Told)
// — are in a response about to be written to Alexa. Until MarkHeard (or
// MarkTold, for a fact told) confirms the delivery he may have heard each
// offer's version: a later revision withdraws it (as well as what he heard
// for certain), and a later turn speaks it again saying so ("as I may not
// have told you properly", P-24). So a crash between the write and the
// confirmation never turns a fact he was told into one he never heard. A
// fact told at a version he already heard, or newer, writes nothing. A
// malformed patient or offer is ErrInvalidArgument.
func (p *Principal) Offered(ctx context.Context, patient string, offers []models.Offer) error {
	if !models.ValidID(patient) {
		return fmt.Errorf("%w: patient id", ErrInvalidArgument)
	}
	rows := make([]offer, 0, len(offers))
	for _, o := range offers {
		if err := checkFact(patient, o.URI, o.Version); err != nil {
			return err
		}
		rows = append(rows, offer{ID: o.ID, URI: o.URI.String(), Version: o.Version, Told: o.Told})
	}
	return p.ledger.Offered(ctx, patient, rows)
}
