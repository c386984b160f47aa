package store

import (
	"context"
	"database/sql"
	"errors"
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
// ErrLinkBlocked, a *ValidationError for an empty or oversized actor.
func (s *Store) RedeemLinkCodeForConsent(ctx context.Context, actor, code string, now time.Time) (patient string, err error) {
	if actor == "" || len(actor) > 512 {
		return "", &ValidationError{Field: "actor", Reason: "must be 1–512 bytes"}
	}
	nowMS := now.UnixMilli()
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	tx, err := s.beginWrite(ctx)
	if err != nil {
		return "", err
	}
	defer tx.Rollback()

	var until int64
	err = tx.QueryRowContext(ctx, s.d.rebind(`SELECT until_ms FROM link_blocks WHERE alexa_user_id = ?`), actor).Scan(&until)
	switch {
	case err == nil && until > nowMS:
		return "", ErrLinkBlocked
	case err != nil && !errors.Is(err, sql.ErrNoRows):
		return "", fmt.Errorf("store: redeem link code: %w", err)
	}
	if err := s.globalPause(ctx, tx, nowMS); err != nil {
		return "", err // a *LinkPausedError: errors.Is(err, ErrLinkBlocked) too
	}
	err = tx.QueryRowContext(ctx, s.d.rebind(`SELECT patient FROM link_codes WHERE code = ? AND expires_ms > ?`), code, nowMS).Scan(&patient)
	if errors.Is(err, sql.ErrNoRows) {
		if err := s.linkFailure(ctx, tx, actor, nowMS); err != nil {
			return "", err
		}
		if err := tx.Commit(); err != nil {
			return "", fmt.Errorf("store: redeem link code: commit: %w", err)
		}
		return "", ErrLinkCodeInvalid
	}
	if err != nil {
		return "", fmt.Errorf("store: redeem link code: %w", err)
	}
	if _, err := tx.ExecContext(ctx, s.d.rebind(`DELETE FROM link_codes WHERE code = ?`), code); err != nil {
		return "", fmt.Errorf("store: redeem link code: %w", err)
	}
	for _, q := range []string{
		`DELETE FROM link_attempts WHERE alexa_user_id = ?`,
		`DELETE FROM link_blocks WHERE alexa_user_id = ?`,
	} {
		if _, err := tx.ExecContext(ctx, s.d.rebind(q), actor); err != nil {
			return "", fmt.Errorf("store: redeem link code: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return "", fmt.Errorf("store: redeem link code: commit: %w", err)
	}
	return patient, nil
}
