package app

import (
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"sync"
	"time"

	"github.com/unsay/unsay/bridge"
)

// HTTP limits of the public listener (Config.HTTP); a zero field takes its
// default.
const (
	// DefaultReadHeaderTimeout bounds reading a request's headers: 10 s.
	DefaultReadHeaderTimeout = 10 * time.Second
	// DefaultReadTimeout bounds reading a whole request, body included, from
	// its first byte: 30 s. A slow body on /write or /alexa is cut there.
	DefaultReadTimeout = 30 * time.Second
	// DefaultWriteTimeout is the write deadline of every ordinary response,
	// from the end of its request's headers: 30 s. GET /mcp streams are
	// exempt (streamDeadlines); their writer sets a deadline per write.
	DefaultWriteTimeout = 30 * time.Second
	// DefaultIdleTimeout closes a keep-alive connection idle this long: 120 s.
	DefaultIdleTimeout = 120 * time.Second
	// DefaultMaxConnections caps the public listener's concurrent
	// connections: 1,024. Further connections wait in the kernel's accept
	// queue until one closes. The speech principal does not count against
	// it: it reaches this server on an in-process listener of its own.
	DefaultMaxConnections = 1024
)

// Admin listener limits (--admin-addr).
const (
	// AdminWriteTimeout is the admin listener's write deadline: 5 minutes,
	// so a CPU profile (/debug/pprof/profile?seconds=N, N < 300) completes.
	AdminWriteTimeout = 5 * time.Minute
	// AdminMaxConnections caps the admin listener's connections: 64.
	AdminMaxConnections = 64
)

// HTTPLimits are the public listener's timeouts and connection cap. Zero
// fields take the Default* constants; tests shorten them.
type HTTPLimits struct {
	ReadHeaderTimeout time.Duration
	ReadTimeout       time.Duration
	WriteTimeout      time.Duration
	IdleTimeout       time.Duration
	MaxConnections    int
}

func (l *HTTPLimits) applyDefaults() {
	if l.ReadHeaderTimeout <= 0 {
		l.ReadHeaderTimeout = DefaultReadHeaderTimeout
	}
	if l.ReadTimeout <= 0 {
		l.ReadTimeout = DefaultReadTimeout
	}
	if l.WriteTimeout <= 0 {
		l.WriteTimeout = DefaultWriteTimeout
	}
	if l.IdleTimeout <= 0 {
		l.IdleTimeout = DefaultIdleTimeout
	}
	if l.MaxConnections <= 0 {
		l.MaxConnections = DefaultMaxConnections
	}
}

// publicServer is the http.Server of the public listener (and of the
// speech principal's in-process listener).
func (a *App) publicServer() *http.Server {
	hs := newPublicServer(a.Bridge.Handler(), a.cfg.HTTP, a.devSettings, a.log)
	hs.ConnContext = a.Bridge.ConnContext // bounds a GET stream's kernel send buffer (P-25)
	return hs
}

// newPublicServer puts l's timeouts on h and, in front of it, the GET /mcp
// deadline exemption (streamDeadlines) and the refusal of relayed requests
// while development settings dev are in force (refuseRelayedDev).
func newPublicServer(h http.Handler, l HTTPLimits, dev []string, log *slog.Logger) *http.Server {
	l.applyDefaults()
	return &http.Server{
		Handler:           streamDeadlines(refuseRelayedDev(dev, log, h)),
		ReadHeaderTimeout: l.ReadHeaderTimeout,
		ReadTimeout:       l.ReadTimeout,
		WriteTimeout:      l.WriteTimeout,
		IdleTimeout:       l.IdleTimeout,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
}

// adminServer is the http.Server of --admin-addr: readiness details and
// /metrics (bridge.Server.AdminHandler), and net/http/pprof under
// /debug/pprof/ when Config.AdminPprof is set.
func (a *App) adminServer() *http.Server {
	mux := a.Bridge.AdminHandler()
	if a.cfg.AdminPprof {
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
		mux.HandleFunc("/debug/pprof/*", pprof.Index) // the index and every named profile (heap, goroutine, …)
	}
	return &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: DefaultReadHeaderTimeout,
		ReadTimeout:       DefaultReadTimeout,
		WriteTimeout:      AdminWriteTimeout,
		IdleTimeout:       DefaultIdleTimeout,
		ErrorLog:          slog.NewLogLogger(a.log.Handler(), slog.LevelWarn),
	}
}

// limitListener caps ln at n concurrent connections: Accept waits while n
// are open (the kernel's backlog holds the rest). Unlike
// golang.org/x/net/netutil's, each connection it returns keeps the accepted
// net.Conn reachable through NetConn (as tls.Conn does), so the bridge can
// bound a stream's kernel send buffer (bridge.Server.ConnContext, P-25).
func limitListener(ln net.Listener, n int) net.Listener {
	return &limitedListener{Listener: ln, slots: make(chan struct{}, n), done: make(chan struct{})}
}

type limitedListener struct {
	net.Listener
	slots     chan struct{} // one per open connection
	done      chan struct{} // closed by Close: Accept stops waiting for a slot
	closeOnce sync.Once
}

func (l *limitedListener) Accept() (net.Conn, error) {
	select {
	case l.slots <- struct{}{}:
	case <-l.done:
		return nil, net.ErrClosed
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.slots
		return nil, err
	}
	return &limitedConn{Conn: c, release: func() { <-l.slots }}, nil
}

func (l *limitedListener) Close() error {
	l.closeOnce.Do(func() { close(l.done) })
	return l.Listener.Close()
}

// limitedConn gives its slot back once, on the first Close.
type limitedConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

// NetConn returns the accepted connection (a *net.TCPConn on TCP).
func (c *limitedConn) NetConn() net.Conn { return c.Conn }

// streamDeadlines lifts the server-wide read and write deadlines for a GET
// /mcp request — the long-lived server-sent-event stream of an MCP session
// — so that WriteTimeout does not cut it after 30 s and ReadTimeout does
// not cancel its context. Every other request keeps both.
//
// The stream then has no deadline of its own: its writer must set one
// before every write and flush (http.ResponseController.SetWriteDeadline,
// reached through Unwrap) and close the session when it passes.
func streamDeadlines(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && r.URL.Path == "/mcp" {
			rc := http.NewResponseController(w)
			_ = rc.SetReadDeadline(time.Time{})
			_ = rc.SetWriteDeadline(time.Time{})
		}
		next.ServeHTTP(w, r)
	})
}

// refuseRelayedDev answers 403 to every request relayed by a reverse proxy
// (bridge.RelayedByProxy: Forwarded, X-Forwarded-For, …) while a
// development-only setting is in force (dev non-empty): those are allowed
// on a loopback listener only because nobody else can reach it, and a
// proxy in front of it makes it reachable. The first refusal is logged at
// ERROR naming the settings; the answer does not name them.
func refuseRelayedDev(dev []string, log *slog.Logger, next http.Handler) http.Handler {
	if len(dev) == 0 {
		return next
	}
	var once sync.Once
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !bridge.RelayedByProxy(r.Header) {
			next.ServeHTTP(w, r)
			return
		}
		once.Do(func() {
			log.Error("refusing requests relayed by a reverse proxy: development-only settings are in force (allowed on a loopback listener only)",
				"settings", dev)
		})
		http.Error(w, "Forbidden: this server runs with development-only settings and refuses requests relayed by a proxy", http.StatusForbidden)
	})
}
