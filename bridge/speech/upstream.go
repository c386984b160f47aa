package speech

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/unsay/unsay/models"
)

// upstream is one connection to the Unsay MCP server, as the speech
// principal uses it: list the resources, read one, and be told of
// revisions (events). It is the only place that knows how the principal
// subscribes. dial picks the era the server speaks (a dual-era client,
// MCP 2026-07-28 Versioning § Backward Compatibility):
//
//   - 2026-07-28 (listenUpstream, listen.go): every list and read is a
//     request of its own, and revisions arrive on one subscriptions/listen
//     stream — no session, no keep-alive pings, no event replay;
//   - 2025-11-25 (mcpSession below), when the server does not offer
//     2026-07-28 — a remote legacy-only Unsay behind --speech-mcp-url:
//     initialize, resources/subscribe, the standalone GET event stream and
//     keep-alive pings.
//
// Either way a lost connection is re-established and every fact re-read
// (Run), so nothing depends on what a connection remembered.
//
// Its methods are safe for concurrent use: the principal's worker syncs
// while the skill's turns confirm facts over the same upstream.
type upstream interface {
	// ID names the connection in logs.
	ID() string
	// List returns every resource listed, all pages, in the server's
	// order; a care fact's entry may describe its current version
	// (models.ParseListMeta). With a patient, each page is asked for with
	// bridge's "unsay/patient" _meta, so an Unsay server pages only his
	// facts however many patients the principal follows; a server that
	// ignores it lists everything, which the caller filters anyway. ""
	// lists everything.
	List(ctx context.Context, patient string) ([]*mcp.Resource, error)
	// Watch asks to be told (an event) of every later revision of each of
	// uris, and of new facts (list_changed), in addition to what it
	// watches already; it returns once the server has accepted them. The
	// URIs the server refused are returned in refused (a refusal concerns
	// that resource, not the connection); err is a connection failure.
	// Watch with no URIs makes sure list_changed is watched.
	Watch(ctx context.Context, uris []string) (refused []string, err error)
	// Read reads uri once.
	Read(ctx context.Context, uri string) (*mcp.ReadResourceResult, error)
	// Done is closed when the connection is over; Err then says why.
	Done() <-chan struct{}
	Err() error
	// Close ends the connection.
	Close() error
}

// event is what the server told the principal: a fact was revised
// (notifications/resources/updated {uri}) or the list changed
// (notifications/resources/list_changed: a fact was created).
type event struct {
	uri         string // "" for listChanged
	listChanged bool
}

// dialConfig is what dial needs: where, how, and where events go.
type dialConfig struct {
	url        string
	http       *http.Client  // carries the bearer token
	keepAlive  time.Duration // 2025-11-25: between pings; 0: none
	listenIdle time.Duration // 2026-07-28: a listen stream silent this long is dead; 0: never
	events     chan<- event  // receives every event until stop closes
	stop       <-chan struct{}
	// era remembers, across dials, the era the server spoke (the spec asks
	// a dual-era client to cache it per origin): eraLegacy skips the
	// 2026-07-28 probe. nil: probe every time.
	era *atomic.Int32
}

// The eras dial remembers in dialConfig.era.
const (
	eraUnknown int32 = iota
	eraModern
	eraLegacy
)

// ModernProtocolVersion is the MCP revision the principal speaks when the
// server offers it: 2026-07-28, stateless, subscriptions/listen.
const ModernProtocolVersion = "2026-07-28"

// implementation is the principal's client identity.
var implementation = &mcp.Implementation{Name: "unsay-speech", Version: "1"}

// dial connects at the newest era the server speaks. Unless the server is
// known to be legacy, it connects with the SDK's client at its default,
// which sends server/discover at 2026-07-28 first: a server offering it
// gives a 2026-07-28 connection (listenUpstream). A server that does not
// makes the SDK fall back to initialize at 2025-11-25; that session has
// none of the principal's notification handlers, so it is closed and a
// 2025-11-25 session opened pinned, with them (dialLegacy), and the era is
// remembered. A failed legacy dial forgets it, so the next dial probes
// again (the server may have been upgraded).
func dial(ctx context.Context, cfg dialConfig) (upstream, error) {
	if cfg.era == nil || cfg.era.Load() != eraLegacy {
		client := mcp.NewClient(implementation, &mcp.ClientOptions{Capabilities: &mcp.ClientCapabilities{}})
		cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: cfg.url, HTTPClient: cfg.http}, nil)
		if err != nil {
			return nil, fmt.Errorf("speech: connect: %w", err)
		}
		if ir := cs.InitializeResult(); ir != nil && ir.ProtocolVersion >= ModernProtocolVersion {
			if cfg.era != nil {
				cfg.era.Store(eraModern)
			}
			return newListenUpstream(cs, cfg), nil
		}
		_ = cs.Close()
		if cfg.era != nil {
			cfg.era.Store(eraLegacy)
		}
	}
	up, err := dialLegacy(ctx, cfg)
	if err != nil && cfg.era != nil {
		cfg.era.Store(eraUnknown)
	}
	return up, err
}

// dialLegacy opens an MCP session pinned to models.ProtocolVersion
// (2025-11-25). Events are handed to cfg.events on the SDK's notification
// goroutine, which waits until the principal's loop takes each (it never
// does I/O, so the wait is short).
func dialLegacy(ctx context.Context, cfg dialConfig) (upstream, error) {
	send := func(e event) {
		select {
		case cfg.events <- e:
		case <-cfg.stop:
		}
	}
	client := mcp.NewClient(implementation, &mcp.ClientOptions{
		ResourceUpdatedHandler: func(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
			if req != nil && req.Params != nil {
				send(event{uri: req.Params.URI})
			}
		},
		ResourceListChangedHandler: func(context.Context, *mcp.ResourceListChangedRequest) { send(event{listChanged: true}) },
		KeepAlive:                  cfg.keepAlive,
		Capabilities:               &mcp.ClientCapabilities{},
	})
	t := &mcp.StreamableClientTransport{Endpoint: cfg.url, HTTPClient: cfg.http}
	cs, err := client.Connect(ctx, t, &mcp.ClientSessionOptions{ProtocolVersion: models.ProtocolVersion})
	if err != nil {
		return nil, fmt.Errorf("speech: connect: %w", err)
	}
	s := &mcpSession{cs: cs, done: make(chan struct{})}
	go func() {
		err := cs.Wait()
		if err == nil {
			err = errors.New("closed by the server")
		}
		s.err = err
		close(s.done)
	}()
	return s, nil
}

// mcpSession is an upstream over one 2025-11-25 client session.
type mcpSession struct {
	cs    *mcp.ClientSession
	pages pager
	done  chan struct{}
	err   error // set before done closes
}

// ID names the session in logs by a hash of its id, "s-1a2b3c4d", as the
// server's logs do: the id itself, with a token of its principal,
// addresses the session.
func (s *mcpSession) ID() string {
	sum := sha256.Sum256([]byte(s.cs.ID()))
	return "s-" + hex.EncodeToString(sum[:4])
}
func (s *mcpSession) Done() <-chan struct{} { return s.done }
func (s *mcpSession) Close() error          { return s.cs.Close() }

func (s *mcpSession) Err() error {
	select {
	case <-s.done:
		return s.err
	default:
		return nil
	}
}

// speakableFact is the fact a list entry names when it is a speakable
// care fact (care://{patient}/{domain}, unversioned); anything else listed
// (ui://unsay/echo, another scheme) is not.
func speakableFact(r *mcp.Resource) (models.URI, bool) {
	u, err := models.ParseURI(r.URI)
	return u, err == nil && u.Audience() == models.AudienceUser && u.Version == 0
}

// maxListPages bounds List against a server whose cursors never end.
const maxListPages = 100000

func (s *mcpSession) List(ctx context.Context, patient string) ([]*mcp.Resource, error) {
	return s.pages.list(ctx, s.cs, patient)
}

// metaListPatient is bridge.MetaListPatient (this package does not import
// bridge, P-18).
const metaListPatient = "unsay/patient"

// pager lists every page of resources/list over one connection, at the
// server's page size and with the cursors it issued (P-11). It keeps the
// cursors of its last listing and asks for each of those pages at the
// same moment as the first, so a listing of n pages costs about one round
// trip rather than n in sequence. Unsay's cursors are key cursors: each
// names the URI after which its page starts, so a page answers the same
// range of URIs whenever it is served. The pages are joined in order, and
// a page asked for ahead is used only where the page before it ended with
// exactly its cursor; where that chain breaks (a fact was added or is no
// longer listed, or the server issues other cursors now) the listing goes
// on one page at a time from there, as it always did. Every page is asked
// for after List was called, as in a listing page by page, so what it
// confirms is confirmed at the same moment (P-24). List returns only once
// every page it asked for has been answered or has failed. A listing of
// one patient's facts keeps its own cursors.
type pager struct {
	mu      sync.Mutex
	cursors map[string][]string // per patient ("": all): the cursors of pages 2…n of the last listing
}

// listed is one page asked for ahead of its turn.
type listed struct {
	done chan struct{}
	res  *mcp.ListResourcesResult // set before done closes
	err  error
}

func (p *pager) list(ctx context.Context, cs *mcp.ClientSession, patient string) ([]*mcp.Resource, error) {
	p.mu.Lock()
	held := p.cursors[patient]
	p.mu.Unlock()
	page := func(cursor string) (*mcp.ListResourcesResult, error) {
		params := &mcp.ListResourcesParams{Cursor: cursor}
		if patient != "" {
			params.Meta = mcp.Meta{metaListPatient: patient}
		}
		return cs.ListResources(ctx, params)
	}
	ahead := make(map[string]*listed, len(held)+1)
	var wg sync.WaitGroup
	defer wg.Wait() // no request outlives the listing
	for _, c := range append([]string{""}, held...) {
		if _, dup := ahead[c]; dup {
			continue
		}
		pg := &listed{done: make(chan struct{})}
		ahead[c] = pg
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer close(pg.done)
			pg.res, pg.err = page(c)
		}()
	}
	var out []*mcp.Resource
	var chain []string
	cursor := ""
	for range maxListPages {
		var res *mcp.ListResourcesResult
		var err error
		if pg, ok := ahead[cursor]; ok {
			delete(ahead, cursor) // a server that repeats a cursor is asked again, as before
			select {
			case <-pg.done:
			case <-ctx.Done():
				return nil, fmt.Errorf("speech: list: %w", ctx.Err())
			}
			res, err = pg.res, pg.err
		} else {
			res, err = page(cursor)
		}
		if err != nil {
			return nil, fmt.Errorf("speech: list: %w", err)
		}
		for _, r := range res.Resources {
			if r != nil {
				out = append(out, r)
			}
		}
		if res.NextCursor == "" || res.NextCursor == cursor {
			p.mu.Lock()
			if p.cursors == nil {
				p.cursors = map[string][]string{}
			}
			p.cursors[patient] = chain
			p.mu.Unlock()
			return out, nil
		}
		cursor = res.NextCursor
		chain = append(chain, cursor)
	}
	return nil, errors.New("speech: list: too many pages")
}

// Watch subscribes to each URI (resources/subscribe); list_changed comes
// on the session's stream unasked.
func (s *mcpSession) Watch(ctx context.Context, uris []string) ([]string, error) {
	var refused []string
	for _, uri := range uris {
		if err := s.cs.Subscribe(ctx, &mcp.SubscribeParams{URI: uri}); err != nil {
			if isResourceError(err) {
				refused = append(refused, uri)
				continue
			}
			return refused, fmt.Errorf("speech: subscribe %s: %w", uri, err)
		}
	}
	return refused, nil
}

func (s *mcpSession) Read(ctx context.Context, uri string) (*mcp.ReadResourceResult, error) {
	return readOne(ctx, s.cs, uri)
}

func readOne(ctx context.Context, cs *mcp.ClientSession, uri string) (*mcp.ReadResourceResult, error) {
	res, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
	if err != nil {
		return nil, fmt.Errorf("speech: read %s: %w", uri, err)
	}
	return res, nil
}

// isResourceError reports whether err concerns one resource — the server
// answered with a JSON-RPC error (not found, on either era), or the
// contents are unusable — rather than the connection.
func isResourceError(err error) bool {
	var we *jsonrpc.Error
	return errors.As(err, &we) || errors.Is(err, ErrBadResource)
}

// resourceNotFoundCodes are the JSON-RPC errors of every read the Unsay
// server does not serve (P-2): -32002 on 2025-11-25, -32602 on 2026-07-28
// (SEP-2164, whose clients SHOULD accept both).
var resourceNotFoundCodes = []int64{-32002, jsonrpc.CodeInvalidParams}

// isGone reports whether err says the server does not serve this resource
// to this principal (not found), or serves contents it cannot speak — as
// opposed to a server that failed to answer (any other error).
func isGone(err error) bool {
	var we *jsonrpc.Error
	if errors.As(err, &we) {
		return slices.Contains(resourceNotFoundCodes, we.Code)
	}
	return errors.Is(err, ErrBadResource)
}
