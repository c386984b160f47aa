package store

import (
	"context"
	"fmt"
)

// Topics returns the domains patient has facts in, of both audiences,
// sorted — names only, never a value or an audience (the write API tells
// a writer that its write created a patient's first fact or a new topic,
// naming the topics already on record: a typo in the patient id or the
// domain sends a change to nobody, or leaves the instruction it meant to
// revise current). One query on the facts primary key (patient, domain).
// Errors: a store failure.
func (s *Store) Topics(ctx context.Context, patient string) ([]string, error) {
	rows, err := s.queryPrepared(ctx, s.d.rebind(`SELECT domain FROM facts WHERE patient = ? ORDER BY domain`), patient)
	if err != nil {
		return nil, fmt.Errorf("store: topics: %w", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var d string
		if err := rows.Scan(&d); err != nil {
			return nil, fmt.Errorf("store: topics: %w", err)
		}
		out = append(out, d)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: topics: %w", err)
	}
	return out, nil
}
