// Package httpapi is the clinicians' and carers' HTTP surface beside /mcp:
//
//	POST /write                                    a signed (HMAC) or bearer write of one fact revision (P-12, P-14)
//	POST /link                                     a carer creates a six-digit device-linking code (care.link token)
//	GET  /verify?uri=…                             one hash-chain verdict: hashes, versions, times, never values (P-5, P-2)
//	GET  /verify                                   every chain the bearer token can read
//	GET  /.well-known/oauth-protected-resource     RFC 9728 metadata for "{public-url}"
//	GET  /.well-known/oauth-protected-resource/mcp RFC 9728 metadata for "{public-url}/mcp"
//
// Every answer is JSON; refusals are {"error": "...", "field"?: "..."} and
// never echo a fact's value, a signature or a token. The package owns no
// global state: everything hangs off *API.
package httpapi

import (
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	sdkauth "github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/unsay/unsay/bridge/auth"
	"github.com/unsay/unsay/models"
	"github.com/unsay/unsay/store"
)

// Config configures New.
type Config struct {
	// Store is the care store. Required: New panics on nil (a wiring bug).
	Store *store.Store
	// Verifier verifies bearer tokens. Nil refuses every bearer request (401).
	Verifier *auth.Verifier
	// WriteSecret keys the HMAC of signed writes (UNSAY_WRITE_SECRET, or
	// DevWriteSecret announced at startup). Empty refuses every signed
	// write with 401 bad_signature: it fails closed.
	WriteSecret []byte
	// PublicURL is the server's public base URL ("http://127.0.0.1:8080");
	// a trailing slash is ignored. It names the protected resources.
	PublicURL string
	// AuthorizationServers are the issuer URLs listed in the protected
	// resource metadata (--authorization-server); may be empty.
	AuthorizationServers []string
	// Clock is the server clock for the signature window and link codes;
	// nil means the store's clock (Store.Now).
	Clock func() time.Time
	// Logger receives one line per request outcome, never a value, token
	// or signature; nil discards.
	Logger *slog.Logger
	// Subscribers counts the authorized sessions subscribed to an
	// unversioned URI; called right after a commit. Nil counts 0.
	Subscribers func(models.URI) int
	// OnPublish, when set, receives the latency of every committed
	// store.Publish (the metric "publish latency").
	OnPublish func(time.Duration)
	// OnAuditLost, when set, receives the number of write attempts whose
	// audit row could not be appended at all (the store could not commit
	// it before the API closed, or too many kinds were waiting; each is
	// also logged at ERROR).
	OnAuditLost func(n int64)
}

// API serves the routes above. It is safe for concurrent use.
type API struct {
	cfg  Config
	base string
	log  *slog.Logger
	now  func() time.Time

	refusals    *refusalLimiter   // refused, unauthenticated attempts per source
	rateLimited *rateLimitedAudit // the audit rows of the 429s it caused
	pending     *pendingAudit     // audit rows waiting for the store to commit again
	creating    patientLocks      // held by a write creating a topic (newTopicRefusal)
}

// New returns the API for cfg. It panics if cfg.Store is nil.
func New(cfg Config) *API {
	if cfg.Store == nil {
		panic("httpapi.New: Config.Store is nil")
	}
	a := &API{cfg: cfg, base: strings.TrimRight(cfg.PublicURL, "/"), log: cfg.Logger, now: cfg.Clock, refusals: newRefusalLimiter()}
	if a.log == nil {
		a.log = slog.New(slog.DiscardHandler)
	}
	a.pending = newPendingAudit(cfg.Store, a.log, cfg.OnAuditLost)
	a.rateLimited = &rateLimitedAudit{st: cfg.Store, log: a.log, later: a.pending}
	if a.now == nil {
		a.now = cfg.Store.Now
	}
	if len(cfg.WriteSecret) == 0 {
		a.log.Warn("httpapi: no write secret configured; every signed /write is refused")
	}
	return a
}

// Close writes the audit rows of rate-limited attempts counted but not yet
// written (they are batched for up to a second) and of attempts refused
// while the store could not commit (pendingAudit), logging and counting as
// lost those the store still cannot commit. Call it after the HTTP server
// has shut down and before the store closes; the API stays usable, its
// later refusals' rows written at once or lost.
func (a *API) Close() {
	a.rateLimited.flush()
	a.pending.close()
}

// Routes mounts the routes listed in the package comment on r.
func (a *API) Routes(r chi.Router) {
	r.Post("/write", a.handleWrite)
	r.Post("/link", a.handleLink)
	r.Get("/verify", a.handleVerify)
	r.Handle("/.well-known/oauth-protected-resource", a.metadataHandler(a.base))
	r.Handle("/.well-known/oauth-protected-resource/mcp", a.metadataHandler(a.base+"/mcp"))
}

// MetadataURL is the RFC 9728 metadata URL for the non-MCP routes
// ("{public-url}/.well-known/oauth-protected-resource"), named in their
// WWW-Authenticate challenges.
func (a *API) MetadataURL() string { return a.base + "/.well-known/oauth-protected-resource" }

// metadataHandler serves RFC 9728 protected-resource metadata for resource:
// scopes_supported (models.AllScopes), bearer_methods_supported ["header"],
// authorization_servers (omitted when none is configured).
func (a *API) metadataHandler(resource string) http.Handler {
	scopes := make([]string, 0, len(models.AllScopes()))
	for _, s := range models.AllScopes() {
		scopes = append(scopes, string(s))
	}
	return sdkauth.ProtectedResourceMetadataHandler(&oauthex.ProtectedResourceMetadata{
		Resource:               resource,
		AuthorizationServers:   append([]string(nil), a.cfg.AuthorizationServers...),
		ScopesSupported:        scopes,
		BearerMethodsSupported: []string{"header"},
		ResourceName:           "Unsay care plan",
	})
}

// errorBody is every refusal's JSON shape.
type errorBody struct {
	Error string `json:"error"`
	Field string `json:"field,omitempty"`
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(true)
	_ = enc.Encode(v)
}

func writeError(w http.ResponseWriter, status int, msg, field string) {
	writeJSON(w, status, errorBody{Error: msg, Field: field})
}

// challenge sets WWW-Authenticate for a 401/403 on the non-MCP routes.
func (a *API) challenge(w http.ResponseWriter, errCode string, scope models.Scope) {
	w.Header().Set("WWW-Authenticate", auth.Challenge(a.MetadataURL(), errCode, scope))
}

// readBody reads at most limit bytes of r's body. tooLarge is true when the
// body exceeds limit (the caller answers 413).
func readBody(w http.ResponseWriter, r *http.Request, limit int64) (body []byte, tooLarge bool, err error) {
	body, err = io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, true, err
		}
		return nil, false, err
	}
	return body, false, nil
}
