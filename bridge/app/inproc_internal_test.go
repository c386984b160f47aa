package app

import (
	"bufio"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"
)

// serveInProc serves h on an in-process listener with the public
// server's limits and returns a client that dials it, as buildSpeech
// wires the speech principal.
func serveInProc(t *testing.T, h http.Handler) (*inProcListener, *http.Client) {
	t.Helper()
	ln := newInProcListener()
	hs := newPublicServer(h, HTTPLimits{}, nil, slog.New(slog.DiscardHandler))
	go func() { _ = hs.Serve(ln) }()
	t.Cleanup(func() { _ = hs.Close(); _ = ln.Close() })
	tr := &http.Transport{DialContext: ln.DialContext}
	t.Cleanup(tr.CloseIdleConnections)
	return ln, &http.Client{Transport: tr}
}

// TestInProc_ServesRequestsAsOverLoopback: a request and its body reach
// the handler whole, with a loopback peer address, headers (the bearer
// token) intact, and the answer comes back; connections are reused.
func TestInProc_ServesRequestsAsOverLoopback(t *testing.T) {
	var peers []string
	_, c := serveInProc(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		peers = append(peers, r.RemoteAddr)
		w.Header().Set("X-Auth", r.Header.Get("Authorization"))
		_, _ = w.Write(append([]byte("got "), b...))
	}))
	for i := range 3 {
		req, _ := http.NewRequest(http.MethodPost, "http://127.0.0.1/mcp", strings.NewReader("hello"))
		req.Header.Set("Authorization", "Bearer t")
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(b) != "got hello" || resp.Header.Get("X-Auth") != "Bearer t" {
			t.Fatalf("request %d answered %q, X-Auth %q", i, b, resp.Header.Get("X-Auth"))
		}
	}
	for _, p := range peers {
		host, _, err := net.SplitHostPort(p)
		if err != nil || !net.ParseIP(host).IsLoopback() {
			t.Fatalf("peer address %q, want loopback", p)
		}
	}
}

// TestInProc_StreamsFlushedEvents: an event a streaming handler flushes
// reaches the client while the handler still runs (an MCP event stream),
// and the client's end of the stream ends the handler's request context.
func TestInProc_StreamsFlushedEvents(t *testing.T) {
	ended := make(chan struct{})
	_, c := serveInProc(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "data: one\n\n")
		if err := http.NewResponseController(w).Flush(); err != nil {
			t.Errorf("flush: %v", err)
		}
		<-r.Context().Done() // held until the client goes
		close(ended)
	}))
	req, _ := http.NewRequest(http.MethodGet, "http://127.0.0.1/mcp", nil)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil || line != "data: one\n" {
		t.Fatalf("first line %q, %v", line, err)
	}
	resp.Body.Close()
	select {
	case <-ended:
	case <-time.After(20 * time.Second):
		t.Fatal("the handler's context did not end after the client closed the stream")
	}
}

// TestInProc_WriteDeadlineCutsAStreamNobodyReads: a stream whose client
// reads nothing is cut by the write deadline its writer sets, as on TCP
// (P-25: a session that cannot keep up is closed); its twin, a client that
// reads, gets every byte before the same deadline.
func TestInProc_WriteDeadlineCutsAStreamNobodyReads(t *testing.T) {
	for _, reads := range []bool{false, true} {
		t.Run(map[bool]string{false: "nobody reads", true: "the client reads"}[reads], func(t *testing.T) {
			const body = 4 << 20
			werr := make(chan error, 1)
			_, c := serveInProc(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				rc := http.NewResponseController(w)
				_ = rc.SetWriteDeadline(time.Now().Add(2 * time.Second))
				w.WriteHeader(http.StatusOK)
				_ = rc.Flush()
				_, err := w.Write(make([]byte, body))
				if err == nil {
					err = rc.Flush()
				}
				werr <- err
			}))
			req, _ := http.NewRequest(http.MethodGet, "http://127.0.0.1/mcp", nil)
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var n int64
			if reads {
				n, _ = io.Copy(io.Discard, resp.Body)
			}
			select {
			case err := <-werr:
				if reads && (err != nil || n != body) {
					t.Fatalf("the client read %d of %d bytes; the write: %v", n, body, err)
				}
				if !reads && !errors.Is(err, os.ErrDeadlineExceeded) {
					t.Fatalf("the write to a client that reads nothing: %v, want the write deadline", err)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("the write neither finished nor was cut by its deadline")
			}
		})
	}
}

// TestInProc_DialAfterCloseFails: once the listener is closed nothing
// more connects (net.ErrClosed), and a dial whose context ends first
// fails with that context's error.
func TestInProc_DialAfterCloseFails(t *testing.T) {
	ln := newInProcListener()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := ln.DialContext(ctx, "tcp", ""); !errors.Is(err, context.Canceled) {
		t.Fatalf("dial with nobody accepting and a cancelled context: %v", err)
	}
	accepted := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err == nil {
			c.Close()
		}
		accepted <- err
	}()
	c, err := ln.DialContext(context.Background(), "tcp", "")
	if err != nil {
		t.Fatalf("dial while accepting: %v", err)
	}
	c.Close()
	if err := <-accepted; err != nil {
		t.Fatalf("accept: %v", err)
	}
	ln.Close()
	if _, err := ln.DialContext(context.Background(), "tcp", ""); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("dial after Close: %v, want net.ErrClosed", err)
	}
	if _, err := ln.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("accept after Close: %v, want net.ErrClosed", err)
	}
}
