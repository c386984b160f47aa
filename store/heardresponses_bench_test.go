package store

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/unsay/unsay/models"
)

// BenchmarkHeardLedger_OfferedWithTheResponsesRecord measures what the
// record of a response's marks (finding U8) adds to the transaction that
// records its offers: "offers" is Offered alone, "offers+record" is
// OfferedResponse with a two-mark record on one session (an insert and two
// deletes in the same transaction; no transaction of its own, issue 17).
// Each offer is of a version not offered before, so both write (and, on
// SQLite, commit to the WAL) as a response carrying something does.
func BenchmarkHeardLedger_OfferedWithTheResponsesRecord(b *testing.B) {
	for _, withRecord := range []bool{false, true} {
		name := "offers"
		if withRecord {
			name = "offers+record"
		}
		b.Run(name, func(b *testing.B) {
			s, _ := openTest(b, nil)
			l := s.HeardLedger()
			ctx := context.Background()
			const uri = "care://bench/weight_bearing"
			at := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
			n := 0
			for b.Loop() {
				n++
				// A version not offered before: the offer writes a row, as a
				// response's first offer of a version does.
				offers := []models.LedgerOffer{{URI: uri, Version: n + 1, Told: true}}
				var err error
				if withRecord {
					id := fmt.Sprintf("%032x", n)
					sent := models.LedgerSent{Session: "amzn1.echo-api.session.bench", Response: id, At: at.Add(time.Duration(n) * time.Second),
						Marks: []models.LedgerMark{{URI: uri, HeardBefore: 0, From: 0, Version: n + 1, Response: id}, {URI: "care://bench/pain_plan", Version: 2, Confirmed: true, Response: id}}}
					err = l.OfferedResponse(ctx, "bench", offers, sent, time.Time{})
				} else {
					err = l.Offered(ctx, "bench", offers, time.Time{})
				}
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkHeardLedger_OfferedAPlainTellingOfWhatHeHeard measures the
// plainest turn's offers — a fact told at the version he heard, confirmed
// already — with and without the response's record: no transaction either
// way; the record adds one read (recordAlone: is a version still to be
// confirmed?).
func BenchmarkHeardLedger_OfferedAPlainTellingOfWhatHeHeard(b *testing.B) {
	for _, withRecord := range []bool{false, true} {
		name := "offers"
		if withRecord {
			name = "offers+record"
		}
		b.Run(name, func(b *testing.B) {
			s, _ := openTest(b, nil)
			l := s.HeardLedger()
			ctx := context.Background()
			const uri = "care://bench/weight_bearing"
			for range 2 { // heard, then confirmed
				if _, err := l.MarkTold(ctx, "bench", uri, 3, models.Hearing{}); err != nil {
					b.Fatal(err)
				}
			}
			offers := []models.LedgerOffer{{URI: uri, Version: 3, Told: true}}
			sent := models.LedgerSent{Session: "amzn1.echo-api.session.bench", Response: fmt.Sprintf("%032x", 1),
				Marks: []models.LedgerMark{{URI: uri, Version: 3, Confirmed: true, Response: fmt.Sprintf("%032x", 1)}}}
			for b.Loop() {
				var err error
				if withRecord {
					err = l.OfferedResponse(ctx, "bench", offers, sent, time.Time{})
				} else {
					err = l.Offered(ctx, "bench", offers, time.Time{})
				}
				if err != nil {
					b.Fatal(err)
				}
			}
			if got, err := l.SentResponses(ctx, "bench", sent.Session, time.Time{}); err != nil || len(got) != 0 {
				b.Fatalf("recorded %v, %v; want nothing", got, err)
			}
		})
	}
}
