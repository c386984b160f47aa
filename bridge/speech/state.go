package speech

import (
	"slices"
	"time"

	"github.com/unsay/unsay/models"
)

// state is everything the principal holds in memory: the patients it
// follows, the session it reads over, the cache of versions read, the work
// its notifications asked for and the waiters on them.
//
// It has one owner at a time and no lock: the loop of Run while Run is
// active, and otherwise whichever caller has taken it from
// Principal.parked for an instant. Only closures passed to Principal.do
// touch it, and they never do I/O — so the loop answers every caller at
// once, whatever the network or the database is doing.
type state struct {
	patients map[string]bool // followed patients
	speaker  map[string]bool // with Config.Compete, the patients this instance speaks for; nil: every one it follows (speaker.go)
	synced   map[string]bool // patients whose facts were listed and read on the current session
	tokenGen int             // moves on when the patient set changes under a TokenSource

	up        upstream // the current connection; nil when none
	gen       int      // moves on at every new connection
	upGen     int      // tokenGen the current connection's token was minted at
	upFor     []string // patients the current connection's token is bound to (TokenSource only)
	connected bool     // up is set and its first sync completed

	current  map[string]models.Version // fact URI → latest version read
	versions map[string]models.Version // versioned URI → that version (immutable), for what Ray heard
	seen     map[string]int            // fact URI → highest version any read named
	commits  map[string][]commit       // fact URI → changes the store committed, not yet seen

	lastEventAt    time.Time
	backlog        int
	confirmFailing bool          // the last confirmation at speak time failed, and no sync since
	changed        chan struct{} // closed and replaced at every ledger change

	hook     func(patient string) // OnQueued
	notified map[string]int       // fact URI → latest version told to hook

	work        work
	busy        bool            // the worker is running a job
	idleWaiters []chan struct{} // closed when the session is idle or ends (settle)
	syncWaiters []syncWaiter    // AddPatient under a TokenSource
}

// work is what the session's worker is asked to do next.
type work struct {
	initial     bool            // the first sync of a new session
	relist      bool            // list_changed, or AddPatient: list and subscribe what is new
	full        bool            // re-read every fact against the ledger (setSpeaksFor)
	uris        map[string]bool // facts notified as updated
	listWaiters []chan error    // AddPatient: told when the next list is done
}

func (w *work) empty() bool {
	return !w.initial && !w.relist && !w.full && len(w.uris) == 0 && len(w.listWaiters) == 0
}

// commit is one change the store committed (Committed), for the lag.
type commit struct {
	version int
	at      time.Time
}

type syncWaiter struct {
	patient string
	ch      chan struct{}
}

// maxCommitsPerFact bounds the unseen commits kept per fact; the oldest
// are kept, so the lag is never understated.
const maxCommitsPerFact = 64

func newState(cfg Config) *state {
	st := &state{
		patients: map[string]bool{},
		synced:   map[string]bool{},
		current:  map[string]models.Version{},
		versions: map[string]models.Version{},
		seen:     map[string]int{},
		commits:  map[string][]commit{},
		changed:  make(chan struct{}),
		notified: map[string]int{},
		work:     work{uris: map[string]bool{}},
	}
	if cfg.Compete != nil {
		st.speaker = map[string]bool{} // none until a lease is won
	}
	for _, id := range cfg.Patients {
		st.patients[id] = true
	}
	return st
}

func (st *state) patientList() []string {
	out := make([]string, 0, len(st.patients))
	for id := range st.patients {
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}

// follows reports whether u is an unversioned care:// fact of a followed
// patient. Anything else is never read (P-18).
func (st *state) follows(u models.URI) bool {
	return u.Audience() == models.AudienceUser && u.Version == 0 && st.patients[u.Patient]
}

// canRead reports whether the current connection's token covers patient.
func (st *state) canRead(patient string) bool {
	return st.upFor == nil || slices.Contains(st.upFor, patient)
}

// remember caches v, read as the fact's current version when current.
func (st *state) remember(v models.Version, latest int, current bool) {
	fact := v.FactURI().String()
	st.versions[v.URI().String()] = v
	st.sawVersion(fact, max(v.N, latest))
	if current {
		if old, ok := st.current[fact]; !ok || old.N <= v.N {
			st.current[fact] = v
		}
	}
}

// sawVersion records that a read named version n of fact (even one whose
// contents were refused): the store's commits up to n are seen.
func (st *state) sawVersion(fact string, n int) {
	if n > st.seen[fact] {
		st.seen[fact] = n
	}
	cs := st.commits[fact]
	i := 0
	for i < len(cs) && cs[i].version <= st.seen[fact] {
		i++
	}
	if i == len(cs) {
		delete(st.commits, fact)
	} else if i > 0 {
		st.commits[fact] = slices.Clone(cs[i:])
	}
}

// committed records a change the store committed, for a followed fact not
// yet seen at that version.
func (st *state) committed(u models.URI, version int, at time.Time) {
	fact := u.String()
	if !st.follows(u) || version <= st.seen[fact] {
		return
	}
	cs := st.commits[fact]
	if len(cs) > 0 && cs[len(cs)-1].version >= version {
		return
	}
	if len(cs) >= maxCommitsPerFact {
		cs = cs[:maxCommitsPerFact-1]
	}
	st.commits[fact] = append(cs, commit{version: version, at: at})
}

// lag is how long the oldest committed change of a followed fact has gone
// unseen at now; 0 when the principal has seen every one.
func (st *state) lag(now time.Time) time.Duration {
	var lag time.Duration
	for fact, cs := range st.commits {
		u, err := models.ParseURI(fact)
		if err != nil || !st.patients[u.Patient] || len(cs) == 0 {
			delete(st.commits, fact)
			continue
		}
		lag = max(lag, now.Sub(cs[0].at))
	}
	return lag
}

// factsOf returns the cached current facts of patient, sorted by URI.
func (st *state) factsOf(patient string) []models.Version {
	var out []models.Version
	for _, v := range st.current {
		if v.Patient == patient {
			out = append(out, v)
		}
	}
	sortByURI(out)
	return out
}

// ledgerChanged wakes WaitPending callers.
func (st *state) ledgerChanged() {
	close(st.changed)
	st.changed = make(chan struct{})
}

// wake closes the waiters whose condition now holds: idle waiters when no
// work is outstanding (or no session is up), sync waiters when their
// patient is synced on a connected session.
func (st *state) wake() {
	if st.up == nil || (!st.busy && st.work.empty()) {
		for _, ch := range st.idleWaiters {
			close(ch)
		}
		st.idleWaiters = nil
	}
	keep := st.syncWaiters[:0]
	for _, w := range st.syncWaiters {
		if st.connected && st.synced[w.patient] {
			close(w.ch)
			continue
		}
		keep = append(keep, w)
	}
	st.syncWaiters = keep
}

// endSession forgets the connection: nothing is synced, AddPatient
// waiters are told that the next session will subscribe (nil), and idle
// waiters are woken to see that no session is up.
func (st *state) endSession() {
	st.up, st.upFor, st.connected, st.busy = nil, nil, false, false
	clear(st.synced)
	for _, w := range st.work.listWaiters {
		w <- nil
	}
	st.work = work{uris: map[string]bool{}}
	st.wake()
}

func sortByURI(vs []models.Version) {
	slices.SortFunc(vs, func(a, b models.Version) int {
		as, bs := a.FactURI().String(), b.FactURI().String()
		switch {
		case as < bs:
			return -1
		case as > bs:
			return 1
		}
		return 0
	})
}
