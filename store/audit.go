package store

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/unsay/unsay/models"
)

// DevAuditKey is the development default audit key, used when
// Options.AuditKey is empty. It is public: announce it at startup and set
// UNSAY_AUDIT_KEY in production.
const DevAuditKey = "unsay-development-audit-key-NOT-SECRET"

// auditChainLabel domain-separates the chain key from any other use of the
// audit key: chainKey = HMAC-SHA256(auditKey, auditChainLabel).
const auditChainLabel = "unsay/v1/audit-chain"

// auditRowLabel starts every row preimage.
const auditRowLabel = "unsay/v1/audit-row"

func auditChainKey(auditKey []byte) []byte {
	m := hmac.New(sha256.New, auditKey)
	m.Write([]byte(auditChainLabel))
	return m.Sum(nil)
}

// auditPreimage is THE canonical encoding of an audit row, shared by the
// writer (Audit) and the verifier (VerifyAudit): the label, then each field
// as decimal byte length, ':', bytes, '\n', in this order: seq, at
// (models.TimeLayout), actor, uri, outcome, reason, via, author, prevMAC.
// Length prefixes make it unambiguous whatever bytes a field holds.
func auditPreimage(e AuditEntry, prevMAC string) []byte {
	fields := []string{
		strconv.FormatInt(e.Seq, 10),
		e.At.UTC().Format(models.TimeLayout),
		e.Actor, e.URI, e.Outcome, string(e.Reason), e.Via, e.Author,
		prevMAC,
	}
	b := []byte(auditRowLabel + "\n")
	for _, f := range fields {
		b = strconv.AppendInt(b, int64(len(f)), 10)
		b = append(b, ':')
		b = append(b, f...)
		b = append(b, '\n')
	}
	return b
}

func (s *Store) auditMAC(e AuditEntry, prevMAC string) string {
	m := hmac.New(sha256.New, s.chainKey)
	m.Write(auditPreimage(e, prevMAC))
	return hex.EncodeToString(m.Sum(nil))
}

// Valid reports whether r is one of the closed set of audit reasons.
func (r AuditReason) Valid() bool {
	switch r {
	case ReasonOK, ReasonBadSignature, ReasonStaleTimestamp, ReasonReplay, ReasonInvalid,
		ReasonTooLarge, ReasonAudienceChange, ReasonForbidden, ReasonWrongPatient:
		return true
	}
	return false
}

// validVia reports whether v is one of the closed set of Via values.
func validVia(v string) bool {
	switch v {
	case "hmac", "bearer", "seed", "cli":
		return true
	}
	return false
}

// sanitizeAudit keeps attacker bytes out of a row (seed 000, I-14): a URI
// that is not a strict care URI is recorded as "", an author that is not a
// valid authorId as "". Actor is the verified principal and is kept, capped
// at 256 bytes.
func sanitizeAudit(e AuditEntry) (AuditEntry, error) {
	if e.Outcome != "accepted" && e.Outcome != "refused" {
		return e, &ValidationError{Field: "outcome", Reason: `must be "accepted" or "refused"`}
	}
	if !e.Reason.Valid() {
		return e, &ValidationError{Field: "reason", Reason: "not one of the closed set of audit reasons"}
	}
	if (e.Outcome == "accepted") != (e.Reason == ReasonOK) {
		return e, &ValidationError{Field: "reason", Reason: `"ok" is the reason of, and only of, an accepted write`}
	}
	if !validVia(e.Via) {
		return e, &ValidationError{Field: "via", Reason: "must be hmac, bearer, seed or cli"}
	}
	if e.Actor == "" || len(e.Actor) > 256 {
		return e, &ValidationError{Field: "actor", Reason: "must be 1–256 bytes (the verified principal)"}
	}
	if e.URI != "" {
		if u, err := models.ParseURI(e.URI); err != nil {
			e.URI = ""
		} else {
			e.URI = u.String()
		}
	}
	if e.Author != "" && !ValidAuthorID(e.Author) {
		e.Author = ""
	}
	return e, nil
}

// Audit appends one row to the HMAC-chained audit log (P-14). At and MAC are
// set by the store (At from its clock, truncated to ms), and Seq too; the
// row and the audit head (count, last MAC) are written in one transaction.
// Outcome must be "accepted" (with ReasonOK) or "refused" (with any other
// reason); Reason one of the closed set; Via one of hmac, bearer, seed,
// cli; Actor non-empty. An invalid entry is a *ValidationError and nothing
// is written. A URI that is not a care URI and an Author that is not a
// valid authorId are recorded as "" (no attacker bytes in a row).
func (s *Store) Audit(ctx context.Context, e AuditEntry) error {
	e, err := sanitizeAudit(e)
	if err != nil {
		return err
	}
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	tx, err := s.beginWrite(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if err := s.appendAudit(ctx, tx, e); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("store: audit: commit: %w", err)
	}
	return nil
}

func (s *Store) appendAudit(ctx context.Context, tx *sql.Tx, e AuditEntry) error {
	var (
		count int64
		last  string
	)
	if err := s.queryRowPrepared(ctx, tx, `SELECT count, last_mac FROM audit_head WHERE id = 1`).Scan(&count, &last); err != nil {
		return fmt.Errorf("store: audit: head: %w", err)
	}
	e.Seq = count + 1
	e.At = s.clock().UTC().Truncate(time.Millisecond)
	e.MAC = s.auditMAC(e, last)
	if _, err := s.execPrepared(ctx, tx, s.d.rebind(`INSERT INTO audit (seq, at, actor, uri, outcome, reason, via, author, mac)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`),
		e.Seq, e.At.UnixMilli(), e.Actor, e.URI, e.Outcome, string(e.Reason), e.Via, e.Author, e.MAC); err != nil {
		return fmt.Errorf("store: audit: %w", err)
	}
	if _, err := s.execPrepared(ctx, tx, s.d.rebind(`UPDATE audit_head SET count = ?, last_mac = ? WHERE id = 1`), e.Seq, e.MAC); err != nil {
		return fmt.Errorf("store: audit: head: %w", err)
	}
	return nil
}

// AuditRows returns the audit rows with Seq > after, oldest first, at most limit (≤ 0: all).
func (s *Store) AuditRows(ctx context.Context, after int64, limit int) ([]AuditEntry, error) {
	if limit <= 0 {
		limit = math.MaxInt32 // all (Postgres refuses a negative LIMIT)
	}
	rows, err := s.db.QueryContext(ctx, s.d.rebind(`SELECT seq, at, actor, uri, outcome, reason, via, author, mac
		FROM audit WHERE seq > ? ORDER BY seq LIMIT ?`), after, limit)
	if err != nil {
		return nil, fmt.Errorf("store: audit rows: %w", err)
	}
	defer rows.Close()
	var out []AuditEntry
	for rows.Next() {
		var (
			e      AuditEntry
			at     int64
			reason string
		)
		if err := rows.Scan(&e.Seq, &at, &e.Actor, &e.URI, &e.Outcome, &reason, &e.Via, &e.Author, &e.MAC); err != nil {
			return nil, fmt.Errorf("store: audit rows: %w", err)
		}
		e.At = time.UnixMilli(at).UTC()
		e.Reason = AuditReason(reason)
		out = append(out, e)
	}
	return out, rows.Err()
}

// VerifyAudit checks the audit chain; badRow is the first row whose MAC
// disagrees (or the first missing row of a truncated tail), 0 when intact.
//
// Rows must be numbered 1, 2, … without gaps, each MAC must equal the HMAC
// of its canonical preimage chained to the previous row's MAC, and the
// audit head (count and last MAC, written in the same transaction as each
// row) must match the last row: fewer rows than the head's count means a
// truncated tail, reported as count+1 of the rows present. (Deleting the
// tail AND rewinding the head to an earlier row's values is not detectable
// without an anchor outside the database.)
func (s *Store) VerifyAudit(ctx context.Context) (badRow int64, err error) {
	var (
		headCount int64
		headMAC   string
	)
	if err := s.db.QueryRowContext(ctx, `SELECT count, last_mac FROM audit_head WHERE id = 1`).Scan(&headCount, &headMAC); err != nil {
		return 0, fmt.Errorf("store: verify audit: head: %w", err)
	}
	var (
		prev  string
		n     int64
		after int64
	)
	for {
		batch, err := s.AuditRows(ctx, after, 1000)
		if err != nil {
			return 0, err
		}
		for _, e := range batch {
			n++
			if e.Seq != n || !hmac.Equal([]byte(e.MAC), []byte(s.auditMAC(e, prev))) {
				return n, nil
			}
			prev = e.MAC
			after = e.Seq
		}
		if len(batch) < 1000 {
			break
		}
	}
	switch {
	case n < headCount:
		return n + 1, nil // truncated tail: the first missing row
	case n > headCount:
		return headCount + 1, nil // rows beyond the head were not written by Audit
	case prev != headMAC:
		return max(n, 1), nil
	}
	return 0, nil
}
