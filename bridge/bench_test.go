package bridge

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/unsay/unsay/models"
)

// BenchmarkPublishToSubscriber measures store.Publish (a durable SQLite
// commit) → change feed → resources/updated over the GET stream → the SDK
// client's handler → resources/read holding the new value, on loopback.
// It reports p50/p95/p99 in µs besides ns/op.
func BenchmarkPublishToSubscriber(b *testing.B) {
	h := newHarness(b)
	ctx := context.Background()
	const uri = "care://ray/weight_bearing"
	got := make(chan string, 1)
	tok := h.token("bench", userScopes)
	br := &bearer{base: defaultTransport()}
	br.tok.Store(tok)
	var cs *mcp.ClientSession
	mc := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, &mcp.ClientOptions{
		ResourceUpdatedHandler: func(ctx context.Context, r *mcp.ResourceUpdatedNotificationRequest) {
			res, err := r.Session.ReadResource(ctx, &mcp.ReadResourceParams{URI: r.Params.URI})
			if err != nil {
				got <- "error: " + err.Error()
				return
			}
			got <- res.Contents[0].Text
		},
	})
	cs, err := mc.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: h.base + "/mcp", HTTPClient: httpClient(br)},
		&mcp.ClientSessionOptions{ProtocolVersion: ProtocolVersion})
	if err != nil {
		b.Fatal(err)
	}
	defer cs.Close()
	if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: uri}); err != nil {
		b.Fatal(err)
	}
	writer := models.Principal{Subject: "okafor", Scopes: []models.Scope{models.ScopeWrite}, Patients: []string{"ray"}}
	lat := make([]time.Duration, 0, b.N)
	commit := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		value := fmt.Sprintf("Partial weight-bearing, revision %d.", i)
		start := time.Now()
		if _, err := h.st.Publish(ctx, writer, storeInput("weight_bearing", models.AudienceUser, value)); err != nil {
			b.Fatal(err)
		}
		commit = append(commit, time.Since(start))
		select {
		case text := <-got:
			if text != value {
				b.Fatalf("read %q, want %q", text, value)
			}
		case <-time.After(5 * time.Second):
			b.Fatal("no update within 5 s")
		}
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	slices.Sort(lat)
	slices.Sort(commit)
	pct := func(d []time.Duration, p float64) float64 { return float64(d[int(p*float64(len(d)-1))].Microseconds()) }
	b.ReportMetric(pct(lat, .50), "p50-µs")
	b.ReportMetric(pct(lat, .95), "p95-µs")
	b.ReportMetric(pct(lat, .99), "p99-µs")
	b.ReportMetric(pct(commit, .50), "commit-p50-µs")
}
