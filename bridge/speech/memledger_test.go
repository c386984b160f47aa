package speech

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/unsay/unsay/bridge/speech/ledgertest"
	"github.com/unsay/unsay/models"
)

const wb = ledgertest.WB

// memDB is an in-memory heard ledger database for the principal's tests:
// the store's tables as maps and slices, one mutex standing for the
// ledger's write lock. Every memLedger opened on one memDB (openDB) is
// another instance, or the same one after a restart, on the same durable
// data. TestMemLedger_KeepsTheLedgerContract holds it to the contract the
// store's SQL keeps (ledgertest).
type memDB struct {
	mu    sync.Mutex
	heard map[memKey]int
	// confirmed: a response after the one that set heard carried the
	// heard version's words, written in full, so no report that an
	// earlier response that withdrew nothing (a first hearing) was not
	// played re-opens it (the store's speech_heard.reopenable = 0); a
	// retraction's report still does (finding U2).
	confirmed map[memKey]bool
	// deferred: the rollback an earlier response's report asked for while
	// the heard version was confirmed (its mark; the store's
	// speech_heard.deferred_heard and deferred_from), done if the
	// confirming response is reported not played too.
	deferred map[memKey]models.LedgerMark
	// settledFrom: the version last delivered when a revision with its
	// words moved heard forward (Observe's settle, Drop; the store's
	// speech_heard.settled_from): no delivery, so heard keeps that
	// version's standing — confirmed, deferred, voided — and a report of
	// any version from it to heard still rolls back (finding T8).
	settledFrom map[memKey]int
	// voided: a confirming response was reported not played before its
	// confirmation was recorded, so the next confirmation does not count
	// (the store's speech_heard.reopenable = 2).
	voided map[memKey]bool
	// reports: per patient and response id, when its not-played report
	// was applied, in Unix milliseconds (the store's speech_not_played).
	reports map[memKey]int64
	// offered: every version he may have heard, ascending (the store's
	// speech_offered_version, one row per version).
	offered map[memKey][]int
	// cleared: per fact, the offers a delivery or settle cleared, by the
	// version that cleared them (the store's speech_offered_cleared):
	// that delivery's rollback puts them back (finding G5).
	cleared map[memKey]map[int][]int
	// unplayed: per fact, the deliveries reported not played while a
	// later one had moved heard, by version: the words before each (the
	// store's speech_unplayed). A rollback reaching one goes on past it
	// (finding G8).
	unplayed map[memKey]map[int]int
	baseline map[memKey]int
	followed map[string]bool
	anns     []memAnn   // by id - 1
	log      []memEvent // by id - 1

	// sent: per patient and Alexa session, the record of the last
	// responses written on it, the last first (the store's
	// speech_sent_response; made on first use).
	sent map[memKey][]models.LedgerSent
}

type memKey struct{ patient, uri string }

type memAnn struct {
	patient, uri string
	from, to     int
	state        string // "pending", "heard" or "dropped"
}

type memEvent struct {
	key     memKey
	version int
	kind    models.DeliveryKind
	atMS    int64
	device  models.Device
	via     models.Via
	gone    bool // deleted (ids stay: by index)
}

// newTestDB is an empty ledger database for one test.
func newTestDB(testing.TB) *memDB {
	return &memDB{heard: map[memKey]int{}, confirmed: map[memKey]bool{}, deferred: map[memKey]models.LedgerMark{}, settledFrom: map[memKey]int{}, voided: map[memKey]bool{}, reports: map[memKey]int64{}, offered: map[memKey][]int{}, cleared: map[memKey]map[int][]int{}, unplayed: map[memKey]map[int]int{}, baseline: map[memKey]int{}, followed: map[string]bool{}}
}

// openDB opens a handle (an instance) on db.
func openDB(_ testing.TB, db *memDB) *memLedger { return &memLedger{db: db} }

// memLedger is one handle on a memDB; it implements LedgerStore.
type memLedger struct {
	db      *memDB
	onWrite atomic.Pointer[func()]
}

var (
	_ LedgerStore       = (*memLedger)(nil)
	_ ledgertest.Ledger = (*memLedger)(nil)
)

func TestMemLedger_KeepsTheLedgerContract(t *testing.T) {
	ledgertest.Run(t, func(t *testing.T) func() ledgertest.Ledger {
		db := newTestDB(t)
		return func() ledgertest.Ledger { return openDB(t, db) }
	})
}

func stampMS(at time.Time) int64 {
	if at.IsZero() {
		at = time.Now()
	}
	return at.UnixMilli()
}

// read runs fn holding the lock.
func (l *memLedger) read(fn func(d *memDB)) {
	l.db.mu.Lock()
	defer l.db.mu.Unlock()
	fn(l.db)
}

// write runs fn holding the lock, then calls the OnWrite function.
func (l *memLedger) write(fn func(d *memDB)) {
	_ = l.writeOr(func(d *memDB) error { fn(d); return nil })
}

// writeOr runs fn holding the lock and, unless it fails (a rollback),
// calls the OnWrite function.
func (l *memLedger) writeOr(fn func(d *memDB) error) error {
	var err error
	l.read(func(d *memDB) { err = fn(d) })
	if err != nil {
		return err
	}
	if fn := l.onWrite.Load(); fn != nil {
		(*fn)()
	}
	return nil
}

func (d *memDB) pending(patient, uri string) (int64, *memAnn) {
	for i := range d.anns {
		if a := &d.anns[i]; a.patient == patient && a.uri == uri && a.state == "pending" {
			return int64(i + 1), a
		}
	}
	return 0, nil
}

func (d *memDB) logOnce(k memKey, version int, kind models.DeliveryKind, atMS int64, device models.Device, via models.Via) {
	for _, e := range d.log {
		if e.key == k && e.version == version && e.kind == kind && !e.gone {
			return
		}
	}
	d.log = append(d.log, memEvent{key: k, version: version, kind: kind, atMS: atMS, device: device, via: via})
}

// setHeard moves heard forward to v (never back), a delivery (delivered).
func (d *memDB) setHeard(k memKey, v int) {
	if v > d.heard[k] {
		d.putHeard(k, v)
	}
	d.onDelivery(k, v)
}

// onDelivery is what every delivery of v does besides moving heard: an
// earlier delivery of v reported not played is forgotten, and offers up
// to v are cleared.
func (d *memDB) onDelivery(k memKey, v int) {
	delete(d.unplayed[k], v)
	d.clearOffered(k, v)
}

// settleHeard moves heard forward to v (never back) because v says the
// words he heard — no delivery: heard keeps the delivered version's
// standing and remembers that version (settledFrom) — then clears offers
// up to v.
func (d *memDB) settleHeard(k memKey, v int) {
	if h := d.heard[k]; v > h {
		if _, ok := d.settledFrom[k]; !ok && h > 0 {
			d.settledFrom[k] = h
		}
		d.heard[k] = v
	}
	d.clearOffered(k, v)
}

// delivered is the version heard was last set to by a delivery: heard,
// or the version revisions with its words settled it forward from.
func (d *memDB) delivered(k memKey) int {
	if v, ok := d.settledFrom[k]; ok {
		return v
	}
	return d.heard[k]
}

// putHeard sets heard to v (0: none), a delivery or a rollback; a new
// version is not yet confirmed by a later response.
func (d *memDB) putHeard(k memKey, v int) {
	if d.heard[k] != v {
		delete(d.confirmed, k)
		delete(d.deferred, k)
		delete(d.voided, k)
		delete(d.settledFrom, k)
	}
	if v == 0 {
		delete(d.heard, k)
		return
	}
	d.heard[k] = v
}

// clearOffered forgets every offer of v or older, keeping them aside as
// cleared by v.
func (d *memDB) clearOffered(k memKey, v int) {
	for _, o := range d.offered[k] {
		if o <= v && !slices.Contains(d.cleared[k][v], o) {
			if d.cleared[k] == nil {
				d.cleared[k] = map[int][]int{}
			}
			d.cleared[k][v] = append(d.cleared[k][v], o)
		}
	}
	if o := slices.DeleteFunc(d.offered[k], func(o int) bool { return o <= v }); len(o) > 0 {
		d.offered[k] = o
	} else {
		delete(d.offered, k)
	}
}

// forgetHeard deletes the heard event of v: Alexa reported that delivery
// not played.
func (d *memDB) forgetHeard(k memKey, v int) {
	for i := range d.log {
		if e := &d.log[i]; e.key == k && e.version == v && e.kind == models.DeliveryHeard {
			e.gone = true
		}
	}
}

// offer adds v to the versions he may have heard (once).
func (d *memDB) offer(k memKey, v int) {
	if i, found := slices.BinarySearch(d.offered[k], v); !found {
		d.offered[k] = slices.Insert(d.offered[k], i, v)
	}
}

func (d *memDB) advancePending(k memKey, v int) {
	if _, a := d.pending(k.patient, k.uri); a != nil && a.to <= v {
		a.state = "heard"
	}
	if _, a := d.pending(k.patient, k.uri); a != nil && a.from != v {
		a.from = v
	}
}

func (l *memLedger) Heard(_ context.Context, patient, uri string) (v int, _ error) {
	l.read(func(d *memDB) { v = d.heard[memKey{patient, uri}] })
	return v, nil
}

func (l *memLedger) HeardState(_ context.Context, patient, uri string) (hs models.HeardState, _ error) {
	l.read(func(d *memDB) {
		hs = models.HeardState{Heard: d.heard[memKey{patient, uri}], Offered: slices.Clone(d.offered[memKey{patient, uri}])}
	})
	return hs, nil
}

func (l *memLedger) HeardOf(_ context.Context, patient string) (map[string]int, error) {
	out := map[string]int{}
	l.read(func(d *memDB) {
		for k, v := range d.heard {
			if k.patient == patient {
				out[k.uri] = v
			}
		}
	})
	return out, nil
}

func (l *memLedger) Facts(_ context.Context, patient string) (map[string]models.FactLedger, error) {
	out := map[string]models.FactLedger{}
	l.read(func(d *memDB) {
		for _, t := range []struct {
			m   map[memKey]int
			set func(*models.FactLedger, int)
		}{
			{d.heard, func(f *models.FactLedger, v int) { f.Heard = v }},
			{d.baseline, func(f *models.FactLedger, v int) { f.Baseline = v }},
		} {
			for k, v := range t.m {
				if k.patient == patient {
					f := out[k.uri]
					t.set(&f, v)
					out[k.uri] = f
				}
			}
		}
		for k, vs := range d.offered {
			if k.patient == patient {
				f := out[k.uri]
				f.Offered = slices.Clone(vs)
				out[k.uri] = f
			}
		}
	})
	return out, nil
}

func (l *memLedger) Pending(_ context.Context, patient string) (out []models.QueuedAnnouncement, _ error) {
	l.read(func(d *memDB) {
		for i, a := range d.anns {
			if a.patient == patient && a.state == "pending" {
				_, off := d.offered[memKey{patient, a.uri}]
				out = append(out, models.QueuedAnnouncement{ID: int64(i + 1), Patient: patient, URI: a.uri, From: a.from, To: a.to, Offered: off})
			}
		}
	})
	return out, nil
}

func (l *memLedger) Status(_ context.Context, patient, uri string) (heard, pendingTo int, _ error) {
	l.read(func(d *memDB) {
		heard = d.heard[memKey{patient, uri}]
		if _, a := d.pending(patient, uri); a != nil {
			pendingTo = a.to
		}
	})
	return heard, pendingTo, nil
}

func (l *memLedger) Backlog(context.Context) (n int, _ error) {
	l.read(func(d *memDB) {
		for _, a := range d.anns {
			if a.state == "pending" {
				n++
			}
		}
	})
	return n, nil
}

func (l *memLedger) Followed(_ context.Context, patients []string) (map[string]bool, error) {
	out := map[string]bool{}
	l.read(func(d *memDB) {
		for _, p := range patients {
			if d.followed[p] {
				out[p] = true
			}
		}
	})
	return out, nil
}

func (l *memLedger) Follow(_ context.Context, patient string, facts map[string]int) error {
	l.write(func(d *memDB) {
		for uri, v := range facts {
			if _, ok := d.baseline[memKey{patient, uri}]; !ok {
				d.baseline[memKey{patient, uri}] = v
			}
		}
		d.followed[patient] = true
	})
	return nil
}

func (l *memLedger) Observe(_ context.Context, patient, uri string, expect models.HeardState, latest int, sameHeard bool, unlike int, at time.Time) (changed bool, err error) {
	err = l.writeOr(func(d *memDB) error {
		k := memKey{patient, uri}
		hs := models.HeardState{Heard: d.heard[k], Offered: d.offered[k]}
		if !hs.Equal(expect) {
			return models.ErrHeardMoved
		}
		if unlike != 0 && !slices.Contains(hs.Offered, unlike) {
			return fmt.Errorf("memledger: observe: v%d is not offered", unlike)
		}
		o := models.Observation{Latest: latest, Heard: hs.Heard, Offered: hs.LastOffered(), Baseline: d.baseline[k], SameAsHeard: sameHeard, Unlike: unlike}
		_, p := d.pending(patient, uri)
		if p != nil {
			o.Pending = &models.Window{From: p.from, To: p.to}
		}
		v := models.Decide(o)
		switch v.Kind {
		case models.Settle:
			if p != nil {
				p.state = "dropped"
			}
			d.settleHeard(k, v.At.To)
			d.logOnce(k, v.At.To, models.DeliveryUnchanged, stampMS(at), "", "")
		case models.Extend:
			p.from, p.to = v.At.From, v.At.To
			d.logOnce(k, v.At.To, models.DeliveryQueued, stampMS(at), "", "")
		case models.Queue:
			d.anns = append(d.anns, memAnn{patient: patient, uri: uri, from: v.At.From, to: v.At.To, state: "pending"})
			d.logOnce(k, v.At.To, models.DeliveryQueued, stampMS(at), "", "")
		default:
			return nil
		}
		changed = true
		return nil
	})
	return changed, err
}

func (l *memLedger) Offered(ctx context.Context, patient string, offers []models.LedgerOffer, at time.Time) error {
	return l.offered(ctx, patient, offers, nil, at)
}

// offered is Offered, recording sent (when not nil) in its write
// (OfferedResponse, memledger_sent_test.go).
func (l *memLedger) offered(ctx context.Context, patient string, offers []models.LedgerOffer, sent *models.LedgerSent, at time.Time) error {
	heard, _ := l.HeardOf(ctx, patient)
	need := slices.DeleteFunc(slices.Clone(offers), func(o models.LedgerOffer) bool { return o.Told && heard[o.URI] >= o.Version })
	if len(need) == 0 && !l.recordAlone(patient, sent) {
		return nil
	}
	l.write(func(d *memDB) {
		for _, o := range need {
			k := memKey{patient, o.URI}
			if o.Told {
				if d.heard[k] >= o.Version {
					continue
				}
				if _, p := d.pending(patient, o.URI); p != nil && p.from > 0 {
					continue
				}
				d.offer(k, o.Version)
				continue
			}
			if o.ID < 1 || int(o.ID) > len(d.anns) {
				continue
			}
			if a := d.anns[o.ID-1]; a.patient == patient && a.uri == o.URI && a.state == "pending" {
				d.offer(k, o.Version)
				d.logOnce(k, o.Version, models.DeliveryOffered, stampMS(at), "", "")
			}
		}
		d.recordSent(patient, sent, at)
	})
	return nil
}

func (l *memLedger) MarkHeard(_ context.Context, patient, uri string, version int, how models.Hearing) error {
	k := memKey{patient, uri}
	quiet := false
	l.read(func(d *memDB) {
		_, p := d.pending(patient, uri)
		quiet = d.heard[k] == version && len(d.offered[k]) == 0 && (p == nil || p.from == version && p.to > version)
	})
	if quiet {
		return nil
	}
	l.write(func(d *memDB) {
		d.putHeard(k, version)
		d.onDelivery(k, version)
		d.logOnce(k, version, models.DeliveryHeard, stampMS(how.At), how.Device, how.Via)
		d.advancePending(k, version)
	})
	return nil
}

func (l *memLedger) MarkTold(_ context.Context, patient, uri string, version int, how models.Hearing) (wrote bool, _ error) {
	k := memKey{patient, uri}
	skip := false
	l.read(func(d *memDB) {
		_, p := d.pending(patient, uri)
		skip = p != nil && p.from > 0 && version > p.from || d.heard[k] > version || d.heard[k] == version && d.confirmed[k]
	})
	if skip {
		return false, nil
	}
	l.write(func(d *memDB) {
		_, p := d.pending(patient, uri)
		retraction := p != nil && p.from > 0
		if retraction && version > p.from || version < d.heard[k] {
			return
		}
		if version == d.heard[k] { // a later delivery of what he heard: confirmed
			switch {
			case d.voided[k]: // undone in advance by its own report
				delete(d.voided, k)
				wrote = true
			case !d.confirmed[k]:
				d.confirmed[k], wrote = true, true
			}
			return
		}
		d.setHeard(k, version)
		d.logOnce(k, version, models.DeliveryHeard, stampMS(how.At), how.Device, how.Via)
		wrote = true
		if !retraction {
			d.advancePending(k, version)
		}
	})
	return wrote, nil
}

func (l *memLedger) NotPlayed(_ context.Context, patient string, ms []models.LedgerMark, at time.Time) (n int, _ error) {
	l.write(func(d *memDB) {
		atMS := stampMS(at)
		for k, when := range d.reports {
			if when < atMS-models.NotPlayedMemory.Milliseconds() {
				delete(d.reports, k)
			}
		}
		applied := map[string]bool{}
		for _, m := range ms {
			if _, ok := d.reports[memKey{patient, m.Response}]; ok && m.Response != "" {
				applied[m.Response] = true
			}
		}
		defer func() {
			for _, m := range ms {
				if r := (memKey{patient, m.Response}); m.Response != "" && !applied[m.Response] {
					d.reports[r] = atMS
				}
			}
		}()
		for _, m := range ms {
			k := memKey{patient, m.URI}
			if applied[m.Response] {
				continue // this response's report was applied already
			}
			if m.Version > d.heard[k] {
				continue // rolled back past it already
			}
			if m.Version < d.delivered(k) { // a later delivery moved heard: remembered
				if _, ok := d.unplayed[k][m.Version]; !ok && !m.Confirmed {
					if d.unplayed[k] == nil {
						d.unplayed[k] = map[int]int{}
					}
					d.unplayed[k][m.Version] = m.HeardBefore
				}
				continue
			}
			if m.Confirmed {
				if !d.confirmed[k] {
					d.voided[k] = true // its confirmation, if still to come, does not count
					continue
				}
				r, ok := d.deferred[k]
				if !ok {
					delete(d.confirmed, k) // an earlier report may re-open it again
					continue
				}
				m = r
				m.Version = d.delivered(k) // the version it held back, whatever settled since
			} else if d.confirmed[k] && !m.Withdrew() { // finding U2: a retraction is rolled back now
				if _, ok := d.deferred[k]; !ok {
					d.deferred[k] = m
				}
				continue
			}
			h := d.heard[k]
			to := max(m.Version, h) // heard may rest on m.Version, settled forward
			before := m.HeardBefore
			d.offer(k, m.Version)
			d.forgetHeard(k, m.Version)
			for before > 0 { // the words before were not played either (G8)
				earlier, ok := d.unplayed[k][before]
				if !ok {
					break
				}
				delete(d.unplayed[k], before)
				d.offer(k, before)
				d.forgetHeard(k, before)
				before = earlier
			}
			d.putHeard(k, before)
			for by, vs := range d.cleared[k] { // what the rolled-back deliveries cleared (G5)
				if before < by && by <= h {
					for _, v := range vs {
						if v > before {
							d.offer(k, v)
						}
					}
					delete(d.cleared[k], by)
				}
			}
			if _, p := d.pending(patient, m.URI); p == nil {
				d.anns = append(d.anns, memAnn{patient: patient, uri: m.URI, from: m.From, to: to, state: "pending"})
				d.logOnce(k, to, models.DeliveryQueued, stampMS(at), "", "")
			}
			n++
		}
	})
	return n, nil
}

func (l *memLedger) Drop(_ context.Context, id int64, at time.Time) error {
	l.write(func(d *memDB) {
		if id < 1 || int(id) > len(d.anns) || d.anns[id-1].state != "pending" {
			return
		}
		a := &d.anns[id-1]
		a.state = "dropped"
		k := memKey{a.patient, a.uri}
		d.settleHeard(k, a.to)
		d.logOnce(k, a.to, models.DeliveryUnchanged, stampMS(at), "", "")
	})
	return nil
}

func (l *memLedger) Notified(_ context.Context, patient string, at time.Time) error {
	l.write(func(d *memDB) {
		for _, a := range d.anns {
			if a.patient == patient && a.state == "pending" {
				d.logOnce(memKey{patient, a.uri}, a.to, models.DeliveryNotified, stampMS(at), "", models.ViaNotification)
			}
		}
	})
	return nil
}

func (l *memLedger) Delivery(_ context.Context, patient, uri string) (rec models.DeliveryRecord, _ error) {
	k := memKey{patient, uri}
	l.read(func(d *memDB) {
		rec.Heard, rec.Baseline, rec.Offered = d.heard[k], d.baseline[k], slices.Clone(d.offered[k])
		if _, p := d.pending(patient, uri); p != nil {
			rec.Pending = &models.PendingDelivery{From: p.from, To: p.to, Offered: slices.ContainsFunc(d.offered[k], func(o int) bool { return o > p.from })}
		}
		for _, e := range d.log {
			if e.key == k && !e.gone {
				rec.Events = append(rec.Events, models.DeliveryEvent{Version: e.version, Kind: e.kind, At: time.UnixMilli(e.atMS).UTC(), Device: e.device, Via: e.via})
			}
		}
	})
	return rec, nil
}

func (l *memLedger) DeliveryChanges(_ context.Context, after int64, limit int) (out []models.DeliveryChange, _ error) {
	l.read(func(d *memDB) {
		for i := max(after, 0); i < int64(len(d.log)) && len(out) < limit; i++ {
			out = append(out, models.DeliveryChange{ID: i + 1, URI: d.log[i].key.uri})
		}
	})
	return out, nil
}

func (l *memLedger) DeliveryCursor(context.Context) (n int64, _ error) {
	l.read(func(d *memDB) { n = int64(len(d.log)) })
	return n, nil
}

func (l *memLedger) OnWrite(fn func()) {
	if fn == nil {
		l.onWrite.Store(nil)
		return
	}
	l.onWrite.Store(&fn)
}
