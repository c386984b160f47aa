package bridge

import (
	"bytes"
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestClose_ReturnsPromptlyWithManySessionsAndUnansweredPings: Close ends
// twenty sessions with open GET streams, each with a server→client ping in
// flight that its client never answers (as a keepalive ping to a client
// that has gone), well within 5 s — the pings are cancelled, not waited out
// for their minute — and afterwards no session is left. Twin: before Close,
// a ping to a client that does answer (an SDK client) succeeds through the
// same sending middleware.
func TestClose_ReturnsPromptlyWithManySessionsAndUnansweredPings(t *testing.T) {
	h := newHarness(t)
	tok := h.token("host", userScopes)

	live := h.connect(tok)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var liveSS *mcp.ServerSession
	for ss := range h.srv.MCPServer().Sessions() {
		if ss.ID() == live.cs.ID() {
			liveSS = ss
		}
	}
	if liveSS == nil {
		t.Fatal("the SDK client's server session is not listed")
	}
	if err := liveSS.Ping(ctx, nil); err != nil {
		t.Fatalf("ping to a client that answers: %v", err)
	}

	const n = 20
	streams := make(map[string]<-chan sseEvent, n)
	for range n {
		sid := h.rawInit(tok)
		ch, status, stop := h.openStream(tok, sid, "")
		defer stop()
		if status != http.StatusOK {
			t.Fatalf("GET stream: %d", status)
		}
		streams[sid] = ch
	}
	pings := make(chan error, n)
	for ss := range h.srv.MCPServer().Sessions() {
		if _, raw := streams[ss.ID()]; !raw {
			continue
		}
		go func() {
			pctx, pcancel := context.WithTimeout(context.Background(), time.Minute)
			defer pcancel()
			pings <- ss.Ping(pctx, nil)
		}()
	}
	// Every raw stream carries its ping: all twenty are in flight, unanswered.
	for sid, ch := range streams {
		deadline := time.After(5 * time.Second)
	wait:
		for {
			select {
			case ev, ok := <-ch:
				if !ok {
					t.Fatalf("stream of %s ended before its ping", sid)
				}
				if bytes.Contains(ev.data, []byte(`"method":"ping"`)) {
					break wait
				}
			case <-deadline:
				t.Fatalf("no ping on the stream of %s", sid)
			}
		}
	}

	closed := make(chan struct{})
	go func() {
		h.srv.Close()
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatalf("Close did not return within 5 s with %d sessions waiting on pings", n+1)
	}
	for range n {
		select {
		case err := <-pings:
			if err == nil {
				t.Error("an unanswered ping succeeded")
			}
		case <-time.After(5 * time.Second):
			t.Fatal("an unanswered ping is still waiting after Close")
		}
	}
	left := 0
	for range h.srv.MCPServer().Sessions() {
		left++
	}
	if left != 0 {
		t.Errorf("%d sessions left after Close", left)
	}
}
