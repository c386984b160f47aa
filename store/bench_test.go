package store

import (
	"context"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/unsay/unsay/models"
)

var benchWriter = models.Principal{Subject: "bench", Scopes: []models.Scope{models.ScopeWrite}, Patients: []string{"bench"}}
var benchReader = models.Principal{Subject: "bench", Scopes: []models.Scope{models.ScopeReadUser}, Patients: []string{"bench"}}

// BenchmarkPublish measures one durable Publish (WAL, synchronous=FULL:
// each acknowledged write is fsynced). publishes/s = 1e9 / ns/op.
func BenchmarkPublish(b *testing.B) {
	s, _ := openTest(b, nil)
	ctx := context.Background()
	if _, err := SeedBench(ctx, s, time.Now()); err != nil {
		b.Fatal(err)
	}
	pi := PublishInput{Patient: "bench", Domain: "weight_bearing", Audience: models.AudienceUser,
		Value: "Full weight-bearing as tolerated.", AuthorID: "okafor", AuthorLabel: "Sarah Okafor, physio", Priority: 0.9}
	b.ResetTimer()
	i := 0
	for b.Loop() {
		i++ // a new value each time: an identical one is Unchanged and writes nothing
		pi.Value = "Full weight-bearing as tolerated, revision " + strconv.Itoa(i) + "."
		if _, err := s.Publish(ctx, benchWriter, pi); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "publishes/s")
}

// BenchmarkRead measures one Read of a current version through both P-1
// checks; it also reports the median (p50-ns) and p99 of single reads.
func BenchmarkRead(b *testing.B) {
	s, _ := openTest(b, nil)
	ctx := context.Background()
	if _, err := SeedBench(ctx, s, time.Now()); err != nil {
		b.Fatal(err)
	}
	var lat []time.Duration
	b.ResetTimer()
	for b.Loop() {
		t0 := time.Now()
		if _, err := s.Read(ctx, benchReader, "care://bench/weight_bearing"); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds()), "p50-ns")
	b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds()), "p99-ns")
}
