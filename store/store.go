package store

import (
	"context"
	"database/sql"
	"errors"
	"log/slog"
	"time"

	"github.com/unsay/unsay/models"
)

// TODO(store): replace these stubs with the implementation. Signatures are the contract.
var errNotImplemented = errors.New("store: not implemented yet")

// Sealer seals and opens values at rest (P-6). The store calls Seal on
// publish and Open on every read and verify; aad is
// "patient|domain|v{n}|audience". Implemented by store/envelope.
type Sealer interface {
	Seal(ctx context.Context, aad, plaintext []byte) ([]byte, error)
	Open(ctx context.Context, aad, sealed []byte) ([]byte, error)
	// Receipt describes sealed bytes for /verify without opening them.
	Receipt(aad, sealed []byte) (*AtRestReceipt, error)
	// Name is "local" or "kms" (the startup line's encryption mode).
	Name() string
}

// Options configure Open.
type Options struct {
	// DSN is a SQLite file path ("./unsay.db", ":memory:" not supported) or,
	// once the Postgres backend exists, a postgres:// URL.
	DSN string
	// Clock is the server clock; nil means time.Now. Tests inject one.
	Clock func() time.Time
	// AuditKey keys the audit log's HMAC chain (UNSAY_AUDIT_KEY).
	AuditKey []byte
	// Sealer seals values at rest; nil stores plaintext (startup says PLAINTEXT).
	Sealer Sealer
	Logger *slog.Logger
}

// Store is the live care store. It is safe for concurrent use.
type Store struct{}

// Open opens (creating and migrating if needed) the store at opts.DSN.
func Open(ctx context.Context, opts Options) (*Store, error) { return nil, errNotImplemented }

// Close releases the database.
func (s *Store) Close() error { return nil }

// DB is the underlying database handle, for packages that keep their own
// tables through database/sql (the speech ledger, link codes, the audible
// budget). Dialect says "sqlite" or "postgres".
func (s *Store) DB() (*sql.DB, string) { return nil, "" }

// Publish validates in, checks p may write it (care.write and bound to the
// patient), refuses an audience change before any state changes (P-3),
// stamps WrittenAt from the clock truncated to ms, chains and commits
// version n+1 durably, appends nothing to the audit log (the caller does,
// with the transport's actor and via), and wakes the change feed without
// blocking. Errors: *ValidationError (ErrInvalid), ErrForbidden, ErrAudienceChange.
func (s *Store) Publish(ctx context.Context, p models.Principal, in PublishInput) (PublishResult, error) {
	return PublishResult{}, errNotImplemented
}

// Read returns the version named by rawURI (its current version when
// unversioned) if p may read it by BOTH the scheme's scope and the record's
// own audience, and is bound to the patient (P-1, P-21). Every failure —
// malformed, unknown scheme, forbidden, absent, missing version — is ErrNotFound (P-2).
func (s *Store) Read(ctx context.Context, p models.Principal, rawURI string) (ReadResult, error) {
	return ReadResult{}, errNotImplemented
}

// List returns the current version of every fact p may read, sorted by
// unversioned URI string, filtered before anything else (P-1).
func (s *Store) List(ctx context.Context, p models.Principal) ([]models.Fact, error) {
	return nil, errNotImplemented
}

// History returns every version of the fact named by rawURI, oldest first, or ErrNotFound.
func (s *Store) History(ctx context.Context, p models.Principal, rawURI string) ([]models.Version, error) {
	return nil, errNotImplemented
}

// Since returns every version written strictly after t that p may read,
// oldest first (for whats_changed).
func (s *Store) Since(ctx context.Context, p models.Principal, t time.Time) ([]models.Version, error) {
	return nil, errNotImplemented
}

// Staleness reports whether the fact is stale at now and, if so, its header (P-7).
func (s *Store) Staleness(ctx context.Context, p models.Principal, rawURI string, now time.Time) (stale bool, header string, err error) {
	return false, "", errNotImplemented
}

// Verify recomputes the chain of the fact named by rawURI (P-5), opening
// each sealed value; ErrNotFound if p cannot read it.
func (s *Store) Verify(ctx context.Context, p models.Principal, rawURI string) (VerifyResult, error) {
	return VerifyResult{}, errNotImplemented
}

// Watch streams committed changes with Seq > after, in commit order, until
// ctx ends (then the channel closes). A slow watcher never blocks Publish:
// it catches up from the database.
func (s *Store) Watch(ctx context.Context, after int64) <-chan Change { return nil }

// LastSeq is the sequence number of the latest committed change (0 if none).
func (s *Store) LastSeq(ctx context.Context) (int64, error) { return 0, errNotImplemented }

// Audit appends one row to the HMAC-chained audit log (P-14). At and MAC are set by the store.
func (s *Store) Audit(ctx context.Context, e AuditEntry) error { return errNotImplemented }

// VerifyAudit checks the audit chain; badRow is the first row whose MAC
// disagrees (or the first missing row of a truncated tail), 0 when intact.
func (s *Store) VerifyAudit(ctx context.Context) (badRow int64, err error) {
	return 0, errNotImplemented
}

// Now is the store's clock.
func (s *Store) Now() time.Time { return time.Now() }
