package bridge

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/unsay/unsay/models"
)

// Method names of the 2026-07-28 subscription stream.
const (
	methodListen       = "subscriptions/listen"
	methodAcknowledged = "notifications/subscriptions/acknowledged"
)

// MetaEndReason is the _meta key of a subscriptions/listen result the
// server sends when it ends the stream itself (the spec's graceful
// closure): "tokenExpired" — the bearer token of the listen request
// expired; listen again with a fresh one — or "shutdown".
const MetaEndReason = "unsay/endReason"

// Why a listen stream was ended by the server (MetaEndReason values).
var (
	errListenTokenExpired = errors.New("tokenExpired")
	errListenShutdown     = errors.New("shutdown")
)

// MaxListenURIs bounds the resourceSubscriptions of one
// subscriptions/listen request: 256. A longer list is -32602.
const MaxListenURIs = 256

// DefaultMaxListensPerPrincipal caps the open subscriptions/listen
// streams of one principal (principalKey): 32. Each stream holds a
// connection of the public listener for as long as it is open, so without
// a cap one reader token (the Echo Show card link's) could hold every
// connection and keep Alexa's turns out (breakit8 G11). A listen beyond
// it is answered 429 with Retry-After before the SDK runs. 32 streams of
// MaxListenURIs each follow 8,192 facts: the speech principal's streams
// (listenChunks) stay well within it.
const DefaultMaxListensPerPrincipal = 32

// listenCounts counts the open listen streams per principal key. Safe for
// concurrent use; the zero value is ready.
type listenCounts struct {
	mu sync.Mutex
	n  map[string]int
}

// reserve counts one more stream for key unless key holds max already (max
// 0: no cap), and returns its release (call once, when the stream ends).
func (c *listenCounts) reserve(key string, max int) (release func(), ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if max > 0 && c.n[key] >= max {
		return nil, false
	}
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[key]++
	var once sync.Once
	return func() {
		once.Do(func() {
			c.mu.Lock()
			defer c.mu.Unlock()
			if c.n[key]--; c.n[key] <= 0 {
				delete(c.n, key)
			}
		})
	}, true
}

// listener is one subscriptions/listen stream on the 2026-07-28 path: the
// principal and token expiry of the request that opened it (there is no
// session to refresh them), the URIs it was acknowledged for, and whether
// it asked for resources/list_changed. principal, expires, uris,
// listChanged, acked, done and end are set at open and never change; the
// rest is guarded by mu.
type listener struct {
	principal   models.Principal
	expires     time.Time
	uris        map[string]struct{}
	listChanged bool
	acked       chan struct{} // closed once the acknowledgement was sent
	done        chan struct{} // closed when the listen ends
	end         context.CancelCauseFunc

	mu          sync.Mutex
	ackOnce     sync.Once
	listPending bool // one list_changed may go out (P-8)
}

func (l *listener) markAcked() { l.ackOnce.Do(func() { close(l.acked) }) }

// waitAcked blocks until the acknowledgement was sent or the listen ended,
// and reports whether it was sent: the spec forbids any notification on
// the stream before it.
func (l *listener) waitAcked() bool {
	select {
	case <-l.acked:
		return true
	case <-l.done:
		select {
		case <-l.acked:
			return true
		default:
			return false
		}
	}
}

// listenerRegistry maps the SDK's per-request session of each open listen
// to its listener. Safe for concurrent use.
type listenerRegistry struct {
	mu sync.RWMutex
	m  map[*mcp.ServerSession]*listener
}

func newListenerRegistry() *listenerRegistry {
	return &listenerRegistry{m: make(map[*mcp.ServerSession]*listener)}
}

func (r *listenerRegistry) add(ss *mcp.ServerSession, l *listener) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.m[ss] = l
}

func (r *listenerRegistry) remove(ss *mcp.ServerSession) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.m, ss)
}

func (r *listenerRegistry) get(ss mcp.Session) *listener {
	s, ok := ss.(*mcp.ServerSession)
	if !ok || s == nil {
		return nil
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.m[s]
}

// each calls f for every open listener, without holding the lock while f runs.
func (r *listenerRegistry) each(f func(*listener)) {
	r.mu.RLock()
	ls := make([]*listener, 0, len(r.m))
	for _, l := range r.m {
		ls = append(ls, l)
	}
	r.mu.RUnlock()
	for _, l := range ls {
		f(l)
	}
}

func (r *listenerRegistry) len() int {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return len(r.m)
}

// listen serves subscriptions/listen on the 2026-07-28 path (MCP
// 2026-07-28, Subscriptions). The request's resourceSubscriptions are
// narrowed, before the SDK sees them, to the URIs the request's principal
// may read now: ui://unsay/echo and canonical unversioned care URIs of
// facts that exist and are readable (P-1, P-21). Any other URI —
// forbidden, absent, another patient's, versioned, malformed, of an
// unknown scheme — is simply left out of the acknowledged set, so an
// unreadable URI is indistinguishable from an absent one (P-2). The SDK
// then acknowledges that subset (notifications/subscriptions/acknowledged,
// first on the stream), registers it and holds the stream open; every
// notification sent on it is re-authorized by sendModern (P-9).
//
// The stream ends when the client closes it, when the stream cannot keep
// up (serveModern), when the request's bearer token expires, or on Close;
// the last two answer the listen request with a result carrying
// MetaEndReason ("tokenExpired", "shutdown"). More than MaxListenURIs URIs
// is -32602.
func (s *Server) listen(ctx context.Context, req *mcp.SubscriptionsListenRequest, next func(context.Context) (mcp.Result, error)) (mcp.Result, error) {
	if req.Params == nil || req.Params.Notifications == nil || req.Session == nil {
		return next(ctx) // the SDK answers -32602
	}
	want := req.Params.Notifications
	if len(want.ResourceSubscriptions) > MaxListenURIs {
		return nil, invalidParams(fmt.Sprintf("at most %d resourceSubscriptions per subscriptions/listen", MaxListenURIs))
	}
	p, exp := s.readToken(req)
	acked := s.listenable(ctx, p, want.ResourceSubscriptions)
	narrowed := *want
	narrowed.ResourceSubscriptions = acked
	req.Params.Notifications = &narrowed

	lctx, end := context.WithCancelCause(ctx)
	defer end(nil)
	l := &listener{
		principal:   p,
		expires:     exp,
		uris:        make(map[string]struct{}, len(acked)),
		listChanged: want.ResourcesListChanged,
		acked:       make(chan struct{}),
		done:        make(chan struct{}),
		end:         end,
	}
	for _, u := range acked {
		l.uris[u] = struct{}{}
	}
	s.listeners.add(req.Session, l)
	defer func() {
		s.listeners.remove(req.Session)
		close(l.done)
	}()
	expiry := time.AfterFunc(max(0, time.Until(exp)), func() { end(errListenTokenExpired) })
	defer expiry.Stop()
	stop := context.AfterFunc(s.closeCtx, func() { end(errListenShutdown) })
	defer stop()

	res, err := next(lctx)
	if err != nil {
		return res, err
	}
	cause := context.Cause(lctx)
	if lr, ok := res.(*mcp.SubscriptionsListenResult); ok && (errors.Is(cause, errListenTokenExpired) || errors.Is(cause, errListenShutdown)) {
		if lr.Meta == nil {
			lr.Meta = mcp.Meta{}
		}
		lr.Meta[MetaEndReason] = cause.Error()
		s.metrics.listensEnded.WithLabelValues(cause.Error()).Inc()
	}
	return res, nil
}

// listenable returns, in order and without repeats, the URIs of uris that
// a listen by p is acknowledged for (see listen).
func (s *Server) listenable(ctx context.Context, p models.Principal, uris []string) []string {
	out := make([]string, 0, len(uris))
	seen := make(map[string]bool, len(uris))
	for _, u := range uris {
		if seen[u] {
			continue
		}
		seen[u] = true
		if u == EchoURI {
			out = append(out, u)
			continue
		}
		if d, ok := parseDeliveryURI(u); ok { // delivery.go: its fact must exist
			if canSeeDelivery(p, d) {
				reader := models.Principal{Subject: p.Subject, Scopes: []models.Scope{models.ScopeReadUser}, Patients: []string{d.Patient}}
				if _, err := s.st.Read(ctx, reader, d.String()); err == nil {
					out = append(out, u)
				}
			}
			continue
		}
		parsed, err := models.ParseURI(u)
		if err != nil || parsed.Version != 0 || parsed.String() != u || !p.CanReadURI(parsed) {
			continue
		}
		rr, err := s.st.Read(ctx, p, u)
		if err != nil || !p.CanRead(rr.Version.Patient, rr.Version.Audience) {
			continue
		}
		out = append(out, u)
	}
	return out
}

// subscribeModern is the SubscribeHandler of the 2026-07-28 server. The
// SDK calls it from subscriptions/listen for each acknowledged URI; it
// accepts exactly the URIs listen acknowledged for that request and
// refuses anything else (fail closed).
func (s *Server) subscribeModern(_ context.Context, req *mcp.SubscribeRequest) error {
	uri := ""
	if req.Params != nil {
		uri = req.Params.URI
	}
	l := s.listeners.get(req.Session)
	if l == nil {
		return NotFoundErrorModern(uri)
	}
	if _, ok := l.uris[uri]; !ok || !canSeeURI(l.principal, uri) {
		return NotFoundErrorModern(uri)
	}
	return nil
}

// sendModern is the sending middleware of the 2026-07-28 server. It
// re-authorizes every notification at send time against the listen stream
// it is written to (P-9): resources/updated only for a URI the stream was
// acknowledged for and its principal may read; resources/list_changed only
// to a stream that asked for it and was armed by a creation it may see
// (P-8); none before the stream's acknowledgement; none once the token of
// the request that opened the stream has expired — which ends the stream.
// A withheld notification is not written.
func (s *Server) sendModern(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if !strings.HasPrefix(method, "notifications/") {
			return next(ctx, method, req)
		}
		if !s.allowModernSend(method, req) {
			s.logger.DebugContext(ctx, "notification withheld at send (2026-07-28)", "method", method)
			s.metrics.notificationsWithheld.WithLabelValues(method).Inc()
			return nil, nil
		}
		res, err := next(ctx, method, req)
		if err != nil {
			s.logger.DebugContext(ctx, "notification send failed", "method", method, "err", err)
			return res, err
		}
		if method == methodAcknowledged {
			if l := s.listeners.get(req.GetSession()); l != nil {
				l.markAcked()
			}
		}
		s.metrics.notificationsSent.WithLabelValues(method).Inc()
		return res, nil
	}
}

func (s *Server) allowModernSend(method string, req mcp.Request) bool {
	l := s.listeners.get(req.GetSession())
	switch method {
	case methodAcknowledged:
		return l != nil
	case methodUpdated, methodListChanged, "notifications/tools/list_changed", "notifications/prompts/list_changed":
	case methodMessage:
		// Request-scoped logs only; the revision notice is the stateful
		// path's, and no care URI rides a log on this path.
		//lint:ignore SA1019 the 2025-11-25 logging channel the legacy path keeps; this only tells its messages apart
		p, ok := req.GetParams().(*mcp.LoggingMessageParams)
		return ok && l == nil && p.Logger != RevisionLogger
	default:
		return l == nil // progress and the like belong to a request, not a listen stream
	}
	if l == nil || !l.waitAcked() {
		return false
	}
	if s.tokenExpired(l.expires) {
		l.end(errListenTokenExpired)
		return false
	}
	switch p := req.GetParams().(type) {
	case *mcp.ResourceUpdatedNotificationParams:
		_, ok := l.uris[p.URI]
		return ok && canSeeURI(l.principal, p.URI)
	case *mcp.ResourceListChangedParams:
		l.mu.Lock()
		defer l.mu.Unlock()
		ok := l.listChanged && l.listPending
		l.listPending = false
		return ok
	}
	// tools and prompts never change while the server runs; the SDK sends
	// their list_changed only to streams that asked for it.
	return true
}

// fanOutModern delivers one committed change to the 2026-07-28 listen
// streams of this instance (on Postgres, changes committed by any
// instance arrive through the change feed): version 1 arms list_changed
// on streams that asked for it and whose principal may read the new URI,
// then has the SDK broadcast one (re-registering the card, as for the
// stateful path); version ≥ 2 goes to the SDK's ResourceUpdated, which
// writes it, tagged with each stream's subscriptionId, to the streams
// subscribed to the URI — each write only queues (P-25) and passes
// sendModern.
func (s *Server) fanOutModern(ctx context.Context, uri models.URI, created bool, visible func(models.Principal) bool) {
	if created {
		armed := 0
		s.listeners.each(func(l *listener) {
			if !l.listChanged || !visible(l.principal) {
				return
			}
			l.mu.Lock()
			l.listPending = true
			l.mu.Unlock()
			armed++
		})
		if armed > 0 {
			s.modern.AddResource(echoResource(), s.echoHandler)
		}
		return
	}
	_ = s.modern.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: uri.String()})
}

// listenSubscribers counts the open listen streams acknowledged for uri
// whose principal may read it now, with a token not yet expired.
func (s *Server) listenSubscribers(uri models.URI) (n int) {
	key := uri.Unversioned().String()
	s.listeners.each(func(l *listener) {
		if _, ok := l.uris[key]; ok && l.principal.CanReadURI(uri) && !s.tokenExpired(l.expires) {
			n++
		}
	})
	return n
}

// listenSubscriptionCount is the number of URIs the open listen streams
// were acknowledged for.
func (s *Server) listenSubscriptionCount() (n int) {
	s.listeners.each(func(l *listener) { n += len(l.uris) })
	return n
}
