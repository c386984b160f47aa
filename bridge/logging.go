package bridge

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// Log line limits: at most DefaultLogBurst records with the same level and
// message per DefaultLogWindow (5 a minute); the first one after a window
// in which some were dropped carries "suppressed": how many. DEBUG records
// are never limited.
const (
	DefaultLogBurst  = 5
	DefaultLogWindow = time.Minute
)

// lineLimiter counts log records per (level, message) in fixed windows.
// Shared by every handler derived from one limitedHandler. Safe for
// concurrent use.
type lineLimiter struct {
	mu     sync.Mutex
	burst  int
	window time.Duration
	now    func() time.Time
	lines  map[lineKey]*lineCount
}

type lineKey struct {
	level slog.Level
	msg   string
}

type lineCount struct {
	start      time.Time
	n          int // records in the window that began at start
	suppressed int // of them, dropped
}

// maxLimitedLines bounds the limiter's memory: past it, lines whose window
// ended are forgotten (and if none has, all are).
const maxLimitedLines = 1024

func newLineLimiter(burst int, window time.Duration) *lineLimiter {
	return &lineLimiter{burst: burst, window: window, now: time.Now, lines: make(map[lineKey]*lineCount)}
}

// allow reports whether a record may be written and, if so, how many like
// it were dropped in the previous window.
func (l *lineLimiter) allow(level slog.Level, msg string) (ok bool, suppressed int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	k := lineKey{level, msg}
	c, found := l.lines[k]
	if found && now.Sub(c.start) >= l.window {
		suppressed = c.suppressed
		found = false
	}
	if !found {
		if len(l.lines) >= maxLimitedLines {
			l.forget(now)
		}
		l.lines[k] = &lineCount{start: now, n: 1}
		return true, suppressed
	}
	c.n++
	if c.n > l.burst {
		c.suppressed++
		return false, 0
	}
	return true, 0
}

// forget drops the lines whose window has ended, or all of them if none
// has. Requires l.mu.
func (l *lineLimiter) forget(now time.Time) {
	for k, c := range l.lines {
		if now.Sub(c.start) >= l.window {
			delete(l.lines, k)
		}
	}
	if len(l.lines) >= maxLimitedLines {
		clear(l.lines)
	}
}

// limitedHandler is a slog.Handler that rate-limits repetitive records
// (lineLimiter) before passing them to next. With sdk set it also treats
// the MCP SDK's records: INFO and below become DEBUG (the SDK logs every
// connection, subscription and update at INFO), and a "session_id"
// attribute is replaced by sessionRef of its value — session ids are never
// logged (with a token of its principal, an id addresses a session).
type limitedHandler struct {
	next slog.Handler
	lim  *lineLimiter
	sdk  bool
}

func (h *limitedHandler) level(l slog.Level) slog.Level {
	if h.sdk && l <= slog.LevelInfo {
		return slog.LevelDebug
	}
	return l
}

func (h *limitedHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.next.Enabled(ctx, h.level(l))
}

func (h *limitedHandler) Handle(ctx context.Context, r slog.Record) error {
	level := h.level(r.Level)
	if level > slog.LevelDebug {
		ok, suppressed := h.lim.allow(level, r.Message)
		if !ok {
			return nil
		}
		if suppressed > 0 {
			r = r.Clone()
			r.AddAttrs(slog.Int("suppressed", suppressed))
		}
	}
	if h.sdk {
		out := slog.NewRecord(r.Time, level, r.Message, r.PC)
		r.Attrs(func(a slog.Attr) bool {
			out.AddAttrs(redactSessionAttr(a))
			return true
		})
		r = out
	}
	return h.next.Handle(ctx, r)
}

func (h *limitedHandler) WithAttrs(as []slog.Attr) slog.Handler {
	if h.sdk {
		red := make([]slog.Attr, len(as))
		for i, a := range as {
			red[i] = redactSessionAttr(a)
		}
		as = red
	}
	return &limitedHandler{next: h.next.WithAttrs(as), lim: h.lim, sdk: h.sdk}
}

func (h *limitedHandler) WithGroup(name string) slog.Handler {
	return &limitedHandler{next: h.next.WithGroup(name), lim: h.lim, sdk: h.sdk}
}

// redactSessionAttr replaces a session id attribute's value by its sessionRef.
func redactSessionAttr(a slog.Attr) slog.Attr {
	switch a.Key {
	case "session_id", "sessionID", "session", "sessionId":
		return slog.String("session", sessionRef(a.Value.String()))
	}
	return a
}
