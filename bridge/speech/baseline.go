package speech

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// Followed reports which of patients the principal has followed before
// (their baseline is recorded).
func (l *ledger) Followed(ctx context.Context, patients []string) (map[string]bool, error) {
	out := make(map[string]bool, len(patients))
	for _, p := range patients {
		var one int
		err := l.db.QueryRowContext(ctx, l.q("SELECT 1 FROM speech_followed WHERE patient = ?"), p).Scan(&one)
		switch {
		case errors.Is(err, sql.ErrNoRows):
		case err != nil:
			return nil, fmt.Errorf("speech: ledger: followed: %w", err)
		default:
			out[p] = true
		}
	}
	return out, nil
}

// Follow records patient's starting point: the current version of each of
// his facts (uri → version), and that he is followed from now on. Facts at
// or below their baseline are never announced; the first sync of a patient
// therefore reads him nothing he has not been told is new (P-19).
func (l *ledger) Follow(ctx context.Context, patient string, facts map[string]int) error {
	return l.write(ctx, func(tx *sql.Tx) error {
		for uri, v := range facts {
			if _, err := tx.ExecContext(ctx, l.q(`INSERT INTO speech_baseline (patient, uri, version) VALUES (?, ?, ?)
ON CONFLICT (patient, uri) DO NOTHING`), patient, uri, v); err != nil {
				return fmt.Errorf("speech: ledger: baseline: %w", err)
			}
		}
		if _, err := tx.ExecContext(ctx, l.q(`INSERT INTO speech_followed (patient) VALUES (?) ON CONFLICT (patient) DO NOTHING`), patient); err != nil {
			return fmt.Errorf("speech: ledger: follow: %w", err)
		}
		return nil
	})
}

// Baseline returns the version of uri the patient was followed at, 0 if
// the fact did not exist then.
func (l *ledger) Baseline(ctx context.Context, patient, uri string) (int, error) {
	return l.baselineIn(ctx, l.db, patient, uri)
}

func (l *ledger) baselineIn(ctx context.Context, db querier, patient, uri string) (int, error) {
	var v int
	err := db.QueryRowContext(ctx, l.q("SELECT version FROM speech_baseline WHERE patient = ? AND uri = ?"), patient, uri).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("speech: ledger: baseline: %w", err)
	}
	return v, nil
}
