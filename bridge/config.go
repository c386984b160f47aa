package bridge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/unsay/unsay/models"
	"github.com/unsay/unsay/store"
)

// Defaults for Config.
const (
	// DefaultPageSize is the resources/list page size (P-11): 3 entries.
	DefaultPageSize = 3
	// DefaultEventStoreMaxBytes bounds the resumable event store: 8 MiB of
	// stored JSON-RPC frames across all sessions, oldest purged first.
	DefaultEventStoreMaxBytes = 8 << 20
	// DefaultSessionTimeout closes an MCP session that sent no POST for 30
	// minutes (an open GET stream alone does not count as activity in the SDK).
	DefaultSessionTimeout = 30 * time.Minute
	// DefaultKeepAlive pings every session with a GET stream attached every
	// 5 minutes; one whose client leaves KeepAliveMisses pings in a row
	// unanswered is closed. A client listening on its GET stream answers the
	// pings (a POST), which keeps its session from the idle timeout: the
	// speech principal stays connected overnight. A session with no stream
	// attached is not pinged (it could not receive the ping): it lives until
	// the idle timeout.
	DefaultKeepAlive = 5 * time.Minute
	// KeepAliveMisses is how many keep-alive pings in a row a session may
	// leave unanswered before it is closed: 3.
	KeepAliveMisses = 3
)

// ProtocolVersion is the MCP protocol version this server speaks over
// stateful Streamable HTTP, sessions opened with initialize
// (models.ProtocolVersion, the read contract's). Older stateful-era
// versions are also accepted (see LegacyProtocolVersions).
const ProtocolVersion = models.ProtocolVersion

// ModernProtocolVersion is the MCP protocol version served statelessly on
// the same endpoint: per-request _meta, server/discover,
// subscriptions/listen, no sessions (MCP 2026-07-28, "dual-era server" in
// its Versioning § Backward Compatibility).
const ModernProtocolVersion = "2026-07-28"

// legacyProtocolVersions are the versions a stateful session may
// negotiate with initialize, newest first. 2026-07-28 is stateless-only
// in the SDK and is never negotiated by initialize.
var legacyProtocolVersions = []string{"2025-11-25", "2025-06-18", "2025-03-26"}

// SupportedProtocolVersions returns every protocol version /mcp serves,
// newest first: 2026-07-28 (stateless) and the stateful-era versions. It
// is the list server/discover answers and the "supported" list of every
// -32022 UnsupportedProtocolVersion error; an MCP-Protocol-Version header
// naming anything else is answered with that error (400) before the SDK
// runs.
func SupportedProtocolVersions() []string {
	return append([]string{ModernProtocolVersion}, legacyProtocolVersions...)
}

// LegacyProtocolVersions returns the versions a 2025-era client may
// negotiate with initialize, newest first.
func LegacyProtocolVersions() []string {
	return append([]string(nil), legacyProtocolVersions...)
}

// Config configures New.
type Config struct {
	// PublicURL is the server's public base URL, scheme and host with an
	// optional port and no trailing slash ("http://127.0.0.1:8080"). The MCP
	// resource identifier is PublicURL + "/mcp". Required.
	PublicURL string
	// AllowedOrigins are browser origins ("https://app.example") allowed in
	// addition to PublicURL's own origin. Any other Origin is answered 403.
	AllowedOrigins []string
	// AuthorizationServers are the OAuth authorization servers named in the
	// protected-resource metadata (served by bridge/httpapi); reported in /readyz.
	AuthorizationServers []string
	// Clock is the server clock for staleness, ages and asOf; nil means the
	// store's clock.
	Clock func() time.Time
	// Logger receives structured logs; nil means slog.Default(). Nothing
	// logged carries a token, a signature or a fact's value.
	Logger *slog.Logger
	// PageSize is the resources/list page size; 0 means DefaultPageSize (3).
	PageSize int
	// EventStoreMaxBytes bounds the resumable event store in bytes; 0 means
	// DefaultEventStoreMaxBytes.
	EventStoreMaxBytes int
	// SessionTimeout closes an MCP session idle this long; 0 means
	// DefaultSessionTimeout, negative means never.
	SessionTimeout time.Duration
	// KeepAlive is the server→client ping interval; 0 means
	// DefaultKeepAlive, negative means no pings.
	KeepAlive time.Duration
	// MaxSessionsPerPrincipal caps the open MCP sessions of one principal
	// (subject, patients and scopes); 0 means DefaultMaxSessionsPerPrincipal
	// (32), negative means no cap. At the cap an initialize ends the
	// principal's least-recently-used idle session; it is refused 429 only
	// when none is idle.
	MaxSessionsPerPrincipal int
	// MaxListensPerPrincipal caps the open subscriptions/listen streams
	// of one principal on the 2026-07-28 path (each holds a connection);
	// 0 means DefaultMaxListensPerPrincipal (32), negative means no cap.
	// A listen beyond it is refused 429.
	MaxListensPerPrincipal int
	// StreamQueueBytes bounds what each response stream has queued and not
	// yet written (P-25); 0 means DefaultStreamQueueBytes (64 KiB).
	StreamQueueBytes int
	// StreamWriteTimeout is the deadline of each write to a response
	// stream; 0 means DefaultStreamWriteTimeout (10 s).
	StreamWriteTimeout time.Duration
	// StreamKeepAlive is how long a response stream may be silent before a
	// ": keep-alive" comment is written; 0 means DefaultStreamKeepAlive
	// (15 s), negative means none.
	StreamKeepAlive time.Duration
	// StreamSendBuffer is the SO_SNDBUF asked for on a standalone GET
	// stream's TCP connection (with Server.ConnContext on the http.Server);
	// 0 means DefaultStreamSendBuffer (64 KiB), negative leaves the kernel's.
	StreamSendBuffer int
	// CursorSecret keys the MAC of resources/list cursors (P-11). Every
	// instance behind one load balancer must share it, so that a cursor
	// issued by one instance is honoured by another: a 2026-07-28 client
	// has no session and no sticky routing. The key is derived from it
	// (HMAC-SHA256 over "unsay/list-cursor/v1"), so it may be a secret
	// used elsewhere (the audit key). Nil: a random key per process
	// (cursors then hold only on the instance that issued them).
	CursorSecret []byte
	// WhatsChangedLimit bounds the revisions of one whats_changed answer; 0
	// means DefaultWhatsChangedLimit (200).
	WhatsChangedLimit int
	// Version is the implementation version reported in initialize; "" means "dev".
	Version string
	// AudioURLKey keys the signed clip URLs (GET /audio/{token}, audio.go);
	// every instance behind one public URL needs the same key. Empty: a
	// random key per process (URLs then work on the instance that minted them).
	AudioURLKey []byte
	// AudioURLTTL is how long a minted clip URL is served; 0 means
	// DefaultAudioURLTTL (5 minutes).
	AudioURLTTL time.Duration
}

// Extra carries the optional pieces bridge/app wires in from other
// packages. Every field may be nil. (Parts with routes of their own are
// mounted with Server.Mount.)
type Extra struct {
	// Alexa is the Alexa custom-skill endpoint, mounted at POST /alexa
	// (package skill). Nil: /alexa answers 404.
	Alexa http.Handler
	// Web serves GET /, /echo.html and /clinician (package web:
	// web.Handler()). Nil: web.Handler() is used.
	Web http.Handler
	// Ready adds entries to the admin GET /readyz (e.g. the speech
	// principal's state). A value {"ok": false} under any key makes /readyz
	// answer 503 on both listeners; the public one names only the key
	// ("speech not ready").
	Ready func(ctx context.Context) map[string]any
	// StoreWritable, if set, reports whether the store can commit a write
	// now (a nil Err) and since when that is known — a full or read-only
	// disk, a database locked by another process, a lost database
	// (store.Store.WriteHealthState). An Err makes /readyz answer 503 with
	// the reason "store cannot commit writes". It is given 1 s
	// (storeWriteWait) and must answer by then. Nil: not checked (only
	// that the store answers).
	StoreWritable func(ctx context.Context) store.WriteHealthReport
	// Delivery is the heard ledger behind the care-delivery:// resources
	// (delivery.go; the speech principal). Nil: every such URI is not found.
	Delivery DeliverySource
}

// ErrConfig wraps every configuration error New returns.
var ErrConfig = errors.New("bridge: invalid configuration")

// publicURL is the parsed, validated PublicURL.
type publicURL struct {
	base     string // "http://127.0.0.1:8080"
	origin   string // "http://127.0.0.1:8080" (scheme://host[:port], lower case)
	host     string // host name without port, lower case
	loopback bool
}

func parsePublicURL(raw string) (publicURL, error) {
	u, err := url.Parse(strings.TrimRight(raw, "/"))
	if err != nil {
		return publicURL{}, fmt.Errorf("%w: public URL: %v", ErrConfig, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" || (u.Path != "" && u.Path != "/") {
		return publicURL{}, fmt.Errorf("%w: public URL must be http(s)://host[:port] with no path, got %q", ErrConfig, raw)
	}
	host := strings.ToLower(u.Hostname())
	return publicURL{
		base:     u.Scheme + "://" + u.Host,
		origin:   strings.ToLower(u.Scheme + "://" + u.Host),
		host:     host,
		loopback: isLoopbackHost(host),
	}, nil
}
