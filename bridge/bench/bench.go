// Package bench measures the main job's latency, the way the peer
// benchmark (../shared/peers/mcp-live) does and one step further:
//
//	write→mcp-client          signed POST /write → a subscribed MCP client
//	                          (care.read.user) got notifications/resources/updated
//	                          and its resources/read returned the new value
//	write→speech-retraction   the same write → the speech principal holds the
//	                          rendered retraction for the patient (RenderRetraction
//	                          from the version he heard)
//
// Percentiles are sorted[min(n-1, floor(p·n))], in milliseconds. A run
// outside the 3,400 ms speech window (about 12 words at 150 wpm) fails.
package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/unsay/unsay/bridge/httpapi"
	"github.com/unsay/unsay/bridge/speech"
	"github.com/unsay/unsay/models"
)

// SpeechWindow is the longest a run may take: a 12-word sentence at 150
// words a minute. Runs longer than this fail the benchmark.
const SpeechWindow = 3400 * time.Millisecond

// Config is one benchmark run against a server at BaseURL.
type Config struct {
	BaseURL     string // e.g. http://127.0.0.1:8080
	Patient     string // fixture patient; default "bench"
	Domain      string // default "weight_bearing"
	WriteSecret []byte // signs /write
	ReaderToken string // care.read.user bearer for the MCP client
	// Speech is the speech principal to watch; it must follow Patient.
	Speech *speech.Principal
	N      int // measured runs (default 200)
	Warmup int // unmeasured runs first (default 10)
	PadTo  int // value length in bytes (default 80, like the peer)
	Clock  func() time.Time
}

// Series is one latency series in milliseconds.
type Series struct {
	Name string  `json:"name"`
	N    int     `json:"n"`
	P50  float64 `json:"p50_ms"`
	P95  float64 `json:"p95_ms"`
	P99  float64 `json:"p99_ms"`
	Max  float64 `json:"max_ms"`
	// OutsideWindow counts runs longer than SpeechWindow.
	OutsideWindow int `json:"outside_window"`
}

// Result is what Run measured.
type Result struct {
	MCPClient        Series `json:"write_to_mcp_client"`
	SpeechRetraction Series `json:"write_to_speech_retraction"`
	Fsync            bool   `json:"fsync"`
}

// Line formats a series as one line of figures.
func (s Series) Line() string {
	return fmt.Sprintf("%-24s n=%d p50=%.3f ms p95=%.3f ms p99=%.3f ms max=%.3f ms", s.Name, s.N, s.P50, s.P95, s.P99, s.Max)
}

// Summarize sorts samples and takes the percentiles the peer uses.
func Summarize(name string, samples []time.Duration) Series {
	s := slices.Clone(samples)
	slices.Sort(s)
	n := len(s)
	at := func(p float64) float64 {
		if n == 0 {
			return 0
		}
		i := min(n-1, int(math.Floor(p*float64(n))))
		return float64(s[i]) / float64(time.Millisecond)
	}
	out := Series{Name: name, N: n, P50: at(0.50), P95: at(0.95), P99: at(0.99), Max: at(1)}
	for _, d := range s {
		if d > SpeechWindow {
			out.OutsideWindow++
		}
	}
	return out
}

// Run performs Warmup+N sequential revisions and returns the figures. It
// returns an error if the server refuses a write, a notification or the
// speech announcement does not arrive within 10 s, or ctx ends.
func Run(ctx context.Context, cfg Config) (Result, error) {
	if cfg.Patient == "" {
		cfg.Patient = "bench"
	}
	if cfg.Domain == "" {
		cfg.Domain = "weight_bearing"
	}
	if cfg.N <= 0 {
		cfg.N = 200
	}
	if cfg.Warmup < 0 {
		cfg.Warmup = 0
	}
	if cfg.PadTo <= 0 {
		cfg.PadTo = 80
	}
	uri := models.NewURI(models.AudienceUser, cfg.Patient, cfg.Domain)

	// The MCP client, as a host would connect.
	updates := make(chan string, 64)
	client := mcp.NewClient(&mcp.Implementation{Name: "unsay-bench", Version: "1"}, &mcp.ClientOptions{
		ResourceUpdatedHandler: func(_ context.Context, r *mcp.ResourceUpdatedNotificationRequest) {
			select {
			case updates <- r.Params.URI:
			default:
			}
		},
	})
	hc := &http.Client{Transport: bearer{tok: cfg.ReaderToken, next: http.DefaultTransport}}
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: strings.TrimRight(cfg.BaseURL, "/") + "/mcp", HTTPClient: hc},
		&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		return Result{}, fmt.Errorf("bench: connect: %w", err)
	}
	defer cs.Close()
	if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: uri.String()}); err != nil {
		return Result{}, fmt.Errorf("bench: subscribe: %w", err)
	}

	// Ray heard the current version: every revision is then a retraction.
	if cfg.Speech != nil {
		if err := waitFacts(ctx, cfg.Speech, cfg.Patient); err != nil {
			return Result{}, err
		}
		if err := hearCurrent(ctx, cfg.Speech, cfg.Patient); err != nil {
			return Result{}, err
		}
	}
	// The client opens its GET stream asynchronously: prime it with one write.
	if err := primeStream(ctx, cfg, cs, uri, updates); err != nil {
		return Result{}, err
	}

	var mcpLat, speechLat []time.Duration
	for i := 0; i < cfg.Warmup+cfg.N; i++ {
		value := valueFor(i, cfg.PadTo)
		dm, ds, err := once(ctx, cfg, cs, uri, updates, value)
		if err != nil {
			return Result{}, fmt.Errorf("bench: run %d: %w", i, err)
		}
		if i >= cfg.Warmup {
			mcpLat = append(mcpLat, dm)
			if cfg.Speech != nil {
				speechLat = append(speechLat, ds)
			}
		}
	}
	return Result{
		MCPClient:        Summarize("write→mcp-client", mcpLat),
		SpeechRetraction: Summarize("write→speech-retraction", speechLat),
		Fsync:            true,
	}, nil
}

func valueFor(i, pad int) string {
	v := "Bench revision " + strconv.Itoa(i) + " at " + time.Now().UTC().Format(time.RFC3339Nano) + ": walk as tolerated"
	for len(v) < pad {
		v += "."
	}
	return v
}

// once writes value and measures both end points from the same t0.
func once(ctx context.Context, cfg Config, cs *mcp.ClientSession, uri models.URI, updates chan string, value string) (mcpD, speechD time.Duration, err error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	// drain stale notifications
	for len(updates) > 0 {
		<-updates
	}
	t0 := time.Now()
	version, err := write(ctx, cfg, value)
	if err != nil {
		return 0, 0, err
	}
	var wg sync.WaitGroup
	var speechErr error
	if cfg.Speech != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := cfg.Speech.WaitPending(ctx, cfg.Patient, uri, version); err != nil {
				speechErr = fmt.Errorf("speech principal: %w", err)
				return
			}
			text, err := rendered(ctx, cfg.Speech, cfg.Patient, uri, version)
			if err != nil {
				speechErr = err
				return
			}
			if !strings.HasPrefix(text, "Stop") {
				speechErr = fmt.Errorf("speech principal holds %q, not a retraction", text)
				return
			}
			speechD = time.Since(t0)
			speechErr = cfg.Speech.MarkHeard(ctx, cfg.Patient, uri, version, models.Hearing{})
		}()
	}
	for {
		select {
		case <-ctx.Done():
			return 0, 0, fmt.Errorf("no notification: %w", ctx.Err())
		case u := <-updates:
			if u != uri.String() {
				continue
			}
		}
		res, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri.String()})
		if err != nil {
			return 0, 0, fmt.Errorf("read: %w", err)
		}
		if len(res.Contents) > 0 && strings.Contains(res.Contents[0].Text, value) {
			mcpD = time.Since(t0)
			break
		}
	}
	wg.Wait()
	return mcpD, speechD, speechErr
}

// rendered returns the announcement for uri reaching version, rendered now.
func rendered(ctx context.Context, p *speech.Principal, patient string, uri models.URI, version int) (string, error) {
	as, err := p.Pending(ctx, patient)
	if err != nil {
		return "", err
	}
	for _, a := range as {
		if a.URI() == uri && a.Current.N >= version {
			return a.Render(time.Now())
		}
	}
	return "", errors.New("announcement not pending")
}

// write signs and posts one revision and returns its version.
func write(ctx context.Context, cfg Config, value string) (int, error) {
	body, err := json.Marshal(httpapi.WriteRequest{Patient: cfg.Patient, Domain: cfg.Domain, Audience: models.AudienceUser,
		Value: value, AuthorID: "okafor", AuthorLabel: "Sarah Okafor, physio"})
	if err != nil {
		return 0, err
	}
	ts := time.Now().Unix()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(cfg.BaseURL, "/")+"/write", bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(httpapi.HeaderTimestamp, strconv.FormatInt(ts, 10))
	req.Header.Set(httpapi.HeaderSignature, httpapi.SignWrite(cfg.WriteSecret, ts, body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var out struct {
		Version int `json:"version"`
	}
	if resp.StatusCode != http.StatusCreated {
		return 0, fmt.Errorf("write answered %s", resp.Status)
	}
	if err := jsonDecode(resp, &out); err != nil {
		return 0, err
	}
	return out.Version, nil
}

func primeStream(ctx context.Context, cfg Config, cs *mcp.ClientSession, uri models.URI, updates chan string) error {
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if _, _, err := once(ctx, cfg, cs, uri, updates, valueFor(-1, cfg.PadTo)); err == nil {
			return nil
		} else if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	return errors.New("bench: the MCP client never received a notification")
}

func waitFacts(ctx context.Context, p *speech.Principal, patient string) error {
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if f, err := p.Facts(ctx, patient); err == nil && len(f) > 0 {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("bench: the speech principal does not follow %s", patient)
}

func hearCurrent(ctx context.Context, p *speech.Principal, patient string) error {
	facts, err := p.Facts(ctx, patient)
	if err != nil {
		return err
	}
	for _, v := range facts {
		if err := p.MarkHeard(ctx, patient, v.FactURI(), v.N, models.Hearing{}); err != nil {
			return err
		}
	}
	return nil
}

type bearer struct {
	tok  string
	next http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.tok)
	return b.next.RoundTrip(r)
}
