package skill

import (
	"sync"
	"time"
)

// Session-state bounds: what "repeat" and "more" need is kept server-side,
// in memory, per Alexa session id — never in session attributes.
const (
	// SessionStateTTL is how long a session's state is kept after its last
	// turn (10 min; Alexa sessions end long before).
	SessionStateTTL = 10 * time.Minute
	// SessionStateMax bounds the number of sessions held (10,000); when
	// full, the entry that expires soonest is dropped.
	SessionStateMax = 10000
)

// sessionState is what one session needs for Repeat and More.
type sessionState struct {
	patient string
	last    []segment // the last answer spoken, for Repeat
	rest    []segment // the unspoken rest of a cut answer, for More
	expires time.Time
}

// sessionStore is a bounded, expiring map of session id → state.
type sessionStore struct {
	mu  sync.Mutex
	m   map[string]*sessionState
	ttl time.Duration
	max int
}

func newSessionStore(ttl time.Duration, max int) *sessionStore {
	return &sessionStore{m: map[string]*sessionState{}, ttl: ttl, max: max}
}

// get returns a copy of the session's state for patient, or a zero state.
func (s *sessionStore) get(id, patient string, now time.Time) sessionState {
	if id == "" {
		return sessionState{}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.m[id]
	if st == nil || !now.Before(st.expires) || st.patient != patient {
		return sessionState{}
	}
	return *st
}

// put stores the session's state, renewing its TTL.
func (s *sessionStore) put(id string, st sessionState, now time.Time) {
	if id == "" {
		return
	}
	st.expires = now.Add(s.ttl)
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.m[id]; !ok && len(s.m) >= s.max {
		s.evictLocked(now)
	}
	s.m[id] = &st
}

func (s *sessionStore) delete(id string) {
	s.mu.Lock()
	delete(s.m, id)
	s.mu.Unlock()
}

func (s *sessionStore) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.m)
}

// evictLocked drops expired entries, then the one that expires soonest if
// the store is still full.
func (s *sessionStore) evictLocked(now time.Time) {
	var soonest string
	var at time.Time
	for k, st := range s.m {
		if !now.Before(st.expires) {
			delete(s.m, k)
			continue
		}
		if soonest == "" || st.expires.Before(at) {
			soonest, at = k, st.expires
		}
	}
	if len(s.m) >= s.max && soonest != "" {
		delete(s.m, soonest)
	}
}
