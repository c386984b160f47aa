package bridge

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/unsay/unsay/models"
	"github.com/unsay/unsay/store"
)

// Notification method names.
const (
	methodUpdated     = "notifications/resources/updated"
	methodListChanged = "notifications/resources/list_changed"
	methodMessage     = "notifications/message"
	// RevisionLogger is the logger name of the one notifications/message per
	// revision (level notice, data {uri, version}, never the value).
	RevisionLogger = "unsay.revision"
)

// ReauthPingTimeout bounds the one ping sent to a session whose token has
// expired (see sendFilter): 30 s.
const ReauthPingTimeout = 30 * time.Second

// ErrClosing is returned, through the SDK, for a server-to-client request
// (a keepalive ping) started or still waiting once Close has begun.
var ErrClosing = errors.New("bridge: server closing")

// ErrSessionClosed is returned for a server-to-client request still
// waiting when its session is closed by the bridge (dropSession).
var ErrSessionClosed = errors.New("bridge: session closed")

// watch follows the store's change feed from seq after and fans each change
// out to sessions, off the write path. It restarts the feed (from the last
// change it handled) if the channel closes before ctx ends.
func (s *Server) watch(ctx context.Context, after int64) {
	defer close(s.watchDone)
	for {
		for ch := range s.st.Watch(ctx, after) {
			s.fanOut(ctx, ch)
			after = ch.Seq
		}
		if ctx.Err() != nil {
			return
		}
		s.logger.Warn("store change feed closed; reopening", "after", after)
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
}

// fanOut turns one committed change into notifications (P-8, P-9):
//
//   - version 1: list_changed, to sessions that were served a list and whose
//     current principal may read the new URI (marked here, delivered through
//     the SDK's list_changed broadcast and filtered in sending middleware);
//   - version ≥ 2: resources/updated {uri} through the SDK, filtered in
//     sending middleware to subscribed sessions whose current principal may
//     read it;
//   - every version: one notifications/message (notice, unsay.revision,
//     {uri, version}) to each session whose current principal may read it;
//   - and the same change to the 2026-07-28 listen streams (fanOutModern):
//     list_changed or updated, never a log.
func (s *Server) fanOut(ctx context.Context, ch store.Change) {
	uri := ch.URI.Unversioned()
	if s.logger.Enabled(ctx, slog.LevelDebug) { // nothing built when debug is off
		s.logger.DebugContext(ctx, "change feed", "seq", ch.Seq, "uri", uri.String(), "version", ch.Version, "created", ch.Created)
	}
	visible := func(p models.Principal) bool {
		return p.CanReadURI(uri) && p.CanRead(uri.Patient, ch.Audience)
	}
	if ch.Created {
		armed := 0
		s.sessions.each(func(_ string, st *sessionState) {
			st.mu.Lock()
			if st.listServed && visible(st.principal) {
				st.listPending = true
				armed++
			}
			st.mu.Unlock()
		})
		if armed > 0 {
			// The SDK has no per-session list_changed: re-registering the
			// card is a change, which makes it broadcast one (debounced
			// 10 ms); sendFilter lets it through only where armed.
			s.mcp.AddResource(echoResource(), s.echoHandler)
		}
	} else {
		params := &mcp.ResourceUpdatedNotificationParams{URI: uri.String()}
		b := s.fanBatches.begin(params, uri)
		_ = s.mcp.ResourceUpdated(ctx, params)
		s.fanBatches.run(params, b) // fanbatch.go: on every core, all sent before what follows
	}
	s.fanOutModern(ctx, uri, ch.Created, visible)
	// One params for every session: the SDK and sendFilter only read it.
	//lint:ignore SA1019 the logging channel (one notice per revision, URI and version only) is required on the 2025-11-25 path
	notice := &mcp.LoggingMessageParams{
		Level:  "notice",
		Logger: RevisionLogger,
		Data:   map[string]any{"uri": uri.String(), "version": ch.Version},
	}
	for ss := range s.mcp.Sessions() {
		st := s.sessions.get(ss.ID())
		if st == nil || !visible(st.currentPrincipal()) {
			continue
		}
		//lint:ignore SA1019 the logging channel (one notice per revision, URI and version only) is required on the 2025-11-25 path
		_ = ss.Log(ctx, notice)
	}
	if !ch.At.IsZero() {
		s.metrics.fanOut.Observe(s.now().Sub(ch.At).Seconds())
	}
}

// sendFilter is the sending middleware. It re-authorizes every outgoing
// care notification (updated, list_changed, notifications/message) at send
// time against the session's principal and, while a standalone stream is
// attached, the principal of the request that opened that stream (where
// these notifications are written), and swallows the ones it must not
// carry (a swallowed frame is neither written nor stored for replay) (P-2,
// P-9) — all of them while the session's latest token has expired; the
// first one withheld for that reason pings the session once
// (promptReauth).
//
// Server-to-client requests (the SDK's keepalive ping) wait for the
// client's answer here, and jsonrpc2 will not close a session while one
// waits; so each runs under a context that Close cancels, and none starts
// once Close has begun (ErrClosing). Without that, Close waited out every
// unanswered keepalive ping (up to KeepAlive/2 each, one session after
// another).
func (s *Server) sendFilter(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if !strings.HasPrefix(method, "notifications/") {
			if s.closeCtx.Err() != nil {
				return nil, ErrClosing
			}
			cctx, cancel := context.WithCancelCause(ctx)
			stop := context.AfterFunc(s.closeCtx, func() { cancel(ErrClosing) })
			defer func() {
				stop()
				cancel(nil)
			}()
			if ss := req.GetSession(); ss != nil {
				if st := s.sessions.get(ss.ID()); st != nil {
					stopSession := context.AfterFunc(st.ctx, func() { cancel(ErrSessionClosed) })
					defer stopSession()
				}
			}
			return next(cctx, method, req)
		}
		if method == methodUpdated {
			if b := s.fanBatches.lookup(req); b != nil {
				if !b.parallel {
					return s.sendNotification(ctx, method, req, next, &b.uri)
				}
				ctx := detached(ctx)
				b.add(func() { _, _ = s.sendNotification(ctx, method, req, next, &b.uri) })
				return nil, nil
			}
		}
		return s.sendNotification(ctx, method, req, next, nil)
	}
}

// sendNotification re-authorizes one outgoing notification (allowSend;
// parsed, when not nil, is the URI a resources/updated names, parsed once
// for all its sessions) and sends it through next, or swallows it.
func (s *Server) sendNotification(ctx context.Context, method string, req mcp.Request, next mcp.MethodHandler, parsed *parsedURI) (mcp.Result, error) {
	if !s.allowSend(method, req, parsed) {
		if s.logger.Enabled(ctx, slog.LevelDebug) { // sessionRef hashes: only when debug is on
			sid := ""
			if ss := req.GetSession(); ss != nil {
				sid = ss.ID()
			}
			s.logger.DebugContext(ctx, "notification withheld at send", "method", method, "session", sessionRef(sid))
		}
		s.metrics.notificationsWithheld.WithLabelValues(method).Inc()
		return nil, nil
	}
	res, err := next(ctx, method, req)
	if err != nil {
		s.logger.DebugContext(ctx, "notification send failed", "method", method, "err", err)
	}
	if err == nil && len(method) > 14 && method[:14] == "notifications/" {
		s.metrics.notificationsSent.WithLabelValues(method).Inc()
	}
	return res, err
}

func (s *Server) allowSend(method string, req mcp.Request, parsed *parsedURI) bool {
	switch method {
	case methodUpdated, methodListChanged, methodMessage:
	default:
		return true
	}
	sess := req.GetSession()
	if sess == nil {
		return false
	}
	st := s.sessions.get(sess.ID())
	if st == nil {
		return false
	}
	if _, exp := st.current(); s.tokenExpired(exp) {
		st.mu.Lock()
		st.listPending = false
		st.mu.Unlock()
		s.promptReauth(sess, st)
		return false
	}
	canSee := func(uri string) bool {
		if !canSeeURI(st.principal, uri) {
			return false
		}
		sp, attached := st.streamPrincipal()
		return !attached || canSeeURI(sp, uri)
	}
	switch p := req.GetParams().(type) {
	case *mcp.ResourceUpdatedNotificationParams:
		st.mu.Lock()
		_, subscribed := st.subs[p.URI]
		st.mu.Unlock()
		if parsed != nil && subscribed && p.URI == parsed.raw {
			// canSee, with the care URI fanOut parsed once for every session.
			sp, attached := st.streamPrincipal()
			return st.principal.CanReadURI(parsed.u) && (!attached || sp.CanReadURI(parsed.u))
		}
		return subscribed && canSee(p.URI)
	case *mcp.ResourceListChangedParams:
		st.mu.Lock()
		defer st.mu.Unlock()
		ok := st.listPending
		st.listPending = false
		return ok
	//lint:ignore SA1019 the logging channel (one notice per revision, URI and version only) is required on the 2025-11-25 path
	case *mcp.LoggingMessageParams:
		data, ok := p.Data.(map[string]any)
		if !ok {
			return p.Logger != RevisionLogger
		}
		uri, has := data["uri"].(string)
		if !has {
			return p.Logger != RevisionLogger
		}
		return canSee(uri)
	}
	return false
}

// tokenExpired reports whether a session token expiring at exp has expired:
// by the real clock (which the SDK checks "exp" against on every request)
// or by the verifier's clock (Config.Clock, which Verify checks), whichever
// says so first. A zero exp counts as expired (fail closed).
func (s *Server) tokenExpired(exp time.Time) bool {
	if exp.IsZero() {
		return true
	}
	return !time.Now().Before(exp) || !s.verifier.Now().Before(exp)
}

// promptReauth pings, once per token, a session whose token has expired and
// whose notification was just withheld. The client answers with a POST
// carrying its current token: a refreshed one (same subject and patients)
// becomes the session's principal again and notifications resume; an
// expired one is refused 401, which a client that cannot refresh (the Go SDK
// client without an OAuthHandler, like the speech principal) takes as the
// end of its connection, so it reconnects with a fresh token and re-reads
// rather than listening, unaware, to a stream that now carries nothing. The
// ping runs in the background, bounded by ReauthPingTimeout and cancelled by
// Close.
func (s *Server) promptReauth(sess mcp.Session, st *sessionState) {
	ss, ok := sess.(*mcp.ServerSession)
	if !ok {
		return
	}
	st.mu.Lock()
	if st.reauthPinged {
		st.mu.Unlock()
		return
	}
	st.reauthPinged = true
	st.mu.Unlock()
	s.logger.Info("MCP session token expired: notifications withheld; pinging the client to re-authenticate", "session", sessionRef(ss.ID()))
	go func() {
		ctx, cancel := context.WithTimeout(st.ctx, ReauthPingTimeout)
		defer cancel()
		_ = ss.Ping(ctx, nil)
	}()
}
