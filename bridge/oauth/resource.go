package oauth

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"html"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/zitadel/oidc/v3/pkg/oidc"

	"github.com/unsay/unsay/models"
)

// resourceKey carries the request's RFC 8707 "resource" values into the
// storage callbacks, which op calls without the request.
type resourceKey struct{}

// resourceInterceptor reads "resource" (query or form) before op parses the
// request, for CreateAuthRequest, the token grants and client_credentials.
func resourceInterceptor(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := r.ParseForm(); err == nil {
			if rs, ok := r.Form["resource"]; ok {
				r = r.WithContext(context.WithValue(r.Context(), resourceKey{}, rs))
			}
		}
		next.ServeHTTP(w, r)
	})
}

func resourcesFrom(ctx context.Context) (values []string, given bool) {
	values, given = ctx.Value(resourceKey{}).([]string)
	return values, given
}

// resolveResource picks the audience for a request: the one "resource"
// value given, which must name this MCP server ("{issuer}/mcp" or
// "{issuer}"), or "{issuer}/mcp" when none is given. Several values, or one
// naming anything else, are invalid_target (RFC 8707 §2).
func (s *Server) resolveResource(ctx context.Context) (string, error) {
	rs, given := resourcesFrom(ctx)
	if !given {
		return s.resource, nil
	}
	if len(rs) != 1 {
		return "", oidc.ErrInvalidTarget().WithDescription("give exactly one resource")
	}
	switch strings.TrimRight(rs[0], "/") {
	case s.resource:
		return s.resource, nil
	case s.issuer:
		return s.issuer, nil
	}
	return "", oidc.ErrInvalidTarget().WithDescription("this authorization server issues tokens only for %s", s.resource)
}

// checkSameResource refuses a token request whose "resource" (when given)
// differs from the grant's: a token is never widened to another audience.
func (s *Server) checkSameResource(ctx context.Context, granted string) error {
	if _, given := resourcesFrom(ctx); !given {
		return nil
	}
	r, err := s.resolveResource(ctx)
	if err != nil {
		return err
	}
	if r != granted {
		return oidc.ErrInvalidTarget().WithDescription("the resource differs from the one granted")
	}
	return nil
}

// withIss adds RFC 9207's "iss" to every authorization response op
// redirects with (a code or an error sent to the client's redirect_uri),
// and leaves the redirect to the consent page alone.
func withIss(issuer string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(&issWriter{ResponseWriter: w, issuer: issuer}, r)
	})
}

// issWriter rewrites the redirect's Location, and the little HTML body
// http.Redirect writes for a GET (a link to the same place) to match.
type issWriter struct {
	http.ResponseWriter
	issuer string
	done   bool
	moved  string // the rewritten Location, once rewritten
}

func (w *issWriter) WriteHeader(status int) {
	if !w.done && status >= 300 && status < 400 {
		if loc := w.Header().Get("Location"); loc != "" && !strings.HasPrefix(loc, w.issuer+"/") {
			w.moved = addIss(loc, w.issuer)
			w.Header().Set("Location", w.moved)
		}
	}
	w.done = true
	w.ResponseWriter.WriteHeader(status)
}

// Write passes the body on, except a rewritten redirect's: that one is
// http.Redirect's link to the old Location, replaced by one to the new.
func (w *issWriter) Write(b []byte) (int, error) {
	w.done = true
	if w.moved != "" {
		if _, err := io.WriteString(w.ResponseWriter, "<a href=\""+html.EscapeString(w.moved)+"\">Found</a>.\n"); err != nil {
			return 0, err
		}
		w.moved = ""
		return len(b), nil
	}
	return w.ResponseWriter.Write(b)
}

// withDefaultScope gives an authorization request without "scope" (or
// with an empty one) the scope the consent page grants, care.read.user:
// an MCP host may leave scope out and rely on the server's default, and op
// would refuse the request as missing its scope.
func withDefaultScope(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := r.ParseForm(); err == nil && strings.TrimSpace(r.Form.Get("scope")) == "" {
			r.Form.Set("scope", string(models.ScopeReadUser))
		}
		next.ServeHTTP(w, r)
	})
}

// addIss sets "iss" beside the response parameters: in the fragment when
// they are there, else in the query.
func addIss(loc, issuer string) string {
	u, err := url.Parse(loc)
	if err != nil {
		return loc
	}
	if u.Fragment != "" {
		if f, err := url.ParseQuery(u.Fragment); err == nil && (f.Has("code") || f.Has("error") || f.Has("access_token")) {
			f.Set("iss", issuer)
			u.Fragment = f.Encode()
			return u.String()
		}
	}
	q := u.Query()
	q.Set("iss", issuer)
	u.RawQuery = q.Encode()
	return u.String()
}

// codeCrypto makes authorization codes: 32 random bytes, base64url. op asks
// it to "encrypt" the request id into a code; the code is random instead
// and the store keeps its hash beside the request (SaveAuthCode), so codes
// need no shared key between instances and reveal nothing. Decrypt is
// never needed: access tokens are JWTs, not op's encrypted bearer tokens.
type codeCrypto struct{}

func (codeCrypto) Encrypt(string) (string, error) { return randomToken(32), nil }

func (codeCrypto) Decrypt(string) (string, error) {
	return "", errors.New("oauth: opaque tokens are not decryptable")
}

// randomToken returns n random bytes, base64url without padding.
func randomToken(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
	return base64.RawURLEncoding.EncodeToString(b)
}

// rateLimiter allows n events per window per key (a client address), with
// a sliding window of timestamps; memory is bounded by pruning on use.
type rateLimiter struct {
	n      int
	window time.Duration
	now    func() time.Time
	mu     sync.Mutex
	seen   map[string][]time.Time
}

func newRateLimiter(n int, window time.Duration, now func() time.Time) *rateLimiter {
	return &rateLimiter{n: n, window: window, now: now, seen: map[string][]time.Time{}}
}

// allow records an event for key and reports whether it is within the
// limit; retry is how long until the next one would be.
func (l *rateLimiter) allow(key string) (ok bool, retry time.Duration) {
	if l.n < 0 {
		return true, 0
	}
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.seen) > 10000 {
		for k, ts := range l.seen {
			if len(ts) == 0 || now.Sub(ts[len(ts)-1]) >= l.window {
				delete(l.seen, k)
			}
		}
	}
	ts := l.seen[key]
	for len(ts) > 0 && now.Sub(ts[0]) >= l.window {
		ts = ts[1:]
	}
	if len(ts) >= l.n {
		l.seen[key] = ts
		return false, l.window - now.Sub(ts[0])
	}
	l.seen[key] = append(ts, now)
	return true, 0
}

// clientAddress is the request's remote IP (no port).
func clientAddress(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

func isLoopbackHost(host string) bool {
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return host == "localhost" || (ip != nil && ip.IsLoopback())
}
