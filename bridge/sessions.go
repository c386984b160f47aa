package bridge

import (
	"sync"
	"time"

	"github.com/unsay/unsay/bridge/auth"
	"github.com/unsay/unsay/models"
)

// sessionState is what the bridge knows about one MCP session, beyond what
// the SDK keeps. Every field is guarded by mu.
type sessionState struct {
	mu sync.Mutex
	// identity is auth.SessionUserID of the principal that initialized the
	// session (its subject and patient binding, the SDK's session UserID);
	// the principal is replaced only by a token of the same identity.
	identity string
	// principal is the session's CURRENT principal: the latest verified
	// token seen on any request of this session (P-9: re-authorize at send).
	principal models.Principal
	// expires is the expiry ("exp") of the token that carried principal.
	// Once it has passed, the session receives no care notification (see
	// Server.tokenExpired; zero counts as expired).
	expires time.Time
	// reauthPinged is set once a withheld notification has pinged the
	// session to re-authenticate (promptReauth); a newly recorded token
	// clears it.
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

func (s *sessionState) currentPrincipal() models.Principal {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.principal
}

// sessionRegistry maps MCP session ids to their state. Safe for concurrent use.
type sessionRegistry struct {
	mu sync.RWMutex
	m  map[string]*sessionState
}

func newSessionRegistry() *sessionRegistry {
	return &sessionRegistry{m: make(map[string]*sessionState)}
}

// get returns the session's state, or nil if unknown.
func (r *sessionRegistry) get(id string) *sessionState {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.m[id]
}

// current returns the session's current principal and its token's expiry.
func (s *sessionState) current() (models.Principal, time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.principal, s.expires
}

// open registers a session initialized by p, whose token expires at exp. A
// second call for the same id keeps the existing state.
func (r *sessionRegistry) open(id string, p models.Principal, exp time.Time) *sessionState {
	r.mu.Lock()
	defer r.mu.Unlock()
	if s, ok := r.m[id]; ok {
		return s
	}
	s := &sessionState{
		identity:  auth.SessionUserID(p),
		principal: p,
		expires:   exp,
		subs:      make(map[string]struct{}),
		lastRead:  make(map[string]models.Version),
	}
	r.m[id] = s
	return s
}

// close forgets a session.
func (r *sessionRegistry) close(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.m, id)
}

// record replaces the session's current principal with p, whose token
// expires at exp, when p has the session's identity (auth.SessionUserID:
// same subject, same patients; the SDK refuses any other with 403 after
// this runs); it reports whether it did. Unknown sessions are ignored (the
// SDK answers 404 for them).
func (r *sessionRegistry) record(id string, p models.Principal, exp time.Time) bool {
	s := r.get(id)
	if s == nil {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if p.Subject == "" || auth.SessionUserID(p) != s.identity {
		return false
	}
	s.principal = p
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
