package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/unsay/unsay/models"
)

// The not-played reports the heard ledger applied (speech_not_played,
// migration 062; P-24, finding F14). Alexa may deliver one response's
// SessionEndedRequest ERROR twice (a retry, a resend that arrives late),
// and the marks it carries back are the same: applied again, the second
// would re-open a retraction delivered since, or undo a confirmation made
// after the first. Each response's marks carry its id
// (models.LedgerMark.Response), and NotPlayed, in its own transaction,
// skips the marks of a response whose report it applied and records the
// ids it applies. An id is kept for models.NotPlayedMemory: each report
// deletes the ones older than that, so the table holds a day of reports.
// Marks without an id (a build that wrote none) are applied every time.

// reportsApplied deletes the reports applied more than
// models.NotPlayedMemory before at and returns which response ids of ms
// had their report applied since (the empty id never).
func (l *HeardLedger) reportsApplied(ctx context.Context, tx *sql.Tx, patient string, ms []models.LedgerMark, at time.Time) (map[string]bool, error) {
	if _, err := l.exec(ctx, tx, l.q("DELETE FROM speech_not_played WHERE at_ms < ?"), at.Add(-models.NotPlayedMemory).UnixMilli()); err != nil {
		return nil, fmt.Errorf("store: heard ledger: not played: forget old reports: %w", err)
	}
	applied := map[string]bool{}
	for _, m := range ms {
		if m.Response == "" {
			continue
		}
		if _, ok := applied[m.Response]; ok {
			continue
		}
		var one int
		err := l.s.queryRowPrepared(ctx, tx, l.q("SELECT 1 FROM speech_not_played WHERE patient = ? AND response = ?"), patient, m.Response).Scan(&one)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return nil, fmt.Errorf("store: heard ledger: not played: reports: %w", err)
		}
		applied[m.Response] = err == nil
	}
	for id, ok := range applied {
		if !ok {
			delete(applied, id)
		}
	}
	return applied, nil
}

// recordReports records the response ids of ms as applied at at.
func (l *HeardLedger) recordReports(ctx context.Context, tx *sql.Tx, patient string, ms []models.LedgerMark, at time.Time) error {
	for _, m := range ms {
		if m.Response == "" {
			continue
		}
		if _, err := l.exec(ctx, tx, l.q("INSERT INTO speech_not_played (patient, response, at_ms) VALUES (?, ?, ?) ON CONFLICT (patient, response) DO NOTHING"), patient, m.Response, at.UnixMilli()); err != nil {
			return fmt.Errorf("store: heard ledger: not played: record report: %w", err)
		}
	}
	return nil
}
