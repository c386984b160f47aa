package bridge

import (
	"net"
	"net/http"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// AdminHandler is the operators' HTTP surface, for a listen address of its
// own that only operators can reach (`unsay serve --admin-addr`, off by
// default; never the public listener):
//
//   - GET /readyz — readiness with its details: the store's last sequence
//     number and backend, the MCP session count, and every Extra.Ready
//     entry (the speech principal's followed patients, backlog, leases and
//     instance); 200 when ready, else 503;
//   - GET /metrics — the Prometheus registry (Metrics).
//
// These move with assistant-only writes and name patients, so they are not
// on the public listener, whose /readyz says only ready / not ready and why
// in general terms. The caller may mount more (net/http/pprof) on mux.
//
// Host rule: the Host header must be an IP address, a loopback name or the
// public URL's host — never another DNS name, so a DNS-rebinding page in
// an operator's browser cannot read it. Every response carries
// X-Content-Type-Options: nosniff.
func (s *Server) AdminHandler() chi.Router {
	r := chi.NewRouter()
	r.Use(noSniff, s.checkAdminHost)
	r.Get("/readyz", s.readyzDetails)
	r.Handle("/metrics", promhttp.HandlerFor(s.metrics.reg, promhttp.HandlerOpts{Registry: s.metrics.reg}))
	return r
}

// checkAdminHost refuses, 403, a Host that is a DNS name other than a
// loopback name or the public URL's host.
func (s *Server) checkAdminHost(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host := canonicalHost(r.Host)
		if host == "" || (net.ParseIP(host) == nil && !isLoopbackHost(host) && host != s.pub.host) {
			http.Error(w, "Forbidden: Host not allowed", http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}
