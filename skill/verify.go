package skill

import (
	"container/heap"
	"context"
	"crypto"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Verification errors (P-22). Each refused request is answered
// HTTP 400 and no handler runs. Match with errors.Is; the wrapped text is the
// reason written to the log.
var (
	// ErrMissingHeader: Signature-256 or SignatureCertChainUrl is absent.
	ErrMissingHeader = errors.New("missing Signature-256 or SignatureCertChainUrl header")
	// ErrCertURL: the certificate URL breaks a rule; nothing was fetched.
	ErrCertURL = errors.New("certificate URL rejected")
	// ErrCertificate: the chain could not be fetched, parsed or trusted, or
	// the leaf is outside its validity or lacks the SAN echo-api.amazon.com.
	ErrCertificate = errors.New("certificate chain rejected")
	// ErrSignature: the Signature-256 header is not base64 or does not verify
	// over the raw body with the leaf's key.
	ErrSignature = errors.New("signature does not verify")
	// ErrMalformed: the body is not a JSON request envelope.
	ErrMalformed = errors.New("malformed request body")
	// ErrTimestamp: request.timestamp is missing, unparsable or outside the window.
	ErrTimestamp = errors.New("request timestamp outside the allowed window")
	// ErrSkillID: context.System.application.applicationId is not this skill's id.
	ErrSkillID = errors.New("application id is not this skill")
	// ErrReplay: a verified request whose request.requestId this Verifier
	// already accepted within the timestamp window — a captured request
	// sent again — or one with no requestId, or one that finds the replay
	// memory full (it fails closed).
	ErrReplay = errors.New("request id already seen: a replayed request")
)

// Verification constants.
const (
	// HeaderSignature256 carries base64(RSA-SHA256(raw body)); the legacy
	// SHA-1 "Signature" header is ignored.
	HeaderSignature256 = "Signature-256"
	// HeaderCertChainURL names the PEM chain that signed the request.
	HeaderCertChainURL = "SignatureCertChainUrl"
	// CertSAN is the DNS name the signing certificate must carry.
	CertSAN = "echo-api.amazon.com"
	// TimestampTolerance is the allowed |now − request.timestamp| (150 s).
	TimestampTolerance = 150 * time.Second
	// SkillEventTolerance is the window for AlexaSkillEvent.* requests (3,600 s).
	SkillEventTolerance = 3600 * time.Second
	// CertChainMaxBytes caps a fetched certificate chain (64 KiB).
	CertChainMaxBytes = 64 << 10
	// CertFetchTimeout bounds one chain download (5 s) when no client is given.
	CertFetchTimeout = 5 * time.Second
	// CertCacheTTL is the longest a verified chain stays cached (24 h); an
	// entry leaves earlier when any certificate of the chain expires.
	CertCacheTTL = 24 * time.Hour
	// certCacheMax bounds the number of cached chains.
	certCacheMax = 64

	// CertFailureBackoff is how long a certificate URL whose chain could not
	// be fetched or verified is refused without another fetch: 5 s after the
	// first failure, doubling with each further failure of the same URL up
	// to CertFailureBackoffMax (5 min). A passing hiccup on Amazon's URL
	// costs seconds; a forged URL sent over and over is fetched a dozen
	// times an hour, not once per request.
	CertFailureBackoff = 5 * time.Second
	// CertFailureBackoffMax caps CertFailureBackoff's doubling: 5 minutes.
	CertFailureBackoffMax = 5 * time.Minute
	// certFailuresMax bounds the remembered failures (1,024 URLs), kept apart
	// from the verified chains so that failures never push a verified chain
	// out of the cache.
	certFailuresMax = 1024
	// CertFetchesInFlight is the most chain downloads under way at once (4);
	// a request that would start another is refused (ErrCertificate)
	// without a fetch. Requests for a URL already being fetched wait for
	// that download and do not count.
	CertFetchesInFlight = 4
	// CertFetchBurst and CertFetchEvery bound the rate of downloads of
	// chains not in the cache: a burst of 10, then one every 6 s. Alexa
	// signs with one or two chains a year, each downloaded once per
	// process; a request over the rate is refused (ErrCertificate) without
	// a fetch.
	CertFetchBurst = 10
	CertFetchEvery = 6 * time.Second

	// ReplayMemoryMax bounds the request ids remembered to refuse replays
	// (262,144, about 35 MiB at most: 1,700 verified requests a second for
	// the 150 s window, more than one instance's CPU serves); each is kept
	// until its timestamp leaves the window. When every one is still in its
	// window a new request is refused (ErrReplay), never let through
	// unchecked.
	ReplayMemoryMax = 1 << 18
)

// NormalizeCertURL applies the SignatureCertChainUrl rules and returns the
// canonical URL that is fetched and cached: scheme https and host
// s3.amazonaws.com (both case-insensitive), port 443 if given, no user info,
// no query or fragment, and a path that starts with "/echo.api/"
// (case-sensitive) after dot segments are resolved with path.Clean. Errors
// wrap ErrCertURL.
func NormalizeCertURL(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("%w: unparsable", ErrCertURL)
	}
	switch {
	case !strings.EqualFold(u.Scheme, "https"):
		return "", fmt.Errorf("%w: scheme %q is not https", ErrCertURL, u.Scheme)
	case u.User != nil:
		return "", fmt.Errorf("%w: user info present", ErrCertURL)
	case u.Opaque != "":
		return "", fmt.Errorf("%w: opaque URL", ErrCertURL)
	case !strings.EqualFold(u.Hostname(), "s3.amazonaws.com"):
		return "", fmt.Errorf("%w: host %q is not s3.amazonaws.com", ErrCertURL, u.Hostname())
	case u.Port() != "" && u.Port() != "443":
		return "", fmt.Errorf("%w: port %s is not 443", ErrCertURL, u.Port())
	case u.RawQuery != "" || u.Fragment != "" || u.ForceQuery:
		return "", fmt.Errorf("%w: query or fragment present", ErrCertURL)
	}
	clean := path.Clean("/" + u.Path)
	if !strings.HasPrefix(clean, "/echo.api/") {
		return "", fmt.Errorf("%w: path %q does not start with /echo.api/", ErrCertURL, clean)
	}
	return (&url.URL{Scheme: "https", Host: "s3.amazonaws.com", Path: clean}).String(), nil
}

// CertFetcher returns the PEM certificate chain at a normalized certificate
// URL (leaf first). Implementations must bound time and size.
type CertFetcher interface {
	FetchCertChain(ctx context.Context, certURL string) ([]byte, error)
}

// HTTPCertFetcher downloads chains over HTTPS with Client (whose Timeout
// bounds the download) and reads at most CertChainMaxBytes.
type HTTPCertFetcher struct {
	Client *http.Client
}

// FetchCertChain GETs certURL; a non-200 status or a body over
// CertChainMaxBytes is an error.
func (f HTTPCertFetcher) FetchCertChain(ctx context.Context, certURL string) ([]byte, error) {
	c := f.Client
	if c == nil {
		c = &http.Client{Timeout: CertFetchTimeout}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, certURL, nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: status %d", certURL, resp.StatusCode)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, CertChainMaxBytes+1))
	if err != nil {
		return nil, err
	}
	if len(b) > CertChainMaxBytes {
		return nil, fmt.Errorf("GET %s: chain larger than %d bytes", certURL, CertChainMaxBytes)
	}
	return b, nil
}

// overrideFetcher serves some URLs' chains from PEM bytes loaded at startup
// (--alexa-cert URL=PEMFILE) and fetches the others with next.
type overrideFetcher struct {
	pem  map[string][]byte // normalized URL → PEM
	next CertFetcher
}

func (f overrideFetcher) FetchCertChain(ctx context.Context, certURL string) ([]byte, error) {
	if b, ok := f.pem[certURL]; ok {
		return b, nil
	}
	if f.next == nil {
		return nil, fmt.Errorf("no override for %s and fetching is off", certURL)
	}
	return f.next.FetchCertChain(ctx, certURL)
}

// ReadCertificatesFile reads every CERTIFICATE block of a PEM file (for
// --alexa-roots). It fails on an unreadable file or when no certificate parses.
func ReadCertificatesFile(name string) ([]*x509.Certificate, error) {
	b, err := os.ReadFile(name)
	if err != nil {
		return nil, err
	}
	certs, err := parseCertificates(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return certs, nil
}

func parseCertificates(b []byte) ([]*x509.Certificate, error) {
	var certs []*x509.Certificate
	for {
		var block *pem.Block
		block, b = pem.Decode(b)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, err
		}
		certs = append(certs, c)
	}
	if len(certs) == 0 {
		return nil, errors.New("no PEM certificate")
	}
	return certs, nil
}

// VerifierConfig configures a Verifier.
type VerifierConfig struct {
	SkillID string           // required: the only accepted applicationId
	Roots   *x509.CertPool   // trust anchors; nil: system roots
	Fetcher CertFetcher      // nil: HTTPCertFetcher with a 5 s timeout
	Clock   func() time.Time // nil: time.Now
	// Shared is the replay memory the instances serving this skill share
	// (several instances on one Postgres database); nil: this process's
	// memory only.
	Shared SharedReplayMemory
	// Logger takes a failure of Shared (WARN); nil: slog.Default().
	Logger *slog.Logger
}

// SharedReplayMemory is a replay memory several instances share, so that a
// captured request replayed to another instance than the one that accepted
// it is refused too (P-22). The store's implementation is a table in the
// database the instances share (store.Store.RememberAlexaRequest).
type SharedReplayMemory interface {
	// RememberAlexaRequest records digest (SHA-256 of a verified request's
	// request.requestId) until until, and reports whether no instance had
	// recorded it before; now lets it forget digests whose until has
	// passed. An error says nothing was learnt.
	RememberAlexaRequest(ctx context.Context, digest [sha256.Size]byte, now, until time.Time) (first bool, err error)
}

// Verifier checks that a request comes from Alexa, for this skill, now,
// once (P-22). It is safe for concurrent use; verified chains are
// cached per certificate URL until the earliest NotAfter of the chain or
// CertCacheTTL, whichever is first. So that forged requests cannot make it
// fetch on their behalf, a URL that failed is refused without a fetch for
// a backoff (CertFailureBackoff), downloads under way are capped
// (CertFetchesInFlight), and downloads start at a bounded rate
// (CertFetchBurst, CertFetchEvery). The request ids it accepted are
// remembered, in memory, until their timestamps leave the window, and a
// request whose id it has seen is refused (ErrReplay): a captured request
// replayed to this instance cannot use up a retraction. A turn signed
// before the Verifier was made is refused too (signedSince), so a restart,
// which empties the memory, lets no replay through. The memory is per
// instance: several instances behind a load balancer each refuse a replay
// they receive twice, not one first accepted by another — unless
// VerifierConfig.Shared is given: a request this instance's memory takes as
// new is then refused if another instance accepted it.
type Verifier struct {
	skillID string
	roots   *x509.CertPool
	fetch   CertFetcher
	now     func() time.Time

	slots   chan struct{} // one token per download under way
	limiter *rate.Limiter // starts of downloads

	mu       sync.Mutex
	chains   map[string]*chainEntry
	failures map[string]*failedURL

	replays replayMemory
	shared  SharedReplayMemory // nil: none
	log     *slog.Logger
	// since is when this Verifier began remembering request ids, to the
	// second (Alexa's timestamps have no fraction): a speech request
	// signed earlier may have been accepted by a process that remembered
	// it and is gone, so it is refused (ErrReplay).
	since time.Time
}

// failedURL remembers a URL whose chain could not be fetched or verified.
type failedURL struct {
	err     error         // what failed, returned to the requests refused meanwhile
	until   time.Time     // refused without a fetch before this
	backoff time.Duration // the last backoff; doubled on the next failure
}

type chainEntry struct {
	ready   chan struct{} // closed when the fields below are set
	key     *rsa.PublicKey
	expires time.Time
	err     error
}

// NewVerifier returns a Verifier. It fails without a SkillID.
func NewVerifier(cfg VerifierConfig) (*Verifier, error) {
	if cfg.SkillID == "" {
		return nil, errors.New("skill: a verifier needs the skill id")
	}
	v := &Verifier{skillID: cfg.SkillID, roots: cfg.Roots, fetch: cfg.Fetcher, now: cfg.Clock, shared: cfg.Shared, log: cfg.Logger,
		chains: map[string]*chainEntry{}, failures: map[string]*failedURL{},
		slots:   make(chan struct{}, CertFetchesInFlight),
		limiter: rate.NewLimiter(rate.Every(CertFetchEvery), CertFetchBurst)}
	if v.roots == nil {
		p, err := x509.SystemCertPool()
		if err != nil {
			p = x509.NewCertPool()
		}
		v.roots = p
	}
	if v.fetch == nil {
		v.fetch = HTTPCertFetcher{}
	}
	if v.now == nil {
		v.now = time.Now
	}
	if v.log == nil {
		v.log = slog.Default()
	}
	v.since = v.now().Truncate(time.Second)
	return v, nil
}

// Verify checks the headers and raw body of one request, in this order:
// both headers present; the certificate URL rules (NormalizeCertURL); the
// signature is base64; the body parses; request.timestamp is within ±150 s
// of now (±3,600 s for AlexaSkillEvent.*); context.System.application.
// applicationId is the skill id; the chain (cached) is trusted, valid now,
// with SAN echo-api.amazon.com; and the RSA-SHA256 signature verifies over
// body exactly as received. Everything that needs no certificate is checked
// before the chain is fetched, so a request that breaks any of it causes no
// download. It returns the parsed envelope, or an error wrapping one of
// ErrMissingHeader, ErrCertURL, ErrSignature, ErrCertificate, ErrMalformed,
// ErrTimestamp, ErrSkillID. Last — only for a request that passed all of
// that, so a forged one is never remembered — a turn (anything but an
// AlexaSkillEvent.*) must be signed no earlier than this Verifier was made
// (signedSince), and its request.requestId must be one not accepted before
// within the window (ErrReplay for either).
func (v *Verifier) Verify(ctx context.Context, h http.Header, body []byte) (*RequestEnvelope, error) {
	now := v.now()
	sig64, certURL := h.Get(HeaderSignature256), h.Get(HeaderCertChainURL)
	if sig64 == "" || certURL == "" {
		return nil, ErrMissingHeader
	}
	norm, err := NormalizeCertURL(certURL)
	if err != nil {
		return nil, err
	}
	sig, err := base64.StdEncoding.DecodeString(strings.TrimSpace(sig64))
	if err != nil || len(sig) == 0 {
		return nil, fmt.Errorf("%w: Signature-256 is not base64", ErrSignature)
	}
	env, err := ParseEnvelope(body)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	signed, err := checkTimestamp(&env.Request, now)
	if err != nil {
		return nil, err
	}
	if got := env.Context.System.Application.ApplicationID; got != v.skillID {
		return nil, fmt.Errorf("%w: got %q", ErrSkillID, got)
	}
	key, err := v.chainKey(ctx, norm, now)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(body)
	if err := rsa.VerifyPKCS1v15(key, crypto.SHA256, sum[:], sig); err != nil {
		return nil, fmt.Errorf("%w: RSA-SHA256 over the raw body", ErrSignature)
	}
	if err := v.signedSince(env.Request, signed); err != nil {
		return nil, err
	}
	digest, until, err := v.replays.accept(env.Request, now)
	if err != nil {
		return nil, err
	}
	if err := v.sharedAccept(ctx, env.Request, digest, now, until); err != nil {
		return nil, err
	}
	return env, nil
}

// sharedAccept refuses (ErrReplay) a request another instance accepted,
// by v.shared (none: nil). When the shared memory cannot be reached the
// request is let through, logged: it is a table in the database that
// holds the heard ledger too, so a replay let through then cannot mark
// anything heard — its turn answers "I can't reach your care notes", which
// Ray should hear rather than Alexa's error for a refused request.
func (v *Verifier) sharedAccept(ctx context.Context, r Request, key [sha256.Size]byte, now, until time.Time) error {
	if v.shared == nil {
		return nil
	}
	first, err := v.shared.RememberAlexaRequest(ctx, key, now, until)
	switch {
	case err != nil:
		v.log.Warn("alexa replay memory shared by the instances not reached; this instance's memory alone checked the request", "requestId", r.RequestID, "err", err)
		return nil
	case !first:
		return fmt.Errorf("%w: %s (accepted by another instance)", ErrReplay, r.RequestID)
	}
	return nil
}

// signedSince refuses (ErrReplay) a request other than an
// AlexaSkillEvent.* whose timestamp ts (checkTimestamp's) is before this
// Verifier began remembering request ids: the replay memory lives in the process, so after a restart a
// request captured and accepted before it would otherwise be accepted
// again, and a replayed turn could use up the retraction Ray is owed.
// Alexa sends a turn as the user speaks, so a genuine one is signed after
// the server started; a skill event (never spoken, delivered up to an hour
// late) keeps its own window.
func (v *Verifier) signedSince(r Request, ts time.Time) error {
	if r.IsSkillEvent() {
		return nil
	}
	if ts.Before(v.since) {
		return fmt.Errorf("%w: signed at %s, before this server started (%s): an earlier process may have accepted it", ErrReplay,
			ts.UTC().Format(time.RFC3339), v.since.UTC().Format(time.RFC3339))
	}
	return nil
}

// replayMemory remembers accepted request ids (as SHA-256 digests, so its
// size does not depend on what a request carries) until their timestamps
// leave the window, at most ReplayMemoryMax of them.
type replayMemory struct {
	mu      sync.Mutex
	until   map[[sha256.Size]byte]int64 // digest → end of its window, Unix ns (pointer-free: the collector never scans it)
	expires expiryHeap
	max     int // 0: ReplayMemoryMax
}

// accept remembers r's requestId, or refuses it: seen within its window,
// missing, or no room left. It returns the id's SHA-256 digest and the end
// of the window it is remembered for.
func (m *replayMemory) accept(r Request, now time.Time) (key [sha256.Size]byte, until time.Time, err error) {
	if r.RequestID == "" {
		return key, until, fmt.Errorf("%w: no request.requestId", ErrReplay)
	}
	ts, err := time.Parse(time.RFC3339, r.Timestamp)
	if err != nil { // checked before; defence in depth
		return key, until, fmt.Errorf("%w: timestamp %q unparsable", ErrTimestamp, r.Timestamp)
	}
	tol := TimestampTolerance
	if r.IsSkillEvent() {
		tol = SkillEventTolerance
	}
	key = sha256.Sum256([]byte(r.RequestID))
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.until == nil {
		m.until = map[[sha256.Size]byte]int64{}
	}
	nowNs := now.UnixNano()
	for len(m.expires) > 0 && m.expires[0].at <= nowNs { // out of the window: a replay is refused by its timestamp
		e := heap.Pop(&m.expires).(expiry)
		if u, ok := m.until[e.key]; ok && u <= nowNs {
			delete(m.until, e.key)
		}
	}
	if u, ok := m.until[key]; ok && u > nowNs {
		return key, until, fmt.Errorf("%w: %s", ErrReplay, r.RequestID)
	}
	max := m.max
	if max <= 0 {
		max = ReplayMemoryMax
	}
	if len(m.until) >= max {
		return key, until, fmt.Errorf("%w: replay memory full (%d request ids within the window)", ErrReplay, max)
	}
	at := ts.Add(tol)
	if at.Before(now) {
		at = now
	}
	end := at.Add(time.Second).UnixNano() // the window's edge, with a second to spare
	m.until[key] = end
	heap.Push(&m.expires, expiry{at: end, key: key})
	return key, time.Unix(0, end), nil
}

// expiry is when a remembered request id may be forgotten.
type expiry struct {
	at  int64 // Unix ns
	key [sha256.Size]byte
}

// expiryHeap is a min-heap of expiries (container/heap).
type expiryHeap []expiry

func (h expiryHeap) Len() int           { return len(h) }
func (h expiryHeap) Less(i, j int) bool { return h[i].at < h[j].at }
func (h expiryHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *expiryHeap) Push(x any)        { *h = append(*h, x.(expiry)) }
func (h *expiryHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

// checkTimestamp returns r's request.timestamp, parsed, or ErrTimestamp
// when it is unparsable or more than the tolerance from now (±150 s;
// ±3,600 s for AlexaSkillEvent.*).
func checkTimestamp(r *Request, now time.Time) (time.Time, error) {
	ts, err := time.Parse(time.RFC3339, r.Timestamp)
	if err != nil {
		return time.Time{}, fmt.Errorf("%w: timestamp %q unparsable", ErrTimestamp, r.Timestamp)
	}
	tol := TimestampTolerance
	if r.IsSkillEvent() {
		tol = SkillEventTolerance
	}
	d := now.Sub(ts)
	if d > tol || d < -tol {
		return time.Time{}, fmt.Errorf("%w: off by %s (allowed %s)", ErrTimestamp, d.Round(time.Millisecond), tol)
	}
	return ts, nil
}

// chainKey returns the verified leaf key for a normalized URL, from the
// cache when an entry is still valid at now, else by fetching and
// verifying the chain once (concurrent callers wait for the same fetch).
// A URL that failed within its backoff is refused without a fetch, and a
// fetch is started only within CertFetchesInFlight and the download rate.
func (v *Verifier) chainKey(ctx context.Context, certURL string, now time.Time) (*rsa.PublicKey, error) {
	v.mu.Lock()
	e := v.chains[certURL]
	if e != nil {
		select {
		case <-e.ready:
			if e.err == nil && now.Before(e.expires) {
				v.mu.Unlock()
				return e.key, nil
			}
			// Expired (or failed): drop it and fetch afresh below.
			delete(v.chains, certURL)
			e = nil
		default:
		}
	}
	if e == nil {
		if f := v.failures[certURL]; f != nil && now.Before(f.until) {
			v.mu.Unlock()
			return nil, fmt.Errorf("%w (not fetched again before %s)", f.err, f.until.UTC().Format(time.RFC3339))
		}
		select {
		case v.slots <- struct{}{}:
		default:
			v.mu.Unlock()
			return nil, fmt.Errorf("%w: %d certificate downloads already under way", ErrCertificate, CertFetchesInFlight)
		}
		if !v.limiter.AllowN(now, 1) {
			<-v.slots
			v.mu.Unlock()
			return nil, fmt.Errorf("%w: certificate download rate exceeded (a burst of %d, then one per %s)", ErrCertificate, CertFetchBurst, CertFetchEvery)
		}
		e = &chainEntry{ready: make(chan struct{})}
		v.evictLocked(now)
		v.chains[certURL] = e
		v.mu.Unlock()
		e.key, e.expires, e.err = v.loadChain(ctx, certURL, now)
		<-v.slots
		close(e.ready)
		v.mu.Lock()
		if e.err != nil {
			if v.chains[certURL] == e {
				delete(v.chains, certURL)
			}
			v.rememberFailureLocked(certURL, e.err, now)
		} else {
			delete(v.failures, certURL)
		}
		v.mu.Unlock()
		return e.key, e.err
	}
	v.mu.Unlock()
	select {
	case <-e.ready:
	case <-ctx.Done():
		return nil, fmt.Errorf("%w: %v", ErrCertificate, ctx.Err())
	}
	if e.err != nil {
		return nil, e.err
	}
	if !now.Before(e.expires) {
		return nil, fmt.Errorf("%w: certificate expired", ErrCertificate)
	}
	return e.key, nil
}

// rememberFailureLocked refuses certURL without a fetch for its next
// backoff: CertFailureBackoff after a first failure, double the last one
// (at most CertFailureBackoffMax) after a repeated one. Past
// certFailuresMax remembered URLs, the one whose refusal ends first is
// forgotten. v.mu must be held.
func (v *Verifier) rememberFailureLocked(certURL string, err error, now time.Time) {
	f := v.failures[certURL]
	if f == nil {
		if len(v.failures) >= certFailuresMax {
			var first string
			var at time.Time
			for k, g := range v.failures {
				if first == "" || g.until.Before(at) {
					first, at = k, g.until
				}
			}
			delete(v.failures, first)
		}
		f = &failedURL{}
		v.failures[certURL] = f
	}
	f.backoff = min(max(2*f.backoff, CertFailureBackoff), CertFailureBackoffMax)
	f.err, f.until = err, now.Add(f.backoff)
}

// evictLocked makes room for one entry: expired entries go first, then the
// one that expires soonest. v.mu must be held.
func (v *Verifier) evictLocked(now time.Time) {
	if len(v.chains) < certCacheMax {
		return
	}
	var soonest string
	var at time.Time
	for k, e := range v.chains {
		select {
		case <-e.ready:
		default:
			continue // in flight
		}
		if !now.Before(e.expires) {
			delete(v.chains, k)
			continue
		}
		if soonest == "" || e.expires.Before(at) {
			soonest, at = k, e.expires
		}
	}
	if len(v.chains) >= certCacheMax && soonest != "" {
		delete(v.chains, soonest)
	}
}

// loadChain fetches and verifies a chain: leaf first, leaf within validity
// at now, SAN echo-api.amazon.com, chain to the roots (intermediates from the
// rest of the file), RSA key. It returns the key and when the entry expires.
func (v *Verifier) loadChain(ctx context.Context, certURL string, now time.Time) (*rsa.PublicKey, time.Time, error) {
	b, err := v.fetch.FetchCertChain(ctx, certURL)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("%w: fetch: %v", ErrCertificate, err)
	}
	certs, err := parseCertificates(b)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("%w: %v", ErrCertificate, err)
	}
	leaf := certs[0]
	if now.Before(leaf.NotBefore) || now.After(leaf.NotAfter) {
		return nil, time.Time{}, fmt.Errorf("%w: leaf not valid at %s (valid %s to %s)", ErrCertificate,
			now.UTC().Format(time.RFC3339), leaf.NotBefore.UTC().Format(time.RFC3339), leaf.NotAfter.UTC().Format(time.RFC3339))
	}
	hasSAN := false
	for _, n := range leaf.DNSNames {
		if strings.EqualFold(n, CertSAN) {
			hasSAN = true
		}
	}
	if !hasSAN {
		return nil, time.Time{}, fmt.Errorf("%w: leaf SAN lacks %s", ErrCertificate, CertSAN)
	}
	inter := x509.NewCertPool()
	for _, c := range certs[1:] {
		inter.AddCert(c)
	}
	chains, err := leaf.Verify(x509.VerifyOptions{Roots: v.roots, Intermediates: inter, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}})
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("%w: %v", ErrCertificate, err)
	}
	key, ok := leaf.PublicKey.(*rsa.PublicKey)
	if !ok {
		return nil, time.Time{}, fmt.Errorf("%w: leaf key is not RSA", ErrCertificate)
	}
	expires := now.Add(CertCacheTTL)
	for _, c := range chains[0] {
		if c.NotAfter.Before(expires) {
			expires = c.NotAfter
		}
	}
	return key, expires, nil
}
