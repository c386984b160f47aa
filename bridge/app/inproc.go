package app

import (
	"context"
	"net"
	"sync"
)

// inProcListener is the speech principal's listener when it reaches this
// server's own /mcp: a net.Listener whose connections are in-process pipes
// (net.Pipe) instead of TCP over loopback. The public http.Server serves
// it, as it served the loopback listener it replaces, and the principal's
// HTTP client dials it (DialContext) — so every request still goes through
// the same handler and middleware (Host check, bearer token verified per
// request, the MCP protocol, metrics), as the same HTTP/1.1 exchange with
// the server's timeouts; a stream's per-write deadlines hold (net.Pipe
// implements SetWriteDeadline, so a listen stream nobody reads is cut as
// on TCP, P-25). Only the kernel's loopback — two sockets, a syscall per
// read and write — is gone. Its connections report loopback addresses,
// as the TCP connections did. It is safe for concurrent use.
type inProcListener struct {
	conns     chan net.Conn
	done      chan struct{}
	closeOnce sync.Once
}

func newInProcListener() *inProcListener {
	return &inProcListener{conns: make(chan net.Conn), done: make(chan struct{})}
}

// inProcAddr is the address both ends of an in-process connection report:
// loopback, port 0 (no port is open).
var inProcAddr = &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)}

// Accept waits for the next connection DialContext makes.
func (l *inProcListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

// Close stops Accept and DialContext; connections already made stay open
// until the server or the client closes them.
func (l *inProcListener) Close() error {
	l.closeOnce.Do(func() { close(l.done) })
	return nil
}

// Addr is loopback, port 0.
func (l *inProcListener) Addr() net.Addr { return inProcAddr }

// DialContext makes a connection to the server (an http.Transport's
// DialContext; network and address are ignored): it returns once Accept
// has taken the other end, or fails with net.ErrClosed after Close, or
// with ctx's error.
func (l *inProcListener) DialContext(ctx context.Context, _, _ string) (net.Conn, error) {
	client, server := net.Pipe()
	select {
	case l.conns <- inProcConn{server}:
		return inProcConn{client}, nil
	case <-l.done:
	case <-ctx.Done():
		client.Close()
		server.Close()
		return nil, ctx.Err()
	}
	client.Close()
	server.Close()
	return nil, net.ErrClosed
}

// inProcConn is one end of a pipe, reporting loopback addresses.
type inProcConn struct{ net.Conn }

func (inProcConn) LocalAddr() net.Addr  { return inProcAddr }
func (inProcConn) RemoteAddr() net.Addr { return inProcAddr }
