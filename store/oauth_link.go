package store

import (
	"context"
	"fmt"
	"time"
)

// RedeemLinkCodeForConsent uses up a device-linking code on the OAuth
// consent page and returns the patient it was created for — the carer's
// proof that they may link a client to that patient. It is the same code
// (CreateLinkCode: six digits, ten minutes, single use) under the same
// limits as RedeemLinkCode: actor (the consent page passes "consent:" and
// the client's address) is blocked for LinkBlockDuration after
// LinkMaxFailures wrong codes within LinkFailureWindow, and
// LinkGlobalMaxFailures wrong codes from every actor together (Alexa users
// and consent pages alike) stop all redemptions while they are in the
// window. Nothing is linked to an Alexa user. Errors: ErrLinkCodeInvalid,
// ErrLinkBlocked, a *ValidationError for an empty or oversized actor, and,
// as for every write, an *UnavailableError when writes cannot commit.
func (s *Store) RedeemLinkCodeForConsent(ctx context.Context, actor, code string, now time.Time) (patient string, err error) {
	defer func() { err = s.writeErr(err) }()
	if actor == "" || len(actor) > 512 {
		return "", &ValidationError{Field: "actor", Reason: "must be 1–512 bytes"}
	}
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	tx, err := s.beginWrite(ctx)
	if err != nil {
		return "", err
	}
	defer tx.Rollback()
	if patient, err = s.takeLinkCode(ctx, tx, actor, code, now.UnixMilli()); err != nil {
		return "", err
	}
	if err := s.commit(tx); err != nil {
		return "", fmt.Errorf("store: redeem link code: commit: %w", err)
	}
	return patient, nil
}
