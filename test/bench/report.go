package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
)

// Own figures the peers have no counterpart for (make bench only).
type Own struct {
	SpeechP50, SpeechP99       float64 // ms, unsay bench: write → speech principal holds the rendered retraction
	InProcMCPP50, InProcMCPP99 float64 // ms, unsay bench: write → Go SDK client holds the value
	SQLitePerSec, PGPerSec     float64 // durable publishes/s with concurrent writers
}

// ownFigures runs `unsay bench --json` and the store's concurrent-publish
// benchmarks (Postgres when UNSAY_TEST_POSTGRES is set).
func ownFigures(ctx context.Context, o options) (Own, error) {
	var own Own
	fmt.Printf("-- unsay bench --n %d (load %s)\n", o.n, loadavg())
	ub := exec.CommandContext(ctx, o.bin, "bench", "--n", strconv.Itoa(o.n), "--json")
	ub.Stderr = os.Stderr // why it failed, if it does
	out, err := ub.Output()
	if err != nil {
		return own, fmt.Errorf("unsay bench: %w", err)
	}
	var raw struct { // unsay bench --json (also "fsync": whether commits were durable)
		MCP    map[string]any `json:"write_to_mcp_client"`
		Speech map[string]any `json:"write_to_speech_retraction"`
	}
	if err := json.Unmarshal(out, &raw); err != nil {
		return own, fmt.Errorf("unsay bench --json: %w", err)
	}
	own.InProcMCPP50, own.InProcMCPP99 = num(raw.MCP, "p50_ms"), num(raw.MCP, "p99_ms")
	own.SpeechP50, own.SpeechP99 = num(raw.Speech, "p50_ms"), num(raw.Speech, "p99_ms")
	fmt.Printf("    write→mcp-client p50 %.3f ms p99 %.3f ms; write→speech-retraction p50 %.3f ms p99 %.3f ms\n",
		own.InProcMCPP50, own.InProcMCPP99, own.SpeechP50, own.SpeechP99)

	fmt.Printf("-- durable publish throughput, concurrent writers (load %s)\n", loadavg())
	cmd := exec.CommandContext(ctx, "go", "test", "-run", "^$", "-bench", "^BenchmarkPublishConcurrent", "-benchtime", "3s", "./store/")
	cmd.Stderr = os.Stderr
	tout, err := cmd.Output()
	if err != nil {
		return own, fmt.Errorf("go test -bench PublishConcurrent: %w\n%s", err, tout)
	}
	re := regexp.MustCompile(`(?m)^(BenchmarkPublishConcurrent\S*)\s.*?([\d.]+) publishes/s`)
	for _, m := range re.FindAllStringSubmatch(string(tout), -1) {
		fmt.Println("   ", strings.TrimSpace(m[0]))
		v, _ := strconv.ParseFloat(m[2], 64)
		if strings.Contains(m[1], "Postgres") {
			own.PGPerSec = max(own.PGPerSec, v)
		} else {
			own.SQLitePerSec = max(own.SQLitePerSec, v)
		}
	}
	return own, nil
}

func col(f func(Figures) float64, figs []Figures) (med float64, rounds string) {
	var xs []float64
	var parts []string
	for _, g := range figs {
		x := f(g)
		xs = append(xs, x)
		if x > 0 {
			parts = append(parts, trim(x))
		} else {
			parts = append(parts, "–")
		}
	}
	return median(xs), strings.Join(parts, " / ")
}

func trim(x float64) string {
	switch {
	case x == 0:
		return "–"
	case x >= 100:
		return strconv.FormatFloat(x, 'f', 0, 64)
	case x >= 10:
		return strconv.FormatFloat(x, 'f', 1, 64)
	default:
		return strconv.FormatFloat(x, 'f', 3, 64)
	}
}

// printTable prints one row per figure: the goal, the peer's and the
// product's medians over the rounds (with each round's value), and the
// ratio — peer/unsay for times and CPU, unsay/peer for throughput — so
// that "3.0×" always means the product is three times better.
func printTable(rep Report, own *Own) {
	type row struct {
		name, goal string
		f          func(Figures) float64
		higher     bool // throughput: more is better
	}
	rows := []row{
		{"write → TS-SDK client holds value, p50 ms", "≤ 1 ms, ≥ 3×", func(f Figures) float64 { return f.HoldP50 }, false},
		{"write → TS-SDK client holds value, p99 ms", "≤ 3 ms, ≥ 3×", func(f Figures) float64 { return f.HoldP99 }, false},
		{"write → 201, p50 ms", "faster", func(f Figures) float64 { return f.AckP50 }, false},
		{"write → 201, p99 ms", "", func(f Figures) float64 { return f.AckP99 }, false},
		{"verified Launch, wrk C=32, req/s", "≥ 3×", func(f Figures) float64 { return f.RPS }, true},
		{"CPU per verified Launch (wrk), ms", "≤ 0.15 ms", func(f Figures) float64 { return f.CPUPerReqMs }, false},
		{"MCP requests per Launch (wrk: rounds shared)", "", func(f Figures) float64 { return f.WrkMCPPerLaunch }, false},
		{"wrk latency p50 ms", "", func(f Figures) float64 { return f.WrkP50 }, false},
		{"wrk latency p99 ms", "", func(f Figures) float64 { return f.WrkP99 }, false},
		{fmt.Sprintf("open loop %d req/s (vegeta), p50 ms", rep.Rate), "", func(f Figures) float64 { return f.OpenP50 }, false},
		{fmt.Sprintf("open loop %d req/s (vegeta), p99 ms", rep.Rate), "≤ 5 ms", func(f Figures) float64 { return f.OpenP99 }, false},
		{"open loop, CPU per Launch ms", "", func(f Figures) float64 { return f.OpenCPUPerReqMs }, false},
		{"MCP requests per Launch (open loop)", "", func(f Figures) float64 { return f.OpenMCPPerLaunch }, false},
		{"fan-out: all sessions hold the revision, p50 ms", "", func(f Figures) float64 { return f.FanP50 }, false},
		{"fan-out: all sessions hold the revision, p99 ms", "≤ 50 ms", func(f Figures) float64 { return f.FanP99 }, false},
		{"memory per idle session, KiB", "≤ 30 KiB", func(f Figures) float64 { return f.IdleKiB }, false},
	}
	fmt.Println()
	fmt.Printf("%-48s %-14s %-10s %-10s %-8s  %s\n", "measure", "goal", "Node peer", "Unsay", "ratio", "rounds (peer | unsay)")
	fmt.Println(strings.Repeat("-", 130))
	for _, r := range rows {
		pm, pr := col(r.f, rep.Peer)
		um, ur := col(r.f, rep.Unsay)
		if pm == 0 && um == 0 {
			continue
		}
		ratio := "–"
		if pm > 0 && um > 0 {
			x := pm / um
			if r.higher {
				x = um / pm
			}
			ratio = strconv.FormatFloat(x, 'f', 2, 64) + "×"
		}
		rounds := ur
		if pm > 0 {
			rounds = pr + " | " + ur
		}
		fmt.Printf("%-48s %-14s %-10s %-10s %-8s  %s\n", r.name, r.goal, trim(pm), trim(um), ratio, rounds)
	}
	if own != nil {
		for _, r := range []struct {
			name, goal string
			v          float64
		}{
			{"write → speech principal holds retraction, p50 ms", "≤ 1.5 ms", own.SpeechP50},
			{"write → speech principal holds retraction, p99 ms", "", own.SpeechP99},
			{"write → Go SDK client holds value (in-process), p50 ms", "", own.InProcMCPP50},
			{"durable publishes/s, SQLite, concurrent writers", "≥ 5,000/s", own.SQLitePerSec},
			{"durable publishes/s, Postgres, concurrent writers", "≥ 5,000/s", own.PGPerSec},
		} {
			if r.v > 0 {
				fmt.Printf("%-48s %-14s %-10s %-10s %-8s\n", r.name, r.goal, "–", trim(r.v), "–")
			}
		}
	}
	for _, r := range rows[:3] { // the client's floor: the best any server can reach with this client
		fm, fr := col(r.f, rep.Floor)
		pm, _ := col(r.f, rep.Peer)
		if fm > 0 && pm > 0 {
			fmt.Printf("%-48s %-14s %-10s %-10s %-8s  %s\n", "  floor: "+strings.TrimPrefix(r.name, "write → "), "(no server)", trim(pm), trim(fm),
				strconv.FormatFloat(pm/fm, 'f', 2, 64)+"×", fr)
		}
	}
	fmt.Println("ratio: peer/unsay for times and CPU, unsay/peer for throughput (> 1 means Unsay is better)")
	if len(rep.Floor) > 0 {
		fmt.Println("floor: the same client against a zero-work Go MCP server in the bench process (test/bench/floor.go); its ratio is the most any server could reach")
	}
}
