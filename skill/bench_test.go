package skill

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"
)

// benchLaunch returns a verified skill and a LaunchRequest signed once.
func benchLaunch(b *testing.B, withAPL bool) (*Skill, []byte, string) {
	r := newRig(b, nil)
	r.care.discard = true
	body := envelope(reqOpts{APL: withAPL})
	return r.skill, body, r.pki.sign(body)
}

func serveOnce(b *testing.B, s *Skill, body []byte, sig string) {
	req := httptest.NewRequest(http.MethodPost, "/alexa", bytes.NewReader(body))
	req.Header.Set(HeaderSignature256, sig)
	req.Header.Set(HeaderCertChainURL, testCertURL)
	w := httptest.NewRecorder()
	s.ServeHTTP(w, req)
	if w.Code != http.StatusOK {
		b.Fatalf("status %d: %s", w.Code, w.Body)
	}
}

// BenchmarkServeHTTP_VerifiedLaunch measures one verified LaunchRequest end
// to end in the handler (signature check with the cached chain, timestamp,
// skill id, routing, SSML, marking heard), without a screen.
func BenchmarkServeHTTP_VerifiedLaunch(b *testing.B) {
	s, body, sig := benchLaunch(b, false)
	serveOnce(b, s, body, sig) // warm the chain cache
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		serveOnce(b, s, body, sig)
	}
}

// BenchmarkServeHTTP_VerifiedLaunchAPL is the same with the care card drawn.
func BenchmarkServeHTTP_VerifiedLaunchAPL(b *testing.B) {
	s, body, sig := benchLaunch(b, true)
	serveOnce(b, s, body, sig)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		serveOnce(b, s, body, sig)
	}
}

// BenchmarkServeHTTP_VerifiedLaunchParallel runs verified launches on every
// CPU and reports the p50 and p99 latency of one request (µs).
func BenchmarkServeHTTP_VerifiedLaunchParallel(b *testing.B) {
	s, body, sig := benchLaunch(b, false)
	serveOnce(b, s, body, sig)
	var mu sync.Mutex
	var lat []time.Duration
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		var mine []time.Duration
		for pb.Next() {
			start := time.Now()
			serveOnce(b, s, body, sig)
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
