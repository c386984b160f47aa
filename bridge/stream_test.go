package bridge

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// stalledConn opens a TCP connection to addr with a tiny receive buffer
// (SO_RCVBUF 1 KiB, set before connect so the window is small from the
// start), sends the raw HTTP request req and never reads: a client that
// stopped reading its stream, or a half-open connection.
func stalledConn(t testing.TB, addr, req string) net.Conn {
	t.Helper()
	d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		if err := c.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 1024)
		}); err != nil {
			return err
		}
		return serr
	}}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatalf("write request: %v", err)
	}
	return c
}

// streamServer serves GET / with a StreamWriter(opts) and runs produce on
// it; the StreamWriter is sent on the returned channel once created.
func streamServer(t testing.TB, opts StreamOptions, produce func(sw *StreamWriter)) (*httptest.Server, <-chan *StreamWriter) {
	t.Helper()
	got := make(chan *StreamWriter, 1)
	var srv *Server // ConnContext does not use its receiver
	ts := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		sw := NewStreamWriter(w, r, opts)
		got <- sw
		produce(sw)
		sw.Finish(time.Now().Add(time.Second))
	}))
	ts.Config.ConnContext = srv.ConnContext
	ts.Start()
	t.Cleanup(func() {
		ts.CloseClientConnections()
		ts.Close()
	})
	return ts, got
}

// pace waits, up to 5 ms, until sw has written everything queued: a
// producer at the pace of a live change feed, which a reading client keeps
// up with and a stalled one does not.
func pace(sw *StreamWriter) {
	for deadline := time.Now().Add(5 * time.Millisecond); sw.Queued() > 0 && sw.Err() == nil && time.Now().Before(deadline); {
		time.Sleep(100 * time.Microsecond)
	}
}

func event(i int) []byte {
	return fmt.Appendf(nil, "event: message\nid: _%d\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/resources/updated\",\"params\":{\"uri\":\"care://ray/weight_bearing\"}}\n\n", i)
}

// TestStreamWriter_AReaderThatNeverReadsFailsTheStreamAndNoWriteWaits: a
// client that opens a stream and never reads (tiny receive buffer) cannot
// hold up its writer: 2,000 writes at a change feed's pace return (the
// kernel takes the first ~16 KiB, its send buffer bounded by SendBuffer;
// the queue the next 16 KiB; then every Write fails with ErrStreamOverflow
// at once), Failed closes and OnFail is called once. Twin: a client that
// reads gets all 2,000 events, in order, and the stream never fails.
func TestStreamWriter_AReaderThatNeverReadsFailsTheStreamAndNoWriteWaits(t *testing.T) {
	const n = 2000
	opts := func(fails chan error) StreamOptions {
		return StreamOptions{QueueBytes: 16 << 10, SendBuffer: 16 << 10, WriteTimeout: time.Minute, KeepAlive: -1,
			OnFail: func(err error) { fails <- err }}
	}
	t.Run("stalled", func(t *testing.T) {
		fails := make(chan error, 4)
		wrote := make(chan error, 1)
		ts, _ := streamServer(t, opts(fails), func(sw *StreamWriter) {
			var first error
			for i := range n {
				if _, err := sw.Write(event(i)); err != nil && first == nil {
					first = err
				}
				pace(sw)
			}
			wrote <- first
		})
		stalledConn(t, ts.Listener.Addr().String(), "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
		select {
		case err := <-wrote:
			if !errors.Is(err, ErrStreamOverflow) {
				t.Errorf("first Write error %v, want ErrStreamOverflow", err)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("the writes to a stream whose client never reads did not return")
		}
		select {
		case err := <-fails:
			if !errors.Is(err, ErrStreamOverflow) {
				t.Errorf("OnFail(%v), want ErrStreamOverflow", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("OnFail was not called")
		}
		select {
		case err := <-fails:
			t.Errorf("OnFail called twice (%v)", err)
		case <-time.After(50 * time.Millisecond):
		}
	})
	t.Run("reading", func(t *testing.T) {
		fails := make(chan error, 4)
		ts, _ := streamServer(t, opts(fails), func(sw *StreamWriter) {
			for i := range n {
				pace(sw)
				if _, err := sw.Write(event(i)); err != nil {
					t.Errorf("Write %d: %v", i, err)
					return
				}
			}
		})
		resp, err := http.Get(ts.URL)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		next := 0
		for sc.Scan() {
			if id, ok := strings.CutPrefix(sc.Text(), "id: _"); ok {
				if id != fmt.Sprint(next) {
					t.Fatalf("event id %s, want %d", id, next)
				}
				next++
			}
		}
		if next != n {
			t.Errorf("read %d events, want %d", next, n)
		}
		select {
		case err := <-fails:
			t.Errorf("a reading client's stream failed: %v", err)
		default:
		}
	})
}

// TestStreamWriter_AWriteThatPassesItsDeadlineFailsTheStream: with a queue
// large enough never to overflow, a client that never reads is found by
// the write deadline (ErrStreamTimeout) once the kernel's send buffer is
// full. Twin: the same stream to a reading client outlives many deadlines.
func TestStreamWriter_AWriteThatPassesItsDeadlineFailsTheStream(t *testing.T) {
	opts := func(fails chan error) StreamOptions {
		return StreamOptions{QueueBytes: 64 << 20, SendBuffer: 16 << 10, WriteTimeout: 200 * time.Millisecond, KeepAlive: -1,
			OnFail: func(err error) { fails <- err }}
	}
	chunk := []byte("data: " + strings.Repeat("x", 4000) + "\n\n")
	t.Run("stalled", func(t *testing.T) {
		fails := make(chan error, 1)
		ts, _ := streamServer(t, opts(fails), func(sw *StreamWriter) {
			for range 1000 { // 4 MB, far more than the kernel holds
				if _, err := sw.Write(chunk); err != nil {
					return
				}
			}
			<-sw.Failed()
		})
		stalledConn(t, ts.Listener.Addr().String(), "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
		select {
		case err := <-fails:
			if !errors.Is(err, ErrStreamTimeout) {
				t.Errorf("OnFail(%v), want ErrStreamTimeout", err)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("the stream of a client that never reads did not fail")
		}
	})
	t.Run("reading", func(t *testing.T) {
		fails := make(chan error, 1)
		ts, _ := streamServer(t, opts(fails), func(sw *StreamWriter) {
			for range 1000 {
				if _, err := sw.Write(chunk); err != nil {
					t.Errorf("Write: %v", err)
					return
				}
			}
		})
		resp, err := http.Get(ts.URL)
		if err != nil {
			t.Fatal(err)
		}
		n, _ := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if n != int64(1000*len(chunk)) {
			t.Errorf("read %d bytes, want %d", n, 1000*len(chunk))
		}
		select {
		case err := <-fails:
			t.Errorf("a reading client's stream failed: %v", err)
		default:
		}
	})
}

// TestStreamWriter_EventStreamsCarryTheProxyHeaderAndKeepAliveComments: an
// event stream's response says X-Accel-Buffering: no, and a silent one
// gets ": keep-alive" comment lines. Twin: a JSON response through the
// same writer gets neither.
func TestStreamWriter_EventStreamsCarryTheProxyHeaderAndKeepAliveComments(t *testing.T) {
	for _, tc := range []struct {
		contentType string
		sse         bool
	}{
		{"text/event-stream", true},
		{"application/json", false},
	} {
		t.Run(tc.contentType, func(t *testing.T) {
			release := make(chan struct{})
			ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", tc.contentType)
				sw := NewStreamWriter(w, r, StreamOptions{KeepAlive: 20 * time.Millisecond})
				sw.WriteHeader(http.StatusOK)
				_, _ = sw.Write([]byte("{}\n"))
				<-release
				sw.Finish(time.Now().Add(time.Second))
			}))
			defer ts.Close()
			resp, err := http.Get(ts.URL)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if got := resp.Header.Get("X-Accel-Buffering"); (got == "no") != tc.sse {
				t.Errorf("X-Accel-Buffering %q", got)
			}
			var mu sync.Mutex
			var body strings.Builder
			readDone := make(chan struct{})
			go func() {
				defer close(readDone)
				buf := make([]byte, 256)
				for {
					n, err := resp.Body.Read(buf)
					mu.Lock()
					body.Write(buf[:n])
					mu.Unlock()
					if err != nil {
						return
					}
				}
			}()
			if tc.sse {
				waitUntil(t, func() bool {
					mu.Lock()
					defer mu.Unlock()
					return strings.Count(body.String(), ": keep-alive\n\n") >= 2
				})
			} else {
				time.Sleep(200 * time.Millisecond) // ten keep-alive intervals
			}
			close(release)
			<-readDone
			if !tc.sse && strings.Contains(body.String(), "keep-alive") {
				t.Errorf("a JSON response got a comment line: %q", body.String())
			}
		})
	}
}

// TestStreamWriter_OnEventReportsIDsOnlyOnceWrittenAndFinishDrains: OnEvent
// sees each id after its event reached the connection, in order, and
// Finish writes what was still queued. Twin: events without an id field
// report nothing.
func TestStreamWriter_OnEventReportsIDsOnlyOnceWrittenAndFinishDrains(t *testing.T) {
	var mu sync.Mutex
	var ids []string
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		sw := NewStreamWriter(w, r, StreamOptions{OnEvent: func(id string) {
			mu.Lock()
			ids = append(ids, id)
			mu.Unlock()
		}})
		for i := range 50 {
			_, _ = sw.Write(event(i))
			_, _ = sw.Write([]byte("event: prime\n\n")) // no id
		}
		sw.Finish(time.Now().Add(5 * time.Second))
	}))
	defer ts.Close()
	resp, err := http.Get(ts.URL)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if got := strings.Count(string(b), "id: _"); got != 50 {
		t.Errorf("%d events arrived, want 50 (Finish drains the queue)", got)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(ids) != 50 {
		t.Fatalf("OnEvent saw %d ids, want 50: %v", len(ids), ids)
	}
	for i, id := range ids {
		if id != fmt.Sprintf("_%d", i) {
			t.Fatalf("OnEvent id %d = %q", i, id)
		}
	}
}

func TestSSEEventID(t *testing.T) {
	for in, want := range map[string]string{
		"event: message\nid: _7\ndata: {}\n\n": "_7",
		"id: abc_0\ndata: x\n\n":               "abc_0",
		"event: prime\n\n":                     "",
		"data: id: _3\n\n":                     "",
		": ok\n\n":                             "",
	} {
		got, ok := sseEventID([]byte(in))
		if got != want || ok != (want != "") {
			t.Errorf("sseEventID(%q) = %q, %v; want %q", in, got, ok, want)
		}
	}
}

// writerGoroutines counts the goroutines running sw's writer loop, from a
// dump of every goroutine's stack (a frame names its receiver's address).
func writerGoroutines(sw *StreamWriter) int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return strings.Count(string(buf[:n]), fmt.Sprintf("bridge.(*StreamWriter).run(%p", sw))
		}
		buf = make([]byte, 2*len(buf))
	}
}

// TestStreamWriter_AnIdleStreamHoldsNoWriterGoroutineAndDeliversTheNext: once
// what was queued is written, the stream runs no writer goroutine (an idle
// stream costs no goroutine) and the next Write is still written at once
// and reported (OnEvent), as often as the stream goes idle; a silent event
// stream still gets its keep-alive comments. Twin: while a write is queued
// to a client that does not read, the writer goroutine is there (it holds
// the write until the deadline fails the stream).
func TestStreamWriter_AnIdleStreamHoldsNoWriterGoroutineAndDeliversTheNext(t *testing.T) {
	t.Run("idle", func(t *testing.T) {
		write := make(chan int)
		ids := make(chan string, 16)
		ts, got := streamServer(t, StreamOptions{KeepAlive: 30 * time.Millisecond, OnEvent: func(id string) { ids <- id }}, func(sw *StreamWriter) {
			sw.WriteHeader(http.StatusOK)
			for i := range write {
				if _, err := sw.Write(event(i)); err != nil {
					t.Errorf("Write %d: %v", i, err)
				}
			}
		})
		resp, err := http.Get(ts.URL)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		sw := <-got
		lines := make(chan string, 64)
		go func() {
			sc := bufio.NewScanner(resp.Body)
			for sc.Scan() {
				lines <- sc.Text()
			}
			close(lines)
		}()
		next := func(prefix string) {
			t.Helper()
			timeout := time.After(20 * time.Second)
			for {
				select {
				case l, ok := <-lines:
					if !ok {
						t.Fatalf("the stream ended before %q", prefix)
					}
					if strings.HasPrefix(l, prefix) {
						return
					}
				case <-timeout:
					t.Fatalf("no %q line within 20 s", prefix)
				}
			}
		}
		for i := range 3 {
			waitUntil(t, func() bool { return !sw.writing() && sw.Queued() == 0 })
			if n := writerGoroutines(sw); n != 0 {
				t.Fatalf("round %d: an idle stream has %d writer goroutines, want 0", i, n)
			}
			write <- i
			next(fmt.Sprintf("id: _%d", i))
			select {
			case id := <-ids:
				if id != fmt.Sprintf("_%d", i) {
					t.Errorf("OnEvent(%q), want _%d", id, i)
				}
			case <-time.After(20 * time.Second):
				t.Fatalf("OnEvent not called for event %d", i)
			}
		}
		next(": keep-alive") // the timer starts a writer for the comment
		waitUntil(t, func() bool { return !sw.writing() })
		close(write)
	})
	t.Run("stalled", func(t *testing.T) {
		fails := make(chan error, 1)
		chunk := []byte("data: " + strings.Repeat("x", 4000) + "\n\n")
		ts, got := streamServer(t, StreamOptions{QueueBytes: 64 << 20, SendBuffer: 16 << 10, WriteTimeout: time.Minute, KeepAlive: -1,
			OnFail: func(err error) { fails <- err }}, func(sw *StreamWriter) {
			for range 200 { // 800 KB, far more than the kernel holds
				if _, err := sw.Write(chunk); err != nil {
					return
				}
			}
			<-sw.Failed()
		})
		stalledConn(t, ts.Listener.Addr().String(), "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
		sw := <-got
		waitUntil(t, func() bool { return sw.Queued() > 0 && sw.writing() && writerGoroutines(sw) == 1 })
		sw.Abort()
		select {
		case err := <-fails:
			if !errors.Is(err, ErrStreamAborted) {
				t.Errorf("OnFail(%v), want ErrStreamAborted", err)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("Abort did not fail the stream")
		}
		waitUntil(t, func() bool { return !sw.writing() })
	})
}

// headerCounter is a ResponseWriter that counts what reaches it.
type headerCounter struct {
	*httptest.ResponseRecorder
	mu      sync.Mutex
	headers int
}

func (h *headerCounter) WriteHeader(code int) {
	h.mu.Lock()
	h.headers++
	h.mu.Unlock()
	h.ResponseRecorder.WriteHeader(code)
}

func (h *headerCounter) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.headers
}

func TestStreamWriter_AWriteAfterFinishNeverReachesTheResponseWriter(t *testing.T) {
	for _, finishFirst := range []bool{true, false} { // false: the twin, a write before Finish does reach it
		w := &headerCounter{ResponseRecorder: httptest.NewRecorder()}
		sw := NewStreamWriter(w, httptest.NewRequest(http.MethodGet, "/", nil), StreamOptions{})
		if finishFirst {
			sw.Finish(time.Now().Add(time.Second))
		}
		_, err := sw.Write([]byte("x"))
		if !finishFirst {
			sw.Finish(time.Now().Add(time.Second))
		}
		switch {
		case finishFirst && (err == nil || w.count() != 0 || sw.writing()):
			t.Errorf("after Finish: err %v, %d headers reached the ResponseWriter, writer running %v", err, w.count(), sw.writing())
		case !finishFirst && (err != nil || w.count() != 1 || w.Body.String() != "x"):
			t.Errorf("before Finish: err %v, %d headers, body %q", err, w.count(), w.Body.String())
		}
	}
}
