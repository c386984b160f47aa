package skill

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// scriptedFetcher serves pem (or fails with err) and counts fetches per
// URL; while gate is non-nil every fetch waits on it.
type scriptedFetcher struct {
	mu       sync.Mutex
	pem      []byte
	err      error
	perURL   map[string]int
	total    atomic.Int64
	inFlight atomic.Int64
	gate     chan struct{}
}

func (f *scriptedFetcher) FetchCertChain(ctx context.Context, u string) ([]byte, error) {
	f.total.Add(1)
	f.inFlight.Add(1)
	defer f.inFlight.Add(-1)
	f.mu.Lock()
	if f.perURL == nil {
		f.perURL = map[string]int{}
	}
	f.perURL[u]++
	gate, pem, err := f.gate, f.pem, f.err
	f.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return pem, err
}

func (f *scriptedFetcher) set(pem []byte, err error) {
	f.mu.Lock()
	f.pem, f.err = pem, err
	f.mu.Unlock()
}

func (f *scriptedFetcher) fetches(u string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.perURL[u]
}

// limitsRig is a Verifier over the test PKI with a settable clock.
type limitsRig struct {
	v   *Verifier
	f   *scriptedFetcher
	mu  sync.Mutex
	now time.Time
	pki testPKI
}

func newLimitsRig(t *testing.T) *limitsRig {
	t.Helper()
	p := getPKI(t)
	r := &limitsRig{f: &scriptedFetcher{pem: p.chainPEM}, now: t0, pki: p}
	roots := x509.NewCertPool()
	roots.AddCert(p.root)
	v, err := NewVerifier(VerifierConfig{SkillID: testSkillID, Roots: roots, Fetcher: r.f, Clock: r.clock})
	if err != nil {
		t.Fatal(err)
	}
	r.v = v
	return r
}

func (r *limitsRig) clock() time.Time { r.mu.Lock(); defer r.mu.Unlock(); return r.now }
func (r *limitsRig) advance(d time.Duration) {
	r.mu.Lock()
	r.now = r.now.Add(d)
	r.mu.Unlock()
}

// verify checks a request naming certURL whose body is body, signed with
// the test leaf key.
func (r *limitsRig) verify(ctx context.Context, certURL string, body []byte) error {
	h := http.Header{}
	h.Set(HeaderSignature256, r.pki.sign(body))
	h.Set(HeaderCertChainURL, certURL)
	_, err := r.v.Verify(ctx, h, body)
	return err
}

// Forged requests naming a URL whose chain cannot be fetched cause one
// fetch per backoff, not one each: 5 s after the first failure, then 10 s,
// doubling. Twin: once the URL serves a good chain it is accepted at the
// next allowed fetch and then cached.
func TestVerifier_AFailedCertificateURLIsNotFetchedAgainWithinItsBackoff(t *testing.T) {
	r := newLimitsRig(t)
	r.f.set(nil, errors.New("GET: status 403"))
	body := envelope(reqOpts{Timestamp: t0})
	for i := range 20 {
		if err := r.verify(context.Background(), testCertURL, body); !errors.Is(err, ErrCertificate) {
			t.Fatalf("forged request %d: %v, want ErrCertificate", i, err)
		}
	}
	if n := r.f.fetches(testCertURL); n != 1 {
		t.Fatalf("20 requests naming a failing URL made %d fetches, want 1", n)
	}
	step := func(d time.Duration, wantFetches int) {
		t.Helper()
		r.advance(d)
		body := envelope(reqOpts{Timestamp: r.clock()})
		_ = r.verify(context.Background(), testCertURL, body)
		if n := r.f.fetches(testCertURL); n != wantFetches {
			t.Fatalf("after %v more: %d fetches, want %d", d, n, wantFetches)
		}
	}
	step(4*time.Second, 1) // inside the first 5 s backoff
	step(time.Second, 2)   // 5 s: fetched again, fails, backoff now 10 s
	step(9*time.Second, 2)
	step(time.Second, 3) // 10 s later, backoff now 20 s

	// Twin: the URL recovers; the next allowed fetch accepts it and caches it.
	r.f.set(r.pki.chainPEM, nil)
	r.advance(20 * time.Second)
	for i := range 3 {
		if err := r.verify(context.Background(), testCertURL, envelope(reqOpts{Timestamp: r.clock()})); err != nil {
			t.Fatalf("request %d after the URL recovered: %v", i, err)
		}
	}
	if n := r.f.fetches(testCertURL); n != 4 {
		t.Fatalf("%d fetches after recovery, want 4 (one, then cached)", n)
	}
}

// At most CertFetchesInFlight downloads run at once: a request that would
// start another is refused without a fetch. Twin: a request for a URL
// already being fetched waits for that download and is accepted, and once
// the downloads end a new URL is fetched.
func TestVerifier_CertificateDownloadsInFlightAreCapped(t *testing.T) {
	r := newLimitsRig(t)
	gate := make(chan struct{})
	r.f.mu.Lock()
	r.f.gate = gate
	r.f.mu.Unlock()
	urls := make([]string, CertFetchesInFlight)
	errs := make(chan error, CertFetchesInFlight+1)
	for i := range urls {
		urls[i] = fmt.Sprintf("https://s3.amazonaws.com/echo.api/cert-%d.pem", i)
		go func() { errs <- r.verify(context.Background(), urls[i], envelope(reqOpts{})) }()
	}
	deadline := time.Now().Add(10 * time.Second)
	for r.f.inFlight.Load() != CertFetchesInFlight {
		if time.Now().After(deadline) {
			t.Fatalf("%d downloads under way, want %d", r.f.inFlight.Load(), CertFetchesInFlight)
		}
		time.Sleep(time.Millisecond)
	}
	extra := "https://s3.amazonaws.com/echo.api/one-too-many.pem"
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second) // were it fetched, it would wait on the gate
	defer cancel()
	if err := r.verify(ctx, extra, envelope(reqOpts{})); !errors.Is(err, ErrCertificate) {
		t.Fatalf("a download over the cap: %v, want ErrCertificate", err)
	}
	if n := r.f.fetches(extra); n != 0 {
		t.Fatalf("the URL over the cap was fetched %d times, want 0", n)
	}
	// Twin: joining a download under way is not refused.
	go func() { errs <- r.verify(context.Background(), urls[0], envelope(reqOpts{})) }()
	close(gate)
	for range CertFetchesInFlight + 1 {
		if err := <-errs; err != nil {
			t.Errorf("a request whose download was under way: %v", err)
		}
	}
	if n := r.f.fetches(urls[0]); n != 1 {
		t.Errorf("%s fetched %d times, want 1 (the second request joined the first)", urls[0], n)
	}
	if err := r.verify(context.Background(), extra, envelope(reqOpts{})); err != nil {
		t.Errorf("after the downloads ended, a new URL: %v", err)
	}
}

// Requests naming a new URL each time start downloads at a bounded rate:
// CertFetchBurst at once, then one per CertFetchEvery. Twin: when the
// interval has passed, one more is fetched.
func TestVerifier_DownloadsOfNewCertificateURLsAreRateLimited(t *testing.T) {
	r := newLimitsRig(t)
	r.f.set(nil, errors.New("GET: status 404")) // forged URLs do not exist
	for i := range CertFetchBurst + 5 {
		_ = r.verify(context.Background(), fmt.Sprintf("https://s3.amazonaws.com/echo.api/forged-%d.pem", i), envelope(reqOpts{}))
	}
	if n := r.f.total.Load(); n != CertFetchBurst {
		t.Fatalf("%d requests with new URLs made %d fetches, want %d (the burst)", CertFetchBurst+5, n, CertFetchBurst)
	}
	r.advance(CertFetchEvery)
	r.f.set(r.pki.chainPEM, nil)
	if err := r.verify(context.Background(), testCertURL, envelope(reqOpts{Timestamp: r.clock()})); err != nil {
		t.Fatalf("one interval later, Amazon's URL: %v", err)
	}
	if n := r.f.total.Load(); n != CertFetchBurst+1 {
		t.Fatalf("%d fetches, want %d", n, CertFetchBurst+1)
	}
}

// Everything that needs no certificate is checked before one is fetched: a
// request for another skill, with a stale timestamp or a body that is not
// JSON names a new URL and causes no download. Twin: the same request with
// this skill's id is fetched and accepted.
func TestVerifier_ARequestThatFailsWithoutACertificateCausesNoFetch(t *testing.T) {
	r := newLimitsRig(t)
	for name, c := range map[string]struct {
		body []byte
		want error
	}{
		"another skill":   {envelope(reqOpts{SkillID: "amzn1.ask.skill.someone-else"}), ErrSkillID},
		"stale timestamp": {envelope(reqOpts{Timestamp: t0.Add(-time.Hour)}), ErrTimestamp},
		"not JSON":        {[]byte("{not json"), ErrMalformed},
	} {
		u := "https://s3.amazonaws.com/echo.api/" + fmt.Sprint(len(name)) + ".pem"
		if err := r.verify(context.Background(), u, c.body); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", name, err, c.want)
		}
	}
	if n := r.f.total.Load(); n != 0 {
		t.Fatalf("requests that fail without a certificate made %d fetches, want 0", n)
	}
	if err := r.verify(context.Background(), testCertURL, envelope(reqOpts{})); err != nil {
		t.Fatalf("twin: %v", err)
	}
	if n := r.f.total.Load(); n != 1 {
		t.Fatalf("twin made %d fetches, want 1", n)
	}
}

// Remembered failures never push a verified chain out of the cache.
func TestVerifier_FailuresNeverEvictAVerifiedChain(t *testing.T) {
	r := newLimitsRig(t)
	if err := r.verify(context.Background(), testCertURL, envelope(reqOpts{})); err != nil {
		t.Fatal(err)
	}
	r.f.set(nil, errors.New("GET: status 404"))
	for i := range 3 * certCacheMax {
		r.advance(CertFetchEvery) // so every forged URL is fetched (and fails)
		_ = r.verify(context.Background(), fmt.Sprintf("https://s3.amazonaws.com/echo.api/forged-%d.pem", i), envelope(reqOpts{Timestamp: r.clock()}))
	}
	before := r.f.total.Load()
	if before < 2*certCacheMax {
		t.Fatalf("only %d forged URLs were fetched; the test needs more than the cache holds", before)
	}
	if err := r.verify(context.Background(), testCertURL, envelope(reqOpts{Timestamp: r.clock()})); err != nil {
		t.Fatalf("the verified chain after %d failed URLs: %v", 3*certCacheMax, err)
	}
	if n := r.f.fetches(testCertURL); n != 1 {
		t.Fatalf("the verified chain was fetched %d times, want 1 (still cached)", n)
	}
}
