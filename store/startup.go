package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// ErrStartup wraps every refusal of CheckStartup. Match with errors.Is.
var ErrStartup = errors.New("store: refusing to start")

// CheckStartup checks, before the server accepts anything, that this
// process holds the keys its database was written with, so it cannot
// accept writes it could never read back or extend a chain it cannot
// verify (fail closed):
//
//   - sealed values and no Sealer → refuse (start with the envelope that sealed them);
//   - a Sealer and plaintext values → refuse (run `unsay rekey` first);
//   - a Sealer that cannot open the latest sealed value → refuse (wrong
//     UNSAY_MASTER_KEY / KMS key, or the key service is unreachable);
//   - a version out of sequence, whose prevHash is not the hash before it,
//     or (stored as plaintext) whose value, time or author no longer
//     matches its hash → refuse, wrapping ErrIntegrity (run `unsay verify`);
//   - the last audit row's MAC does not verify under this audit key → refuse
//     (wrong UNSAY_AUDIT_KEY, or a tampered tail: run `unsay verify --audit`);
//   - a chain head or the audit head that is unsigned, or whose signature
//     does not verify under this UNSAY_SIGNING_KEY → refuse (wrong key, a
//     database run with the development key, or a rewritten chain: run
//     `unsay verify`). A database written before heads were signed passes:
//     the server then signs its heads once with SignLegacyHeads (P-26).
//
// CheckStartup writes nothing.
//
// Errors wrap ErrStartup and say what to do; they never carry a value.
func (s *Store) CheckStartup(ctx context.Context) error {
	var sealedN, plainN sql.NullInt64
	if err := s.db.QueryRowContext(ctx, `SELECT SUM(CASE WHEN sealed = 1 THEN 1 ELSE 0 END), SUM(CASE WHEN sealed = 0 THEN 1 ELSE 0 END) FROM versions`).
		Scan(&sealedN, &plainN); err != nil {
		return fmt.Errorf("store: startup check: %w", err)
	}
	switch {
	case s.sealer == nil && sealedN.Int64 > 0:
		return fmt.Errorf("%w: the database holds %d sealed values and no envelope is configured: start with the --envelope (and keys) that sealed them", ErrStartup, sealedN.Int64)
	case s.sealer != nil && plainN.Int64 > 0:
		return fmt.Errorf("%w: the database holds %d plaintext values and an envelope is configured: run `unsay rekey --db … --envelope %s` first", ErrStartup, plainN.Int64, s.sealer.Name())
	}
	if s.sealer != nil && sealedN.Int64 > 0 {
		r, err := scanRaw(s.db.QueryRowContext(ctx, `SELECT `+versionCols+` FROM versions v JOIN facts f
			ON f.patient = v.patient AND f.domain = v.domain WHERE v.sealed = 1 ORDER BY v.seq DESC LIMIT 1`))
		if err != nil {
			return fmt.Errorf("store: startup check: %w", err)
		}
		if _, err := s.open(ctx, r); err != nil {
			return fmt.Errorf("%w: the latest sealed value (%s) does not open with the configured %s envelope — wrong key, or the key service is unreachable: %w",
				ErrStartup, r.v.URI(), s.sealer.Name(), err)
		}
	}
	if err := s.checkChains(ctx); err != nil {
		return err
	}
	if err := s.checkAuditTail(ctx); err != nil {
		return err
	}
	return s.checkHeads(ctx)
}

// checkAuditTail recomputes the last audit row's MAC from the row before it.
func (s *Store) checkAuditTail(ctx context.Context) error {
	var count int64
	if err := s.db.QueryRowContext(ctx, `SELECT count FROM audit_head WHERE id = 1`).Scan(&count); err != nil {
		return fmt.Errorf("store: startup check: audit head: %w", err)
	}
	if count == 0 {
		return nil
	}
	rows, err := s.AuditRows(ctx, max(count-2, 0), 2)
	if err != nil {
		return fmt.Errorf("store: startup check: %w", err)
	}
	if len(rows) == 0 || rows[len(rows)-1].Seq != count {
		return fmt.Errorf("%w: the audit log's tail is missing (head says %d rows): run `unsay verify --audit`", ErrStartup, count)
	}
	last, prev := rows[len(rows)-1], ""
	if len(rows) == 2 {
		prev = rows[0].MAC
	}
	if s.auditMAC(last, prev) != last.MAC {
		return fmt.Errorf("%w: the audit log's last row does not verify under this UNSAY_AUDIT_KEY (wrong key, or a tampered tail): run `unsay verify --audit`", ErrStartup)
	}
	return nil
}
