// Package app assembles the whole Unsay server from its parts: the store,
// the MCP server and HTTP surface (bridge), the speech principal
// (bridge/speech) reading over MCP as care.read.user, the Alexa skill
// (skill) that speaks only what the speech principal holds, and the
// out-of-session notifier (skill/proactive). `unsay serve`, `unsay bench`,
// the demo and the in-process end-to-end tests all start it through New.
//
// It is the one place that knows both sides of the P-18 boundary: it mints
// the speech principal's token (care.read.user only), gives the speech
// principal and the notifier the store's database handle for the tables
// they keep themselves (bridge/speech's heard ledger and delivery log,
// skill/proactive's budget slots), and hands the skill an interface, never
// the store.
package app

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/unsay/unsay/bridge"
	"github.com/unsay/unsay/bridge/auth"
	"github.com/unsay/unsay/bridge/httpapi"
	"github.com/unsay/unsay/bridge/oauth"
	"github.com/unsay/unsay/bridge/speech"
	"github.com/unsay/unsay/models"
	"github.com/unsay/unsay/skill"
	"github.com/unsay/unsay/skill/proactive"
	"github.com/unsay/unsay/store"
	"github.com/unsay/unsay/store/envelope"
)

// SpeechKeepAlive is the interval between the speech principal's pings on
// an idle MCP session: 3 s.
const SpeechKeepAlive = 3 * time.Second

// SpeechTokenTTL is the lifetime of the speech principal's minted token;
// it is re-minted before each connection.
const SpeechTokenTTL = 12 * time.Hour

// Defaults of `unsay serve` that the program owns (its flags read them).
const (
	// DefaultAddr is the listen address: loopback, port 8080.
	DefaultAddr = "127.0.0.1:8080"
	// DefaultURL is the base URL a server on DefaultAddr is reached at
	// (the client commands' --url).
	DefaultURL = "http://" + DefaultAddr
	// DefaultDB is the SQLite file, in the working directory.
	DefaultDB = "./unsay.db"
	// DefaultSeed is what an empty database is seeded with: Ray's demo records.
	DefaultSeed = "demo"
)

// Config is everything `unsay serve` reads from flags and the environment.
// A zero field means the default it documents (the Default* constants here
// and in skill/proactive and store/envelope), which the flags show; only
// AlertBudget's zero is a value of its own (none).
type Config struct {
	// Addr is the listen address (default DefaultAddr; port 0 picks one).
	Addr string
	// HTTP are the public listener's timeouts and connection cap (zero
	// fields: the Default* constants).
	HTTP HTTPLimits
	// AdminAddr, if set, is the operators' listen address (--admin-addr):
	// readiness details and /metrics (bridge.Server.AdminHandler). Off by
	// default; never on the public listener.
	AdminAddr string
	// AdminPprof adds net/http/pprof under /debug/pprof/ on AdminAddr
	// (--admin-pprof; off by default; needs AdminAddr).
	AdminPprof bool
	// DB is the SQLite file (default DefaultDB) or a postgres:// URL.
	DB string
	// PublicURL is the server's public base URL; "" means http://{Addr}.
	PublicURL string
	// Seed is "demo" (DefaultSeed: Ray's demo records on an empty
	// database), "bench" (the bench fixture patient) or "none".
	Seed string
	// SeedClock is the clock the seed is built on: zero means now (the demo
	// then always reads as day five after surgery).
	SeedClock time.Time

	AllowedOrigins []string
	// AuthorizationServers names an external authorization server (the
	// issuer its tokens carry, with TokenJWKSURL); empty means the embedded
	// one (bridge/oauth) on PublicURL.
	AuthorizationServers []string
	// TokenJWKSURL is the external authorization server's JWKS (--token-jwks-url).
	TokenJWKSURL      string
	TokenPublicKeyPEM []byte
	// OAuthMetadataClient fetches Client ID Metadata Documents; nil refuses
	// private addresses (tests pass an httptest TLS client).
	OAuthMetadataClient *http.Client

	// Envelope is none|local|kms (default envelope.DefaultMode, none:
	// PLAINTEXT at rest).
	Envelope    string
	KMSEndpoint string
	KMSRegion   string

	// Secrets. Empty means the development default, announced at startup
	// and refused off loopback; a secret set shorter than MinSecretBytes is
	// refused, naming its variable.
	TokenSecret []byte // UNSAY_TOKEN_SECRET
	WriteSecret []byte // UNSAY_WRITE_SECRET
	AuditKey    []byte // UNSAY_AUDIT_KEY
	// SigningKey is UNSAY_SIGNING_KEY as set (base64 of an Ed25519 seed,
	// from `unsay keygen`): it signs every chain head and the audit head at
	// commit (P-26). Empty means store.DevSigningKey.
	SigningKey []byte

	// Alexa is the skill's configuration (skill id, verification, roots,
	// certificate overrides, default patient). Clock and Logger are filled in.
	Alexa skill.Config

	// SpeechMCPURL points the speech principal at a remote Unsay's /mcp;
	// "" means this server's own /mcp over loopback.
	SpeechMCPURL string
	// SpeechToken is a ready bearer token for SpeechMCPURL; "" means mint
	// one (care.read.user only) with TokenSecret.
	SpeechToken string
	// SpeechPatients are followed from the start, besides the default
	// patient and every patient with a linked device.
	SpeechPatients []string

	// Proactive notifications (off unless AlexaClientID is set).
	AlexaClientID     string
	AlexaClientSecret string // UNSAY_ALEXA_CLIENT_SECRET
	ProactiveTokenURL string
	ProactiveAPIBase  string
	ProactiveLive     bool
	// AlertBudget is the unasked notifications per patient per sliding
	// hour (--alert-budget, default proactive.DefaultAlertBudget); 0: none.
	AlertBudget int
	QuietHours  string // in TimeZone (default proactive.DefaultQuietHours); "off": none
	TimeZone    string // the patient's IANA zone (default proactive.DefaultTimeZone)

	Clock  func() time.Time
	Logger *slog.Logger
	// Getenv reads the environment for the envelope; nil is os.Getenv.
	Getenv func(string) string
}

// App is a running Unsay: call Serve, then Close.
type App struct {
	cfg      Config
	log      *slog.Logger
	now      func() time.Time
	Store    *store.Store
	Bridge   *bridge.Server
	Skill    *skill.Skill
	Speech   *speech.Principal
	Notifier *proactive.Notifier
	api      *httpapi.API
	// AS is the embedded OAuth authorization server; nil when an external
	// one or a static public key verifies tokens.
	AS *oauth.Server

	// holder names this instance in the speaker leases it competes for
	// (speech.Config.Compete) and in /readyz.
	holder string

	ln        net.Listener    // the public listener, capped at Config.HTTP.MaxConnections
	speechLn  *inProcListener // in process, the speech principal's own (nil with SpeechMCPURL)
	adminLn   net.Listener    // --admin-addr (nil when off)
	publicURL string
	// devSettings are the development-only settings in force (development
	// default secrets, --alexa-verify=false, --default-patient); requests
	// relayed by a proxy are refused while any is.
	devSettings []string
	notes       []string
	verifier    *auth.Verifier
	tokenCfg    auth.Config
	sealer      store.Sealer
	closeOnce   sync.Once

	authServers []string // named in the protected-resource metadata (oauth.go)
	speechTokMu sync.Mutex
	speechToks  map[string]cachedToken // minted speech tokens by patient set (oauth.go)
}

// New opens the store (seeding an empty one), listens on cfg.Addr, and
// builds every part, but serves nothing until Serve. Errors name the part
// that failed; nothing is left open on error.
func New(ctx context.Context, cfg Config) (_ *App, err error) {
	applyDefaults(&cfg)
	if err := refuseUnsafeExposure(cfg); err != nil {
		return nil, err
	}
	if cfg.AdminPprof && cfg.AdminAddr == "" {
		return nil, errors.New("--admin-pprof needs --admin-addr (pprof is never served on the public listener)")
	}
	if err := refuseWeakSecrets(cfg); err != nil {
		return nil, err
	}
	pause, err := testPause(cfg) // refused off loopback before anything opens
	if err != nil {
		return nil, err
	}
	var signingKey ed25519.PrivateKey
	if len(cfg.SigningKey) > 0 {
		k, err := store.ParseSigningKey(string(cfg.SigningKey))
		if err != nil {
			return nil, fmt.Errorf("UNSAY_SIGNING_KEY: %w", err)
		}
		signingKey = k
	}
	a := &App{cfg: cfg, log: cfg.Logger, now: cfg.Clock, holder: instanceID(), devSettings: devSettings(cfg)}
	defer func() {
		if err != nil {
			a.Close()
		}
	}()

	if a.sealer, err = envelope.New(ctx, envelope.Config{Mode: cfg.Envelope, Getenv: cfg.Getenv, KMSEndpoint: cfg.KMSEndpoint, KMSRegion: cfg.KMSRegion}); err != nil {
		return nil, fmt.Errorf("envelope: %w", err)
	}
	auditKey := cfg.AuditKey
	if len(auditKey) == 0 {
		auditKey = []byte(store.DevAuditKey)
		a.notes = append(a.notes, "DEV DEFAULT UNSAY_AUDIT_KEY")
	}
	if a.Store, err = store.Open(ctx, store.Options{DSN: cfg.DB, Clock: cfg.Clock, AuditKey: auditKey, Sealer: a.sealer,
		SigningKey: signingKey, Logger: cfg.Logger}); err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	if a.Store.UsesDevSigningKey() {
		a.notes = append(a.notes, "DEV DEFAULT UNSAY_SIGNING_KEY")
	}
	a.notes = append(a.notes, "chain heads signed by Ed25519 key "+store.KeyID(a.Store.PublicKey()))
	if err := a.Store.CheckStartup(ctx); err != nil {
		return nil, err
	}
	if n, err := a.Store.SignLegacyHeads(ctx); err != nil {
		return nil, fmt.Errorf("store: %w", err)
	} else if n > 0 {
		a.notes = append(a.notes, fmt.Sprintf("signed %d chain heads written before head signing", n))
	}
	if err := a.seed(ctx); err != nil {
		return nil, err
	}

	if a.ln, err = net.Listen("tcp", cfg.Addr); err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	if cfg.AdminAddr != "" {
		if a.adminLn, err = net.Listen("tcp", cfg.AdminAddr); err != nil {
			return nil, fmt.Errorf("listen --admin-addr: %w", err)
		}
		a.adminLn = limitListener(a.adminLn, AdminMaxConnections)
	}
	a.publicURL = strings.TrimRight(cfg.PublicURL, "/")
	if a.publicURL == "" {
		a.publicURL = "http://" + a.ln.Addr().String()
	}
	if !strings.HasPrefix(a.publicURL, "https://") {
		// Alexa's SSML <audio> fetches only https URLs.
		a.notes = append(a.notes, "recorded clips are described, not played, on Alexa (the public URL is not https)")
	}

	writeSecret := cfg.WriteSecret
	if len(writeSecret) == 0 {
		writeSecret = []byte(httpapi.DevWriteSecret)
		a.notes = append(a.notes, "DEV DEFAULT UNSAY_WRITE_SECRET")
	}
	if err := a.Store.WithMigrationLock(ctx, a.buildTokens); err != nil {
		return nil, err
	}

	if err := a.buildSpeech(ctx); err != nil {
		return nil, err
	}
	links := &linkAdapter{st: a.Store, speech: a.Speech, log: a.log, verifier: a.verifier}
	skillCfg := cfg.Alexa
	skillCfg.Clock, skillCfg.Logger = cfg.Clock, cfg.Logger
	skillCfg.TestPause = pause
	// Shared by every instance on one database, so an error report that
	// echoes one instance's session attributes is honoured by another.
	skillCfg.AttributesSecret = auditKey
	if a.Store.Backend() == "postgres" {
		// Several instances may serve the skill: a request one accepted is
		// refused by every other (P-22; store/alexareplay.go).
		skillCfg.SharedReplays = a.Store
	} else if skillCfg.KeptReportsFile == "" {
		// Error reports the ledger could not take yet are saved beside
		// the database, so a stop or crash loses none (skill/keptfile.go).
		skillCfg.KeptReportsFile = KeptReportsFile(cfg.DB)
	}
	if skillCfg.TestPause.For > 0 {
		a.notes = append(a.notes, "TEST PAUSE "+skillCfg.TestPause.At+" "+skillCfg.TestPause.For.String()+" on Alexa responses ("+TestPauseEnv+", tests only)")
	}
	if a.Skill, err = skill.New(skillCfg, a.Speech, links); err != nil {
		return nil, fmt.Errorf("alexa skill: %w", err)
	}

	// The MCP server first; then the parts with routes of their own, built
	// from it, are mounted on it.
	srv, err := bridge.New(ctx, bridge.Config{
		PublicURL: a.publicURL, AllowedOrigins: cfg.AllowedOrigins, AuthorizationServers: a.authServers,
		Clock: cfg.Clock, Logger: cfg.Logger,
		// Shared by every instance on one database, so a list cursor
		// issued by one is honoured by another (no sticky routing).
		CursorSecret: auditKey,
		// Clip URLs (/audio/{token}) are keyed from the signing key, which
		// every instance shares; without one, a random key per process.
		AudioURLKey: cfg.SigningKey,
	}, a.Store, a.verifier, bridge.Extra{
		Alexa:         a.Skill,
		StoreWritable: a.Store.WriteHealthState, // a full or read-only disk: not ready
		Ready: func(context.Context) map[string]any {
			// Ready only while the speech principal is connected, caught up
			// with the store (speech.DefaultMaxLag) and confirming facts at speak
			// time (P-24): Alexa traffic goes only to such an instance.
			st := a.Speech.State()
			return map[string]any{"speech": map[string]any{"ok": st.Ready, "connected": st.Connected,
				"lagSeconds": st.LagSeconds, "confirming": st.Confirming,
				"lastEventAt": st.LastEventAt, "backlog": st.Backlog, "patients": st.Patients,
				"speaksFor": a.Speech.SpeaksFor(), "instance": a.holder}}
		},
		// The clinician's timeline reads the heard ledger (care-delivery://).
		Delivery: a.Speech,
	})
	if err != nil {
		return nil, fmt.Errorf("mcp server: %w", err)
	}
	a.api = httpapi.New(httpapi.Config{
		Store: a.Store, Verifier: a.verifier, WriteSecret: writeSecret, PublicURL: a.publicURL,
		AuthorizationServers: a.authServers, Clock: cfg.Clock, Logger: cfg.Logger,
		Subscribers: srv.Subscribers, OnPublish: srv.ObservePublish, OnAuditLost: srv.ObserveAuditLost,
	})
	srv.Mount(a.api)
	if a.AS != nil {
		srv.Mount(a.AS)
	}
	a.Bridge = srv
	for _, c := range a.Speech.Collectors() {
		if err := srv.Metrics().Register(c); err != nil {
			return nil, fmt.Errorf("metrics: %w", err)
		}
	}
	if err := a.buildNotifier(); err != nil {
		return nil, err
	}
	return a, nil
}

// KeptReportsFile is where a server on the SQLite database at db saves
// the Alexa error reports its ledger could not take yet: db's path (without
// a "file:" prefix) + ".kept-reports". With Postgres they are kept in
// memory only unless Config.Alexa.KeptReportsFile names a file.
func KeptReportsFile(db string) string {
	path := strings.TrimPrefix(db, "file:")
	if real, err := filepath.EvalSymlinks(path); err == nil {
		path = real // the same file however the database's path is spelt
	}
	return path + ".kept-reports"
}

func applyDefaults(cfg *Config) {
	if cfg.Addr == "" {
		cfg.Addr = DefaultAddr
	}
	if cfg.DB == "" {
		cfg.DB = DefaultDB
	}
	if cfg.Seed == "" {
		cfg.Seed = DefaultSeed
	}
	if cfg.Envelope == "" {
		cfg.Envelope = envelope.DefaultMode
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.QuietHours == "" {
		cfg.QuietHours = proactive.DefaultQuietHours
	}
	if cfg.TimeZone == "" {
		cfg.TimeZone = proactive.DefaultTimeZone
	}
	cfg.HTTP.applyDefaults()
}

// seed fills an empty database with the configured fixture (P-15). Seeding
// fires no notification: the MCP server follows the feed from the last
// sequence number at its start (P-8).
func (a *App) seed(ctx context.Context) error {
	at := a.cfg.SeedClock
	if at.IsZero() {
		at = a.now()
	}
	var seeded bool
	var err error
	switch a.cfg.Seed {
	case "none":
		return nil
	case "demo":
		seeded, err = store.Seed(ctx, a.Store, at)
	case "bench":
		seeded, err = store.SeedBench(ctx, a.Store, at)
	default:
		return fmt.Errorf("seed %q: want demo, bench or none", a.cfg.Seed)
	}
	if err != nil {
		return fmt.Errorf("seed: %w", err)
	}
	if seeded {
		a.notes = append(a.notes, "seeded "+a.cfg.Seed+" data at "+at.UTC().Format(time.RFC3339))
	}
	return nil
}

// speechIdleConns is how many idle connections the speech principal keeps
// to its MCP server.
const speechIdleConns = 32

// buildSpeech creates the speech principal: an MCP client of this server
// (or SpeechMCPURL) holding a token with care.read.user and nothing else,
// bound to the followed patients (P-18).
func (a *App) buildSpeech(ctx context.Context) error {
	patients, err := a.speechPatients(ctx)
	if err != nil {
		return err
	}
	mcpURL := a.cfg.SpeechMCPURL
	// One round of a turn's confirmation sends its reads at once: keep a
	// connection for each idle between rounds instead of dialling anew
	// (net/http keeps 2 per host by default).
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = speechIdleConns
	hc := &http.Client{Transport: tr}
	if mcpURL == "" {
		// To a listener of its own (so the public listener's connection cap
		// never keeps it out), in process (inproc.go: the same HTTP
		// exchange, without the TCP loopback), presenting the public host
		// so the Host check passes behind a proxy.
		a.speechLn = newInProcListener()
		tr.DialContext = a.speechLn.DialContext
		tr.Proxy = nil // never through an HTTP(S)_PROXY of the environment
		mcpURL = "http://" + a.speechLn.Addr().String() + "/mcp"
		if pu, err := url.Parse(a.publicURL); err == nil {
			hc.Transport = hostRewriter{host: pu.Host, next: tr}
		}
	}
	sc := speech.Config{
		MCPURL: mcpURL, Patients: patients, Ledger: a.Store.HeardLedger(), Compete: a.compete,
		Clock: a.cfg.Clock, Logger: a.log.With("part", "speech"), HTTPClient: hc,
		// A stalled stream is noticed within two pings, so Ray is never told
		// an old instruction for long while a revision waits (Pending refuses
		// while disconnected).
		KeepAlive: SpeechKeepAlive,
	}
	if a.cfg.SpeechToken != "" {
		if err := speechTokenIsUserOnly(a.cfg.SpeechToken); err != nil {
			return fmt.Errorf("--speech-token: %w", err)
		}
		sc.Token = a.cfg.SpeechToken
		exp, err := speechTokenExpiry(a.cfg.SpeechToken)
		if err != nil {
			return fmt.Errorf("--speech-token: %w", err)
		}
		sc.TokenExpiry = exp
		if err := a.checkSpeechTokenExpiry(exp); err != nil {
			return err
		}
	} else {
		if a.AS == nil && !a.verifier.HS256() {
			return errors.New("speech principal: give --speech-token, a care.read.user token of the authorization server in force")
		}
		sc.TokenSource = a.mintSpeechToken
		if _, err := a.mintSpeechToken(ctx, patients); err != nil { // warm: the first connection need not wait for it
			return fmt.Errorf("speech principal: token: %w", err)
		}
	}
	if a.Speech, err = speech.New(sc); err != nil {
		return fmt.Errorf("speech principal: %w", err)
	}
	return nil
}

// speechPatients is the configured patients, the default patient, and every
// patient with a linked device, sorted and unique.
func (a *App) speechPatients(ctx context.Context) ([]string, error) {
	set := slices.Clone(a.cfg.SpeechPatients)
	if p := a.cfg.Alexa.DefaultPatient; p != "" {
		set = append(set, p)
	}
	linked, err := a.Store.LinkedPatients(ctx)
	if err != nil {
		return nil, fmt.Errorf("linked patients: %w", err)
	}
	set = append(set, linked...)
	granted, err := a.Store.GrantedPatients(ctx) // account-linked (OAuth) patients
	if err != nil {
		return nil, fmt.Errorf("granted patients: %w", err)
	}
	set = append(set, granted...)
	slices.Sort(set)
	return slices.Compact(set), nil
}

// buildNotifier wires proactive notifications when an Alexa client id is
// configured (P-23).
func (a *App) buildNotifier() error {
	if a.cfg.AlexaClientID == "" {
		a.notes = append(a.notes, "proactive notifications off (no --alexa-client-id)")
		return nil
	}
	client, err := proactive.NewClient(proactive.ClientConfig{
		ClientID: a.cfg.AlexaClientID, ClientSecret: a.cfg.AlexaClientSecret,
		TokenURL: a.cfg.ProactiveTokenURL, APIBase: a.cfg.ProactiveAPIBase, Live: a.cfg.ProactiveLive, Clock: a.cfg.Clock,
	})
	if err != nil {
		return err
	}
	loc, err := time.LoadLocation(a.cfg.TimeZone)
	if err != nil {
		return fmt.Errorf("--time-zone: %w", err)
	}
	quiet, err := proactive.ParseQuietHours(a.cfg.QuietHours, loc)
	if err != nil {
		return fmt.Errorf("--quiet-hours: %w", err)
	}
	budget, err := proactive.NewBudget(proactive.BudgetConfig{Slots: a.Store.AlertBudget(), Max: a.cfg.AlertBudget, Quiet: quiet, Clock: a.cfg.Clock})
	if err != nil {
		return err
	}
	a.Notifier, err = proactive.NewNotifier(proactive.NotifierConfig{
		Budget: budget, Sender: client, Clock: a.cfg.Clock, Logger: a.log.With("part", "proactive"),
		Recipients: func(ctx context.Context, patient string) ([]proactive.Recipient, error) {
			users, err := a.Store.LinkedUsers(ctx, patient)
			if err != nil {
				return nil, err
			}
			out := make([]proactive.Recipient, len(users))
			for i, u := range users {
				out[i] = proactive.Recipient{UserID: u.UserID, APIEndpoint: u.APIEndpoint}
			}
			return out, nil
		},
		SessionOpen: a.Skill.SessionOpen,
		HasPending: func(ctx context.Context, patient string) (bool, error) {
			p, err := a.Speech.Pending(ctx, patient)
			return len(p) > 0, err
		},
		// "Told unasked at 10:14 (notification)" on the clinician's timeline.
		Told: func(ctx context.Context, patient string, at time.Time) {
			if err := a.Speech.Notified(ctx, patient, at); err != nil {
				a.log.Warn("proactive: notification not recorded in the delivery log", "patient", patient, "err", err)
			}
		},
	})
	if err != nil {
		return err
	}
	a.Speech.OnQueued(a.Notifier.Revision)
	a.notes = append(a.notes, fmt.Sprintf("proactive notifications on (budget %d/h, quiet %s %s)", max(a.cfg.AlertBudget, 0), a.cfg.QuietHours, a.cfg.TimeZone))
	return nil
}

// URL is the server's public base URL.
func (a *App) URL() string { return a.publicURL }

// ListenAddr is the public listener's address ("127.0.0.1:8080"), which
// differs from URL's host behind a proxy.
func (a *App) ListenAddr() string { return a.ln.Addr().String() }

// AdminURL is the admin listener's base URL ("http://127.0.0.1:9090"), or ""
// without Config.AdminAddr.
func (a *App) AdminURL() string {
	if a.adminLn == nil {
		return ""
	}
	return "http://" + a.adminLn.Addr().String()
}

// TokenConfig is the token configuration (for minting development tokens in
// tests, the demo and the bench).
func (a *App) TokenConfig() auth.Config { return a.tokenCfg }

// StartupLine is the one line printed at start: the URL, the store backend,
// the encryption mode (PLAINTEXT when none), Alexa verification, any
// development default secret, and other notes.
func (a *App) StartupLine() string {
	parts := []string{
		"unsay serving " + a.publicURL,
		"store " + a.Store.Backend(),
		"encryption " + envelope.Describe(a.sealer),
	}
	parts = append(parts, a.Skill.StartupNotes()...)
	parts = append(parts, a.verifier.Describe())
	switch {
	case a.AS != nil:
		parts = append(parts, "authorization server "+a.AS.Issuer()+" (embedded)")
	case len(a.authServers) > 0:
		parts = append(parts, "authorization server "+strings.Join(a.authServers, ", "))
	default:
		parts = append(parts, "no authorization server configured")
	}
	if ps := a.Speech.State().Patients; len(ps) > 0 {
		parts = append(parts, "speech principal follows "+strings.Join(ps, ",")+" as care.read.user")
	} else {
		parts = append(parts, "speech principal follows no patient yet (link a device, or --speech-patient)")
	}
	if a.adminLn != nil {
		what := "readiness details, metrics"
		if a.cfg.AdminPprof {
			what += ", pprof"
		}
		parts = append(parts, "admin http://"+a.adminLn.Addr().String()+" ("+what+")")
	}
	if len(a.devSettings) > 0 {
		parts = append(parts, "development settings: requests relayed by a proxy are refused")
	}
	parts = append(parts, a.notes...)
	return strings.Join(parts, " | ")
}

// Serve serves HTTP (the public listener with Config.HTTP's limits, the
// speech principal's in-process listener, and --admin-addr when set) and runs
// the speech principal and the notifier until ctx ends, then shuts down
// gracefully (up to 5 s for in-flight requests). It returns nil after ctx
// ends, or an HTTP server's error if one stopped first.
func (a *App) Serve(ctx context.Context) error {
	hs := a.publicServer()
	errc := make(chan error, 3)
	public := limitListener(a.ln, a.cfg.HTTP.MaxConnections)
	hs.ConnState = public.connState
	go func() { errc <- hs.Serve(public) }()
	if a.speechLn != nil {
		go func() { errc <- hs.Serve(a.speechLn) }()
	}
	var admin *http.Server
	if a.adminLn != nil {
		admin = a.adminServer()
		if ll, ok := a.adminLn.(*limitedListener); ok {
			admin.ConnState = ll.connState
		}
		go func() { errc <- admin.Serve(a.adminLn) }()
	}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	run := func(part string, f func(context.Context) error) {
		defer wg.Done()
		if err := f(runCtx); err != nil && runCtx.Err() == nil {
			a.log.Error(part+" stopped", "err", err) // it ended before the server did
		}
	}
	wg.Add(1)
	go run("speech principal", a.Speech.Run)
	wg.Add(1)
	go run("speech readiness feed", a.feedSpeech)
	if a.Notifier != nil {
		wg.Add(1)
		go run("proactive notifier", a.Notifier.Run)
	}
	var err error
	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	cancel()
	sctx, scancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer scancel()
	a.Bridge.Close() // ends MCP streams so Shutdown need not wait for them
	_ = hs.Shutdown(sctx)
	if admin != nil {
		_ = admin.Shutdown(sctx)
	}
	wg.Wait() // the speech principal's Run returns once its speaker leases are given up
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

// feedSpeech tells the speech principal of every change the store commits
// from now on (URI, version, time: never a value), so its readiness
// compares what it has read with what the store holds (P-24). It returns
// when ctx ends.
func (a *App) feedSpeech(ctx context.Context) error {
	seq, err := a.Store.LastSeq(ctx)
	if err != nil {
		return err
	}
	for c := range a.Store.Watch(ctx, seq) {
		if c.Audience == models.AudienceUser {
			a.Speech.Committed(c.URI, c.Version, c.At)
		}
	}
	return nil
}

// Close releases the listener and the store. Safe to call more than once.
func (a *App) Close() {
	a.closeOnce.Do(func() {
		if a.Bridge != nil {
			a.Bridge.Close()
		}
		if a.api != nil {
			a.api.Close() // the batched audit rows of rate-limited attempts
		}
		if a.Skill != nil {
			a.Skill.Close() // error reports still kept are lost, logged (finding V5)
		}
		for _, ln := range []net.Listener{a.ln, a.adminLn} {
			if ln != nil {
				_ = ln.Close()
			}
		}
		if a.speechLn != nil {
			_ = a.speechLn.Close()
		}
		if a.Store != nil {
			_ = a.Store.Close()
		}
	})
}

// hostRewriter sends loopback requests with the public Host header.
type hostRewriter struct {
	host string
	next http.RoundTripper
}

func (h hostRewriter) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Host = h.host
	return h.next.RoundTrip(r)
}

// linkAdapter gives the skill device linking (skill.Links) over the store,
// mapping the store's errors to the skill's, and makes the speech principal
// follow a newly linked patient.
type linkAdapter struct {
	st       *store.Store
	speech   *speech.Principal
	log      *slog.Logger
	verifier *auth.Verifier // account-linking access tokens (oauth.go)
}

func (l *linkAdapter) RedeemLinkCode(ctx context.Context, alexaUserID, apiEndpoint, code string, now time.Time) (string, error) {
	patient, err := l.st.RedeemLinkCode(ctx, alexaUserID, apiEndpoint, code, now)
	var paused *store.LinkPausedError
	switch {
	case errors.Is(err, store.ErrLinkCodeInvalid):
		return "", skill.ErrLinkCodeInvalid
	case errors.As(err, &paused):
		return "", &skill.LinkPausedError{Until: paused.Until}
	case errors.Is(err, store.ErrLinkBlocked):
		return "", skill.ErrLinkBlocked
	case err != nil:
		return "", err
	}
	// AddPatient returns once the speech principal's session follows the
	// patient, so Ray's next request is answered (it re-initializes: a token
	// for a new patient set is a new session identity).
	if err := l.speech.AddPatient(ctx, patient); err != nil {
		l.log.Warn("speech principal could not follow the newly linked patient", "patient", patient, "err", err)
	}
	return patient, nil
}

func (l *linkAdapter) LinkedPatient(ctx context.Context, alexaUserID string) (string, string, bool, error) {
	return l.st.LinkedPatient(ctx, alexaUserID)
}

// compete is the speech principal's speaker-lease competition
// (speech.CompeteFunc) over the store's leases, as this instance.
func (a *App) compete(ctx context.Context, lease string, ttl time.Duration, won, lost func()) error {
	k := &store.LeaseKeeper{Store: a.Store, Holder: a.holder, TTL: ttl}
	return k.Run(ctx, []string{lease}, func(string) { won() }, func(string) { lost() })
}

// The skill checks each response against the principal's revision count
// just before writing it (P-24); it finds the count by this interface.
var _ skill.RevisionCounter = (*speech.Principal)(nil)

// TestPauseEnv names the test-only variable that holds every Alexa
// response carrying something to mark heard at one point of its delivery:
// "before-write:30s" (announcements recorded as offered, response not yet
// written) or "before-heard:30s" (written and flushed, not yet marked
// heard). Whole-program tests kill the server there (P-24). It is refused
// on anything but loopback.
const TestPauseEnv = "UNSAY_TEST_ALEXA_PAUSE"

// testPause reads TestPauseEnv: "" is off; anything else must be
// POINT:DURATION on a loopback address.
func testPause(cfg Config) (skill.TestPause, error) {
	getenv := cfg.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	v := getenv(TestPauseEnv)
	if v == "" {
		return skill.TestPause{}, nil
	}
	point, dur, ok := strings.Cut(v, ":")
	d, err := time.ParseDuration(dur)
	if !ok || err != nil || d <= 0 || (point != skill.TestPauseBeforeWrite && point != skill.TestPauseBeforeHeard) {
		return skill.TestPause{}, fmt.Errorf("%s=%q: want %s:DURATION or %s:DURATION", TestPauseEnv, v, skill.TestPauseBeforeWrite, skill.TestPauseBeforeHeard)
	}
	host, _, err := net.SplitHostPort(cfg.Addr)
	if err != nil || !isLoopbackHost(host) {
		return skill.TestPause{}, fmt.Errorf("%s is for tests on loopback only; refusing it on %s", TestPauseEnv, cfg.Addr)
	}
	if cfg.PublicURL != "" {
		if u, err := url.Parse(cfg.PublicURL); err != nil || !isLoopbackHost(u.Hostname()) {
			return skill.TestPause{}, fmt.Errorf("%s is for tests on loopback only; refusing it with --public-url %s", TestPauseEnv, cfg.PublicURL)
		}
	}
	return skill.TestPause{At: point, For: d}, nil
}

// instanceID names this process for leases: host, pid and a random part.
func instanceID() string {
	host, _ := os.Hostname()
	var b [4]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s:%d:%x", host, os.Getpid(), b)
}

// refuseUnsafeExposure refuses development-only settings (devSettings) on an
// address other than loopback: development default secrets (anyone with the
// source could mint tokens and sign writes), --alexa-verify=false (anyone
// could speak as Alexa) and --default-patient (any unlinked Echo would hear
// that patient). On loopback they are allowed, and requests relayed by a
// reverse proxy are refused at request time (refuseRelayedDev).
func refuseUnsafeExposure(cfg Config) error {
	if _, _, err := net.SplitHostPort(cfg.Addr); err != nil {
		return fmt.Errorf("--addr %q: %w", cfg.Addr, err)
	}
	// Loopback both where it listens and where it is reached: a loopback
	// listener behind a reverse proxy with a public --public-url is exposed.
	if !isExposed(cfg) {
		return nil
	}
	bad := devSettings(cfg)
	if len(bad) == 0 {
		return nil
	}
	return fmt.Errorf("refusing to serve %s with development-only settings: %s", exposure(cfg), strings.Join(bad, ", "))
}

// exposure says, for refuseUnsafeExposure, where an exposed server listens
// and is reached, naming what is not loopback: "0.0.0.0:8080 (listening
// not on loopback; public URL http://0.0.0.0:8080, the default)" or
// "127.0.0.1:8080 (public URL https://care.example is not loopback)".
func exposure(cfg Config) string {
	var why []string
	if host, _, err := net.SplitHostPort(cfg.Addr); err != nil || !isLoopbackHost(host) {
		why = append(why, "listening not on loopback")
	}
	switch u, err := url.Parse(cfg.PublicURL); {
	case cfg.PublicURL == "":
		why = append(why, "public URL http://"+cfg.Addr+", the default")
	case err != nil || !isLoopbackHost(u.Hostname()):
		why = append(why, "public URL "+cfg.PublicURL+" is not loopback")
	default:
		why = append(why, "public URL "+cfg.PublicURL)
	}
	return cfg.Addr + " (" + strings.Join(why, "; ") + ")"
}

// devSettings lists, sorted, the development-only settings cfg holds: each
// unset secret (its development default is public), --alexa-verify=false
// and --default-patient.
func devSettings(cfg Config) []string {
	var bad []string
	secrets := map[string][]byte{"UNSAY_WRITE_SECRET": cfg.WriteSecret, "UNSAY_AUDIT_KEY": cfg.AuditKey, "UNSAY_SIGNING_KEY": cfg.SigningKey}
	// UNSAY_TOKEN_SECRET counts only where HS256 development tokens are
	// accepted, on loopback: off it HS256 is off, so the secret is not needed.
	if !isExposed(cfg) {
		secrets["UNSAY_TOKEN_SECRET"] = cfg.TokenSecret
	}
	for name, v := range secrets {
		if len(v) == 0 {
			bad = append(bad, name+" unset (development default)")
		}
	}
	if !cfg.Alexa.Verify {
		bad = append(bad, "--alexa-verify=false")
	}
	if cfg.Alexa.DefaultPatient != "" {
		bad = append(bad, "--default-patient")
	}
	slices.Sort(bad)
	return bad
}

// MinSecretBytes is the shortest HMAC secret accepted (UNSAY_TOKEN_SECRET,
// UNSAY_WRITE_SECRET, UNSAY_AUDIT_KEY): 32 bytes, as auth.MinSecretBytes.
// A 1-byte write secret was recovered from one signed write.
const MinSecretBytes = auth.MinSecretBytes

// refuseWeakSecrets refuses an HMAC secret that is set but shorter than
// MinSecretBytes, naming its variable (unset means the development
// default, which refuseUnsafeExposure keeps to loopback).
func refuseWeakSecrets(cfg Config) error {
	var bad []string
	for _, s := range []struct {
		name string
		v    []byte
	}{{"UNSAY_TOKEN_SECRET", cfg.TokenSecret}, {"UNSAY_WRITE_SECRET", cfg.WriteSecret}, {"UNSAY_AUDIT_KEY", cfg.AuditKey}} {
		if len(s.v) > 0 && len(s.v) < MinSecretBytes {
			bad = append(bad, fmt.Sprintf("%s is %d bytes", s.name, len(s.v)))
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("refusing weak secrets: %s; each must be at least %d bytes (e.g. openssl rand -base64 32)", strings.Join(bad, ", "), MinSecretBytes)
	}
	return nil
}

func isLoopbackHost(host string) bool {
	ip := net.ParseIP(host)
	return host == "localhost" || (ip != nil && ip.IsLoopback())
}

// SpeechTokenWarnWithin: a --speech-token that expires sooner than this
// after startup is warned of in the log (the speech principal stops
// connecting when it does).
const SpeechTokenWarnWithin = 24 * time.Hour

// speechTokenExpiry is the exp claim of a --speech-token, zero when it has
// none; the signature is the server's to verify.
func speechTokenExpiry(tok string) (time.Time, error) {
	var claims jwt.MapClaims
	if _, _, err := jwt.NewParser().ParseUnverified(tok, &claims); err != nil {
		return time.Time{}, fmt.Errorf("not a JWT: %w", err)
	}
	exp, err := claims.GetExpirationTime()
	if err != nil {
		return time.Time{}, fmt.Errorf("its exp claim: %w", err)
	}
	if exp == nil {
		return time.Time{}, nil
	}
	return exp.Time, nil
}

// checkSpeechTokenExpiry refuses a --speech-token that has already
// expired, warns of one that expires within SpeechTokenWarnWithin, and
// logs when any other expires.
func (a *App) checkSpeechTokenExpiry(exp time.Time) error {
	if exp.IsZero() {
		return nil
	}
	now := a.now()
	left := exp.Sub(now)
	switch {
	case left <= 0:
		return fmt.Errorf("--speech-token expired at %s; give a new care.read.user token", exp.UTC().Format(time.RFC3339))
	case left < SpeechTokenWarnWithin:
		a.log.Warn("speech: the speech principal's token (--speech-token) expires soon; Ray's device stops reaching his care notes then unless it is replaced",
			"expires", exp.UTC().Format(time.RFC3339), "in", left.Round(time.Second).String())
	default:
		a.log.Info("speech: the speech principal's token (--speech-token) expires", "expires", exp.UTC().Format(time.RFC3339))
	}
	return nil
}

// speechTokenIsUserOnly refuses a --speech-token whose scope claim holds
// anything but care.read.user (P-18: the surface that talks to Ray reads
// as the speakable scope only). The signature is the server's to verify;
// this reads the claims only to refuse a wider token before it is used.
func speechTokenIsUserOnly(tok string) error {
	var claims jwt.MapClaims
	if _, _, err := jwt.NewParser().ParseUnverified(tok, &claims); err != nil {
		return fmt.Errorf("not a JWT: %w", err)
	}
	scope, _ := claims["scope"].(string)
	if strings.Join(strings.Fields(scope), " ") != string(models.ScopeReadUser) {
		return fmt.Errorf("the speech principal's token must hold %s and nothing else (it holds %q)", models.ScopeReadUser, scope)
	}
	return nil
}
