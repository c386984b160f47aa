package cmd

// Tests of the unsay command as an operator meets it: each runs the real
// command line (this test binary re-executes itself as `unsay`, running Run
// as main does, so the dispatch, flags, signals and exit codes are what is
// tested), against a real `unsay serve` on a free loopback port and real
// SQLite files.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/unsay/unsay/store"
	"github.com/unsay/unsay/store/envelope"
)

const reexecEnv = "UNSAY_MAIN_TEST_REEXEC"

func TestMain(m *testing.M) {
	if os.Getenv(reexecEnv) == "1" { // as main.go does
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		code := Run(ctx, os.Args[1:], Build{})
		stop()
		os.Exit(code)
	}
	os.Exit(m.Run())
}

// result is one finished command.
type result struct {
	code           int
	stdout, stderr string
}

// unsay runs the command line args with a clean environment (no UNSAY_*
// from the developer) plus env.
func unsay(t *testing.T, env []string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], args...)
	cmd.Env = cleanEnv(env)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("unsay %v: %v", args, err)
	}
	return result{code: code, stdout: out.String(), stderr: errb.String()}
}

func cleanEnv(extra []string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "UNSAY_") {
			env = append(env, kv)
		}
	}
	return append(append(env, reexecEnv+"=1"), extra...)
}

// server is a running `unsay serve` (this binary, re-executed).
type server struct {
	url, db string
	cmd     *exec.Cmd
	stdout  *syncBuf
	stderr  *syncBuf
	done    chan struct{}
}

type syncBuf struct {
	mu  chan struct{}
	buf bytes.Buffer
}

func newSyncBuf() *syncBuf { return &syncBuf{mu: make(chan struct{}, 1)} }
func (b *syncBuf) Write(p []byte) (int, error) {
	b.mu <- struct{}{}
	defer func() { <-b.mu }()
	return b.buf.Write(p)
}
func (b *syncBuf) String() string {
	b.mu <- struct{}{}
	defer func() { <-b.mu }()
	return b.buf.String()
}

var servingRE = regexp.MustCompile(`Unsay is serving (http://127\.0\.0\.1:\d+) \(listening on 127\.0\.0\.1:(\d+)\)`)

// startServe starts `unsay serve --addr 127.0.0.1:0` on a fresh database
// in a temp folder (development mode: verification off, every device is
// Ray's) and waits for its banner.
func startServe(t *testing.T, extra ...string) *server {
	t.Helper()
	db := filepath.Join(t.TempDir(), "unsay.db")
	args := append([]string{"serve", "--addr", "127.0.0.1:0", "--db", db, "--alexa-verify=false", "--default-patient", "ray"}, extra...)
	s := &server{db: db, stdout: newSyncBuf(), stderr: newSyncBuf(), done: make(chan struct{})}
	s.cmd = exec.Command(os.Args[0], args...)
	s.cmd.Env = cleanEnv(nil)
	s.cmd.Stdout, s.cmd.Stderr = s.stdout, s.stderr
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = s.cmd.Wait(); close(s.done) }()
	t.Cleanup(func() { s.stop(t) })
	deadline := time.Now().Add(60 * time.Second)
	for {
		if m := servingRE.FindStringSubmatch(s.stdout.String()); m != nil {
			s.url = m[1]
			break
		}
		select {
		case <-s.done:
			t.Fatalf("unsay serve exited:\n%s\n%s", s.stdout, s.stderr)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("no banner within 60 s:\n%s\n%s", s.stdout, s.stderr)
		}
	}
	return s
}

// stop interrupts the server (Ctrl-C) and waits for it to exit.
func (s *server) stop(t *testing.T) {
	select {
	case <-s.done:
		return
	default:
	}
	_ = s.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-s.done:
	case <-time.After(30 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
		t.Errorf("unsay serve did not stop within 30 s of SIGINT")
	}
}

// --- help, version, -h ---------------------------------------------------------

func TestHelp_EveryFormDescribesEveryCommandAndExits0(t *testing.T) {
	for _, args := range [][]string{nil, {"help"}, {"--help"}, {"-h"}} {
		r := unsay(t, nil, args...)
		if r.code != 0 {
			t.Errorf("unsay %v exited %d, want 0", args, r.code)
		}
		for _, c := range commands(Build{}) {
			line := regexp.MustCompile(`(?m)^  ` + c.Name + `\s+\S.*\.$`)
			if !line.MatchString(r.stdout) {
				t.Errorf("unsay %v: no one-sentence line for %s:\n%s", args, c.Name, r.stdout)
			}
		}
	}
	// The twin: a command that does not exist is a usage error (2), with a suggestion.
	r := unsay(t, nil, "serv")
	if r.code != 2 || !strings.Contains(r.stderr, `unknown command "serv"`) || !strings.Contains(r.stderr, `"serve"`) {
		t.Errorf("unsay serv: exit %d, stderr %q; want 2, naming it and suggesting serve", r.code, r.stderr)
	}
}

func TestDashH_ListsEveryFlagWithItsUNSAYTwinAndTheSecrets(t *testing.T) {
	for _, c := range commands(Build{}) {
		if c.run == nil {
			continue
		}
		r := unsay(t, nil, c.Name, "-h")
		if r.code != 0 {
			t.Errorf("unsay %s -h exited %d", c.Name, r.code)
		}
		// Flags are declared inside each command: read them from the text,
		// and `unsay help CMD` must print the same.
		if again := unsay(t, nil, "help", c.Name); again.stdout != r.stdout || again.code != 0 {
			t.Errorf("unsay help %s differs from unsay %s -h", c.Name, c.Name)
		}
		for _, m := range regexp.MustCompile(`(?m)^  --([a-z0-9-]+)`).FindAllStringSubmatch(r.stdout, -1) {
			twin := "UNSAY_" + strings.ToUpper(strings.ReplaceAll(m[1], "-", "_"))
			if !regexp.MustCompile(`(?m)^  --` + m[1] + `\b.*\b` + twin + `\b`).MatchString(r.stdout) {
				t.Errorf("unsay %s -h: --%s without its twin %s", c.Name, m[1], twin)
			}
		}
		for _, s := range c.Secrets {
			if !strings.Contains(r.stdout, s.Env) {
				t.Errorf("unsay %s -h does not name the secret %s", c.Name, s.Env)
			}
		}
	}
	r := unsay(t, nil, "serve", "-h")
	for _, f := range []string{"--addr", "--db", "--quiet-hours", "--time-zone", "--alert-budget", "--public-url"} {
		if !strings.Contains(r.stdout, f) {
			t.Errorf("unsay serve -h lacks %s", f)
		}
	}
}

func TestVersion_PrintsVersionAndCommit(t *testing.T) {
	r := unsay(t, nil, "version")
	if r.code != 0 || !regexp.MustCompile(`^unsay \S+ \(commit \S+`).MatchString(r.stdout) {
		t.Errorf("unsay version: exit %d, %q", r.code, r.stdout)
	}
	if got := versionLine(Build{Version: "v1.2.3", Commit: "0123456789abcdef0123"}); !strings.HasPrefix(got, "unsay v1.2.3 (commit 0123456789ab") {
		t.Errorf("with -ldflags values: %q", got)
	}
}

// --- stray arguments -------------------------------------------------

func TestStrayArguments_AreRefusedNeverIgnored(t *testing.T) {
	other := seededDB(t)
	for _, args := range [][]string{
		{"verify", other},
		{"verify", "--audit", other},
		{"verify", other, "--audit"},
		{"rekey", "--envelope", "local", other},
		{"token", "--patient", "ray", "--scope", "care.read.user", "extra"},
		{"link", "--patient", "ray", "now"},
		{"bench", "200"},
		{"write", "--patient", "ray", "oops"},
		{"serve", "8080"},
		{"version", "x"},
	} {
		r := unsay(t, nil, args...)
		if r.code != 2 || !strings.Contains(r.stderr, "takes no arguments") {
			t.Errorf("unsay %v: exit %d, stderr %q; want 2 and the refusal", args, r.code, r.stderr)
		}
		if strings.Contains(r.stdout, "intact") {
			t.Errorf("unsay %v verified something anyway: %s", args, r.stdout)
		}
	}
	r := unsay(t, nil, "verify", other)
	if !strings.Contains(r.stderr, "did you mean --db "+other) {
		t.Errorf("verify PATH does not suggest --db: %q", r.stderr)
	}
	// The twin: --db PATH verifies that file (and not ./unsay.db).
	r = unsay(t, nil, "verify", "--db", other, "--audit")
	if r.code != 0 || !strings.Contains(r.stdout, "care://ray/weight_bearing intact") || !strings.Contains(r.stdout, "audit log intact") {
		t.Errorf("verify --db %s: exit %d\n%s%s", other, r.code, r.stdout, r.stderr)
	}
}

// seededDB writes the demo seed into a new SQLite file (development audit key).
func seededDB(t *testing.T) string {
	t.Helper()
	return seededDBSealed(t, nil)
}

func seededDBSealed(t *testing.T, master []byte) string {
	t.Helper()
	ctx := context.Background()
	var sealer store.Sealer
	if master != nil {
		var err error
		if sealer, err = envelope.NewLocal(master); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(t.TempDir(), "other.db")
	s, err := store.Open(ctx, store.Options{DSN: path, AuditKey: []byte(store.DevAuditKey), Sealer: sealer})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := store.Seed(ctx, s, time.Date(2026, 10, 8, 9, 14, 0, 0, time.UTC)); err != nil {
		t.Fatal(err)
	}
	return path
}

// --- serve: validation, messages, banner -----------------------------------------

func TestServe_ValidatesEveryFlagAtStartWithTheValidForms(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"--quiet-hours", "25:00-08:00"}, []string{"--quiet-hours", "25:00-08:00", "HH:MM-HH:MM", "off"}},
		{[]string{"--quiet-hours", "08:00-08:00"}, []string{"--quiet-hours (UNSAY_QUIET_HOURS)", `"08:00-08:00" starts when it ends`, "e.g. 21:00-08:00", "off for no quiet hours", "--alert-budget 0"}},
		{[]string{"--time-zone", "Mars/Olympus"}, []string{"--time-zone", "Mars/Olympus", "Europe/London"}},
		{[]string{"--alert-budget", "-1"}, []string{"--alert-budget", "-1", "0 (no proactive notifications)"}},
		{[]string{"--alert-budget", "1e3"}, []string{"--alert-budget (UNSAY_ALERT_BUDGET)", "1e3", "0 (no proactive notifications) or a positive whole count"}},
		{[]string{"--alert-budget", "abc"}, []string{"--alert-budget (UNSAY_ALERT_BUDGET)", "abc", "e.g. 3"}},
		{[]string{"--public-url", "http://127.0.0.1:18899/sub/"}, []string{"--public-url", "has a path (/sub)", "without a path", "--authorization-server"}},
		{[]string{"--allowed-origin", "https://app.example/path"}, []string{"--allowed-origin", "has a path (/path)", "scheme://host[:port] only"}},
		{[]string{"--alexa-cert", "foo"}, []string{"--alexa-cert (UNSAY_ALEXA_CERT)", `"foo": want URL=PEMFILE`}},
		{[]string{"--envelope", "kms"}, []string{"--envelope (UNSAY_ENVELOPE)", "kms needs UNSAY_KMS_KEY_ID"}},
		{[]string{"--public-url", "notaurl"}, []string{"--public-url", "notaurl", "malformed", "want http(s)://host[:port] without a path", "a path needs an external authorization server"}},
		{[]string{"--public-url", "notaurl", "--token-jwks-url", "https://issuer.example.org/jwks"}, []string{"--public-url", "notaurl", "malformed", "want http(s)://host[:port][/path]"}},
		{[]string{"--seed", "demmo"}, []string{"--seed", "demo, bench or none"}},
		{[]string{"--log-level", "loud"}, []string{"--log-level", "debug, info, warn or error"}},
		{[]string{"--addr", "8080"}, []string{"--addr", "host:port"}},
		{[]string{"--kept-reports-file", "/no/such/folder/kept"}, []string{"--kept-reports-file", "/no/such/folder/kept", "its folder must exist"}},
	} {
		// Proactive notifications are off (no --alexa-client-id): the flags are checked anyway.
		args := append([]string{"serve", "--addr", "127.0.0.1:0", "--db", filepath.Join(t.TempDir(), "x.db")}, tc.args...)
		if tc.args[0] == "--addr" {
			args = append([]string{"serve", "--db", filepath.Join(t.TempDir(), "x.db")}, tc.args...)
		}
		r := unsay(t, nil, args...)
		if r.code != 2 {
			t.Errorf("%v: exit %d, want 2\n%s", tc.args, r.code, r.stderr)
		}
		for _, w := range tc.want {
			if !strings.Contains(r.stderr, w) {
				t.Errorf("%v: message lacks %q: %s", tc.args, w, r.stderr)
			}
		}
		if strings.Contains(r.stdout, "Unsay is serving") {
			t.Errorf("%v: the server started anyway", tc.args)
		}
		if strings.Count(r.stderr, "URL=PEMFILE") > 1 || strings.Count(r.stderr, "--alexa-cert") > 1 {
			t.Errorf("%v: the message repeats itself: %s", tc.args, r.stderr)
		}
		if strings.Contains(r.stderr, "IMDS") || strings.Contains(r.stderr, "ec2imds") {
			t.Errorf("%v: the cloud metadata service was asked before the refusal: %s", tc.args, r.stderr)
		}
	}
	// The environment twin is refused in the same words.
	r := unsay(t, []string{"UNSAY_ALERT_BUDGET=1e3"}, "serve", "--addr", "127.0.0.1:0", "--db", filepath.Join(t.TempDir(), "x.db"))
	if r.code != 2 || !strings.Contains(r.stderr, "--alert-budget (UNSAY_ALERT_BUDGET)") || !strings.Contains(r.stderr, "positive whole count") {
		t.Errorf("UNSAY_ALERT_BUDGET=1e3: exit %d: %s", r.code, r.stderr)
	}
	// unsay verify (rekey, token --db) checks the key id the same way.
	r = unsay(t, nil, "verify", "--db", seededDB(t), "--envelope", "kms")
	if r.code != 2 || !strings.Contains(r.stderr, "kms needs UNSAY_KMS_KEY_ID") || strings.Contains(r.stderr, "IMDS") {
		t.Errorf("verify --envelope kms without a key id: exit %d: %s", r.code, r.stderr)
	}
}

// TestServe_TheValidFormsOfTheCheckedFlagsStart: the twins of the refusals
// above — a whole --alert-budget, quiet hours that end when they do not
// start, an origin (with or without a trailing
// "/"), a public URL whose only path is "/" — start the server; and with
// UNSAY_KMS_KEY_ID set, --envelope kms passes the flag check and is
// refused by the envelope for what else it lacks (here AWS_REGION); a
// --kept-reports-file in a folder that exists.
func TestServe_TheValidFormsOfTheCheckedFlagsStart(t *testing.T) {
	s := startServe(t, "--alert-budget", "10", "--quiet-hours", "22:00-07:00", "--allowed-origin", "https://app.example", "--allowed-origin", "https://app.example:8443/",
		"--public-url", "http://127.0.0.1:18899/", "--kept-reports-file", filepath.Join(t.TempDir(), "kept"))
	if s.url == "" {
		t.Fatal("no banner")
	}
	r := unsay(t, []string{"UNSAY_KMS_KEY_ID=alias/unsay", "AWS_EC2_METADATA_DISABLED=true", "AWS_REGION=", "AWS_DEFAULT_REGION="},
		"serve", "--addr", "127.0.0.1:0", "--db", filepath.Join(t.TempDir(), "x.db"), "--envelope", "kms")
	if r.code == 0 || strings.Contains(r.stderr, "kms needs UNSAY_KMS_KEY_ID") || !strings.Contains(r.stderr, "AWS_REGION") {
		t.Errorf("--envelope kms with a key id: exit %d: %s", r.code, r.stderr)
	}
}

func TestServe_MissingDatabaseFolderNamesThePathOnce(t *testing.T) {
	r := unsay(t, nil, "serve", "--addr", "127.0.0.1:0", "--db", "/nonexistent/x.db")
	if r.code == 0 || strings.Count(r.stderr, "/nonexistent/x.db") != 1 || strings.Contains(r.stderr, "store: store:") {
		t.Errorf("exit %d, stderr %q: want the path once, no store: store:", r.code, r.stderr)
	}
	if !strings.Contains(r.stderr, "--db") || !strings.Contains(r.stderr, "does not exist") {
		t.Errorf("the message names neither the flag nor the fix: %q", r.stderr)
	}
}

func TestServe_SealedDatabaseWithoutEnvelopeSuggestsIt(t *testing.T) {
	key := bytes.Repeat([]byte{7}, 32)
	db := seededDBSealed(t, key)
	r := unsay(t, nil, "serve", "--addr", "127.0.0.1:0", "--db", db)
	if r.code == 0 || !strings.Contains(r.stderr, "--envelope") {
		t.Errorf("serve on a sealed database: exit %d, %q; want the --envelope hint", r.code, r.stderr)
	}
	r = unsay(t, nil, "verify", "--db", db)
	if r.code == 0 || !strings.Contains(r.stderr, "--envelope local") {
		t.Errorf("verify on a sealed database: exit %d, %q; want the --envelope hint", r.code, r.stderr)
	}
	// The twin: with the envelope and its key, it verifies.
	r = unsay(t, []string{"UNSAY_MASTER_KEY=" + base64.StdEncoding.EncodeToString(key)}, "verify", "--db", db, "--envelope", "local")
	if r.code != 0 || !strings.Contains(r.stdout, "intact") {
		t.Errorf("verify --envelope local: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

func TestServe_BannerNamesTheResolvedAddressWithoutSDKChatterAndCtrlCSaysItStopped(t *testing.T) {
	s := startServe(t)
	m := servingRE.FindStringSubmatch(s.stdout.String())
	if m[2] == "0" {
		t.Errorf("banner names port 0, not the port listened on")
	}
	lines := strings.Split(strings.TrimSpace(s.stdout.String()), "\n")
	if len(lines) > 8 {
		t.Errorf("banner is %d lines, want a few:\n%s", len(lines), s.stdout)
	}
	for _, want := range []string{"store sqlite at " + s.db, "PLAINTEXT", "ALEXA VERIFICATION OFF", "DEVELOPMENT default secrets", "Ctrl-C"} {
		if !strings.Contains(s.stdout.String(), want) {
			t.Errorf("banner lacks %q:\n%s", want, s.stdout)
		}
	}
	// One Alexa turn makes the speech principal and the SDK busy.
	if r := unsay(t, nil, "ask", "--url", s.url, "open care notes"); r.code != 0 {
		t.Fatalf("ask: %d %s", r.code, r.stderr)
	}
	s.stop(t)
	for _, chatter := range []string{"server connecting", "session initialized", "resource subscribed", "server session connected"} {
		if strings.Contains(s.stderr.String(), chatter) {
			t.Errorf("SDK chatter %q at the default log level:\n%s", chatter, s.stderr)
		}
	}
	if !strings.Contains(s.stderr.String(), "unsay stopped") {
		t.Errorf("Ctrl-C did not say it stopped:\n%s", s.stderr)
	}
}

// --- token, write, link, rekey -----------------------------------------------------

func jwtClaims(t *testing.T, tok string) map[string]any {
	t.Helper()
	parts := strings.Split(strings.TrimSpace(tok), ".")
	if len(parts) != 3 {
		t.Fatalf("not a JWT: %q", tok)
	}
	b, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	var c map[string]any
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	return c
}

func TestToken_UnknownScopeListsTheValidOnes(t *testing.T) {
	r := unsay(t, nil, "token", "--patient", "ray", "--scope", "care.admin")
	if r.code != 2 || r.stdout != "" {
		t.Errorf("exit %d stdout %q; want 2 and no token", r.code, r.stdout)
	}
	for _, s := range []string{"care.admin", "care.read.user", "care.read.assistant", "care.write"} {
		if !strings.Contains(r.stderr, s) {
			t.Errorf("message lacks %s: %q", s, r.stderr)
		}
	}
	if r := unsay(t, nil, "token", "--patient", "ray", "--scope", "care.read.user"); r.code != 0 || jwtClaims(t, r.stdout)["scope"] != "care.read.user" {
		t.Errorf("a valid scope: exit %d %s", r.code, r.stderr)
	}
}

func TestToken_WithoutSubMintsAUniqueSubjectAndSaysSo(t *testing.T) {
	a := unsay(t, nil, "token", "--patient", "ray", "--scope", "care.read.user")
	b := unsay(t, nil, "token", "--patient", "ray", "--scope", "care.read.user")
	sa, sb := jwtClaims(t, a.stdout)["sub"], jwtClaims(t, b.stdout)["sub"]
	if sa == sb || sa == "dev" || !strings.HasPrefix(sa.(string), "dev-") {
		t.Errorf("subjects %v and %v: want two distinct dev-… subjects", sa, sb)
	}
	if !strings.Contains(a.stderr, sa.(string)) || !strings.Contains(a.stderr, "--sub") {
		t.Errorf("stderr does not name the minted subject and --sub: %q", a.stderr)
	}
	c := unsay(t, nil, "token", "--patient", "ray", "--scope", "care.write", "--sub", "okafor")
	if jwtClaims(t, c.stdout)["sub"] != "okafor" {
		t.Errorf("--sub okafor gave %v", jwtClaims(t, c.stdout)["sub"])
	}
}

func TestWrite_MissingAuthorNamesTheFlag(t *testing.T) {
	r := unsay(t, nil, "write", "--patient", "ray", "--domain", "weight_bearing", "--value", "x", "--author-label", "Sarah")
	if r.code != 2 || !strings.Contains(r.stderr, "--author is required") || strings.Contains(r.stderr, "authorId") {
		t.Errorf("exit %d, %q: want 2 naming --author (not the JSON field)", r.code, r.stderr)
	}
}

// U12: `unsay write` with a domain ray has no notes of ("walkng") is
// refused, naming his topics and --new-topic, and nothing is saved (the
// next write to it is still refused); the twin, with --new-topic, saves
// the new topic and says so.
func TestWrite_AMistypedTopicIsRefusedNamingTheTopicsAndNewTopicCreatesIt(t *testing.T) {
	s := startServe(t)
	args := []string{"write", "--url", s.url, "--patient", "ray", "--domain", "walkng",
		"--value", "Full weight-bearing.", "--author", "okafor", "--author-label", "Sarah Okafor, physio"}
	for range 2 {
		r := unsay(t, nil, args...)
		if r.code != 1 || !strings.Contains(r.stderr, "409") || !strings.Contains(r.stderr, "weight_bearing") ||
			!strings.Contains(r.stderr, "--new-topic") || !strings.Contains(r.stderr, "nothing was saved") || r.stdout != "" {
			t.Fatalf("write --domain walkng: exit %d, %q %q; want refused naming the topics and --new-topic", r.code, r.stdout, r.stderr)
		}
	}
	ok := unsay(t, nil, append(args, "--new-topic")...)
	if ok.code != 0 || !strings.Contains(ok.stdout, "saved care://ray/walkng as version 1, a new topic for ray") {
		t.Errorf("write --new-topic: exit %d, %q %s", ok.code, ok.stdout, ok.stderr)
	}
}

// V6a: `unsay write --patient rayy` (a patient with no notes) is refused,
// naming --new-patient, and nothing is saved (the next one is refused too);
// "Ray" is refused before sending, naming ray; the twin, with --new-patient,
// saves the new patient's first note and says so.
func TestWrite_AMistypedPatientIsRefusedAndNewPatientCreatesIt(t *testing.T) {
	s := startServe(t)
	args := []string{"write", "--url", s.url, "--patient", "rayy", "--domain", "weight_bearing",
		"--value", "Full weight-bearing.", "--author", "okafor", "--author-label", "Sarah Okafor, physio"}
	for range 2 {
		r := unsay(t, nil, args...)
		if r.code != 1 || !strings.Contains(r.stderr, "409") || !strings.Contains(r.stderr, `"rayy" has no care notes`) ||
			!strings.Contains(r.stderr, "--new-patient") || !strings.Contains(r.stderr, "nothing was saved") || r.stdout != "" {
			t.Fatalf("write --patient rayy: exit %d, %q %q; want refused naming --new-patient", r.code, r.stdout, r.stderr)
		}
	}
	upper := unsay(t, nil, "write", "--url", s.url, "--patient", "Ray", "--domain", "weight_bearing",
		"--value", "Full weight-bearing.", "--author", "okafor", "--author-label", "Sarah Okafor, physio")
	if upper.code != 2 || !strings.Contains(upper.stderr, "did you mean ray?") {
		t.Errorf("write --patient Ray: exit %d, %q; want 2 naming ray", upper.code, upper.stderr)
	}
	known := unsay(t, nil, "write", "--url", s.url, "--patient", "ray", "--domain", "weight_bearing",
		"--value", "Full weight-bearing.", "--author", "okafor", "--author-label", "Sarah Okafor, physio")
	if known.code != 0 || !strings.Contains(known.stdout, "saved care://ray/weight_bearing as version") {
		t.Errorf("write --patient ray: exit %d, %q %s", known.code, known.stdout, known.stderr)
	}
	ok := unsay(t, nil, append(args, "--new-patient")...)
	if ok.code != 0 || !strings.Contains(ok.stdout, `saved care://rayy/weight_bearing as version 1, but "rayy" had no care notes before this`) {
		t.Errorf("write --new-patient: exit %d, %q %s", ok.code, ok.stdout, ok.stderr)
	}
}

func TestWriteAndLink_TellAPersonWhatHappened(t *testing.T) {
	s := startServe(t)
	w := unsay(t, nil, "write", "--url", s.url, "--patient", "ray", "--domain", "weight_bearing",
		"--value", "Full weight-bearing as tolerated.", "--author", "okafor", "--author-label", "Sarah Okafor, physio")
	if w.code != 0 || strings.TrimSpace(w.stdout) != "saved care://ray/weight_bearing as version 3; Ray will hear the retraction at his next turn if its words changed "+
		"(a new author, review date or priority with the same words is not retracted)" {
		t.Errorf("write: exit %d, %q %s", w.code, w.stdout, w.stderr)
	}
	j := unsay(t, nil, "write", "--url", s.url, "--json", "--patient", "ray", "--domain", "exercise",
		"--value", "Heel slides twenty times.", "--author", "okafor", "--author-label", "Sarah Okafor, physio")
	var ans struct {
		URI     string `json:"uri"`
		Version int    `json:"version"`
	}
	if j.code != 0 || json.Unmarshal([]byte(j.stdout), &ans) != nil || ans.URI != "care://ray/exercise/v2" {
		t.Errorf("write --json: exit %d, %q", j.code, j.stdout)
	}
	// A refusal names the flag the server's field stands for.
	bad := unsay(t, nil, "write", "--url", s.url, "--patient", "ray", "--domain", "weight_bearing", "--audience", "assistant",
		"--value", "x", "--author", "okafor", "--author-label", "Sarah Okafor, physio")
	if bad.code != 1 || !strings.Contains(bad.stderr, "refused") {
		t.Errorf("audience change: exit %d, %q", bad.code, bad.stderr)
	}

	l := unsay(t, []string{"TZ=America/New_York"}, "link", "--url", s.url, "--patient", "ray")
	m := regexp.MustCompile(`^(\d{6})\tvalid for 10 minutes, until (\d\d:\d\d) (E[SD]T)`).FindStringSubmatch(l.stdout)
	if l.code != 0 || m == nil {
		t.Fatalf("link: exit %d, %q %s", l.code, l.stdout, l.stderr)
	}
	ny, _ := time.LoadLocation("America/New_York")
	want := time.Now().Add(store.LinkCodeTTL).In(ny)
	got, _ := time.ParseInLocation("15:04", m[2], ny)
	if d := (want.Hour()*60 + want.Minute()) - (got.Hour()*60 + got.Minute()); d < -1 || d > 1 {
		t.Errorf("link says until %s, want about %s (local time)", m[2], want.Format("15:04"))
	}
	lj := unsay(t, nil, "link", "--url", s.url, "--patient", "ray", "--json")
	if !strings.Contains(lj.stdout, `"expiresAt"`) {
		t.Errorf("link --json: %q", lj.stdout)
	}
}

// U14: `unsay link --patient Ray` answered with an internal message ("auth:
// bad configuration: \"patients\" holds an invalid patient id"); it is now a
// usage error saying ids are lower case and naming ray, as `unsay token`
// does, and one that no case fixes says what an id is. Twin: ray is linked
// (TestLink_APatientWithNoCareRecordIsRefusedInWordsNotGivenACode).
func TestLinkAndToken_APatientIdInCapitalsIsToldIdsAreLowerCase(t *testing.T) {
	for _, cmd := range []string{"link", "token"} {
		args := []string{cmd, "--url", "http://127.0.0.1:1", "--patient", "Ray"}
		if cmd == "token" {
			args = []string{cmd, "--patient", "Ray", "--scope", "care.read.user"}
		}
		r := unsay(t, nil, args...)
		if r.code != 2 || !strings.Contains(r.stderr, "patient ids are lower case: did you mean ray?") || strings.Contains(r.stderr, "bad configuration") {
			t.Errorf("%s --patient Ray: exit %d, %q", cmd, r.code, r.stderr)
		}
	}
	if r := unsay(t, nil, "link", "--url", "http://127.0.0.1:1", "--patient", "Ray Smith"); r.code != 2 || !strings.Contains(r.stderr, "a patient id is 1–64 characters") {
		t.Errorf("link --patient \"Ray Smith\": exit %d, %q", r.code, r.stderr)
	}
}

// A patient with no care record (here a mistyped id) gets a sentence
// naming him and what to check, and no code; the twin is Ray's code.
func TestLink_APatientWithNoCareRecordIsRefusedInWordsNotGivenACode(t *testing.T) {
	s := startServe(t)
	r := unsay(t, nil, "link", "--url", s.url, "--patient", "rya")
	if r.code != 1 || regexp.MustCompile(`\b\d{6}\b`).MatchString(r.stdout) ||
		!strings.Contains(r.stderr, `--patient: no care record for patient "rya"`) || !strings.Contains(r.stderr, "check the id") {
		t.Errorf("link --patient rya: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	ok := unsay(t, nil, "link", "--url", s.url, "--patient", "ray")
	if ok.code != 0 || !regexp.MustCompile(`^\d{6}\t`).MatchString(ok.stdout) {
		t.Errorf("link --patient ray: exit %d, %q %s", ok.code, ok.stdout, ok.stderr)
	}
}

// `grants list --patient -` lists the grants the table shows with - (bound
// to no patient: the speech principal's); a patient's own list leaves it
// out, no --patient lists it too, and a stray "-" or an id that is not one
// is a usage error that says what list wants.
func TestGrantsList_DashIsTheGrantsBoundToNoPatientAndStrayArgumentsSayWhatListWants(t *testing.T) {
	s := startServe(t)
	const speech = "internal:unsay-speech"
	for _, tc := range []struct {
		args   []string
		listed bool
	}{{[]string{"--patient", "-"}, true}, {nil, true}, {[]string{"--patient", "ray"}, false}} {
		r := unsay(t, nil, append([]string{"grants", "list", "--db", s.db}, tc.args...)...)
		if r.code != 0 || !strings.HasPrefix(r.stdout, "ID") || strings.Contains(r.stdout, speech) != tc.listed {
			t.Errorf("grants list %v: exit %d, %q %s; want the speech grant listed=%v", tc.args, r.code, r.stdout, r.stderr, tc.listed)
		}
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-"}, "for the grants bound to no patient give --patient -"},
		{[]string{"ray"}, "narrow it with --patient P"},
		{[]string{"--patient", "Ray!"}, `--patient "Ray!" is not a patient id`},
	} {
		r := unsay(t, nil, append(append([]string{"grants", "list"}, tc.args...), "--db", s.db)...)
		if r.code != 2 || !strings.Contains(r.stderr, tc.want) || r.stdout != "" {
			t.Errorf("grants list %v: exit %d, %q %q; want 2 and %q", tc.args, r.code, r.stdout, r.stderr, tc.want)
		}
	}
}

// A token `unsay token --db` mints for ray is listed under ray — an
// operator asked "who can read Ray's notes?" got an empty list while a
// 24 h token for him was live, and "-" (bound to no patient) listed it
// (finding U6); one for ray and sam is listed under each, and under
// neither "-" nor another patient.
func TestGrantsList_ATokenMintedForAPatientIsListedUnderThatPatient(t *testing.T) {
	s := startServe(t)
	grantOf := func(r result) string {
		m := regexp.MustCompile(`grant (internal:cli:\S+);`).FindStringSubmatch(r.stderr)
		if r.code != 0 || m == nil {
			t.Fatalf("token: exit %d, %q", r.code, r.stderr)
		}
		return m[1]
	}
	one := grantOf(unsay(t, nil, "token", "--db", s.db, "--public-url", s.url, "--patient", "ray", "--scope", "care.read.user", "--sub", "carer2"))
	time.Sleep(2 * time.Millisecond) // grant ids carry the millisecond
	two := grantOf(unsay(t, nil, "token", "--db", s.db, "--public-url", s.url, "--patient", "ray", "--patient", "sam", "--scope", "care.read.user", "--sub", "carer3"))
	for _, tc := range []struct {
		patient  string
		one, two bool
	}{{"ray", true, true}, {"sam", false, true}, {"-", false, false}, {"ann", false, false}, {"", true, true}} {
		args := []string{"grants", "list", "--db", s.db}
		if tc.patient != "" {
			args = append(args, "--patient", tc.patient)
		}
		r := unsay(t, nil, args...)
		if r.code != 0 || strings.Contains(r.stdout, one) != tc.one || strings.Contains(r.stdout, two) != tc.two {
			t.Errorf("grants list --patient %q: exit %d, %q %s; want ray's listed=%v, ray and sam's listed=%v", tc.patient, r.code, r.stdout, r.stderr, tc.one, tc.two)
		}
		if tc.patient == "ray" && !regexp.MustCompile(regexp.QuoteMeta(one)+`\s+internal\s+\S+\s+ray\s`).MatchString(r.stdout) {
			t.Errorf("grants list --patient ray does not show ray in the PATIENT column: %q", r.stdout)
		}
	}
}

// `grants revoke --db FILE ID` revokes ID like `grants revoke ID --db FILE`
// (flags may come first, as in every other command; finding V6b): each
// order revokes its own grant, which `grants list` then no longer shows;
// two ids are a usage error that revokes nothing.
func TestGrantsRevoke_TakesTheIdBeforeOrAfterTheFlags(t *testing.T) {
	s := startServe(t)
	grantOf := func(sub string) string {
		r := unsay(t, nil, "token", "--db", s.db, "--public-url", s.url, "--patient", "ray", "--scope", "care.read.user", "--sub", sub)
		m := regexp.MustCompile(`grant (internal:cli:\S+);`).FindStringSubmatch(r.stderr)
		if r.code != 0 || m == nil {
			t.Fatalf("token: exit %d, %q", r.code, r.stderr)
		}
		time.Sleep(2 * time.Millisecond) // grant ids carry the millisecond
		return m[1]
	}
	first, after, kept := grantOf("carer2"), grantOf("carer3"), grantOf("carer4")
	if r := unsay(t, nil, "grants", "revoke", "--db", s.db, first, kept); r.code != 2 || !strings.Contains(r.stderr, "takes one id") {
		t.Errorf("grants revoke with two ids: exit %d, %q; want 2 saying it takes one id", r.code, r.stderr)
	}
	for _, args := range [][]string{{"revoke", first, "--db", s.db}, {"revoke", "--db", s.db, after}} {
		if r := unsay(t, nil, append([]string{"grants"}, args...)...); r.code != 0 {
			t.Errorf("grants %v: exit %d, %q", args, r.code, r.stderr)
		}
	}
	r := unsay(t, nil, "grants", "list", "--db", s.db, "--patient", "ray")
	if r.code != 0 || strings.Contains(r.stdout, first) || strings.Contains(r.stdout, after) || !strings.Contains(r.stdout, kept) {
		t.Errorf("grants list after revoking %s and %s: %q; want only %s left", first, after, r.stdout, kept)
	}
}

// `unsay keygen --out FILE` writes one environment-file line,
// UNSAY_SIGNING_KEY=<base64>, mode 0600, that `export $(cat FILE)` loads as
// the key whose public half keygen printed; run again it keeps the file
// and prints the same public key. The whole line put in the variable
// (UNSAY_SIGNING_KEY=$(cat FILE)) is refused saying how to load it; the
// twin, the value alone, is taken.
func TestKeygen_OutWritesAnEnvironmentFileThatExportCatLoads(t *testing.T) {
	file := filepath.Join(t.TempDir(), "signing.env")
	r := unsay(t, nil, "keygen", "--out", file)
	pub := strings.TrimSpace(r.stdout)
	if r.code != 0 || !regexp.MustCompile(`^UNSAY_SIGNING_PUBLIC_KEY=[A-Za-z0-9+/]{43}=$`).MatchString(pub) {
		t.Fatalf("keygen --out: exit %d, %q %s", r.code, r.stdout, r.stderr)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^UNSAY_SIGNING_KEY=[A-Za-z0-9+/]{43}=\n$`).Match(b) {
		t.Fatalf("the file holds %q, want one line UNSAY_SIGNING_KEY=<base64>", b)
	}
	if fi, err := os.Stat(file); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("file mode %v %v, want 0600", fi.Mode().Perm(), err)
	}
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	loaded, err := exec.Command(sh, "-c", `export $(cat "$1") && printf %s "$UNSAY_SIGNING_KEY"`, "sh", file).Output()
	if err != nil {
		t.Fatal(err)
	}
	k, err := store.ParseSigningKey(string(loaded))
	if err != nil || "UNSAY_SIGNING_PUBLIC_KEY="+store.FormatPublicKey(k.Public().(ed25519.PublicKey)) != pub {
		t.Fatalf("export $(cat FILE) loads %q (%v), not the key of %s", loaded, err, pub)
	}
	if again := unsay(t, nil, "keygen", "--out", file); again.code != 0 || strings.TrimSpace(again.stdout) != pub {
		t.Errorf("keygen --out an existing file: exit %d, %q; want its key's %s", again.code, again.stdout, pub)
	}
	db := seededDB(t)
	whole := unsay(t, []string{"UNSAY_SIGNING_KEY=" + strings.TrimSpace(string(b))}, "verify", "--db", db)
	if whole.code != 1 || !strings.Contains(whole.stderr, "export $(cat FILE)") {
		t.Errorf("UNSAY_SIGNING_KEY=$(cat FILE): exit %d, %q; want the hint", whole.code, whole.stderr)
	}
	value := unsay(t, []string{"UNSAY_SIGNING_KEY=" + string(loaded)}, "verify", "--db", db)
	if strings.Contains(value.stderr, "whole line") || strings.Contains(value.stderr, "UNSAY_SIGNING_KEY:") {
		t.Errorf("UNSAY_SIGNING_KEY=<value>: %q; want it taken", value.stderr)
	}
}

func TestRekey_RefusesWhileAServerHoldsTheDatabase(t *testing.T) {
	s := startServe(t)
	key := []string{"UNSAY_MASTER_KEY=" + base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{9}, 32))}
	// The serve lease is held before the banner is printed.
	r := unsay(t, key, "rekey", "--db", s.db, "--envelope", "local")
	if r.code != 1 || !strings.Contains(r.stderr, "a server holds") || !strings.Contains(r.stderr, s.url) || strings.Contains(r.stdout, "re-sealed") {
		t.Errorf("rekey under a live server: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	// The twin: once it stopped, rekey runs.
	s.stop(t)
	r = unsay(t, key, "rekey", "--db", s.db, "--envelope", "local")
	if r.code != 0 || !strings.Contains(r.stdout, "re-sealed") {
		t.Errorf("rekey after the server stopped: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// --- ask -------------------------------------------------------------------------

func TestAsk_SpeaksTheWalkingInstructionAndShowsTheCardWalkingFirst(t *testing.T) {
	s := startServe(t)
	r := unsay(t, nil, "ask", "--url", s.url, "what's my walking instruction")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	for _, want := range []string{"(CarePlanIntent, topic=\"walking\" → weight_bearing)", "Ray hears: Your walking instruction from", "The card (care) shows:"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("ask lacks %q:\n%s", want, r.stdout)
		}
	}
	if strings.Contains(r.stdout, "<speak>") || strings.Contains(r.stdout, "&quot;") {
		t.Errorf("SSML left in what Ray hears:\n%s", r.stdout)
	}
	sc := bufio.NewScanner(strings.NewReader(r.stdout[strings.Index(r.stdout, "The card"):]))
	sc.Scan() // "The card (care) shows:"
	sc.Scan() // title
	sc.Scan()
	if first := sc.Text(); !strings.Contains(first, "Walking") {
		t.Errorf("the card's first row is %q, want the walking instruction", first)
	}
	// After a write, the next turn withdraws what he heard.
	if w := unsay(t, nil, "write", "--url", s.url, "--patient", "ray", "--domain", "weight_bearing",
		"--value", "Full weight-bearing as tolerated.", "--author", "okafor", "--author-label", "Sarah Okafor, physio"); w.code != 0 {
		t.Fatalf("write: %s", w.stderr)
	}
	var after result
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); {
		after = unsay(t, nil, "ask", "--url", s.url, "open care notes")
		if strings.Contains(after.stdout, "Stop — your walking instruction has changed") {
			break
		}
	}
	if !strings.Contains(after.stdout, "Stop — your walking instruction has changed") || !strings.Contains(after.stdout, "The card (retraction) shows:") {
		t.Errorf("no retraction after the write:\n%s", after.stdout)
	}
	// The twin: a server that verifies signatures refuses an unsigned ask, with the way out.
	v := startServeVerifying(t)
	bad := unsay(t, nil, "ask", "--url", v.url, "open care notes")
	if bad.code != 1 || !strings.Contains(bad.stderr, "--alexa-test-ca") {
		t.Errorf("unsigned ask to a verifying server: exit %d %q", bad.code, bad.stderr)
	}
}

func startServeVerifying(t *testing.T) *server {
	t.Helper()
	db := filepath.Join(t.TempDir(), "unsay.db")
	s := &server{db: db, stdout: newSyncBuf(), stderr: newSyncBuf(), done: make(chan struct{})}
	s.cmd = exec.Command(os.Args[0], "serve", "--addr", "127.0.0.1:0", "--db", db, "--alexa-skill-id", "amzn1.ask.skill.unsay-cli")
	s.cmd.Env = cleanEnv(nil)
	s.cmd.Stdout, s.cmd.Stderr = s.stdout, s.stderr
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = s.cmd.Wait(); close(s.done) }()
	t.Cleanup(func() { s.stop(t) })
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if m := servingRE.FindStringSubmatch(s.stdout.String()); m != nil {
			s.url = m[1]
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("no banner:\n%s%s", s.stdout, s.stderr)
		}
	}
}

func TestAsk_SignedWithATestCAIsAcceptedByAVerifyingServer(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ca")
	first := unsay(t, nil, "ask", "--alexa-test-ca", dir, "open care notes")
	// Nothing is asked on first use, and the exit code says so (3, not 0).
	if first.code != 3 || first.stdout != "" || !strings.Contains(first.stderr, "nothing was asked") ||
		!strings.Contains(first.stderr, "--alexa-roots") || !strings.Contains(first.stderr, "--alexa-cert") {
		t.Fatalf("first use: exit %d, %q %q; want 3, nothing asked, and the serve flags", first.code, first.stdout, first.stderr)
	}
	flags := regexp.MustCompile(`unsay serve (.*)`).FindStringSubmatch(first.stderr)
	if flags == nil {
		t.Fatalf("no serve line in %q", first.stderr)
	}
	db := filepath.Join(t.TempDir(), "unsay.db")
	args := append([]string{"serve", "--addr", "127.0.0.1:0", "--db", db, "--default-patient", "ray"}, strings.Fields(flags[1])...)
	s := &server{db: db, stdout: newSyncBuf(), stderr: newSyncBuf(), done: make(chan struct{})}
	s.cmd = exec.Command(os.Args[0], args...)
	s.cmd.Env = cleanEnv(nil)
	s.cmd.Stdout, s.cmd.Stderr = s.stdout, s.stderr
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = s.cmd.Wait(); close(s.done) }()
	t.Cleanup(func() { s.stop(t) })
	for deadline := time.Now().Add(60 * time.Second); s.url == ""; time.Sleep(20 * time.Millisecond) {
		if m := servingRE.FindStringSubmatch(s.stdout.String()); m != nil {
			s.url = m[1]
		} else if time.Now().After(deadline) {
			t.Fatalf("no banner:\n%s%s", s.stdout, s.stderr)
		}
	}
	if !strings.Contains(s.stdout.String(), "alexa verification on") {
		t.Errorf("the server does not verify:\n%s", s.stdout)
	}
	r := unsay(t, nil, "ask", "--url", s.url, "--alexa-test-ca", dir, "what's my walking instruction")
	if r.code != 0 || !strings.Contains(r.stdout, "Ray hears: Your walking instruction") {
		t.Errorf("signed ask: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	// The twin: the same request unsigned is refused by this server.
	if r := unsay(t, nil, "ask", "--url", s.url, "what's my walking instruction"); r.code != 1 {
		t.Errorf("unsigned ask accepted by a verifying server: %d", r.code)
	}
}
