package envelope_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/unsay/unsay/store"
	"github.com/unsay/unsay/store/envelope"
)

// reopen opens path again with sealer and audit key, as a restart would.
func reopen(t *testing.T, path string, s store.Sealer, auditKey string) *store.Store {
	t.Helper()
	st, err := store.Open(context.Background(), store.Options{DSN: path, AuditKey: []byte(auditKey), Sealer: s,
		Clock: func() time.Time { return demoNow(t) }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func TestCheckStartup_RefusesKeysTheDatabaseWasNotWrittenWith(t *testing.T) {
	k1, k2 := randomKey(t), randomKey(t)
	s1, err := envelope.NewLocal(k1)
	if err != nil {
		t.Fatal(err)
	}
	s2, _ := envelope.NewLocal(k2)
	sealed, sealedPath := seededStore(t, s1)
	sealed.Close()
	plain, plainPath := seededStore(t, nil)
	plain.Close()
	const auditKey = "envelope-test-audit-key"

	cases := []struct {
		name   string
		path   string
		sealer store.Sealer
		audit  string
		ok     bool
	}{
		{"the sealing key and audit key start", sealedPath, s1, auditKey, true},
		{"the previous key still opens after rotation", sealedPath, mustLocal(t, k2, k1), auditKey, true},
		{"a wrong master key is refused", sealedPath, s2, auditKey, false},
		{"sealed values without an envelope are refused", sealedPath, nil, auditKey, false},
		{"a plaintext store under an envelope is refused until rekey", plainPath, s1, auditKey, false},
		{"a plaintext store without an envelope starts", plainPath, nil, auditKey, true},
		{"a wrong audit key is refused", plainPath, nil, "another-audit-key", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := reopen(t, tc.path, tc.sealer, tc.audit).CheckStartup(context.Background())
			if tc.ok && err != nil {
				t.Fatalf("CheckStartup = %v, want nil", err)
			}
			if !tc.ok && !errors.Is(err, store.ErrStartup) {
				t.Fatalf("CheckStartup = %v, want ErrStartup", err)
			}
		})
	}
}

func mustLocal(t *testing.T, current []byte, previous ...[]byte) store.Sealer {
	t.Helper()
	s, err := envelope.NewLocal(current, previous...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
