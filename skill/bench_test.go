package skill

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// benchRequest is a LaunchRequest signed once, with its own request id.
type benchRequest struct {
	body []byte
	sig  string
	id   string
}

// benchLaunch returns a verified skill and 64 LaunchRequests, each signed
// once with its own request id (one per goroutine of a parallel run).
func benchLaunch(b *testing.B, withAPL bool) (*Skill, []benchRequest) {
	r := newRig(b, nil)
	r.care.discard = true
	reqs := make([]benchRequest, 64)
	for i := range reqs {
		id := fmt.Sprintf("amzn1.echo-api.request.bench-%d", i)
		body := envelope(reqOpts{APL: withAPL, RequestID: id})
		reqs[i] = benchRequest{body: body, sig: r.pki.sign(body), id: id}
	}
	return r.skill, reqs
}

// serveOnce serves q, then forgets its request id so that the benchmark
// can send it again (Alexa never does: the verifier would refuse it).
func serveOnce(b *testing.B, s *Skill, q benchRequest) {
	req := httptest.NewRequest(http.MethodPost, "/alexa", bytes.NewReader(q.body))
	req.Header.Set(HeaderSignature256, q.sig)
	req.Header.Set(HeaderCertChainURL, testCertURL)
	w := httptest.NewRecorder()
	s.ServeHTTP(w, req)
	if w.Code != http.StatusOK {
		b.Fatalf("status %d: %s", w.Code, w.Body)
	}
	s.verifier.replays.forget(q.id)
}

// forget drops id from the replay memory (benchmarks only).
func (m *replayMemory) forget(id string) {
	m.mu.Lock()
	delete(m.until, sha256.Sum256([]byte(id)))
	m.mu.Unlock()
}

// BenchmarkServeHTTP_VerifiedLaunch measures one verified LaunchRequest end
// to end in the handler (signature check with the cached chain, timestamp,
// skill id, routing, SSML, marking heard), without a screen.
func BenchmarkServeHTTP_VerifiedLaunch(b *testing.B) {
	s, reqs := benchLaunch(b, false)
	serveOnce(b, s, reqs[0]) // warm the chain cache
	b.ReportAllocs()
	b.SetBytes(int64(len(reqs[0].body)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		serveOnce(b, s, reqs[0])
	}
}

// BenchmarkServeHTTP_VerifiedLaunchAPL is the same with the care card drawn.
func BenchmarkServeHTTP_VerifiedLaunchAPL(b *testing.B) {
	s, reqs := benchLaunch(b, true)
	serveOnce(b, s, reqs[0])
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		serveOnce(b, s, reqs[0])
	}
}

// BenchmarkServeHTTP_VerifiedLaunchParallel runs verified launches on every
// CPU and reports the p50 and p99 latency of one request (µs).
func BenchmarkServeHTTP_VerifiedLaunchParallel(b *testing.B) {
	s, reqs := benchLaunch(b, false)
	serveOnce(b, s, reqs[0])
	var next atomic.Int64
	var mu sync.Mutex
	var lat []time.Duration
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		var mine []time.Duration
		q := reqs[int(next.Add(1))%len(reqs)] // this goroutine's own request id
		for pb.Next() {
			start := time.Now()
			serveOnce(b, s, q)
			mine = append(mine, time.Since(start))
		}
		mu.Lock()
		lat = append(lat, mine...)
		mu.Unlock()
	})
	b.StopTimer()
	slices.Sort(lat)
	if n := len(lat); n > 0 {
		b.ReportMetric(float64(lat[n*50/100].Microseconds()), "p50-µs")
		b.ReportMetric(float64(lat[min(n-1, n*99/100)].Microseconds()), "p99-µs")
	}
}
