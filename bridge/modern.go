package bridge

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"time"

	sdkauth "github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// This file is /mcp's 2026-07-28 path (MCP 2026-07-28, Versioning §
// "Backward Compatibility with Initialization-Based Versions": a dual-era
// server). One endpoint serves both eras; routeMCP decides per request:
//
//   - a request carrying 2026-07-28 — in the MCP-Protocol-Version header
//     or as _meta["io.modelcontextprotocol/protocolVersion"] in its body —
//     and every server/discover is served statelessly by the SDK's
//     stateless handler (StreamableHTTPOptions.Stateless) over a second
//     *mcp.Server: authorization per request from its bearer token, no
//     session, no session cap, Mcp-Session-Id ignored, GET and DELETE 405;
//   - everything else (initialize, Mcp-Session-Id traffic, the standalone
//     GET stream) is served as before by serveMCP, the stateful 2025-11-25
//     path;
//   - an MCP-Protocol-Version header naming a version neither path serves
//     is answered 400 with JSON-RPC -32022 UnsupportedProtocolVersion,
//     data {"supported": SupportedProtocolVersions(), "requested": …},
//     whatever else the request holds: one answer for every probe.
//
// Each era's rules hold on its own path: a resource that cannot be read is
// -32002 on 2025-11-25 and -32602 on 2026-07-28 (SEP-2164), the same
// message and data for every cause (P-2); retractions come from the
// session's reads on 2025-11-25 and from MetaLastReadVersion on both.

// maxProbeBytes bounds how much of a POST body routeMCP reads to find its
// era: the SDK's own request limit (mcp.DefaultMaxRequestBodyBytes). A
// larger body goes to the stateful path, whose SDK answers 413.
const maxProbeBytes = mcp.DefaultMaxRequestBodyBytes

// mcpProbe is what routeMCP learns from a request before any handler runs.
type mcpProbe struct {
	modern bool            // serve it statelessly (2026-07-28)
	listen bool            // its body is one subscriptions/listen request
	id     json.RawMessage // the JSON-RPC id of its body, if any
	// unsupported is an MCP-Protocol-Version header naming a version /mcp
	// does not serve.
	unsupported string
}

// probeBody is the part of a JSON-RPC request routeMCP reads.
type probeBody struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params struct {
		Meta map[string]json.RawMessage `json:"_meta"`
	} `json:"params"`
}

// probeMCP reads the era of r (see the file comment). For a POST it reads
// the body up to maxProbeBytes and returns a request whose body yields the
// same bytes again.
func probeMCP(r *http.Request) (mcpProbe, *http.Request) {
	var pr mcpProbe
	header := r.Header.Get("MCP-Protocol-Version")
	switch {
	case header == "":
	case header == ModernProtocolVersion:
		pr.modern = true
	case slices.Contains(legacyProtocolVersions, header):
	default:
		pr.unsupported = header
	}
	if r.Method != http.MethodPost || r.Body == nil {
		return pr, r
	}
	buf, err := io.ReadAll(io.LimitReader(r.Body, maxProbeBytes+1))
	r = r.WithContext(r.Context()) // a shallow copy: only the body changes
	r.Body = &replayBody{Reader: io.MultiReader(bytes.NewReader(buf), r.Body), Closer: r.Body}
	if err != nil || len(buf) > maxProbeBytes {
		return pr, r
	}
	var b probeBody
	trimmed := bytes.TrimLeft(buf, " \t\r\n")
	if len(trimmed) == 0 || trimmed[0] != '{' || json.Unmarshal(trimmed, &b) != nil {
		return pr, r // a batch or not JSON: the stateful path answers
	}
	pr.id = b.ID
	if _, ok := b.Params.Meta[mcp.MetaKeyProtocolVersion]; ok || b.Method == "server/discover" {
		pr.modern = true
	}
	pr.listen = pr.modern && b.Method == "subscriptions/listen" && len(b.ID) > 0
	return pr, r
}

// replayBody is a request body whose first bytes were read by probeMCP.
type replayBody struct {
	io.Reader
	io.Closer
}

// routeMCP serves /mcp after the bearer middleware: the 2026-07-28 path
// (serveModern), an unsupported-version answer, or the 2025-11-25 path
// (serveMCP). It runs before serveMCP's session cap, so stateless requests
// never count against a principal's sessions.
func (s *Server) routeMCP(w http.ResponseWriter, r *http.Request) {
	pr, r := probeMCP(r)
	switch {
	case pr.unsupported != "":
		writeUnsupportedVersion(w, pr.id, pr.unsupported)
	case pr.modern:
		s.serveModern(w, r, pr.listen)
	default:
		s.serveMCP(w, r)
	}
}

// writeUnsupportedVersion answers 400 with JSON-RPC -32022
// UnsupportedProtocolVersion (MCP 2026-07-28, Versioning § Protocol
// Version Negotiation): data {"supported": every version /mcp serves,
// "requested": v}, echoing the request's id (null without one).
func writeUnsupportedVersion(w http.ResponseWriter, id json.RawMessage, v string) {
	if len(id) == 0 || !json.Valid(id) {
		id = json.RawMessage("null")
	}
	body, _ := json.Marshal(map[string]any{
		"jsonrpc": "2.0",
		"id":      id,
		"error": map[string]any{
			"code":    mcp.CodeUnsupportedProtocolVersion,
			"message": "Unsupported protocol version",
			"data":    mcp.UnsupportedProtocolVersionData{Supported: SupportedProtocolVersions(), Requested: v},
		},
	})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusBadRequest)
	_, _ = w.Write(body)
}

// serveModern serves one 2026-07-28 request through the SDK's stateless
// handler:
//
//   - once Close has begun it answers 503; a request being served is
//     cancelled when Close begins, except a subscriptions/listen stream,
//     which is ended gracefully (its listen result is written, _meta
//     "unsay/endReason": "shutdown") and cancelled only closeDrain later;
//   - every response is written through a StreamWriter (P-25): its own
//     bounded queue and per-write deadline, so a stalled listener never
//     delays another. A listen stream asks for a small kernel send buffer
//     (as a 2025-11-25 standalone stream does); one that cannot keep up
//     is ended, and its client listens again and re-reads.
func (s *Server) serveModern(w http.ResponseWriter, r *http.Request, listen bool) {
	if s.closeCtx.Err() != nil {
		w.Header().Set("Retry-After", "1")
		http.Error(w, "Service Unavailable: the server is shutting down", http.StatusServiceUnavailable)
		return
	}
	if listen {
		p, _ := s.principalOf(sdkauth.TokenInfoFromContext(r.Context()))
		release, ok := s.listening.reserve(principalKey(p), s.maxListens)
		if !ok {
			w.Header().Set("Retry-After", "60")
			http.Error(w, fmt.Sprintf("Too Many Requests: this principal already has %d subscriptions/listen streams open (the limit); close one first", s.maxListens),
				http.StatusTooManyRequests)
			return
		}
		defer release()
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	var stop func() bool
	if listen {
		stop = context.AfterFunc(s.closeCtx, func() { time.AfterFunc(closeDrain, cancel) })
	} else {
		stop = context.AfterFunc(s.closeCtx, cancel)
	}
	defer stop()
	r = r.WithContext(ctx)

	opts := s.streamOpts
	if listen {
		opts.SendBuffer = s.sendBuffer
		opts.OnFail = func(err error) {
			if reason := closeReason(err); reason != "" {
				s.metrics.listensEnded.WithLabelValues(reason).Inc()
				s.logger.Warn("MCP listen stream ended: its client is not keeping up; it listens again and re-reads", "reason", reason)
			}
			cancel()
		}
	} else {
		opts = s.responseStreamOptions() // room for one read of the largest clip (audio.go)
		opts.OnFail = func(error) { cancel() }
	}
	sw := NewStreamWriter(w, r, opts)
	s.trackStreamGraceful(sw, true, listen)
	defer s.trackStreamGraceful(sw, false, listen)
	s.modernHTTP.ServeHTTP(sw, r)
	sw.Finish(s.finishDeadline())
}

// newModernServer builds the *mcp.Server of the 2026-07-28 path: the same
// resources, tool and prompt as the stateful one, resources/list,
// resources/read and subscriptions/listen answered by receiveModern, and
// every notification re-authorized by sendModern. server/discover is the
// SDK's: it lists SupportedProtocolVersions() — 2026-07-28 and the
// stateful-era versions a client may initialize with.
func (s *Server) newModernServer() *mcp.Server {
	srv := mcp.NewServer(s.implementation(), &mcp.ServerOptions{
		Instructions:      Instructions,
		Logger:            s.sdkLogger,
		CompletionHandler: s.complete,
		// Subscriptions are made by subscriptions/listen only, and only
		// for the URIs receiveModern acknowledged (subscribeModern).
		SubscribeHandler:          s.subscribeModern,
		UnsubscribeHandler:        func(context.Context, *mcp.UnsubscribeRequest) error { return nil },
		SupportedProtocolVersions: SupportedProtocolVersions(),
		// Declared, not inferred: the tool and the prompt never change
		// while the server runs, so no list_changed is offered for them
		// (a listen asking for one is acknowledged without it); logging is
		// deprecated in 2026-07-28 and this path sends none. The resources
		// capability is inferred: listChanged and subscribe.
		Capabilities: &mcp.ServerCapabilities{
			Tools:   &mcp.ToolCapabilities{},
			Prompts: &mcp.PromptCapabilities{},
		},
	})
	srv.AddResource(echoResource(), s.echoHandler)
	mcp.AddTool(srv, whatsChangedTool(), s.whatsChanged)
	s.addAlexaPlusTools(srv)
	srv.AddPrompt(briefCarerPrompt(), s.briefCarer)
	srv.AddReceivingMiddleware(s.receiveModern)
	srv.AddSendingMiddleware(s.sendModern)
	return srv
}

// implementation is the server's identity, for initialize and
// server/discover alike.
func (s *Server) implementation() *mcp.Implementation {
	version := s.cfg.Version
	if version == "" {
		version = "dev"
	}
	return &mcp.Implementation{Name: "unsay", Title: "Unsay care plan", Version: version}
}

// receiveModern answers resources/list and resources/read (as the stateful
// path does, without a session) and subscriptions/listen (listen);
// everything else goes to the SDK.
func (s *Server) receiveModern(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		switch method {
		case "resources/list":
			if r, ok := req.(*mcp.ListResourcesRequest); ok {
				return s.listResources(ctx, r)
			}
		case "resources/read":
			if r, ok := req.(*mcp.ReadResourceRequest); ok {
				return s.readResource(ctx, r)
			}
		case methodListen:
			if r, ok := req.(*mcp.SubscriptionsListenRequest); ok {
				return s.listen(ctx, r, func(ctx context.Context) (mcp.Result, error) { return next(ctx, method, req) })
			}
		}
		return next(ctx, method, req)
	}
}

// isModernRequest reports whether req is served on the 2026-07-28 path: a
// request without a session whose per-request _meta names 2026-07-28 or
// later.
func isModernRequest(req mcp.Request) bool {
	ss, ok := req.GetSession().(*mcp.ServerSession)
	if !ok || ss == nil || ss.ID() != "" {
		return false
	}
	ip := ss.InitializeParams()
	return ip != nil && ip.ProtocolVersion >= ModernProtocolVersion
}
