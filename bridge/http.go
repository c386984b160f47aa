package bridge

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"
	sdkauth "github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// routes builds the chi router. Order matters: request metrics, then the
// Host and Origin checks, before any handler runs.
func (s *Server) routes() chi.Router {
	r := chi.NewRouter()
	r.Use(s.countRequests, s.checkHostOrigin)

	mcpChain := s.verifier.Middleware(s.pub.base + "/.well-known/oauth-protected-resource/mcp")(
		s.checkProtocolVersion(s.recordPrincipal(s.mcpHTTP)))
	r.Handle("/mcp", mcpChain)

	r.Get("/healthz", s.healthz)
	r.Get("/readyz", s.readyz)
	r.Handle("/metrics", promhttp.HandlerFor(s.metrics.reg, promhttp.HandlerOpts{Registry: s.metrics.reg}))

	if s.api != nil {
		s.api.Routes(r)
	}
	if s.extra.Routes != nil {
		s.extra.Routes(r)
	}
	if s.extra.Alexa != nil {
		r.Post("/alexa", s.extra.Alexa.ServeHTTP)
	}
	r.Get("/", s.extra.Web.ServeHTTP)
	r.Get("/echo.html", s.extra.Web.ServeHTTP)
	r.Get("/clinician", s.extra.Web.ServeHTTP)
	return r
}

// countRequests feeds unsay_http_requests_total{route,code}. The route is
// chi's pattern ("/mcp"), never the raw path, so labels stay bounded.
func (s *Server) countRequests(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ww := middleware.NewWrapResponseWriter(w, r.ProtoMajor)
		next.ServeHTTP(ww, r)
		route := "unmatched"
		if rc := chi.RouteContext(r.Context()); rc != nil && rc.RoutePattern() != "" {
			route = rc.RoutePattern()
		}
		code := ww.Status()
		if code == 0 {
			code = http.StatusOK
		}
		s.metrics.requests.WithLabelValues(route, strconv.Itoa(code)).Inc()
	})
}

// checkHostOrigin refuses, with 403 and before anything else runs, a Host
// that is not the public URL's host (any loopback name when the public URL
// is loopback) and an Origin that is neither the public URL's origin nor
// one of Config.AllowedOrigins. A request without Origin (not a browser's
// cross-origin request) passes. This is the DNS-rebinding and cross-origin
// protection of MCP 2025-11-25 §Security. An allowed Origin gets CORS
// headers, and its preflight (OPTIONS with Access-Control-Request-Method)
// is answered 204 here, before authentication.
func (s *Server) checkHostOrigin(next http.Handler) http.Handler {
	allowed := make([]string, 0, len(s.cfg.AllowedOrigins)+1)
	allowed = append(allowed, s.pub.origin)
	for _, o := range s.cfg.AllowedOrigins {
		allowed = append(allowed, normalizeOrigin(o))
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.hostAllowed(r.Host) {
			http.Error(w, "Forbidden: Host not allowed", http.StatusForbidden)
			return
		}
		origin := r.Header.Get("Origin")
		if origin == "" {
			next.ServeHTTP(w, r)
			return
		}
		if !slices.Contains(allowed, normalizeOrigin(origin)) {
			http.Error(w, "Forbidden: Origin not allowed", http.StatusForbidden)
			return
		}
		// CORS for an allowed origin: credentials travel only in the
		// Authorization header (no cookies), so no Allow-Credentials.
		hdr := w.Header()
		hdr.Add("Vary", "Origin")
		hdr.Set("Access-Control-Allow-Origin", origin)
		hdr.Set("Access-Control-Expose-Headers", "Mcp-Session-Id, WWW-Authenticate")
		if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
			hdr.Set("Access-Control-Allow-Methods", "GET, POST, DELETE")
			hdr.Set("Access-Control-Allow-Headers", "Authorization, Content-Type, Accept, Mcp-Session-Id, MCP-Protocol-Version, Last-Event-ID, X-Unsay-Timestamp, X-Unsay-Signature")
			hdr.Set("Access-Control-Max-Age", "600")
			w.WriteHeader(http.StatusNoContent)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func (s *Server) hostAllowed(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.ToLower(strings.TrimSuffix(strings.Trim(host, "[]"), "."))
	if host == "" {
		return false
	}
	if s.pub.loopback {
		return isLoopbackHost(host)
	}
	return host == s.pub.host
}

func normalizeOrigin(o string) string {
	return strings.ToLower(strings.TrimRight(strings.TrimSpace(o), "/"))
}

// isLoopbackHost reports whether host (no port) is "localhost" or a
// loopback IP address.
func isLoopbackHost(host string) bool {
	host = strings.Trim(host, "[]")
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// checkProtocolVersion answers 400 to an MCP-Protocol-Version header naming
// a version this stateful server does not speak (the SDK lets some through).
func (s *Server) checkProtocolVersion(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if v := r.Header.Get("MCP-Protocol-Version"); v != "" && !slices.Contains(supportedProtocolVersions, v) {
			http.Error(w, "Bad Request: Unsupported protocol version (supported versions: "+strings.Join(supportedProtocolVersions, ",")+")", http.StatusBadRequest)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// recordPrincipal runs after the bearer middleware: it records the
// verified principal of every request that names a session, with its
// token's expiry, as that session's current principal — only when the
// token's session identity (subject and patients, auth.SessionUserID) is
// the session's; the SDK then refuses any other with 403 — so sending
// middleware and replay re-authorize against the latest token seen (P-9).
func (s *Server) recordPrincipal(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if id := r.Header.Get("Mcp-Session-Id"); id != "" {
			ti := sdkauth.TokenInfoFromContext(r.Context())
			if p, ok := s.principalOf(ti); ok {
				s.sessions.record(id, p, ti.Expiration)
			}
		}
		next.ServeHTTP(w, r)
	})
}

// healthz answers 200 "ok" while the process runs.
func (s *Server) healthz(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write([]byte("ok\n"))
}

// readyz answers JSON {"ok": bool, "store": {"ok": bool, "lastSeq": n,
// "backend": "sqlite"}, "mcp": {"sessions": n}, …Extra.Ready entries}:
// 200 when the store answers within 2 s and no Extra.Ready entry reports
// {"ok": false}, else 503. An error's text is not shown (it may name paths).
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	ok := true
	storeState := map[string]any{"ok": true}
	if seq, err := s.st.LastSeq(ctx); err != nil {
		ok = false
		storeState = map[string]any{"ok": false, "error": "store unreachable"}
		s.logger.WarnContext(ctx, "readyz: store unreachable", "err", err)
	} else {
		storeState["lastSeq"] = seq
	}
	if _, dialect := s.st.DB(); dialect != "" {
		storeState["backend"] = dialect
	}
	body := map[string]any{
		"store":                storeState,
		"mcp":                  map[string]any{"sessions": s.sessions.len(), "protocolVersion": ProtocolVersion},
		"authorizationServers": append([]string{}, s.cfg.AuthorizationServers...),
	}
	if s.extra.Ready != nil {
		for k, v := range s.extra.Ready(ctx) {
			if _, taken := body[k]; taken || k == "ok" {
				k = "extra." + k
			}
			body[k] = v
			if m, isMap := v.(map[string]any); isMap {
				if b, isBool := m["ok"].(bool); isBool && !b {
					ok = false
				}
			}
		}
	}
	body["ok"] = ok
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	if !ok {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	_ = json.NewEncoder(w).Encode(body)
}
