package bridge

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/unsay/unsay/models"
	"github.com/unsay/unsay/store"
)

// The device card (P-16).
const (
	// EchoURI names the Echo Show card served as an MCP Apps resource.
	EchoURI = "ui://unsay/echo"
	// EchoMIMEType is the MCP Apps mime type of EchoURI.
	EchoMIMEType = "text/html;profile=mcp-app"
)

// CodeResourceNotFound is the JSON-RPC error code of every read (and
// subscribe) that does not succeed on the 2025-11-25 path (P-2). The SDK's
// own mcp.ResourceNotFoundError uses -32602 in v1.8.0, so the bridge builds
// this error itself.
const CodeResourceNotFound = -32002

// CodeResourceNotFoundModern is the code of the same answer on the
// 2026-07-28 path: -32602 Invalid Params (SEP-2164; "clients SHOULD also
// accept -32002"). Each era keeps one code for every cause (P-2).
const CodeResourceNotFoundModern = jsonrpc.CodeInvalidParams

// NotFoundError is the one answer, on the 2025-11-25 path, to a read (or
// subscribe) that does not succeed — forbidden, absent, another patient's,
// a missing version, a malformed or unknown-scheme URI: code -32002,
// message "Resource not found: {uri}", data {"uri": uri}, where uri is
// exactly the string asked for (P-2).
func NotFoundError(uri string) *jsonrpc.Error {
	return notFoundWithCode(CodeResourceNotFound, uri)
}

// NotFoundErrorModern is NotFoundError on the 2026-07-28 path: the same
// message and data, code -32602 (SEP-2164).
func NotFoundErrorModern(uri string) *jsonrpc.Error {
	return notFoundWithCode(CodeResourceNotFoundModern, uri)
}

func notFoundWithCode(code int64, uri string) *jsonrpc.Error {
	data, _ := json.Marshal(map[string]string{"uri": uri})
	return &jsonrpc.Error{Code: code, Message: "Resource not found: " + uri, Data: data}
}

// notFoundFor is the not-found answer in the era of req.
func notFoundFor(req mcp.Request, uri string) *jsonrpc.Error {
	if isModernRequest(req) {
		return NotFoundErrorModern(uri)
	}
	return NotFoundError(uri)
}

// invalidParams is a -32602 error with a fixed, non-revealing message.
func invalidParams(msg string) *jsonrpc.Error {
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "Invalid params: " + msg}
}

// _meta keys on a fact's resources/read contents: the read contract is
// defined once, in models (ReadMeta); these names are kept for this
// package's readers.
const (
	MetaVersion      = models.MetaVersion
	MetaVersionHash  = models.MetaVersionHash
	MetaPrevHash     = models.MetaPrevHash
	MetaAudience     = models.MetaAudience
	MetaLastModified = models.MetaLastModified
	MetaStale        = models.MetaStale
	MetaAuthor       = models.MetaAuthor
	MetaAuthorID     = models.MetaAuthorID
	MetaRetraction   = models.MetaRetraction
	MetaLatest       = models.MetaLatest
)

// MetaLastReadVersion is the _meta key of a resources/read request (params
// _meta) naming the version of that fact the client last read as current —
// the "unsay/version" of its previous read. When the fact has changed since
// and is speakable, the answer carries "unsay/retraction" withdrawing that
// version (P-17): the explicit basis a 2026-07-28 client, which has no
// session for the server to remember its reads by, gives for a retraction.
// A 2025-11-25 session may send it too; it then takes precedence over what
// the session read. It must be a positive integer (else -32602, decided
// before the URI is looked at, so it reveals nothing about the resource);
// a version at or past the one served yields no retraction.
const MetaLastReadVersion = "unsay/lastReadVersion"

// MetaListPatient is the _meta key of a resources/list request (params
// _meta) naming one patient id: the list then holds only that patient's
// facts the principal may read — no other patient's, and not
// ui://unsay/echo — still paged at PageSize with key cursors (P-11), the
// same key sent with every page. A patient the principal is not bound to
// lists nothing; a value that is not a patient id is -32602. It lets the
// speech principal confirm one patient's facts at a turn (P-24) in pages
// of his facts alone, however many patients it follows; a client that
// does not send it lists everything, as before.
const MetaListPatient = "unsay/patient"

// readPrincipal is the principal of one MCP request: from req.Extra.TokenInfo,
// verified on this very HTTP request — never from the handler's context,
// which holds the initialize request's token. No token: the zero principal,
// which can read nothing.
func (s *Server) readPrincipal(req mcp.Request) models.Principal {
	p, _ := s.readToken(req)
	return p
}

// readToken is readPrincipal with the expiry of the request's token (zero
// without a token).
func (s *Server) readToken(req mcp.Request) (models.Principal, time.Time) {
	extra := req.GetExtra()
	if extra == nil || extra.TokenInfo == nil {
		return models.Principal{}, time.Time{}
	}
	p, _ := s.principalOf(extra.TokenInfo)
	return p, extra.TokenInfo.Expiration
}

// sessionOf returns the bridge state of the request's session, creating it
// from the request's principal if the session is not yet known; nil for a
// request without a session (every 2026-07-28 request).
func (s *Server) sessionOf(req mcp.Request) (*sessionState, string) {
	ss := req.GetSession()
	if ss == nil {
		return nil, ""
	}
	id := ss.ID()
	if id == "" {
		return nil, "" // a stateless (2026-07-28) request has no session
	}
	if st := s.sessions.get(id); st != nil {
		return st, id
	}
	p, exp := s.readToken(req)
	return s.sessions.open(id, p, exp), id
}

// ---- resources/list (P-11, P-1, P-16) ----

// listEntries returns every resource p may list, sorted by URI string.
func (s *Server) listEntries(ctx context.Context, p models.Principal) ([]*mcp.Resource, error) {
	facts, err := s.st.List(ctx, p)
	if err != nil {
		return nil, err
	}
	out := make([]*mcp.Resource, 0, len(facts)+1)
	now := s.now()
	for _, f := range facts {
		// Defence in depth: the store filtered already (P-1).
		if !p.CanRead(f.Current.Patient, f.Current.Audience) {
			continue
		}
		out = append(out, factResource(f, now))
	}
	out = append(out, echoResource())
	slices.SortFunc(out, func(a, b *mcp.Resource) int { return strings.Compare(a.URI, b.URI) })
	return out, nil
}

// listPatient reads MetaListPatient from a resources/list request's
// params: the patient and true when it is set; -32602 when it is set to
// anything but a patient id.
func listPatient(params *mcp.ListResourcesParams) (string, bool, error) {
	if params == nil || params.Meta == nil {
		return "", false, nil
	}
	v, set := params.Meta[MetaListPatient]
	if !set {
		return "", false, nil
	}
	patient, ok := v.(string)
	if !ok || !models.ValidID(patient) {
		return "", false, invalidParams(fmt.Sprintf("_meta %q must be a patient id (1–64 characters of a-z 0-9 _ . -)", MetaListPatient))
	}
	return patient, true, nil
}

// patientEntries is the list of patient's facts p may read, in URI order
// (MetaListPatient): listEntries for p narrowed to that one patient,
// without ui://unsay/echo; none when p is not bound to patient.
func (s *Server) patientEntries(ctx context.Context, p models.Principal, patient string) ([]*mcp.Resource, error) {
	if !p.CanAccessPatient(patient) {
		return nil, nil
	}
	narrowed := p
	narrowed.Patients = []string{patient}
	entries, err := s.listEntries(ctx, narrowed)
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(entries, func(r *mcp.Resource) bool { return r.URI == EchoURI }), nil
}

// factResource is f's list entry at the server clock now. Its _meta
// (models.ListMeta) names the current version, its hash and its staleness,
// so a client holding that version confirms it without reading it again.
func factResource(f models.Fact, now time.Time) *mcp.Resource {
	v := f.Current
	roles := []mcp.Role{"user", "assistant"}
	desc := fmt.Sprintf("%s's %s instruction, version %d, from %s. Speakable.", v.Patient, models.Topic(v.Domain), v.N, v.AuthorLabel)
	if v.Audience == models.AudienceAssistant {
		roles = []mcp.Role{"assistant"}
		desc = fmt.Sprintf("Assistant-only context about %s (%s), version %d. Never speak it.", v.Patient, v.Domain, v.N)
	}
	mimeType, size := "text/plain", int64(0)
	if a := v.Audio; a != nil { // an audio fact: its clip's type and size in bytes (the text is its description)
		mimeType, size = a.MIMEType, int64(a.Size)
		desc += fmt.Sprintf(" A recording of %.1f s (%s, %d bytes) with its description.", a.Duration.Seconds(), a.MIMEType, a.Size)
	}
	return &mcp.Resource{
		URI:         v.FactURI().String(),
		Name:        v.Patient + "/" + v.Domain,
		Title:       v.Patient + " — " + models.Topic(v.Domain),
		Description: desc,
		MIMEType:    mimeType,
		Size:        size,
		// Hints only (P-4): no decision ever reads them.
		Annotations: &mcp.Annotations{
			Audience:     roles,
			LastModified: v.WrittenAt.UTC().Format(time.RFC3339),
			Priority:     v.Priority,
		},
		Meta: models.NewListMeta(v, now).Map(),
	}
}

func echoResource() *mcp.Resource {
	return &mcp.Resource{
		URI:         EchoURI,
		Name:        "echo",
		Title:       "Unsay device card",
		Description: "The Echo Show card: the current instruction, or the retraction to speak first (MCP Apps).",
		MIMEType:    EchoMIMEType,
		Meta:        echoUIMeta(),
	}
}

// listResources serves one page of resources/list: at most PageSize
// entries with URIs strictly after the cursor's key, a nextCursor unless
// this is the last page, and -32602 for a cursor this server did not issue.
// It arms list_changed for the session (P-8).
func (s *Server) listResources(ctx context.Context, req *mcp.ListResourcesRequest) (*mcp.ListResourcesResult, error) {
	p := s.readPrincipal(req)
	after := ""
	if req.Params != nil && req.Params.Cursor != "" {
		key, ok := s.decodeCursor(req.Params.Cursor)
		if !ok {
			return nil, invalidParams("unknown cursor")
		}
		after = key
	}
	var entries []*mcp.Resource
	var err error
	if patient, filtered, ferr := listPatient(req.Params); ferr != nil {
		return nil, ferr
	} else if filtered {
		entries, err = s.patientEntries(ctx, p, patient)
	} else {
		entries, err = s.listEntries(ctx, p)
	}
	if err != nil {
		s.logger.ErrorContext(ctx, "resources/list: store list failed", "err", err)
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "Internal error"}
	}
	start := 0
	if after != "" {
		start, _ = slices.BinarySearchFunc(entries, after, func(r *mcp.Resource, k string) int {
			if r.URI <= k {
				return -1
			}
			return 1
		})
	}
	end := min(start+s.pageSize, len(entries))
	res := &mcp.ListResourcesResult{Resources: entries[start:end]}
	res.CacheScope = "private"
	if end < len(entries) {
		res.NextCursor = s.encodeCursor(entries[end-1].URI)
	}
	if st, _ := s.sessionOf(req); st != nil {
		st.mu.Lock()
		st.listServed = true
		st.mu.Unlock()
	}
	return res, nil
}

// Cursors are "c1." + base64url(last URI) + "." + base64url(HMAC-SHA256
// over "c1." + the URI, truncated to 16 bytes), keyed by a per-server random
// key: opaque to clients, recognisable as ours, unforgeable (P-11).
const cursorPrefix = "c1."

func (s *Server) encodeCursor(lastURI string) string {
	body := base64.RawURLEncoding.EncodeToString([]byte(lastURI))
	return cursorPrefix + body + "." + base64.RawURLEncoding.EncodeToString(s.cursorMAC(lastURI))
}

func (s *Server) decodeCursor(c string) (string, bool) {
	rest, ok := strings.CutPrefix(c, cursorPrefix)
	if !ok {
		return "", false
	}
	body, tag, ok := strings.Cut(rest, ".")
	if !ok {
		return "", false
	}
	raw, err := base64.RawURLEncoding.DecodeString(body)
	if err != nil {
		return "", false
	}
	got, err := base64.RawURLEncoding.DecodeString(tag)
	if err != nil || !hmac.Equal(got, s.cursorMAC(string(raw))) {
		return "", false
	}
	return string(raw), true
}

func (s *Server) cursorMAC(key string) []byte {
	m := hmac.New(sha256.New, s.cursorKey)
	m.Write([]byte(cursorPrefix))
	m.Write([]byte(key))
	return m.Sum(nil)[:16]
}

// ---- resources/read (P-1, P-2, P-7, P-16, P-17) ----

// readResource serves resources/read for ui://unsay/echo and every care
// URI. Every failure is the era's not-found error for uri, whatever the
// cause (P-2), but one: a version the principal may read that no longer
// matches its hash (store.ErrIntegrity) is -32603 Internal error: -32002 on the 2025-11-25 path, -32602 on 2026-07-28. The
// answer carries "unsay/retraction" when the request's _meta names, as
// MetaLastReadVersion, an older version of the fact it reads, or else when
// its 2025-11-25 session read an older version (P-17, P-19).
func (s *Server) readResource(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	uri := ""
	var lastRead int
	if req.Params != nil {
		uri = req.Params.URI
		n, err := lastReadVersion(req.Params.Meta)
		if err != nil {
			return nil, err
		}
		lastRead = n
	}
	if uri == EchoURI {
		res := newReadResult(req)
		res.Contents = []*mcp.ResourceContents{{
			URI: EchoURI, MIMEType: EchoMIMEType, Text: string(s.echo),
			Meta: echoUIMeta(),
		}}
		res.CacheScope = "private"
		return res, nil
	}
	if isDeliveryURI(uri) {
		return s.readDelivery(ctx, req, uri) // delivery.go
	}
	p := s.readPrincipal(req)
	rr, err := s.st.ReadAudio(ctx, p, uri) // Read, with an audio fact's clip (audio.go)
	if errors.Is(err, store.ErrIntegrity) {
		// The fact exists and p may read it (the store checked P-1 before
		// opening it), but the stored version no longer matches its hash:
		// never served, and not "absent" either — an internal error, so the
		// speech principal fails the turn rather than quoting it or
		// dropping the retraction that withdraws it (P-24). Logged by the store.
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "Internal error"}
	}
	if err != nil {
		return nil, notFoundFor(req, uri)
	}
	v := rr.Version
	// Defence in depth: the store checked both the scheme's scope and the
	// record's audience (P-1); check the record's audience once more here.
	if !p.CanRead(v.Patient, v.Audience) {
		return nil, notFoundFor(req, uri)
	}
	now := s.now()
	// The read contract (models.ReadMeta): an old version asked for by
	// /v{n} is marked SUPERSEDED and never retracts; a stale current one
	// starts with the STALE header (P-7). The retraction withdraws the
	// version the request names (MetaLastReadVersion), or else the one its
	// session read before.
	m := models.NewReadMeta(v, rr.Latest, now)
	text := models.ReadText(v, m, now)
	if !m.Superseded() && lastRead > v.N {
		// A version not yet written: a client or host that lost track
		// would otherwise hear no retraction at all, silently.
		return nil, invalidParams(fmt.Sprintf("_meta %q is %d, but the latest version of %s is %d: name the %q of the version you last read",
			MetaLastReadVersion, lastRead, v.FactURI(), v.N, MetaVersion))
	}
	if !m.Superseded() {
		if lastRead > 0 {
			m.Retraction = s.retractionSince(ctx, p, v, lastRead, now)
		}
		if st, _ := s.sessionOf(req); st != nil {
			if sr := s.noteRead(ctx, p, st, v.WithoutAudioData(), now); lastRead == 0 {
				m.Retraction = sr
			}
		}
	}
	res := newReadResult(req)
	res.Contents = []*mcp.ResourceContents{{URI: uri, MIMEType: "text/plain", Text: text, Meta: mcp.Meta(m.Map())}}
	if v.Audio != nil {
		res.Contents = append(res.Contents, s.clipContents(uri, v, m, now)) // audio.go
	}
	res.CacheScope = "private"
	return res, nil
}

// newReadResult is an empty resources/read result for req. On the
// 2026-07-28 path it carries resultType "complete", which every result
// must (SEP-2322): the SDK sets it only on results its own read handler
// built, and its setter is unexported, so the field is set the one public
// way there is — by decoding it.
func newReadResult(req mcp.Request) *mcp.ReadResourceResult {
	res := &mcp.ReadResourceResult{}
	if isModernRequest(req) {
		_ = json.Unmarshal([]byte(`{"resultType":"complete"}`), res)
	}
	return res
}

// lastReadVersion returns the MetaLastReadVersion of a read's _meta: 0 when
// absent, a positive integer, or a -32602 error for anything else.
func lastReadVersion(meta mcp.Meta) (int, error) {
	raw, ok := meta[MetaLastReadVersion]
	if !ok || raw == nil {
		return 0, nil
	}
	var f float64
	switch n := raw.(type) {
	case float64:
		f = n
	case int:
		f = float64(n)
	case json.Number:
		var err error
		if f, err = n.Float64(); err != nil {
			f = -1
		}
	default:
		f = -1
	}
	if f < 1 || f != math.Trunc(f) || f > math.MaxInt32 {
		return 0, invalidParams(fmt.Sprintf("_meta %q must be a positive integer: the %q of the version you last read", MetaLastReadVersion, MetaVersion))
	}
	return int(f), nil
}

// retractionSince is the retraction of version n of v's fact, which the
// client says it last read, by v: "" when n is not older than v, when v is
// assistant-only, when version n cannot be read by p, or when the words
// are unchanged (P-17).
func (s *Server) retractionSince(ctx context.Context, p models.Principal, v models.Version, n int, now time.Time) string {
	if v.Audience != models.AudienceUser || n >= v.N {
		return ""
	}
	heard, ok := s.readVersion(ctx, p, v.FactURI(), n)
	if !ok {
		return ""
	}
	return s.retraction(ctx, p, heard, v, now)
}

// readVersion reads version n of fact as p (false: p cannot read it, or
// the store failed).
func (s *Server) readVersion(ctx context.Context, p models.Principal, fact models.URI, n int) (models.Version, bool) {
	pr, err := s.st.Read(ctx, p, fact.WithVersion(n).String())
	if err != nil || !p.CanRead(pr.Version.Patient, pr.Version.Audience) {
		return models.Version{}, false
	}
	return pr.Version, true
}

// retraction is the sentence a host says to withdraw heard by current
// (P-17): models.RenderRetractionBy naming, as the voice does, the version
// that first said current's words as who changed them and when
// (models.ChangedBy, versions read as p; breakit8 G6). "" when the words
// are unchanged or either version is assistant-only.
func (s *Server) retraction(ctx context.Context, p models.Principal, heard, current models.Version, now time.Time) string {
	changer := current
	if by := models.ChangedBy(heard, current, func(n int) (models.Version, bool) {
		return s.readVersion(ctx, p, current.FactURI(), n)
	}); by != nil {
		changer = *by
	}
	r, err := models.RenderRetractionBy(heard, current, changer, now)
	if err != nil {
		return ""
	}
	return r
}

// noteRead records that the session read v as current and returns the
// retraction of the version it read before, if any: never on a first read,
// never for assistant content, never when the words are unchanged, never
// twice for the same pair (P-17, P-19).
func (s *Server) noteRead(ctx context.Context, p models.Principal, st *sessionState, v models.Version, now time.Time) string {
	if v.Audience != models.AudienceUser {
		return ""
	}
	key := v.FactURI().String()
	st.mu.Lock()
	prev, had := st.lastRead[key]
	if !had || prev.N <= v.N {
		st.lastRead[key] = v
	}
	st.mu.Unlock()
	if !had || prev.N >= v.N {
		return ""
	}
	return s.retraction(ctx, p, prev, v, now)
}

// lastReadOf returns the version the session last read of the fact, if any.
func (st *sessionState) lastReadOf(fact models.URI) (models.Version, bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	v, ok := st.lastRead[fact.String()]
	return v, ok
}

// ---- resources/subscribe (P-9) ----

// subscribe authorizes a subscription: a care-scheme URI that is not the
// canonical unversioned form (a version, a trailing slash, "//", upper case…)
// is -32602; anything else the session's principal cannot read is -32002.
// The accepted URI joins the session's registry.
func (s *Server) subscribe(ctx context.Context, req *mcp.SubscribeRequest) error {
	uri := ""
	if req.Params != nil {
		uri = req.Params.URI
	}
	if isDeliveryURI(uri) {
		return s.subscribeDelivery(ctx, req, uri) // delivery.go
	}
	if isCareScheme(uri) {
		u, err := models.ParseURI(uri)
		if err != nil || u.Version != 0 {
			return invalidParams("subscribe takes a canonical unversioned care URI, care://{patient}/{domain}")
		}
	}
	p := s.readPrincipal(req)
	if uri != EchoURI {
		if _, err := s.st.Read(ctx, p, uri); err != nil {
			return NotFoundError(uri)
		}
	}
	st, _ := s.sessionOf(req)
	if st == nil {
		return NotFoundError(uri)
	}
	st.mu.Lock()
	st.subs[uri] = struct{}{}
	st.mu.Unlock()
	return nil
}

// unsubscribe drops uri from the session's registry; it never fails.
func (s *Server) unsubscribe(_ context.Context, req *mcp.UnsubscribeRequest) error {
	if req.Params == nil {
		return nil
	}
	if st := s.sessions.get(req.Session.ID()); st != nil {
		st.mu.Lock()
		delete(st.subs, req.Params.URI)
		st.mu.Unlock()
	}
	return nil
}

// isCareScheme reports whether uri starts with a scheme of the partition
// table ("care://", "care-internal://").
func isCareScheme(uri string) bool {
	scheme, _, ok := strings.Cut(uri, "://")
	if !ok {
		return false
	}
	_, ok = models.PartitionForScheme(scheme)
	return ok
}

// canSeeURI reports whether p may see the unversioned or versioned care
// URI uri by scheme scope and patient binding, or the delivery-state URI uri
// (canSeeDelivery); ui://unsay/echo is visible to every principal. A URI
// that does not parse is not visible (fail closed).
func canSeeURI(p models.Principal, uri string) bool {
	if uri == EchoURI {
		return true
	}
	if d, ok := parseDeliveryURI(uri); ok {
		return canSeeDelivery(p, d) // delivery.go
	}
	u, err := models.ParseURI(uri)
	if err != nil {
		return false
	}
	return p.CanReadURI(u)
}
