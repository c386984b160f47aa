// Command unsay keeps a patient's care plan live for a voice assistant and
// takes back what the assistant said when a clinician changes an instruction.
//
//	unsay serve    run the server (MCP at /mcp, /write, /alexa, web pages)
//	unsay ask      say something to a running server's /alexa, as an Echo would
//	unsay token    mint a development bearer token
//	unsay write    sign and POST a clinician's revision to /write
//	unsay link     create a six-digit device-linking code (POST /link)
//	unsay verify   check every hash chain (and the audit log) offline
//	unsay keygen   generate the Ed25519 key that signs chain heads (UNSAY_SIGNING_KEY)
//	unsay rekey    re-seal every stored value under the current key
//	unsay bench    measure write → MCP client → spoken retraction latency
//	unsay client   OAuth clients of the embedded authorization server (add, list, approve, remove)
//	unsay grants   what people granted OAuth clients (list, revoke)
//	unsay version  print the version and commit
//	unsay help     describe every command (unsay help CMD: its flags)
//
// Every flag --foo-bar also reads UNSAY_FOO_BAR; the flag wins. Secrets come
// only from the environment. A command refuses arguments it does not take
// (bridge/cli), and `unsay CMD -h` lists its flags, their UNSAY_ twins and
// the secrets it reads.
package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"
	_ "time/tzdata" // --time-zone works on a machine without /usr/share/zoneinfo

	"github.com/unsay/unsay/bridge/app"
	"github.com/unsay/unsay/bridge/auth"
	"github.com/unsay/unsay/bridge/bench"
	"github.com/unsay/unsay/bridge/cli"
	"github.com/unsay/unsay/bridge/httpapi"
	"github.com/unsay/unsay/bridge/speech"
	"github.com/unsay/unsay/models"
	"github.com/unsay/unsay/skill"
	skillpackage "github.com/unsay/unsay/skill-package"
	"github.com/unsay/unsay/skill/alexaask"
	"github.com/unsay/unsay/skill/alexatest"
	"github.com/unsay/unsay/skill/proactive"
	"github.com/unsay/unsay/store"
	"github.com/unsay/unsay/store/envelope"
)

// version and commit are set at build time with
// -ldflags "-X main.version=v1.2.0 -X main.commit=abc1234"; otherwise they
// come from the module and VCS information Go stamps into the binary.
var version, commit string

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:])
	stop()
	os.Exit(code)
}

// command is one subcommand: its help (cli.Command) and its function.
type command struct {
	cli.Command
	run func(context.Context, []string) error
}

// Secrets, as the -h texts name them.
var (
	secretToken         = cli.Secret{Env: "UNSAY_TOKEN_SECRET", Help: "HS256 key of bearer tokens, ≥ 32 bytes (development default on loopback only)"}
	secretWrite         = cli.Secret{Env: "UNSAY_WRITE_SECRET", Help: "HMAC key of signed writes, ≥ 32 bytes (development default on loopback only)"}
	secretAudit         = cli.Secret{Env: "UNSAY_AUDIT_KEY", Help: "HMAC key of the audit log's chain, ≥ 32 bytes (development default on loopback only)"}
	secretMaster        = cli.Secret{Env: "UNSAY_MASTER_KEY", Help: "base64 AES-256 key for --envelope local"}
	secretPrevious      = cli.Secret{Env: "UNSAY_MASTER_KEYS_PREVIOUS", Help: "comma-separated older master keys that sealed older values"}
	secretKMS           = cli.Secret{Env: "UNSAY_KMS_KEY_ID", Help: "the KMS key for --envelope kms (with the usual AWS credential chain)"}
	secretSigning       = cli.Secret{Env: "UNSAY_SIGNING_KEY", Help: "Ed25519 key that signs chain heads and the audit head (unsay keygen; development default on loopback only)"}
	secretSigningPublic = cli.Secret{Env: "UNSAY_SIGNING_PUBLIC_KEY", Help: "the public half of UNSAY_SIGNING_KEY, to check signed heads"}
	secretLWA           = cli.Secret{Env: "UNSAY_ALEXA_CLIENT_SECRET", Help: "Login with Amazon client secret, for proactive notifications"}
)

// commands lists every subcommand, in the order `unsay help` shows them.
func commands() []command {
	return []command{
		{cli.Command{Name: "serve", Synopsis: "unsay serve [flags]",
			Summary: "Run the server: MCP at /mcp, signed writes at /write, device links at /link, /verify, Alexa at /alexa, and the Echo Show card and clinician page.",
			Secrets: []cli.Secret{secretToken, secretWrite, secretAudit, secretSigning, secretMaster, secretPrevious, secretKMS, secretLWA}}, cmdServe},
		{cli.Command{Name: "ask", Synopsis: `unsay ask [flags] "UTTERANCE" ["UTTERANCE"…]`, Args: "UTTERANCE…",
			Summary: "Say something to a running server's /alexa as an Echo Show would, and print what Ray hears and what the card shows (each utterance is one turn of one session)."}, cmdAsk},
		{cli.Command{Name: "token", Synopsis: "unsay token --patient P --scope S [--scope S…] [--sub NAME] [flags]",
			Summary: "Mint a development bearer token (HS256) for a server and print it.",
			Secrets: []cli.Secret{secretToken}}, cmdToken},
		{cli.Command{Name: "write", Synopsis: `unsay write --patient P --domain D --value "TEXT" --author ID --author-label "NAME, ROLE" [--audio clip.mp3] [flags]`,
			Summary: "Sign a clinician's revision and POST it to a server's /write; print what was saved and what Ray will hear.",
			Secrets: []cli.Secret{secretWrite}}, cmdWrite},
		{cli.Command{Name: "link", Synopsis: "unsay link --patient P [flags]",
			Summary: "Create a six-digit code that links an Echo to a patient (POST /link); print it and when it expires.",
			Secrets: []cli.Secret{secretToken}}, cmdLink},
		{cli.Command{Name: "verify", Synopsis: "unsay verify [--db PATH] [--audit] [flags]",
			Summary: "Check every fact's hash chain (and, with --audit, the audit log) in a database, offline.",
			Secrets: []cli.Secret{secretAudit, secretSigningPublic, secretSigning, secretMaster, secretPrevious, secretKMS}}, cmdVerify},
		{cli.Command{Name: "keygen", Synopsis: "unsay keygen [--out FILE]",
			Summary: "Generate the Ed25519 key that signs chain heads and the audit log's head (UNSAY_SIGNING_KEY) and print its public key."}, cmdKeygen},
		{cli.Command{Name: "rekey", Synopsis: "unsay rekey --envelope local|kms [--db PATH] [flags]",
			Summary: "Re-seal every stored value under the current key, with the server stopped.",
			Secrets: []cli.Secret{secretAudit, secretMaster, secretPrevious, secretKMS}}, cmdRekey},
		{cli.Command{Name: "bench", Synopsis: "unsay bench [--n 200] [flags]",
			Summary: "Measure write → MCP client and write → spoken retraction latency, in-process or against a running server.",
			Secrets: []cli.Secret{secretToken, secretWrite}}, cmdBench},
		{cli.Command{Name: "client", Synopsis: "unsay client add|list|approve|remove [ID] [flags]", Args: "add|list|approve|remove [ID]",
			Summary: "Manage the embedded OAuth authorization server's clients: register one, list them, approve assistant scopes for one, remove one."}, cmdClient},
		{cli.Command{Name: "grants", Synopsis: "unsay grants list|revoke [ID] [flags]", Args: "list|revoke [ID]",
			Summary: "List what people granted OAuth clients, or revoke a grant (effective on the client's next request)."}, cmdGrants},
		{cli.Command{Name: "version", Synopsis: "unsay version",
			Summary: "Print the version, the commit it was built from and the Go version."}, cmdVersion},
		{cli.Command{Name: "help", Synopsis: "unsay help [COMMAND]", Args: "[COMMAND]",
			Summary: "Describe every command, or one command's flags."}, nil},
	}
}

// run dispatches a subcommand and returns the process exit code: 0 done
// (and for help), 1 failed, 2 a command line that cannot run.
func run(ctx context.Context, args []string) int {
	cmds := commands()
	overview := func(w io.Writer) {
		list := make([]cli.Command, len(cmds))
		for i, c := range cmds {
			list[i] = c.Command
		}
		cli.Overview(w, list)
	}
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "-help" || args[0] == "help" && len(args) == 1 {
		overview(os.Stdout)
		return 0
	}
	name := args[0]
	if name == "help" {
		name, args = args[1], []string{args[1], "-h"}
	}
	if name == "--version" || name == "-version" {
		name = "version"
	}
	for _, c := range cmds {
		if c.Name != name || c.run == nil {
			continue
		}
		err := c.run(ctx, args[1:])
		var ue *cli.UsageError
		var ee exitError
		switch {
		case err == nil, errors.Is(err, cli.ErrHelp):
			return 0
		case errors.As(err, &ee):
			return ee.code
		case errors.As(err, &ue):
			fmt.Fprintln(os.Stderr, "unsay "+name+":", err)
			return 2
		}
		fmt.Fprintln(os.Stderr, "unsay "+name+":", err)
		return 1
	}
	list := make([]cli.Command, len(cmds))
	for i, c := range cmds {
		list[i] = c.Command
	}
	msg := fmt.Sprintf("unsay: unknown command %q", name)
	if near := cli.Closest(name, list); near != "" {
		msg += fmt.Sprintf(" (did you mean %q?)", near)
	}
	fmt.Fprintln(os.Stderr, msg+"; `unsay help` lists the commands")
	return 2
}

// exitError carries a specific exit code out of a command (verify: 1 on a broken chain).
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

// newCommand returns the flag set of the named command.
func newCommand(name string) (cli.Command, *flag.FlagSet) {
	for _, c := range commands() {
		if c.Name == name {
			return c.Command, cli.NewFlagSet(c.Command)
		}
	}
	panic("unsay: no command " + name) // every caller names itself
}

// parseFlags parses args for the command (see cli.Parse): flags, then
// UNSAY_ twins; positional arguments are returned only to commands that
// take them and refused otherwise.
func parseFlags(c cli.Command, fs *flag.FlagSet, args []string) ([]string, error) {
	return cli.Parse(c, fs, args, os.Stdout, nil)
}

// usageErr is a command line that cannot run (exit 2), naming the flag.
func usageErr(cmd, format string, a ...any) error {
	return &cli.UsageError{Cmd: cmd, Err: fmt.Errorf(format, a...)}
}

// listFlag is a repeatable string flag (--allowed-origin a --allowed-origin b).
// From the environment it takes a comma-separated list.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error {
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			*l = append(*l, s)
		}
	}
	return nil
}

// ServeLease is the name of the lease a running `unsay serve` holds in its
// database (renewed every 3 s, 9 s TTL), so `unsay rekey` can refuse to
// rewrite values under a live server.
const ServeLease = "unsay/serve"

// cmdServe runs the server: `unsay serve [flags]`. It validates every flag
// first, whether or not its feature is on (quiet hours, time zone, budget,
// URLs), then opens the store (SQLite at --db by default; seeded with the
// demo on an empty database at --seed-clock), serves MCP at /mcp, /write,
// /link, /verify, /alexa, the web pages, /healthz and /readyz (details and
// /metrics on --admin-addr), runs the speech principal (an MCP client of
// this server holding care.read.user only, P-18) and, with
// --alexa-client-id, the out-of-session notifier. It prints a short banner:
// the address actually listened on (port 0 resolved), the store backend,
// the encryption mode (PLAINTEXT when none), Alexa verification, and every
// development default secret in use; the MCP SDK's per-session lines are
// DEBUG. It stops gracefully when ctx ends, and says so.
func cmdServe(ctx context.Context, args []string) error {
	c, fs := newCommand("serve")
	addr := fs.String("addr", "127.0.0.1:8080", "listen address host:port (port 0 picks a free one)")
	db := fs.String("db", "./unsay.db", "SQLite database file, or a postgres:// URL")
	publicURL := fs.String("public-url", "", "public base URL; the MCP resource is {public-url}/mcp (default http://{addr})")
	seedClock := fs.String("seed-clock", "now", "clock the demo seed is built on when the database is empty: now or an RFC 3339 time")
	seed := fs.String("seed", "demo", "what an empty database is seeded with: demo, bench or none")
	var origins, authServers, alexaCerts, speechPatients listFlag
	fs.Var(&origins, "allowed-origin", "browser Origin allowed besides the public URL's (repeatable)")
	fs.Var(&authServers, "authorization-server", "an external OAuth authorization server's issuer, trusted by --token-jwks-url (default: the embedded one on --public-url)")
	tokenJWKS := fs.String("token-jwks-url", "", "the external authorization server's JWKS URL (with --authorization-server)")
	tokenPublicKey := fs.String("token-public-key", "", "RS256/ES256 public key for tokens: PEM text or a path to a PEM file")
	env := fs.String("envelope", "none", "at-rest encryption of values: none, local or kms")
	kmsEndpoint := fs.String("kms-endpoint", "", "KMS endpoint URL override (kms envelope)")
	kmsRegion := fs.String("kms-region", "", "AWS region (kms envelope)")
	skillID := fs.String("alexa-skill-id", "", "the only accepted Alexa applicationId (required when --alexa-verify)")
	alexaVerify := fs.Bool("alexa-verify", true, "verify Alexa request signatures (false is for local development only)")
	alexaRoots := fs.String("alexa-roots", "", "PEM file of extra trust roots for Alexa certificate chains")
	fs.Var(&alexaCerts, "alexa-cert", "URL=PEMFILE: serve that certificate URL's chain from a file (repeatable; tests)")
	defaultPatient := fs.String("default-patient", "", "patient of every unlinked Alexa device (demo only)")
	speechURL := fs.String("speech-mcp-url", "", "MCP endpoint of a remote Unsay for the speech principal (default: this server)")
	speechToken := fs.String("speech-token", "", "bearer token for --speech-mcp-url (care.read.user only; default: minted)")
	fs.Var(&speechPatients, "speech-patient", "patient the speech principal follows from the start (repeatable)")
	clientID := fs.String("alexa-client-id", "", "Login with Amazon client id for proactive notifications (off when empty)")
	proactiveTokenURL := fs.String("proactive-token-url", "", "LWA token endpoint override")
	proactiveAPI := fs.String("proactive-api-url", "", "Proactive Events API base URL override (default: the linked device's region)")
	proactiveLive := fs.Bool("proactive-live", false, "send to the live stage instead of development")
	budget := fs.Int("alert-budget", 3, "proactive notifications per patient per sliding hour (0: none)")
	quiet := fs.String("quiet-hours", "21:00-08:00", "no proactive notifications in this window, patient's time: HH:MM-HH:MM, or off")
	tz := fs.String("time-zone", "Europe/London", "the patient's IANA time zone, for quiet hours")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	adminAddr := fs.String("admin-addr", "", "operators' listen address for readiness details and /metrics (off when empty; keep it private)")
	adminPprof := fs.Bool("admin-pprof", false, "also serve net/http/pprof under /debug/pprof/ on --admin-addr")
	if _, err := parseFlags(c, fs, args); err != nil {
		return err
	}

	// Every flag is checked here, before anything opens, whether or not its
	// feature is on: a typo in --quiet-hours must not wait for the day
	// proactive notifications are switched on.
	var errs []error
	bad := func(flagName, format string, a ...any) {
		errs = append(errs, fmt.Errorf("--%s (%s): %s", flagName, cli.EnvName(flagName), fmt.Sprintf(format, a...)))
	}
	if _, _, err := net.SplitHostPort(*addr); err != nil {
		bad("addr", "%q is not host:port, e.g. 127.0.0.1:8080 (port 0 picks a free one)", *addr)
	}
	if *publicURL != "" {
		if err := checkBaseURL(*publicURL); err != nil {
			bad("public-url", "%q is malformed: %v; want http(s)://host[:port][/path], e.g. https://care.example.org", *publicURL, err)
		}
	}
	for _, o := range origins {
		if err := checkBaseURL(o); err != nil {
			bad("allowed-origin", "%q is malformed: %v; want an origin such as https://care.example.org", o, err)
		}
	}
	for _, s := range authServers {
		if err := checkBaseURL(s); err != nil {
			bad("authorization-server", "%q is malformed: %v; want https://issuer.example.org", s, err)
		}
	}
	for name, v := range map[string]string{"speech-mcp-url": *speechURL, "proactive-token-url": *proactiveTokenURL, "proactive-api-url": *proactiveAPI, "kms-endpoint": *kmsEndpoint} {
		if v != "" {
			if err := checkBaseURL(v); err != nil {
				bad(name, "%q is malformed: %v; want an http(s) URL", v, err)
			}
		}
	}
	switch *seed {
	case "demo", "bench", "none":
	default:
		bad("seed", "%q: want demo, bench or none", *seed)
	}
	switch strings.TrimSpace(*env) {
	case "none", "local", "kms":
	default:
		bad("envelope", "%q: want none, local or kms", *env)
	}
	if *budget < 0 {
		bad("alert-budget", "%d: want 0 (no proactive notifications) or a positive count per patient per hour, e.g. 3", *budget)
	}
	loc, err := time.LoadLocation(*tz)
	if err != nil || *tz == "" || strings.EqualFold(*tz, "local") {
		bad("time-zone", "%q is not an IANA time zone: want a name such as Europe/London or America/New_York", *tz)
		loc = time.UTC
	}
	if _, err := proactive.ParseQuietHours(*quiet, loc); err != nil {
		bad("quiet-hours", "%q: want HH:MM-HH:MM in 24-hour time (00:00–23:59), e.g. 21:00-08:00, or off", *quiet)
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		bad("log-level", "%q: want debug, info, warn or error", *logLevel)
	}
	cfg := app.Config{
		Addr: *addr, DB: *db, PublicURL: *publicURL, Seed: *seed, AdminAddr: *adminAddr, AdminPprof: *adminPprof,
		AllowedOrigins: origins, AuthorizationServers: authServers, TokenJWKSURL: *tokenJWKS,
		Envelope: strings.TrimSpace(*env), KMSEndpoint: *kmsEndpoint, KMSRegion: *kmsRegion,
		TokenSecret: []byte(os.Getenv("UNSAY_TOKEN_SECRET")), WriteSecret: []byte(os.Getenv("UNSAY_WRITE_SECRET")),
		AuditKey: []byte(os.Getenv("UNSAY_AUDIT_KEY")), SigningKey: []byte(os.Getenv("UNSAY_SIGNING_KEY")),
		SpeechMCPURL: *speechURL, SpeechToken: *speechToken, SpeechPatients: speechPatients,
		AlexaClientID: *clientID, AlexaClientSecret: os.Getenv("UNSAY_ALEXA_CLIENT_SECRET"),
		ProactiveTokenURL: *proactiveTokenURL, ProactiveAPIBase: *proactiveAPI, ProactiveLive: *proactiveLive,
		AlertBudget: *budget, QuietHours: *quiet, TimeZone: *tz,
	}
	if *budget == 0 {
		cfg.AlertBudget = -1 // none: app.Config reads 0 as the default (3)
	}
	if ck := strings.TrimSpace(*seedClock); ck != "" && ck != "now" {
		t, err := time.Parse(time.RFC3339, ck)
		if err != nil {
			bad("seed-clock", "%q: want now or an RFC 3339 time such as 2026-10-08T09:14:00Z", ck)
		}
		cfg.SeedClock = t
	}
	if k := strings.TrimSpace(*tokenPublicKey); k != "" {
		cfg.TokenPublicKeyPEM = []byte(k)
		if !strings.HasPrefix(k, "-----BEGIN") {
			b, err := os.ReadFile(k)
			if err != nil {
				bad("token-public-key", "cannot read %s: %v; give PEM text or the path of a PEM file", k, unwrapPath(err))
			}
			cfg.TokenPublicKeyPEM = b
		}
	}
	cfg.Alexa = skill.Config{SkillID: *skillID, Verify: *alexaVerify, DefaultPatient: *defaultPatient}
	if *defaultPatient != "" && !models.ValidID(*defaultPatient) {
		bad("default-patient", "%q: a patient id is 1–64 characters of a-z 0-9 _ . -", *defaultPatient)
	}
	for _, p := range speechPatients {
		if !models.ValidID(p) {
			bad("speech-patient", "%q: a patient id is 1–64 characters of a-z 0-9 _ . -", p)
		}
	}
	if *alexaRoots != "" {
		roots, err := skill.ReadCertificatesFile(*alexaRoots)
		if err != nil {
			bad("alexa-roots", "%v", err)
		}
		cfg.Alexa.ExtraRoots = roots
	}
	overrides, err := skill.ParseCertOverrides(alexaCerts)
	if err != nil {
		bad("alexa-cert", "%v; want URL=PEMFILE", err)
	}
	cfg.Alexa.CertOverrides = overrides
	if err := checkDBPath(*db); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return &cli.UsageError{Cmd: "serve", Err: err}
	}
	cfg.Logger = slog.New(cli.QuietSDK(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})))

	a, err := app.New(ctx, cfg)
	if err != nil {
		return serveError(err, *db, *env)
	}
	defer a.Close()

	// The serve lease tells `unsay rekey` that a server holds this database.
	// It is held before the banner says the server is up (or, on a database
	// another instance already holds, the banner waits at most 2 s).
	lctx, lcancel := context.WithCancel(ctx)
	ldone, held := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(ldone)
		k := &store.LeaseKeeper{Store: a.Store, Holder: servingHolder(a), TTL: app.SpeechLeaseTTL}
		first := true
		onAcquire := func(string) {
			if first {
				first = false
				close(held)
			}
		}
		if err := k.Run(lctx, []string{ServeLease}, onAcquire, func(string) {}); err != nil && lctx.Err() == nil {
			cfg.Logger.Warn("serve lease", "err", err)
		}
	}()
	select {
	case <-held:
	case <-time.After(2 * time.Second):
	}
	served := make(chan error, 1)
	go func() { served <- a.Serve(ctx) }()
	// The banner says the server is up once Ray can be answered: the speech
	// principal has read his facts (or 15 s passed; /readyz tells the rest).
	for deadline := time.Now().Add(15 * time.Second); !a.Speech.State().Connected && time.Now().Before(deadline) && ctx.Err() == nil; {
		time.Sleep(20 * time.Millisecond)
	}
	fmt.Print(banner(a, *db))
	err = <-served
	lcancel()
	<-ldone
	a.Close()
	if err == nil {
		fmt.Fprintln(os.Stderr, "unsay stopped: streams closed, database closed.")
	}
	return err
}

// servingHolder names this server in its serve lease: the URL and the pid.
func servingHolder(a *app.App) string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s on %s (pid %d)", a.URL(), host, os.Getpid())
}

// banner is the few lines `unsay serve` prints once it listens: where it
// is (the resolved address), then the startup notes grouped by topic — the
// store and its encryption, Alexa, the speech principal, development
// secrets, the rest — and how to stop it.
func banner(a *app.App, db string) string {
	parts := strings.Split(a.StartupLine(), " | ")
	var b strings.Builder
	fmt.Fprintf(&b, "Unsay is serving %s (listening on %s)\n", a.URL(), a.ListenAddr())
	var storeNotes, alexa, speechNotes, dev, other []string
	for _, p := range parts[1:] {
		switch {
		case p == "store sqlite":
			storeNotes = append(storeNotes, p+" at "+db)
		case strings.HasPrefix(p, "store "), strings.HasPrefix(p, "encryption "):
			storeNotes = append(storeNotes, p)
		case strings.Contains(strings.ToLower(p), "alexa") || strings.HasPrefix(p, "default patient") || strings.HasPrefix(p, "proactive"):
			alexa = append(alexa, p)
		case strings.HasPrefix(p, "speech principal"):
			speechNotes = append(speechNotes, p)
		case strings.HasPrefix(p, "DEV DEFAULT "):
			dev = append(dev, strings.TrimPrefix(p, "DEV DEFAULT "))
		default:
			other = append(other, p)
		}
	}
	for _, items := range [][]string{storeNotes, alexa, speechNotes} {
		if len(items) > 0 {
			fmt.Fprintf(&b, "  %s\n", strings.Join(items, "; "))
		}
	}
	if len(dev) > 0 {
		fmt.Fprintf(&b, "  DEVELOPMENT default secrets: %s (refused off loopback)\n", strings.Join(dev, ", "))
	}
	if len(other) > 0 {
		fmt.Fprintf(&b, "  %s\n", strings.Join(other, "; "))
	}
	fmt.Fprintf(&b, "  card %s/echo.html · clinician page %s/clinician · Ctrl-C stops it\n", a.URL(), a.URL())
	return b.String()
}

// checkBaseURL accepts an absolute http(s) URL with a host and without
// query or fragment.
func checkBaseURL(raw string) error {
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return errors.New("not a URL")
	case u.Scheme != "http" && u.Scheme != "https":
		return errors.New("no http:// or https:// scheme")
	case u.Host == "" || u.Hostname() == "":
		return errors.New("no host")
	case u.RawQuery != "" || u.Fragment != "":
		return errors.New("it has a query or fragment")
	}
	return nil
}

// checkDBPath refuses a SQLite path whose folder does not exist, naming the
// path once and the fix (a postgres:// URL is checked when it connects).
func checkDBPath(db string) error {
	if store.IsPostgresDSN(db) {
		return nil
	}
	dir := filepath.Dir(db)
	st, err := os.Stat(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("--db (UNSAY_DB) %s: the folder %s does not exist; create it, or give another file with --db", db, dir)
	case err != nil:
		return fmt.Errorf("--db (UNSAY_DB) %s: %v", db, unwrapPath(err))
	case !st.IsDir():
		return fmt.Errorf("--db (UNSAY_DB) %s: %s is not a folder", db, dir)
	}
	return nil
}

// unwrapPath drops the *PathError wrapper (whose message repeats the path)
// so a message names the path once.
func unwrapPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// serveError rewords app.New's errors for the terminal: the store's prefix
// once, and the envelope flag when the database is sealed and none was given.
func serveError(err error, db, env string) error {
	msg := err.Error()
	for strings.Contains(msg, "store: store: ") {
		msg = strings.Replace(msg, "store: store: ", "store: ", 1)
	}
	if strings.Contains(msg, "sealed values and no envelope") && strings.TrimSpace(env) == "none" {
		msg += "; e.g. `unsay serve --db " + db + " --envelope local` with UNSAY_MASTER_KEY set"
	}
	if strings.Contains(msg, "unable to open database file") {
		msg = fmt.Sprintf("--db (UNSAY_DB) %s: cannot open or create the database file there (permissions?): %s", db, msg)
	}
	return errors.New(msg)
}

// cmdAsk talks to a running server's /alexa from the terminal:
//
//	unsay ask [--url URL] [--screen=false] [--apl-version V] [--json] "what's my walking instruction"
//
// Each utterance is matched against the skill package's interaction model
// (skill/alexaask): intent, slots, entity resolutions; "open care notes"
// (or "") is a LaunchRequest. Several utterances are turns of one session.
// Unsigned requests suit a development server (--alexa-verify=false
// --default-patient ray, on loopback); --alexa-test-ca DIR signs them with a
// test CA kept in DIR (created on first use, with the serve flags printed).
// It prints what Ray hears (SSML as plain text), what happens next and what
// the card shows; --json prints the response envelopes, --print-request the
// request bodies.
func cmdAsk(ctx context.Context, args []string) error {
	c, fs := newCommand("ask")
	base := fs.String("url", "http://127.0.0.1:8080", "the server's base URL; requests go to {url}/alexa")
	skillID := fs.String("alexa-skill-id", "amzn1.ask.skill.unsay-cli", "applicationId the requests carry (must equal the server's --alexa-skill-id when it verifies)")
	locale := fs.String("locale", "en-GB", "interaction model and request locale: en-GB or en-US")
	screen := fs.Bool("screen", true, "an Echo Show (APL card); false for a device without a screen")
	aplVersion := fs.String("apl-version", alexaask.DefaultAPLVersion, "the screen's APL runtime.maxVersion")
	user := fs.String("user-id", "amzn1.ask.account.unsay-cli", "the Alexa user id (an unlinked one hears --default-patient)")
	sessionID := fs.String("session", "", "continue this session id instead of opening a new one")
	testCA := fs.String("alexa-test-ca", "", "sign requests with the test CA in this folder (created when empty); for a server with verification on")
	asJSON := fs.Bool("json", false, "print each response envelope as JSON instead of text")
	printReq := fs.Bool("print-request", false, "also print each request body sent")
	utterances, err := parseFlags(c, fs, args)
	if err != nil {
		return err
	}
	if len(utterances) == 0 {
		return usageErr("ask", `say something: unsay ask "what's my walking instruction" (or "open care notes")`)
	}
	var raw []byte
	for _, l := range skillpackage.Locales() {
		if l == *locale {
			raw, err = readModel(l)
			if err != nil {
				return err
			}
		}
	}
	if raw == nil {
		return usageErr("ask", "--locale %q: want one of %s", *locale, strings.Join(skillpackage.Locales(), ", "))
	}
	model, err := alexaask.ParseModel(raw)
	if err != nil {
		return err
	}
	client := &alexaask.Client{URL: strings.TrimRight(*base, "/") + "/alexa"}
	if err := checkBaseURL(*base); err != nil {
		return usageErr("ask", "--url %q is malformed: %v", *base, err)
	}
	if *testCA != "" {
		pki, created, err := loadOrCreateCA(*testCA)
		if err != nil {
			return fmt.Errorf("--alexa-test-ca %s: %w", *testCA, err)
		}
		if created {
			fmt.Fprintf(os.Stderr, "unsay ask: created a test CA in %s. Start the server trusting it (loopback only), then ask again:\n  unsay serve --alexa-skill-id %s --alexa-roots %s --alexa-cert %s=%s\n",
				*testCA, *skillID, filepath.Join(*testCA, alexatest.RootFile), alexatest.CertURL, filepath.Join(*testCA, alexatest.ChainFile))
			return nil
		}
		client.CA = pki
	}
	dev := &alexaask.Device{SkillID: *skillID, UserID: *user, SessionID: *sessionID, Locale: *locale, Screen: *screen, APLVersion: *aplVersion}
	if *sessionID != "" {
		dev.Request(alexaask.Match{Launch: true}, time.Now()) // the session exists: later turns are not new
	}
	for _, u := range utterances {
		m := model.Understand(u)
		req := dev.Request(m, time.Now())
		body := req.JSON()
		if !*asJSON {
			if m.Launch {
				fmt.Printf("» %s  (LaunchRequest)\n", u)
			} else {
				fmt.Printf("» %s  (%s%s)\n", u, m.Intent, slotSummary(m))
			}
		}
		if *printReq {
			var pretty bytes.Buffer
			_ = json.Indent(&pretty, body, "", "  ")
			fmt.Printf("%s\n", pretty.String())
		}
		answer, err := client.Send(ctx, body)
		if err != nil {
			return err
		}
		if *asJSON {
			os.Stdout.Write(answer)
			fmt.Println()
			continue
		}
		a, err := alexaask.ReadAnswer(answer)
		if err != nil {
			return err
		}
		fmt.Print(a.String())
	}
	return nil
}

// readModel reads the skill package's interaction model for a locale.
func readModel(locale string) ([]byte, error) {
	f, err := skillpackage.FS().Open("interactionModels/custom/" + locale + ".json")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

// slotSummary is ", topic=walking → weight_bearing" for the matched slots.
func slotSummary(m alexaask.Match) string {
	var s []string
	for _, v := range m.Slots {
		switch {
		case v.Value == "":
		case v.ResolvedID != "":
			s = append(s, fmt.Sprintf("%s=%q → %s", v.Name, v.Value, v.ResolvedID))
		default:
			s = append(s, fmt.Sprintf("%s=%q", v.Name, v.Value))
		}
	}
	if len(s) == 0 {
		return ""
	}
	return ", " + strings.Join(s, ", ")
}

// loadOrCreateCA loads the test CA saved in dir, or creates and saves one
// (created reports which).
func loadOrCreateCA(dir string) (pki *alexatest.PKI, created bool, err error) {
	if _, err := os.Stat(filepath.Join(dir, alexatest.KeyFile)); err == nil {
		pki, err := alexatest.Load(dir)
		return pki, false, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, false, unwrapPath(err)
	}
	if pki, err = alexatest.NewPKI(); err != nil {
		return nil, false, err
	}
	return pki, true, pki.Save(dir)
}

// cmdToken mints a development bearer token (HS256, aud {public-url}/mcp)
// and prints only the JWT on stdout:
//
//	unsay token --patient ray [--patient …] --scope care.read.user [--scope …]
//	            [--sub NAME] [--ttl 1h] [--public-url URL]
//
// Without --sub it mints a unique subject (dev-<random>) and says so on
// stderr: two tokens never share a subject, and so never an MCP session
// identity, by accident (issue 12). For /write with a bearer token the
// subject must equal authorId: give --sub. The secret is
// UNSAY_TOKEN_SECRET, or auth.DevTokenSecret (said on stderr).
func cmdToken(ctx context.Context, args []string) error {
	c, fs := newCommand("token")
	var patients, scopes listFlag
	fs.Var(&patients, "patient", "patient id the token is bound to (repeatable)")
	fs.Var(&scopes, "scope", "scope: care.read.user, care.read.assistant, care.write, care.write.assistant or care.link (repeatable)")
	sub := fs.String("sub", "", "the token's subject (sub): the audit actor; for /write it must equal authorId (default: a unique dev-… subject)")
	ttl := fs.Duration("ttl", time.Hour, "lifetime of the token, e.g. 30m or 24h")
	publicURL := fs.String("public-url", "http://127.0.0.1:8080", "the server's public URL; the token's aud is {public-url}/mcp")
	db := fs.String("db", "", "sign with the embedded authorization server's key in this database (a public URL, where HS256 is off)")
	env := fs.String("envelope", "none", "with --db: the envelope the keys are sealed with (none, local, kms)")
	if _, err := parseFlags(c, fs, args); err != nil {
		return err
	}
	valid := make([]string, 0, 3)
	for _, s := range models.AllScopes() {
		valid = append(valid, string(s))
	}
	switch {
	case len(patients) == 0:
		return usageErr("token", "--patient is required: the patient the token reads or writes, e.g. --patient ray")
	case len(scopes) == 0:
		return usageErr("token", "--scope is required: one or more of %s", strings.Join(valid, ", "))
	case *ttl <= 0:
		return usageErr("token", "--ttl %s: want a positive duration such as 1h", *ttl)
	}
	for _, p := range patients {
		if !models.ValidID(p) {
			return usageErr("token", "--patient %q: a patient id is 1–64 characters of a-z 0-9 _ . -", p)
		}
	}
	sc := make([]models.Scope, len(scopes))
	for i, s := range scopes {
		sc[i] = models.Scope(s)
		if !sc[i].Valid() {
			return usageErr("token", "--scope %q is not a scope Unsay knows: want %s", s, strings.Join(valid, ", "))
		}
	}
	if err := checkBaseURL(*publicURL); err != nil {
		return usageErr("token", "--public-url %q is malformed: %v", *publicURL, err)
	}
	subject := *sub
	if subject == "" {
		subject = "dev-" + randomHex(6)
		fmt.Fprintf(os.Stderr, "unsay token: no --sub: the subject is %s (give --sub NAME to write as a clinician)\n", subject)
	}
	if *db != "" {
		tok, err := mintWithAS(ctx, *db, *env, strings.TrimRight(*publicURL, "/"), subject, sc, patients, *ttl) // main_oauth.go
		if err != nil {
			return err
		}
		fmt.Println(tok)
		return nil
	}
	tok, err := auth.Mint(auth.Config{Secret: secretFromEnv("UNSAY_TOKEN_SECRET", auth.DevTokenSecret, "token"), PublicURL: *publicURL},
		subject, sc, patients, *ttl)
	if err != nil {
		return err
	}
	fmt.Println(tok)
	return nil
}

// writeFlags maps /write's JSON fields to the flags of `unsay write`, so a
// refusal names the flag a person typed.
var writeFlags = map[string]string{
	"patient": "--patient", "domain": "--domain", "value": "--value", "authorId": "--author",
	"authorLabel": "--author-label", "audience": "--audience", "staleAfter": "--stale-after", "priority": "--priority",
}

// cmdWrite signs a clinician's revision with the shared write secret and
// POSTs it to {url}/write, then prints what was saved — "saved
// care://ray/weight_bearing as version 3; Ray will hear the retraction at
// his next turn" — or, with --json, the server's JSON answer. A refusal is
// printed with the flag it concerns and exits 1:
//
//	unsay write --url URL --patient ray --domain weight_bearing --value "…"
//	            --author okafor --author-label "Sarah Okafor, physio"
//	            [--audience user] [--stale-after T] [--priority P] [--json]
//
// --stale-after is an RFC 3339 time or a duration from now ("72h").
// The secret is UNSAY_WRITE_SECRET, or httpapi.DevWriteSecret (said on stderr).
func cmdWrite(ctx context.Context, args []string) error {
	c, fs := newCommand("write")
	base := fs.String("url", "http://127.0.0.1:8080", "the server's base URL")
	req := httpapi.WriteRequest{}
	fs.StringVar(&req.Patient, "patient", "", "patient id, e.g. ray")
	fs.StringVar(&req.Domain, "domain", "", "domain, e.g. weight_bearing")
	fs.StringVar(&req.Value, "value", "", "the instruction, as the clinician wrote it")
	fs.StringVar(&req.AuthorID, "author", "", "the clinician's id, e.g. okafor")
	fs.StringVar(&req.AuthorLabel, "author-label", "", `how the patient hears the author, e.g. "Sarah Okafor, physio"`)
	audience := fs.String("audience", string(models.AudienceUser), "user (speakable) or assistant (never spoken); fixed per domain")
	staleAfter := fs.String("stale-after", "", "RFC 3339 time, or a duration from now (72h), after which the fact is stale")
	priority := fs.String("priority", "", "0…1, a hint for hosts")
	asJSON := fs.Bool("json", false, "print the server's JSON answer instead of a sentence")
	audioFile := fs.String("audio", "", "a clip the fact carries (.mp3 or .wav, at most 1 MiB; a speakable one must be an MP3 Alexa plays); --value describes it")
	audioType := fs.String("audio-type", "", "the clip's MIME type (audio/mpeg or audio/wav); default from the file's extension")
	if _, err := parseFlags(c, fs, args); err != nil {
		return err
	}
	if *audioFile != "" {
		clip, typ, err := readClip(*audioFile, *audioType)
		if err != nil {
			return usageErr("write", "--audio %s: %v", *audioFile, err)
		}
		req.Audio, req.AudioType = base64.StdEncoding.EncodeToString(clip), typ
	}
	for _, f := range []struct{ name, v, example string }{
		{"patient", req.Patient, "--patient ray"}, {"domain", req.Domain, "--domain weight_bearing"},
		{"value", req.Value, `--value "Full weight-bearing as tolerated."`}, {"author", req.AuthorID, "--author okafor"},
		{"author-label", req.AuthorLabel, `--author-label "Sarah Okafor, physio"`},
	} {
		if strings.TrimSpace(f.v) == "" {
			return usageErr("write", "--%s is required, e.g. %s", f.name, f.example)
		}
	}
	req.Audience = models.Audience(*audience)
	if !req.Audience.Valid() {
		return usageErr("write", "--audience %q: want user (speakable) or assistant (never spoken)", *audience)
	}
	if *staleAfter != "" {
		if d, err := time.ParseDuration(*staleAfter); err == nil {
			req.StaleAfter = time.Now().Add(d).UTC().Format(time.RFC3339)
		} else if _, err := time.Parse(time.RFC3339, *staleAfter); err == nil {
			req.StaleAfter = *staleAfter
		} else {
			return usageErr("write", "--stale-after %q: want an RFC 3339 time (2026-10-12T09:00:00Z) or a duration from now (72h)", *staleAfter)
		}
	}
	if *priority != "" {
		p, err := strconv.ParseFloat(*priority, 64)
		if err != nil || p < 0 || p > 1 {
			return usageErr("write", "--priority %q: want a number from 0 to 1", *priority)
		}
		req.Priority = &p
	}
	if err := checkBaseURL(*base); err != nil {
		return usageErr("write", "--url %q is malformed: %v", *base, err)
	}
	body, err := json.Marshal(req)
	if err != nil {
		return err
	}
	secret := secretFromEnv("UNSAY_WRITE_SECRET", httpapi.DevWriteSecret, "write")
	url := strings.TrimRight(*base, "/") + "/write"
	for attempt := 1; ; attempt++ {
		ts := time.Now().Unix()
		status, answer, err := post(ctx, url, body, map[string]string{
			httpapi.HeaderTimestamp: strconv.FormatInt(ts, 10),
			httpapi.HeaderSignature: httpapi.SignWrite(secret, ts, body),
		})
		if err != nil {
			return err
		}
		// A fresh invocation is never a replay of itself: "replayed" means an
		// identical body was signed in the same second by an earlier write
		// (a revert, say). Sign again in the next second so it is applied.
		var r httpapi.WriteResponse
		if status == http.StatusOK && json.Unmarshal(answer, &r) == nil && r.Replayed && attempt < 3 {
			time.Sleep(time.Until(time.Unix(ts+1, 0)))
			continue
		}
		if *asJSON {
			return printAnswer(url, status, answer, nil)
		}
		return printAnswer(url, status, answer, func(answer []byte) string { return writeSentence(req, answer) })
	}
}

// readClip reads the --audio file, at most models.MaxAudioBytes, and its
// MIME type: typ if given, else from the extension (.mp3, .wav). The
// server checks the container (store.Validate).
func readClip(path, typ string) ([]byte, string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, "", err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, models.MaxAudioBytes+1))
	if err != nil {
		return nil, "", err
	}
	if len(b) > models.MaxAudioBytes {
		return nil, "", fmt.Errorf("a clip may be at most %d bytes (1 MiB)", models.MaxAudioBytes)
	}
	if typ == "" {
		switch strings.ToLower(filepath.Ext(path)) {
		case ".mp3":
			typ = models.AudioMPEG
		case ".wav", ".wave":
			typ = models.AudioWAV
		default:
			return nil, "", errors.New("cannot tell its type from the name: add --audio-type audio/mpeg or audio/wav")
		}
	}
	return b, typ, nil
}

// writeSentence says what an accepted write did, for a person.
func writeSentence(req httpapi.WriteRequest, answer []byte) string {
	var r httpapi.WriteResponse
	if err := json.Unmarshal(answer, &r); err != nil || r.URI == "" {
		return string(answer)
	}
	fact := r.URI
	if i := strings.LastIndex(fact, "/v"); i > 0 {
		fact = fact[:i]
	}
	who := capitalize(req.Patient)
	if a := r.Audio; a != nil && !r.Unchanged && !r.Replayed {
		fact += fmt.Sprintf(" (a %.1f s %s clip)", float64(a.DurationMs)/1000, a.MIMEType)
	}
	switch {
	case r.Unchanged:
		return fmt.Sprintf("unchanged: %s is already version %d with these words; nothing was saved\n", fact, r.Version)
	case r.Replayed:
		return fmt.Sprintf("already saved: %s version %d (this signed request was applied before)\n", fact, r.Version)
	case req.Audience == models.AudienceAssistant:
		return fmt.Sprintf("saved %s as version %d; assistant-only: it is never spoken to %s\n", fact, r.Version, who)
	case r.Version == 1:
		return fmt.Sprintf("saved %s as version 1 (a new topic); %s hears it when he asks about it\n", fact, who)
	}
	return fmt.Sprintf("saved %s as version %d; %s will hear the retraction at his next turn\n", fact, r.Version, who)
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// cmdLink creates a six-digit device-linking code for a patient through
// POST {url}/link and prints the code, how long it is valid and until when
// in local time ("482913  valid for 10 minutes, until 10:24 BST"), and the
// server's note when an older code was retired (at most 3 live codes):
//
//	unsay link --url URL --patient ray [--token T] [--public-url URL] [--json]
//
// Without --token it mints a five-minute care.link token bound to the
// patient (sub "unsay-link", aud {public-url}/mcp, public URL defaulting to
// --url) with UNSAY_TOKEN_SECRET or the development default.
func cmdLink(ctx context.Context, args []string) error {
	c, fs := newCommand("link")
	base := fs.String("url", "http://127.0.0.1:8080", "the server's base URL")
	patient := fs.String("patient", "", "patient id, e.g. ray")
	token := fs.String("token", "", "a bearer token with care.link bound to the patient (default: mint one)")
	publicURL := fs.String("public-url", "", "the server's public URL, for a minted token's audience (default: --url)")
	asJSON := fs.Bool("json", false, "print the server's JSON answer instead of a sentence")
	if _, err := parseFlags(c, fs, args); err != nil {
		return err
	}
	if *patient == "" {
		return usageErr("link", "--patient is required: the patient the Echo will be linked to, e.g. --patient ray")
	}
	if err := checkBaseURL(*base); err != nil {
		return usageErr("link", "--url %q is malformed: %v", *base, err)
	}
	if *token == "" {
		pub := *publicURL
		if pub == "" {
			pub = *base
		}
		tok, err := auth.Mint(auth.Config{Secret: secretFromEnv("UNSAY_TOKEN_SECRET", auth.DevTokenSecret, "token"), PublicURL: pub},
			"unsay-link", []models.Scope{models.ScopeLink}, []string{*patient}, 5*time.Minute)
		if err != nil {
			return err
		}
		*token = tok
	}
	body, err := json.Marshal(httpapi.LinkRequest{Patient: *patient})
	if err != nil {
		return err
	}
	format := func(answer []byte) string { return linkSentence(answer, time.Local) }
	if *asJSON {
		format = nil
	}
	return postAndPrint(ctx, strings.TrimRight(*base, "/")+"/link", body, map[string]string{"Authorization": "Bearer " + *token}, format)
}

// linkSentence formats a /link answer in loc: the code, its validity and
// its expiry in local time, and any note the server added.
func linkSentence(answer []byte, loc *time.Location) string {
	var l struct {
		httpapi.LinkResponse
		Note string `json:"note"`
	}
	if err := json.Unmarshal(answer, &l); err != nil || l.Code == "" {
		return string(answer)
	}
	exp, err := time.Parse(time.RFC3339, l.ExpiresAt)
	if err != nil {
		return fmt.Sprintf("%s\texpires %s\n", l.Code, l.ExpiresAt)
	}
	s := fmt.Sprintf("%s\tvalid for %s, until %s (single use); Ray says “my code is %s”\n",
		l.Code, spokenMinutes(store.LinkCodeTTL), exp.In(loc).Format("15:04 MST"), strings.Join(strings.Split(l.Code, ""), " "))
	if l.Note != "" {
		s += l.Note + "\n"
	}
	return s
}

func spokenMinutes(d time.Duration) string {
	m := int(d.Round(time.Minute) / time.Minute)
	if m == 1 {
		return "1 minute"
	}
	return fmt.Sprintf("%d minutes", m)
}

// secretFromEnv returns the secret in env, or dev (announced on stderr as
// the development default for what) when env is unset or empty.
func secretFromEnv(env, dev, what string) []byte {
	if v := os.Getenv(env); v != "" {
		return []byte(v)
	}
	fmt.Fprintf(os.Stderr, "unsay: %s is unset: using the DEVELOPMENT default %s secret\n", env, what)
	return []byte(dev)
}

// postAndPrint POSTs a JSON body with headers (30 s timeout) and prints the
// answer on stdout, through format when given and the answer is 2xx. A
// non-2xx answer is reported on stderr and exits 1.
func postAndPrint(ctx context.Context, url string, body []byte, headers map[string]string, format func([]byte) string) error {
	status, answer, err := post(ctx, url, body, headers)
	if err != nil {
		return err
	}
	return printAnswer(url, status, answer, format)
}

// post POSTs a JSON body with headers (30 s timeout) and returns the status
// and up to 1 MiB of the answer.
func post(ctx context.Context, url string, body []byte, headers map[string]string) (int, []byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("no answer from %s (is `unsay serve` running there? give --url): %w", url, err)
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return 0, nil, fmt.Errorf("reading the answer: %w", err)
	}
	return resp.StatusCode, answer, nil
}

// printAnswer prints a 2xx answer (through format when given). A non-2xx
// answer is reported on stderr — the server's message, and the flag its
// field names — with the JSON on stdout when format is nil, and exits 1.
func printAnswer(url string, status int, answer []byte, format func([]byte) string) error {
	ok := status >= 200 && status < 300
	switch {
	case ok && format != nil:
		fmt.Print(format(answer))
		return nil
	case ok || format == nil:
		os.Stdout.Write(answer)
		if len(answer) > 0 && answer[len(answer)-1] != '\n' {
			fmt.Println()
		}
	}
	if ok {
		return nil
	}
	var e struct {
		Error string `json:"error"`
		Field string `json:"field"`
	}
	msg := strings.TrimSpace(string(answer))
	if json.Unmarshal(answer, &e) == nil && e.Error != "" {
		msg = e.Error
		if f := writeFlags[e.Field]; f != "" {
			msg = f + ": " + msg
		} else if e.Field != "" {
			msg = e.Field + ": " + msg
		}
	}
	fmt.Fprintf(os.Stderr, "unsay: %s refused it (%d %s): %s\n", url, status, http.StatusText(status), msg)
	return exitError{code: 1}
}

// cmdVerify checks every hash chain (P-5) and its signed head (P-26) and,
// with --audit, the audit log's HMAC chain (P-14) and its signed head,
// offline: `unsay verify --db PATH [--audit] [--envelope none|local|kms]`.
// It takes no positional argument: the database is --db (a stray path is
// refused, never ignored).
// It prints one line per chain — intact, the head version and the key that
// signed it, or BROKEN at the first version that disagrees and why ("head
// signature does not match" for a chain rewritten with recomputed hashes)
// — and exits 0 when everything is intact, 1 otherwise (exitError{1}). The
// audit key is UNSAY_AUDIT_KEY, the head key UNSAY_SIGNING_PUBLIC_KEY (or
// the public half of UNSAY_SIGNING_KEY), each else the development default
// (announced on stderr). An encrypted store needs the envelope that sealed
// it (--envelope and its UNSAY_MASTER_KEY / KMS settings) to open values.
func cmdVerify(ctx context.Context, args []string) error {
	c, fs := newCommand("verify")
	db := fs.String("db", "./unsay.db", "SQLite database file, or a postgres:// URL, to verify")
	audit := fs.Bool("audit", false, "also verify the audit log's HMAC chain")
	env := fs.String("envelope", "none", "envelope the values were sealed with: none, local or kms")
	kmsEndpoint := fs.String("kms-endpoint", "", "KMS endpoint URL override (kms envelope)")
	kmsRegion := fs.String("kms-region", "", "AWS region (kms envelope)")
	if _, err := parseFlags(c, fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	s, err := openOffline(ctx, "verify", *db, envelope.Config{Mode: *env, KMSEndpoint: *kmsEndpoint, KMSRegion: *kmsRegion})
	if err != nil {
		return err
	}
	defer s.Close()
	fmt.Printf("head signatures checked against Ed25519 key %s (%s)\n", store.KeyID(s.PublicKey()), store.FormatPublicKey(s.PublicKey()))
	results, err := s.VerifyAll(ctx, models.System("unsay-verify", models.ScopeReadUser, models.ScopeReadAssistant))
	if err != nil {
		return sealedHint(err, *db, *env)
	}
	ok := true
	for _, r := range results {
		switch {
		case !r.Intact:
			ok = false
			fmt.Printf("%s BROKEN at v%d (%d versions): %s\n", r.URI, r.BrokenAt, len(r.Versions), r.Problem)
		case r.Head != nil && r.Head.Valid:
			fmt.Printf("%s intact (%d versions), head v%d signed by key %s\n", r.URI, len(r.Versions), r.Head.N, r.Head.KeyID)
		default:
			fmt.Printf("%s intact (%d versions), head not signed yet (written before head signing; the server signs it at its next start)\n", r.URI, len(r.Versions))
		}
	}
	if *audit {
		v, err := s.VerifyAuditLog(ctx)
		if err != nil {
			return err
		}
		switch {
		case v.BadRow != 0:
			ok = false
			fmt.Printf("audit log BROKEN at row %d: %s\n", v.BadRow, v.Problem)
		case v.Head != nil && v.Head.Valid:
			fmt.Printf("audit log intact (%d rows), head signed by key %s\n", v.Rows, v.Head.KeyID)
		default:
			fmt.Printf("audit log intact (%d rows)\n", v.Rows)
		}
	}
	if !ok {
		return exitError{1}
	}
	return nil
}

// sealedHint adds the --envelope flag to an error about sealed values read
// without an envelope.
func sealedHint(err error, db, env string) error {
	if strings.TrimSpace(env) == "none" && strings.Contains(strings.ToLower(err.Error()), "seal") {
		return fmt.Errorf("%w — the database %s holds sealed values: give the envelope that sealed them, e.g. --envelope local with UNSAY_MASTER_KEY", err, db)
	}
	return err
}

// cmdKeygen generates the Ed25519 key that signs chain heads (P-26):
// `unsay keygen [--out FILE]`. Without --out it prints
//
//	UNSAY_SIGNING_KEY=<base64 seed>           the secret: the server's environment only
//	UNSAY_SIGNING_PUBLIC_KEY=<base64 key>     public: for `unsay verify` and /verify
//
// With --out it writes the secret line to FILE (mode 0600) and prints only
// the public one; a FILE that already exists is never overwritten: keygen
// prints the public key of the key it holds.
func cmdKeygen(ctx context.Context, args []string) error {
	c, fs := newCommand("keygen")
	out := fs.String("out", "", "write UNSAY_SIGNING_KEY=… to this file (0600) instead of stdout; an existing file is kept")
	if _, err := parseFlags(c, fs, args); err != nil {
		return err
	}
	if *out != "" {
		if b, err := os.ReadFile(*out); err == nil {
			k, err := store.ParseSigningKey(strings.TrimPrefix(strings.TrimSpace(string(b)), "UNSAY_SIGNING_KEY="))
			if err != nil {
				return fmt.Errorf("%s exists and holds no signing key: %w", *out, err)
			}
			fmt.Fprintf(os.Stderr, "unsay keygen: %s exists; keeping its key\n", *out)
			fmt.Printf("UNSAY_SIGNING_PUBLIC_KEY=%s\n", store.FormatPublicKey(k.Public().(ed25519.PublicKey)))
			return nil
		}
	}
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return err
	}
	secret := "UNSAY_SIGNING_KEY=" + store.FormatSigningKey(priv) + "\n"
	if *out == "" {
		fmt.Print(secret)
	} else {
		f, err := os.OpenFile(*out, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return err
		}
		if _, err := f.WriteString(secret); err != nil {
			f.Close()
			return err
		}
		if err := f.Close(); err != nil {
			return err
		}
	}
	fmt.Printf("UNSAY_SIGNING_PUBLIC_KEY=%s\n", store.FormatPublicKey(pub))
	fmt.Fprintf(os.Stderr, "unsay keygen: key %s; give UNSAY_SIGNING_KEY to every server instance and the public key to whoever verifies\n", store.KeyID(pub))
	return nil
}

// openOffline opens the store at db for an offline command (verify, rekey)
// with the envelope env, the audit key UNSAY_AUDIT_KEY and the head keys
// UNSAY_SIGNING_KEY / UNSAY_SIGNING_PUBLIC_KEY (each else the development
// default, said on stderr). A SQLite file must exist: an offline check
// never creates an empty database. A database that holds sealed values
// opened without an envelope is refused with the flag to add.
func openOffline(ctx context.Context, cmd, db string, env envelope.Config) (*store.Store, error) {
	if _, err := os.Stat(db); err != nil && !store.IsPostgresDSN(db) {
		return nil, fmt.Errorf("--db (UNSAY_DB) %s: no database there (%v); give the file `unsay serve` uses with --db", db, unwrapPath(err))
	}
	sealer, err := envelope.New(ctx, env)
	if err != nil {
		return nil, err
	}
	auditKey := []byte(os.Getenv("UNSAY_AUDIT_KEY"))
	if len(auditKey) == 0 {
		fmt.Fprintf(os.Stderr, "unsay %s: UNSAY_AUDIT_KEY unset; using the development default audit key\n", cmd)
	}
	opts := store.Options{DSN: db, AuditKey: auditKey, Sealer: sealer}
	if v := os.Getenv("UNSAY_SIGNING_KEY"); v != "" {
		if opts.SigningKey, err = store.ParseSigningKey(v); err != nil {
			return nil, fmt.Errorf("UNSAY_SIGNING_KEY: %w", err)
		}
	}
	if v := os.Getenv("UNSAY_SIGNING_PUBLIC_KEY"); v != "" {
		if opts.PublicKey, err = store.ParsePublicKey(v); err != nil {
			return nil, fmt.Errorf("UNSAY_SIGNING_PUBLIC_KEY: %w", err)
		}
	}
	if opts.SigningKey == nil && opts.PublicKey == nil {
		fmt.Fprintf(os.Stderr, "unsay %s: UNSAY_SIGNING_PUBLIC_KEY and UNSAY_SIGNING_KEY unset; checking heads against the development key\n", cmd)
	}
	s, err := store.Open(ctx, opts)
	if err != nil {
		return nil, errors.New(strings.Replace(err.Error(), "store: store: ", "store: ", 1))
	}
	if sealer == nil {
		if err := s.CheckStartup(ctx); err != nil && strings.Contains(err.Error(), "sealed values") {
			s.Close()
			return nil, fmt.Errorf("the database %s holds sealed values: give the envelope that sealed them, e.g. `unsay %s --db %s --envelope local` with UNSAY_MASTER_KEY set", db, cmd, db)
		}
	}
	return s, nil
}

// cmdRekey re-seals every stored version under the current key (P-6
// rotation): `unsay rekey --db PATH --envelope local|kms [--kms-endpoint URL]
// [--kms-region R]`. It refuses while a server holds the database (the
// serve lease, ServeLease, is live). The envelope reads UNSAY_MASTER_KEY
// (the new key) and UNSAY_MASTER_KEYS_PREVIOUS (keys that sealed older
// versions), or UNSAY_KMS_KEY_ID and the AWS credential chain; a plaintext
// store is sealed for the first time. Hashes are over plaintext and do not
// change. It runs in one transaction: a version that fails to open
// (unknown key, tampered bytes, KMS outage) aborts it with nothing changed.
// It then verifies every chain and prints the count; exit 1 if a chain is
// broken. The audit key is UNSAY_AUDIT_KEY, or the development default
// (announced).
func cmdRekey(ctx context.Context, args []string) error {
	c, fs := newCommand("rekey")
	db := fs.String("db", "./unsay.db", "SQLite database file, or a postgres:// URL, to re-seal (stop the server first)")
	env := fs.String("envelope", "none", "envelope to seal under: local or kms (none is refused)")
	kmsEndpoint := fs.String("kms-endpoint", "", "KMS endpoint URL override (kms envelope)")
	kmsRegion := fs.String("kms-region", "", "AWS region (kms envelope)")
	if _, err := parseFlags(c, fs, args); err != nil {
		return err
	}
	if m := strings.TrimSpace(*env); m != "local" && m != "kms" {
		return usageErr("rekey", "--envelope (UNSAY_ENVELOPE) is %q: rekey needs local or kms", m)
	}
	s, err := openOffline(ctx, "rekey", *db, envelope.Config{Mode: *env, KMSEndpoint: *kmsEndpoint, KMSRegion: *kmsRegion})
	if err != nil {
		return err
	}
	defer s.Close()
	holder, expires, err := s.LeaseHolder(ctx, ServeLease)
	if err != nil {
		return fmt.Errorf("checking for a running server: %w", err)
	}
	if holder != "" && time.Now().Before(expires) {
		return fmt.Errorf("a server holds %s: %s. Stop it first (Ctrl-C, or SIGTERM); a server killed with -9 lets go within %s", *db, holder, app.SpeechLeaseTTL)
	}
	n, err := s.Rekey(ctx)
	if err != nil {
		return err
	}
	fmt.Printf("re-sealed %d versions under %s\n", n, envelope.Describe(s.Sealer()))
	results, err := s.VerifyAll(ctx, models.System("unsay-rekey", models.ScopeReadUser, models.ScopeReadAssistant))
	if err != nil {
		return fmt.Errorf("verify after rekey: %w", err)
	}
	for _, r := range results {
		if !r.Intact {
			fmt.Printf("%s BROKEN at v%d\n", r.URI, r.BrokenAt)
			return exitError{1}
		}
	}
	fmt.Printf("%d chains intact\n", len(results))
	return nil
}

// cmdBench measures the main job's latency: `unsay bench [--n 200]
// [--warmup 10] [--json] [--url URL]`. Without --url it starts its own
// server in-process on a temporary SQLite database (durable commits) with
// the fixture patient "bench" and notifications off; with --url it measures
// a running server (UNSAY_WRITE_SECRET and UNSAY_TOKEN_SECRET must match
// it), following the patient with its own speech principal. It prints
// write→mcp-client and write→speech-retraction with p50/p95/p99/max in ms
// (sorted samples, index floor(p·n)), or JSON with --json, and exits 1 if
// any run is outside the 3,400 ms speech window.
func cmdBench(ctx context.Context, args []string) error {
	c, fs := newCommand("bench")
	n := fs.Int("n", 200, "measured revisions")
	warmup := fs.Int("warmup", 10, "unmeasured revisions first")
	asJSON := fs.Bool("json", false, "print JSON instead of lines")
	target := fs.String("url", "", "measure a running server at this base URL instead of an in-process one")
	patient := fs.String("patient", "bench", "fixture patient the revisions are written to")
	if _, err := parseFlags(c, fs, args); err != nil {
		return err
	}
	if *n < 1 || *warmup < 0 {
		return usageErr("bench", "--n %d --warmup %d: want at least 1 measured revision and 0 or more warm-up ones", *n, *warmup)
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	dir, err := os.MkdirTemp("", "unsay-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)

	cfg := bench.Config{Patient: *patient, N: *n, Warmup: *warmup}
	var tokenCfg auth.Config
	if *target == "" {
		a, err := app.New(ctx, app.Config{Addr: "127.0.0.1:0", DB: filepath.Join(dir, "bench.db"), Seed: "bench",
			SpeechPatients: []string{*patient}, Logger: logger})
		if err != nil {
			return err
		}
		defer a.Close()
		sctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- a.Serve(sctx) }()
		defer func() { cancel(); <-done }()
		cfg.BaseURL, cfg.Speech, tokenCfg = a.URL(), a.Speech, a.TokenConfig()
		cfg.WriteSecret = []byte(httpapi.DevWriteSecret)
	} else {
		cfg.BaseURL = strings.TrimRight(*target, "/")
		tokenCfg = auth.Config{Secret: secretFromEnv("UNSAY_TOKEN_SECRET", auth.DevTokenSecret, "token"), PublicURL: cfg.BaseURL}
		cfg.WriteSecret = secretFromEnv("UNSAY_WRITE_SECRET", httpapi.DevWriteSecret, "write")
		db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "speech.db")+"?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)")
		if err != nil {
			return err
		}
		defer db.Close()
		tok, err := auth.Mint(tokenCfg, "unsay-bench-speech", []models.Scope{models.ScopeReadUser}, []string{*patient}, time.Hour)
		if err != nil {
			return err
		}
		sp, err := speech.New(speech.Config{MCPURL: cfg.BaseURL + "/mcp", Token: tok, Patients: []string{*patient}, DB: db, Logger: logger})
		if err != nil {
			return err
		}
		sctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- sp.Run(sctx) }()
		defer func() { cancel(); <-done }()
		cfg.Speech = sp
	}
	reader, err := auth.Mint(tokenCfg, "unsay-bench", []models.Scope{models.ScopeReadUser}, []string{*patient}, time.Hour)
	if err != nil {
		return err
	}
	cfg.ReaderToken = reader
	res, err := bench.Run(ctx, cfg)
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(res); err != nil {
			return err
		}
	} else {
		fmt.Println(res.MCPClient.Line())
		fmt.Println(res.SpeechRetraction.Line())
	}
	if out := res.MCPClient.OutsideWindow + res.SpeechRetraction.OutsideWindow; out > 0 {
		fmt.Fprintf(os.Stderr, "unsay bench: %d runs outside the %s speech window\n", out, bench.SpeechWindow)
		return exitError{code: 1}
	}
	return nil
}

// cmdVersion prints "unsay VERSION (commit COMMIT[, modified], built
// TIME) with GO": -ldflags values when set, else the module version and the
// VCS stamp Go puts in the binary (debug.ReadBuildInfo).
func cmdVersion(ctx context.Context, args []string) error {
	c, fs := newCommand("version")
	if _, err := parseFlags(c, fs, args); err != nil {
		return err
	}
	fmt.Println(versionLine())
	return nil
}

func versionLine() string {
	v, rev, when, modified, goVersion := version, commit, "", false, ""
	if bi, ok := debug.ReadBuildInfo(); ok {
		goVersion = bi.GoVersion
		if v == "" {
			v = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				if rev == "" {
					rev = s.Value
				}
			case "vcs.time":
				when = s.Value
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
	}
	if v == "" || v == "(devel)" {
		v = "devel"
	}
	if rev == "" {
		rev = "unknown"
	} else if len(rev) > 12 {
		rev = rev[:12]
	}
	line := "unsay " + v + " (commit " + rev
	if modified {
		line += ", modified"
	}
	if when != "" {
		line += ", " + when
	}
	line += ")"
	if goVersion != "" {
		line += " with " + goVersion
	}
	return line
}

func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return strconv.FormatInt(time.Now().UnixNano(), 36)
	}
	return fmt.Sprintf("%x", b)
}
