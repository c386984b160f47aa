package store

import (
	"context"
	"crypto/rand"
	"database/sql"
	"errors"
	"fmt"
	"math/big"
	"time"

	"github.com/unsay/unsay/models"
)

// Device-linking errors. Match with errors.Is.
var (
	// ErrLinkCodeInvalid: the code is wrong, expired or already used.
	ErrLinkCodeInvalid = errors.New("link code is invalid or expired")
	// ErrLinkBlocked: too many wrong codes from this Alexa user; try later.
	ErrLinkBlocked = errors.New("too many wrong link codes; linking is blocked for a while")
	// ErrLinkPaused: too many wrong codes from every Alexa user together
	// (LinkGlobalMaxFailures within LinkFailureWindow): every redemption is
	// refused until the window slides. It comes as a *LinkPausedError, which
	// says until when; errors.Is(err, ErrLinkBlocked) is true of it too.
	ErrLinkPaused = errors.New("too many wrong link codes from every device together; linking is paused")
)

// LinkPausedError is the global wrong-code block: Until is when the oldest
// failure that keeps the count at LinkGlobalMaxFailures leaves the window,
// so a redemption at Until or later is tried again (at most
// LinkFailureWindow after now). errors.Is matches ErrLinkPaused and
// ErrLinkBlocked.
type LinkPausedError struct{ Until time.Time }

func (e *LinkPausedError) Error() string {
	return ErrLinkPaused.Error() + " until " + e.Until.UTC().Format(time.RFC3339)
}

// Is reports whether target is ErrLinkPaused or ErrLinkBlocked.
func (e *LinkPausedError) Is(target error) bool {
	return target == ErrLinkPaused || target == ErrLinkBlocked
}

const (
	// LinkCodeTTL is how long a link code is valid: 10 minutes.
	LinkCodeTTL = 10 * time.Minute
	// LinkMaxFailures wrong codes within LinkFailureWindow block the Alexa user.
	LinkMaxFailures = 5
	// LinkFailureWindow is the window in which wrong codes are counted: 10 minutes.
	LinkFailureWindow = 10 * time.Minute
	// LinkBlockDuration is how long a blocked Alexa user stays blocked: 15 minutes.
	LinkBlockDuration = 15 * time.Minute
	// LinkGlobalMaxFailures wrong codes from all Alexa users together within
	// LinkFailureWindow stop every redemption until the window slides: many
	// accounts each guessing a few codes must not add up to a brute force of
	// the 900,000 codes.
	LinkGlobalMaxFailures = 50
	// LinkMaxLiveCodes is how many unexpired codes a patient can have; a new
	// one retires the oldest.
	LinkMaxLiveCodes = 3
)

// LinkedUser is an Alexa user linked to a patient.
type LinkedUser struct {
	UserID      string // Alexa context.System.user.userId
	APIEndpoint string // Alexa context.System.apiEndpoint, for proactive events
}

// CreateLinkCode creates a single-use six-digit code (100000–999999, from
// crypto/rand) that links a device to patient, valid for LinkCodeTTL from
// now. The caller authorizes (care.link bound to the patient). Errors: an
// invalid patient id (*ValidationError), *UnavailableError when the store
// cannot commit, the database.
func (s *Store) CreateLinkCode(ctx context.Context, patient string, now time.Time) (code string, expiresAt time.Time, err error) {
	defer func() { err = s.writeErr(err) }() // a full or read-only disk is an *UnavailableError
	if !models.ValidID(patient) {
		return "", time.Time{}, &ValidationError{Field: "patient", Reason: "must be 1–64 characters of [a-z0-9_.-]"}
	}
	expiresAt = now.UTC().Add(LinkCodeTTL).Truncate(time.Millisecond)
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	tx, err := s.beginWrite(ctx)
	if err != nil {
		return "", time.Time{}, err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, s.d.rebind(`DELETE FROM link_codes WHERE expires_ms <= ?`), now.UnixMilli()); err != nil {
		return "", time.Time{}, fmt.Errorf("store: link code: %w", err)
	}
	// Keep at most LinkMaxLiveCodes live codes per patient: retire the oldest.
	if _, err := tx.ExecContext(ctx, s.d.rebind(`DELETE FROM link_codes WHERE patient = ? AND expires_ms <= (
		SELECT expires_ms FROM link_codes WHERE patient = ? ORDER BY expires_ms DESC LIMIT 1 OFFSET ?)`),
		patient, patient, LinkMaxLiveCodes-1); err != nil {
		return "", time.Time{}, fmt.Errorf("store: link code: %w", err)
	}
	for range 20 {
		n, err := rand.Int(rand.Reader, big.NewInt(900000))
		if err != nil {
			return "", time.Time{}, fmt.Errorf("store: link code: %w", err)
		}
		code = fmt.Sprintf("%06d", 100000+n.Int64())
		var exists int
		if err := tx.QueryRowContext(ctx, s.d.rebind(`SELECT COUNT(*) FROM link_codes WHERE code = ?`), code).Scan(&exists); err != nil {
			return "", time.Time{}, fmt.Errorf("store: link code: %w", err)
		}
		if exists > 0 {
			continue
		}
		if _, err := tx.ExecContext(ctx, s.d.rebind(`INSERT INTO link_codes (code, patient, expires_ms) VALUES (?, ?, ?)`),
			code, patient, expiresAt.UnixMilli()); err != nil {
			return "", time.Time{}, fmt.Errorf("store: link code: %w", err)
		}
		if err := s.commit(tx); err != nil {
			return "", time.Time{}, fmt.Errorf("store: link code: commit: %w", err)
		}
		return code, expiresAt, nil
	}
	return "", time.Time{}, errors.New("store: link code: no free code found")
}

// RedeemLinkCode links alexaUserID (with its apiEndpoint) to the patient
// code was created for, and uses the code up. A wrong, expired or used code
// is ErrLinkCodeInvalid and counts as a failure; the LinkMaxFailures-th
// failure within LinkFailureWindow blocks alexaUserID for
// LinkBlockDuration, during which every attempt — even with a right code —
// is ErrLinkBlocked (and does not extend the block). LinkGlobalMaxFailures
// failures from every user together within LinkFailureWindow refuse every
// attempt with a *LinkPausedError (ErrLinkPaused) saying until when. An
// empty alexaUserID is a *ValidationError.
func (s *Store) RedeemLinkCode(ctx context.Context, alexaUserID, apiEndpoint, code string, now time.Time) (patient string, err error) {
	defer func() { err = s.writeErr(err) }()
	if alexaUserID == "" || len(alexaUserID) > 512 {
		return "", &ValidationError{Field: "userId", Reason: "must be 1–512 bytes"}
	}
	if len(apiEndpoint) > 512 {
		return "", &ValidationError{Field: "apiEndpoint", Reason: "must be at most 512 bytes"}
	}
	nowMS := now.UnixMilli()
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	defer s.links.forget(alexaUserID) // after the commit (or rollback): see linkCache
	tx, err := s.beginWrite(ctx)
	if err != nil {
		return "", err
	}
	defer tx.Rollback()

	patient, err = s.takeLinkCode(ctx, tx, alexaUserID, code, nowMS)
	if err != nil {
		return "", err
	}
	for _, q := range []struct {
		sql  string
		args []any
	}{
		{`DELETE FROM linked_users WHERE alexa_user_id = ?`, []any{alexaUserID}},
		{`INSERT INTO linked_users (alexa_user_id, patient, api_endpoint, linked_ms) VALUES (?, ?, ?, ?)`,
			[]any{alexaUserID, patient, apiEndpoint, nowMS}},
	} {
		if _, err := tx.ExecContext(ctx, s.d.rebind(q.sql), q.args...); err != nil {
			return "", fmt.Errorf("store: redeem link code: %w", err)
		}
	}
	if err := s.commit(tx); err != nil {
		return "", fmt.Errorf("store: redeem link code: commit: %w", err)
	}
	return patient, nil
}

// takeLinkCode is what every redemption of a link code shares (the
// Echo's RedeemLinkCode and the consent page's RedeemLinkCodeForConsent),
// in tx under writeMu: actor's block (ErrLinkBlocked), the global pause
// (*LinkPausedError), then the code. A wrong, expired or used code is
// counted against actor and that count committed at once, and it returns
// ErrLinkCodeInvalid (tx is then done). A right one is used up and actor's
// failures and block are cleared; it returns the code's patient and the
// caller adds its own writes to tx and commits.
func (s *Store) takeLinkCode(ctx context.Context, tx *sql.Tx, actor, code string, nowMS int64) (string, error) {
	var until int64
	err := tx.QueryRowContext(ctx, s.d.rebind(`SELECT until_ms FROM link_blocks WHERE alexa_user_id = ?`), actor).Scan(&until)
	switch {
	case err == nil && until > nowMS:
		return "", ErrLinkBlocked
	case err != nil && !errors.Is(err, sql.ErrNoRows):
		return "", fmt.Errorf("store: redeem link code: %w", err)
	}
	if err := s.globalPause(ctx, tx, nowMS); err != nil {
		return "", err // a *LinkPausedError: errors.Is(err, ErrLinkBlocked) too
	}
	var patient string
	err = tx.QueryRowContext(ctx, s.d.rebind(`SELECT patient FROM link_codes WHERE code = ? AND expires_ms > ?`), code, nowMS).Scan(&patient)
	if errors.Is(err, sql.ErrNoRows) {
		if err := s.linkFailure(ctx, tx, actor, nowMS); err != nil {
			return "", err
		}
		if err := s.commit(tx); err != nil {
			return "", fmt.Errorf("store: redeem link code: commit: %w", err)
		}
		return "", ErrLinkCodeInvalid
	}
	if err != nil {
		return "", fmt.Errorf("store: redeem link code: %w", err)
	}
	for _, q := range []struct {
		sql string
		arg string
	}{
		{`DELETE FROM link_codes WHERE code = ?`, code},
		{`DELETE FROM link_attempts WHERE alexa_user_id = ?`, actor},
		{`DELETE FROM link_blocks WHERE alexa_user_id = ?`, actor},
	} {
		if _, err := tx.ExecContext(ctx, s.d.rebind(q.sql), q.arg); err != nil {
			return "", fmt.Errorf("store: redeem link code: %w", err)
		}
	}
	return patient, nil
}

// globalPause returns a *LinkPausedError while LinkGlobalMaxFailures wrong
// codes from every actor together are inside LinkFailureWindow, nil
// otherwise. No failure is recorded while paused, so the pause ends when
// the oldest failure that keeps the count at the limit leaves the window.
func (s *Store) globalPause(ctx context.Context, tx *sql.Tx, nowMS int64) error {
	windowStart := nowMS - LinkFailureWindow.Milliseconds()
	var recent int
	if err := tx.QueryRowContext(ctx, s.d.rebind(`SELECT COUNT(*) FROM link_attempts WHERE at_ms > ?`), windowStart).Scan(&recent); err != nil {
		return fmt.Errorf("store: redeem link code: %w", err)
	}
	if recent < LinkGlobalMaxFailures {
		return nil
	}
	var at int64
	if err := tx.QueryRowContext(ctx, s.d.rebind(`SELECT at_ms FROM link_attempts WHERE at_ms > ? ORDER BY at_ms LIMIT 1 OFFSET ?`),
		windowStart, recent-LinkGlobalMaxFailures).Scan(&at); err != nil {
		return fmt.Errorf("store: redeem link code: %w", err)
	}
	return &LinkPausedError{Until: time.UnixMilli(at + LinkFailureWindow.Milliseconds()).UTC()}
}

// linkFailure records a wrong code and blocks the user at LinkMaxFailures.
func (s *Store) linkFailure(ctx context.Context, tx *sql.Tx, user string, nowMS int64) error {
	windowStart := nowMS - LinkFailureWindow.Milliseconds()
	if _, err := tx.ExecContext(ctx, s.d.rebind(`DELETE FROM link_attempts WHERE at_ms <= ?`), windowStart); err != nil {
		return fmt.Errorf("store: redeem link code: %w", err)
	}
	if _, err := tx.ExecContext(ctx, s.d.rebind(`INSERT INTO link_attempts (alexa_user_id, at_ms) VALUES (?, ?)`), user, nowMS); err != nil {
		return fmt.Errorf("store: redeem link code: %w", err)
	}
	var n int
	if err := tx.QueryRowContext(ctx, s.d.rebind(`SELECT COUNT(*) FROM link_attempts WHERE alexa_user_id = ? AND at_ms > ?`),
		user, windowStart).Scan(&n); err != nil {
		return fmt.Errorf("store: redeem link code: %w", err)
	}
	if n < LinkMaxFailures {
		return nil
	}
	for _, q := range []struct {
		sql  string
		args []any
	}{
		{`DELETE FROM link_blocks WHERE alexa_user_id = ?`, []any{user}},
		{`INSERT INTO link_blocks (alexa_user_id, until_ms) VALUES (?, ?)`, []any{user, nowMS + LinkBlockDuration.Milliseconds()}},
	} {
		if _, err := tx.ExecContext(ctx, s.d.rebind(q.sql), q.args...); err != nil {
			return fmt.Errorf("store: redeem link code: %w", err)
		}
	}
	return nil
}

// LinkedPatient returns the patient and apiEndpoint alexaUserID is linked
// to; ok is false when it is not linked.
func (s *Store) LinkedPatient(ctx context.Context, alexaUserID string) (patient, apiEndpoint string, ok bool, err error) {
	cache := s.d.name() == "sqlite" // see linkCache
	var gen uint64
	if cache {
		a, g, hit := s.links.get(alexaUserID)
		if hit {
			return a.patient, a.apiEndpoint, a.ok, nil
		}
		gen = g
	}
	err = s.queryRowPrepared(ctx, s.db, s.d.rebind(`SELECT patient, api_endpoint FROM linked_users WHERE alexa_user_id = ?`),
		alexaUserID).Scan(&patient, &apiEndpoint)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		patient, apiEndpoint, err = "", "", nil
	case err != nil:
		return "", "", false, fmt.Errorf("store: linked patient: %w", err)
	default:
		ok = true
	}
	if cache {
		s.links.put(alexaUserID, linkAnswer{patient: patient, apiEndpoint: apiEndpoint, ok: ok}, gen)
	}
	return patient, apiEndpoint, ok, nil
}

// LinkedUsers returns every Alexa user linked to patient, by user id.
func (s *Store) LinkedUsers(ctx context.Context, patient string) ([]LinkedUser, error) {
	rows, err := s.db.QueryContext(ctx, s.d.rebind(`SELECT alexa_user_id, api_endpoint FROM linked_users
		WHERE patient = ? ORDER BY alexa_user_id`), patient)
	if err != nil {
		return nil, fmt.Errorf("store: linked users: %w", err)
	}
	defer rows.Close()
	var out []LinkedUser
	for rows.Next() {
		var u LinkedUser
		if err := rows.Scan(&u.UserID, &u.APIEndpoint); err != nil {
			return nil, fmt.Errorf("store: linked users: %w", err)
		}
		out = append(out, u)
	}
	return out, rows.Err()
}

// LinkedPatients returns every patient with at least one linked Alexa user,
// sorted: the patients the speech principal follows at startup.
func (s *Store) LinkedPatients(ctx context.Context) ([]string, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT DISTINCT patient FROM linked_users ORDER BY patient`)
	if err != nil {
		return nil, fmt.Errorf("store: linked patients: %w", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var p string
		if err := rows.Scan(&p); err != nil {
			return nil, fmt.Errorf("store: linked patients: %w", err)
		}
		out = append(out, p)
	}
	return out, rows.Err()
}

// LiveLinkCodes returns how many unexpired link codes patient has at now
// and when the oldest of them expires (zero when none): what
// CreateLinkCode will retire when it is LinkMaxLiveCodes, so the carer
// can be told. Errors: the database.
func (s *Store) LiveLinkCodes(ctx context.Context, patient string, now time.Time) (n int, oldestExpires time.Time, err error) {
	var oldest sql.NullInt64
	if err := s.db.QueryRowContext(ctx, s.d.rebind(`SELECT COUNT(*), MIN(expires_ms) FROM link_codes WHERE patient = ? AND expires_ms > ?`),
		patient, now.UnixMilli()).Scan(&n, &oldest); err != nil {
		return 0, time.Time{}, fmt.Errorf("store: live link codes: %w", err)
	}
	if oldest.Valid {
		oldestExpires = time.UnixMilli(oldest.Int64).UTC()
	}
	return n, oldestExpires, nil
}
