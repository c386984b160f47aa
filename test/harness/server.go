// Package harness runs the real unsay binary for whole-program tests and for
// `make demo`: it builds the binary, starts `unsay serve` on a free loopback
// port with a temporary SQLite database and fixed development secrets, mints
// tokens and signs writes through the binary's own subcommands, and signs
// Alexa requests with a throwaway test CA (see alexa.go).
//
// It imports nothing from the product: everything goes through the binary's
// command line and its sockets, as an operator's tools would.
package harness

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/unsay/unsay/store"
)

// Development secrets the harness gives every server it starts and every
// subcommand it runs (secrets come only from the environment).
const (
	TokenSecret = "e2e-token-secret-0123456789abcdef0123456789abcdef"
	WriteSecret = "e2e-write-secret-0123456789abcdef0123456789abcdef"
	AuditKey    = "e2e-audit-key-0123456789abcdef0123456789abcdef"
)

// SigningKey is the harness's UNSAY_SIGNING_KEY (chain heads, P-26): a
// fixed Ed25519 seed, so a server behind a public URL starts without the
// development default.
var SigningKey = store.FormatSigningKey(ed25519.NewKeyFromSeed(bytes.Repeat([]byte{0xe2}, ed25519.SeedSize)))

// pendingFlagRE matches serve's refusal of an Alexa flag it does not have
// yet: the skill's wiring into `unsay serve` has not landed.
var pendingFlagRE = regexp.MustCompile(`flag provided but not defined: -(alexa-[a-z-]+|default-patient)`)

// adminURLRE finds the admin listener's URL in the startup line
// ("… | admin http://127.0.0.1:PORT (readiness details, metrics) | …").
var adminURLRE = regexp.MustCompile(`\badmin (http://[^ ]+) \(`)

// ErrNotImplemented is returned when the binary answers a subcommand with
// "not implemented yet": the product part is still being built. Tests skip
// with a PENDING line on it; any other failure is a failure.
var ErrNotImplemented = errors.New("not implemented yet in the unsay binary")

// RepoRoot walks up from the working directory to the directory holding the
// module's go.mod (module github.com/unsay/unsay).
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && bytes.Contains(b, []byte("module github.com/unsay/unsay")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("harness: go.mod of github.com/unsay/unsay not found above the working directory")
		}
		dir = parent
	}
}

// Binary returns the path of the unsay binary under test: $UNSAY_E2E_BIN when
// set (the Makefile builds bin/unsay once), otherwise a fresh `go build` of
// the repository into dir.
func Binary(ctx context.Context, dir string) (string, error) {
	if p := os.Getenv("UNSAY_E2E_BIN"); p != "" {
		abs, err := filepath.Abs(p)
		if err != nil {
			return "", err
		}
		if _, err := os.Stat(abs); err != nil {
			return "", fmt.Errorf("harness: UNSAY_E2E_BIN: %w", err)
		}
		return abs, nil
	}
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	out := filepath.Join(dir, "unsay")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, ".")
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("harness: go build: %w\n%s", err, b)
	}
	return out, nil
}

// Env returns the process environment without any UNSAY_* variable (so a
// developer's settings cannot leak into a test), plus the harness secrets
// and extra ("KEY=value").
func Env(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "UNSAY_") {
			continue
		}
		env = append(env, kv)
	}
	env = append(env,
		"UNSAY_TOKEN_SECRET="+TokenSecret,
		"UNSAY_WRITE_SECRET="+WriteSecret,
		"UNSAY_AUDIT_KEY="+AuditKey,
		"UNSAY_SIGNING_KEY="+SigningKey,
	)
	return append(env, extra...)
}

// Options configure one server.
type Options struct {
	Bin  string   // the unsay binary
	Dir  string   // working directory; the database is Dir/unsay.db
	Args []string // extra `serve` flags, e.g. --alexa-verify=false
	Env  []string // extra environment, KEY=value
	// PublicURL is the server's --public-url (and tokens' audience base);
	// "" means its own http://127.0.0.1:PORT. A reverse proxy in front of
	// the server sets its own URL here.
	PublicURL string
	// Log, when set, receives the server's stdout and stderr as they come.
	Log io.Writer
}

// Server is one running `unsay serve`.
type Server struct {
	URL string // http://127.0.0.1:PORT
	// AdminURL is the --admin-addr listener (readiness details, /metrics):
	// every server the harness starts has one on a free loopback port.
	AdminURL  string
	Addr      string // 127.0.0.1:PORT
	PublicURL string // --public-url: URL unless Options.PublicURL is set
	DB        string
	opts      Options
	cmd       *exec.Cmd
	out       *syncBuffer
	done      chan struct{}
	err       error // set before done closes
}

// Start runs `unsay serve --addr 127.0.0.1:PORT --db DIR/unsay.db
// --public-url URL --admin-addr 127.0.0.1:0 ARGS…` (URL: Options.PublicURL,
// else http://127.0.0.1:PORT) and waits (up to 30 s) until
// GET /healthz answers 200. It returns ErrNotImplemented (wrapped) when the
// binary says serve is not implemented, and an error carrying the server's
// output when it exits or never becomes healthy.
func Start(ctx context.Context, o Options) (*Server, error) {
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		s, err := start(ctx, o)
		if err == nil {
			return s, nil
		}
		lastErr = err
		if errors.Is(err, ErrNotImplemented) || !strings.Contains(err.Error(), "address already in use") {
			break
		}
	}
	return nil, lastErr
}

func start(ctx context.Context, o Options) (*Server, error) {
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	s := &Server{
		URL:  "http://" + addr,
		Addr: addr,
		DB:   filepath.Join(o.Dir, "unsay.db"),
		opts: o,
		out:  &syncBuffer{},
		done: make(chan struct{}),
	}
	s.PublicURL = s.URL
	if o.PublicURL != "" {
		s.PublicURL = o.PublicURL
	}
	args := append([]string{"serve", "--addr", addr, "--db", s.DB, "--public-url", s.PublicURL, "--admin-addr", "127.0.0.1:0"}, o.Args...)
	s.cmd = exec.Command(o.Bin, args...)
	s.cmd.Dir = o.Dir
	s.cmd.Env = Env(o.Env...)
	var w io.Writer = s.out
	if o.Log != nil {
		w = io.MultiWriter(s.out, o.Log)
	}
	s.cmd.Stdout, s.cmd.Stderr = w, w
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := s.cmd.Start(); err != nil {
		return nil, fmt.Errorf("harness: start %s: %w", o.Bin, err)
	}
	go func() {
		s.err = s.cmd.Wait()
		close(s.done)
	}()
	deadline := time.Now().Add(30 * time.Second)
	client := &http.Client{Timeout: 2 * time.Second}
	for {
		select {
		case <-s.done:
			out := s.out.String()
			if strings.Contains(out, "not implemented yet") {
				return nil, fmt.Errorf("unsay serve: %w", ErrNotImplemented)
			}
			if m := pendingFlagRE.FindString(out); m != "" {
				return nil, fmt.Errorf("unsay serve: %q (the Alexa wiring has not landed): %w", m, ErrNotImplemented)
			}
			return nil, fmt.Errorf("harness: unsay serve exited (%v) before it was healthy:\n%s", s.err, out)
		case <-ctx.Done():
			s.Stop()
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		resp, err := client.Get(s.URL + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				// The startup line is printed before serving starts, but
				// reaches s.out through a pipe, after the banner waited (up
				// to 15 s) for the speech principal: wait for it (up to 30 s).
				for wait := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
					if m := adminURLRE.FindStringSubmatch(s.out.String()); m != nil {
						s.AdminURL = m[1]
						break
					}
					if time.Now().After(wait) {
						s.Stop()
						return nil, fmt.Errorf("harness: no admin listener in the startup line within 30 s:\n%s", s.out.String())
					}
				}
				return s, nil
			}
		}
		if time.Now().After(deadline) {
			s.Stop()
			return nil, fmt.Errorf("harness: unsay serve not healthy after 30 s (last: %v):\n%s", err, s.out.String())
		}
	}
}

// Output is everything the server printed so far.
func (s *Server) Output() string { return s.out.String() }

// Stop sends SIGTERM, waits up to 10 s, then kills the process group.
// It returns the server's exit error, if any: nil after a clean shutdown or
// after an exit by signal (SIGTERM here, or an earlier Kill).
func (s *Server) Stop() error {
	select {
	case <-s.done:
		return exitErr(s.err)
	default:
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
		<-s.done
		return errors.New("harness: server did not stop within 10 s of SIGTERM; killed")
	}
	return exitErr(s.err)
}

func exitErr(err error) error {
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.Sys().(syscall.WaitStatus).Signaled() {
		return nil
	}
	return err
}

// Kill ends the server with SIGKILL (for durability tests) and waits.
func (s *Server) Kill() {
	select {
	case <-s.done:
		return
	default:
	}
	_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
	<-s.done
}

// Restart starts a new server on the same database, directory and flags
// (on a new port) after this one stopped.
func (s *Server) Restart(ctx context.Context) (*Server, error) {
	_ = s.Stop()
	return Start(ctx, s.opts)
}

// Run runs `unsay ARGS…` with the harness environment and returns its trimmed
// stdout. A non-zero exit returns an error carrying stderr; the output "not
// implemented yet" wraps ErrNotImplemented.
func Run(ctx context.Context, bin string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = Env()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if err != nil {
		msg := strings.TrimSpace(stderr.String() + "\n" + stdout.String())
		if strings.Contains(msg, "not implemented yet") {
			return "", fmt.Errorf("unsay %s: %w", args[0], ErrNotImplemented)
		}
		return "", fmt.Errorf("unsay %s: %w: %s", strings.Join(args, " "), err, msg)
	}
	return strings.TrimSpace(stdout.String()), nil
}

// Token mints a bearer token for this server: `unsay token --patient P
// --scope S… --public-url URL [extra…]`.
func (s *Server) Token(ctx context.Context, patient string, scopes []string, extra ...string) (string, error) {
	args := []string{"token", "--patient", patient, "--public-url", s.PublicURL}
	for _, sc := range scopes {
		args = append(args, "--scope", sc)
	}
	tok, err := Run(ctx, s.opts.Bin, append(args, extra...)...)
	if err != nil {
		return "", err
	}
	if strings.Count(tok, ".") != 2 || strings.ContainsAny(tok, " \n") {
		return "", fmt.Errorf("unsay token printed something other than one JWT: %q", tok)
	}
	return tok, nil
}

// Write signs and posts a clinician's revision with `unsay write` and
// returns the JSON answer it prints. It creates the topic when the patient
// has none of it, and the patient when he has no notes (--new-topic,
// --new-patient: fixtures write new topics and patients on purpose; the
// refusal of a mistyped one is tested by calling `unsay write` itself).
func (s *Server) Write(ctx context.Context, patient, domain, value, author, authorLabel string, extra ...string) (string, error) {
	args := []string{"write", "--url", s.URL, "--patient", patient, "--domain", domain,
		"--value", value, "--author", author, "--author-label", authorLabel, "--new-topic", "--new-patient"}
	return Run(ctx, s.opts.Bin, append(args, extra...)...)
}

// FreePort asks the kernel for a free loopback TCP port.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// syncBuffer is a bytes.Buffer safe for concurrent writers and readers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// PID is the server process's id (for CPU accounting from /proc).
func (s *Server) PID() int { return s.cmd.Process.Pid }
