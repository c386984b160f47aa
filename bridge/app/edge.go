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
	// connections: 1,024. A further connection closes the one that has
	// waited longest for a request's headers (limitListener), or, when
	// every one is serving a request, waits until one closes. The speech
	// principal does not count against it: it reaches this server on an
	// in-process listener of its own.
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

// limitListener caps ln at n concurrent connections. A connection taken
// from the kernel while n are open makes room by closing the one that has
// waited longest for a request's headers — accepted and never sent a
// whole request head (http.StateNew), or a keep-alive between requests
// (http.StateIdle) — as the server reports through connState (set it as
// the http.Server's ConnState); with none waiting, it waits until one
// closes. So half-sent headers, re-sent before ReadHeaderTimeout, or idle
// keep-alives, however many, never keep out a request that arrives whole
// (Alexa's turn: breakit8 G11); only connections serving a request count
// against the cap for good. Unlike golang.org/x/net/netutil's, each
// connection it returns keeps the accepted net.Conn reachable through
// NetConn (as tls.Conn does), so the bridge can bound a stream's kernel
// send buffer (bridge.Server.ConnContext, P-25).
func limitListener(ln net.Listener, n int) *limitedListener {
	return &limitedListener{Listener: ln, slots: make(chan struct{}, n), done: make(chan struct{}), waiting: map[*limitedConn]time.Time{}}
}

type limitedListener struct {
	net.Listener
	slots     chan struct{} // one per open connection
	done      chan struct{} // closed by Close: Accept stops waiting for a slot
	closeOnce sync.Once

	mu sync.Mutex
	// waiting: the open connections serving no request (reading a
	// request's headers), with when each began to wait.
	waiting map[*limitedConn]time.Time
}

// Accept takes the next connection from the kernel, then a slot for it:
// at once while fewer than the cap are open, else by closing the
// connection that has waited longest for a request head (evictWaiting),
// else when one closes.
func (l *limitedListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	select {
	case l.slots <- struct{}{}:
	default:
		l.evictWaiting()
		select {
		case l.slots <- struct{}{}:
		case <-l.done:
			c.Close()
			return nil, net.ErrClosed
		}
	}
	lc := &limitedConn{Conn: c}
	lc.release = func() { l.forget(lc); <-l.slots }
	l.mu.Lock()
	l.waiting[lc] = time.Now()
	l.mu.Unlock()
	return lc, nil
}

// evictWaiting closes the connection that has waited longest for a
// request head, if any.
func (l *limitedListener) evictWaiting() {
	l.mu.Lock()
	var oldest *limitedConn
	var since time.Time
	for c, t := range l.waiting {
		if oldest == nil || t.Before(since) {
			oldest, since = c, t
		}
	}
	delete(l.waiting, oldest)
	l.mu.Unlock()
	if oldest != nil {
		oldest.Close()
	}
}

// connState is the http.Server's ConnState hook: a connection of this
// listener waits for a request head while new or idle, and not while it
// serves a request (http.StateActive fires once a request's head is read).
func (l *limitedListener) connState(c net.Conn, st http.ConnState) {
	lc, ok := c.(*limitedConn)
	if !ok {
		return // the speech principal's in-process listener's
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	switch st {
	case http.StateNew, http.StateIdle:
		if !lc.closed {
			l.waiting[lc] = time.Now()
		}
	default:
		delete(l.waiting, lc)
	}
}

func (l *limitedListener) forget(c *limitedConn) {
	l.mu.Lock()
	c.closed = true
	delete(l.waiting, c)
	l.mu.Unlock()
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
	closed  bool // guarded by the listener's mu
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
