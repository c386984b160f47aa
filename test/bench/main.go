// Command bench is the whole-program benchmark driver behind `make bench`
// and `make bench-peers`. It runs the real unsay binary (test/harness) and
// measures it from outside, with clients nobody here wrote where the issue
// asks for them:
//
//	mcp-live     signed POST /write → a subscribed TypeScript-SDK client holds
//	             the new value (test/peers/mcp-live/run.sh with TARGET_URL);
//	             p50/p99 of that, and of write → 201
//	alexa wrk    verified LaunchRequest throughput, closed loop, wrk C=32
//	             (test/peers/alexa-node/run.sh with TARGET_URL), and the
//	             server's CPU per request from /proc
//	alexa open   the same requests open loop at a constant rate (vegeta
//	             v12.13.0 as a library): p50/p99/max and CPU per request
//	fan-out      one revision to N subscribed 2025-11-25 sessions: when each
//	             session's event stream carried resources/updated; and the
//	             server's heap+stack per idle session
//
// With -peers it runs the Node peers (test/peers: the TS MCP SDK and the
// ASK SDK) and the product with the same clients, back to back and
// alternating, -rounds times, and prints medians and ratios; the result is
// saved (-save) so that a later `make bench` prints the peers' figures
// beside its own. The load average is printed with every run: the machine
// is shared, so read the ratios.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/unsay/unsay/test/harness"
)

type options struct {
	bin, peers, save, last string
	rounds, n, c           int
	wrkBodies              int
	d, warmup              time.Duration
	rate                   int
	openD                  time.Duration
	fanout, fanRevs        int
	withPeers, own         bool
	only                   string
}

func main() {
	var o options
	flag.StringVar(&o.bin, "bin", "bin/unsay", "the unsay binary")
	flag.StringVar(&o.peers, "peer-dir", "test/peers", "folder holding mcp-live/ and alexa-node/")
	flag.BoolVar(&o.withPeers, "peers", false, "also run the Node peers, alternating with the product")
	flag.IntVar(&o.rounds, "rounds", 1, "rounds (medians over them)")
	flag.IntVar(&o.n, "n", 200, "mcp-live measured writes")
	flag.IntVar(&o.c, "c", 32, "wrk connections")
	flag.DurationVar(&o.d, "d", 6*time.Second, "wrk measured duration (every request a distinct signed body: at most -wrk-bodies of them)")
	flag.IntVar(&o.wrkBodies, "wrk-bodies", 30000, "distinct signed LaunchRequests wrk sends in its measured run (Unsay refuses a replayed request id)")
	flag.DurationVar(&o.warmup, "warmup", 3*time.Second, "open-loop warm-up, discarded")
	flag.IntVar(&o.rate, "rate", 500, "open-loop requests per second")
	flag.DurationVar(&o.openD, "open-d", 15*time.Second, "open-loop measured duration")
	flag.IntVar(&o.fanout, "fanout", 1000, "subscribed sessions for the fan-out figure (0: skip)")
	flag.IntVar(&o.fanRevs, "fanout-revisions", 20, "revisions fanned out to them")
	flag.StringVar(&o.save, "save", "", "write the figures (JSON) to this file")
	flag.StringVar(&o.last, "last", "", "a file saved by -peers -save: print its peer figures beside ours")
	flag.BoolVar(&o.own, "own", false, "also run unsay bench and the concurrent-publish benchmarks (figures the peers have no counterpart for)")
	flag.StringVar(&o.only, "only", "", "comma-separated subset: mcp,wrk,open,fanout")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// Figures of one side (peer or product) in one round; zero means not measured.
type Figures struct {
	HoldP50, HoldP99, AckP50, AckP99 float64 // ms, mcp-live
	RPS, CPUPerReqMs, WrkP50, WrkP99 float64 // wrk closed loop
	OpenP50, OpenP99, OpenMax        float64 // ms, open loop at Rate
	OpenCPUPerReqMs, OpenOK          float64
	// MCP requests the server answered per Launch (its confirmation
	// rounds), closed and open loop; -1 or 0: not measured.
	WrkMCPPerLaunch, OpenMCPPerLaunch float64
	FanP50, FanP99, FanMax            float64 // ms, all sessions hold the revision
	IdleKiB                           float64
	Load                              []string // load average before each run
	Failed                            []string // runs that failed
}

// Report is what a run saves.
type Report struct {
	At     time.Time
	Cores  int
	Rounds int
	Rate   int
	Peer   []Figures
	Unsay  []Figures
	Floor  []Figures // mcp-live against the zero-work server (floor.go), with -peers
}

func run(ctx context.Context, o options) error {
	bin, err := filepath.Abs(o.bin)
	if err != nil {
		return err
	}
	o.bin = bin
	if o.peers, err = filepath.Abs(o.peers); err != nil {
		return err
	}
	want := func(k string) bool { return o.only == "" || strings.Contains(","+o.only+",", ","+k+",") }
	node := have("node") && have("npm")
	wrk := have("wrk")
	if !node {
		fmt.Println("(no node/npm on PATH: the TS-SDK client, wrk bodies and the Node peers are skipped)")
	}
	if !wrk {
		fmt.Println("(no wrk on PATH — apt-get install -y wrk: the closed-loop Alexa figure is skipped)")
	}
	if o.withPeers && !node {
		return fmt.Errorf("-peers needs node and npm")
	}
	certs, err := alexaCerts(ctx, o, node)
	if err != nil {
		return err
	}
	rep := Report{At: time.Now().UTC(), Cores: nproc(), Rounds: o.rounds, Rate: o.rate}
	fmt.Printf("== %d cores; load average %s; %d round(s)\n", rep.Cores, loadavg(), o.rounds)
	for r := 1; r <= o.rounds; r++ {
		var peer, ours Figures
		// Alternate who goes first, round by round.
		sides := []string{"peer", "unsay"}
		if r%2 == 0 {
			sides = []string{"unsay", "peer"}
		}
		step := func(name string, f func(side string, fig *Figures) error) error {
			for _, side := range sides {
				if side == "peer" && !o.withPeers {
					continue
				}
				fig := &ours
				if side == "peer" {
					fig = &peer
				}
				fig.Load = append(fig.Load, loadavg())
				fmt.Printf("-- round %d: %s %s (load %s)\n", r, name, side, loadavg())
				if err := f(side, fig); err != nil {
					if ctx.Err() != nil {
						return err
					}
					// A failed run is reported and the run goes on: its figures
					// stay unmeasured ("–") rather than hiding the others.
					fmt.Printf("    FAILED: round %d, %s, %s: %v\n", r, name, side, err)
					fig.Failed = append(fig.Failed, name)
				}
			}
			return nil
		}
		var floor Figures
		if node && want("mcp") {
			if err := step("mcp-live", func(side string, fig *Figures) error { return mcpLive(ctx, o, side, fig) }); err != nil {
				return err
			}
			if o.withPeers { // the client's own floor, beside the peers (floor.go)
				fmt.Printf("-- round %d: mcp-live floor (load %s)\n", r, loadavg())
				if err := mcpLive(ctx, o, "floor", &floor); err != nil {
					fmt.Printf("    FAILED: round %d, mcp-live floor: %v\n", r, err)
				}
			}
		}
		if node && wrk && want("wrk") {
			if err := step("alexa wrk", func(side string, fig *Figures) error { return alexaWrk(ctx, o, certs, side, fig) }); err != nil {
				return err
			}
		}
		if want("open") {
			if err := step("alexa open loop", func(side string, fig *Figures) error { return alexaOpen(ctx, o, certs, side, fig) }); err != nil {
				return err
			}
		}
		if o.fanout > 0 && want("fanout") && r == 1 {
			ours.Load = append(ours.Load, loadavg())
			fmt.Printf("-- round %d: fan-out to %d sessions (load %s)\n", r, o.fanout, loadavg())
			if err := fanOut(ctx, o, &ours); err != nil {
				return fmt.Errorf("fan-out: %w", err)
			}
		}
		rep.Floor = append(rep.Floor, floor)
		rep.Peer = append(rep.Peer, peer)
		rep.Unsay = append(rep.Unsay, ours)
	}
	fmt.Printf("== load average at the end %s\n", loadavg())
	if !o.withPeers && o.last != "" {
		if b, err := os.ReadFile(o.last); err == nil {
			var last Report
			if json.Unmarshal(b, &last) == nil {
				rep.Peer, rep.Floor = last.Peer, last.Floor
				fmt.Printf("(peer figures from `make bench-peers` at %s, %d rounds; not this run)\n", last.At.Format(time.RFC3339), last.Rounds)
			}
		} else {
			fmt.Printf("(no %s: run `make bench-peers` for the peers' figures)\n", o.last)
		}
	}
	var own *Own
	if o.own {
		f, err := ownFigures(ctx, o)
		if err != nil {
			return err
		}
		own = &f
	}
	printTable(rep, own)
	if o.save != "" {
		b, _ := json.MarshalIndent(rep, "", "  ")
		if err := os.MkdirAll(filepath.Dir(o.save), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(o.save, b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// startUnsayWith starts the product as the peers' harnesses expect it:
// the demo seed (patient ray), Alexa verification on with the skill id the
// peer's bodies carry, the peer's test chain served for its certificate URL
// and its root trusted (the test-only hooks --alexa-cert, --alexa-roots),
// ray for unlinked devices, and an admin listener; extra are further
// `serve` flags (e.g. --admin-pprof).
func startUnsayWith(ctx context.Context, o options, certs certSet, extra ...string) (*harness.Server, func(), error) {
	dir, err := os.MkdirTemp("", "unsay-bench-")
	if err != nil {
		return nil, nil, err
	}
	args := []string{"--default-patient", "ray"}
	if certs.url != "" {
		args = append(args, "--alexa-skill-id", certs.skillID, "--alexa-roots", certs.root,
			"--alexa-cert", certs.url+"="+certs.chain)
	}
	s, err := harness.Start(ctx, harness.Options{Bin: o.bin, Dir: dir, Args: append(args, extra...)})
	if err != nil {
		os.RemoveAll(dir)
		return nil, nil, err
	}
	if err := waitReady(ctx, s.AdminURL); err != nil {
		s.Stop()
		os.RemoveAll(dir)
		return nil, nil, err
	}
	return s, func() { s.Stop(); os.RemoveAll(dir) }, nil
}

// runScript runs bash script in dir with env, echoing its output, and
// returns the last line that is a JSON object.
func runScript(ctx context.Context, dir string, env []string, args ...string) (map[string]any, error) {
	cmd := exec.CommandContext(ctx, "bash", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var out strings.Builder
	cmd.Stdout = &out
	cmd.Stderr = os.Stderr
	err := cmd.Run()
	var last map[string]any
	for _, line := range strings.Split(out.String(), "\n") {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "{") {
			var m map[string]any
			if json.Unmarshal([]byte(line), &m) == nil {
				last = m
				continue
			}
		}
		if line != "" {
			fmt.Println("   ", line)
		}
	}
	if err != nil {
		return last, fmt.Errorf("%s: %w", strings.Join(args, " "), err)
	}
	if last == nil {
		return nil, fmt.Errorf("%s printed no JSON line", strings.Join(args, " "))
	}
	return last, nil
}

func num(m map[string]any, k string) float64 {
	f, _ := m[k].(float64)
	return f
}

func mcpLive(ctx context.Context, o options, side string, fig *Figures) error {
	dir := filepath.Join(o.peers, "mcp-live")
	env := []string{"FSYNC=1"}
	var profiled sync.WaitGroup
	if side == "floor" {
		url, stop, err := startFloor()
		if err != nil {
			return err
		}
		defer stop()
		env = append(env, "TARGET_URL="+url, "WRITE_SECRET="+harness.WriteSecret, "LABEL=floor")
	}
	if side == "unsay" {
		s, stop, err := startUnsayWith(ctx, o, certSet{}, "--admin-pprof")
		if err != nil {
			return err
		}
		defer stop()
		tok, err := s.Token(ctx, "ray", []string{"care.read.user"}, "--sub", "mcp-live-bench")
		if err != nil {
			return err
		}
		env = append(env, "TARGET_URL="+s.URL, "WRITE_SECRET="+harness.WriteSecret, "MCP_TOKEN="+tok, "LABEL=go-unsay")
		if pd := os.Getenv("UNSAY_BENCH_PROFILE_DIR"); pd != "" { // the write path's CPU while the client runs
			profiled.Go(func() {
				saveProfile(ctx, s.AdminURL+"/debug/pprof/profile?seconds=3", filepath.Join(pd, "mcp-live-cpu.pprof"))
			})
		}
	}
	m, err := runScript(ctx, dir, env, "run.sh", "--n", fmt.Sprint(o.n))
	profiled.Wait()
	if m == nil {
		return err
	}
	fig.HoldP50, fig.HoldP99 = num(m, "p50_ms"), num(m, "p99_ms")
	fig.AckP50, fig.AckP99 = num(m, "ack_p50_ms"), num(m, "ack_p99_ms")
	return err
}

func have(name string) bool { _, err := exec.LookPath(name); return err == nil }

func nproc() int {
	out, err := exec.Command("nproc").Output()
	if err != nil {
		return 0
	}
	var n int
	fmt.Sscan(string(out), &n)
	return n
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// cpuSeconds is a process's user+system CPU time from /proc/PID/stat.
func cpuSeconds(pid int) (float64, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0, false
	}
	var ut, st float64
	fmt.Sscan(f[11], &ut)
	fmt.Sscan(f[12], &st)
	return (ut + st) / 100, true // USER_HZ is 100 on Linux
}

func median(xs []float64) float64 {
	var v []float64
	for _, x := range xs {
		if x > 0 {
			v = append(v, x)
		}
	}
	if len(v) == 0 {
		return 0
	}
	sort.Float64s(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}
