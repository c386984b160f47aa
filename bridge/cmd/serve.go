package cmd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"time"
	_ "time/tzdata" // --time-zone works on a machine without /usr/share/zoneinfo

	"github.com/unsay/unsay/bridge/app"
	"github.com/unsay/unsay/bridge/cli"
	"github.com/unsay/unsay/models"
	"github.com/unsay/unsay/skill"
	"github.com/unsay/unsay/skill/proactive"
	"github.com/unsay/unsay/store"
	"github.com/unsay/unsay/store/envelope"
)

// ServeLease is the name of the lease a running `unsay serve` holds in its
// database (renewed every third of ServeLeaseTTL), so `unsay rekey` can
// refuse to rewrite values under a live server.
const ServeLease = "unsay/serve"

// ServeLeaseTTL is the serve lease's lifetime without renewal: a server
// killed with -9 lets go of its database within it.
const ServeLeaseTTL = 9 * time.Second

// ServeGCPercent is the garbage collector's target of `unsay serve` when
// the environment sets no GOGC: 400 (the runtime's default is 100). A
// server's live heap is a few tens of MiB, and every MCP message the SDK
// decodes allocates a 32 KiB buffer, so at the default the collector ran
// every few hundred requests and took a fifth of the CPU of a busy Alexa
// endpoint; at 400 it runs a quarter as often, for a heap up to five times
// the live one. GOGC (and GOMEMLIMIT) in the environment still rule.
const ServeGCPercent = 400

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
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(ServeGCPercent)
	}
	c, fs := newCommand("serve")
	addr := fs.String("addr", app.DefaultAddr, "listen address host:port (port 0 picks a free one)")
	db := fs.String("db", app.DefaultDB, "SQLite database file, or a postgres:// URL")
	publicURL := fs.String("public-url", "", "public base URL, http(s)://host[:port] (a path only with an external authorization server); the MCP resource is {public-url}/mcp (default http://{addr})")
	seedClock := fs.String("seed-clock", "now", "clock the demo seed is built on when the database is empty: now or an RFC 3339 time")
	seed := fs.String("seed", app.DefaultSeed, "what an empty database is seeded with: demo, bench or none")
	var origins, authServers, alexaCerts, speechPatients listFlag
	fs.Var(&origins, "allowed-origin", "browser Origin allowed besides the public URL's (repeatable)")
	fs.Var(&authServers, "authorization-server", "an external OAuth authorization server's issuer, trusted by --token-jwks-url (default: the embedded one on --public-url)")
	tokenJWKS := fs.String("token-jwks-url", "", "the external authorization server's JWKS URL (with --authorization-server)")
	tokenPublicKey := fs.String("token-public-key", "", "RS256/ES256 public key for tokens: PEM text or a path to a PEM file")
	env := fs.String("envelope", envelope.DefaultMode, "at-rest encryption of values: none, local or kms")
	kmsEndpoint := fs.String("kms-endpoint", "", "KMS endpoint URL override (kms envelope)")
	kmsRegion := fs.String("kms-region", "", "AWS region (kms envelope)")
	skillID := fs.String("alexa-skill-id", "", "the only accepted Alexa applicationId (required when --alexa-verify)")
	alexaVerify := fs.Bool("alexa-verify", true, "verify Alexa request signatures (false is for local development only)")
	alexaRoots := fs.String("alexa-roots", "", "PEM file of extra trust roots for Alexa certificate chains")
	fs.Var(&alexaCerts, "alexa-cert", "URL=PEMFILE: serve that certificate URL's chain from a file (repeatable; tests)")
	defaultPatient := fs.String("default-patient", "", "patient of an unlinked Alexa device that sends no account-linking token (demo only)")
	keptReports := fs.String("kept-reports-file", "", "file saving the Alexa error reports the store could not take yet, so a restart loses none (default: beside the SQLite database; none with Postgres)")
	speechURL := fs.String("speech-mcp-url", "", "MCP endpoint of a remote Unsay for the speech principal (default: this server)")
	speechToken := fs.String("speech-token", "", "bearer token for --speech-mcp-url (care.read.user only; default: minted)")
	fs.Var(&speechPatients, "speech-patient", "patient the speech principal follows from the start (repeatable)")
	clientID := fs.String("alexa-client-id", "", "Login with Amazon client id for proactive notifications (off when empty)")
	proactiveTokenURL := fs.String("proactive-token-url", "", "LWA token endpoint override")
	proactiveAPI := fs.String("proactive-api-url", "", "Proactive Events API base URL override (default: the linked device's region)")
	proactiveLive := fs.Bool("proactive-live", false, "send to the live stage instead of development")
	// A string, parsed here: flag.Int's own refusal of "1e3" names neither
	// the flag's twin nor the valid forms.
	budgetText := fs.String("alert-budget", strconv.Itoa(proactive.DefaultAlertBudget), "proactive notifications per patient per sliding hour (0: none)")
	quiet := fs.String("quiet-hours", proactive.DefaultQuietHours, "no proactive notifications in this window, patient's time: HH:MM-HH:MM (start and end differ), or off")
	tz := fs.String("time-zone", proactive.DefaultTimeZone, "the patient's IANA time zone, for quiet hours")
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
		// A path is valid only with an external authorization server: the
		// embedded one's issuer is the public URL, and an issuer has none.
		external := *tokenJWKS != "" || strings.TrimSpace(*tokenPublicKey) != ""
		if err := checkBaseURL(*publicURL); err != nil && external {
			bad("public-url", "%q is malformed: %v; want http(s)://host[:port][/path], e.g. https://care.example.org", *publicURL, err)
		} else if err != nil {
			bad("public-url", "%q is malformed: %v; want http(s)://host[:port] without a path, e.g. https://care.example.org "+
				"(a path needs an external authorization server: --authorization-server with --token-jwks-url)", *publicURL, err)
		} else if p := urlPath(*publicURL); p != "" && !external {
			// The embedded authorization server's issuer is the public URL,
			// and an issuer has no path (oauth.New refuses one later, less plainly).
			bad("public-url", "%q has a path (%s): the embedded authorization server's issuer is the public URL and must be http(s)://host[:port] without a path; "+
				"drop the path, or use an external authorization server (--authorization-server with --token-jwks-url)", *publicURL, p)
		}
	}
	for _, o := range origins {
		if err := checkBaseURL(o); err != nil {
			bad("allowed-origin", "%q is malformed: %v; want an origin such as https://care.example.org", o, err)
		} else if p := urlPath(o); p != "" {
			bad("allowed-origin", "%q has a path (%s): a browser Origin is scheme://host[:port] only, e.g. https://care.example.org", o, p)
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
	case "none", "local":
	case "kms":
		if err := checkKMSKeyID(); err != nil {
			bad("envelope", "%v", err)
		}
	default:
		bad("envelope", "%q: want none, local or kms", *env)
	}
	budget, err := strconv.Atoi(strings.TrimSpace(*budgetText))
	if err != nil || budget < 0 {
		bad("alert-budget", "%q: want 0 (no proactive notifications) or a positive whole count per patient per hour, e.g. 3", *budgetText)
	}
	loc, err := time.LoadLocation(*tz)
	if err != nil || *tz == "" || strings.EqualFold(*tz, "local") {
		bad("time-zone", "%q is not an IANA time zone: want a name such as Europe/London or America/New_York", *tz)
		loc = time.UTC
	}
	if _, err := proactive.ParseQuietHours(*quiet, loc); errors.Is(err, proactive.ErrQuietHoursEmpty) {
		bad("quiet-hours", "%q starts when it ends: an empty window, or all day? Give a window that ends at another time, e.g. 21:00-08:00; "+
			"off for no quiet hours; --alert-budget 0 for no proactive notifications at all", *quiet)
	} else if err != nil {
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
		AlertBudget: budget, QuietHours: *quiet, TimeZone: *tz,
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
	cfg.Alexa = skill.Config{SkillID: *skillID, Verify: *alexaVerify, DefaultPatient: *defaultPatient, KeptReportsFile: *keptReports}
	if *keptReports != "" {
		if fi, err := os.Stat(filepath.Dir(*keptReports)); err != nil || !fi.IsDir() {
			bad("kept-reports-file", "%s: its folder must exist", *keptReports)
		}
	}
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
		// skill's error already names the flag and the form: say it once.
		bad("alexa-cert", "%s, e.g. https://s3.amazonaws.com/echo.api/echo-api-cert-12.pem=./chain.pem", strings.TrimPrefix(err.Error(), "--alexa-cert "))
	}
	cfg.Alexa.CertOverrides = overrides
	if err := checkSigningKeyEnv(); err != nil {
		errs = append(errs, err)
	}
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
		k := &store.LeaseKeeper{Store: a.Store, Holder: servingHolder(a), TTL: ServeLeaseTTL}
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
// urlPath is raw's path without a lone trailing "/" ("" for none); raw
// has passed checkBaseURL.
func urlPath(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	return strings.TrimSuffix(u.EscapedPath(), "/")
}

// checkKMSKeyID refuses --envelope kms without UNSAY_KMS_KEY_ID before the
// AWS SDK's credential chain runs (which asks the cloud metadata service,
// and waits on it, off a cloud host).
func checkKMSKeyID() error {
	if strings.TrimSpace(os.Getenv("UNSAY_KMS_KEY_ID")) == "" {
		return errors.New("kms needs UNSAY_KMS_KEY_ID (the KMS key's id, ARN or alias) in the environment; or use none or local (with UNSAY_MASTER_KEY)")
	}
	return nil
}

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
