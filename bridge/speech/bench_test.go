package speech

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"sort"
	"sync/atomic"
	"testing"
	"time"

	"github.com/unsay/unsay/models"
)

// BenchmarkRevisionToPending measures one revision from the server's
// `updated` notification to the speech principal holding the durable
// announcement (main job steps 2–3): notification → resources/read over
// Streamable HTTP → word comparison → SQLite commit → WaitPending returns.
// It reports p50/p95/max in ms alongside ns/op.
func BenchmarkRevisionToPending(b *testing.B) {
	f := newFakeCare(b)
	f.seed(wb, "Partial weight-bearing with crutches.")
	db := openDB(b, newTestDB(b))
	p, err := New(Config{MCPURL: f.url(), Token: f.clientToken, Patients: []string{"ray"}, Ledger: db, KeepAlive: -1})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	b.Cleanup(func() { cancel(); <-done })
	for !p.State().Connected {
		time.Sleep(time.Millisecond)
	}
	if err := p.MarkHeard(ctx, "ray", mustURI(b, wb), 1, models.Hearing{}); err != nil {
		b.Fatal(err)
	}
	u := mustURI(b, wb)
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		n := f.publish(wb, fmt.Sprintf("Revision %d.", i))
		wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
		err := p.WaitPending(wctx, "ray", u, n)
		wcancel()
		if err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	ms := func(d time.Duration) float64 { return float64(d) / 1e6 }
	b.ReportMetric(ms(lat[len(lat)*50/100]), "p50-ms")
	b.ReportMetric(ms(lat[len(lat)*95/100]), "p95-ms")
	b.ReportMetric(ms(lat[len(lat)-1]), "max-ms")
}

// BenchmarkTurn measures one quiet turn of the skill (main job step 4):
// every fact of Ray's confirmed current over MCP (the list's pages,
// concurrently, over Streamable HTTP) and reconciled with the SQLite
// ledger, nothing owed. It reports p50/p95 in ms alongside ns/op, and the
// connections the principal dialled per turn (dials/op) through a
// transport keeping idle connections as bridge/app's does: a round's
// connections are reused by the next (issue 17).
func BenchmarkTurn(b *testing.B) {
	f := newFakeCare(b)
	f.seed("care://ray/anticoagulant", "Take rivaroxaban 10 mg once a day.")
	f.seed("care://ray/contact", "Call the ward on 0161 555 0100.")
	f.seed("care://ray/exercise", "Hip flexion exercises twice a day.")
	f.seed(wb, "Partial weight-bearing with crutches.")
	db := openDB(b, newTestDB(b))
	var dials atomic.Int64
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 32
	dial := tr.DialContext
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		dials.Add(1)
		return dial(ctx, network, addr)
	}
	p, err := New(Config{MCPURL: f.url(), Token: f.clientToken, Patients: []string{"ray"}, Ledger: db, KeepAlive: -1,
		HTTPClient: &http.Client{Transport: tr}})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	b.Cleanup(func() { cancel(); <-done })
	for !p.State().Connected {
		time.Sleep(time.Millisecond)
	}
	if _, err := p.Turn(ctx, "ray"); err != nil { // the round's connections exist
		b.Fatal(err)
	}
	dials0 := dials.Load()
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		s, err := p.Turn(ctx, "ray")
		if err != nil || len(s.Facts) != 4 || len(s.Pending) != 0 {
			b.Fatalf("turn = %+v, %v", s, err)
		}
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	b.ReportMetric(float64(dials.Load()-dials0)/float64(b.N), "dials/op")
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	ms := func(d time.Duration) float64 { return float64(d) / 1e6 }
	b.ReportMetric(ms(lat[len(lat)*50/100]), "p50-ms")
	b.ReportMetric(ms(lat[len(lat)*95/100]), "p95-ms")
}
