package store

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"database/sql"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/unsay/unsay/models"
)

// Chain heads signed outside the database (P-26). The hash chain (P-5) and
// the audit log's HMAC chain (P-14) detect a changed row, but someone who
// holds the database and the data keys can re-seal a value and recompute
// every later hash or MAC. So every version is signed when it becomes its
// chain's head, and the audit log's head after every append, with an
// Ed25519 key that lives only in the environment (UNSAY_SIGNING_KEY):
// a rewritten chain then fails verification with ProblemHeadSignature.

// ProblemHeadSignature is VerifyResult.Problem (and the audit verdict's)
// when a stored head signature does not verify under the public key.
const ProblemHeadSignature = "head signature does not match"

// ProblemHeadUnsigned is VerifyResult.Problem when the chain's head, or a
// version after a signed one, carries no signature (stripped, or written
// by something that does not sign).
const ProblemHeadUnsigned = "head is not signed"

// DevSigningKeySeed derives the development default signing key, used when
// Options.SigningKey is nil: seed = SHA-256(DevSigningKeySeed). It is
// public: announce it at startup, refuse it off loopback, and set
// UNSAY_SIGNING_KEY (from `unsay keygen`) in production.
const DevSigningKeySeed = "unsay-development-signing-key-NOT-SECRET"

// Signed-head preimage labels.
const (
	chainHeadLabel = "unsay/v1/chain-head"
	auditHeadLabel = "unsay/v1/audit-head"
)

// DevSigningKey is the development default signing key (see DevSigningKeySeed).
func DevSigningKey() ed25519.PrivateKey {
	seed := sha256.Sum256([]byte(DevSigningKeySeed))
	return ed25519.NewKeyFromSeed(seed[:])
}

// KeyID names a public key in receipts and startup lines: the first 8 bytes
// of SHA-256(public key), lowercase hex (16 digits).
func KeyID(pub ed25519.PublicKey) string {
	sum := sha256.Sum256(pub)
	return hex.EncodeToString(sum[:8])
}

// FormatSigningKey encodes a private key as UNSAY_SIGNING_KEY holds it: the
// 32-byte seed in standard padded base64.
func FormatSigningKey(k ed25519.PrivateKey) string {
	return base64.StdEncoding.EncodeToString(k.Seed())
}

// FormatPublicKey encodes a public key as UNSAY_SIGNING_PUBLIC_KEY and
// /verify show it: 32 bytes in standard padded base64.
func FormatPublicKey(pub ed25519.PublicKey) string {
	return base64.StdEncoding.EncodeToString(pub)
}

// ParseSigningKey decodes UNSAY_SIGNING_KEY: base64 (standard or URL
// alphabet, padded or not) of a 32-byte Ed25519 seed, or of a 64-byte
// private key whose public half matches its seed. Errors never echo the key.
func ParseSigningKey(s string) (ed25519.PrivateKey, error) {
	b, err := decodeBase64(s)
	if err != nil {
		return nil, fmt.Errorf("want base64 of a 32-byte Ed25519 seed (unsay keygen): %w", err)
	}
	switch len(b) {
	case ed25519.SeedSize:
		return ed25519.NewKeyFromSeed(b), nil
	case ed25519.PrivateKeySize:
		k := ed25519.NewKeyFromSeed(b[:ed25519.SeedSize])
		if !k.Public().(ed25519.PublicKey).Equal(ed25519.PublicKey(b[ed25519.SeedSize:])) {
			return nil, errors.New("the 64-byte private key's public half does not match its seed")
		}
		return k, nil
	}
	return nil, fmt.Errorf("want a 32-byte Ed25519 seed (unsay keygen), got %d bytes", len(b))
}

// ParsePublicKey decodes UNSAY_SIGNING_PUBLIC_KEY: base64 of 32 bytes.
func ParsePublicKey(s string) (ed25519.PublicKey, error) {
	b, err := decodeBase64(s)
	if err != nil {
		return nil, fmt.Errorf("want base64 of a 32-byte Ed25519 public key: %w", err)
	}
	if len(b) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("want a 32-byte Ed25519 public key, got %d bytes", len(b))
	}
	return ed25519.PublicKey(b), nil
}

func decodeBase64(s string) ([]byte, error) {
	s = strings.TrimSpace(s)
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(s); err == nil {
			return b, nil
		}
	}
	return nil, errors.New("not base64")
}

// chainHeadPreimage is what a version's head signature covers: the label,
// the versioned URI (scheme = audience, patient, domain, v{n}) and the
// version hash, one per line.
func chainHeadPreimage(u models.URI, hash string) []byte {
	return []byte(chainHeadLabel + "\n" + u.String() + "\n" + hash)
}

// auditHeadPreimage is what the audit head signature covers: the label, the
// row count and the last row's MAC, one per line.
func auditHeadPreimage(count int64, lastMAC string) []byte {
	return []byte(auditHeadLabel + "\n" + strconv.FormatInt(count, 10) + "\n" + lastMAC)
}

// sign signs preimage with the store's signing key.
func (s *Store) sign(preimage []byte) (sig, keyID string) {
	return base64.StdEncoding.EncodeToString(ed25519.Sign(s.signKey, preimage)), s.signKeyID
}

// verifyHead reports whether sig (base64) over preimage verifies under the
// store's public key.
func (s *Store) verifyHead(preimage []byte, sig string) bool {
	b, err := base64.StdEncoding.DecodeString(sig)
	return err == nil && len(b) == ed25519.SignatureSize && ed25519.Verify(s.verifyKey, preimage, b)
}

// PublicKey is the key head signatures are verified with (shown by /verify).
func (s *Store) PublicKey() ed25519.PublicKey { return s.verifyKey }

// UsesDevSigningKey reports whether heads are signed with DevSigningKey
// because Options.SigningKey was nil (announce it at startup).
func (s *Store) UsesDevSigningKey() bool { return s.devSign }

// signedHead builds the SignedHead of version r as stored.
func (s *Store) signedHead(r row) *SignedHead {
	h := &SignedHead{N: int64(r.v.N), Hash: r.v.Hash, Signature: r.headSig, KeyID: r.headKey}
	h.Valid = r.headSig != "" && s.verifyHead(chainHeadPreimage(r.v.URI(), r.v.Hash), r.headSig)
	return h
}

// signAuditHead signs the audit head (count, lastMAC) inside tx.
func (s *Store) signAuditHead(ctx context.Context, tx *sql.Tx, count int64, lastMAC string) error {
	sig, kid := s.sign(auditHeadPreimage(count, lastMAC))
	return s.storeAuditHead(ctx, tx, count, lastMAC, sig, kid)
}

// storeAuditHead writes the audit head (count, lastMAC) with its signature
// sig by key kid, made by the caller over auditHeadPreimage(count, lastMAC).
func (s *Store) storeAuditHead(ctx context.Context, tx *sql.Tx, count int64, lastMAC, sig, kid string) error {
	if _, err := s.execPrepared(ctx, tx, s.d.rebind(`UPDATE audit_head SET count = ?, last_mac = ?, sig = ?, key_id = ? WHERE id = 1`),
		count, lastMAC, sig, kid); err != nil {
		return fmt.Errorf("store: audit: head: %w", err)
	}
	return nil
}

// legacyUnsigned reports whether the database was written before heads
// were signed and has not been adopted yet (signing_state, migration 011).
func (s *Store) legacyUnsigned(ctx context.Context, q queryRower) (bool, error) {
	var legacy int
	if err := q.QueryRowContext(ctx, `SELECT legacy_unsigned FROM signing_state WHERE id = 1`).Scan(&legacy); err != nil {
		return false, fmt.Errorf("store: signing state: %w", err)
	}
	return legacy != 0, nil
}

// currentHeads returns the current version of every chain, without values.
func (s *Store) currentHeads(ctx context.Context, q interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}) ([]row, error) {
	rows, err := q.QueryContext(ctx, `SELECT `+versionCols+` FROM facts f `+s.d.latestJoin()+` ORDER BY v.seq`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var heads []row
	for rows.Next() {
		r, err := scanRaw(rows)
		if err != nil {
			return nil, err
		}
		heads = append(heads, r)
	}
	return heads, rows.Err()
}

// checkHeads is CheckStartup's head check (P-26): every chain head and the
// audit head must verify under this store's key. An unsigned head, one
// signed by another key (the public development key included), or one that
// does not verify refuses the start — a wrong UNSAY_SIGNING_KEY, or a
// rewritten chain (run `unsay verify`). A database written before heads
// were signed (migration 011 found versions or audit rows and marked it
// legacy) is not refused: the server signs its heads with SignLegacyHeads.
// checkHeads writes nothing, so an offline tool may call CheckStartup.
func (s *Store) checkHeads(ctx context.Context) error {
	if !s.signKey.Public().(ed25519.PublicKey).Equal(s.verifyKey) {
		return fmt.Errorf("%w: the signing key (key %s) does not match the public key heads are verified with (key %s)",
			ErrStartup, s.signKeyID, KeyID(s.verifyKey))
	}
	legacy, err := s.legacyUnsigned(ctx, s.db)
	if err != nil || legacy {
		return err
	}
	heads, err := s.currentHeads(ctx, s.db)
	if err != nil {
		return fmt.Errorf("store: startup check: %w", err)
	}
	var (
		count             int64
		lastMAC, sig, kid string
	)
	if err := s.db.QueryRowContext(ctx, `SELECT count, last_mac, sig, key_id FROM audit_head WHERE id = 1`).Scan(&count, &lastMAC, &sig, &kid); err != nil {
		return fmt.Errorf("store: startup check: audit head: %w", err)
	}
	devID := KeyID(DevSigningKey().Public().(ed25519.PublicKey))
	check := func(name string, preimage []byte, sig, kid string) error {
		switch {
		case sig != "" && kid == s.signKeyID && s.verifyHead(preimage, sig):
			return nil
		case sig == "":
			return fmt.Errorf("%w: the head of %s is not signed (stripped, or written by something that does not sign: possible tampering): run `unsay verify`",
				ErrStartup, name)
		case kid == devID && s.signKeyID != devID:
			return fmt.Errorf("%w: the head of %s is signed with the public development key, not this UNSAY_SIGNING_KEY (key %s): "+
				"a database run in development cannot be trusted in production; start production on a new database", ErrStartup, name, s.signKeyID)
		case kid != s.signKeyID:
			return fmt.Errorf("%w: the head of %s is signed by key %s, not this UNSAY_SIGNING_KEY (key %s): wrong key?", ErrStartup, name, kid, s.signKeyID)
		}
		return fmt.Errorf("%w: the head signature of %s does not match its chain under this key (key %s): the head was changed in the database (its value, audience or hash, or a rewritten chain): run `unsay verify`", ErrStartup, name, kid)
	}
	for _, r := range heads {
		if err := check(r.v.URI().String(), chainHeadPreimage(r.v.URI(), r.v.Hash), r.headSig, r.headKey); err != nil {
			return err
		}
	}
	if count > 0 {
		return check("the audit log", auditHeadPreimage(count, lastMAC), sig, kid)
	}
	return nil
}

// SignLegacyHeads signs, in one write transaction, the current head of
// every chain and the audit head of a database written before heads were
// signed (marked legacy by migration 011), and clears the mark; older
// versions stay unsigned (Verify accepts an unsigned prefix before the
// first signed version). It returns how many chain heads it signed: 0 for
// a database that is not legacy (or that another instance signed
// meanwhile). The server calls it once at start, after CheckStartup, with
// its UNSAY_SIGNING_KEY; an offline verifier never does. A rewrite made
// before that first start is not detected (P-26 protects from then on).
func (s *Store) SignLegacyHeads(ctx context.Context) (n int, err error) {
	defer func() {
		if n > 0 && err == nil {
			s.log.WarnContext(ctx, "store: signed the current chain heads and the audit head of a database written before head signing",
				"heads", n, "key", s.signKeyID)
		}
	}()
	if !s.signKey.Public().(ed25519.PublicKey).Equal(s.verifyKey) {
		return 0, fmt.Errorf("store: sign heads: the signing key (key %s) does not match the public key (key %s)", s.signKeyID, KeyID(s.verifyKey))
	}
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	tx, err := s.beginWrite(ctx)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback()
	if legacy, err := s.legacyUnsigned(ctx, tx); err != nil || !legacy {
		return 0, err // not legacy, or another instance signed them meanwhile
	}
	heads, err := s.currentHeads(ctx, tx)
	if err != nil {
		return 0, fmt.Errorf("store: sign heads: %w", err)
	}
	for _, r := range heads {
		sig, kid := s.sign(chainHeadPreimage(r.v.URI(), r.v.Hash))
		if _, err := tx.ExecContext(ctx, s.d.rebind(`UPDATE versions SET head_sig = ?, head_key = ? WHERE seq = ?`), sig, kid, r.seq); err != nil {
			return 0, fmt.Errorf("store: sign heads: %w", err)
		}
	}
	var (
		count int64
		last  string
	)
	if err := tx.QueryRowContext(ctx, `SELECT count, last_mac FROM audit_head WHERE id = 1`).Scan(&count, &last); err != nil {
		return 0, fmt.Errorf("store: sign heads: audit head: %w", err)
	}
	if err := s.signAuditHead(ctx, tx, count, last); err != nil {
		return 0, err
	}
	if _, err := tx.ExecContext(ctx, `UPDATE signing_state SET legacy_unsigned = 0 WHERE id = 1`); err != nil {
		return 0, fmt.Errorf("store: sign heads: %w", err)
	}
	if err := s.commit(tx); err != nil {
		return 0, fmt.Errorf("store: sign heads: commit: %w", err)
	}
	return len(heads), nil
}
