package store

import (
	"context"
	"testing"

	"github.com/unsay/unsay/models"
)

// BenchmarkHeardLedger_MarkToldHeardVersion measures the ledger call every
// Launch makes for the walking instruction Ray heard already: MarkTold at
// the heard version, confirmed already by an earlier telling — the fast
// path, one read and no write transaction (issue 17; finding B1 added a
// column to that read and one write per marking, made by the first
// telling, before the timer starts).
func BenchmarkHeardLedger_MarkToldHeardVersion(b *testing.B) {
	s, _ := openTest(b, nil)
	l := s.HeardLedger()
	ctx := context.Background()
	const uri = "care://bench/weight_bearing"
	if err := l.MarkHeard(ctx, "bench", uri, 3, models.Hearing{}); err != nil {
		b.Fatal(err)
	}
	if _, err := l.MarkTold(ctx, "bench", uri, 3, models.Hearing{}); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if changed, err := l.MarkTold(ctx, "bench", uri, 3, models.Hearing{}); err != nil || changed {
			b.Fatalf("MarkTold = %v, %v", changed, err)
		}
	}
}
