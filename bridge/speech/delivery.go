package speech

import (
	"context"
	"fmt"
	"time"

	"github.com/unsay/unsay/models"
)

// The delivery log (the ledger's speech_delivery): what happened to each
// version of a speakable fact on its way to Ray, for the clinician's
// timeline ("did Ray hear my change?", models.Timeline). The LedgerStore
// writes every event in the transaction of the ledger change it
// describes, so the log never disagrees with the ledger; at most one
// event of each kind per version is kept (the first). It holds patient,
// URI, version, kind, time, device kind and how — no clinical text.

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
func (p *Principal) OnDelivery(fn func()) { p.ledger.OnWrite(fn) }

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
