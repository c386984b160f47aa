package speech

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"time"

	"github.com/unsay/unsay/models"
)

// ErrConfig wraps every configuration error returned by New.
var ErrConfig = errors.New("speech: bad configuration")

// Config configures the speech principal.
type Config struct {
	// MCPURL is the Unsay MCP endpoint, e.g. "http://127.0.0.1:8080/mcp".
	// Required; absolute http or https URL.
	MCPURL string
	// Token is the bearer token sent on every MCP request. It must hold
	// care.read.user and nothing else (P-18); minting is the caller's job.
	// Required unless TokenSource is set.
	Token string
	// TokenExpiry is when Token stops being accepted (its exp claim), zero
	// when unknown or with TokenSource. Past it, a failed connection is
	// logged as the expired token it is, naming when it expired.
	TokenExpiry time.Time
	// TokenSource, when set, is called for a fresh bearer token before each
	// connection and whenever AddPatient changes the patient set; patients
	// is the current set, sorted. It takes precedence over Token.
	TokenSource func(ctx context.Context, patients []string) (string, error)
	// Patients are the linked patient ids whose care:// facts are
	// subscribed. Each must be a valid id (models.ValidID). More can be
	// added at run time with AddPatient.
	Patients []string
	// Ledger keeps the heard ledger, the announcement queue and the
	// delivery log durable (store.HeardLedger; LedgerStore). Required.
	Ledger LedgerStore
	// Clock is the time source for ages, LastEventAt and the lag behind
	// the store. Default time.Now.
	Clock func() time.Time
	// Logger receives connection and ledger events; never a value or a
	// token. Default: discard.
	Logger *slog.Logger
	// HTTPClient carries MCP requests; its Transport is wrapped to add the
	// bearer token. It must have no Timeout (the event stream is long-lived).
	// Default: a client over http.DefaultTransport.
	HTTPClient *http.Client
	// Backoff bounds the delay between reconnection attempts.
	Backoff Backoff
	// RequestTimeout bounds one MCP request (list page, read, subscribe).
	// Default 10 s.
	RequestTimeout time.Duration
	// Compete, when set, makes this instance compete with the others
	// sharing the ledger to speak for each patient it follows (speaker.go):
	// every instance queues his announcements, but only the one holding
	// his SpeakerLease tells him unasked (OnQueued), so exactly one
	// instance does (P-23). Run competes while it runs. Nil: this instance
	// speaks for every patient (a single instance).
	Compete CompeteFunc
	// KeepAlive is the interval between pings on an idle 2025-11-25
	// session (a server that does not offer 2026-07-28); a failed ping ends
	// the session so it is re-established. Default 15 s; negative disables.
	// A 2026-07-28 connection sends no pings (ListenIdle).
	KeepAlive time.Duration
	// ListenIdle is how long a 2026-07-28 subscriptions/listen stream may
	// carry nothing — no notification and no keep-alive comment, which the
	// Unsay server writes every 15 s — before it is taken for dead (a
	// half-open connection) and the connection re-established. Default
	// 45 s; negative: never.
	ListenIdle time.Duration
	// ConfirmTimeout bounds the one round trip Turn makes to confirm, at
	// speak time, that every fact it returns is current (P-24). Alexa
	// allows about 8 s for a whole answer. Default 2 s.
	ConfirmTimeout time.Duration
	// MaxLag is how long a change the store committed (Committed) may go
	// unread before the principal is not ready (State.Ready, /readyz 503)
	// and, with its session idle, reconnects to catch up. Default 5 s.
	MaxLag time.Duration
}

// Backoff is the reconnection schedule: exponential from Min, doubling per
// failed attempt up to Max, with full jitter over the upper half (each
// delay is uniform in [d/2, d]). Zero fields take the defaults Min 200 ms
// and Max 10 s.
type Backoff struct {
	Min time.Duration
	Max time.Duration
}

// Defaults.
const (
	DefaultBackoffMin     = 200 * time.Millisecond
	DefaultBackoffMax     = 10 * time.Second
	DefaultRequestTimeout = 10 * time.Second
	DefaultKeepAlive      = 15 * time.Second
	DefaultListenIdle     = 45 * time.Second
	DefaultConfirmTimeout = 2 * time.Second
	DefaultMaxLag         = 5 * time.Second
)

// Delay returns the jittered delay before reconnection attempt n (0-based).
func (b Backoff) Delay(n int) time.Duration {
	d := b.Min
	for i := 0; i < n && d < b.Max; i++ {
		d *= 2
	}
	d = min(d, b.Max)
	half := d / 2
	return half + rand.N(d-half+1)
}

func (c Config) withDefaults() (Config, error) {
	if c.MCPURL == "" {
		return c, fmt.Errorf("%w: MCPURL is required", ErrConfig)
	}
	u, err := url.Parse(c.MCPURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return c, fmt.Errorf("%w: MCPURL must be an absolute http(s) URL", ErrConfig)
	}
	if c.Token == "" && c.TokenSource == nil {
		return c, fmt.Errorf("%w: Token or TokenSource is required", ErrConfig)
	}
	for _, p := range c.Patients {
		if !models.ValidID(p) {
			return c, fmt.Errorf("%w: patient %q is not a valid id", ErrConfig, p)
		}
	}
	if c.Ledger == nil {
		return c, fmt.Errorf("%w: Ledger is required", ErrConfig)
	}
	if c.Clock == nil {
		c.Clock = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.HTTPClient == nil {
		c.HTTPClient = &http.Client{}
	}
	if c.HTTPClient.Timeout != 0 {
		return c, fmt.Errorf("%w: HTTPClient must have no Timeout (the event stream is long-lived)", ErrConfig)
	}
	if c.Backoff.Min <= 0 {
		c.Backoff.Min = DefaultBackoffMin
	}
	if c.Backoff.Max <= 0 {
		c.Backoff.Max = DefaultBackoffMax
	}
	if c.Backoff.Max < c.Backoff.Min {
		return c, fmt.Errorf("%w: Backoff.Max %s < Backoff.Min %s", ErrConfig, c.Backoff.Max, c.Backoff.Min)
	}
	if c.RequestTimeout <= 0 {
		c.RequestTimeout = DefaultRequestTimeout
	}
	if c.KeepAlive == 0 {
		c.KeepAlive = DefaultKeepAlive
	}
	if c.KeepAlive < 0 {
		c.KeepAlive = 0
	}
	if c.ListenIdle == 0 {
		c.ListenIdle = DefaultListenIdle
	}
	if c.ListenIdle < 0 {
		c.ListenIdle = 0
	}
	if c.ConfirmTimeout <= 0 {
		c.ConfirmTimeout = DefaultConfirmTimeout
	}
	if c.MaxLag <= 0 {
		c.MaxLag = DefaultMaxLag
	}
	return c, nil
}

// bearer is an http.RoundTripper that sets Authorization on every request.
type bearer struct {
	token func() string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r2 := r.Clone(r.Context())
	r2.Header.Set("Authorization", "Bearer "+b.token())
	return b.next.RoundTrip(r2)
}
