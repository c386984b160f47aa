package bridge

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-chi/chi/v5"
	sdkauth "github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/unsay/unsay/bridge/auth"
	"github.com/unsay/unsay/models"
	"github.com/unsay/unsay/store"
	"github.com/unsay/unsay/web"
)

// Instructions are the server instructions every MCP host receives, in the
// initialize result (2025-11-25) and in server/discover (2026-07-28), in
// plain words. They name the schemes without "://" so that the replay
// filter, which withholds any frame mentioning a scheme the resuming token
// cannot read (fail closed), never withholds an initialize result.
const Instructions = `Unsay serves a patient's live care plan, written by his clinicians.

Before you answer any question about his care, call the whats_changed tool (since: the time you last checked, RFC 3339) or re-read the fact's resource. Instructions change, and what you said earlier may now be wrong. To answer about one topic (walking, blood thinner, exercises, who to call), the care_instruction tool gives its current instruction with any withdrawal first.

If a revision or a resource read carries a retraction (the "retraction" field, or _meta "unsay/retraction"), speak that retraction FIRST, word for word, before anything else. It withdraws what was said before.

A retraction withdraws what you last read, so tell the server what that was. Either call whats_changed with since: each revision then comes with its previousValue, and the latest revision of each fact with the retraction of the version that was current at since. Or, on resources/read, put the version you last read of that fact (the _meta "unsay/version" of your previous read) in the request's _meta as "unsay/lastReadVersion": the answer carries "unsay/retraction" when the fact has changed since. Over a 2025-11-25 session the server also remembers what the session read; over 2026-07-28 there is no session, so name the version.

Facts whose URI scheme is "care" are speakable: say them with their author and age. If a fact's text starts with [STALE …], say its age aloud. Facts whose URI scheme is "care-internal" are for your reasoning only: never speak, quote or paraphrase them to the patient or a carer.

Say only what the clinicians wrote. Do not add medical advice.`

// Server is the MCP server and HTTP surface. Create it with New; it is safe
// for concurrent use.
type Server struct {
	cfg         Config
	pub         publicURL
	st          *store.Store
	verifier    *auth.Verifier
	extra       Extra
	logger      *slog.Logger
	sdkLogger   *slog.Logger // the SDK's: INFO demoted, session ids hashed
	now         func() time.Time
	pageSize    int
	echo        []byte
	cursorKey   []byte
	principalOf func(*sdkauth.TokenInfo) (models.Principal, bool)
	audio       *audioURLs // signed clip URLs (audio.go)

	mcp     *mcp.Server
	mcpHTTP *mcp.StreamableHTTPHandler
	// modern and modernHTTP serve the 2026-07-28 path (modern.go):
	// stateless, one short-lived SDK session per request; listeners are
	// its open subscriptions/listen streams.
	modern     *mcp.Server
	modernHTTP *mcp.StreamableHTTPHandler
	listeners  *listenerRegistry
	events     *replayStore
	sessions   *sessionRegistry
	metrics    *metrics
	router     chi.Router

	// streamOpts bound every MCP response stream (P-25); sendBuffer is the
	// SO_SNDBUF of a standalone GET stream's connection (0: the kernel's).
	streamOpts  StreamOptions
	sendBuffer  int
	maxSessions int // per principal; 0: no cap
	maxListens  int // open listen streams per principal; 0: no cap
	listening   listenCounts
	keepAlive   time.Duration
	// streams are the response streams being served, aborted by Close: at
	// once, or closeDrain later for a graceful one (a listen stream, which
	// is first answered with its listen result).
	streamsMu sync.Mutex
	streams   map[*StreamWriter]bool
	// fanBatches spreads one revision's resources/updated over the cores
	// (fanbatch.go).
	fanBatches fanBatches
	// sweeps counts completed keep-alive sweeps (tests wait on it).
	sweeps atomic.Int64

	cancel    context.CancelFunc
	watchDone chan struct{}
	closeOnce sync.Once
	// closeCtx is cancelled when Close begins: it ends every
	// server-to-client request waiting in sendFilter.
	closeCtx    context.Context
	closeCancel context.CancelFunc
}

// CloseTimeout bounds Close: 2 s, however many sessions are open.
const CloseTimeout = 2 * time.Second

// New builds the server: the MCP server with its resources, tool, prompt and
// middleware; the resumable event store; the chi router with /mcp, /alexa,
// the web pages, /healthz, /readyz and /metrics (more routes are mounted
// on it with Mount). It
// starts following the store's change feed from its current last sequence
// number, so facts already stored (the seed) fire nothing (P-8); the watcher
// stops on Close or when ctx ends.
//
// st and v are required. Errors wrap ErrConfig for a bad PublicURL or a
// missing store or verifier, or come from st.LastSeq.
func New(ctx context.Context, cfg Config, st *store.Store, v *auth.Verifier, extra Extra) (*Server, error) {
	if st == nil || v == nil {
		return nil, fmt.Errorf("%w: a store and a token verifier are required", ErrConfig)
	}
	pub, err := parsePublicURL(cfg.PublicURL)
	if err != nil {
		return nil, err
	}
	s := &Server{
		cfg:         cfg,
		pub:         pub,
		st:          st,
		verifier:    v,
		extra:       extra,
		logger:      cfg.Logger,
		now:         cfg.Clock,
		pageSize:    cfg.PageSize,
		echo:        web.EchoHTML(),
		cursorKey:   make([]byte, 32),
		principalOf: auth.PrincipalOf,
		sessions:    newSessionRegistry(),
		listeners:   newListenerRegistry(),
		streams:     make(map[*StreamWriter]bool),
		watchDone:   make(chan struct{}),
	}
	s.closeCtx, s.closeCancel = context.WithCancel(context.Background())
	if s.logger == nil {
		s.logger = slog.Default()
	}
	limiter := newLineLimiter(DefaultLogBurst, DefaultLogWindow)
	s.sdkLogger = slog.New(&limitedHandler{next: s.logger.Handler(), lim: limiter, sdk: true})
	s.logger = slog.New(&limitedHandler{next: s.logger.Handler(), lim: limiter})
	s.streamOpts = StreamOptions{QueueBytes: cfg.StreamQueueBytes, WriteTimeout: cfg.StreamWriteTimeout, KeepAlive: cfg.StreamKeepAlive}.withDefaults()
	switch {
	case cfg.StreamSendBuffer == 0:
		s.sendBuffer = DefaultStreamSendBuffer
	case cfg.StreamSendBuffer > 0:
		s.sendBuffer = cfg.StreamSendBuffer
	}
	switch {
	case cfg.MaxSessionsPerPrincipal == 0:
		s.maxSessions = DefaultMaxSessionsPerPrincipal
	case cfg.MaxSessionsPerPrincipal > 0:
		s.maxSessions = cfg.MaxSessionsPerPrincipal
	}
	switch {
	case cfg.MaxListensPerPrincipal == 0:
		s.maxListens = DefaultMaxListensPerPrincipal
	case cfg.MaxListensPerPrincipal > 0:
		s.maxListens = cfg.MaxListensPerPrincipal
	}
	s.keepAlive = cfg.KeepAlive
	if s.keepAlive == 0 {
		s.keepAlive = DefaultKeepAlive
	}
	if s.now == nil {
		s.now = st.Now
	}
	if s.pageSize <= 0 {
		s.pageSize = DefaultPageSize
	}
	if s.extra.Web == nil {
		s.extra.Web = web.Handler()
	}
	if len(cfg.CursorSecret) > 0 {
		m := hmac.New(sha256.New, cfg.CursorSecret)
		m.Write([]byte("unsay/list-cursor/v1"))
		s.cursorKey = m.Sum(nil)
	} else if _, err := rand.Read(s.cursorKey); err != nil {
		return nil, fmt.Errorf("bridge: cursor key: %w", err)
	}
	if s.audio, err = newAudioURLs(cfg.AudioURLKey, cfg.AudioURLTTL); err != nil {
		return nil, err
	}
	maxBytes := cfg.EventStoreMaxBytes
	if maxBytes <= 0 {
		maxBytes = DefaultEventStoreMaxBytes
	}
	s.metrics = newMetrics(func() float64 { return float64(s.sessions.len()) }, func() float64 { return float64(s.subscriptionCount()) },
		func() float64 { return float64(s.listeners.len()) })
	s.events = newReplayStore(maxBytes, s.principalOf, s.tokenExpired, s.sessions.close, s.metrics.replayWithheld.Inc)
	s.mcp = s.newMCPServer()
	s.modern = s.newModernServer()
	timeout := cfg.SessionTimeout
	if timeout == 0 {
		timeout = DefaultSessionTimeout
	} else if timeout < 0 {
		timeout = 0
	}
	s.mcpHTTP = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s.mcp }, &mcp.StreamableHTTPOptions{
		EventStore:     s.events,
		SessionTimeout: timeout,
		Logger:         s.sdkLogger,
		// Host and Origin are checked by this package for every route,
		// against the public URL (see hostAllowed); the SDK's loopback-only
		// check would refuse a proxied public host.
		DisableLocalhostProtection: true,
	})
	s.modernHTTP = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s.modern }, &mcp.StreamableHTTPOptions{
		Stateless: true,
		Logger:    s.sdkLogger,
		// Closing a response stream cancels its request (MCP 2026-07-28,
		// Streamable HTTP § Cancellation).
		PropagateRequestCancellation: true,
		DisableLocalhostProtection:   true,
	})
	after, err := st.LastSeq(ctx)
	if err != nil {
		return nil, fmt.Errorf("bridge: store last sequence: %w", err)
	}
	s.router = s.routes()
	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s.cancel = cancel
	go func() {
		select {
		case <-ctx.Done():
			cancel()
		case <-wctx.Done():
		}
	}()
	go s.watch(wctx, after)
	if s.extra.Delivery != nil {
		go s.watchDelivery(wctx, s.extra.Delivery, after)
	}
	if s.keepAlive > 0 {
		go s.runKeepAlive(wctx, s.keepAlive)
	}
	return s, nil
}

func (s *Server) newMCPServer() *mcp.Server {
	// Keep-alive pings are the bridge's own (runKeepAlive): only sessions
	// with a stream attached are pinged, so a session whose client never
	// opened its GET stream lives until the session timeout.
	srv := mcp.NewServer(s.implementation(), &mcp.ServerOptions{
		Instructions:              Instructions,
		Logger:                    s.sdkLogger,
		CompletionHandler:         s.complete,
		SubscribeHandler:          s.subscribe,
		UnsubscribeHandler:        s.unsubscribe,
		SupportedProtocolVersions: LegacyProtocolVersions(),
	})
	// The card is registered so the resources capability is advertised
	// (with subscribe) and so re-registering it can trigger list_changed;
	// reads of it are answered by readResource like every other URI.
	srv.AddResource(echoResource(), s.echoHandler)
	mcp.AddTool(srv, whatsChangedTool(), s.whatsChanged)
	s.addAlexaPlusTools(srv)
	srv.AddPrompt(briefCarerPrompt(), s.briefCarer)
	srv.AddReceivingMiddleware(s.receiveMiddleware)
	srv.AddReceivingMiddleware(releaseRequestExtra) // outermost: after every other
	srv.AddSendingMiddleware(s.sendFilter)
	return srv
}

// echoHandler serves ui://unsay/echo should a read ever reach the SDK's
// registry (receiveMiddleware answers reads first).
func (s *Server) echoHandler(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	return s.readResource(ctx, req)
}

// receiveMiddleware intercepts initialize (to register the session and its
// principal), resources/list and resources/read; everything else goes to
// the SDK.
func (s *Server) receiveMiddleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		switch method {
		case "initialize":
			res, err := next(ctx, method, req)
			if err == nil {
				if ss, ok := req.GetSession().(*mcp.ServerSession); ok && ss.ID() != "" {
					p, exp := s.readToken(req)
					st := s.sessions.open(ss.ID(), p, exp)
					st.mu.Lock()
					st.ss = ss
					st.mu.Unlock()
				}
			}
			return res, err
		case "resources/list":
			if r, ok := req.(*mcp.ListResourcesRequest); ok {
				return s.listResources(ctx, r)
			}
		case "resources/read":
			if r, ok := req.(*mcp.ReadResourceRequest); ok {
				return s.readResource(ctx, r)
			}
		}
		return next(ctx, method, req)
	}
}

// Handler is the public HTTP surface (a chi router): /mcp, the routes
// mounted with Mount, POST /alexa, the web pages, /healthz and the public
// /readyz, all behind the Host and Origin checks. /metrics and the
// readiness details are on AdminHandler.
func (s *Server) Handler() http.Handler { return s.router }

// Routes is a part with HTTP routes of its own on the public listener:
// bridge/httpapi's API (/write, /link, /verify, the protected-resource
// metadata), the embedded authorization server (bridge/oauth).
type Routes interface{ Routes(r chi.Router) }

// Mount adds p's routes to Handler, behind the Host and Origin checks. The
// part may be built after the server, from it (the API counts Subscribers
// and reports ObservePublish). Call Mount before Handler serves requests:
// it is not safe concurrently with them.
func (s *Server) Mount(p Routes) { p.Routes(s.router) }

// MCPServer is the underlying SDK server of the 2025-11-25 path (for
// in-process wiring and tests).
func (s *Server) MCPServer() *mcp.Server { return s.mcp }

// Metrics is the server's own Prometheus registry (served at the admin
// handler's /metrics).
func (s *Server) Metrics() *prometheus.Registry { return s.metrics.reg }

// Subscribers counts the sessions subscribed to the unversioned URI uri,
// and the 2026-07-28 listen streams acknowledged for it, whose current
// principal may read it, now, with a token not yet expired: POST /write's
// "subscribers".
func (s *Server) Subscribers(uri models.URI) int {
	key := uri.Unversioned().String()
	n := s.listenSubscribers(uri)
	s.sessions.each(func(_ string, st *sessionState) {
		st.mu.Lock()
		_, ok := st.subs[key]
		p, exp := st.principal, st.expires
		st.mu.Unlock()
		if ok && p.CanReadURI(uri) && !s.tokenExpired(exp) {
			n++
		}
	})
	return n
}

func (s *Server) subscriptionCount() int {
	n := s.listenSubscriptionCount()
	s.sessions.each(func(_ string, st *sessionState) {
		st.mu.Lock()
		n += len(st.subs)
		st.mu.Unlock()
	})
	return n
}

// Close stops the change-feed watcher and closes every MCP session, which
// ends their streams so an http.Server can shut down at once. From its
// start, /mcp answers 503 and every /mcp request still being served has
// its context cancelled and its response stream aborted — so a stream
// opened after the sessions were closed ends too, and Shutdown never waits
// on one. It returns within CloseTimeout (2 s) however many sessions are
// open: server-to-client requests still waiting for an answer (keep-alive
// pings to clients that are gone) are cancelled first, the sessions are
// closed concurrently, and a session still closing at the deadline is left
// to finish in the background and logged. It is idempotent, safe for
// concurrent use, and does not close the store.
func (s *Server) Close() {
	s.closeOnce.Do(func() {
		deadline := time.NewTimer(CloseTimeout)
		defer deadline.Stop()
		s.closeCancel()
		s.cancel()
		s.abortStreams(false)
		// Listen streams were ended gracefully (their listen result is
		// being written); whatever is left of them goes closeDrain later.
		time.AfterFunc(closeDrain, func() { s.abortStreams(true) })
		var wg sync.WaitGroup
		var closing atomic.Int64 // sessions whose Close has not returned
		for ss := range s.mcp.Sessions() {
			wg.Add(1)
			closing.Add(1)
			go func() {
				defer wg.Done()
				_ = ss.Close()
				closing.Add(-1)
			}()
		}
		closed := make(chan struct{})
		go func() {
			wg.Wait()
			<-s.watchDone
			close(closed)
		}()
		select {
		case <-closed:
		case <-deadline.C:
			s.logger.Warn("bridge: close deadline passed; sessions still closing in the background",
				"deadline", CloseTimeout, "sessions", closing.Load())
		}
	})
}
