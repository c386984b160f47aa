package bridge

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/unsay/unsay/bridge/auth"
	"github.com/unsay/unsay/models"
)

// DefaultMaxSessionsPerPrincipal caps the open MCP sessions of one
// principal (subject, patients and scopes): 32. An initialize beyond it
// ends the principal's least-recently-used session that is idle — no
// request being served on it and no standalone stream open — which answers
// 404 to its next request, so its client initializes again, as MCP asks of
// every client (2025-11-25, Session Management). A client that opens a
// session per conversation and never sends DELETE (Alexa+) is thus never
// refused. Only when every session of the principal has a live request or
// stream is the initialize answered 429.
const DefaultMaxSessionsPerPrincipal = 32

// principalKey is the identity a session is bound to: the principal's
// subject, its patient binding and its scopes, "sub|p1,p2|s1 s2" with
// patients and scopes sorted and deduplicated (auth.SessionUserID plus the
// scopes). Two tokens with the same key are the same principal; a request
// on a session with any other is refused (403).
func principalKey(p models.Principal) string {
	scopes := make([]string, len(p.Scopes))
	for i, s := range p.Scopes {
		scopes[i] = string(s)
	}
	slices.Sort(scopes)
	scopes = slices.Compact(scopes)
	return auth.SessionUserID(p) + "|" + strings.Join(scopes, " ")
}

// sessionRef is how logs name a session: "s-" and 8 hex digits of the
// SHA-256 of its id — enough to follow one session through a log, never
// the id itself (which, with a token of its principal, addresses it).
func sessionRef(id string) string {
	if id == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(id))
	return "s-" + hex.EncodeToString(sum[:4])
}

// sessionState is what the bridge knows about one MCP session, beyond what
// the SDK keeps. principal, key, ctx and cancel are set at open and never
// change; every other field is guarded by mu.
type sessionState struct {
	// principal is the principal that initialized the session; key is its
	// principalKey. Every later request must carry a token of the same key.
	principal models.Principal
	key       string
	// ctx ends when the session closes (or is closed for not keeping up):
	// server-to-client requests of the session run under it.
	ctx    context.Context
	cancel context.CancelFunc

	mu sync.Mutex
	// ss is the SDK session (nil until initialize completed).
	ss *mcp.ServerSession
	// busy counts the requests on this session being served now (a POST
	// and its response stream, a GET stream, a DELETE); used is the
	// registry's tick at the start of the latest one (or at open): the
	// order in which sessions were last used.
	busy int
	used uint64
	// evicted is set when the session was ended to make room for a newer
	// one of its principal (sessionRegistry.reserve): it no longer counts
	// against the cap, and every request on it is answered 404 until the
	// SDK has closed it.
	evicted bool
	// expires is the expiry ("exp") of the latest token of the session's
	// principal seen on any request: a refreshed token extends it. Once it
	// has passed the session receives no care notification (see
	// Server.tokenExpired; zero counts as expired).
	expires time.Time
	// stream is the standalone GET stream while one is attached.
	stream *attachedStream
	// delivered is the index of the last standalone-stream event written to
	// a client's connection (-1: none): a GET without Last-Event-ID resumes
	// after it, so it repeats nothing the client was sent.
	delivered int
	// pingMisses counts keep-alive pings in a row left unanswered.
	pingMisses int
	// reauthPinged is set once a withheld notification has pinged the
	// session to re-authenticate (promptReauth); a later expiry clears it.
	reauthPinged bool
	// listServed arms list_changed once a resources/list was served (P-8).
	listServed bool
	// listPending marks a list_changed this session may receive; the sending
	// middleware lets exactly one through and clears it.
	listPending bool
	// subs are the unversioned care URIs this session subscribed to.
	subs map[string]struct{}
	// lastRead maps an unversioned fact URI to the version this session
	// last read as current: the version a retraction withdraws (P-17, P-19).
	lastRead map[string]models.Version
}

// attachedStream is the standalone GET stream of a session: the principal
// of the request that opened it (every frame written to it is authorized
// against that principal, P-9) and its writer.
type attachedStream struct {
	principal models.Principal
	w         *StreamWriter
}

func (s *sessionState) currentPrincipal() models.Principal { return s.principal }

// current returns the session's principal and its latest token's expiry.
func (s *sessionState) current() (models.Principal, time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.principal, s.expires
}

// streamPrincipal returns the principal of the request that opened the
// attached standalone stream, if one is attached.
func (s *sessionState) streamPrincipal() (models.Principal, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stream == nil {
		return models.Principal{}, false
	}
	return s.stream.principal, true
}

// attached reports whether a standalone GET stream is attached.
func (s *sessionState) attached() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stream != nil
}

func (s *sessionState) attach(p models.Principal, w *StreamWriter) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stream = &attachedStream{principal: p, w: w}
	s.pingMisses = 0
}

func (s *sessionState) detach(w *StreamWriter) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stream != nil && s.stream.w == w {
		s.stream = nil
	}
}

// noteDelivered records that the standalone event with SSE id id ("_N")
// reached the client's connection.
func (s *sessionState) noteDelivered(id string) {
	stream, idx, ok := parseEventID(id)
	if !ok || stream != "" {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.delivered = max(s.delivered, idx)
}

func (s *sessionState) lastDelivered() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.delivered
}

// parseEventID splits an SSE event id "<stream>_<index>" as the SDK writes
// them; ok is false for anything else.
func parseEventID(id string) (stream string, idx int, ok bool) {
	stream, n, found := strings.Cut(id, "_")
	if !found || strings.Contains(n, "_") {
		return "", 0, false
	}
	idx, err := strconv.Atoi(n)
	if err != nil || idx < 0 {
		return "", 0, false
	}
	return stream, idx, true
}

// sessionRegistry maps MCP session ids to their state, and counts sessions
// per principal key for the cap. Safe for concurrent use. Lock order:
// mu, then a session's mu.
type sessionRegistry struct {
	mu sync.RWMutex
	m  map[string]*sessionState
	// byID mirrors m for get, which every notification sent calls (from
	// several goroutines during a fan-out): a read takes no lock. Written
	// under mu with m.
	byID     sync.Map
	perKey   map[string]int // open sessions per principal key (evicted ones not counted)
	reserved map[string]int // initializes in flight per principal key
	tick     atomic.Uint64  // orders sessions by last use
}

func newSessionRegistry() *sessionRegistry {
	return &sessionRegistry{m: make(map[string]*sessionState), perKey: make(map[string]int), reserved: make(map[string]int)}
}

// get returns the session's state, or nil if unknown.
func (r *sessionRegistry) get(id string) *sessionState {
	if v, ok := r.byID.Load(id); ok {
		return v.(*sessionState)
	}
	return nil
}

// reserve makes room for one more session of the principal key (limit ≤
// 0: no cap). When the key's open sessions and in-flight reservations
// already reach limit, it evicts the key's least-recently-used idle
// session (busy 0, initialized) — marked evicted, no longer counted — and
// returns it with its id for the caller to close (evictSession); it fails
// only when none of them is idle. The caller releases the reservation once
// the initialize request is over (its session, if any, then counts
// itself).
func (r *sessionRegistry) reserve(key string, limit int) (release func(), victimID string, victim *sessionState, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if limit > 0 && r.perKey[key]+r.reserved[key] >= limit {
		victimID, victim = r.evictLeastRecentlyUsedIdle(key)
		if victim == nil {
			return nil, "", nil, false
		}
		if r.perKey[key]--; r.perKey[key] <= 0 {
			delete(r.perKey, key)
		}
	}
	r.reserved[key]++
	var once sync.Once
	return func() {
		once.Do(func() {
			r.mu.Lock()
			defer r.mu.Unlock()
			if r.reserved[key]--; r.reserved[key] <= 0 {
				delete(r.reserved, key)
			}
		})
	}, victimID, victim, true
}

// evictLeastRecentlyUsedIdle marks evicted the session of key that was
// used longest ago among those initialized, not evicted and with no
// request being served or stream open, and returns it; nil when there is
// none. A candidate that a request began on meanwhile is passed over for
// the next. Requires r.mu.
func (r *sessionRegistry) evictLeastRecentlyUsedIdle(key string) (string, *sessionState) {
	idle := func(st *sessionState) bool { return st.ss != nil && !st.evicted && st.busy == 0 && st.stream == nil }
	skip := map[*sessionState]bool{}
	for {
		var id string
		var best *sessionState
		var bestUsed uint64
		for sid, st := range r.m {
			if st.key != key || skip[st] {
				continue
			}
			st.mu.Lock()
			ok, used := idle(st), st.used
			st.mu.Unlock()
			if ok && (best == nil || used < bestUsed) {
				id, best, bestUsed = sid, st, used
			}
		}
		if best == nil {
			return "", nil
		}
		best.mu.Lock()
		ok := idle(best)
		if ok {
			best.evicted = true
		}
		best.mu.Unlock()
		if ok {
			return id, best
		}
		skip[best] = true
	}
}

// begin records the start of a request on s and reports whether s is
// still open (false: it was evicted; the request is answered 404). Every
// begin that returns true is paired with an end.
func (r *sessionRegistry) begin(s *sessionState) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.evicted {
		return false
	}
	s.busy++
	s.used = r.tick.Add(1)
	return true
}

// end records the end of a request begun with begin.
func (r *sessionRegistry) end(s *sessionState) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.busy--
}

// open registers a session initialized by p, whose token expires at exp. A
// second call for the same id keeps the existing state.
func (r *sessionRegistry) open(id string, p models.Principal, exp time.Time) *sessionState {
	r.mu.Lock()
	defer r.mu.Unlock()
	if s, ok := r.m[id]; ok {
		return s
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &sessionState{
		principal: p,
		key:       principalKey(p),
		ctx:       ctx,
		cancel:    cancel,
		expires:   exp,
		used:      r.tick.Add(1),
		delivered: -1,
		subs:      make(map[string]struct{}),
		lastRead:  make(map[string]models.Version),
	}
	r.m[id] = s
	r.byID.Store(id, s)
	r.perKey[s.key]++
	return s
}

// close forgets a session and ends its context.
func (r *sessionRegistry) close(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s, ok := r.m[id]
	if !ok {
		return
	}
	s.cancel()
	delete(r.m, id)
	r.byID.Delete(id)
	s.mu.Lock()
	evicted := s.evicted
	s.mu.Unlock()
	if evicted {
		return // no longer counted since it was evicted
	}
	if r.perKey[s.key]--; r.perKey[s.key] <= 0 {
		delete(r.perKey, s.key)
	}
}

// record extends the session's token expiry to exp when p is the
// session's principal (same principalKey), and reports whether it is.
// Unknown sessions are ignored (the SDK answers 404 for them).
func (r *sessionRegistry) record(id string, p models.Principal, exp time.Time) bool {
	s := r.get(id)
	if s == nil {
		return false
	}
	if p.Subject == "" || principalKey(p) != s.key {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !exp.Equal(s.expires) {
		s.expires = exp
		s.reauthPinged = false
	}
	return true
}

// each calls f for every session, without holding the registry lock while f runs.
func (r *sessionRegistry) each(f func(id string, s *sessionState)) {
	r.mu.RLock()
	ids := make([]string, 0, len(r.m))
	states := make([]*sessionState, 0, len(r.m))
	for id, s := range r.m {
		ids = append(ids, id)
		states = append(states, s)
	}
	r.mu.RUnlock()
	for i := range ids {
		f(ids[i], states[i])
	}
}

// len is the number of sessions known.
func (r *sessionRegistry) len() int {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return len(r.m)
}

// idle reports whether no request is being served on the session.
func (s *sessionState) idle() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.busy == 0
}
