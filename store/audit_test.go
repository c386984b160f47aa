package store

import (
	"context"
	"errors"
	"testing"
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
