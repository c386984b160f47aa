package bridge

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	sdkauth "github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/unsay/unsay/models"
)

// corsAllowHeaders are the request headers a browser MCP client may send
// cross-origin: both protocol eras' (Mcp-Method and Mcp-Name are
// 2026-07-28's), the bearer token, and the signed-write headers.
const corsAllowHeaders = "Authorization, Content-Type, Accept, Mcp-Session-Id, Mcp-Protocol-Version, Mcp-Method, Mcp-Name, Last-Event-ID, X-Unsay-Timestamp, X-Unsay-Signature"

// closeDrain bounds how long a stream still being served when Close begins
// may take to write what it has queued: 100 ms.
const closeDrain = 100 * time.Millisecond

// Reasons a session is closed by the bridge (the label of
// unsay_mcp_sessions_closed_total).
const (
	closedOverflow     = "overflow"      // its stream's queue filled up
	closedWriteTimeout = "write_timeout" // a write to its stream passed its deadline
	closedKeepAlive    = "keepalive"     // it left keep-alive pings unanswered
	closedEvicted      = "evicted"       // its principal, at the cap, opened a newer one while it was idle
)

// serveMCP serves /mcp (2025-11-25, stateful) after the bearer middleware,
// in front of the SDK's handler:
//
//   - once Close has begun it answers 503, and the request it serves is
//     cancelled when Close begins;
//   - a request naming a session must carry a token of the session's
//     principal — the same subject, patients AND scopes (principalKey) —
//     or it is refused 403 before the SDK runs (the SDK's own subject and
//     patients check, TokenInfo.UserID, stays behind it); such a token's
//     expiry becomes the session's (a refreshed token extends it);
//   - a request on a session that was evicted (below) is answered 404, as
//     the SDK answers for any session it no longer knows: the client
//     initializes again;
//   - a request opening a session (a POST without Mcp-Session-Id: an
//     initialize, on this path; 2026-07-28's stateless requests must be
//     routed before it) when its principal already holds maxSessions
//     sessions ends the least-recently-used of them that is idle — no
//     request being served on it, no stream open — and is served; it is
//     refused 429 only when every one of them is busy;
//   - a request opening a session hands the SDK a context that drops its
//     values once the request is answered (sessionContext), since the SDK
//     keeps that context for the session's life;
//   - every response is written through a StreamWriter (P-25): its own
//     bounded queue and per-write deadline. A standalone GET stream that
//     cannot keep up closes its session (serveStandalone); a POST's
//     response that cannot only ends that response.
func (s *Server) serveMCP(w http.ResponseWriter, r *http.Request) {
	if s.closeCtx.Err() != nil {
		w.Header().Set("Retry-After", "1")
		http.Error(w, "Service Unavailable: the server is shutting down", http.StatusServiceUnavailable)
		return
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	stop := context.AfterFunc(s.closeCtx, cancel)
	defer stop()
	r = r.WithContext(ctx)

	ti := sdkauth.TokenInfoFromContext(ctx)
	p, _ := s.principalOf(ti)
	var exp time.Time
	if ti != nil {
		exp = ti.Expiration
	}
	sid := r.Header.Get("Mcp-Session-Id")
	var st *sessionState
	switch {
	case sid != "":
		if st = s.sessions.get(sid); st != nil {
			if principalKey(p) != st.key {
				http.Error(w, "Forbidden: this session belongs to another principal", http.StatusForbidden)
				return
			}
			if !s.sessions.begin(st) {
				http.Error(w, "Not Found: this session was ended to make room for a newer one of the same principal; initialize again", http.StatusNotFound)
				return
			}
			defer s.sessions.end(st)
			s.sessions.record(sid, p, exp)
		}
	case r.Method == http.MethodPost:
		release, victimID, victim, ok := s.sessions.reserve(principalKey(p), s.maxSessions)
		if !ok {
			w.Header().Set("Retry-After", "60")
			http.Error(w, fmt.Sprintf("Too Many Requests: this principal already has %d open MCP sessions (the limit), each with a request or stream open; end one with DELETE /mcp", s.maxSessions),
				http.StatusTooManyRequests)
			return
		}
		defer release()
		if victim != nil {
			s.evictSession(victimID, victim)
		}
		// The SDK keeps this request's context as the new session's
		// (sessionContext): it carries the request's values only while the
		// request is served.
		sc := newSessionContext(ctx)
		defer func() { cancel(); sc.detach() }()
		r = r.WithContext(sc)
	}
	if r.Method == http.MethodGet && st != nil {
		s.serveStandalone(w, r, sid, st, p, cancel)
		return
	}
	sw := NewStreamWriter(w, r, s.responseStreamOptions()) // room for one read of the largest clip (audio.go)
	s.trackStream(sw, true)
	defer s.trackStream(sw, false)
	s.mcpHTTP.ServeHTTP(sw, r)
	sw.Finish(s.finishDeadline())
}

// serveStandalone serves a GET on a known session: the standalone stream,
// or the replay of another stream (Last-Event-ID "<stream>_<n>").
//
// A GET without Last-Event-ID resumes the standalone stream after the last
// event that reached the client's connection (never before the oldest one
// retained), so it repeats nothing the client was already sent and still
// gets what was stored while no stream was attached. The standalone stream
// is attached to the session (its frames authorized against p, the
// principal of this request) once the SDK accepts it; its StreamWriter asks
// for a small kernel send buffer, and when it cannot keep up — its queue
// full or a write past its deadline — the session is closed (dropSession)
// and the request cancelled: the client re-initializes and re-reads.
func (s *Server) serveStandalone(w http.ResponseWriter, r *http.Request, sid string, st *sessionState, p models.Principal, cancel context.CancelFunc) {
	standalone := true
	if lei := r.Header.Values("Last-Event-ID"); len(lei) > 0 {
		stream, _, ok := parseEventID(lei[0])
		standalone = ok && stream == ""
	} else if first, next, ok := s.events.log.bounds(sid, ""); ok && next > 0 {
		if from := max(st.lastDelivered(), first-1); from >= 0 {
			r = r.Clone(r.Context())
			r.Header.Set("Last-Event-ID", "_"+strconv.Itoa(from))
		}
	}
	opts := s.streamOpts
	var sw *StreamWriter
	if !standalone {
		opts = s.responseStreamOptions() // a replayed POST stream may hold a clip's read (audio.go)
	}
	if standalone {
		opts.SendBuffer = s.sendBuffer
		opts.OnEvent = st.noteDelivered
		opts.OnWriteHeader = func(code int) {
			if code == http.StatusOK {
				st.attach(p, sw)
			}
		}
		opts.OnFail = func(err error) {
			if reason := closeReason(err); reason != "" {
				s.dropSession(sid, st, reason)
			}
			cancel()
		}
	}
	sw = NewStreamWriter(w, r, opts)
	s.trackStream(sw, true)
	defer s.trackStream(sw, false)
	s.mcpHTTP.ServeHTTP(sw, r)
	st.detach(sw)
	sw.Finish(s.finishDeadline())
}

// closeReason maps a stream failure to the reason its session is closed,
// or "" when the session stays (the client went away, or the stream was
// aborted by the server: the client resumes with Last-Event-ID).
func closeReason(err error) string {
	switch {
	case errors.Is(err, ErrStreamOverflow):
		return closedOverflow
	case errors.Is(err, ErrStreamTimeout):
		return closedWriteTimeout
	}
	return ""
}

// dropSession closes a session that cannot keep up (P-25): its pending
// server-to-client requests are cancelled and the SDK session is closed in
// the background, so no other session waits on it. Its client finds the
// session gone (404) and re-initializes, re-reading what it follows.
func (s *Server) dropSession(sid string, st *sessionState, reason string) {
	st.cancel()
	st.mu.Lock()
	ss := st.ss
	st.mu.Unlock()
	s.metrics.sessionsClosed.WithLabelValues(reason).Inc()
	s.logger.Warn("MCP session closed: its client is not keeping up; it re-reads on reconnect",
		"reason", reason, "session", sessionRef(sid))
	if ss != nil {
		go func() { _ = ss.Close() }()
	}
}

// evictSession ends a session reserve evicted to make room for a newer one
// of its principal: its pending server-to-client requests are cancelled
// and the SDK session is closed in the background (the registry forgets it
// when the SDK reports it closed). Until then serveMCP answers its requests
// 404, and after that the SDK does: its client initializes again and
// re-reads what it follows, as after any lost session.
func (s *Server) evictSession(sid string, st *sessionState) {
	st.cancel()
	st.mu.Lock()
	ss := st.ss
	st.mu.Unlock()
	s.metrics.sessionsClosed.WithLabelValues(closedEvicted).Inc()
	s.logger.Info("MCP session ended: its principal opened a newer one at the cap while it was idle",
		"session", sessionRef(sid), "limit", s.maxSessions)
	if ss != nil {
		go func() { _ = ss.Close() }()
	}
}

// finishDeadline is how long a response stream may take to write what it
// still has queued once its handler returned: one write timeout, or
// closeDrain once Close has begun.
func (s *Server) finishDeadline() time.Time {
	if s.closeCtx.Err() != nil {
		return time.Now().Add(closeDrain)
	}
	return time.Now().Add(s.streamOpts.WriteTimeout)
}

// trackStream adds (on) or removes a stream from those Close aborts.
func (s *Server) trackStream(sw *StreamWriter, on bool) { s.trackStreamGraceful(sw, on, false) }

// trackStreamGraceful is trackStream for a stream that Close aborts only
// closeDrain after it began (graceful), so that its handler can first
// write a last message (a listen stream's result).
func (s *Server) trackStreamGraceful(sw *StreamWriter, on, graceful bool) {
	s.streamsMu.Lock()
	defer s.streamsMu.Unlock()
	if on {
		s.streams[sw] = graceful
	} else {
		delete(s.streams, sw)
	}
}

// abortStreams aborts every response stream being served, graceful ones
// included when all is set.
func (s *Server) abortStreams(all bool) {
	s.streamsMu.Lock()
	defer s.streamsMu.Unlock()
	for sw, graceful := range s.streams {
		if all || !graceful {
			sw.Abort()
		}
	}
}

// releaseRequestExtra is the outermost receiving middleware of the
// 2025-11-25 server: once a request or notification has been handled (its
// result returned), it drops the HTTP header map and the TokenInfo from the
// request's RequestExtra. The SDK's jsonrpc2 handler queue (v1.8.0) keeps
// the last handled request reachable until the session's next one arrives
// (the popped slot is not cleared before the queue is resliced), so without
// this an idle session keeps its last POST's headers, bearer token
// included, and its TokenInfo: about 2.8 KiB per session (issue 17). Every
// handler reads its principal from the TokenInfo at its start (readToken)
// and none keeps the request past its return, so nothing reads them later.
func releaseRequestExtra(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		res, err := next(ctx, method, req)
		if extra := req.GetExtra(); extra != nil {
			extra.Header, extra.TokenInfo = nil, nil
		}
		return res, err
	}
}

// sessionContext is the context of a request opening a session, as serveMCP
// hands it to the SDK. The SDK (v1.8.0) keeps the context of the request
// that created a session as that session's own for its whole life — its
// values, not its cancellation (connectStreamable; jsonrpc2's notDone) — so
// every idle session would keep its initialize request's TokenInfo, bearer
// token, router state and context chain reachable: about 1.5 KiB (issue 17),
// and a credential the session no longer needs. A sessionContext is the
// request's context until detach, called once the request was answered and
// its context cancelled; from then on it carries no values, is done, and
// keeps nothing of the request but its closed Done channel. No later request
// of the session reads a value from it: each one's principal comes from its
// own RequestExtra.TokenInfo (doc.go), and the SDK's per-request values
// (request id, protocol version, log level) are set on each request's own
// context. Safe for concurrent use.
type sessionContext struct {
	done <-chan struct{}
	live atomic.Pointer[context.Context] // nil once detached
}

func newSessionContext(ctx context.Context) *sessionContext {
	sc := &sessionContext{done: ctx.Done()}
	sc.live.Store(&ctx)
	return sc
}

// detach drops the request's context; call it after that context is done.
func (sc *sessionContext) detach() { sc.live.Store(nil) }

func (sc *sessionContext) Deadline() (time.Time, bool) {
	if ctx := sc.live.Load(); ctx != nil {
		return (*ctx).Deadline()
	}
	return time.Time{}, false
}

func (sc *sessionContext) Done() <-chan struct{} { return sc.done }

func (sc *sessionContext) Err() error {
	if ctx := sc.live.Load(); ctx != nil {
		return (*ctx).Err()
	}
	return context.Canceled
}

func (sc *sessionContext) Value(key any) any {
	if ctx := sc.live.Load(); ctx != nil {
		return (*ctx).Value(key)
	}
	return nil
}
