package speech

import (
	"context"
	"fmt"

	"github.com/unsay/unsay/models"
)

// OfferedResponse is Offered, and in the same ledger transaction it
// records sent — the response about to be written on an Alexa session, its
// id and what it marks (each mark's Response its id) — as that session's
// last (P-24, finding U8): Alexa's error report of the response, on any
// instance and after a restart, finds what it marked (SentResponses),
// whatever session attributes Alexa echoes. One more row in the
// transaction Offered opens anyway; when Offered writes nothing (every
// offer a fact told at a version he heard), it is recorded only by the
// first telling of a version marked heard (the one that will confirm it;
// LedgerStore.OfferedResponse), never a transaction per turn. A sent
// without Session or Marks is recorded nowhere (Offered alone). A
// malformed patient, offer, session id (models.ValidSessionID), response
// id (models.ValidID; Replaces "" or of that form) or mark (as NotPlayed
// refuses it, or with a Response other than sent.ID) is
// ErrInvalidArgument and nothing is written.
func (p *Principal) OfferedResponse(ctx context.Context, patient string, offers []models.Offer, sent models.SentResponse) error {
	if sent.Session == "" || len(sent.Marks) == 0 {
		return p.Offered(ctx, patient, offers)
	}
	if !models.ValidID(patient) {
		return fmt.Errorf("%w: patient id", ErrInvalidArgument)
	}
	switch {
	case !models.ValidSessionID(sent.Session):
		return fmt.Errorf("%w: session id", ErrInvalidArgument)
	case !models.ValidID(sent.ID):
		return fmt.Errorf("%w: response id %q", ErrInvalidArgument, sent.ID)
	case sent.Replaces != "" && !models.ValidID(sent.Replaces):
		return fmt.Errorf("%w: replaced response id %q", ErrInvalidArgument, sent.Replaces)
	}
	rows := make([]offer, 0, len(offers))
	for _, o := range offers {
		if err := checkFact(patient, o.URI, o.Version); err != nil {
			return err
		}
		rows = append(rows, offer{ID: o.ID, URI: o.URI.String(), Version: o.Version, Told: o.Told})
	}
	rec := models.LedgerSent{Session: sent.Session, Response: sent.ID, At: sent.At, Replaces: sent.Replaces}
	for _, m := range sent.Marks {
		lm, err := checkMark(patient, m)
		if err != nil {
			return err
		}
		if m.Response != sent.ID {
			return fmt.Errorf("%w: %s: mark of response %q in response %q", ErrInvalidArgument, m.URI, m.Response, sent.ID)
		}
		rec.Marks = append(rec.Marks, lm)
	}
	return p.ledger.OfferedResponse(ctx, patient, rows, rec)
}

// SentResponses returns the record of the responses written on Alexa
// session for patient that marked something (OfferedResponse), the last
// first, at most models.SentPerSession, within models.SentMemory: the same
// on every instance. A malformed patient or session id is
// ErrInvalidArgument; a recorded mark that no longer parses is an error
// too (nothing is returned).
func (p *Principal) SentResponses(ctx context.Context, patient, session string) ([]models.SentResponse, error) {
	if !models.ValidID(patient) {
		return nil, fmt.Errorf("%w: patient id", ErrInvalidArgument)
	}
	if !models.ValidSessionID(session) {
		return nil, fmt.Errorf("%w: session id", ErrInvalidArgument)
	}
	recs, err := p.ledger.SentResponses(ctx, patient, session)
	if err != nil {
		return nil, err
	}
	out := make([]models.SentResponse, 0, len(recs))
	for _, r := range recs {
		s := models.SentResponse{Session: r.Session, ID: r.Response, At: r.At}
		for _, m := range r.Marks {
			u, err := models.ParseURI(m.URI)
			if err != nil {
				return nil, fmt.Errorf("speech: sent responses: %s: %w", r.Response, err)
			}
			s.Marks = append(s.Marks, models.Marked{URI: u, HeardBefore: m.HeardBefore, From: m.From, Version: m.Version, Confirmed: m.Confirmed, Response: m.Response})
		}
		out = append(out, s)
	}
	return out, nil
}

// checkMark validates one mark of patient named by the skill, as NotPlayed
// does, and returns it as the ledger keeps it.
func checkMark(patient string, m models.Marked) (marked, error) {
	if err := checkFact(patient, m.URI, m.Version); err != nil {
		return marked{}, err
	}
	if m.HeardBefore < 0 || m.From < 0 || m.HeardBefore >= m.Version || m.From >= m.Version ||
		m.Confirmed && (m.HeardBefore != 0 || m.From != 0) {
		return marked{}, fmt.Errorf("%w: %s: heard before v%d, from v%d, marked v%d", ErrInvalidArgument, m.URI, m.HeardBefore, m.From, m.Version)
	}
	if m.Response != "" && !models.ValidID(m.Response) {
		return marked{}, fmt.Errorf("%w: %s: response id %q", ErrInvalidArgument, m.URI, m.Response)
	}
	return marked{URI: m.URI.String(), HeardBefore: m.HeardBefore, From: m.From, Version: m.Version, Confirmed: m.Confirmed, Response: m.Response}, nil
}
