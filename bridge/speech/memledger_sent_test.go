package speech

import (
	"context"
	"slices"
	"time"

	"github.com/unsay/unsay/models"
)

// OfferedResponse is Offered recording sent in the same write (the
// store's speech_sent_response, migration 065).
func (l *memLedger) OfferedResponse(ctx context.Context, patient string, offers []models.LedgerOffer, sent models.LedgerSent, at time.Time) error {
	return l.offered(ctx, patient, offers, &sent, at)
}

// recordSent keeps sent (nil: nothing) first among its session's records,
// in place of sent.Replaces, the last models.SentPerSession of them, and
// forgets every record older than models.SentMemory.
func (d *memDB) recordSent(patient string, sent *models.LedgerSent, at time.Time) {
	if sent == nil {
		return
	}
	rec := *sent
	if rec.At.IsZero() {
		rec.At = time.UnixMilli(stampMS(at)).UTC()
	}
	rec.At = rec.At.Truncate(time.Millisecond)
	rec.Replaces = ""
	rec.Marks = slices.Clone(rec.Marks)
	if d.sent == nil {
		d.sent = map[memKey][]models.LedgerSent{}
	}
	for k, list := range d.sent {
		list = slices.DeleteFunc(list, func(s models.LedgerSent) bool { return s.At.Before(rec.At.Add(-models.SentMemory)) })
		if len(list) == 0 {
			delete(d.sent, k)
			continue
		}
		d.sent[k] = list
	}
	k := memKey{patient, sent.Session}
	list := slices.DeleteFunc(slices.Clone(d.sent[k]), func(s models.LedgerSent) bool {
		return s.Response == rec.Response || sent.Replaces != "" && s.Response == sent.Replaces
	})
	list = append([]models.LedgerSent{rec}, list...)
	d.sent[k] = list[:min(len(list), models.SentPerSession)]
}

func (l *memLedger) SentResponses(_ context.Context, patient, session string, at time.Time) ([]models.LedgerSent, error) {
	var out []models.LedgerSent
	since := time.UnixMilli(stampMS(at)).Add(-models.SentMemory)
	l.read(func(d *memDB) {
		for _, s := range d.sent[memKey{patient, session}] {
			if s.At.Before(since) {
				continue
			}
			s.Marks = slices.Clone(s.Marks)
			for i := range s.Marks {
				s.Marks[i].Response = s.Response
			}
			out = append(out, s)
		}
	})
	return out, nil
}

// recordAlone: sent has a Confirmed mark of the version he heard, not yet
// confirmed (the store's speech_heard.reopenable ≠ 0).
func (l *memLedger) recordAlone(patient string, sent *models.LedgerSent) bool {
	if sent == nil {
		return false
	}
	alone := false
	l.read(func(d *memDB) {
		for _, m := range sent.Marks {
			k := memKey{patient, m.URI}
			if h, ok := d.heard[k]; ok && m.Confirmed && h == m.Version && !d.confirmed[k] {
				alone = true
			}
		}
	})
	return alone
}
