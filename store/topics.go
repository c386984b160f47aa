package store

import (
	"context"
	"fmt"

	"github.com/unsay/unsay/models"
)

// Topic is one fact of a patient, named: its domain and audience.
type Topic struct {
	Domain   string
	Audience models.Audience
}

// Topics returns the domains patient has facts in, of both audiences,
// sorted by domain, with each one's audience — names only, never a value
// (the caller shows a principal only the topics it may read or write, P-1;
// the write API tells
// a writer that its write created a patient's first fact or a new topic,
// naming the topics already on record: a typo in the patient id or the
// domain sends a change to nobody, or leaves the instruction it meant to
// revise current). One query on the facts primary key (patient, domain).
// Errors: a store failure.
func (s *Store) Topics(ctx context.Context, patient string) ([]Topic, error) {
	rows, err := s.queryPrepared(ctx, s.d.rebind(`SELECT domain, audience FROM facts WHERE patient = ? ORDER BY domain`), patient)
	if err != nil {
		return nil, fmt.Errorf("store: topics: %w", err)
	}
	defer rows.Close()
	var out []Topic
	for rows.Next() {
		var t Topic
		var a string
		if err := rows.Scan(&t.Domain, &a); err != nil {
			return nil, fmt.Errorf("store: topics: %w", err)
		}
		t.Audience = models.Audience(a)
		out = append(out, t)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: topics: %w", err)
	}
	return out, nil
}

// KnownFact reports, without reading the database, whether this process
// knows that patient has a fact of domain: it committed a version of it
// recently (the heads Publish keeps for planCached, at most
// headCacheSize of them; a fact whose head carries a clip is not kept).
// Facts are never deleted, so true is always right; false says nothing —
// ask Topics. The write API answers a revision of a known fact without
// its one Topics query (findings U12 and V2 check only writes that would
// create a topic; issue 17: the query was an eighth of a signed write's
// CPU outside the store's commit).
func (s *Store) KnownFact(patient, domain string) bool {
	return s.heads.Contains([2]string{patient, domain})
}
