package store

// The embedded OAuth 2.1 authorization server's state (bridge/oauth): its
// clients, the grants people consented to, pending authorization requests,
// refresh tokens and its signing keys — in the database, so they survive a
// restart and every instance on Postgres shares them. Secrets, codes and
// refresh tokens are stored only as SHA-256 hashes; signing keys are sealed
// under the store's envelope when it has one. The protocol itself is
// bridge/oauth's; this file stores and answers.

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/unsay/unsay/models"
)

// OAuth errors. Match with errors.Is.
var (
	// ErrOAuthNotFound: no such client, grant, authorization request or
	// refresh token (or it expired).
	ErrOAuthNotFound = errors.New("oauth: not found")
	// ErrRefreshTokenReused: a refresh token that was already rotated was
	// presented again. The grant it belongs to is revoked in the same
	// transaction (OAuth 2.1 §4.3.1: a replayed refresh token means it leaked).
	ErrRefreshTokenReused = errors.New("oauth: refresh token reused; its grant is revoked")
	// ErrAuthCodeReused: an authorization code that was already exchanged
	// was presented again. The grant its exchange produced is revoked, so
	// the access and refresh tokens already issued from it stop working
	// (OAuth 2.1 §4.1.3, RFC 6749 §4.1.2: a code used twice has leaked).
	ErrAuthCodeReused = errors.New("oauth: authorization code reused; its grant is revoked")
	// ErrGrantRevoked: the grant was revoked (unsay grants revoke, reuse of a
	// refresh token or an authorization code, or its client was removed).
	ErrGrantRevoked = errors.New("oauth: grant revoked")
	// ErrAuthRequestState: the authorization request is not in the state the
	// operation needs (a code already issued, no patient yet, …).
	ErrAuthRequestState = errors.New("oauth: authorization request in the wrong state")
)

// Client kinds.
const (
	ClientRegistered = "registered" // `unsay client add`
	ClientDynamic    = "dynamic"    // RFC 7591 dynamic registration
	ClientMetadata   = "metadata"   // a Client ID Metadata Document (client_id is its https URL)
)

// Grant kinds.
const (
	GrantAuthorizationCode = "authorization_code" // a person consented on the consent page
	GrantClientCredentials = "client_credentials" // a client's own, bound to no patient
	GrantInternal          = "internal"           // minted by the server for itself (the speech principal, `unsay token`)
)

// Who revoked a grant, in OAuthGrant.RevokedBy, when the server did it
// itself because a one-time credential came back.
const (
	RevokedByRefreshReuse = "refresh token reuse"
	RevokedByCodeReuse    = "authorization code reuse"
)

// OAuthClient is a registered OAuth client.
type OAuthClient struct {
	ID             string
	Kind           string // ClientRegistered, ClientDynamic or ClientMetadata
	Name           string
	SecretHash     []byte // SHA-256 of the secret; nil for a public client
	RedirectURIs   []string
	GrantTypes     []string
	ApprovedScopes []string // scopes a clinician approved beyond the consent page's (e.g. care.read.assistant)
	ApprovedBy     string
	ApprovedAt     time.Time
	Metadata       json.RawMessage // the registration request or metadata document as received
	CreatedAt      time.Time
	FetchedAt      time.Time // ClientMetadata: when the document was fetched
	Disabled       bool
}

// Public reports whether the client has no secret (token_endpoint_auth_method none).
func (c OAuthClient) Public() bool { return len(c.SecretHash) == 0 }

// CheckSecret reports, in constant time, whether secret is the client's.
func (c OAuthClient) CheckSecret(secret string) bool {
	if c.Public() || secret == "" {
		return false
	}
	h := sha256.Sum256([]byte(secret))
	return subtle.ConstantTimeCompare(h[:], c.SecretHash) == 1
}

// HashSecret is the SHA-256 stored for a client secret, code or refresh token.
func HashSecret(s string) []byte {
	h := sha256.Sum256([]byte(s))
	return h[:]
}

// OAuthGrant is what a person (or the server) granted a client: scopes on
// one patient's facts for one resource, until revoked.
type OAuthGrant struct {
	ID        string
	ClientID  string
	Kind      string // GrantAuthorizationCode, GrantClientCredentials or GrantInternal
	Subject   string // the tokens' "sub" (the audit actor)
	Patient   string // "" when bound to no patient; an internal grant's token may name several, joined by "," (Patients)
	Scopes    []string
	Resource  string // the tokens' audience
	Consent   string // how it was consented to, in words
	CreatedAt time.Time
	RevokedAt time.Time // zero while active
	RevokedBy string
}

// Active reports whether the grant is not revoked.
func (g OAuthGrant) Active() bool { return g.RevokedAt.IsZero() }

// Patients are the patients the grant's tokens are bound to: Patient split
// at ","; none when it is bound to no patient.
func (g OAuthGrant) Patients() []string {
	if g.Patient == "" {
		return nil
	}
	return strings.Split(g.Patient, ",")
}

// OAuthAuthRequest is a pending authorization request, from /authorize to
// the code's exchange at the token endpoint.
type OAuthAuthRequest struct {
	ID       string
	ClientID string
	Request  json.RawMessage // bridge/oauth's validated request (redirect_uri, state, scopes, PKCE, resource)
	CSRF     string
	Patient  string // set once a link code was redeemed on the consent page
	GrantID  string // set once the person confirmed
	CodeHash []byte // set once a code was issued
	// BrowserHash is SHA-256 of the consent cookie of the browser the
	// consent page is bound to (BindOAuthAuthRequestBrowser); nil until the
	// page is first opened.
	BrowserHash []byte
	CreatedAt   time.Time
	ExpiresAt   time.Time
}

// OAuthKey is one of the authorization server's signing keys.
type OAuthKey struct {
	KID        string
	Alg        string // "ES256"
	PrivateDER []byte // PKCS#8
	CreatedAt  time.Time
}

func oauthAAD(kid string) []byte { return []byte("oauth-signing-key|" + kid) }

// oauthBegin starts an OAuth write transaction. OAuth rows need no
// store-wide write lock (they do not touch the fact chains' sequence), only
// the in-process writer mutex that keeps SQLite from spinning on BUSY; the
// caller holds s.writeMu.
func (s *Store) oauthBegin(ctx context.Context) (*sql.Tx, error) {
	tx, err := s.beginTx(ctx)
	if err != nil {
		return nil, fmt.Errorf("store: oauth: begin: %w", err)
	}
	return tx, nil
}

func joinList(v []string) string {
	b, _ := json.Marshal(append([]string{}, v...))
	return string(b)
}

func splitList(s string) ([]string, error) {
	var out []string
	if err := json.Unmarshal([]byte(s), &out); err != nil {
		return nil, fmt.Errorf("store: oauth: stored list: %w", err)
	}
	return out, nil
}

func msTime(ms int64) time.Time {
	if ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms).UTC()
}

func timeMS(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

// PutOAuthClient inserts c, or replaces the client with the same id
// (a re-fetched metadata document, a re-registration by the operator).
// Approval and creation time of an existing client are kept.
func (s *Store) PutOAuthClient(ctx context.Context, c OAuthClient) error {
	// 400 bytes: the 100 characters a client name may have (bridge/oauth)
	// in any script, 4 bytes each at most.
	if c.ID == "" || len(c.ID) > 2048 || c.Name == "" || len(c.Name) > 400 {
		return &ValidationError{Field: "client", Reason: "id of 1–2048 bytes and a name of 1–400 bytes are required"}
	}
	meta := c.Metadata
	if len(meta) == 0 {
		meta = json.RawMessage("{}")
	}
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	tx, err := s.oauthBegin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	res, err := tx.ExecContext(ctx, s.d.rebind(`UPDATE oauth_clients SET kind = ?, name = ?, secret_hash = ?, redirect_uris = ?,
		grant_types = ?, metadata = ?, fetched_ms = ?, disabled_ms = 0 WHERE id = ?`),
		c.Kind, c.Name, nullBytes(c.SecretHash), joinList(c.RedirectURIs), joinList(c.GrantTypes), string(meta), timeMS(c.FetchedAt), c.ID)
	if err != nil {
		return fmt.Errorf("store: oauth client: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		if _, err := tx.ExecContext(ctx, s.d.rebind(`INSERT INTO oauth_clients (id, kind, name, secret_hash, redirect_uris, grant_types,
			approved_scopes, approved_by, approved_ms, metadata, created_ms, fetched_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`),
			c.ID, c.Kind, c.Name, nullBytes(c.SecretHash), joinList(c.RedirectURIs), joinList(c.GrantTypes),
			strings.Join(c.ApprovedScopes, " "), c.ApprovedBy, timeMS(c.ApprovedAt), string(meta), timeMS(c.CreatedAt), timeMS(c.FetchedAt)); err != nil {
			return fmt.Errorf("store: oauth client: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("store: oauth client: commit: %w", err)
	}
	return nil
}

func nullBytes(b []byte) any {
	if len(b) == 0 {
		return nil
	}
	return b
}

const oauthClientCols = `id, kind, name, secret_hash, redirect_uris, grant_types, approved_scopes, approved_by, approved_ms,
	metadata, created_ms, fetched_ms, disabled_ms`

func scanOAuthClient(sc scanner) (OAuthClient, error) {
	var c OAuthClient
	var redirects, grants, approved, meta string
	var approvedMS, createdMS, fetchedMS, disabledMS int64
	if err := sc.Scan(&c.ID, &c.Kind, &c.Name, &c.SecretHash, &redirects, &grants, &approved, &c.ApprovedBy, &approvedMS,
		&meta, &createdMS, &fetchedMS, &disabledMS); err != nil {
		return OAuthClient{}, err
	}
	var err error
	if c.RedirectURIs, err = splitList(redirects); err != nil {
		return OAuthClient{}, err
	}
	if c.GrantTypes, err = splitList(grants); err != nil {
		return OAuthClient{}, err
	}
	c.ApprovedScopes = strings.Fields(approved)
	c.Metadata = json.RawMessage(meta)
	c.ApprovedAt, c.CreatedAt, c.FetchedAt = msTime(approvedMS), msTime(createdMS), msTime(fetchedMS)
	c.Disabled = disabledMS != 0
	return c, nil
}

// OAuthClient returns the client with id (disabled ones too: check
// Disabled), or ErrOAuthNotFound.
func (s *Store) OAuthClient(ctx context.Context, id string) (OAuthClient, error) {
	return oauthOne(ctx, s, "oauth client", scanOAuthClient, `SELECT `+oauthClientCols+` FROM oauth_clients WHERE id = ?`, id)
}

// OAuthClients returns every client, by creation time then id.
func (s *Store) OAuthClients(ctx context.Context) ([]OAuthClient, error) {
	return oauthAll(ctx, s, "oauth clients", scanOAuthClient, `SELECT `+oauthClientCols+` FROM oauth_clients ORDER BY created_ms, id`)
}

// oauthOne runs the one-row query q (its "?" rebound for the dialect) and
// scans the row with scan; no row is ErrOAuthNotFound, other errors are
// wrapped naming what.
func oauthOne[T any](ctx context.Context, s *Store, what string, scan func(scanner) (T, error), q string, args ...any) (T, error) {
	v, err := scan(s.db.QueryRowContext(ctx, s.d.rebind(q), args...))
	if errors.Is(err, sql.ErrNoRows) {
		var zero T
		return zero, ErrOAuthNotFound
	}
	if err != nil {
		var zero T
		return zero, fmt.Errorf("store: %s: %w", what, err)
	}
	return v, nil
}

// oauthAll runs q (its "?" rebound for the dialect) and scans every row
// with scan, in the query's order; errors are wrapped naming what.
func oauthAll[T any](ctx context.Context, s *Store, what string, scan func(scanner) (T, error), q string, args ...any) ([]T, error) {
	rows, err := s.db.QueryContext(ctx, s.d.rebind(q), args...)
	if err != nil {
		return nil, fmt.Errorf("store: %s: %w", what, err)
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, fmt.Errorf("store: %s: %w", what, err)
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: %s: %w", what, err)
	}
	return out, nil
}

// ApproveOAuthClient records that a clinician (by) approved scopes for the
// client beyond what the consent page grants (e.g. care.read.assistant);
// an empty scopes list withdraws the approval. Grants already made keep
// their scopes; the next token of each is cut to what is still approved
// (bridge/oauth). Errors: ErrOAuthNotFound.
func (s *Store) ApproveOAuthClient(ctx context.Context, id string, scopes []string, by string, now time.Time) error {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	res, err := s.db.ExecContext(ctx, s.d.rebind(`UPDATE oauth_clients SET approved_scopes = ?, approved_by = ?, approved_ms = ? WHERE id = ?`),
		strings.Join(scopes, " "), by, now.UnixMilli(), id)
	if err != nil {
		return fmt.Errorf("store: approve oauth client: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return ErrOAuthNotFound
	}
	return nil
}

// DisableOAuthClient disables the client and revokes every grant it holds
// (by names who did it), in one transaction. Errors: ErrOAuthNotFound.
func (s *Store) DisableOAuthClient(ctx context.Context, id, by string, now time.Time) error {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	tx, err := s.oauthBegin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	res, err := tx.ExecContext(ctx, s.d.rebind(`UPDATE oauth_clients SET disabled_ms = ? WHERE id = ?`), now.UnixMilli(), id)
	if err != nil {
		return fmt.Errorf("store: disable oauth client: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return ErrOAuthNotFound
	}
	if _, err := tx.ExecContext(ctx, s.d.rebind(`UPDATE oauth_grants SET revoked_ms = ?, revoked_by = ? WHERE client_id = ? AND revoked_ms = 0`),
		now.UnixMilli(), by, id); err != nil {
		return fmt.Errorf("store: disable oauth client: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("store: disable oauth client: commit: %w", err)
	}
	return nil
}

// CreateOAuthGrant stores a new grant. Errors: a *ValidationError for a
// missing id, client, subject or resource, or a patient id that is not one
// (several, joined by ",", only on an internal grant).
func (s *Store) CreateOAuthGrant(ctx context.Context, g OAuthGrant) error {
	if g.ID == "" || g.ClientID == "" || g.Subject == "" || g.Resource == "" || g.Kind == "" {
		return &ValidationError{Field: "grant", Reason: "id, client, kind, subject and resource are required"}
	}
	if ps := g.Patients(); len(ps) > 1 && g.Kind != GrantInternal || slices.ContainsFunc(ps, func(p string) bool { return !models.ValidID(p) }) {
		return &ValidationError{Field: "patient", Reason: "must be 1–64 characters of [a-z0-9_.-]"}
	}
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	if _, err := s.db.ExecContext(ctx, s.d.rebind(`INSERT INTO oauth_grants (id, client_id, kind, subject, patient, scopes, resource, consent, created_ms)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`),
		g.ID, g.ClientID, g.Kind, g.Subject, g.Patient, strings.Join(g.Scopes, " "), g.Resource, g.Consent, timeMS(g.CreatedAt)); err != nil {
		return fmt.Errorf("store: oauth grant: %w", err)
	}
	return nil
}

// EnsureOAuthGrant stores g unless a grant with its id exists, and returns
// the stored grant (revoked or not: the caller checks Active).
func (s *Store) EnsureOAuthGrant(ctx context.Context, g OAuthGrant) (OAuthGrant, error) {
	got, err := s.OAuthGrant(ctx, g.ID)
	if err == nil {
		return got, nil
	}
	if !errors.Is(err, ErrOAuthNotFound) {
		return OAuthGrant{}, err
	}
	if err := s.CreateOAuthGrant(ctx, g); err != nil {
		// Another instance may have created it first.
		if got, gerr := s.OAuthGrant(ctx, g.ID); gerr == nil {
			return got, nil
		}
		return OAuthGrant{}, err
	}
	return s.OAuthGrant(ctx, g.ID)
}

const oauthGrantCols = `id, client_id, kind, subject, patient, scopes, resource, consent, created_ms, revoked_ms, revoked_by`

func scanOAuthGrant(sc scanner) (OAuthGrant, error) {
	var g OAuthGrant
	var scopes string
	var createdMS, revokedMS int64
	if err := sc.Scan(&g.ID, &g.ClientID, &g.Kind, &g.Subject, &g.Patient, &scopes, &g.Resource, &g.Consent,
		&createdMS, &revokedMS, &g.RevokedBy); err != nil {
		return OAuthGrant{}, err
	}
	g.Scopes = strings.Fields(scopes)
	g.CreatedAt, g.RevokedAt = msTime(createdMS), msTime(revokedMS)
	return g, nil
}

// OAuthGrant returns the grant with id (revoked ones too), or ErrOAuthNotFound.
func (s *Store) OAuthGrant(ctx context.Context, id string) (OAuthGrant, error) {
	return oauthOne(ctx, s, "oauth grant", scanOAuthGrant, `SELECT `+oauthGrantCols+` FROM oauth_grants WHERE id = ?`, id)
}

// OAuthGrantRevoked is the resource server's per-request check: nil while
// the grant is active; an error wrapping ErrGrantRevoked once it is
// revoked, ErrOAuthNotFound if there is no such grant. One primary-key
// read of one column (see BenchmarkOAuthGrantRevoked).
func (s *Store) OAuthGrantRevoked(ctx context.Context, id string) error {
	var revoked int64
	err := s.queryRowPrepared(ctx, s.db, s.d.rebind(`SELECT revoked_ms FROM oauth_grants WHERE id = ?`), id).Scan(&revoked)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return ErrOAuthNotFound
	case err != nil:
		return fmt.Errorf("store: oauth grant: %w", err)
	case revoked != 0:
		return ErrGrantRevoked
	}
	return nil
}

// OAuthGrantFilter narrows OAuthGrants; zero values match everything.
type OAuthGrantFilter struct {
	Patient    string
	ClientID   string
	ActiveOnly bool
}

// OAuthGrants returns the grants matching f, newest first: f.Patient
// matches a grant bound to that patient among others (Patients; finding
// U6: an internal grant minted for ray is listed under ray).
func (s *Store) OAuthGrants(ctx context.Context, f OAuthGrantFilter) ([]OAuthGrant, error) {
	q := `SELECT ` + oauthGrantCols + ` FROM oauth_grants WHERE 1 = 1`
	var args []any
	if f.ClientID != "" {
		q += ` AND client_id = ?`
		args = append(args, f.ClientID)
	}
	if f.ActiveOnly {
		q += ` AND revoked_ms = 0`
	}
	gs, err := oauthAll(ctx, s, "oauth grants", scanOAuthGrant, q+` ORDER BY created_ms DESC, id`, args...)
	if err != nil || f.Patient == "" {
		return gs, err
	}
	return slices.DeleteFunc(gs, func(g OAuthGrant) bool { return !slices.Contains(g.Patients(), f.Patient) }), nil
}

// GrantedPatients returns every patient with an active authorization-code
// grant, sorted (the speech principal follows them from the start).
func (s *Store) GrantedPatients(ctx context.Context) ([]string, error) {
	rows, err := s.db.QueryContext(ctx, s.d.rebind(`SELECT DISTINCT patient FROM oauth_grants
		WHERE revoked_ms = 0 AND patient <> '' AND kind = ? ORDER BY patient`), GrantAuthorizationCode)
	if err != nil {
		return nil, fmt.Errorf("store: granted patients: %w", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var p string
		if err := rows.Scan(&p); err != nil {
			return nil, fmt.Errorf("store: granted patients: %w", err)
		}
		out = append(out, p)
	}
	return out, rows.Err()
}

// RevokeOAuthGrant revokes the grant (by names who did it) and deletes its
// refresh tokens. Revoking a revoked grant is a no-op. Errors: ErrOAuthNotFound.
func (s *Store) RevokeOAuthGrant(ctx context.Context, id, by string, now time.Time) error {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	tx, err := s.oauthBegin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if err := revokeGrantTx(ctx, s, tx, id, by, now); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("store: revoke oauth grant: commit: %w", err)
	}
	return nil
}

func revokeGrantTx(ctx context.Context, s *Store, tx *sql.Tx, id, by string, now time.Time) error {
	var n int
	if err := tx.QueryRowContext(ctx, s.d.rebind(`SELECT COUNT(*) FROM oauth_grants WHERE id = ?`), id).Scan(&n); err != nil {
		return fmt.Errorf("store: revoke oauth grant: %w", err)
	}
	if n == 0 {
		return ErrOAuthNotFound
	}
	if _, err := tx.ExecContext(ctx, s.d.rebind(`UPDATE oauth_grants SET revoked_ms = ?, revoked_by = ? WHERE id = ? AND revoked_ms = 0`),
		now.UnixMilli(), by, id); err != nil {
		return fmt.Errorf("store: revoke oauth grant: %w", err)
	}
	if _, err := tx.ExecContext(ctx, s.d.rebind(`DELETE FROM oauth_refresh_tokens WHERE grant_id = ?`), id); err != nil {
		return fmt.Errorf("store: revoke oauth grant: %w", err)
	}
	return nil
}

// ---- authorization requests ----

// CreateOAuthAuthRequest stores a pending authorization request and drops
// expired ones.
func (s *Store) CreateOAuthAuthRequest(ctx context.Context, r OAuthAuthRequest) error {
	if r.ID == "" || r.ClientID == "" || r.CSRF == "" || len(r.Request) == 0 {
		return &ValidationError{Field: "authRequest", Reason: "id, client, csrf and request are required"}
	}
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	tx, err := s.oauthBegin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, s.d.rebind(`DELETE FROM oauth_auth_requests WHERE expires_ms <= ?`), timeMS(r.CreatedAt)); err != nil {
		return fmt.Errorf("store: oauth auth request: %w", err)
	}
	if _, err := tx.ExecContext(ctx, s.d.rebind(`INSERT INTO oauth_auth_requests (id, client_id, request, csrf, created_ms, expires_ms)
		VALUES (?, ?, ?, ?, ?, ?)`), r.ID, r.ClientID, string(r.Request), r.CSRF, timeMS(r.CreatedAt), timeMS(r.ExpiresAt)); err != nil {
		return fmt.Errorf("store: oauth auth request: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("store: oauth auth request: commit: %w", err)
	}
	return nil
}

const oauthAuthRequestCols = `id, client_id, request, csrf, patient, grant_id, code_hash, browser_hash, created_ms, expires_ms`

func (s *Store) scanAuthRequest(row *sql.Row, now time.Time) (OAuthAuthRequest, error) {
	var r OAuthAuthRequest
	var req string
	var createdMS, expiresMS int64
	err := row.Scan(&r.ID, &r.ClientID, &req, &r.CSRF, &r.Patient, &r.GrantID, &r.CodeHash, &r.BrowserHash, &createdMS, &expiresMS)
	if errors.Is(err, sql.ErrNoRows) {
		return OAuthAuthRequest{}, ErrOAuthNotFound
	}
	if err != nil {
		return OAuthAuthRequest{}, fmt.Errorf("store: oauth auth request: %w", err)
	}
	if expiresMS <= now.UnixMilli() {
		return OAuthAuthRequest{}, ErrOAuthNotFound
	}
	r.Request = json.RawMessage(req)
	r.CreatedAt, r.ExpiresAt = msTime(createdMS), msTime(expiresMS)
	return r, nil
}

// OAuthAuthRequest returns the unexpired request with id, or ErrOAuthNotFound.
func (s *Store) OAuthAuthRequest(ctx context.Context, id string, now time.Time) (OAuthAuthRequest, error) {
	return s.scanAuthRequest(s.db.QueryRowContext(ctx, s.d.rebind(`SELECT `+oauthAuthRequestCols+` FROM oauth_auth_requests WHERE id = ?`), id), now)
}

// OAuthAuthRequestByCode returns the unexpired request whose code hashes to
// codeHash. Errors: ErrOAuthNotFound (no such code, or it expired unused);
// ErrAuthCodeReused (wrapped, naming the grant) when the code was already
// exchanged (ExchangeOAuthCode): the grant that exchange produced is
// revoked now, by RevokedByCodeReuse, and its refresh tokens deleted.
func (s *Store) OAuthAuthRequestByCode(ctx context.Context, codeHash []byte, now time.Time) (OAuthAuthRequest, error) {
	r, err := s.scanAuthRequest(s.db.QueryRowContext(ctx, s.d.rebind(`SELECT `+oauthAuthRequestCols+` FROM oauth_auth_requests WHERE code_hash = ?`), codeHash), now)
	if !errors.Is(err, ErrOAuthNotFound) {
		return r, err
	}
	var grantID, clientID string
	err = s.db.QueryRowContext(ctx, s.d.rebind(`SELECT id, client_id FROM oauth_grants WHERE code_hash = ?`), codeHash).Scan(&grantID, &clientID)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return OAuthAuthRequest{}, ErrOAuthNotFound
	case err != nil:
		return OAuthAuthRequest{}, fmt.Errorf("store: oauth auth request: %w", err)
	}
	if err := s.RevokeOAuthGrant(ctx, grantID, RevokedByCodeReuse, now); err != nil && !errors.Is(err, ErrOAuthNotFound) {
		return OAuthAuthRequest{}, err
	}
	return OAuthAuthRequest{}, codeReused(grantID, clientID)
}

func codeReused(grantID, clientID string) error {
	return fmt.Errorf("%w (grant %s, client %s)", ErrAuthCodeReused, grantID, clientID)
}

// ExchangeOAuthCode is the one use of an authorization code: in one
// transaction it ends the pending request with id whose code hashes to
// codeHash, records codeHash on the request's grant (so a second use is
// known as one: OAuthAuthRequestByCode) and, when refreshHash is not nil,
// stores that refresh token for the grant until refreshExpires. Of several
// concurrent exchanges of one code exactly one succeeds; each other one is
// a second use. It returns the grant's id. Errors: ErrOAuthNotFound (no
// such request, or it expired), ErrGrantRevoked, and ErrAuthCodeReused
// (wrapped, naming the grant) when the code was already exchanged — the
// grant is then revoked by RevokedByCodeReuse in the same transaction, its
// refresh tokens deleted.
func (s *Store) ExchangeOAuthCode(ctx context.Context, id string, codeHash, refreshHash []byte, now, refreshExpires time.Time) (grantID string, err error) {
	if len(codeHash) == 0 {
		return "", ErrOAuthNotFound
	}
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	tx, err := s.oauthBegin(ctx)
	if err != nil {
		return "", err
	}
	defer tx.Rollback()
	// reused ends a second use: the grant the first use recorded is revoked
	// and the revocation committed.
	reused := func() (string, error) {
		var clientID string
		err := tx.QueryRowContext(ctx, s.d.rebind(`SELECT id, client_id FROM oauth_grants WHERE code_hash = ?`), codeHash).Scan(&grantID, &clientID)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			return "", ErrOAuthNotFound
		case err != nil:
			return "", fmt.Errorf("store: exchange oauth code: %w", err)
		}
		if err := revokeGrantTx(ctx, s, tx, grantID, RevokedByCodeReuse, now); err != nil {
			return "", err
		}
		if err := tx.Commit(); err != nil {
			return "", fmt.Errorf("store: exchange oauth code: commit: %w", err)
		}
		return "", codeReused(grantID, clientID)
	}
	err = tx.QueryRowContext(ctx, s.d.rebind(`SELECT grant_id FROM oauth_auth_requests WHERE id = ? AND code_hash = ? AND expires_ms > ?`),
		id, codeHash, now.UnixMilli()).Scan(&grantID)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return reused()
	case err != nil:
		return "", fmt.Errorf("store: exchange oauth code: %w", err)
	}
	// On Postgres a concurrent exchange that read the row too waits here
	// for this one's commit, then deletes nothing: a second use.
	res, err := tx.ExecContext(ctx, s.d.rebind(`DELETE FROM oauth_auth_requests WHERE id = ? AND code_hash = ?`), id, codeHash)
	if err != nil {
		return "", fmt.Errorf("store: exchange oauth code: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return reused()
	}
	if err := grantActiveTx(ctx, s, tx, grantID); err != nil {
		return "", err
	}
	res, err = tx.ExecContext(ctx, s.d.rebind(`UPDATE oauth_grants SET code_hash = ? WHERE id = ? AND code_hash IS NULL`), codeHash, grantID)
	if err != nil {
		return "", fmt.Errorf("store: exchange oauth code: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return "", fmt.Errorf("store: exchange oauth code: grant %s already has a code: %w", grantID, ErrAuthRequestState)
	}
	if refreshHash != nil {
		if _, err := tx.ExecContext(ctx, s.d.rebind(`DELETE FROM oauth_refresh_tokens WHERE expires_ms <= ?`), now.UnixMilli()); err != nil {
			return "", fmt.Errorf("store: exchange oauth code: %w", err)
		}
		if _, err := tx.ExecContext(ctx, s.d.rebind(`INSERT INTO oauth_refresh_tokens (hash, grant_id, created_ms, expires_ms) VALUES (?, ?, ?, ?)`),
			refreshHash, grantID, now.UnixMilli(), refreshExpires.UnixMilli()); err != nil {
			return "", fmt.Errorf("store: exchange oauth code: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return "", fmt.Errorf("store: exchange oauth code: commit: %w", err)
	}
	return grantID, nil
}

// BindOAuthAuthRequestBrowser binds the pending request id to the browser
// whose consent cookie hashes to browserHash (32 bytes, SHA-256): the first
// call binds it; a later call with the same hash is a no-op. Errors:
// ErrAuthRequestState when the request is bound to another browser (the
// binding is kept), ErrOAuthNotFound when there is no such request,
// ValidationError for an empty hash.
func (s *Store) BindOAuthAuthRequestBrowser(ctx context.Context, id string, browserHash []byte) error {
	if len(browserHash) == 0 {
		return &ValidationError{Field: "browserHash", Reason: "required"}
	}
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	res, err := s.db.ExecContext(ctx, s.d.rebind(`UPDATE oauth_auth_requests SET browser_hash = ? WHERE id = ? AND (browser_hash IS NULL OR browser_hash = ?)`),
		browserHash, id, browserHash)
	if err != nil {
		return fmt.Errorf("store: oauth auth request: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 1 {
		return nil
	}
	var one int
	err = s.db.QueryRowContext(ctx, s.d.rebind(`SELECT 1 FROM oauth_auth_requests WHERE id = ?`), id).Scan(&one)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return ErrOAuthNotFound
	case err != nil:
		return fmt.Errorf("store: oauth auth request: %w", err)
	}
	return ErrAuthRequestState
}

// SetOAuthAuthRequestPatient records the patient a redeemed link code
// named; only once, and before a grant (ErrAuthRequestState otherwise).
func (s *Store) SetOAuthAuthRequestPatient(ctx context.Context, id, patient string) error {
	return s.updateAuthRequest(ctx, `UPDATE oauth_auth_requests SET patient = ? WHERE id = ? AND patient = '' AND grant_id = ''`, patient, id)
}

// SetOAuthAuthRequestGrant records the grant the person confirmed; only
// once, after a patient was set (ErrAuthRequestState otherwise).
func (s *Store) SetOAuthAuthRequestGrant(ctx context.Context, id, grantID string) error {
	return s.updateAuthRequest(ctx, `UPDATE oauth_auth_requests SET grant_id = ? WHERE id = ? AND patient <> '' AND grant_id = ''`, grantID, id)
}

// SetOAuthAuthRequestCode records the issued code's hash; only once, after
// a grant (ErrAuthRequestState otherwise): one code per request.
func (s *Store) SetOAuthAuthRequestCode(ctx context.Context, id string, codeHash []byte) error {
	return s.updateAuthRequest(ctx, `UPDATE oauth_auth_requests SET code_hash = ? WHERE id = ? AND grant_id <> '' AND code_hash IS NULL`, codeHash, id)
}

func (s *Store) updateAuthRequest(ctx context.Context, q string, v any, id string) error {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	res, err := s.db.ExecContext(ctx, s.d.rebind(q), v, id)
	if err != nil {
		return fmt.Errorf("store: oauth auth request: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return ErrAuthRequestState
	}
	return nil
}

// DeleteOAuthAuthRequest deletes the request (the person said no, or its
// code was exchanged: ExchangeOAuthCode deletes it already). Deleting an
// absent request is ErrOAuthNotFound.
func (s *Store) DeleteOAuthAuthRequest(ctx context.Context, id string) error {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	res, err := s.db.ExecContext(ctx, s.d.rebind(`DELETE FROM oauth_auth_requests WHERE id = ?`), id)
	if err != nil {
		return fmt.Errorf("store: oauth auth request: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return ErrOAuthNotFound
	}
	return nil
}

// ---- refresh tokens ----

// CreateOAuthRefreshToken stores a refresh token's hash for an active grant.
// Errors: ErrGrantRevoked, ErrOAuthNotFound (no such grant).
func (s *Store) CreateOAuthRefreshToken(ctx context.Context, hash []byte, grantID string, now, expires time.Time) error {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	tx, err := s.oauthBegin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if err := grantActiveTx(ctx, s, tx, grantID); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, s.d.rebind(`DELETE FROM oauth_refresh_tokens WHERE expires_ms <= ?`), now.UnixMilli()); err != nil {
		return fmt.Errorf("store: oauth refresh token: %w", err)
	}
	if _, err := tx.ExecContext(ctx, s.d.rebind(`INSERT INTO oauth_refresh_tokens (hash, grant_id, created_ms, expires_ms) VALUES (?, ?, ?, ?)`),
		hash, grantID, now.UnixMilli(), expires.UnixMilli()); err != nil {
		return fmt.Errorf("store: oauth refresh token: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("store: oauth refresh token: commit: %w", err)
	}
	return nil
}

func grantActiveTx(ctx context.Context, s *Store, tx *sql.Tx, grantID string) error {
	var revoked int64
	err := tx.QueryRowContext(ctx, s.d.rebind(`SELECT revoked_ms FROM oauth_grants WHERE id = ?`), grantID).Scan(&revoked)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return ErrOAuthNotFound
	case err != nil:
		return fmt.Errorf("store: oauth grant: %w", err)
	case revoked != 0:
		return ErrGrantRevoked
	}
	return nil
}

// OAuthRefreshTokenGrant returns the grant of an unused, unexpired refresh
// token whose grant is active. Errors: ErrOAuthNotFound (unknown or
// expired), ErrGrantRevoked, ErrRefreshTokenReused (already rotated: the
// grant is revoked now, by RevokedByRefreshReuse).
func (s *Store) OAuthRefreshTokenGrant(ctx context.Context, hash []byte, now time.Time) (OAuthGrant, error) {
	var grantID string
	var expiresMS, usedMS int64
	err := s.db.QueryRowContext(ctx, s.d.rebind(`SELECT grant_id, expires_ms, used_ms FROM oauth_refresh_tokens WHERE hash = ?`), hash).
		Scan(&grantID, &expiresMS, &usedMS)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return OAuthGrant{}, ErrOAuthNotFound
	case err != nil:
		return OAuthGrant{}, fmt.Errorf("store: oauth refresh token: %w", err)
	case usedMS != 0:
		if err := s.RevokeOAuthGrant(ctx, grantID, RevokedByRefreshReuse, now); err != nil && !errors.Is(err, ErrOAuthNotFound) {
			return OAuthGrant{}, err
		}
		return OAuthGrant{}, fmt.Errorf("%w (grant %s)", ErrRefreshTokenReused, grantID)
	case expiresMS <= now.UnixMilli():
		return OAuthGrant{}, ErrOAuthNotFound
	}
	g, err := s.OAuthGrant(ctx, grantID)
	if err != nil {
		return OAuthGrant{}, err
	}
	if !g.Active() {
		return OAuthGrant{}, ErrGrantRevoked
	}
	return g, nil
}

// RotateOAuthRefreshToken marks the token hashing to oldHash used and
// stores newHash for the same grant, atomically: of two concurrent
// rotations of one token exactly one succeeds. Errors: as
// OAuthRefreshTokenGrant (a used token revokes its grant).
func (s *Store) RotateOAuthRefreshToken(ctx context.Context, oldHash, newHash []byte, now, expires time.Time) (grantID string, err error) {
	reused := false
	err = func() error {
		s.writeMu.Lock()
		defer s.writeMu.Unlock()
		tx, err := s.oauthBegin(ctx)
		if err != nil {
			return err
		}
		defer tx.Rollback()
		var expiresMS, usedMS int64
		err = tx.QueryRowContext(ctx, s.d.rebind(`SELECT grant_id, expires_ms, used_ms FROM oauth_refresh_tokens WHERE hash = ?`), oldHash).
			Scan(&grantID, &expiresMS, &usedMS)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			return ErrOAuthNotFound
		case err != nil:
			return fmt.Errorf("store: rotate refresh token: %w", err)
		case usedMS != 0:
			reused = true
			return nil
		case expiresMS <= now.UnixMilli():
			return ErrOAuthNotFound
		}
		if err := grantActiveTx(ctx, s, tx, grantID); err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, s.d.rebind(`UPDATE oauth_refresh_tokens SET used_ms = ? WHERE hash = ? AND used_ms = 0`), now.UnixMilli(), oldHash)
		if err != nil {
			return fmt.Errorf("store: rotate refresh token: %w", err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			reused = true
			return nil
		}
		if _, err := tx.ExecContext(ctx, s.d.rebind(`INSERT INTO oauth_refresh_tokens (hash, grant_id, created_ms, expires_ms) VALUES (?, ?, ?, ?)`),
			newHash, grantID, now.UnixMilli(), expires.UnixMilli()); err != nil {
			return fmt.Errorf("store: rotate refresh token: %w", err)
		}
		if err := tx.Commit(); err != nil {
			return fmt.Errorf("store: rotate refresh token: commit: %w", err)
		}
		return nil
	}()
	if err != nil {
		return "", err
	}
	if reused {
		if err := s.RevokeOAuthGrant(ctx, grantID, RevokedByRefreshReuse, now); err != nil && !errors.Is(err, ErrOAuthNotFound) {
			return "", err
		}
		return "", fmt.Errorf("%w (grant %s)", ErrRefreshTokenReused, grantID)
	}
	return grantID, nil
}

// ---- signing keys ----

// OAuthSigningKeys returns the signing keys, newest first, opened from the
// envelope. A key that cannot be opened (sealed without a sealer, plaintext
// in a store that seals, tampered bytes) is skipped and reported in skipped:
// the server then generates a fresh one rather than sign with nothing.
func (s *Store) OAuthSigningKeys(ctx context.Context) (keys []OAuthKey, skipped int, err error) {
	rows, err := s.db.QueryContext(ctx, `SELECT kid, alg, private_key, sealed, created_ms FROM oauth_keys ORDER BY created_ms DESC, kid`)
	if err != nil {
		return nil, 0, fmt.Errorf("store: oauth keys: %w", err)
	}
	defer rows.Close()
	type row struct {
		k      OAuthKey
		sealed bool
	}
	var all []row
	for rows.Next() {
		var r row
		var createdMS int64
		var sealed int
		if err := rows.Scan(&r.k.KID, &r.k.Alg, &r.k.PrivateDER, &sealed, &createdMS); err != nil {
			return nil, 0, fmt.Errorf("store: oauth keys: %w", err)
		}
		r.sealed = sealed != 0
		r.k.CreatedAt = msTime(createdMS)
		all = append(all, r)
	}
	if err := rows.Err(); err != nil {
		return nil, 0, fmt.Errorf("store: oauth keys: %w", err)
	}
	rows.Close()
	for _, r := range all {
		switch {
		case r.sealed && s.sealer == nil, !r.sealed && s.sealer != nil:
			skipped++
			continue
		case r.sealed:
			der, err := s.sealer.Open(ctx, oauthAAD(r.k.KID), r.k.PrivateDER)
			if err != nil {
				if temporary(err) {
					return nil, 0, sealerErr("store: oauth keys", err)
				}
				skipped++
				continue
			}
			r.k.PrivateDER = der
		}
		keys = append(keys, r.k)
	}
	return keys, skipped, nil
}

// AddOAuthSigningKey stores k (sealed when the store seals) unless a key
// created after notBefore already exists — so several instances rotating
// at once add one key, not several. added is false when it stored nothing.
func (s *Store) AddOAuthSigningKey(ctx context.Context, k OAuthKey, notBefore time.Time) (added bool, err error) {
	priv, sealed := k.PrivateDER, 0
	if s.sealer != nil {
		if priv, err = s.sealer.Seal(ctx, oauthAAD(k.KID), k.PrivateDER); err != nil {
			return false, sealerErr("store: oauth key", err)
		}
		sealed = 1
	}
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	tx, err := s.beginWrite(ctx) // the store-wide lock: instances rotating at once serialize here
	if err != nil {
		return false, err
	}
	defer tx.Rollback()
	var newer int
	if err := tx.QueryRowContext(ctx, s.d.rebind(`SELECT COUNT(*) FROM oauth_keys WHERE created_ms > ?`), notBefore.UnixMilli()).Scan(&newer); err != nil {
		return false, fmt.Errorf("store: oauth key: %w", err)
	}
	if newer > 0 {
		return false, nil
	}
	if _, err := tx.ExecContext(ctx, s.d.rebind(`INSERT INTO oauth_keys (kid, alg, private_key, sealed, created_ms) VALUES (?, ?, ?, ?, ?)`),
		k.KID, k.Alg, priv, sealed, timeMS(k.CreatedAt)); err != nil {
		return false, fmt.Errorf("store: oauth key: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return false, fmt.Errorf("store: oauth key: commit: %w", err)
	}
	return true, nil
}

// DeleteOAuthSigningKeysBefore deletes keys created before t except the
// newest one, returning how many it deleted (retired keys leave the JWKS).
func (s *Store) DeleteOAuthSigningKeysBefore(ctx context.Context, t time.Time) (int, error) {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	res, err := s.db.ExecContext(ctx, s.d.rebind(`DELETE FROM oauth_keys WHERE created_ms < ? AND kid <> (
		SELECT kid FROM oauth_keys ORDER BY created_ms DESC, kid LIMIT 1)`), t.UnixMilli())
	if err != nil {
		return 0, fmt.Errorf("store: oauth keys: %w", err)
	}
	n, _ := res.RowsAffected()
	return int(n), nil
}
