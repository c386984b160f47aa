package store

import (
	"context"
	"errors"
	"testing"
	"time"
)

func auditN(t *testing.T, s *Store, n int) {
	t.Helper()
	for i := range n {
		e := AuditEntry{Actor: "okafor", URI: "care://ray/weight_bearing", Outcome: "accepted", Reason: ReasonOK, Via: "bearer", Author: "okafor"}
		if i%2 == 1 {
			e.Outcome, e.Reason, e.Via = "refused", ReasonBadSignature, "hmac"
		}
		if err := s.Audit(context.Background(), e); err != nil {
			t.Fatal(err)
		}
	}
}

func TestAuditChain_IntactAfterAppends(t *testing.T) {
	s, _ := openTest(t, newClock())
	auditN(t, s, 5)
	if bad, err := s.VerifyAudit(context.Background()); err != nil || bad != 0 {
		t.Fatalf("VerifyAudit = %d, %v; want intact", bad, err)
	}
	rows, err := s.AuditRows(context.Background(), 0, 0)
	if err != nil || len(rows) != 5 {
		t.Fatalf("AuditRows = %d, %v", len(rows), err)
	}
	for i, r := range rows {
		if r.Seq != int64(i+1) || len(r.MAC) != 64 || r.At.IsZero() {
			t.Fatalf("row %d = %+v", i+1, r)
		}
	}
}

func TestAuditChain_NamesTheFirstTamperedRow(t *testing.T) {
	for _, tc := range []struct {
		name  string
		query string
		want  int64
	}{
		{"actor rewritten", `UPDATE audit SET actor = 'someone-else' WHERE seq = 3`, 3},
		{"outcome flipped", `UPDATE audit SET outcome = 'accepted', reason = 'ok' WHERE seq = 2`, 2},
		{"row deleted mid-chain", `DELETE FROM audit WHERE seq = 2`, 2},
		{"tail truncated", `DELETE FROM audit WHERE seq = 5`, 5},
		{"first row's time moved", `UPDATE audit SET at = at + 1 WHERE seq = 1`, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, path := openTest(t, newClock())
			auditN(t, s, 5)
			tamper(t, path, tc.query)
			bad, err := s.VerifyAudit(context.Background())
			if err != nil || bad != tc.want {
				t.Fatalf("VerifyAudit = %d, %v; want %d", bad, err, tc.want)
			}
		})
	}
}

func TestAuditChain_KeyedAndDomainSeparated(t *testing.T) {
	s, path := openTest(t, newClock())
	auditN(t, s, 3)
	s.Close()
	other, err := Open(context.Background(), Options{DSN: path, AuditKey: []byte("another key")})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if bad, _ := other.VerifyAudit(context.Background()); bad != 1 {
		t.Fatalf("VerifyAudit under another key = %d, want 1", bad)
	}
	same, err := Open(context.Background(), Options{DSN: path, AuditKey: []byte("test-audit-key")})
	if err != nil {
		t.Fatal(err)
	}
	defer same.Close()
	if bad, _ := same.VerifyAudit(context.Background()); bad != 0 {
		t.Fatalf("VerifyAudit under the same key = %d, want 0", bad)
	}
	if string(auditChainKey([]byte("k"))) == "k" || auditChainLabel != "unsay/v1/audit-chain" {
		t.Fatal("chain key is not derived under the pinned label")
	}
}

func TestAudit_RefusesAnOpenReasonAndKeepsAttackerBytesOut(t *testing.T) {
	s, _ := openTest(t, newClock())
	ctx := context.Background()
	for name, e := range map[string]AuditEntry{
		"free-text reason":     {Actor: "a", Outcome: "refused", Reason: "signature was deadbeef", Via: "hmac"},
		"accepted but refused": {Actor: "a", Outcome: "accepted", Reason: ReasonForbidden, Via: "hmac"},
		"refused but ok":       {Actor: "a", Outcome: "refused", Reason: ReasonOK, Via: "hmac"},
		"unknown via":          {Actor: "a", Outcome: "refused", Reason: ReasonInvalid, Via: "smoke-signal"},
		"no actor":             {Outcome: "refused", Reason: ReasonInvalid, Via: "hmac"},
	} {
		if err := s.Audit(ctx, e); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: Audit err = %v, want ErrInvalid", name, err)
		}
	}
	if rows, _ := s.AuditRows(ctx, 0, 0); len(rows) != 0 {
		t.Fatalf("refused audit entries were written: %d", len(rows))
	}
	// Twin: a refusal with a closed reason is written; a non-URI and a
	// non-author are dropped, not recorded.
	if err := s.Audit(ctx, AuditEntry{Actor: "hmac", URI: "care://ray/x?sig=deadbeef", Outcome: "refused",
		Reason: ReasonBadSignature, Via: "hmac", Author: "Bearer eyJhbGciOi"}); err != nil {
		t.Fatal(err)
	}
	rows, _ := s.AuditRows(ctx, 0, 0)
	if len(rows) != 1 || rows[0].URI != "" || rows[0].Author != "" || rows[0].Reason != ReasonBadSignature {
		t.Fatalf("row = %+v", rows)
	}
}

// TestAudit_RepeatedRefusalsCollapseIntoOneRowWithACount: a flood of
// identical refusals once added one chained row each, forever. Now a repeat
// of the last row within AuditRepeatWindow adds to its count, so the log's
// size is bounded by the kinds of attempt, not their number — and it still
// verifies.
func TestAudit_RepeatedRefusalsCollapseIntoOneRowWithACount(t *testing.T) {
	clock := newClock()
	s, _ := openTest(t, clock)
	ctx := context.Background()
	bad := AuditEntry{Actor: "anonymous", URI: "care://ray/weight_bearing", Outcome: OutcomeRefused, Reason: ReasonBadSignature, Via: "hmac"}
	for range 200 {
		clock.Advance(100 * time.Millisecond)
		if err := s.Audit(ctx, bad); err != nil {
			t.Fatal(err)
		}
	}
	batched := bad
	batched.Count = 40 // a caller that counted 40 attempts itself
	if err := s.Audit(ctx, batched); err != nil {
		t.Fatal(err)
	}
	rows, err := s.AuditRows(ctx, 0, 0)
	if err != nil || len(rows) != 1 {
		t.Fatalf("AuditRows = %d rows, %v; want 1", len(rows), err)
	}
	r := rows[0]
	if r.Count != 240 || !r.LastAt.Equal(clock.Now().Truncate(time.Millisecond)) || !r.At.Before(r.LastAt) {
		t.Fatalf("collapsed row = %+v; want count 240, first and last attempt times", r)
	}
	if v, err := s.VerifyAuditLog(ctx); err != nil || v.BadRow != 0 || !v.Head.Valid {
		t.Fatalf("VerifyAuditLog = %+v, %v; want intact with a valid head", v, err)
	}

	// Positive twins: a different attempt, an accepted write (never
	// collapsed), and a repeat after the window each get a row of their own.
	other := bad
	other.Reason = ReasonStaleTimestamp
	ok := AuditEntry{Actor: "okafor", URI: "care://ray/weight_bearing/v2", Outcome: OutcomeAccepted, Reason: ReasonOK, Via: "bearer"}
	for _, e := range []AuditEntry{other, bad, ok, ok} {
		if err := s.Audit(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	clock.Advance(AuditRepeatWindow + time.Second)
	if err := s.Audit(ctx, bad); err != nil {
		t.Fatal(err)
	}
	rows, _ = s.AuditRows(ctx, 0, 0)
	if len(rows) != 6 {
		t.Fatalf("rows = %d, want 6: %+v", len(rows), rows)
	}
	for i, want := range []int64{240, 1, 1, 1, 1, 1} {
		if rows[i].Count != want {
			t.Errorf("row %d count = %d, want %d", i+1, rows[i].Count, want)
		}
	}
	if bad, err := s.VerifyAudit(ctx); err != nil || bad != 0 {
		t.Fatalf("VerifyAudit = %d, %v", bad, err)
	}
}

// TestAudit_ACollapsedRowsCountIsCoveredByItsMAC: lowering a count (to
// hide how many attempts were made) breaks the chain at that row.
func TestAudit_ACollapsedRowsCountIsCoveredByItsMAC(t *testing.T) {
	s, path := openTest(t, newClock())
	ctx := context.Background()
	auditN(t, s, 2)
	bad := AuditEntry{Actor: "anonymous", Outcome: OutcomeRefused, Reason: ReasonRateLimited, Via: "hmac", Count: 500}
	if err := s.Audit(ctx, bad); err != nil {
		t.Fatal(err)
	}
	auditN(t, s, 1)
	if n, err := s.VerifyAudit(ctx); err != nil || n != 0 {
		t.Fatalf("before tampering: %d, %v", n, err)
	}
	tamper(t, path, `UPDATE audit SET count = 5 WHERE seq = 3`)
	if n, err := s.VerifyAudit(ctx); err != nil || n != 3 {
		t.Fatalf("VerifyAudit after lowering the count = %d, %v; want 3", n, err)
	}
}
