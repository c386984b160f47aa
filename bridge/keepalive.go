package bridge

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// runKeepAlive pings, every interval, each session whose standalone GET
// stream is attached, and closes one that leaves KeepAliveMisses pings in a
// row unanswered (each waits interval/2). It replaces the SDK's keep-alive,
// which pings every session: a session whose client never opened its GET
// stream cannot receive a ping, so the SDK closed it after three intervals
// (~15 min), before the idle timeout (30 min) — such a session is not
// pinged here and lives until that timeout. A sweep writes at most one log
// line, however many sessions missed. It returns when ctx ends.
func (s *Server) runKeepAlive(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		s.pingSweep(ctx, interval/2)
	}
}

// pingSweep pings every session with an attached stream, concurrently, and
// waits for the answers (or timeout).
func (s *Server) pingSweep(ctx context.Context, timeout time.Duration) {
	var wg sync.WaitGroup
	var missed, closed atomic.Int64
	s.sessions.each(func(sid string, st *sessionState) {
		st.mu.Lock()
		ss, attached := st.ss, st.stream != nil
		st.mu.Unlock()
		if ss == nil || !attached {
			return
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			pctx, cancel := context.WithTimeout(st.ctx, timeout)
			stop := context.AfterFunc(ctx, cancel)
			err := ss.Ping(pctx, nil)
			stop()
			cancel()
			if st.ctx.Err() != nil || ctx.Err() != nil {
				return // the session or the server is closing anyway
			}
			st.mu.Lock()
			if err == nil {
				st.pingMisses = 0
				st.mu.Unlock()
				return
			}
			st.pingMisses++
			misses := st.pingMisses
			st.mu.Unlock()
			missed.Add(1)
			if misses >= KeepAliveMisses {
				closed.Add(1)
				s.dropSession(sid, st, closedKeepAlive)
			}
		}()
	})
	wg.Wait()
	if n := missed.Load(); n > 0 {
		s.logger.Warn("MCP keep-alive: sessions left their ping unanswered", "sessions", n, "closed", closed.Load(), "after", KeepAliveMisses)
	}
	s.sweeps.Add(1)
}
