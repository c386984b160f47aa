package bridge

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"

	"github.com/unsay/unsay/store"
)

// routes builds the chi router. Order matters: nosniff on every response,
// request metrics, then the Host and Origin checks, before any handler runs.
// /metrics and the details of /readyz are not here: they are served by
// AdminHandler only (a separate listen address, --admin-addr).
func (s *Server) routes() chi.Router {
	r := chi.NewRouter()
	r.Use(noSniff, s.countRequests, s.checkHostOrigin)

	mcpChain := s.verifier.Middleware(s.pub.base + "/.well-known/oauth-protected-resource/mcp")(
		http.HandlerFunc(s.routeMCP))
	r.Handle("/mcp", mcpChain)

	r.Get(audioPath+"{token}", s.serveAudio) // signed clip URLs (audio.go)
	r.Head(audioPath+"{token}", s.serveAudio)
	r.Get("/healthz", s.healthz)
	r.Get("/readyz", s.readyzPublic)

	if s.extra.Alexa != nil {
		r.Post("/alexa", s.extra.Alexa.ServeHTTP)
	}
	r.Get("/", s.extra.Web.ServeHTTP)
	r.Get("/echo.html", s.extra.Web.ServeHTTP)
	r.Get("/clinician", s.extra.Web.ServeHTTP)
	return r
}

// noSniff sets X-Content-Type-Options: nosniff on every response, so no
// browser reads a body as a type other than the one declared.
func noSniff(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Content-Type-Options", "nosniff")
		next.ServeHTTP(w, r)
	})
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
// that hostAllowed refuses (the probes GET /healthz and /readyz answer
// whatever the Host) and an Origin that is neither the public URL's origin
// nor one of Config.AllowedOrigins. A request without Origin (not a
// browser's cross-origin request) passes. This is the DNS-rebinding and
// cross-origin protection of MCP 2025-11-25 §Security. An allowed Origin
// gets CORS headers, and its preflight (OPTIONS with
// Access-Control-Request-Method) is answered 204 here, before
// authentication.
func (s *Server) checkHostOrigin(next http.Handler) http.Handler {
	allowed := make([]string, 0, len(s.cfg.AllowedOrigins)+1)
	allowed = append(allowed, s.pub.origin)
	for _, o := range s.cfg.AllowedOrigins {
		allowed = append(allowed, normalizeOrigin(o))
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !isProbe(r) && !s.hostAllowed(r) {
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
		hdr.Set("Access-Control-Expose-Headers", "Mcp-Session-Id, Mcp-Protocol-Version, WWW-Authenticate, Retry-After")
		if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
			hdr.Set("Access-Control-Allow-Methods", "GET, POST, DELETE")
			hdr.Set("Access-Control-Allow-Headers", corsAllowHeaders)
			hdr.Set("Access-Control-Max-Age", "600")
			w.WriteHeader(http.StatusNoContent)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// hostAllowed is the Host rule (README "Host rule"):
//
//   - a loopback public URL: any loopback name or address;
//   - otherwise the public URL's host name (any port), or
//   - a loopback name or address when the request itself comes from a
//     loopback peer and was not relayed by a proxy (RelayedByProxy): the
//     CLI on the box itself (unsay write --url http://127.0.0.1:8080). A
//     DNS-rebinding page never has a loopback Host, and a reverse proxy on
//     the box that passes its own Host on is recognised by its forwarding
//     headers.
//
// Health probes bypass it (isProbe).
func (s *Server) hostAllowed(r *http.Request) bool {
	host := canonicalHost(r.Host)
	if host == "" {
		return false
	}
	if s.pub.loopback {
		return isLoopbackHost(host)
	}
	if host == s.pub.host {
		return true
	}
	return isLoopbackHost(host) && peerIsLoopback(r.RemoteAddr) && !RelayedByProxy(r.Header)
}

// canonicalHost is a Host header's name without port, brackets or a
// trailing dot, lower case.
func canonicalHost(hostport string) string {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	return strings.ToLower(strings.TrimSuffix(strings.Trim(host, "[]"), "."))
}

// isProbe reports whether r is a health probe (GET or HEAD of /healthz or
// /readyz). Probes answer whatever the Host header — a load balancer
// probes an instance by its address — and say nothing a stranger may not
// know: "ok", or ready / not ready with reasons in general terms.
func isProbe(r *http.Request) bool {
	return (r.Method == http.MethodGet || r.Method == http.MethodHead) &&
		(r.URL.Path == "/healthz" || r.URL.Path == "/readyz")
}

// peerIsLoopback reports whether remoteAddr ("ip:port") is a loopback address.
func peerIsLoopback(remoteAddr string) bool {
	host, _, err := net.SplitHostPort(remoteAddr)
	if err != nil {
		host = remoteAddr
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// forwardingHeaders are the headers a reverse proxy adds to a request it
// relays (RFC 7239 Forwarded and the de-facto X-Forwarded-* and X-Real-IP).
var forwardingHeaders = []string{"Forwarded", "X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto", "X-Real-Ip"}

// RelayedByProxy reports whether h carries any header a reverse proxy adds
// when it relays a request: Forwarded (RFC 7239), X-Forwarded-For,
// X-Forwarded-Host, X-Forwarded-Proto or X-Real-IP.
func RelayedByProxy(h http.Header) bool {
	for _, k := range forwardingHeaders {
		if _, ok := h[k]; ok {
			return true
		}
	}
	return false
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

// healthz answers 200 "ok" while the process runs.
func (s *Server) healthz(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write([]byte("ok\n"))
}

// storeWriteWait bounds readiness's wait for the store's write check
// (store.WriteHealthState): 1 s, so /readyz answers within about a second
// even while another process holds the database's write lock (T5).
const storeWriteWait = time.Second

// Readiness reasons, in general terms: what the public /readyz may say.
const (
	reasonStoreUnreachable = "store unreachable"
	reasonStoreReadOnly    = "store cannot commit writes"
)

// readiness checks the store (within 2 s; whether it can commit within
// storeWriteWait, 1 s), the optional Extra.StoreWritable hook and every
// Extra.Ready entry. It returns whether the instance is
// ready, the reasons it is not (general terms, sorted: "store unreachable",
// "store cannot commit writes", "{key} not ready"), and the details for
// the admin /readyz.
func (s *Server) readiness(ctx context.Context) (ok bool, reasons []string, details map[string]any) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	storeState := map[string]any{"ok": true}
	if seq, err := s.st.LastSeq(ctx); err != nil {
		storeState = map[string]any{"ok": false, "error": reasonStoreUnreachable}
		reasons = append(reasons, reasonStoreUnreachable)
		s.logger.WarnContext(ctx, "readyz: store unreachable", "err", err)
	} else {
		storeState["lastSeq"] = seq
	}
	if s.extra.StoreWritable != nil {
		wctx, cancel := context.WithTimeout(ctx, storeWriteWait)
		rep := s.extra.StoreWritable(wctx)
		cancel()
		if !rep.CheckedAt.IsZero() {
			storeState["writeCheckedAgoMs"] = max(0, time.Since(rep.CheckedAt).Milliseconds())
		}
		if err := rep.Err; err != nil {
			storeState["ok"], storeState["writable"] = false, false
			if ue := (*store.UnavailableError)(nil); errors.As(err, &ue) {
				storeState["writeFault"] = ue.Reason // safe to show: "the database is busy", "the disk is full", …
			}
			reasons = append(reasons, reasonStoreReadOnly)
			s.logger.WarnContext(ctx, "readyz: store cannot commit writes", "err", err)
		} else {
			storeState["writable"] = true
		}
	}
	storeState["backend"] = s.st.Backend()
	details = map[string]any{
		"store":                storeState,
		"mcp":                  map[string]any{"sessions": s.sessions.len(), "protocolVersion": ProtocolVersion},
		"authorizationServers": append([]string{}, s.cfg.AuthorizationServers...),
	}
	if s.extra.Ready != nil {
		for k, v := range s.extra.Ready(ctx) {
			if _, taken := details[k]; taken || k == "ok" || k == "reasons" {
				k = "extra." + k
			}
			details[k] = v
			if m, isMap := v.(map[string]any); isMap {
				if b, isBool := m["ok"].(bool); isBool && !b {
					reasons = append(reasons, k+" not ready")
				}
			}
		}
	}
	slices.Sort(reasons)
	return len(reasons) == 0, reasons, details
}

// readyzPublic answers the anonymous GET /readyz: {"ok": true} with 200,
// or {"ok": false, "reasons": ["store cannot commit writes", …]} with 503.
// It never shows a sequence number, a patient, a session count, a host or a
// process id (those move with assistant-only writes or name patients); the
// details are on the admin listener (AdminHandler).
func (s *Server) readyzPublic(w http.ResponseWriter, r *http.Request) {
	ok, reasons, _ := s.readiness(r.Context())
	body := map[string]any{"ok": ok}
	if !ok {
		body["reasons"] = reasons
	}
	writeReady(w, ok, body)
}

// readyzDetails answers the admin GET /readyz: JSON {"ok": bool, "reasons":
// […], "store": {"ok": bool, "writable": bool, "writeFault": "the database
// is busy" (when not writable), "writeCheckedAgoMs": how old that answer is
// (ms), "lastSeq": n, "backend": "sqlite"}, "mcp": {"sessions": n, "protocolVersion": …},
// "authorizationServers": […], …Extra.Ready entries}: 200 when ready, else
// 503. An error's text is not shown (it may name paths).
func (s *Server) readyzDetails(w http.ResponseWriter, r *http.Request) {
	ok, reasons, body := s.readiness(r.Context())
	body["ok"], body["reasons"] = ok, append([]string{}, reasons...)
	writeReady(w, ok, body)
}

func writeReady(w http.ResponseWriter, ok bool, body map[string]any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	if !ok {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	_ = json.NewEncoder(w).Encode(body)
}
