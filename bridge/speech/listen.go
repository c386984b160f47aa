package speech

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// listenUpstream is an upstream at 2026-07-28 (MCP 2026-07-28,
// Subscriptions): lists and reads go over the SDK's client session, each
// a request of its own with its own bearer token and no session; revisions
// arrive on one subscriptions/listen stream naming every fact watched, with
// resourcesListChanged.
//
// The listen request is the principal's own HTTP POST rather than the
// SDK's ClientSession.Subscribe, which opens one stream per URI, does not
// say which URIs the server acknowledged (go-sdk #1169) and never returns
// when the stream breaks without its result: the principal must know what
// it is told about (a URI the server refused is not watched) and notice a
// stream that ended, to re-listen and re-read. It reads the SSE stream
// itself: the acknowledgement first (notifications/subscriptions/
// acknowledged, its subscriptionId the request's id), then
// resources/updated and resources/list_changed tagged with that id.
//
// The facts are spread over as many streams as listenURIs allows each (the
// server refuses a larger listen: finding G10 — one patient's 257th topic,
// or 50 followed patients' notes together, silenced every patient, for
// good). Watching more URIs opens new streams for the whole set and closes
// the old ones once every new one is acknowledged, so no revision falls
// between them (one may come twice; a repeated event only re-reads). The
// connection is over (Done) when any of its streams ends without having
// been replaced — the server's result (token expired, shutdown), an error,
// EOF, or silence (no event and no keep-alive comment) for listenIdle.
type listenUpstream struct {
	cs     *mcp.ClientSession
	pages  pager
	cfg    dialConfig
	id     string
	nextID atomic.Int64

	mu      sync.Mutex // serializes Watch; guards the fields below
	uris    []string   // the URIs the current streams were acknowledged for, sorted
	streams []*listenStream

	done      chan struct{}
	doneOnce  sync.Once
	err       error // set before done closes
	closeOnce sync.Once
}

// listenURIs is how many URIs one subscriptions/listen names at most: the
// Unsay server's cap (bridge.MaxListenURIs; the speech packages do not
// import bridge, P-18). MCP 2026-07-28 sets none.
const listenURIs = 256

// listenChunks splits want (sorted) into runs of at most n URIs, at least
// one (empty when want is: that stream still hears resources/list_changed).
func listenChunks(want []string, n int) [][]string {
	out := [][]string{want[:min(len(want), n)]}
	for i := n; i < len(want); i += n {
		out = append(out, want[i:min(len(want), i+n)])
	}
	return out
}

// connSeq numbers listen connections in logs ("listen-N").
var connSeq atomic.Int64

func newListenUpstream(cs *mcp.ClientSession, cfg dialConfig) *listenUpstream {
	return &listenUpstream{cs: cs, cfg: cfg, id: "listen-" + strconv.FormatInt(connSeq.Add(1), 10), done: make(chan struct{})}
}

func (u *listenUpstream) ID() string            { return u.id }
func (u *listenUpstream) Done() <-chan struct{} { return u.done }

func (u *listenUpstream) Err() error {
	select {
	case <-u.done:
		return u.err
	default:
		return nil
	}
}

// end marks the connection over with err (the first one wins).
func (u *listenUpstream) end(err error) {
	u.doneOnce.Do(func() {
		u.err = err
		close(u.done)
	})
}

func (u *listenUpstream) Close() error {
	u.closeOnce.Do(func() {
		u.end(errors.New("closed"))
		u.mu.Lock()
		sts := u.streams
		u.mu.Unlock()
		for _, st := range sts {
			st.close()
		}
		_ = u.cs.Close()
	})
	return nil
}

func (u *listenUpstream) List(ctx context.Context, patient string) ([]*mcp.Resource, error) {
	return u.pages.list(ctx, u.cs, patient)
}

func (u *listenUpstream) Read(ctx context.Context, uri string) (*mcp.ReadResourceResult, error) {
	return readOne(ctx, u.cs, uri)
}

// Watch opens listen streams for every URI watched so far plus uris, at
// most listenURIs each, and waits for every acknowledgement; the URIs of
// uris they leave out are refused. The streams they replace are closed
// only then; when one cannot be opened, those opened are closed and the
// old ones kept.
func (u *listenUpstream) Watch(ctx context.Context, uris []string) ([]string, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	select {
	case <-u.done:
		return nil, fmt.Errorf("speech: listen: %w", u.err)
	default:
	}
	want := slices.Clone(u.uris)
	for _, s := range uris {
		if !slices.Contains(want, s) {
			want = append(want, s)
		}
	}
	slices.Sort(want)
	if len(u.streams) > 0 && slices.Equal(want, u.uris) {
		return nil, nil // nothing new; a refused URI asked again stays refused
	}
	var sts []*listenStream
	var acked []string
	for _, chunk := range listenChunks(want, listenURIs) {
		st, ack, err := u.open(ctx, chunk)
		if err != nil {
			for _, st := range sts {
				st.close()
			}
			return nil, err
		}
		sts, acked = append(sts, st), append(acked, ack...)
	}
	slices.Sort(acked)
	var refused []string
	for _, s := range uris {
		if !slices.Contains(acked, s) {
			refused = append(refused, s)
		}
	}
	old := u.streams
	u.streams, u.uris = sts, acked
	for _, st := range old {
		st.close()
	}
	return refused, nil
}

// listenStream is one open subscriptions/listen response.
type listenStream struct {
	cancel   context.CancelFunc
	replaced atomic.Bool // closed on purpose: its end is not the connection's
}

func (s *listenStream) close() {
	s.replaced.Store(true)
	s.cancel()
}

// errListenEnded wraps every end of a listen stream the principal did not ask for.
var errListenEnded = errors.New("speech: the listen stream ended")

// open POSTs subscriptions/listen for uris and resourcesListChanged, and
// reads the stream on its own goroutine once acknowledged. It returns the
// acknowledged URIs, or an error if the server answered anything but an
// acknowledgement first (or nothing within ctx).
func (u *listenUpstream) open(ctx context.Context, uris []string) (*listenStream, []string, error) {
	id := fmt.Sprintf("speech-listen-%d", u.nextID.Add(1))
	idJSON, _ := json.Marshal(id)
	body, err := json.Marshal(map[string]any{
		"jsonrpc": "2.0",
		"id":      id,
		"method":  "subscriptions/listen",
		"params": map[string]any{
			"_meta": map[string]any{
				mcp.MetaKeyProtocolVersion:    ModernProtocolVersion,
				mcp.MetaKeyClientInfo:         implementation,
				mcp.MetaKeyClientCapabilities: map[string]any{},
			},
			"notifications": mcp.NotificationSubscriptions{ResourceSubscriptions: uris, ResourcesListChanged: true},
		},
	})
	if err != nil {
		return nil, nil, fmt.Errorf("speech: listen: %w", err)
	}
	sctx, cancel := context.WithCancel(context.Background()) // the stream outlives the Watch call
	req, err := http.NewRequestWithContext(sctx, http.MethodPost, u.cfg.url, bytes.NewReader(body))
	if err != nil {
		cancel()
		return nil, nil, fmt.Errorf("speech: listen: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", ModernProtocolVersion)
	req.Header.Set("Mcp-Method", "subscriptions/listen")
	st := &listenStream{cancel: cancel}
	type opened struct {
		acked []string
		err   error
	}
	ready := make(chan opened, 1)
	go func() {
		resp, err := u.cfg.http.Do(req)
		if err != nil {
			ready <- opened{err: fmt.Errorf("speech: listen: %w", err)}
			return
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			ready <- opened{err: fmt.Errorf("speech: listen: HTTP %d: %s", resp.StatusCode, bytes.TrimSpace(msg))}
			return
		}
		ackSent := false
		err = u.read(resp.Body, string(idJSON), st, func(acked []string) {
			ackSent = true
			ready <- opened{acked: acked}
		})
		switch {
		case !ackSent:
			ready <- opened{err: err} // ended before its acknowledgement
		case !st.replaced.Load():
			u.end(err)
		}
	}()
	select {
	case o := <-ready:
		if o.err != nil {
			cancel()
			return nil, nil, o.err
		}
		return st, o.acked, nil
	case <-ctx.Done():
		cancel()
		return nil, nil, fmt.Errorf("speech: listen not acknowledged: %w", ctx.Err())
	}
}

// read reads one listen stream until it ends, calling acked once with the
// acknowledged URIs and handing every later revision to the principal. It
// returns why the stream ended (wrapping errListenEnded).
func (u *listenUpstream) read(body io.Reader, id string, st *listenStream, acked func([]string)) error {
	lines := make(chan []byte)
	readErr := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(body)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			lines <- slices.Clone(sc.Bytes())
		}
		readErr <- sc.Err()
		close(lines)
	}()
	var idle <-chan time.Time
	var timer *time.Timer
	if u.cfg.listenIdle > 0 {
		timer = time.NewTimer(u.cfg.listenIdle)
		defer timer.Stop()
		idle = timer.C
	}
	var data []byte
	ackd := false
	for {
		var line []byte
		var open bool
		select {
		case line, open = <-lines:
		case <-idle:
			st.cancel()
			for range lines { // let the scanner finish
			}
			return fmt.Errorf("%w: nothing on it for %v", errListenEnded, u.cfg.listenIdle)
		}
		if !open {
			if err := <-readErr; err != nil && !st.replaced.Load() {
				return fmt.Errorf("%w: %v", errListenEnded, err)
			}
			return fmt.Errorf("%w: closed without a result", errListenEnded)
		}
		if timer != nil {
			timer.Reset(u.cfg.listenIdle)
		}
		switch {
		case len(line) == 0:
			if len(data) == 0 {
				continue
			}
			frame := data
			data = nil
			end, err := u.frame(frame, id, &ackd, acked)
			if end || err != nil {
				st.cancel()
				for range lines {
				}
				return err
			}
		case bytes.HasPrefix(line, []byte("data:")):
			data = append(data, bytes.TrimPrefix(bytes.TrimPrefix(line, []byte("data:")), []byte(" "))...)
		}
		// ":" comments (the server's keep-alive), "event:", "id:": liveness only.
	}
}

// frame handles one SSE data payload of the listen stream with JSON id id.
// It reports end when the stream is over (its result or error), with the
// reason.
func (u *listenUpstream) frame(data []byte, id string, ackd *bool, acked func([]string)) (end bool, err error) {
	msg, err := jsonrpc.DecodeMessage(data)
	if err != nil {
		return true, fmt.Errorf("%w: an undecodable frame: %v", errListenEnded, err)
	}
	switch m := msg.(type) {
	case *jsonrpc.Response:
		if m.Error != nil {
			return true, fmt.Errorf("%w: %w", errListenEnded, m.Error)
		}
		var res struct {
			Meta map[string]any `json:"_meta"`
		}
		_ = json.Unmarshal(m.Result, &res)
		return true, fmt.Errorf("%w by the server (%v)", errListenEnded, res.Meta["unsay/endReason"])
	case *jsonrpc.Request:
		var p struct {
			Meta          map[string]json.RawMessage    `json:"_meta"`
			URI           string                        `json:"uri"`
			Notifications mcp.NotificationSubscriptions `json:"notifications"`
		}
		if err := json.Unmarshal(m.Params, &p); err != nil {
			return false, nil
		}
		if string(bytes.TrimSpace(p.Meta[mcp.MetaKeySubscriptionID])) != id {
			return false, nil // not this stream's (MCP 2026-07-28: tagged per subscription)
		}
		switch m.Method {
		case "notifications/subscriptions/acknowledged":
			if !*ackd {
				*ackd = true
				acked(p.Notifications.ResourceSubscriptions)
			}
		case "notifications/resources/updated":
			if *ackd && p.URI != "" {
				u.send(event{uri: p.URI})
			}
		case "notifications/resources/list_changed":
			if *ackd {
				u.send(event{listChanged: true})
			}
		}
	}
	return false, nil
}

func (u *listenUpstream) send(e event) {
	select {
	case u.cfg.events <- e:
	case <-u.cfg.stop:
	case <-u.done:
	}
}
