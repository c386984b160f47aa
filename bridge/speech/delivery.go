package speech

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/unsay/unsay/models"
)

// The delivery log (speech_delivery, migration 010): what happened to each
// version of a speakable fact on its way to Ray, for the clinician's
// timeline ("did Ray hear my change?", models.Timeline). Every event is
// written in the transaction of the ledger change it describes, so the log
// never disagrees with the ledger; at most one event of each kind per
// version is kept (the first). It holds patient, URI, version, kind, time,
// device kind and how — no clinical text.

// logDelivery appends the first event of kind for version of uri, stamped
// how.At (the ledger's clock when zero), with how's device and via.
func (l *ledger) logDelivery(ctx context.Context, tx *sql.Tx, patient, uri string, version int, how models.Hearing, kind models.DeliveryKind) error {
	at := how.At
	if at.IsZero() {
		at = l.now()
	}
	_, err := tx.ExecContext(ctx, l.q(`INSERT INTO speech_delivery (patient, uri, version, event, at_ms, device, via) VALUES (?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (patient, uri, version, event) DO NOTHING`), patient, uri, version, string(kind), at.UnixMilli(), string(how.Device), string(how.Via))
	if err != nil {
		return fmt.Errorf("speech: ledger: delivery log: %w", err)
	}
	return nil
}

// Notified records that a proactive notification reached patient at: every
// announcement pending for him now gets a notified event at its to_version
// (unless it has one).
func (l *ledger) Notified(ctx context.Context, patient string, at time.Time) error {
	return l.write(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, l.q(`INSERT INTO speech_delivery (patient, uri, version, event, at_ms, via)
SELECT patient, uri, to_version, 'notified', ?, 'notification' FROM speech_announcements WHERE patient = ? AND state = 'pending'
ON CONFLICT (patient, uri, version, event) DO NOTHING`), at.UnixMilli(), patient)
		if err != nil {
			return fmt.Errorf("speech: ledger: notified: %w", err)
		}
		return nil
	})
}

// Delivery returns the ledger's record of uri: the heard version, the
// baseline, the pending announcement and the delivery log, oldest first.
// Followed is left for the caller.
func (l *ledger) Delivery(ctx context.Context, patient, uri string) (models.DeliveryRecord, error) {
	var rec models.DeliveryRecord
	var err error
	if rec.Heard, err = l.heardIn(ctx, l.db, patient, uri); err != nil {
		return models.DeliveryRecord{}, err
	}
	if rec.Baseline, err = l.baselineIn(ctx, l.db, patient, uri); err != nil {
		return models.DeliveryRecord{}, err
	}
	var p models.PendingDelivery
	err = l.queryRow(ctx, l.db, l.q(`SELECT a.from_version, a.to_version, o.version IS NOT NULL
FROM speech_announcements a LEFT JOIN speech_offered_version o ON o.patient = a.patient AND o.uri = a.uri AND o.version > a.from_version
WHERE a.patient = ? AND a.uri = ? AND a.state = 'pending'`), patient, uri).Scan(&p.From, &p.To, &p.Offered)
	switch {
	case err == nil:
		rec.Pending = &p
	case !errors.Is(err, sql.ErrNoRows):
		return models.DeliveryRecord{}, fmt.Errorf("speech: ledger: delivery: %w", err)
	}
	rows, err := l.query(ctx, l.q(`SELECT version, event, at_ms, device, via FROM speech_delivery
WHERE patient = ? AND uri = ? ORDER BY id`), patient, uri)
	if err != nil {
		return models.DeliveryRecord{}, fmt.Errorf("speech: ledger: delivery: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var e models.DeliveryEvent
		var kind, device, via string
		var atMS int64
		if err := rows.Scan(&e.Version, &kind, &atMS, &device, &via); err != nil {
			return models.DeliveryRecord{}, fmt.Errorf("speech: ledger: delivery: %w", err)
		}
		e.Kind, e.At, e.Device, e.Via = models.DeliveryKind(kind), time.UnixMilli(atMS).UTC(), models.Device(device), models.Via(via)
		rec.Events = append(rec.Events, e)
	}
	if err := rows.Err(); err != nil {
		return models.DeliveryRecord{}, fmt.Errorf("speech: ledger: delivery: %w", err)
	}
	return rec, nil
}

// deliveryChange is one delivery-log row, by id.
type deliveryChange struct {
	ID  int64
	URI string
}

// DeliveryChanges returns the delivery-log rows after id after, oldest
// first, at most limit.
func (l *ledger) DeliveryChanges(ctx context.Context, after int64, limit int) ([]deliveryChange, error) {
	rows, err := l.query(ctx, l.q(`SELECT id, uri FROM speech_delivery WHERE id > ? ORDER BY id LIMIT ?`), after, limit)
	if err != nil {
		return nil, fmt.Errorf("speech: ledger: delivery changes: %w", err)
	}
	defer rows.Close()
	var out []deliveryChange
	for rows.Next() {
		var c deliveryChange
		if err := rows.Scan(&c.ID, &c.URI); err != nil {
			return nil, fmt.Errorf("speech: ledger: delivery changes: %w", err)
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("speech: ledger: delivery changes: %w", err)
	}
	return out, nil
}

// DeliveryCursor returns the id of the latest delivery-log row, 0 when none.
func (l *ledger) DeliveryCursor(ctx context.Context) (int64, error) {
	var id sql.NullInt64
	if err := l.db.QueryRowContext(ctx, "SELECT MAX(id) FROM speech_delivery").Scan(&id); err != nil {
		return 0, fmt.Errorf("speech: ledger: delivery cursor: %w", err)
	}
	return id.Int64, nil
}

// ---- The principal's side ----

// Delivery returns the heard ledger's record of the speakable fact uri (an
// unversioned care:// URI): the version Ray last heard, his baseline, the
// announcement he is owed and the delivery log — what models.Timeline
// turns into the clinician's timeline. Followed says whether this
// principal follows the patient. It reads only the ledger (never the
// fact's words; P-18). Anything but an unversioned care:// URI is
// ErrInvalidArgument.
func (p *Principal) Delivery(ctx context.Context, uri models.URI) (models.DeliveryRecord, error) {
	if uri.Audience() != models.AudienceUser || uri.Version != 0 || !models.ValidID(uri.Patient) {
		return models.DeliveryRecord{}, fmt.Errorf("%w: %s is not an unversioned care:// fact", ErrInvalidArgument, uri)
	}
	rec, err := p.ledger.Delivery(ctx, uri.Patient, uri.String())
	if err != nil {
		return models.DeliveryRecord{}, err
	}
	p.do(func(st *state) { rec.Followed = st.patients[uri.Patient] })
	return rec, nil
}

// MaxDeliveryChanges bounds one DeliveryChanges answer: 500 facts.
const MaxDeliveryChanges = 500

// DeliveryChanges returns the facts whose delivery log grew after cursor
// (0: from the start), each once, in the order they first changed, and the
// cursor to pass next time. At most MaxDeliveryChanges log rows are read
// per call; call again with the returned cursor while it moves. The log is
// shared by every instance on one database, so this sees changes made by
// other instances too (the ledger's write lock commits rows in id order).
func (p *Principal) DeliveryChanges(ctx context.Context, cursor int64) ([]models.URI, int64, error) {
	rows, err := p.ledger.DeliveryChanges(ctx, cursor, MaxDeliveryChanges)
	if err != nil {
		return nil, cursor, err
	}
	seen := map[string]bool{}
	var out []models.URI
	for _, r := range rows {
		cursor = r.ID
		if seen[r.URI] {
			continue
		}
		seen[r.URI] = true
		if u, err := models.ParseURI(r.URI); err == nil && u.Audience() == models.AudienceUser {
			out = append(out, u)
		}
	}
	return out, cursor, nil
}

// DeliveryCursor returns the cursor of the delivery log's latest change:
// DeliveryChanges from it returns only what changes afterwards.
func (p *Principal) DeliveryCursor(ctx context.Context) (int64, error) {
	return p.ledger.DeliveryCursor(ctx)
}

// OnDelivery sets fn to be called after every change this process commits
// to the heard ledger (the delivery log may have grown), on the goroutine
// that committed it: a signal to call DeliveryChanges. fn must not block.
// A later call replaces fn; nil removes it.
func (p *Principal) OnDelivery(fn func()) {
	if fn == nil {
		p.ledger.onWrite.Store(nil)
		return
	}
	p.ledger.onWrite.Store(&fn)
}

// Notified records that a proactive notification ("a message from your
// care team", P-23) was accepted for patient at at: each announcement
// pending for him is marked told unasked, by notification. The notifier
// (skill/proactive) calls it, through bridge/app, only for a notification
// the Alexa API accepted. An invalid patient id is ErrInvalidArgument.
func (p *Principal) Notified(ctx context.Context, patient string, at time.Time) error {
	if !models.ValidID(patient) {
		return fmt.Errorf("%w: patient id", ErrInvalidArgument)
	}
	if at.IsZero() {
		at = p.cfg.Clock()
	}
	return p.ledger.Notified(ctx, patient, at)
}
