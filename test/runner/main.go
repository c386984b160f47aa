// Command runner is `make test`: static checks, every package's Go tests
// under the race detector, then the whole-program suites in test/ (build tag
// e2e), with one count line per part and a closing line
//
//	N passed, N failed, N skipped
//
// It reads `go test -json` as it streams, prints each failing test's output,
// echoes every SKIPPED / PENDING line, and exits 1 when anything failed.
// Raw JSON goes to test/artifacts/*.json.
//
//	go run ./test/runner [-bin bin/unsay] [-skip-unit] [-run REGEXP]
//
// With UNSAY_REQUIRE_ALL=1 (set by .ci/run) a whole-program part whose tool
// is missing fails instead of skipping (the tests themselves decide that).
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"time"
)

// parts maps a whole-program test (its package and top-level name prefix)
// to its part label: parts 1–7 of the whole-program suite (README, What
// `make test` proves), then the other suites that drive the real binary.
var parts = []struct{ pkg, prefix, label string }{
	{e2ePkg, "TestMCPHost", "1 MCP TypeScript SDK host"},
	{e2ePkg, "TestConformance", "2 MCP conformance suite"},
	{e2ePkg, "TestVirtualAlexa", "3 virtual-alexa"},
	{e2ePkg, "TestSignedAlexa", "4 signed Alexa traffic"},
	{e2ePkg, "TestSkillPackage", "5 skill package"},
	{e2ePkg, "TestBrowser", "6 headless Chromium"},
	{e2ePkg, "TestDemo", "7 demo as a test"},
	{e2ePkg, "TestRekey", "unsay rekey (binary)"},
	{e2ePkg, "TestByHand", "README by hand (binary)"},
	{e2ePkg, "TestSpeechSafety", "8 speech safety (P-24)"},
	{e2ePkg, "TestOAuth", "OAuth and account linking"},
	{e2ePkg + "/multi", "Test", "two instances on Postgres"},
}

const e2ePkg = "github.com/unsay/unsay/test"

type event struct {
	Action      string
	Package     string
	Test        string
	Output      string
	ImportPath  string
	FailedBuild string
}

type result struct{ passed, failed, skipped int }

func (r *result) add(o result) { r.passed += o.passed; r.failed += o.failed; r.skipped += o.skipped }

func (r result) String() string {
	s := fmt.Sprintf("%d passed, %d failed", r.passed, r.failed)
	if r.skipped > 0 {
		s += fmt.Sprintf(", %d skipped", r.skipped)
	}
	return s
}

func main() {
	bin := flag.String("bin", "bin/unsay", "the unsay binary the whole-program tests drive")
	skipUnit := flag.Bool("skip-unit", false, "skip static checks and package tests (whole-program suites only)")
	run := flag.String("run", "", "only whole-program tests matching this regexp (go test -run)")
	timeout := flag.Duration("timeout", 15*time.Minute, "timeout of the whole-program suites")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	os.Exit(runAll(ctx, *bin, *skipUnit, *run, *timeout))
}

func runAll(ctx context.Context, bin string, skipUnit bool, run string, timeout time.Duration) int {
	start := time.Now()
	art := filepath.Join("test", "artifacts")
	if err := os.MkdirAll(art, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	var lines []string
	var total result
	var notes []string
	if !skipUnit {
		st := static(ctx)
		lines = append(lines, fmt.Sprintf("%-28s %s", "static: vet fmt tidy lint", st))
		total.add(st)
		fmt.Println("== go test -race ./... (every package)")
		unit, n := goTest(ctx, filepath.Join(art, "unit.json"), nil, "test", "-race", "-json", "./...")
		notes = append(notes, n...)
		lines = append(lines, fmt.Sprintf("%-28s %s", "go packages (-race)", unit["other"]))
		for _, p := range parts {
			if r, ok := unit[p.label]; ok {
				lines = append(lines, fmt.Sprintf("%-28s %s", p.label, r))
			}
		}
		total.add(unit[""])
	}
	abs, err := filepath.Abs(bin)
	if err == nil {
		_, err = os.Stat(abs)
	}
	if err != nil {
		fmt.Printf("FAIL: the unsay binary %s is missing (make build): %v\n", bin, err)
		total.failed++
	} else {
		fmt.Println("== whole-program suites (go test -tags e2e ./test/): the real binary, external clients")
		args := []string{"test", "-tags", "e2e", "-json", "-count=1", "-timeout", timeout.String()}
		if run != "" {
			args = append(args, "-run", run)
		}
		args = append(args, "./test/")
		e2e, n := goTest(ctx, filepath.Join(art, "e2e.json"), []string{"UNSAY_E2E_BIN=" + abs}, args...)
		notes = append(notes, n...)
		for i, p := range parts {
			if _, ok := e2e[p.label]; ok || i < 7 {
				lines = append(lines, fmt.Sprintf("%-28s %s", p.label, e2e[p.label]))
			}
		}
		if other := e2e["other"]; other != (result{}) {
			lines = append(lines, fmt.Sprintf("%-28s %s", "other whole-program", other))
		}
		total.add(e2e[""])
	}
	fmt.Println()
	fmt.Println("== summary")
	for _, n := range notes {
		fmt.Println(n)
	}
	for _, l := range lines {
		fmt.Println(l)
	}
	fmt.Printf("(%s)\n", time.Since(start).Round(time.Second))
	fmt.Println(total)
	if total.failed > 0 {
		return 1
	}
	return 0
}

// staticcheckVersion is the staticcheck the static part runs, fetched from
// the module proxy by `go run` (a fresh machine needs nothing else).
const staticcheckVersion = "honnef.co/go/tools/cmd/staticcheck@v0.8.2"

// static runs go vet (with and without the e2e tag), a gofmt check,
// go mod tidy -diff (go.mod and go.sum are exactly what the code needs) and
// staticcheck (a deprecation the code must use is suppressed at that line,
// with its reason: //lint:ignore SA1019).
func static(ctx context.Context) result {
	var r result
	check := func(name string, cmd *exec.Cmd, emptyOK bool) {
		fmt.Println("== " + name)
		out, err := cmd.CombinedOutput()
		ok := err == nil && (!emptyOK || len(bytes.TrimSpace(out)) == 0)
		if ok {
			r.passed++
			return
		}
		r.failed++
		fmt.Printf("FAIL: %s\n%s", name, out)
		if err != nil {
			fmt.Println(err)
		}
	}
	check("go vet ./...", exec.CommandContext(ctx, "go", "vet", "./..."), false)
	check("go vet -tags e2e ./test/...", exec.CommandContext(ctx, "go", "vet", "-tags", "e2e", "./test/..."), false)
	var files []string
	_ = filepath.WalkDir(".", func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if d.IsDir() && p != "." && (d.Name() == "node_modules" || d.Name() == "artifacts" || strings.HasPrefix(d.Name(), ".") || strings.HasPrefix(d.Name(), "_")) {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(p, ".go") {
			files = append(files, p)
		}
		return nil
	})
	check("gofmt -l (must list nothing)", exec.CommandContext(ctx, "gofmt", append([]string{"-l"}, files...)...), true)
	check("go mod tidy -diff", exec.CommandContext(ctx, "go", "mod", "tidy", "-diff"), false)
	check("staticcheck ./... ("+staticcheckVersion+")", exec.CommandContext(ctx, "go", "run", staticcheckVersion, "./..."), false)
	check("staticcheck -tags e2e ./test/...", exec.CommandContext(ctx, "go", "run", staticcheckVersion, "-tags", "e2e", "./test/..."), false)
	return r
}

// goTest runs `go ARGS…` (expected to include -json), tees the JSON into
// jsonPath, prints package lines and failures, and returns results keyed by
// part label ("" is the total) and the SKIPPED/PENDING/… notices.
func goTest(ctx context.Context, jsonPath string, env []string, args ...string) (map[string]result, []string) {
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		panic(err)
	}
	f, err := os.Create(jsonPath)
	if err != nil {
		panic(err)
	}
	defer f.Close()
	if err := cmd.Start(); err != nil {
		fmt.Println("FAIL: go", strings.Join(args, " "), err)
		return map[string]result{"": {failed: 1}}, nil
	}
	tl := newTally(os.Stdout)
	sc := bufio.NewScanner(io.TeeReader(stdout, f))
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var e event
		if json.Unmarshal(sc.Bytes(), &e) == nil {
			tl.feed(e)
		}
	}
	werr := cmd.Wait()
	res := tl.finish()
	if werr != nil && res[""].failed == 0 {
		fmt.Printf("FAIL: go %s: %v\n", strings.Join(args, " "), werr)
		tot := res[""]
		tot.failed++
		res[""] = tot
	}
	return res, tl.notes
}

type testKey struct{ pkg, test string }

// tally counts `go test -json` events. A test with subtests counts through
// its subtests; it counts itself only when it failed with no failing
// subtest. A test that started and never finished (a panic, a timeout) is a
// failure, and so is a package that failed with no failing test (a build
// error, or TestMain).
type tally struct {
	w         io.Writer
	outputs   map[testKey]*strings.Builder
	final     map[testKey]string
	started   map[testKey]bool
	parent    map[testKey]testKey
	hasChild  map[testKey]bool
	order     []testKey
	pkgFailed map[string]bool
	pkgOrder  []string
	pkgOutput map[string]*strings.Builder
	notes     []string
	seenNote  map[string]bool
}

func newTally(w io.Writer) *tally {
	return &tally{w: w, outputs: map[testKey]*strings.Builder{}, final: map[testKey]string{},
		started: map[testKey]bool{}, parent: map[testKey]testKey{}, hasChild: map[testKey]bool{},
		pkgFailed: map[string]bool{}, pkgOutput: map[string]*strings.Builder{}, seenNote: map[string]bool{}}
}

func (tl *tally) feed(e event) {
	if e.Action == "build-output" {
		fmt.Fprint(tl.w, e.Output)
		return
	}
	if e.Test == "" {
		switch e.Action {
		case "output":
			b := tl.pkgOutput[e.Package]
			if b == nil {
				b = &strings.Builder{}
				tl.pkgOutput[e.Package] = b
			}
			b.WriteString(e.Output)
		case "fail":
			tl.pkgFailed[e.Package] = true
			tl.pkgOrder = append(tl.pkgOrder, e.Package)
			fmt.Fprintf(tl.w, "FAIL  %s\n", e.Package)
		case "pass":
			fmt.Fprintf(tl.w, "ok    %s\n", e.Package)
		case "skip":
			fmt.Fprintf(tl.w, "--    %s (no tests)\n", e.Package)
		}
		return
	}
	k := testKey{e.Package, e.Test}
	switch e.Action {
	case "run":
		if tl.started[k] {
			return
		}
		tl.started[k] = true
		tl.order = append(tl.order, k)
		// The parent is the longest started test whose name + "/" prefixes
		// this one (subtest names may themselves hold slashes).
		for i := len(e.Test) - 1; i > 0; i-- {
			if e.Test[i] != '/' {
				continue
			}
			p := testKey{e.Package, e.Test[:i]}
			if tl.started[p] {
				tl.parent[k] = p
				tl.hasChild[p] = true
				break
			}
		}
	case "output":
		b := tl.outputs[k]
		if b == nil {
			b = &strings.Builder{}
			tl.outputs[k] = b
		}
		b.WriteString(e.Output)
		if n := noteIn(e.Output); n != "" && !tl.seenNote[n] {
			tl.seenNote[n] = true
			tl.notes = append(tl.notes, n)
		}
	case "pass", "fail", "skip":
		tl.final[k] = e.Action
		if _, isSub := tl.parent[k]; e.Action == "fail" && !isSub {
			fmt.Fprintf(tl.w, "--- FAIL: %s (%s)\n", e.Test, e.Package)
		}
	}
}

// finish returns the counts by part label ("" is the total; tests outside
// any part count under "other") and prints each failure's output.
func (tl *tally) finish() map[string]result {
	failedChild := map[testKey]bool{}
	for _, k := range tl.order {
		if a := tl.final[k]; a == "fail" || a == "" {
			for p, ok := tl.parent[k]; ok; p, ok = tl.parent[p] {
				failedChild[p] = true
			}
		}
	}
	res := map[string]result{}
	add := func(label string, r result) {
		tot := res[""]
		tot.add(r)
		res[""] = tot
		lr := res[label]
		lr.add(r)
		res[label] = lr
	}
	var failures []testKey
	failedPkgs := map[string]bool{}
	for _, k := range tl.order {
		a := tl.final[k]
		if a == "" {
			a = "fail" // started, never finished
		}
		if tl.hasChild[k] && (a != "fail" || failedChild[k]) {
			continue // counted through its subtests
		}
		var r result
		switch a {
		case "pass":
			r.passed = 1
		case "skip":
			r.skipped = 1
		default:
			r.failed = 1
			failures = append(failures, k)
			failedPkgs[k.pkg] = true
		}
		add(partOf(k.pkg, k.test), r)
	}
	for _, p := range tl.pkgOrder {
		if failedPkgs[p] {
			continue
		}
		add("other", result{failed: 1})
		fmt.Fprintf(tl.w, "\n=== FAIL package %s (no single test failed: build error, panic or TestMain)\n", p)
		if b := tl.pkgOutput[p]; b != nil {
			fmt.Fprint(tl.w, tail(b.String(), 60))
		}
	}
	for _, k := range failures {
		fmt.Fprintf(tl.w, "\n=== FAIL %s (%s)\n", k.test, k.pkg)
		if b := tl.outputs[k]; b != nil {
			fmt.Fprint(tl.w, tail(b.String(), 80))
		}
	}
	return res
}

// partOf maps a test to its part label, or "other".
func partOf(pkg, test string) string {
	top, _, _ := strings.Cut(test, "/")
	for _, p := range parts {
		if pkg == p.pkg && strings.HasPrefix(top, p.prefix) {
			return p.label
		}
	}
	return "other"
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	lines := strings.SplitAfter(s, "\n")
	if len(lines) > n {
		lines = append([]string{fmt.Sprintf("  … (%d lines above cut)\n", len(lines)-n)}, lines[len(lines)-n:]...)
	}
	return strings.Join(lines, "")
}

// noteIn returns the SKIPPED: / PENDING: / EXPECTED-FAILURE: notice in a
// line of test output, from its marker on, or "".
func noteIn(line string) string {
	for _, m := range []string{"SKIPPED:", "PENDING:", "EXPECTED-FAILURE:", "MISSING:"} {
		if i := strings.Index(line, m); i >= 0 {
			return strings.TrimSpace(line[i:])
		}
	}
	return ""
}
