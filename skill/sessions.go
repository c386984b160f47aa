package skill

import (
	"sync"
	"time"

	"github.com/unsay/unsay/models"
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
	patient  string
	last     []segment // the last answer spoken, for Repeat
	rest     []segment // the unspoken rest of a cut answer, for More
	question string    // the question the last answer asked (or will ask after More), for Repeat
	reprompt string
	// changes are the announcements spoken in full in this session, the
	// latest per fact, in the order he heard them: "what changed?" after
	// them says them again (RenderRecap).
	changes []models.Announcement
	expires time.Time
}

// SessionOpenWindow is how recently a screen session must have had a turn
// (a tick comes every 5 s) to count as open: 15 s, three ticks.
const SessionOpenWindow = 15 * time.Second

// liveSession is what SessionOpen needs about one session.
type liveSession struct {
	patient  string
	lastSeen time.Time
	screen   bool // the device renders APL, so the card's tick keeps asking
	ended    bool // the last response ended the session
}

// sessionStore is a bounded, expiring map of session id → state, and of
// session id → liveness.
type sessionStore struct {
	mu   sync.Mutex
	m    map[string]*sessionState
	live map[string]liveSession
	ttl  time.Duration
	max  int
}

func newSessionStore(ttl time.Duration, max int) *sessionStore {
	return &sessionStore{m: map[string]*sessionState{}, live: map[string]liveSession{}, ttl: ttl, max: max}
}

// touch records a turn of session id for patient at now.
func (s *sessionStore) touch(id string, l liveSession) {
	if id == "" || l.patient == "" {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.live[id]; !ok && len(s.live) >= s.max {
		var oldest string
		var at time.Time
		for k, v := range s.live {
			if oldest == "" || v.lastSeen.Before(at) {
				oldest, at = k, v.lastSeen
			}
		}
		delete(s.live, oldest)
	}
	s.live[id] = l
}

// open reports whether patient has a screen session that had a turn within
// SessionOpenWindow before now and was not ended.
func (s *sessionStore) open(patient string, now time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, l := range s.live {
		if now.Sub(l.lastSeen) > s.ttl {
			delete(s.live, k)
			continue
		}
		if l.patient == patient && l.screen && !l.ended && now.Sub(l.lastSeen) <= SessionOpenWindow {
			return true
		}
	}
	return false
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
	delete(s.live, id)
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
