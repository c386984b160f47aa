package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/unsay/unsay/models"
)

// The delivery log (speech_delivery, migration 040): what happened to each
// version of a speakable fact on its way to Ray, for the clinician's
// timeline ("did Ray hear my change?", models.Timeline). Every event is
// written in the transaction of the ledger change it describes, so the log
// never disagrees with the ledger; at most one event of each kind per
// version is kept (the first). It holds patient, URI, version, kind, time,
// device kind and how — no clinical text.

// logDelivery appends the first event of kind for version of uri, stamped
// how.At (the store's clock when zero), with how's device and via.
func (l *HeardLedger) logDelivery(ctx context.Context, tx *sql.Tx, patient, uri string, version int, how models.Hearing, kind models.DeliveryKind) error {
	_, err := l.exec(ctx, tx, l.q(`INSERT INTO speech_delivery (patient, uri, version, event, at_ms, device, via) VALUES (?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (patient, uri, version, event) DO NOTHING`), patient, uri, version, string(kind), l.stamp(how.At).UnixMilli(), string(how.Device), string(how.Via))
	if err != nil {
		return fmt.Errorf("store: heard ledger: delivery log: %w", err)
	}
	return nil
}

// Notified records that a proactive notification reached patient at at:
// every announcement pending for him now gets a notified event at its
// to_version (unless it has one).
func (l *HeardLedger) Notified(ctx context.Context, patient string, at time.Time) error {
	atMS := l.stamp(at).UnixMilli()
	return l.write(ctx, func(tx *sql.Tx) error {
		_, err := l.exec(ctx, tx, l.q(`INSERT INTO speech_delivery (patient, uri, version, event, at_ms, via)
SELECT patient, uri, to_version, 'notified', ?, 'notification' FROM speech_announcements WHERE patient = ? AND state = 'pending'
ON CONFLICT (patient, uri, version, event) DO NOTHING`), atMS, patient)
		if err != nil {
			return fmt.Errorf("store: heard ledger: notified: %w", err)
		}
		return nil
	})
}

// Delivery returns the ledger's record of uri: the heard version, the
// baseline, the pending announcement and the delivery log, oldest first.
// Followed is left for the caller.
func (l *HeardLedger) Delivery(ctx context.Context, patient, uri string) (models.DeliveryRecord, error) {
	var rec models.DeliveryRecord
	var err error
	if rec.Heard, err = l.heardIn(ctx, l.s.db, patient, uri); err != nil {
		return models.DeliveryRecord{}, err
	}
	if rec.Baseline, err = l.baselineIn(ctx, l.s.db, patient, uri); err != nil {
		return models.DeliveryRecord{}, err
	}
	if rec.Offered, err = l.offeredIn(ctx, l.s.db, patient, uri); err != nil {
		return models.DeliveryRecord{}, err
	}
	var p models.PendingDelivery
	err = l.s.queryRowPrepared(ctx, l.s.db, l.q(`SELECT a.from_version, a.to_version,
EXISTS (SELECT 1 FROM speech_offered_version o WHERE o.patient = a.patient AND o.uri = a.uri AND o.version > a.from_version)
FROM speech_announcements a WHERE a.patient = ? AND a.uri = ? AND a.state = 'pending'`), patient, uri).Scan(&p.From, &p.To, &p.Offered)
	switch {
	case err == nil:
		rec.Pending = &p
	case !errors.Is(err, sql.ErrNoRows):
		return models.DeliveryRecord{}, fmt.Errorf("store: heard ledger: delivery: %w", err)
	}
	rows, err := l.s.queryPrepared(ctx, l.q(`SELECT version, event, at_ms, device, via FROM speech_delivery
WHERE patient = ? AND uri = ? ORDER BY id`), patient, uri)
	if err != nil {
		return models.DeliveryRecord{}, fmt.Errorf("store: heard ledger: delivery: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var e models.DeliveryEvent
		var kind, device, via string
		var atMS int64
		if err := rows.Scan(&e.Version, &kind, &atMS, &device, &via); err != nil {
			return models.DeliveryRecord{}, fmt.Errorf("store: heard ledger: delivery: %w", err)
		}
		e.Kind, e.At, e.Device, e.Via = models.DeliveryKind(kind), time.UnixMilli(atMS).UTC(), models.Device(device), models.Via(via)
		rec.Events = append(rec.Events, e)
	}
	if err := rows.Err(); err != nil {
		return models.DeliveryRecord{}, fmt.Errorf("store: heard ledger: delivery: %w", err)
	}
	return rec, nil
}

// DeliveryChanges returns the delivery-log rows after id after, oldest
// first, at most limit. The ledger's write lock commits rows in id order,
// so a reader following the ids misses none, whichever instance wrote them.
func (l *HeardLedger) DeliveryChanges(ctx context.Context, after int64, limit int) ([]models.DeliveryChange, error) {
	rows, err := l.s.queryPrepared(ctx, l.q(`SELECT id, uri FROM speech_delivery WHERE id > ? ORDER BY id LIMIT ?`), after, limit)
	if err != nil {
		return nil, fmt.Errorf("store: heard ledger: delivery changes: %w", err)
	}
	defer rows.Close()
	var out []models.DeliveryChange
	for rows.Next() {
		var c models.DeliveryChange
		if err := rows.Scan(&c.ID, &c.URI); err != nil {
			return nil, fmt.Errorf("store: heard ledger: delivery changes: %w", err)
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: heard ledger: delivery changes: %w", err)
	}
	return out, nil
}

// DeliveryCursor returns the id of the latest delivery-log row, 0 when none.
func (l *HeardLedger) DeliveryCursor(ctx context.Context) (int64, error) {
	var id sql.NullInt64
	if err := l.s.queryRowPrepared(ctx, l.s.db, "SELECT MAX(id) FROM speech_delivery").Scan(&id); err != nil {
		return 0, fmt.Errorf("store: heard ledger: delivery cursor: %w", err)
	}
	return id.Int64, nil
}
