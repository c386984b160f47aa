package speech

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"

	"github.com/unsay/unsay/models"
)

// ProtocolVersion is the MCP protocol version the client falls back to
// against a server that does not offer ModernProtocolVersion
// (models.ProtocolVersion, 2025-11-25): sessions, the standalone event
// stream and resources/subscribe.
const ProtocolVersion = models.ProtocolVersion

// Errors. Match with errors.Is.
var (
	// ErrNotConnected: the answer needs a read over MCP and no session is up.
	ErrNotConnected = errors.New("speech: not connected to the MCP server")
	// ErrUnconfirmed: Turn could not confirm with the MCP server, within
	// ConfirmTimeout, that the facts it would return are current (P-24).
	// Nothing may then be said as current. It wraps the cause
	// (ErrNotConnected, a timeout, a transport error).
	ErrUnconfirmed = errors.New("speech: the care notes could not be confirmed current")
	// ErrInvalidArgument: a caller passed a malformed patient, URI or version.
	ErrInvalidArgument = errors.New("speech: invalid argument")
	// ErrNotAnnounced: WaitPending's version was settled without an
	// announcement — Ray already heard it or newer, or the words he heard
	// did not change.
	ErrNotAnnounced = errors.New("speech: version settled without an announcement")
	// ErrRunning: Run was called while another Run is active.
	ErrRunning = errors.New("speech: Run already active")
)

// Principal is the speech principal (README, Architecture): an MCP
// client holding care.read.user only, subscribed to every care:// fact of
// its patients, that turns each revision into a durable announcement from
// the version Ray last heard (P-19), and confirms at speak time that what
// the skill will say is current (P-24). It reaches facts only over MCP and
// imports neither store nor bridge (P-18).
//
// Its methods are safe for concurrent use. Turn, Offered and MarkHeard
// implement the skill's source of speech; Facts, Pending and WaitPending
// answer from what it has read (the notifier, the bench, tests).
//
// What it holds in memory (the state) is owned by Run's goroutine, which
// answers every method over a channel and never waits on the network or
// the database; see Run.
type Principal struct {
	cfg    Config
	log    *slog.Logger
	ledger *ledger
	http   bearer
	token  atomic.Pointer[string]

	// The speaker leases Run competes for (speaker.go): leaseCtx is Run's
	// context while it runs, competing the patients already competed for.
	leaseMu   sync.Mutex
	leaseCtx  context.Context
	competing map[string]bool
	leases    sync.WaitGroup

	running atomic.Bool
	era     atomic.Int32      // the era the server spoke at the last dial (dialConfig.era)
	rounds  confirmRounds     // Turn's shared rounds of reads (confirmflight.go)
	revs    revisionCounts    // notifications and lost sessions, per patient (revisions.go)
	calls   chan func(*state) // to Run's loop
	parked  chan *state       // holds the state while no Run is active
}

// New validates cfg and returns a principal that is not yet connected
// (call Run). Errors wrap ErrConfig for a bad configuration, or the
// ledger's error reading its backlog.
func New(cfg Config) (*Principal, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	ctx := context.Background()
	l := &ledger{LedgerStore: cfg.Ledger, now: cfg.Clock}
	p := &Principal{
		cfg:    cfg,
		log:    cfg.Logger.With("component", "speech"),
		ledger: l,
		calls:  make(chan func(*state)),
		parked: make(chan *state, 1),
	}
	st := newState(cfg)
	if st.backlog, err = l.Backlog(ctx); err != nil {
		return nil, err
	}
	p.parked <- st
	tok := cfg.Token
	p.token.Store(&tok)
	next := cfg.HTTPClient.Transport
	if next == nil {
		next = http.DefaultTransport
	}
	p.http = bearer{token: func() string { return *p.token.Load() }, next: next}
	return p, nil
}

func (p *Principal) httpClient() *http.Client {
	c := *p.cfg.HTTPClient
	c.Transport = p.http
	return &c
}
