package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/unsay/unsay/test/harness"
)

const fanURI = "care://ray/weight_bearing"

// session is one raw 2025-11-25 MCP session: initialize, initialized,
// resources/subscribe, then a GET event stream read line by line. Raw HTTP
// keeps the client's own memory small and out of the server's figure.
type session struct {
	id  string
	mu  sync.Mutex
	got []time.Time // when each resources/updated for fanURI arrived
	cnt chan struct{}
}

type mcpClient struct {
	base, tok string
	post      *http.Client
	get       *http.Client
}

func (c *mcpClient) rpc(ctx context.Context, sid string, body string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+"/mcp", strings.NewReader(body))
	if err != nil {
		return "", err
	}
	req.Header.Set("Authorization", "Bearer "+c.tok)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if sid != "" {
		req.Header.Set("Mcp-Session-Id", sid)
		req.Header.Set("MCP-Protocol-Version", "2025-11-25")
	}
	resp, err := c.post.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 300 {
		return "", fmt.Errorf("%s: %s", resp.Status, b)
	}
	if sid == "" {
		sid = resp.Header.Get("Mcp-Session-Id")
		if sid == "" {
			return "", errors.New("initialize answered no Mcp-Session-Id")
		}
	}
	return sid, nil
}

func (c *mcpClient) open(ctx context.Context) (*session, error) {
	sid, err := c.rpc(ctx, "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"unsay-fanout","version":"1"}}}`)
	if err != nil {
		return nil, fmt.Errorf("initialize (token %.60s…): %w", c.tok[strings.IndexByte(c.tok, 46)+1:], err)
	}
	if _, err := c.rpc(ctx, sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); err != nil {
		return nil, fmt.Errorf("initialized: %w", err)
	}
	if _, err := c.rpc(ctx, sid, `{"jsonrpc":"2.0","id":2,"method":"resources/subscribe","params":{"uri":"`+fanURI+`"}}`); err != nil {
		return nil, fmt.Errorf("subscribe: %w", err)
	}
	s := &session{id: sid, cnt: make(chan struct{}, 1<<16)}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+"/mcp", nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.tok)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", sid)
	req.Header.Set("MCP-Protocol-Version", "2025-11-25")
	resp, err := c.get.Do(req)
	if err != nil {
		return nil, fmt.Errorf("GET stream: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return nil, fmt.Errorf("GET stream: %s", resp.Status)
	}
	go func() {
		defer resp.Body.Close()
		rd := bufio.NewReaderSize(resp.Body, 512)
		for {
			line, err := rd.ReadSlice('\n')
			if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
				return
			}
			if bytes.HasPrefix(line, []byte("data:")) && bytes.Contains(line, []byte("notifications/resources/updated")) &&
				bytes.Contains(line, []byte(fanURI)) {
				now := time.Now()
				s.mu.Lock()
				s.got = append(s.got, now)
				s.mu.Unlock()
				s.cnt <- struct{}{}
			}
		}
	}()
	return s, nil
}

// memoryParts reads the server's heap in use (spans holding live objects)
// and stacks in use after a GC (/debug/pprof/heap?gc=1&debug=1 on the admin
// listener, --admin-pprof), and the live objects' bytes (HeapAlloc: steadier
// than HeapInuse, which also counts the free slots of partly used spans).
func memoryParts(ctx context.Context, admin string) (heap, stack, objects uint64, err error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, admin+"/debug/pprof/heap?gc=1&debug=1", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, 0, 0, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	get := func(re string) uint64 {
		m := regexp.MustCompile(re).FindSubmatch(b)
		if m == nil {
			return 0
		}
		n, _ := strconv.ParseUint(string(m[1]), 10, 64)
		return n
	}
	heap, stack, objects = get(`# HeapInuse = (\d+)`), get(`# Stack = (\d+) /`), get(`# HeapAlloc = (\d+)`)
	if heap == 0 {
		return 0, 0, 0, errors.New("no HeapInuse in the heap profile (is --admin-pprof on?)")
	}
	return heap, stack, objects, nil
}

func signedWrite(ctx context.Context, base, value string) error {
	body, _ := json.Marshal(map[string]string{"patient": "ray", "domain": "weight_bearing", "audience": "user",
		"value": value, "authorId": "okafor", "authorLabel": "Sarah Okafor, physio"})
	ts := strconv.FormatInt(time.Now().Unix(), 10)
	m := hmac.New(sha256.New, []byte(harness.WriteSecret))
	m.Write([]byte(ts + "."))
	m.Write(body)
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/write", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Unsay-Timestamp", ts)
	req.Header.Set("X-Unsay-Signature", "v1="+hex.EncodeToString(m.Sum(nil)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		b, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("/write answered %s: %s", resp.Status, b)
	}
	return nil
}

// fanOut opens o.fanout sessions subscribed to care://ray/weight_bearing,
// measures the server's memory per idle session, then writes
// o.fanRevs revisions one after another and records, for each session and
// revision, the time from the write being sent to its resources/updated
// arriving on that session's stream.
func fanOut(ctx context.Context, o options, fig *Figures) error {
	s, stop, err := startUnsayWith(ctx, o, certSet{}, "--admin-pprof")
	if err != nil {
		return err
	}
	defer stop()
	// A principal may hold 32 sessions, and an initialize in flight counts
	// twice: one token per 16 sessions.
	post := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16, MaxConnsPerHost: 16}}
	get := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: -1, DisableCompression: true}}
	var clients []*mcpClient
	for i := 0; i < (o.fanout+15)/16; i++ {
		tok, err := s.Token(ctx, "ray", []string{"care.read.user"}, "--sub", fmt.Sprintf("fanout-%d", i))
		if err != nil {
			return err
		}
		clients = append(clients, &mcpClient{base: s.URL, tok: tok, post: post, get: get})
	}
	heap0, stack0, obj0, err := memoryParts(ctx, s.AdminURL)
	if err != nil {
		return err
	}
	profDir := os.Getenv("UNSAY_BENCH_PROFILE_DIR")
	if profDir != "" { // the heap before the sessions: pprof -base it
		saveProfile(ctx, s.AdminURL+"/debug/pprof/heap", filepath.Join(profDir, "fanout-heap0.prof"))
	}
	sessions := make([]*session, o.fanout)
	var wg sync.WaitGroup
	errs := make(chan error, o.fanout)
	sem := make(chan struct{}, 16)
	for i := range sessions {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			ss, err := clients[i/16].open(ctx)
			if err != nil {
				errs <- err
				return
			}
			sessions[i] = ss
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return fmt.Errorf("opening sessions: %w", err)
	}
	time.Sleep(500 * time.Millisecond) // the GET streams are registered
	heap1, stack1, obj1, err := memoryParts(ctx, s.AdminURL)
	if err != nil {
		return err
	}
	perKiB := func(a, b uint64) float64 { return float64(int64(b)-int64(a)) / float64(o.fanout) / 1024 }
	fig.IdleKiB = perKiB(heap0+stack0, heap1+stack1)
	fmt.Printf("    per idle session: heap %.1f KiB + goroutine stacks %.1f KiB (live objects %.1f KiB of the heap)\n",
		perKiB(heap0, heap1), perKiB(stack0, stack1), perKiB(obj0, obj1))
	if dir := profDir; dir != "" { // heap and goroutines of the idle sessions
		for _, p := range []struct{ path, file string }{
			{"/debug/pprof/heap", "fanout-heap.prof"},
			{"/debug/pprof/goroutine", "fanout-goroutine.prof"},
			{"/debug/pprof/goroutine?debug=2", "fanout-goroutine.txt"},
			{"/metrics", "fanout-metrics.txt"},
		} {
			saveProfile(ctx, s.AdminURL+p.path, filepath.Join(dir, p.file))
		}
	}
	// Prime: one revision every session must see (the streams are open).
	var lat []time.Duration
	var cpu []byte
	profDone := make(chan struct{})
	if dir := os.Getenv("UNSAY_BENCH_PROFILE_DIR"); dir != "" { // CPU of the fan-out
		go func() {
			defer close(profDone)
			if resp, err := http.Get(s.AdminURL + "/debug/pprof/profile?seconds=5"); err == nil {
				cpu, _ = io.ReadAll(resp.Body)
				resp.Body.Close()
				_ = os.WriteFile(filepath.Join(dir, "fanout-cpu.prof"), cpu, 0o644)
			}
		}()
	} else {
		close(profDone)
	}
	defer func() { <-profDone }()
	var cpu0 float64
	for r := -1; r < o.fanRevs; r++ {
		if r == 0 {
			cpu0, _ = cpuSeconds(s.PID())
		}
		t0 := time.Now()
		if err := signedWrite(ctx, s.URL, fmt.Sprintf("Fan-out revision %d at %s: walk as tolerated.", r, t0.Format(time.RFC3339Nano))); err != nil {
			return err
		}
		deadline := time.After(30 * time.Second)
		for i, ss := range sessions {
			select {
			case <-ss.cnt:
			case <-deadline:
				return fmt.Errorf("revision %d: session %d of %d had no resources/updated within 30 s", r, i, len(sessions))
			}
			if r < 0 {
				continue
			}
			ss.mu.Lock()
			lat = append(lat, ss.got[len(ss.got)-1].Sub(t0))
			ss.mu.Unlock()
		}
	}
	// The server's CPU time over the measured revisions: steadier than the
	// latencies on a shared machine, and what a fan-out costs per session.
	cpu1, _ := cpuSeconds(s.PID())
	cpuMs := (cpu1 - cpu0) * 1000 / float64(o.fanRevs)
	slices.Sort(lat)
	at := func(p float64) float64 {
		return float64(lat[min(len(lat)-1, int(math.Floor(p*float64(len(lat)))))]) / 1e6
	}
	fig.FanP50, fig.FanP99, fig.FanMax = at(.5), at(.99), float64(lat[len(lat)-1])/1e6
	fmt.Printf("    fan-out: server CPU %.1f ms per revision (%.1f µs per session; /proc, 10 ms ticks)\n", cpuMs, cpuMs*1000/float64(o.fanout))
	fmt.Printf("    fan-out: %d sessions × %d revisions: write → every session's stream has resources/updated p50 %.3f ms p99 %.3f ms max %.3f ms; server heap+stack per idle session %.1f KiB\n",
		o.fanout, o.fanRevs, fig.FanP50, fig.FanP99, fig.FanMax, fig.IdleKiB)
	return nil
}
