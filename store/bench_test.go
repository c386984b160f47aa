package store

import (
	"context"
	"runtime"
	"slices"
	"strconv"
	"sync/atomic"
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

// BenchmarkPublishConcurrent measures durable publish throughput with
// concurrent writers (SQLite WAL, synchronous=FULL): each of 64 writers
// revises its own fact (a writer per fact, as clinicians of different
// patients would), every Publish signed, audited and acknowledged only
// after its commit is durable. publishes/s counts acknowledged writes.
func BenchmarkPublishConcurrent(b *testing.B) {
	s, _ := openTest(b, nil)
	benchPublishConcurrent(b, s)
}

// BenchmarkPublishConcurrentPostgres is BenchmarkPublishConcurrent on
// Postgres (synchronous_commit as the server has it: on by default).
func BenchmarkPublishConcurrentPostgres(b *testing.B) {
	s, err := Open(context.Background(), Options{DSN: freshSchemaDSN(b), AuditKey: []byte("test-audit-key")})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	benchPublishConcurrent(b, s)
}

func benchPublishConcurrent(b *testing.B, s *Store) {
	const writers = 64
	ctx := context.Background()
	patients := make([]string, writers)
	for i := range patients {
		patients[i] = "bench" + strconv.Itoa(i)
	}
	w := models.Principal{Subject: "bench", Scopes: []models.Scope{models.ScopeWrite}, Patients: patients}
	var next atomic.Int64
	b.SetParallelism((writers + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		id := next.Add(1) - 1
		pi := PublishInput{Patient: patients[id%writers], Domain: "weight_bearing", Audience: models.AudienceUser,
			AuthorID: "okafor", AuthorLabel: "Sarah Okafor, physio", Audit: &AuditEntry{Actor: "hmac", Via: "hmac", Author: "okafor"}}
		for i := 0; pb.Next(); i++ {
			pi.Value = "Full weight-bearing as tolerated, revision " + strconv.Itoa(i) + "."
			if _, err := s.Publish(ctx, w, pi); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "publishes/s")
}
