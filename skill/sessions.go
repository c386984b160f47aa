package skill

import (
	"sync"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"

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

// sentResponse is what one response written on a session marked (P-24):
// its id (AttrResponse) and its marks (responseMarks, each with Response
// id), as its session attributes name them; marks nil when it marked
// nothing, or when its write failed (nothing was marked heard).
type sentResponse struct {
	id    string
	marks []models.Marked
	at    time.Time // when it was built to be written (the skill's clock): orders it among the ledger's records (mergeSent)
}

// sentRecord is a session's record of the responses this instance wrote
// on it: the last and the one before it (an error report's echoed
// attributes are those of one of the two), for the patient whose ledger
// they marked.
type sentRecord struct {
	patient    string
	last, prev sentResponse
	expires    time.Time
}

// sessionStore is a bounded, expiring map of session id → state, of
// session id → liveness, and of session id → the record of the responses
// written on it (sentRecord, kept past the session's end: Alexa's error
// report comes after it). Both are least-recently-used caches
// (hashicorp/golang-lru), so a full store drops its oldest entry in
// constant time: with one TTL for every entry the least recently put is
// the one that expires soonest. Expired entries are never served and go
// when the bound needs their room.
type sessionStore struct {
	mu   sync.Mutex // makes get-modify-put sequences atomic
	m    *lru.Cache[string, *sessionState]
	live *lru.Cache[string, liveSession]
	sent *lru.Cache[string, sentRecord]
	ttl  time.Duration
}

// newSessionStore holds at most size sessions' state, size sessions'
// liveness and size sessions' records of responses written (at least 1
// each), each for ttl after its last turn.
func newSessionStore(ttl time.Duration, size int) *sessionStore {
	m, _ := lru.New[string, *sessionState](max(size, 1)) // errors only for a size < 1
	live, _ := lru.New[string, liveSession](max(size, 1))
	sent, _ := lru.New[string, sentRecord](max(size, 1))
	return &sessionStore{m: m, live: live, sent: sent, ttl: ttl}
}

// recordSent records r as the last response written on session id for
// patient at now (the one it replaces becomes the one before it), renewing
// the record's TTL. A record of another patient, or expired, starts anew.
func (s *sessionStore) recordSent(id, patient string, r sentResponse, now time.Time) {
	if id == "" || patient == "" {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	rec, ok := s.sent.Peek(id)
	if !ok || rec.patient != patient || !now.Before(rec.expires) {
		rec = sentRecord{patient: patient}
	}
	rec.prev, rec.last = rec.last, r
	rec.expires = now.Add(s.ttl)
	s.sent.Add(id, rec)
}

// unmarkSent forgets the marks of response rid, the last written on
// session id, when its write failed: it marked nothing heard.
func (s *sessionStore) unmarkSent(id, rid string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if rec, ok := s.sent.Peek(id); ok && rec.last.id == rid {
		rec.last.marks = nil
		s.sent.Add(id, rec)
	}
}

// sentOf returns session id's record of the responses written on it, and
// whether there is one (unexpired at now). It is kept, not taken: a
// repeated error report finds it again (the ledger applies one response's
// report once).
func (s *sessionStore) sentOf(id string, now time.Time) (sentRecord, bool) {
	if id == "" {
		return sentRecord{}, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	rec, ok := s.sent.Peek(id)
	if !ok || !now.Before(rec.expires) {
		return sentRecord{}, false
	}
	return rec, true
}

// touch records a turn of session id for patient at now.
func (s *sessionStore) touch(id string, l liveSession) {
	if id == "" || l.patient == "" {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.live.Add(id, l)
}

// open reports whether patient has a screen session that had a turn within
// SessionOpenWindow before now and was not ended. It looks at every live
// session (asked once per unasked notification, not per turn).
func (s *sessionStore) open(patient string, now time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, k := range s.live.Keys() {
		l, ok := s.live.Peek(k)
		if !ok {
			continue
		}
		if now.Sub(l.lastSeen) > s.ttl {
			s.live.Remove(k)
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
	st, _ := s.m.Peek(id)
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
	s.m.Add(id, &st)
}

func (s *sessionStore) delete(id string) {
	s.mu.Lock()
	s.m.Remove(id)
	s.live.Remove(id)
	s.mu.Unlock()
}

func (s *sessionStore) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.m.Len()
}
