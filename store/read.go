package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/unsay/unsay/models"
)

func timeOrZero(ms int64) time.Time {
	if ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms).UTC()
}

// versionCols are the columns scanVersion reads, from versions v joined to facts f.
const versionCols = `v.seq, v.patient, v.domain, v.n, v.audience, v.value, v.sealed, v.author_id, v.author_label,
	v.written_at, v.stale_after, v.priority, v.prev_hash, v.hash, f.latest, v.head_sig, v.head_key,
	v.audio_type, v.audio_size, v.audio_ms, v.audio_alexa, v.audio_sha256`

type row struct {
	v       models.Version
	seq     int64
	latest  int
	stored  []byte // the value column as stored (sealed bytes when sealed)
	sealed  bool
	headSig string // the head signature made when this version was committed (P-26)
	headKey string // its key's KeyID
}

type scanner interface{ Scan(dest ...any) error }

// scanRaw reads one row of versionCols without opening the value.
func scanRaw(sc scanner) (row, error) {
	var (
		r                 row
		aud               string
		sealed            int
		writtenAt, staleA int64
		audioType         string
		audioSize, ms     int64
		alexa             int
		audioSHA          string
	)
	if err := sc.Scan(&r.seq, &r.v.Patient, &r.v.Domain, &r.v.N, &aud, &r.stored, &sealed, &r.v.AuthorID, &r.v.AuthorLabel,
		&writtenAt, &staleA, &r.v.Priority, &r.v.PrevHash, &r.v.Hash, &r.latest, &r.headSig, &r.headKey,
		&audioType, &audioSize, &ms, &alexa, &audioSHA); err != nil {
		return row{}, err
	}
	if audioType != "" { // the bytes are read by loadAudio, which recomputes the digest (audio_read.go)
		r.v.Audio = &models.Audio{MIMEType: audioType, Size: int(audioSize), Duration: time.Duration(ms) * time.Millisecond,
			AlexaPlayable: alexa != 0, SHA256: audioSHA}
	}
	r.v.Audience = models.Audience(aud)
	r.sealed = sealed != 0
	r.v.WrittenAt = time.UnixMilli(writtenAt).UTC()
	r.v.StaleAfter = timeOrZero(staleA)
	return r, nil
}

// scanVersion reads one row and opens its value.
func (s *Store) scanVersion(ctx context.Context, sc scanner) (row, error) {
	r, err := scanRaw(sc)
	if err != nil {
		return row{}, err
	}
	if r.v.Value, err = s.openServed(ctx, r); err != nil {
		return row{}, err
	}
	return r, nil
}

// parseReadable parses rawURI and applies the first check of P-1 (the
// scheme's scope) and the patient binding (P-21). Every failure is ErrNotFound (P-2).
func parseReadable(p models.Principal, rawURI string) (models.URI, error) {
	u, err := models.ParseURI(rawURI)
	if err != nil || !p.CanReadURI(u) {
		return models.URI{}, ErrNotFound
	}
	return u, nil
}

// Read returns the version named by rawURI (its current version when
// unversioned) if p may read it by BOTH the scheme's scope and the record's
// own audience, and is bound to the patient (P-1, P-21). Every failure —
// malformed, unknown scheme, forbidden, absent, missing version — is ErrNotFound (P-2).
// So is a value stored as plaintext in a store with a Sealer: it is forged
// or not yet rekeyed, and fails closed (logged, never served; P-6).
// Other errors (the database, sealed bytes that fail to open, ErrSealed,
// ErrSealerUnavailable for a key-service outage) are wrapped and are not
// ErrNotFound: the MCP server answers them as an internal error rather than
// claiming the fact is absent.
func (s *Store) Read(ctx context.Context, p models.Principal, rawURI string) (ReadResult, error) {
	r, err := s.readRow(ctx, p, rawURI)
	if err != nil {
		return ReadResult{}, err
	}
	return ReadResult{Version: r.v, Latest: r.latest}, nil
}

// readRow is the read path Read and ReadAudio share: the URI's scope check
// (parseReadable), the row, P-1's second check and the value opened — so
// both apply the same two checks and the same not-found shape (P-1, P-2).
func (s *Store) readRow(ctx context.Context, p models.Principal, rawURI string) (row, error) {
	u, err := parseReadable(p, rawURI)
	if err != nil {
		return row{}, err
	}
	var sr *sql.Row
	if u.Version == 0 {
		sr = s.readLatest.QueryRowContext(ctx, u.Patient, u.Domain)
	} else {
		sr = s.readN.QueryRowContext(ctx, u.Patient, u.Domain, u.Version)
	}
	r, err := scanRaw(sr)
	if errors.Is(err, sql.ErrNoRows) {
		return row{}, ErrNotFound
	}
	if err != nil {
		return row{}, fmt.Errorf("store: read: %w", err)
	}
	// P-1's second check: the stored record's own audience must be the one
	// the URI scheme names (care:// never reaches an assistant record), and
	// the principal may read that audience of that patient.
	if r.v.Audience != u.Audience() || !p.CanRead(r.v.Patient, r.v.Audience) {
		return row{}, ErrNotFound
	}
	if r.v.Value, err = s.openServed(ctx, r); err != nil {
		return row{}, s.failClosed(ctx, "read", r, err)
	}
	return r, nil
}

// readableFilter returns the SQL condition (over facts f) and its args
// restricting rows to what p may read, or ok=false when p may read nothing.
func readableFilter(p models.Principal) (cond string, args []any, ok bool) {
	var auds []any
	for _, part := range models.Partitions() {
		if p.Can(part.Scope) {
			auds = append(auds, string(part.Audience))
		}
	}
	if len(auds) == 0 || len(p.Patients) == 0 {
		return "", nil, false
	}
	cond = "f.audience IN (" + placeholders(len(auds)) + ")"
	args = auds
	if !slices.Contains(p.Patients, models.AllPatients) {
		cond += " AND f.patient IN (" + placeholders(len(p.Patients)) + ")"
		for _, id := range p.Patients {
			args = append(args, id)
		}
	}
	return cond, args, true
}

func placeholders(n int) string {
	return strings.TrimSuffix(strings.Repeat("?, ", n), ", ")
}

// List returns the current version of every fact p may read, sorted by
// unversioned URI string, filtered before anything else (P-1): rows p may
// not read are excluded in the query, and each row's audience is checked
// again against p's scopes before its value is opened. A fact whose current
// value is stored as plaintext in a sealed store is left out, as if absent
// (logged; see Read). Errors as Read's.
//
// The answer for each filter (the principal's patients and audiences) is
// kept until the next commit: every commit allocates the next seq under
// the store-wide write lock, so while the version committed last (its seq
// and hash) is the one read before the answer was built, no version has
// been committed since — on this instance or another — and the answer
// stands. Each call reads that version (one indexed query); a speech
// principal confirming a turn lists every few milliseconds.
func (s *Store) List(ctx context.Context, p models.Principal) ([]models.Fact, error) {
	cond, args, ok := readableFilter(p)
	if !ok {
		return nil, nil
	}
	var top listTop
	err := s.queryRowPrepared(ctx, s.db, `SELECT seq, hash FROM versions ORDER BY seq DESC LIMIT 1`).Scan(&top.seq, &top.hash)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("store: list: %w", err)
	}
	key := listKey(cond, args)
	if e, ok := s.lists.Get(key); ok && e.top == top {
		return slices.Clone(e.facts), nil
	}
	facts, err := s.list(ctx, p, cond, args)
	if err != nil {
		return nil, err
	}
	s.lists.Add(key, listAnswer{top: top, facts: facts}) // built after top was read: it holds at least what top names
	return slices.Clone(facts), nil
}

// listTop names the version committed last: its seq and its chain hash
// (a database restored from a backup and written again may reach the same
// seq with another version; never the same hash).
type listTop struct {
	seq  int64
	hash string
}

// listAnswer is one filter's List answer and the version committed last
// before it was read.
type listAnswer struct {
	top   listTop
	facts []models.Fact
}

// listAnswers bounds the filters whose List answers are kept.
const listAnswers = 256

// listKey names a readable filter: its condition and arguments.
func listKey(cond string, args []any) string {
	var b strings.Builder
	b.WriteString(cond)
	for _, a := range args {
		b.WriteByte(0)
		fmt.Fprint(&b, a)
	}
	return b.String()
}

// list is List without the kept answers.
func (s *Store) list(ctx context.Context, p models.Principal, cond string, args []any) ([]models.Fact, error) {
	// Prepared once per filter shape (how many patients p is bound to):
	// every resources/list page runs it.
	rows, err := s.queryPrepared(ctx, s.d.rebind(`SELECT `+versionCols+` FROM facts f `+s.d.latestJoin()+` WHERE `+cond), args...)
	if err != nil {
		return nil, fmt.Errorf("store: list: %w", err)
	}
	var raws []row
	for rows.Next() {
		r, err := scanRaw(rows)
		if err != nil {
			rows.Close()
			return nil, fmt.Errorf("store: list: %w", err)
		}
		if p.CanRead(r.v.Patient, r.v.Audience) {
			raws = append(raws, r)
		}
	}
	if err := rows.Close(); err != nil {
		return nil, fmt.Errorf("store: list: %w", err)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: list: %w", err)
	}
	out := make([]models.Fact, 0, len(raws))
	for _, r := range raws {
		if r.v.Value, err = s.openServed(ctx, r); err != nil {
			if err = s.failClosed(ctx, "list", r, err); errors.Is(err, ErrNotFound) {
				continue
			}
			return nil, err
		}
		out = append(out, models.Fact{Current: r.v, Versions: r.latest})
	}
	slices.SortFunc(out, func(a, b models.Fact) int {
		return strings.Compare(a.Current.FactURI().String(), b.Current.FactURI().String())
	})
	return out, nil
}

// FactURIs returns the unversioned URI of every fact p may read, sorted by
// URI string, without opening any value (for /verify and `unsay verify`).
func (s *Store) FactURIs(ctx context.Context, p models.Principal) ([]models.URI, error) {
	cond, args, ok := readableFilter(p)
	if !ok {
		return nil, nil
	}
	rows, err := s.db.QueryContext(ctx, s.d.rebind(`SELECT f.patient, f.domain, f.audience FROM facts f WHERE `+cond), args...)
	if err != nil {
		return nil, fmt.Errorf("store: list: %w", err)
	}
	defer rows.Close()
	var out []models.URI
	for rows.Next() {
		var patient, domain, aud string
		if err := rows.Scan(&patient, &domain, &aud); err != nil {
			return nil, fmt.Errorf("store: list: %w", err)
		}
		if a := models.Audience(aud); a.Valid() && p.CanRead(patient, a) {
			out = append(out, models.NewURI(a, patient, domain))
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: list: %w", err)
	}
	slices.SortFunc(out, func(a, b models.URI) int { return strings.Compare(a.String(), b.String()) })
	return out, nil
}

// historyRows returns every stored row of the fact u names, oldest first,
// without opening values, after both P-1 checks; ErrNotFound otherwise.
func (s *Store) historyRows(ctx context.Context, u models.URI) ([]row, error) {
	rows, err := s.db.QueryContext(ctx, s.d.rebind(`SELECT `+versionCols+` FROM facts f JOIN versions v
		ON v.patient = f.patient AND v.domain = f.domain
		WHERE f.patient = ? AND f.domain = ? ORDER BY v.n`), u.Patient, u.Domain)
	if err != nil {
		return nil, fmt.Errorf("store: history: %w", err)
	}
	defer rows.Close()
	var out []row
	for rows.Next() {
		r, err := scanRaw(rows)
		if err != nil {
			return nil, fmt.Errorf("store: history: %w", err)
		}
		if r.v.Audience != u.Audience() {
			return nil, ErrNotFound
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: history: %w", err)
	}
	if len(out) == 0 {
		return nil, ErrNotFound
	}
	return out, nil
}

// History returns every version of the fact named by rawURI, oldest first,
// or ErrNotFound (P-1, P-2, P-21). A versioned URI names its fact's
// history only if that version exists. Any version stored as plaintext in
// a sealed store makes the whole history ErrNotFound (fails closed, logged).
// Other errors as Read's.
func (s *Store) History(ctx context.Context, p models.Principal, rawURI string) ([]models.Version, error) {
	u, err := parseReadable(p, rawURI)
	if err != nil {
		return nil, err
	}
	rs, err := s.historyRows(ctx, u)
	if err != nil {
		return nil, err
	}
	if u.Version > len(rs) {
		return nil, ErrNotFound
	}
	out := make([]models.Version, len(rs))
	for i, r := range rs {
		if r.v.Value, err = s.openServed(ctx, r); err != nil {
			return nil, s.failClosed(ctx, "history", r, err)
		}
		out[i] = r.v
	}
	return out, nil
}

// Window is what SinceAtMost returns: the versions written after a time that a
// principal may read, bounded for one answer.
type Window struct {
	// Versions, oldest first (by WrittenAt, then commit order): every
	// version of the window when it holds at most the limit; otherwise
	// only each changed fact's latest version in the window (Omitted > 0);
	// nil when more than the limit of facts changed (Facts says how many).
	Versions []models.Version
	// First maps each fact of Versions (its unversioned URI) to its lowest
	// version number in the window: the version before it is the one that
	// was current at the window's start.
	First map[models.URI]int
	// Facts is the number of facts with a version in the window.
	Facts int
	// Omitted counts the window's versions left out of Versions (the
	// earlier revisions of facts that changed more than once); 0 when
	// Versions holds the whole window.
	Omitted int
}

// Since returns every version written strictly after t that p may read,
// oldest first (by WrittenAt, then commit order): SinceAtMost without a
// bound, so its memory grows with the window. Serving code uses
// SinceAtMost. Errors as Read's.
func (s *Store) Since(ctx context.Context, p models.Principal, t time.Time) ([]models.Version, error) {
	w, err := s.SinceAtMost(ctx, p, t, 0)
	return w.Versions, err
}

// SinceAtMost returns the versions written strictly after t that p may
// read, for whats_changed, in memory bounded by limit (limit ≤ 0: no
// bound): it reads at most limit+1 versions; a window with more is
// answered from a count and each fact's latest version only (see Window),
// and one in which more than limit facts changed with the count alone.
// Every query sees the same versions: those committed when it began (seq
// at most the highest then). A version stored as plaintext in a sealed store is left out
// (logged; see Read). Errors as Read's.
func (s *Store) SinceAtMost(ctx context.Context, p models.Principal, t time.Time, limit int) (Window, error) {
	w := Window{First: map[models.URI]int{}}
	cond, args, ok := readableFilter(p)
	if !ok {
		return w, nil
	}
	var top int64
	if err := s.db.QueryRowContext(ctx, `SELECT COALESCE(MAX(seq), 0) FROM versions`).Scan(&top); err != nil {
		return Window{}, fmt.Errorf("store: since: %w", err)
	}
	// WrittenAt has ms precision: "strictly after t" compares against t
	// truncated to ms, so a version at t+0.5 ms's millisecond is not lost.
	from := `FROM versions v JOIN facts f ON f.patient = v.patient AND f.domain = v.domain
		WHERE v.written_at > ? AND v.seq <= ? AND ` + cond
	wargs := append([]any{t.UnixMilli(), top}, args...)
	q := `SELECT ` + versionCols + ` ` + from + ` ORDER BY v.written_at, v.seq`
	if limit > 0 {
		q += ` LIMIT ` + strconv.Itoa(limit+1)
	}
	raws, err := s.sinceRows(ctx, p, t, s.d.rebind(q), wargs, nil)
	if err != nil {
		return Window{}, err
	}
	if limit <= 0 || len(raws) <= limit {
		facts := map[models.URI]bool{}
		for _, r := range raws {
			u := r.v.FactURI()
			facts[u] = true
			if f, ok := w.First[u]; !ok || r.v.N < f {
				w.First[u] = r.v.N
			}
		}
		w.Facts = len(facts)
		w.Versions, err = s.openSince(ctx, raws)
		return w, err
	}

	// More than limit versions: count them and their facts, then read each
	// fact's latest version with its first in the window.
	var total int
	if err := s.db.QueryRowContext(ctx, s.d.rebind(`SELECT COUNT(*), COUNT(DISTINCT v.patient || '|' || v.domain) `+from), wargs...).
		Scan(&total, &w.Facts); err != nil {
		return Window{}, fmt.Errorf("store: since: %w", err)
	}
	if w.Facts > limit {
		return w, nil
	}
	q = `SELECT ` + versionCols + `, g.first_n FROM (SELECT v.patient, v.domain, MIN(v.n) AS first_n, MAX(v.n) AS last_n ` + from + `
		GROUP BY v.patient, v.domain) g
		JOIN versions v ON v.patient = g.patient AND v.domain = g.domain AND v.n = g.last_n
		JOIN facts f ON f.patient = v.patient AND f.domain = v.domain
		ORDER BY v.written_at, v.seq`
	firsts := map[models.URI]int{}
	raws, err = s.sinceRows(ctx, p, t, s.d.rebind(q), wargs, firsts)
	if err != nil {
		return Window{}, err
	}
	w.First = firsts
	w.Versions, err = s.openSince(ctx, raws)
	w.Omitted = total - len(w.Versions)
	return w, err
}

// sinceRows runs one of SinceAtMost's queries and scans its rows (versionCols,
// then first_n when firsts is non-nil, recorded per fact), keeping the rows
// p may read written after t (P-1's second check).
func (s *Store) sinceRows(ctx context.Context, p models.Principal, t time.Time, q string, args []any, firsts map[models.URI]int) ([]row, error) {
	rows, err := s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("store: since: %w", err)
	}
	defer rows.Close()
	var out []row
	for rows.Next() {
		var first int
		sc := scanner(rows)
		if firsts != nil {
			sc = withExtra{rows, []any{&first}}
		}
		r, err := scanRaw(sc)
		if err != nil {
			return nil, fmt.Errorf("store: since: %w", err)
		}
		if p.CanRead(r.v.Patient, r.v.Audience) && r.v.WrittenAt.After(t) {
			out = append(out, r)
			if firsts != nil {
				firsts[r.v.FactURI()] = first
			}
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: since: %w", err)
	}
	return out, nil
}

// openSince opens the values of SinceAtMost's rows; a plaintext row in a sealed
// store is left out (failClosed answers ErrNotFound for it).
func (s *Store) openSince(ctx context.Context, raws []row) ([]models.Version, error) {
	out := make([]models.Version, 0, len(raws))
	for _, r := range raws {
		var err error
		if r.v.Value, err = s.openServed(ctx, r); err != nil {
			if err = s.failClosed(ctx, "since", r, err); errors.Is(err, ErrNotFound) {
				continue
			}
			return nil, err
		}
		out = append(out, r.v)
	}
	return out, nil
}

// withExtra is a scanner that scans extra columns after the caller's.
type withExtra struct {
	sc    scanner
	extra []any
}

func (e withExtra) Scan(dest ...any) error { return e.sc.Scan(append(dest, e.extra...)...) }

// Staleness reports whether the fact is stale at now and, if so, its header (P-7).
// The fact is its current version (or the version rawURI names). ErrNotFound as Read.
func (s *Store) Staleness(ctx context.Context, p models.Principal, rawURI string, now time.Time) (stale bool, header string, err error) {
	r, err := s.Read(ctx, p, rawURI)
	if err != nil {
		return false, "", err
	}
	if !r.Version.IsStale(now) {
		return false, "", nil
	}
	return true, models.StaleHeader(r.Version, now), nil
}
