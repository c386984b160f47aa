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

// auditRowLabel starts the preimage of a row that stands for one attempt;
// auditRepeatedLabel that of a row that stands for several (Count > 1).
const (
	auditRowLabel      = "unsay/v1/audit-row"
	auditRepeatedLabel = "unsay/v1/audit-row-repeated"
)

// AuditRepeatWindow is how long after a row's last attempt an identical
// refused or abandoned attempt still collapses into it: 60 s.
const AuditRepeatWindow = 60 * time.Second

func auditChainKey(auditKey []byte) []byte {
	m := hmac.New(sha256.New, auditKey)
	m.Write([]byte(auditChainLabel))
	return m.Sum(nil)
}

// auditPreimage is THE canonical encoding of an audit row, shared by the
// writer (Audit) and the verifier (VerifyAudit): the label, then each field
// as decimal byte length, ':', bytes, '\n', in this order: seq, at
// (models.TimeLayout), actor, uri, outcome, reason, via, author, prevMAC —
// and, for a row standing for several attempts (Count > 1, under its own
// label), count and lastAt after them. Length prefixes make it unambiguous
// whatever bytes a field holds; rows of one attempt encode exactly as they
// did before repeats collapsed, so older logs still verify.
func auditPreimage(e AuditEntry, prevMAC string) []byte {
	fields := []string{
		strconv.FormatInt(e.Seq, 10),
		e.At.UTC().Format(models.TimeLayout),
		e.Actor, e.URI, e.Outcome, string(e.Reason), e.Via, e.Author,
		prevMAC,
	}
	label := auditRowLabel
	if e.Count > 1 {
		label = auditRepeatedLabel
		fields = append(fields, strconv.FormatInt(e.Count, 10), e.LastAt.UTC().Format(models.TimeLayout))
	}
	b := []byte(label + "\n")
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
		ReasonTooLarge, ReasonAudienceChange, ReasonForbidden, ReasonWrongPatient,
		ReasonRateLimited, ReasonAbandoned, ReasonUnavailable:
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

// sanitizeAudit keeps attacker bytes out of a row (P-14): a URI
// that is not a strict care URI is recorded as "", an author that is not a
// valid authorId as "". Actor is the verified principal and is kept, capped
// at 256 bytes.
func sanitizeAudit(e AuditEntry) (AuditEntry, error) {
	if e.Outcome != OutcomeAccepted && e.Outcome != OutcomeRefused && e.Outcome != OutcomeAbandoned {
		return e, &ValidationError{Field: "outcome", Reason: `must be "accepted", "refused" or "abandoned"`}
	}
	if !e.Reason.Valid() {
		return e, &ValidationError{Field: "reason", Reason: "not one of the closed set of audit reasons"}
	}
	if (e.Outcome == OutcomeAccepted) != (e.Reason == ReasonOK) {
		return e, &ValidationError{Field: "reason", Reason: `"ok" is the reason of, and only of, an accepted write`}
	}
	if (e.Outcome == OutcomeAbandoned) != (e.Reason == ReasonAbandoned) {
		return e, &ValidationError{Field: "reason", Reason: `"abandoned" is the reason of, and only of, an abandoned write`}
	}
	switch {
	case e.Count < 0:
		return e, &ValidationError{Field: "count", Reason: "must not be negative"}
	case e.Count > 1 && e.Outcome == OutcomeAccepted:
		return e, &ValidationError{Field: "count", Reason: "an accepted write is one row each"}
	case e.Count == 0:
		e.Count = 1
	}
	e.LastAt = time.Time{}
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

// Audit appends one row to the HMAC-chained audit log (P-14), or collapses
// a repeat into the last row (see AuditEntry). At and MAC are set by the
// store (At from its clock, truncated to ms), and Seq too; the row, the
// audit head (count, last MAC) and its signature (P-26) are written in one
// transaction. Outcome must be OutcomeAccepted (with ReasonOK),
// OutcomeAbandoned (with ReasonAbandoned) or OutcomeRefused (with any other
// reason); Reason one of the closed set; Via one of hmac, bearer, seed,
// cli; Actor non-empty; Count ≥ 0 (1 for an accepted row). An invalid entry
// is a *ValidationError and nothing is written. A URI that is not a care
// URI and an Author that is not a valid authorId are recorded as "" (no
// attacker bytes in a row). A store that cannot commit answers an
// *UnavailableError — at once, without waiting for the lock again, when
// another writer waited out the busy timeout while this one queued.
func (s *Store) Audit(ctx context.Context, e AuditEntry) error {
	e, err := sanitizeAudit(e)
	if err != nil {
		return err
	}
	queued := time.Now()
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	if ue := s.lockTimedOutSince(queued); ue != nil {
		return ue // another writer waited out the busy timeout while this one queued
	}
	tx, err := s.beginWrite(ctx)
	if err != nil {
		return s.writeErr(err)
	}
	defer tx.Rollback()
	if err := s.appendAudit(ctx, tx, e); err != nil {
		return s.writeErr(err)
	}
	if err := s.commit(tx); err != nil {
		return fmt.Errorf("store: audit: commit: %w", err)
	}
	return nil
}

// auditCols are the columns scanAudit reads.
const auditCols = `seq, at, actor, uri, outcome, reason, via, author, count, last_at, mac`

func scanAudit(sc scanner) (AuditEntry, error) {
	var (
		e          AuditEntry
		at, lastAt int64
		reason     string
	)
	if err := sc.Scan(&e.Seq, &at, &e.Actor, &e.URI, &e.Outcome, &reason, &e.Via, &e.Author, &e.Count, &lastAt, &e.MAC); err != nil {
		return AuditEntry{}, err
	}
	e.At = time.UnixMilli(at).UTC()
	e.Reason = AuditReason(reason)
	if e.Count > 1 {
		e.LastAt = time.UnixMilli(lastAt).UTC()
	}
	return e, nil
}

// sameAttempt reports whether a and b record the same kind of attempt.
func sameAttempt(a, b AuditEntry) bool {
	return a.Actor == b.Actor && a.URI == b.URI && a.Outcome == b.Outcome && a.Reason == b.Reason &&
		a.Via == b.Via && a.Author == b.Author
}

// appendAudit appends e (sanitized) in tx, or — for a refused or abandoned
// attempt identical to the last row within AuditRepeatWindow — adds its
// Count to that row, and signs the new audit head.
func (s *Store) appendAudit(ctx context.Context, tx *sql.Tx, e AuditEntry) error {
	var (
		count int64
		last  string
	)
	if err := s.queryRowPrepared(ctx, tx, `SELECT count, last_mac FROM audit_head WHERE id = 1`).Scan(&count, &last); err != nil {
		return fmt.Errorf("store: audit: head: %w", err)
	}
	now := s.clock().UTC().Truncate(time.Millisecond)
	if e.Outcome != OutcomeAccepted && count > 0 {
		tail, err := scanAudit(s.queryRowPrepared(ctx, tx, s.d.rebind(`SELECT `+auditCols+` FROM audit WHERE seq = ?`), count))
		if err != nil {
			return fmt.Errorf("store: audit: tail: %w", err)
		}
		latest := tail.At
		if tail.Count > 1 {
			latest = tail.LastAt
		}
		if sameAttempt(tail, e) && now.Sub(latest) <= AuditRepeatWindow && !now.Before(latest) {
			return s.collapseAudit(ctx, tx, tail, e.Count, now)
		}
	}
	e.Seq = count + 1
	e.At = now
	if e.Count > 1 {
		e.LastAt = now
	}
	e.MAC = s.auditMAC(e, last)
	if _, err := s.execPrepared(ctx, tx, s.d.rebind(`INSERT INTO audit (seq, at, actor, uri, outcome, reason, via, author, count, last_at, mac)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`),
		e.Seq, e.At.UnixMilli(), e.Actor, e.URI, e.Outcome, string(e.Reason), e.Via, e.Author, e.Count, msOrZero(e.LastAt), e.MAC); err != nil {
		return fmt.Errorf("store: audit: %w", err)
	}
	return s.signAuditHead(ctx, tx, e.Seq, e.MAC)
}

// collapseAudit adds n attempts at now to the last row tail, re-MACs it
// (chained to the row before it, as before) and re-signs the head.
func (s *Store) collapseAudit(ctx context.Context, tx *sql.Tx, tail AuditEntry, n int64, now time.Time) error {
	prev := ""
	if tail.Seq > 1 {
		if err := s.queryRowPrepared(ctx, tx, s.d.rebind(`SELECT mac FROM audit WHERE seq = ?`), tail.Seq-1).Scan(&prev); err != nil {
			return fmt.Errorf("store: audit: previous row: %w", err)
		}
	}
	tail.Count += n
	tail.LastAt = now
	tail.MAC = s.auditMAC(tail, prev)
	if _, err := s.execPrepared(ctx, tx, s.d.rebind(`UPDATE audit SET count = ?, last_at = ?, mac = ? WHERE seq = ?`),
		tail.Count, tail.LastAt.UnixMilli(), tail.MAC, tail.Seq); err != nil {
		return fmt.Errorf("store: audit: %w", err)
	}
	return s.signAuditHead(ctx, tx, tail.Seq, tail.MAC)
}

// AuditRows returns the audit rows with Seq > after, oldest first, at most limit (≤ 0: all).
func (s *Store) AuditRows(ctx context.Context, after int64, limit int) ([]AuditEntry, error) {
	if limit <= 0 {
		limit = math.MaxInt32 // all (Postgres refuses a negative LIMIT)
	}
	rows, err := s.db.QueryContext(ctx, s.d.rebind(`SELECT `+auditCols+` FROM audit WHERE seq > ? ORDER BY seq LIMIT ?`), after, limit)
	if err != nil {
		return nil, fmt.Errorf("store: audit rows: %w", err)
	}
	defer rows.Close()
	var out []AuditEntry
	for rows.Next() {
		e, err := scanAudit(rows)
		if err != nil {
			return nil, fmt.Errorf("store: audit rows: %w", err)
		}
		out = append(out, e)
	}
	return out, rows.Err()
}

// AuditVerdict is the audit log's verdict (P-14, P-26).
type AuditVerdict struct {
	Rows    int64  // rows present
	BadRow  int64  // the first row that disagrees (or the first missing one); 0 when intact
	Problem string // what disagreed: "" when intact
	// Head is the audit head as signed; nil when the log is empty.
	Head *SignedHead
}

// VerifyAudit checks the audit chain; badRow is the first row whose MAC
// disagrees (or the first missing row of a truncated tail, or the last row
// when the head's signature does not verify), 0 when intact. See
// VerifyAuditLog for the whole verdict.
func (s *Store) VerifyAudit(ctx context.Context) (badRow int64, err error) {
	v, err := s.VerifyAuditLog(ctx)
	return v.BadRow, err
}

// VerifyAuditLog checks the audit chain and its signed head.
//
// Rows must be numbered 1, 2, … without gaps, each MAC must equal the HMAC
// of its canonical preimage chained to the previous row's MAC, and the
// audit head (count and last MAC, written in the same transaction as each
// row) must match the last row: fewer rows than the head's count means a
// truncated tail, reported as count+1 of the rows present. The head must
// carry an Ed25519 signature of (count, last MAC) that verifies under the
// store's public key (P-26; ProblemHeadSignature otherwise), so deleting
// the tail and rewinding the head, or recomputing every MAC with the audit
// key, is detected too. A database written before heads were signed and
// not yet signed (see SignLegacyHeads) passes with Head.Valid false.
func (s *Store) VerifyAuditLog(ctx context.Context) (AuditVerdict, error) {
	var (
		headCount       int64
		headMAC         string
		headSig, headKy string
	)
	if err := s.db.QueryRowContext(ctx, `SELECT count, last_mac, sig, key_id FROM audit_head WHERE id = 1`).
		Scan(&headCount, &headMAC, &headSig, &headKy); err != nil {
		return AuditVerdict{}, fmt.Errorf("store: verify audit: head: %w", err)
	}
	legacy, err := s.legacyUnsigned(ctx, s.db)
	if err != nil {
		return AuditVerdict{}, err
	}
	var (
		prev  string
		n     int64
		after int64
	)
	broken := func(row int64, problem string) (AuditVerdict, error) {
		return AuditVerdict{Rows: n, BadRow: row, Problem: problem}, nil
	}
	for {
		batch, err := s.AuditRows(ctx, after, 1000)
		if err != nil {
			return AuditVerdict{}, err
		}
		for _, e := range batch {
			n++
			if e.Seq != n || !hmac.Equal([]byte(e.MAC), []byte(s.auditMAC(e, prev))) {
				return broken(n, "row MAC does not match")
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
		return broken(n+1, "rows missing from the tail") // truncated tail: the first missing row
	case n > headCount:
		return broken(headCount+1, "rows beyond the head") // not written by Audit
	case prev != headMAC:
		return broken(max(n, 1), "head does not match the last row")
	}
	v := AuditVerdict{Rows: n}
	if n == 0 {
		return v, nil
	}
	v.Head = &SignedHead{N: headCount, Hash: headMAC, Signature: headSig, KeyID: headKy}
	v.Head.Valid = headSig != "" && s.verifyHead(auditHeadPreimage(headCount, headMAC), headSig)
	switch {
	case v.Head.Valid:
	case headSig == "" && legacy:
		// written before heads were signed; signed at the server's next start
	case headSig == "":
		v.BadRow, v.Problem = n, ProblemHeadUnsigned
	default:
		v.BadRow, v.Problem = n, ProblemHeadSignature
	}
	return v, nil
}
