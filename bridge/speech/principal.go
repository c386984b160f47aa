package speech

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/unsay/unsay/models"
)

// ProtocolVersion is the MCP protocol version the client pins: the newest a
// stateful Streamable HTTP server serves, with sessions, the standalone
// event stream and subscriptions (reference/mcp-go-sdk.md §0).
const ProtocolVersion = "2025-11-25"

// Errors. Match with errors.Is.
var (
	// ErrNotConnected: the answer needs a read over MCP and no session is up.
	ErrNotConnected = errors.New("speech: not connected to the MCP server")
	// ErrInvalidArgument: a caller passed a malformed patient, URI or version.
	ErrInvalidArgument = errors.New("speech: invalid argument")
	// ErrNotAnnounced: WaitPending's version was settled without an
	// announcement — Ray already heard it or newer, or the words he heard
	// did not change.
	ErrNotAnnounced = errors.New("speech: version settled without an announcement")
	// ErrRunning: Run was called while another Run is active.
	ErrRunning = errors.New("speech: Run already active")
)

// Principal is the speech principal (DESIGN.md, main job steps 2–4): an MCP
// client holding care.read.user only, subscribed to every care:// fact of
// its patients, that turns each revision into a durable announcement from
// the version Ray last heard (P-19). It reaches facts only over MCP and
// imports neither store nor bridge (P-18).
//
// Its methods are safe for concurrent use. Facts, Pending, MarkHeard and
// WaitPending implement the skill's source of speech.
type Principal struct {
	cfg    Config
	log    *slog.Logger
	ledger *ledger
	client *mcp.Client
	http   bearer
	token  atomic.Pointer[string]

	running atomic.Bool
	kick    chan struct{} // wakes the session worker; capacity 1
	hook    queuedHook    // OnQueued

	mu          sync.Mutex
	patients    map[string]bool
	passive     map[string]bool           // followed for reading only: another instance speaks for them (Config.Leased)
	fullSync    bool                      // re-read every fact against the ledger at the next drain
	tokenGen    int                       // moves on when the patient set (so the token's identity) changes
	sessionGen  int                       // tokenGen when the current session's token was minted
	draining    bool                      // the worker is reading and reconciling notified facts
	synced      map[string]bool           // patients whose facts were listed and read at least once
	current     map[string]models.Version // fact URI → latest version read
	versions    map[string]models.Version // versioned URI → that version (immutable), for Heard
	cs          *mcp.ClientSession
	connected   bool
	lastEventAt time.Time
	backlog     int
	changed     chan struct{} // closed and replaced on every ledger change

	// work for the session worker, filled by notification handlers
	workURIs    map[string]bool
	relist      bool
	listWaiters []chan error
}

// New validates cfg, creates the ledger tables if missing and returns a
// principal that is not yet connected (call Run). Errors wrap ErrConfig
// for a bad configuration, or the database's error.
func New(cfg Config) (*Principal, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	ctx := context.Background()
	l, err := newLedger(ctx, cfg.DB, cfg.Dialect)
	if err != nil {
		return nil, err
	}
	p := &Principal{
		cfg:      cfg,
		log:      cfg.Logger.With("component", "speech"),
		ledger:   l,
		kick:     make(chan struct{}, 1),
		patients: map[string]bool{},
		passive:  map[string]bool{},
		synced:   map[string]bool{},
		current:  map[string]models.Version{},
		versions: map[string]models.Version{},
		changed:  make(chan struct{}),
		workURIs: map[string]bool{},
	}
	for _, id := range cfg.Patients {
		p.patients[id] = true
		if cfg.Leased {
			p.passive[id] = true
		}
	}
	tok := cfg.Token
	p.token.Store(&tok)
	next := cfg.HTTPClient.Transport
	if next == nil {
		next = http.DefaultTransport
	}
	p.http = bearer{token: func() string { return *p.token.Load() }, next: next}
	p.client = mcp.NewClient(&mcp.Implementation{Name: "unsay-speech", Version: "1"}, &mcp.ClientOptions{
		ResourceUpdatedHandler:     p.onUpdated,
		ResourceListChangedHandler: p.onListChanged,
		KeepAlive:                  cfg.KeepAlive,
		Capabilities:               &mcp.ClientCapabilities{},
	})
	if p.backlog, err = l.Backlog(ctx); err != nil {
		return nil, err
	}
	return p, nil
}

// Run connects to the MCP server and keeps the principal subscribed until
// ctx is done, when it returns ctx.Err(). Each session: initialize at
// ProtocolVersion with the bearer token, list every page, subscribe to
// every care:// fact of every patient, read each and reconcile it with the
// heard ledger (so a revision published while disconnected is announced),
// then serve notifications: updated → read → queue; list_changed → re-list
// and subscribe to new facts. When the session is lost (ErrSessionMissing
// after a server restart or DELETE, a failed stream, a failed ping, a
// transport error) it reconnects after Config.Backoff and does it all
// again. It returns ErrRunning if another Run is active.
func (p *Principal) Run(ctx context.Context) error {
	if !p.running.CompareAndSwap(false, true) {
		return ErrRunning
	}
	defer p.running.Store(false)
	attempt := 0
	for {
		up, err := p.session(ctx)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if up {
			attempt = 0
		}
		d := p.cfg.Backoff.Delay(attempt)
		attempt++
		p.log.Warn("speech: MCP session ended; reconnecting", "err", err, "delay", d, "attempt", attempt)
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// session runs one MCP session to its end. up reports whether it got as far
// as a complete initial sync.
func (p *Principal) session(ctx context.Context) (up bool, err error) {
	// The token generation this session's token is minted at: a sync may
	// mark patients synced only while it is still current (AddPatient
	// moves it on, and the server refuses the old token's session).
	p.mu.Lock()
	p.sessionGen = p.tokenGen
	p.mu.Unlock()
	if err := p.refreshToken(ctx); err != nil {
		return false, err
	}
	t := &mcp.StreamableClientTransport{Endpoint: p.cfg.MCPURL, HTTPClient: p.httpClient()}
	cctx, cancel := context.WithTimeout(ctx, p.cfg.RequestTimeout)
	cs, err := p.client.Connect(cctx, t, &mcp.ClientSessionOptions{ProtocolVersion: ProtocolVersion})
	cancel()
	if err != nil {
		return false, fmt.Errorf("speech: connect: %w", err)
	}
	defer cs.Close()
	ended := make(chan error, 1)
	go func() { ended <- cs.Wait() }()

	p.mu.Lock()
	p.cs = cs
	p.relist = false
	clear(p.workURIs)
	p.mu.Unlock()
	defer p.endSession(cs)

	subscribed := map[string]bool{}
	if err := p.syncList(ctx, cs, subscribed, true); err != nil {
		return false, err
	}
	p.mu.Lock()
	p.connected = true
	p.lastEventAt = p.cfg.Clock()
	p.mu.Unlock()
	p.log.Info("speech: subscribed", "session", cs.ID(), "facts", len(subscribed))

	for {
		select {
		case <-ctx.Done():
			return true, ctx.Err()
		case err := <-ended:
			if err == nil {
				err = errors.New("closed by the server")
			}
			return true, fmt.Errorf("speech: session %s ended: %w", cs.ID(), err)
		case <-p.kick:
			if err := p.drain(ctx, cs, subscribed); err != nil {
				return true, err
			}
		}
	}
}

func (p *Principal) endSession(cs *mcp.ClientSession) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cs == cs {
		p.cs = nil
		p.connected = false
	}
	// Patients added during the session are subscribed on the next one.
	for _, w := range p.listWaiters {
		w <- nil
	}
	p.listWaiters = nil
}

func (p *Principal) httpClient() *http.Client {
	c := *p.cfg.HTTPClient
	c.Transport = p.http
	return &c
}

func (p *Principal) refreshToken(ctx context.Context) error {
	if p.cfg.TokenSource == nil {
		return nil
	}
	tok, err := p.cfg.TokenSource(ctx, p.patientList())
	if err != nil {
		return fmt.Errorf("speech: token: %w", err)
	}
	p.token.Store(&tok)
	return nil
}

func (p *Principal) patientList() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]string, 0, len(p.patients))
	for id := range p.patients {
		out = append(out, id)
	}
	sort.Strings(out)
	return out
}

// poke wakes the worker without blocking.
func (p *Principal) poke() {
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// onUpdated runs on the SDK's notification goroutine: it only records the
// URI and wakes the worker, so later notifications are never held up.
func (p *Principal) onUpdated(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
	if req == nil || req.Params == nil {
		return
	}
	p.mu.Lock()
	p.workURIs[req.Params.URI] = true
	p.lastEventAt = p.cfg.Clock()
	p.mu.Unlock()
	p.poke()
}

func (p *Principal) onListChanged(_ context.Context, _ *mcp.ResourceListChangedRequest) {
	p.mu.Lock()
	p.relist = true
	p.lastEventAt = p.cfg.Clock()
	p.mu.Unlock()
	p.poke()
}

// drain does the work the handlers recorded.
func (p *Principal) drain(ctx context.Context, cs *mcp.ClientSession, subscribed map[string]bool) error {
	p.mu.Lock()
	uris := make([]string, 0, len(p.workURIs))
	for u := range p.workURIs {
		uris = append(uris, u)
	}
	clear(p.workURIs)
	relist, waiters, full := p.relist, p.listWaiters, p.fullSync
	p.relist, p.listWaiters, p.fullSync = false, nil, false
	p.draining = true
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		p.draining = false
		p.mu.Unlock()
	}()
	sort.Strings(uris)

	if relist || full || len(waiters) > 0 {
		err := p.syncList(ctx, cs, subscribed, full)
		for _, w := range waiters {
			w <- err
		}
		if err != nil {
			return err
		}
	}
	for _, s := range uris {
		u, ok := p.speakable(s)
		if !ok {
			continue
		}
		if err := p.refresh(ctx, cs, u); err != nil {
			if isResourceError(err) {
				p.log.Warn("speech: cannot read updated fact", "uri", s, "err", err)
				continue
			}
			return err
		}
	}
	return nil
}

// speakable parses s and reports whether it is a care:// fact (unversioned)
// of one of the principal's patients. Anything else is never read (P-18).
func (p *Principal) speakable(s string) (models.URI, bool) {
	u, err := models.ParseURI(s)
	if err != nil || u.Audience() != models.AudienceUser || u.Version != 0 {
		return models.URI{}, false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return u, p.patients[u.Patient]
}

// syncList lists every page, subscribes to each care:// fact of the
// patients not yet subscribed on this session, then reads and reconciles
// them (all of them when full). Subscribing before reading means a
// revision published in between is either read or notified.
func (p *Principal) syncList(ctx context.Context, cs *mcp.ClientSession, subscribed map[string]bool, full bool) error {
	listed, err := p.listAll(ctx, cs)
	if err != nil {
		return err
	}
	patients := p.patientList()
	var fresh, all []models.URI
	for _, s := range listed {
		u, ok := p.speakable(s)
		if !ok {
			continue
		}
		all = append(all, u)
		if subscribed[s] {
			continue
		}
		rctx, cancel := context.WithTimeout(ctx, p.cfg.RequestTimeout)
		err := cs.Subscribe(rctx, &mcp.SubscribeParams{URI: s})
		cancel()
		if err != nil {
			if isResourceError(err) {
				p.log.Warn("speech: subscribe refused", "uri", s, "err", err)
				continue
			}
			return fmt.Errorf("speech: subscribe %s: %w", s, err)
		}
		subscribed[s] = true
		fresh = append(fresh, u)
	}
	toRead := fresh
	if full {
		toRead = all
	}
	// A patient followed for the first time starts from what his facts say
	// now: nothing is announced for them (P-19); only later revisions and
	// facts created later are news.
	followed, err := p.ledger.Followed(ctx, patients)
	if err != nil {
		return err
	}
	baseline := map[string]map[string]int{}
	for _, u := range toRead {
		if !followed[u.Patient] {
			v, err := p.read(ctx, cs, u)
			if err != nil {
				if isResourceError(err) {
					p.log.Warn("speech: cannot read fact", "uri", u.String(), "err", err)
					continue
				}
				return err
			}
			p.mu.Lock()
			p.current[u.String()] = v
			p.mu.Unlock()
			if baseline[u.Patient] == nil {
				baseline[u.Patient] = map[string]int{}
			}
			baseline[u.Patient][u.String()] = v.N
			continue
		}
		if err := p.refresh(ctx, cs, u); err != nil {
			if isResourceError(err) {
				p.log.Warn("speech: cannot read fact", "uri", u.String(), "err", err)
				continue
			}
			return err
		}
	}
	for _, id := range patients {
		if !followed[id] {
			if err := p.ledger.Follow(ctx, id, baseline[id]); err != nil {
				return err
			}
		}
	}
	// The listed set is now the truth for these patients.
	keep := map[string]bool{}
	seen := map[string]int{}
	for _, u := range all {
		keep[u.String()] = true
		seen[u.Patient]++
	}
	for _, id := range patients {
		if seen[id] == 0 {
			p.log.Warn("speech: no speakable facts visible for patient (is the token bound to it?)", "patient", id)
		}
	}
	p.mu.Lock()
	for s, v := range p.current {
		if slices.Contains(patients, v.Patient) && !keep[s] {
			delete(p.current, s)
		}
	}
	if p.sessionGen == p.tokenGen {
		for _, id := range patients {
			p.synced[id] = true
		}
	}
	p.mu.Unlock()
	return nil
}

// listAll follows nextCursor to the last page.
func (p *Principal) listAll(ctx context.Context, cs *mcp.ClientSession) ([]string, error) {
	var out []string
	cursor := ""
	for pages := 0; ; pages++ {
		if pages > 100000 {
			return nil, fmt.Errorf("speech: list: too many pages")
		}
		rctx, cancel := context.WithTimeout(ctx, p.cfg.RequestTimeout)
		res, err := cs.ListResources(rctx, &mcp.ListResourcesParams{Cursor: cursor})
		cancel()
		if err != nil {
			return nil, fmt.Errorf("speech: list: %w", err)
		}
		for _, r := range res.Resources {
			if r != nil {
				out = append(out, r.URI)
			}
		}
		if res.NextCursor == "" || res.NextCursor == cursor {
			return out, nil
		}
		cursor = res.NextCursor
	}
}

// read reads u (versioned or not) over cs and parses it.
func (p *Principal) read(ctx context.Context, cs *mcp.ClientSession, u models.URI) (models.Version, error) {
	if u.Audience() != models.AudienceUser {
		return models.Version{}, fmt.Errorf("%w: %s is not speakable", ErrInvalidArgument, u)
	}
	rctx, cancel := context.WithTimeout(ctx, p.cfg.RequestTimeout)
	res, err := cs.ReadResource(rctx, &mcp.ReadResourceParams{URI: u.String()})
	cancel()
	if err != nil {
		return models.Version{}, fmt.Errorf("speech: read %s: %w", u, err)
	}
	rv, err := parseRead(u, res, p.cfg.Clock())
	if err != nil {
		return models.Version{}, err
	}
	p.mu.Lock()
	p.versions[rv.URI().String()] = rv.Version
	p.mu.Unlock()
	return rv.Version, nil
}

// refresh reads the current version of u, caches it and reconciles it
// with the ledger.
func (p *Principal) refresh(ctx context.Context, cs *mcp.ClientSession, u models.URI) error {
	v, err := p.read(ctx, cs, u.Unversioned())
	if err != nil {
		return err
	}
	p.mu.Lock()
	if old, ok := p.current[u.String()]; !ok || old.N <= v.N {
		p.current[u.String()] = v
	}
	p.mu.Unlock()
	return p.reconcile(ctx, cs, v)
}

// reconcile applies P-19 to the latest version v: compare with the version
// Ray heard (its words read back over MCP) and queue, update or drop the
// one pending announcement.
func (p *Principal) reconcile(ctx context.Context, cs *mcp.ClientSession, v models.Version) error {
	u := v.FactURI()
	for range 5 {
		h, err := p.ledger.Heard(ctx, v.Patient, u.String())
		if err != nil {
			return err
		}
		if v.N <= h {
			return nil
		}
		if h == 0 {
			b, err := p.ledger.Baseline(ctx, v.Patient, u.String())
			if err != nil {
				return err
			}
			if v.N <= b {
				return nil // his starting point, not news
			}
		}
		same := false
		if h > 0 {
			hv, err := p.versionAt(ctx, cs, u, h)
			switch {
			case err == nil:
				same = strings.TrimSpace(hv.Value) == strings.TrimSpace(v.Value)
			case isResourceError(err):
				// The heard version cannot be read back: announce anyway.
				p.log.Warn("speech: heard version unreadable", "uri", u.String(), "version", h, "err", err)
			default:
				return err
			}
		}
		changed, err := p.ledger.Observe(ctx, v.Patient, u.String(), h, v.N, same)
		if errors.Is(err, errHeardMoved) {
			continue
		}
		if err != nil {
			return err
		}
		if changed {
			p.log.Info("speech: announcement", "uri", u.String(), "from", h, "to", v.N, "dropped", same)
		}
		// Another instance may have queued it first: refresh the gauge and
		// wake WaitPending callers either way, and let the instance that
		// speaks for him tell Ray unasked, once per revision.
		if !same && p.speaksFor(v.Patient) {
			if _, pendingTo, err := p.ledger.Status(ctx, v.Patient, u.String()); err == nil && pendingTo >= v.N && p.markNotified(u, pendingTo) {
				p.notifyQueued(v.Patient)
			}
		}
		p.ledgerChanged(ctx)
		return nil
	}
	return fmt.Errorf("speech: %s: heard version kept moving", u)
}

// versionAt returns version n of fact u: from memory when it was read
// before (versions are immutable), else over cs, else over the current
// session. It returns ErrNotConnected when it must read and no session is up.
func (p *Principal) versionAt(ctx context.Context, cs *mcp.ClientSession, u models.URI, n int) (models.Version, error) {
	key := u.WithVersion(n).String()
	p.mu.Lock()
	v, ok := p.versions[key]
	if !ok {
		if c, ok2 := p.current[u.Unversioned().String()]; ok2 && c.N == n {
			v, ok = c, true
		}
	}
	if cs == nil {
		cs = p.cs
	}
	p.mu.Unlock()
	if ok {
		return v, nil
	}
	if cs == nil {
		return models.Version{}, fmt.Errorf("%w: reading %s", ErrNotConnected, key)
	}
	return p.read(ctx, cs, u.WithVersion(n))
}

// ledgerChanged refreshes the backlog gauge and wakes WaitPending callers.
func (p *Principal) ledgerChanged(ctx context.Context) {
	n, err := p.ledger.Backlog(ctx)
	p.mu.Lock()
	defer p.mu.Unlock()
	if err == nil {
		p.backlog = n
	}
	close(p.changed)
	p.changed = make(chan struct{})
}

// isResourceError reports whether err concerns one resource (the server
// answered with a JSON-RPC error, or its contents are unusable) rather
// than the session.
func isResourceError(err error) bool {
	var we *jsonrpc.Error
	return errors.As(err, &we) || errors.Is(err, ErrBadResource)
}
