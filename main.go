// Command unsay keeps a patient's care plan live for a voice assistant and
// takes back what the assistant said when a clinician changes an instruction.
//
//	unsay serve    run the server (MCP at /mcp, /write, /alexa, web pages)
//	unsay token    mint a development bearer token
//	unsay write    sign and POST a clinician's revision to /write
//	unsay link     create a six-digit device-linking code (POST /link)
//	unsay verify   check every hash chain (and the audit log) offline
//	unsay rekey    re-seal every stored value under the current key
//	unsay bench    measure write → MCP client → spoken retraction latency
//	unsay client   OAuth clients of the embedded authorization server (add, list, approve, remove)
//	unsay grants   what people granted OAuth clients (list, revoke)
//
// Every flag --foo-bar also reads UNSAY_FOO_BAR; the flag wins. Secrets come
// only from the environment.
package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/unsay/unsay/bridge/app"
	"github.com/unsay/unsay/bridge/auth"
	"github.com/unsay/unsay/bridge/bench"
	"github.com/unsay/unsay/bridge/httpapi"
	"github.com/unsay/unsay/bridge/speech"
	"github.com/unsay/unsay/models"
	"github.com/unsay/unsay/skill"
	"github.com/unsay/unsay/store"
	"github.com/unsay/unsay/store/envelope"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:])
	stop()
	os.Exit(code)
}

// run dispatches a subcommand and returns the process exit code.
func run(ctx context.Context, args []string) int {
	if len(args) == 0 {
		usage()
		return 2
	}
	cmds := map[string]func(context.Context, []string) error{
		"serve":  cmdServe,
		"token":  cmdToken,
		"write":  cmdWrite,
		"link":   cmdLink,
		"verify": cmdVerify,
		"rekey":  cmdRekey,
		"bench":  cmdBench,
		"client": cmdClient, // main_oauth.go
		"grants": cmdGrants, // main_oauth.go
	}
	cmd, ok := cmds[args[0]]
	if !ok {
		usage()
		return 2
	}
	if err := cmd(ctx, args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		var ee exitError
		if errors.As(err, &ee) {
			return ee.code
		}
		fmt.Fprintln(os.Stderr, "unsay "+args[0]+":", err)
		return 1
	}
	return 0
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: unsay serve|token|write|link|verify|rekey|bench|client|grants [flags]   (unsay CMD -h for flags)")
}

// exitError carries a specific exit code out of a command (verify: 1 on a broken chain).
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

// parseFlags parses args into fs, then fills every flag not given on the
// command line from UNSAY_FOO_BAR (for --foo-bar). The flag wins.
func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var errs []error
	fs.VisitAll(func(f *flag.Flag) {
		if set[f.Name] {
			return
		}
		env := "UNSAY_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		if v, ok := os.LookupEnv(env); ok {
			if err := fs.Set(f.Name, v); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", env, err))
			}
		}
	})
	return errors.Join(errs...)
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

// cmdServe runs the server: `unsay serve [flags]`. It opens the store
// (SQLite at --db by default; seeded with the demo on an empty database at
// --seed-clock), serves MCP at /mcp, /write, /link, /verify, /alexa, the web
// pages, /healthz, /readyz and /metrics, runs the speech principal (an MCP
// client of this server holding care.read.user only, P-18) and, with
// --alexa-client-id, the out-of-session notifier. It prints ONE startup line
// naming the store backend, the encryption mode (PLAINTEXT when none),
// whether Alexa verification is on, and every development default secret in
// use. Secrets come only from the environment: UNSAY_TOKEN_SECRET,
// UNSAY_WRITE_SECRET, UNSAY_AUDIT_KEY, UNSAY_MASTER_KEY(S_PREVIOUS),
// UNSAY_ALEXA_CLIENT_SECRET. It stops gracefully when ctx ends.
func cmdServe(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
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
	quiet := fs.String("quiet-hours", "21:00-08:00", "no proactive notifications in this window, patient's time (off to disable)")
	tz := fs.String("time-zone", "Europe/London", "the patient's IANA time zone, for quiet hours")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if *budget <= 0 {
		*budget = -1 // none: app.Config reads 0 as the default (3)
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		return fmt.Errorf("--log-level: %w", err)
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))

	cfg := app.Config{
		Addr: *addr, DB: *db, PublicURL: *publicURL, Seed: *seed,
		AllowedOrigins: origins, AuthorizationServers: authServers, TokenJWKSURL: *tokenJWKS,
		Envelope: *env, KMSEndpoint: *kmsEndpoint, KMSRegion: *kmsRegion,
		TokenSecret: []byte(os.Getenv("UNSAY_TOKEN_SECRET")), WriteSecret: []byte(os.Getenv("UNSAY_WRITE_SECRET")),
		AuditKey:     []byte(os.Getenv("UNSAY_AUDIT_KEY")),
		SpeechMCPURL: *speechURL, SpeechToken: *speechToken, SpeechPatients: speechPatients,
		AlexaClientID: *clientID, AlexaClientSecret: os.Getenv("UNSAY_ALEXA_CLIENT_SECRET"),
		ProactiveTokenURL: *proactiveTokenURL, ProactiveAPIBase: *proactiveAPI, ProactiveLive: *proactiveLive,
		AlertBudget: *budget, QuietHours: *quiet, TimeZone: *tz,
		Logger: logger,
	}
	if c := strings.TrimSpace(*seedClock); c != "" && c != "now" {
		t, err := time.Parse(time.RFC3339, c)
		if err != nil {
			return fmt.Errorf("--seed-clock (UNSAY_SEED_CLOCK): want now or RFC 3339: %w", err)
		}
		cfg.SeedClock = t
	}
	if k := strings.TrimSpace(*tokenPublicKey); k != "" {
		cfg.TokenPublicKeyPEM = []byte(k)
		if !strings.HasPrefix(k, "-----BEGIN") {
			b, err := os.ReadFile(k)
			if err != nil {
				return fmt.Errorf("--token-public-key: %w", err)
			}
			cfg.TokenPublicKeyPEM = b
		}
	}
	cfg.Alexa = skill.Config{SkillID: *skillID, Verify: *alexaVerify, DefaultPatient: *defaultPatient}
	if *alexaRoots != "" {
		roots, err := skill.ReadCertificatesFile(*alexaRoots)
		if err != nil {
			return fmt.Errorf("--alexa-roots: %w", err)
		}
		cfg.Alexa.ExtraRoots = roots
	}
	overrides, err := skill.ParseCertOverrides(alexaCerts)
	if err != nil {
		return fmt.Errorf("--alexa-cert: %w", err)
	}
	cfg.Alexa.CertOverrides = overrides

	a, err := app.New(ctx, cfg)
	if err != nil {
		return err
	}
	defer a.Close()
	fmt.Println(a.StartupLine())
	return a.Serve(ctx)
}

// cmdToken mints a development bearer token (HS256, aud {public-url}/mcp)
// and prints only the JWT on stdout:
//
//	unsay token --patient ray [--patient …] --scope care.read.user [--scope …]
//	            [--sub NAME] [--ttl 1h] [--public-url URL]
//
// The secret is UNSAY_TOKEN_SECRET, or auth.DevTokenSecret (said on stderr).
func cmdToken(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("token", flag.ContinueOnError)
	var patients, scopes listFlag
	fs.Var(&patients, "patient", "patient id the token is bound to (repeatable)")
	fs.Var(&scopes, "scope", "scope: care.read.user, care.read.assistant or care.write (repeatable)")
	sub := fs.String("sub", "dev", "the token's subject (sub): the audit actor; for /write it must equal authorId")
	ttl := fs.Duration("ttl", time.Hour, "lifetime of the token")
	publicURL := fs.String("public-url", "http://127.0.0.1:8080", "the server's public URL; the token's aud is {public-url}/mcp")
	db := fs.String("db", "", "sign with the embedded authorization server's key in this database (a public URL, where HS256 is off)")
	env := fs.String("envelope", "none", "with --db: the envelope the keys are sealed with (none, local, kms)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if len(patients) == 0 || len(scopes) == 0 {
		return errors.New("at least one --patient and one --scope are required")
	}
	sc := make([]models.Scope, len(scopes))
	for i, s := range scopes {
		sc[i] = models.Scope(s)
	}
	if *db != "" {
		tok, err := mintWithAS(ctx, *db, *env, strings.TrimRight(*publicURL, "/"), *sub, sc, patients, *ttl) // main_oauth.go
		if err != nil {
			return err
		}
		fmt.Println(tok)
		return nil
	}
	tok, err := auth.Mint(auth.Config{Secret: secretFromEnv("UNSAY_TOKEN_SECRET", auth.DevTokenSecret, "token"), PublicURL: *publicURL},
		*sub, sc, patients, *ttl)
	if err != nil {
		return err
	}
	fmt.Println(tok)
	return nil
}

// cmdWrite signs a clinician's revision with the shared write secret and
// POSTs it to {url}/write, printing the server's JSON answer on stdout;
// a non-2xx answer exits 1:
//
//	unsay write --url URL --patient ray --domain weight_bearing --value "…"
//	            --author okafor --author-label "Sarah Okafor, physio"
//	            [--audience user] [--stale-after T] [--priority P]
//
// --stale-after is an RFC 3339 time or a duration from now ("72h").
// The secret is UNSAY_WRITE_SECRET, or httpapi.DevWriteSecret (said on stderr).
func cmdWrite(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("write", flag.ContinueOnError)
	base := fs.String("url", "http://127.0.0.1:8080", "the server's base URL")
	req := httpapi.WriteRequest{}
	fs.StringVar(&req.Patient, "patient", "", "patient id")
	fs.StringVar(&req.Domain, "domain", "", "domain, e.g. weight_bearing")
	fs.StringVar(&req.Value, "value", "", "the instruction, as the clinician wrote it")
	fs.StringVar(&req.AuthorID, "author", "", "author id, e.g. okafor")
	fs.StringVar(&req.AuthorLabel, "author-label", "", `how the patient hears the author, e.g. "Sarah Okafor, physio"`)
	audience := fs.String("audience", string(models.AudienceUser), "user (speakable) or assistant (never spoken); fixed per domain")
	staleAfter := fs.String("stale-after", "", "RFC 3339 time, or a duration from now (72h), after which the fact is stale")
	priority := fs.String("priority", "", "0…1, a hint for hosts")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	req.Audience = models.Audience(*audience)
	if *staleAfter != "" {
		if d, err := time.ParseDuration(*staleAfter); err == nil {
			req.StaleAfter = time.Now().Add(d).UTC().Format(time.RFC3339)
		} else {
			req.StaleAfter = *staleAfter // the server checks RFC 3339
		}
	}
	if *priority != "" {
		p, err := strconv.ParseFloat(*priority, 64)
		if err != nil {
			return fmt.Errorf("--priority: %w", err)
		}
		req.Priority = &p
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
		return printAnswer(url, status, answer, nil)
	}
}

// cmdLink creates a six-digit device-linking code for a patient through
// POST {url}/link and prints the code and its expiry:
//
//	unsay link --url URL --patient ray [--token T] [--public-url URL]
//
// Without --token it mints a five-minute care.write token bound to the
// patient (sub "unsay-link", aud {public-url}/mcp, public URL defaulting to
// --url) with UNSAY_TOKEN_SECRET or the development default.
func cmdLink(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("link", flag.ContinueOnError)
	base := fs.String("url", "http://127.0.0.1:8080", "the server's base URL")
	patient := fs.String("patient", "", "patient id")
	token := fs.String("token", "", "a bearer token with care.write bound to the patient (default: mint one)")
	publicURL := fs.String("public-url", "", "the server's public URL, for a minted token's audience (default: --url)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *patient == "" {
		return errors.New("--patient is required")
	}
	if *token == "" {
		pub := *publicURL
		if pub == "" {
			pub = *base
		}
		tok, err := auth.Mint(auth.Config{Secret: secretFromEnv("UNSAY_TOKEN_SECRET", auth.DevTokenSecret, "token"), PublicURL: pub},
			"unsay-link", []models.Scope{models.ScopeWrite}, []string{*patient}, 5*time.Minute)
		if err != nil {
			return err
		}
		*token = tok
	}
	body, err := json.Marshal(httpapi.LinkRequest{Patient: *patient})
	if err != nil {
		return err
	}
	return postAndPrint(ctx, strings.TrimRight(*base, "/")+"/link", body, map[string]string{"Authorization": "Bearer " + *token},
		func(answer []byte) string {
			var l httpapi.LinkResponse
			if err := json.Unmarshal(answer, &l); err != nil || l.Code == "" {
				return string(answer)
			}
			return fmt.Sprintf("%s\texpires %s\n", l.Code, l.ExpiresAt)
		})
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
// non-2xx answer is also reported on stderr and exits 1.
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
		return 0, nil, err
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return 0, nil, fmt.Errorf("reading the answer: %w", err)
	}
	return resp.StatusCode, answer, nil
}

// printAnswer prints answer (through format when given and status is 2xx);
// a non-2xx status is also reported on stderr and exits 1.
func printAnswer(url string, status int, answer []byte, format func([]byte) string) error {
	ok := status >= 200 && status < 300
	if ok && format != nil {
		fmt.Print(format(answer))
	} else {
		os.Stdout.Write(answer)
	}
	if !ok {
		fmt.Fprintf(os.Stderr, "unsay: %s answered %d %s\n", url, status, http.StatusText(status))
		return exitError{code: 1}
	}
	return nil
}

// cmdVerify checks every hash chain (P-5) and, with --audit, the audit
// log's HMAC chain (P-14), offline: `unsay verify --db PATH [--audit]
// [--envelope none|local|kms]`. It prints one line per chain and exits 0
// when everything is intact, 1 otherwise (exitError{1}). The audit key is
// UNSAY_AUDIT_KEY, or the development default (announced on stderr). An
// encrypted store needs the envelope that sealed it (--envelope and its
// UNSAY_MASTER_KEY / KMS settings) to open values.
func cmdVerify(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("verify", flag.ContinueOnError)
	db := fs.String("db", "./unsay.db", "SQLite database file, or a postgres:// URL, to verify")
	audit := fs.Bool("audit", false, "also verify the audit log's HMAC chain")
	env := fs.String("envelope", "none", "envelope the values were sealed with: none, local or kms")
	kmsEndpoint := fs.String("kms-endpoint", "", "KMS endpoint URL override (kms envelope)")
	kmsRegion := fs.String("kms-region", "", "AWS region (kms envelope)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	s, err := openOffline(ctx, "verify", *db, envelope.Config{Mode: *env, KMSEndpoint: *kmsEndpoint, KMSRegion: *kmsRegion})
	if err != nil {
		return err
	}
	defer s.Close()
	results, err := s.VerifyAll(ctx, models.System("unsay-verify", models.ScopeReadUser, models.ScopeReadAssistant))
	if err != nil {
		return err
	}
	ok := true
	for _, r := range results {
		if r.Intact {
			fmt.Printf("%s intact (%d versions)\n", r.URI, len(r.Versions))
		} else {
			ok = false
			fmt.Printf("%s BROKEN at v%d (%d versions)\n", r.URI, r.BrokenAt, len(r.Versions))
		}
	}
	if *audit {
		bad, err := s.VerifyAudit(ctx)
		if err != nil {
			return err
		}
		if bad == 0 {
			fmt.Println("audit log intact")
		} else {
			ok = false
			fmt.Printf("audit log BROKEN at row %d\n", bad)
		}
	}
	if !ok {
		return exitError{1}
	}
	return nil
}

// openOffline opens the store at db for an offline command (verify, rekey)
// with the envelope env and the audit key UNSAY_AUDIT_KEY (or the
// development default, said on stderr). A SQLite file must exist: an
// offline check never creates an empty database.
func openOffline(ctx context.Context, cmd, db string, env envelope.Config) (*store.Store, error) {
	if _, err := os.Stat(db); err != nil && !store.IsPostgresDSN(db) {
		return nil, fmt.Errorf("no database at %s: %w", db, err)
	}
	sealer, err := envelope.New(ctx, env)
	if err != nil {
		return nil, err
	}
	auditKey := []byte(os.Getenv("UNSAY_AUDIT_KEY"))
	if len(auditKey) == 0 {
		fmt.Fprintf(os.Stderr, "unsay %s: UNSAY_AUDIT_KEY unset; using the development default audit key\n", cmd)
	}
	return store.Open(ctx, store.Options{DSN: db, AuditKey: auditKey, Sealer: sealer})
}

// cmdRekey re-seals every stored version under the current key (P-6
// rotation): `unsay rekey --db PATH --envelope local|kms [--kms-endpoint URL]
// [--kms-region R]`. The envelope reads UNSAY_MASTER_KEY (the new key) and
// UNSAY_MASTER_KEYS_PREVIOUS (keys that sealed older versions), or
// UNSAY_KMS_KEY_ID and the AWS credential chain; a plaintext store is
// sealed for the first time. Hashes are over plaintext and do not change.
// It runs in one transaction: a version that fails to open (unknown key,
// tampered bytes, KMS outage) aborts it with nothing changed. It then
// verifies every chain and prints the count; exit 1 if a chain is broken.
// The audit key is UNSAY_AUDIT_KEY, or the development default (announced).
func cmdRekey(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("rekey", flag.ContinueOnError)
	db := fs.String("db", "./unsay.db", "SQLite database file, or a postgres:// URL, to re-seal (stop the server first)")
	env := fs.String("envelope", "none", "envelope to seal under: local or kms (none is refused)")
	kmsEndpoint := fs.String("kms-endpoint", "", "KMS endpoint URL override (kms envelope)")
	kmsRegion := fs.String("kms-region", "", "AWS region (kms envelope)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if m := strings.TrimSpace(*env); m != "local" && m != "kms" {
		return fmt.Errorf("--envelope (UNSAY_ENVELOPE) is %q: rekey needs local or kms", m)
	}
	s, err := openOffline(ctx, "rekey", *db, envelope.Config{Mode: *env, KMSEndpoint: *kmsEndpoint, KMSRegion: *kmsRegion})
	if err != nil {
		return err
	}
	defer s.Close()
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
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	n := fs.Int("n", 200, "measured revisions")
	warmup := fs.Int("warmup", 10, "unmeasured revisions first")
	asJSON := fs.Bool("json", false, "print JSON instead of lines")
	target := fs.String("url", "", "measure a running server at this base URL instead of an in-process one")
	patient := fs.String("patient", "bench", "fixture patient the revisions are written to")
	if err := parseFlags(fs, args); err != nil {
		return err
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
