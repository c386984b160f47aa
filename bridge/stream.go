package bridge

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"
)

// Defaults of StreamOptions (P-25).
const (
	// DefaultStreamQueueBytes bounds what one stream has accepted and not yet
	// written to its connection: 64 KiB, a few hundred notifications.
	DefaultStreamQueueBytes = 64 << 10
	// DefaultStreamWriteTimeout is the deadline of each write (and flush) on
	// a stream's connection: 10 s.
	DefaultStreamWriteTimeout = 10 * time.Second
	// DefaultStreamKeepAlive is how long a stream may stay silent before an
	// SSE comment line is written: 15 s, well inside common proxy read
	// timeouts (nginx: 60 s).
	DefaultStreamKeepAlive = 15 * time.Second
	// DefaultStreamSendBuffer is the kernel send buffer (SO_SNDBUF) asked
	// for on the TCP connection of a standalone GET stream: 64 KiB. Linux
	// otherwise grows it to megabytes for a reader that does not read, so
	// such a reader would hold that much kernel memory and go unnoticed for
	// thousands of notifications.
	DefaultStreamSendBuffer = 64 << 10
)

// Errors that fail a stream; a StreamWriter's Err wraps one of them.
var (
	// ErrStreamOverflow: the client fell QueueBytes behind.
	ErrStreamOverflow = errors.New("stream queue full: the client is not reading")
	// ErrStreamTimeout: one write or flush did not complete within WriteTimeout.
	ErrStreamTimeout = errors.New("stream write deadline passed")
	// ErrStreamWrite: the connection failed otherwise (the client went away).
	ErrStreamWrite = errors.New("stream write failed")
	// ErrStreamAborted: the stream was ended by its owner (Abort, or Finish's
	// deadline) with data still queued.
	ErrStreamAborted = errors.New("stream aborted")
)

// writeSegment is the most written to the connection under one deadline.
const writeSegment = 32 << 10

// keepAliveComment is the SSE comment written on a silent stream. Clients
// ignore lines starting with ":" (HTML Living Standard, server-sent events).
var keepAliveComment = []byte(": keep-alive\n\n")

// StreamOptions bound one long-lived HTTP response: a server-sent events
// stream (the standalone GET stream of an MCP session, a POST's SSE
// response, a subscriptions/listen stream). Zero fields take the
// Default… values; OnFail, OnEvent and OnWriteHeader may be nil.
type StreamOptions struct {
	// QueueBytes bounds the bytes accepted by Write and not yet written to
	// the connection. A Write that would pass it while the queue is not
	// empty fails the stream with ErrStreamOverflow (a single chunk larger
	// than QueueBytes is accepted into an empty queue).
	QueueBytes int
	// WriteTimeout is the deadline of the writes on the connection, set
	// (http.ResponseController.SetWriteDeadline) before each batch and
	// again before each further 32 KiB of it, the flush included; a write
	// that passes it fails the stream with ErrStreamTimeout.
	WriteTimeout time.Duration
	// KeepAlive: once the response is an event stream (Content-Type
	// text/event-stream), a comment line is written after this long without
	// a write, so proxies see traffic and a dead connection meets the write
	// deadline. Negative: none.
	KeepAlive time.Duration
	// SendBuffer, when positive, is set as SO_SNDBUF on the request's TCP
	// connection (HTTP/1.x only, and only when the server was built with
	// Server.ConnContext). Zero or negative leaves the kernel's own.
	SendBuffer int
	// OnFail is called once, in its own goroutine, with the error that
	// failed the stream (it wraps one of the ErrStream… errors).
	OnFail func(err error)
	// OnEvent is called after an SSE event that carries an "id:" field was
	// written and flushed to the connection, with that id, in order.
	OnEvent func(id string)
	// OnWriteHeader is called by WriteHeader (on the caller's goroutine,
	// before the status is written to the connection) with the status code.
	OnWriteHeader func(code int)
}

func (o StreamOptions) withDefaults() StreamOptions {
	if o.QueueBytes <= 0 {
		o.QueueBytes = DefaultStreamQueueBytes
	}
	if o.WriteTimeout <= 0 {
		o.WriteTimeout = DefaultStreamWriteTimeout
	}
	if o.KeepAlive == 0 {
		o.KeepAlive = DefaultStreamKeepAlive
	}
	return o
}

// StreamWriter is an http.ResponseWriter whose Write never blocks its
// caller on the client (P-25): it copies each chunk into a bounded queue
// that a writer goroutine of its own writes to the real ResponseWriter,
// under a deadline per 32 KiB and flush, with a comment line on a silent
// event stream. The writer goroutine runs only while something is queued
// (an idle stream holds none: its keep-alive is a timer that starts one),
// and never two at once, so each stream is written in order by its own
// goroutine and a stalled client blocks only that one. A client that falls
// QueueBytes behind, or lets one write pass its deadline, fails the stream
// (Err, Failed, OnFail); later Writes return that error at once. An event
// stream's response carries "X-Accel-Buffering: no" so nginx-style
// proxies pass events through.
//
// The SDK (or any handler) writes to it as to any ResponseWriter; each
// Write should be one whole SSE event, as the MCP SDK's are, so comment
// lines only ever fall between events. Flush is accepted and does nothing:
// the writer goroutine flushes after every batch. Create one with
// NewStreamWriter and call Finish once the handler has returned; it is
// safe for concurrent use.
type StreamWriter struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	opts    StreamOptions
	http1   bool
	failed  chan struct{}
	onceErr sync.Once

	mu          sync.Mutex
	queue       []streamItem
	queued      int  // bytes queued or being written
	running     bool // a writer goroutine is draining the queue
	wroteHeader bool
	sse         bool
	closing     bool
	finished    bool // Finish returned: the ResponseWriter is no longer ours
	err         error
	// idle is the keep-alive timer of an event stream (nil otherwise);
	// lastWrite is when the writer last finished a batch.
	idle      *time.Timer
	lastWrite time.Time
	// stopped, set by Finish while a writer runs, is closed when it stops.
	stopped chan struct{}
}

type streamItem struct {
	status  int // WriteHeader(status) when non-zero, else data
	data    []byte
	comment bool // a keep-alive comment: not counted in queued, no id
}

// NewStreamWriter wraps w, the ResponseWriter of r. No goroutine runs until
// something is queued.
func NewStreamWriter(w http.ResponseWriter, r *http.Request, opts StreamOptions) *StreamWriter {
	sw := &StreamWriter{
		w:      w,
		rc:     http.NewResponseController(w),
		opts:   opts.withDefaults(),
		http1:  r.ProtoMajor == 1,
		failed: make(chan struct{}),
	}
	if sw.opts.SendBuffer > 0 && sw.http1 {
		setSendBuffer(r.Context(), sw.opts.SendBuffer)
	}
	return sw
}

// Header is the real response's header map; change it before WriteHeader.
func (sw *StreamWriter) Header() http.Header { return sw.w.Header() }

// WriteHeader queues the status line. An event stream gets
// "X-Accel-Buffering: no" and, unless KeepAlive is negative, its keep-alive
// timer. After Finish it does nothing: the ResponseWriter is no longer ours.
func (sw *StreamWriter) WriteHeader(code int) {
	sw.mu.Lock()
	if sw.wroteHeader || sw.closing || sw.finished {
		sw.mu.Unlock()
		return
	}
	sw.wroteHeader = true
	if strings.HasPrefix(sw.w.Header().Get("Content-Type"), "text/event-stream") {
		sw.sse = true
		sw.w.Header().Set("X-Accel-Buffering", "no")
		if sw.opts.KeepAlive > 0 && !sw.closing && sw.err == nil {
			sw.lastWrite = time.Now()
			sw.idle = time.AfterFunc(sw.opts.KeepAlive, sw.keepAlive)
		}
	}
	sw.queue = append(sw.queue, streamItem{status: code})
	sw.mu.Unlock()
	if sw.opts.OnWriteHeader != nil {
		sw.opts.OnWriteHeader(code)
	}
	sw.mu.Lock()
	sw.startLocked()
	sw.mu.Unlock()
}

// Write queues a copy of p and returns at once: len(p), or the error that
// failed the stream (ErrStreamOverflow when p does not fit).
func (sw *StreamWriter) Write(p []byte) (int, error) {
	sw.mu.Lock()
	wrote := sw.wroteHeader
	sw.mu.Unlock()
	if !wrote {
		sw.WriteHeader(http.StatusOK)
	}
	sw.mu.Lock()
	if sw.err != nil {
		err := sw.err
		sw.mu.Unlock()
		return 0, err
	}
	if sw.closing {
		sw.mu.Unlock()
		return 0, fmt.Errorf("%w: write after Finish", ErrStreamWrite)
	}
	if sw.queued > 0 && sw.queued+len(p) > sw.opts.QueueBytes {
		queued := sw.queued
		sw.mu.Unlock()
		err := fmt.Errorf("%w (%d bytes waiting, limit %d)", ErrStreamOverflow, queued, sw.opts.QueueBytes)
		sw.fail(err)
		return 0, err
	}
	sw.queue = append(sw.queue, streamItem{data: bytes.Clone(p)})
	sw.queued += len(p)
	sw.startLocked()
	sw.mu.Unlock()
	return len(p), nil
}

// Flush does nothing: the writer goroutine flushes after every batch.
func (sw *StreamWriter) Flush() {}

// FlushError is Flush for http.ResponseController: it returns the error
// that failed the stream, if any.
func (sw *StreamWriter) FlushError() error { return sw.Err() }

// Err is the error that failed the stream, or nil.
func (sw *StreamWriter) Err() error {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	return sw.err
}

// Failed is closed once the stream has failed.
func (sw *StreamWriter) Failed() <-chan struct{} { return sw.failed }

// Queued is the number of bytes accepted and not yet written.
func (sw *StreamWriter) Queued() int {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	return sw.queued
}

// writing reports whether a writer goroutine is running (for tests: an
// idle stream has none).
func (sw *StreamWriter) writing() bool {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	return sw.running
}

// Abort fails the stream with ErrStreamAborted (unless it already failed)
// and interrupts a write in progress (HTTP/1.x: at once; HTTP/2: at its
// deadline).
func (sw *StreamWriter) Abort() { sw.fail(ErrStreamAborted) }

// Finish stops accepting writes, lets the writer goroutine write what is
// queued until deadline, then aborts whatever is left, and returns once
// no writer goroutine runs. Call it after the handler returned and before
// returning from ServeHTTP.
func (sw *StreamWriter) Finish(deadline time.Time) {
	sw.mu.Lock()
	sw.closing = true
	if sw.idle != nil {
		sw.idle.Stop()
	}
	var stopped chan struct{}
	if sw.running {
		if sw.stopped == nil {
			sw.stopped = make(chan struct{})
		}
		stopped = sw.stopped
	}
	sw.mu.Unlock()
	if stopped != nil {
		t := time.NewTimer(time.Until(deadline))
		select {
		case <-stopped:
		case <-t.C:
			sw.Abort()
			<-stopped
		}
		t.Stop()
	}
	sw.mu.Lock()
	if sw.err == nil {
		// What net/http still writes after the handler (the chunked
		// terminator) gets a deadline of its own, not a stale one.
		_ = sw.rc.SetWriteDeadline(time.Now().Add(sw.opts.WriteTimeout))
	}
	sw.finished = true
	sw.mu.Unlock()
}

// startLocked starts the writer goroutine unless one runs, the stream has
// failed or Finish returned. Requires sw.mu.
func (sw *StreamWriter) startLocked() {
	if sw.running || sw.err != nil || sw.finished {
		return
	}
	sw.running = true
	go sw.run()
}

// keepAlive runs when the keep-alive timer fires: it queues a comment line
// if nothing was written for KeepAlive and nothing is being written, and
// re-arms the timer for the next silence.
func (sw *StreamWriter) keepAlive() {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	if sw.err != nil || sw.closing {
		return
	}
	if sw.running { // being written: not silent
		sw.idle.Reset(sw.opts.KeepAlive)
		return
	}
	if quiet := time.Since(sw.lastWrite); quiet < sw.opts.KeepAlive {
		sw.idle.Reset(sw.opts.KeepAlive - quiet)
		return
	}
	sw.queue = append(sw.queue, streamItem{data: keepAliveComment, comment: true})
	sw.startLocked()
	sw.idle.Reset(sw.opts.KeepAlive)
}

// fail records err as the stream's failure (the first one wins), calls
// OnFail in its own goroutine and interrupts a write in progress.
func (sw *StreamWriter) fail(err error) {
	sw.onceErr.Do(func() {
		sw.mu.Lock()
		sw.err = err
		if sw.http1 && !sw.finished {
			// Interrupts a blocked write (net.Conn deadlines apply to
			// writes in progress); HTTP/2 writes wait out their deadline.
			_ = sw.rc.SetWriteDeadline(time.Now())
		}
		if sw.idle != nil {
			sw.idle.Stop()
		}
		sw.mu.Unlock()
		close(sw.failed)
		if sw.opts.OnFail != nil {
			go sw.opts.OnFail(err)
		}
	})
}

// run is the writer goroutine: it writes batches until the queue is empty
// or the stream has failed, then stops (startLocked starts the next).
func (sw *StreamWriter) run() {
	for {
		sw.mu.Lock()
		batch := sw.queue
		sw.queue = nil
		if sw.err != nil || len(batch) == 0 {
			sw.running = false
			if sw.stopped != nil {
				close(sw.stopped)
				sw.stopped = nil
			}
			sw.mu.Unlock()
			return
		}
		sw.mu.Unlock()
		if err := sw.writeBatch(batch); err != nil {
			sw.fail(err)
		}
	}
}

// writeBatch writes the items and flushes, under a deadline set before the
// first write and again before each further 32 KiB, then reports the
// event ids written; data items were counted in queued (a keep-alive
// comment is not).
func (sw *StreamWriter) writeBatch(batch []streamItem) error {
	var idBuf [4]string
	ids := idBuf[:0]
	written := 0
	_ = sw.rc.SetWriteDeadline(time.Now().Add(sw.opts.WriteTimeout))
	sinceDeadline := 0 // bytes written under the current deadline
	for _, it := range batch {
		if it.status != 0 {
			sw.w.WriteHeader(it.status)
			continue
		}
		// A large chunk (a long tool result) is written in segments, each
		// under its own deadline: the deadline bounds a stall, not the
		// time a slow but moving link needs for megabytes.
		for rest := it.data; len(rest) > 0; {
			seg := rest[:min(len(rest), writeSegment)]
			rest = rest[len(seg):]
			if sinceDeadline > 0 && sinceDeadline+len(seg) > writeSegment {
				_ = sw.rc.SetWriteDeadline(time.Now().Add(sw.opts.WriteTimeout))
				sinceDeadline = 0
			}
			if _, err := sw.w.Write(seg); err != nil {
				return classifyWriteErr(err)
			}
			sinceDeadline += len(seg)
		}
		if it.comment {
			continue
		}
		written += len(it.data)
		if sw.opts.OnEvent != nil {
			if id, ok := sseEventID(it.data); ok {
				ids = append(ids, id)
			}
		}
	}
	if err := sw.rc.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return classifyWriteErr(err)
	}
	sw.mu.Lock()
	sw.queued -= min(written, sw.queued)
	sw.lastWrite = time.Now()
	sw.mu.Unlock()
	for _, id := range ids {
		sw.opts.OnEvent(id)
	}
	return nil
}

func classifyWriteErr(err error) error {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return fmt.Errorf("%w: %v", ErrStreamTimeout, err)
	}
	return fmt.Errorf("%w: %v", ErrStreamWrite, err)
}

// sseEventID returns the "id" field of the SSE event in chunk: the value of
// an "id:" line before its first "data:" line.
func sseEventID(chunk []byte) (string, bool) {
	for len(chunk) > 0 {
		line, rest, _ := bytes.Cut(chunk, []byte("\n"))
		chunk = rest
		switch {
		case bytes.HasPrefix(line, []byte("id:")):
			return string(bytes.TrimSpace(line[len("id:"):])), true
		case bytes.HasPrefix(line, []byte("data:")), len(line) == 0:
			return "", false
		}
	}
	return "", false
}

// connKey is the context key of the request's net.Conn (Server.ConnContext).
type connKey struct{}

// ConnContext is an http.Server.ConnContext that records each connection
// in its requests' context, so a standalone stream can bound its kernel
// send buffer (StreamOptions.SendBuffer). Without it streams work the same,
// with the kernel's own buffer sizes.
func (s *Server) ConnContext(ctx context.Context, c net.Conn) context.Context {
	return context.WithValue(ctx, connKey{}, c)
}

// setSendBuffer sets SO_SNDBUF on the request's TCP connection, if
// ConnContext recorded one; best effort.
func setSendBuffer(ctx context.Context, n int) {
	c, _ := ctx.Value(connKey{}).(net.Conn)
	// Unwrap tls.Conn and listener wrappers (a connection limit) to the
	// socket: each exposes the connection it wraps as NetConn.
	for range 4 {
		w, ok := c.(interface{ NetConn() net.Conn })
		if !ok {
			break
		}
		c = w.NetConn()
	}
	if tcp, ok := c.(*net.TCPConn); ok {
		_ = tcp.SetWriteBuffer(n)
	}
}
