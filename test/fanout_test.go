//go:build e2e

package e2e_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/unsay/unsay/models"
	"github.com/unsay/unsay/test/harness"
)

// TestFanOut_AStalledReaderDelaysNoSessionNorTheSpeechPrincipal is P-25
// against the real binary: 199 MCP sessions (the official Go
// SDK client, each its own principal) and one whose client opens its GET
// stream on a raw socket with a tiny receive buffer and never reads it —
// 200 sessions subscribed to Ray's walking instruction, besides the
// server's own speech principal. After 100 signed writes without the
// stalled client (the baseline) and 500 with it, every reading session
// has received every resources/updated; the speech principal received the
// last one and its session was never closed; Ray's next Launch retracts
// what he heard in favour of the 600th revision; and the stalled session
// was closed (its client finds it gone). Today's server stopped notifying
// every session, the speech principal included, once the stalled
// connection's send buffer filled. The latencies (write sent → each
// client's handler) are logged for both phases.
func TestFanOut_AStalledReaderDelaysNoSessionNorTheSpeechPrincipal(t *testing.T) {
	const part = "fan-out under a stalled reader"
	const readers, baseline, stalledWrites = 199, 100, 500
	const uri = "care://ray/weight_bearing"
	s, c, _, m := signedSetup(t, part)
	ray := harness.NewDevice("ray-fanout")
	link(t, s, c, m, ray, part)
	walk, err := m.Slot("CarePlanIntent", "topic", "walking")
	if err != nil {
		t.Fatal(err)
	}
	heard := harness.WalkingSentence(send(t, c, ray.Intent("CarePlanIntent", map[string]any{"topic": walk})).Speech())
	if heard == "" {
		t.Fatal("Ray heard no walking instruction before the writes")
	}
	send(t, c, ray.Intent("AMAZON.StopIntent", nil))

	clients := make([]*updatedClock, readers)
	var wg sync.WaitGroup
	errs := make(chan error, readers)
	sem := make(chan struct{}, 8)
	for i := range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			cl, err := connectClock(s, fmt.Sprintf("host-%03d", i), uri)
			if err != nil {
				errs <- err
				return
			}
			clients[i] = cl
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, cl := range clients {
			cl.cs.Close()
		}
	})

	ctx := context.Background()
	hc := &http.Client{Timeout: 30 * time.Second}
	var sent []time.Time
	write := func(n int) {
		t.Helper()
		for range n {
			i := len(sent) + 1
			sent = append(sent, time.Now())
			if err := signedWrite(ctx, hc, s.URL, "weight_bearing", fmt.Sprintf("Weight-bearing as tolerated with a frame, revision %d.", i)); err != nil {
				t.Fatalf("write %d: %v", i, err)
			}
		}
	}
	waitAll := func(n int) {
		t.Helper()
		deadline := time.Now().Add(2 * time.Minute)
		for i, cl := range clients {
			for cl.count() < n {
				if time.Now().After(deadline) {
					t.Fatalf("after 2 min reading session %d had %d of %d updates (a stalled reader held the fan-out up?)", i, cl.count(), n)
				}
				time.Sleep(20 * time.Millisecond)
			}
		}
	}

	write(baseline)
	waitAll(baseline)
	logLatencies(t, "without the stalled client", clients, sent, 0, baseline)
	fanSum, fanCount := fanOutDelay(t, s)

	stalledTok := mintToken(t, s, "stalled-host", "care.read.user")
	stalled := openStalledSession(t, s, stalledTok, uri)

	write(stalledWrites)
	total := baseline + stalledWrites
	waitAll(total)
	logLatencies(t, "with the stalled client", clients, sent, baseline, total)
	if sum, count := fanOutDelay(t, s); count > fanCount && fanCount > 0 {
		t.Logf("server-side fan-out (commit → every session's frame queued), mean: %v without the stalled client, %v with it",
			time.Duration(fanSum/fanCount*float64(time.Second)).Round(time.Microsecond),
			time.Duration((sum-fanSum)/(count-fanCount)*float64(time.Second)).Round(time.Microsecond))
	}
	for i, cl := range clients {
		if n := cl.count(); n != total {
			t.Errorf("reading session %d received %d updates, want %d", i, n, total)
		}
	}

	t.Run("the speech principal received the last update and was never closed", func(t *testing.T) {
		pollUntil(t, 30*time.Second, "the speech principal's last event after the last write", func() bool {
			at, ok := speechLastEvent(s)
			return ok && !at.Before(sent[len(sent)-1])
		})
		at, _ := speechLastEvent(s)
		t.Logf("speech principal: last event %v after the last write was sent", at.Sub(sent[len(sent)-1]).Round(time.Microsecond))
	})
	t.Run("Ray's next Launch retracts the last revision", func(t *testing.T) {
		waitBacklog(t, s.AdminURL)
		speech := send(t, c, ray.Launch()).Speech()
		last := fmt.Sprintf("revision %d.", total)
		if !strings.HasPrefix(speech, "Stop") || !strings.Contains(speech, "I told you: "+models.Quote(heard)) || !strings.Contains(speech, last) {
			t.Errorf("want the retraction of %q in favour of %q first, got %q", heard, last, speech)
		}
		if strings.Contains(speech, fmt.Sprintf("revision %d.", total-1)) {
			t.Errorf("a superseded revision was spoken: %q", speech)
		}
	})
	t.Run("the stalled session was closed, and no other", func(t *testing.T) {
		pollUntil(t, 30*time.Second, "the stalled session closed", func() bool {
			status, _, _ := mcpPost(s.URL, stalledTok, stalled, `{"jsonrpc":"2.0","id":99,"method":"ping"}`)
			return status == http.StatusNotFound
		})
		if n := sessionsClosed(t, s); n != 1 {
			t.Errorf("unsay_mcp_sessions_closed_total = %v, want 1 (the stalled session only)", n)
		}
	})
}

// pollUntil polls cond every 50 ms until it holds, failing after within.
func pollUntil(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", within, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// updatedClock is an SDK client session that records when each
// resources/updated arrives.
type updatedClock struct {
	cs *mcp.ClientSession
	mu sync.Mutex
	at []time.Time
}

func (c *updatedClock) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.at)
}

// connectClock connects the official Go SDK client (2025-11-25) with its
// own principal sub and subscribes it to uri.
func connectClock(s *harness.Server, sub, uri string) (*updatedClock, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tok, err := mintTokenErr(s, sub, "care.read.user")
	if err != nil {
		return nil, err
	}
	cl := &updatedClock{}
	c := mcp.NewClient(&mcp.Implementation{Name: "unsay-fanout-test", Version: "1"}, &mcp.ClientOptions{
		ResourceUpdatedHandler: func(context.Context, *mcp.ResourceUpdatedNotificationRequest) {
			now := time.Now()
			cl.mu.Lock()
			cl.at = append(cl.at, now)
			cl.mu.Unlock()
		},
	})
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: s.URL + "/mcp", HTTPClient: &http.Client{Transport: bearerRT{tok, http.DefaultTransport}}},
		&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		return nil, fmt.Errorf("connect %s: %w", sub, err)
	}
	if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: uri}); err != nil {
		cs.Close()
		return nil, fmt.Errorf("subscribe %s: %w", sub, err)
	}
	cl.cs = cs
	return cl, nil
}

// bearerRT sets Authorization: Bearer token on every request.
type bearerRT struct {
	token string
	next  http.RoundTripper
}

func (b bearerRT) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

// mintToken signs an HS256 token for s's audience with the harness's token
// secret, as an authorization server would: sub, scopes, patient ray, one hour.
func mintToken(t *testing.T, s *harness.Server, sub string, scopes ...string) string {
	t.Helper()
	tok, err := mintTokenErr(s, sub, scopes...)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func mintTokenErr(s *harness.Server, sub string, scopes ...string) (string, error) {
	now := time.Now()
	return jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{
		"sub": sub, "aud": []string{s.PublicURL + "/mcp"}, "scope": strings.Join(scopes, " "),
		"patients": []string{"ray"}, "iat": now.Unix(), "exp": now.Add(time.Hour).Unix(),
	}).SignedString([]byte(harness.TokenSecret))
}

// signedWrite POSTs Ray's revision of domain to base/write, signed with the
// harness's write secret.
func signedWrite(ctx context.Context, hc *http.Client, base, domain, value string) error {
	body, _ := json.Marshal(map[string]any{"patient": "ray", "domain": domain, "audience": "user",
		"value": value, "authorId": "okafor", "authorLabel": "Sarah Okafor, physio"})
	ts := strconv.FormatInt(time.Now().Unix(), 10)
	mac := hmac.New(sha256.New, []byte(harness.WriteSecret))
	mac.Write([]byte(ts + "."))
	mac.Write(body)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/write", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Unsay-Timestamp", ts)
	req.Header.Set("X-Unsay-Signature", "v1="+hex.EncodeToString(mac.Sum(nil)))
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	if resp.StatusCode != http.StatusCreated && resp.StatusCode != http.StatusOK {
		return fmt.Errorf("POST /write: HTTP %d: %s", resp.StatusCode, raw)
	}
	return nil
}

// mcpPost POSTs one JSON-RPC message to /mcp on session sid ("" for none).
func mcpPost(base, tok, sid, body string) (int, http.Header, []byte) {
	req, _ := http.NewRequest(http.MethodPost, base+"/mcp", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if sid != "" {
		req.Header.Set("Mcp-Session-Id", sid)
		req.Header.Set("MCP-Protocol-Version", "2025-11-25")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, []byte(err.Error())
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, b
}

// openStalledSession initializes a session over raw HTTP (logging level
// set, subscribed to uri), then sends its GET stream request on a socket
// whose receive buffer is 1 KiB (SO_RCVBUF, set before connect), reads the
// response head — the stream is open — and never reads again. It returns
// the session id.
func openStalledSession(t *testing.T, s *harness.Server, tok, uri string) string {
	t.Helper()
	status, hdr, body := mcpPost(s.URL, tok, "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"stalled","version":"1"}}}`)
	sid := hdr.Get("Mcp-Session-Id")
	if status != http.StatusOK || sid == "" {
		t.Fatalf("initialize: %d %s", status, body)
	}
	for i, msg := range []string{
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"logging/setLevel","params":{"level":"info"}}`,
		fmt.Sprintf(`{"jsonrpc":"2.0","id":3,"method":"resources/subscribe","params":{"uri":%q}}`, uri),
	} {
		if status, _, body := mcpPost(s.URL, tok, sid, msg); status/100 != 2 || bytes.Contains(body, []byte(`"error"`)) {
			t.Fatalf("message %d: %d %s", i, status, body)
		}
	}
	d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		if err := c.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 1024)
		}); err != nil {
			return err
		}
		return serr
	}}
	conn, err := d.Dial("tcp", s.Addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	fmt.Fprintf(conn, "GET /mcp HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nAccept: text/event-stream\r\nMcp-Session-Id: %s\r\nMCP-Protocol-Version: 2025-11-25\r\n\r\n", s.Addr, tok, sid)
	_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	rd := bufio.NewReaderSize(conn, 16)
	statusLine, err := rd.ReadString('\n')
	if err != nil || !strings.Contains(statusLine, " 200 ") {
		t.Fatalf("stalled GET: %q %v", statusLine, err)
	}
	for {
		line, err := rd.ReadString('\n')
		if err != nil {
			t.Fatalf("stalled GET head: %v", err)
		}
		if line == "\r\n" {
			break
		}
	}
	return sid // from here on the socket is never read
}

// logLatencies logs p50, p99 and max of (arrival at each client − write
// sent) for revisions [from, to).
func logLatencies(t *testing.T, label string, clients []*updatedClock, sent []time.Time, from, to int) {
	t.Helper()
	var lat []time.Duration
	for _, cl := range clients {
		cl.mu.Lock()
		for i := from; i < to && i < len(cl.at); i++ {
			lat = append(lat, cl.at[i].Sub(sent[i]))
		}
		cl.mu.Unlock()
	}
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	q := func(p float64) time.Duration { return lat[int(p*float64(len(lat)-1))].Round(10 * time.Microsecond) }
	t.Logf("fan-out %s: %d writes × %d sessions: write sent → client handler p50 %v, p99 %v, max %v",
		label, to-from, len(clients), q(.50), q(.99), lat[len(lat)-1].Round(10*time.Microsecond))
}

// speechLastEvent is /readyz's speech.lastEventAt.
func speechLastEvent(s *harness.Server) (time.Time, bool) {
	resp, err := http.Get(s.AdminURL + "/readyz")
	if err != nil {
		return time.Time{}, false
	}
	defer resp.Body.Close()
	var body struct {
		Speech *struct {
			LastEventAt time.Time `json:"lastEventAt"`
		} `json:"speech"`
	}
	if json.NewDecoder(resp.Body).Decode(&body) != nil || body.Speech == nil {
		return time.Time{}, false
	}
	return body.Speech.LastEventAt, true
}

var fanOutRE = regexp.MustCompile(`(?m)^unsay_change_fanout_delay_seconds_(sum|count) ([0-9.e+-]+)$`)

// fanOutDelay reads the sum (seconds) and count of the server's
// unsay_change_fanout_delay_seconds histogram.
func fanOutDelay(t *testing.T, s *harness.Server) (sum, count float64) {
	t.Helper()
	resp, err := http.Get(s.AdminURL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, m := range fanOutRE.FindAllStringSubmatch(string(b), -1) {
		v, _ := strconv.ParseFloat(m[2], 64)
		if m[1] == "sum" {
			sum = v
		} else {
			count = v
		}
	}
	return sum, count
}

var closedRE = regexp.MustCompile(`(?m)^unsay_mcp_sessions_closed_total\{[^}]*\} ([0-9.e+]+)$`)

// sessionsClosed sums unsay_mcp_sessions_closed_total over its reasons.
func sessionsClosed(t *testing.T, s *harness.Server) float64 {
	t.Helper()
	resp, err := http.Get(s.AdminURL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	sum := 0.0
	for _, m := range closedRE.FindAllStringSubmatch(string(b), -1) {
		v, _ := strconv.ParseFloat(m[1], 64)
		sum += v
	}
	return sum
}
