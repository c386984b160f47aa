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
	"syscall"
	"testing"
	"time"
)

// bigBody is larger than every socket buffer on the loopback path (the
// server's send buffer autotunes to at most net.ipv4.tcp_wmem's 4 MiB, the
// client's receive buffer is pinned small), so writing it blocks until the
// client reads.
const bigBody = 32 << 20

// slowReaderGet sends "GET path" on a connection whose receive buffer is
// 4 KiB, reads nothing for pause, then reads as fast as it can for at most
// 20 s. It returns the body bytes read and whether the read ended by the
// server closing the connection (EOF or reset) rather than by the client's
// own 20 s limit.
func slowReaderGet(t *testing.T, addr, path string, pause time.Duration) (int, bool) {
	t.Helper()
	d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		if err := c.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) }); err != nil {
			return err
		}
		return serr
	}}
	conn, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, "GET "+path+" HTTP/1.1\r\nHost: "+addr+"\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(pause) // the server's write blocks meanwhile: the deadline must pass while it does
	_ = conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	br := bufio.NewReaderSize(conn, 1<<20)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return 0, !isTimeout(err)
	}
	n, err := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err == nil && n == bigBody {
		return int(n), false // all of it: the server waited for the reader
	}
	return int(n), err == nil || !isTimeout(err)
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout() || errors.Is(err, os.ErrDeadlineExceeded)
}

// An ordinary response has a write deadline: a client that stops reading
// is cut off at WriteTimeout instead of holding the handler and the
// connection. Twin: the GET /mcp event stream is exempt and is written in
// full to the same slow reader.
func TestPublicServer_AnOrdinaryResponseHasAWriteDeadlineAndTheMCPStreamIsExempt(t *testing.T) {
	big := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/octet-stream")
		_, _ = io.Copy(w, io.LimitReader(zeros{}, bigBody))
	})
	hs := newPublicServer(big, HTTPLimits{WriteTimeout: 300 * time.Millisecond}, nil, slog.New(slog.DiscardHandler))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = hs.Serve(ln) }()
	t.Cleanup(func() { _ = hs.Shutdown(context.Background()) })

	n, cut := slowReaderGet(t, ln.Addr().String(), "/echo.html", 2*time.Second)
	if !cut || n >= bigBody {
		t.Errorf("ordinary response to a reader that stalled 2 s: read %d of %d bytes, cut by the server %v; want it cut at the 300 ms write deadline", n, bigBody, cut)
	}
	n, cut = slowReaderGet(t, ln.Addr().String(), "/mcp", 2*time.Second)
	if cut || n != bigBody {
		t.Errorf("GET /mcp stream to the same reader: read %d of %d bytes, cut %v; want all of it (no server-wide deadline)", n, bigBody, cut)
	}
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}
