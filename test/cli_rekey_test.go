//go:build e2e

package e2e_test

// The `unsay rekey` command, driven through the real binary (issue 7):
// rotation, refusals that change nothing, and sealing a plaintext store.

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/unsay/unsay/models"
	"github.com/unsay/unsay/store"
	"github.com/unsay/unsay/store/envelope"
)

func rekeyTestKey(t *testing.T) []byte {
	t.Helper()
	k := make([]byte, 32)
	if _, err := rand.Read(k); err != nil {
		t.Fatal(err)
	}
	return k
}

// seedSealed writes the demo seed into a new database sealed under master
// (nil: plaintext) and returns its path.
func seedSealed(t *testing.T, master []byte) string {
	t.Helper()
	ctx := context.Background()
	var sealer store.Sealer
	if master != nil {
		var err error
		if sealer, err = envelope.NewLocal(master); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(t.TempDir(), "unsay.db")
	s, err := store.Open(ctx, store.Options{DSN: path, AuditKey: []byte("k"), Sealer: sealer})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := store.Seed(ctx, s, time.Date(2026, 10, 8, 9, 14, 0, 0, time.UTC)); err != nil {
		t.Fatal(err)
	}
	return path
}

// keyIDs returns the at-rest key id of every stored version, opened with sealer.
func keyIDs(t *testing.T, path string, sealer store.Sealer) []string {
	t.Helper()
	s, err := store.Open(context.Background(), store.Options{DSN: path, AuditKey: []byte("k"), Sealer: sealer})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	res, err := s.VerifyAll(context.Background(), models.System("t", models.ScopeReadUser, models.ScopeReadAssistant))
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, r := range res {
		if !r.Intact {
			t.Fatalf("%s broken at v%d", r.URI, r.BrokenAt)
		}
		for _, v := range r.Versions {
			if v.AtRest == nil {
				ids = append(ids, "plaintext")
			} else {
				ids = append(ids, v.AtRest.KeyID)
			}
		}
	}
	return ids
}

func TestRekey_ResealsEveryVersionUnderTheCurrentMasterKey(t *testing.T) {
	k1, k2 := rekeyTestKey(t), rekeyTestKey(t)
	path := seedSealed(t, k1)
	t.Setenv("UNSAY_AUDIT_KEY", "k")
	t.Setenv("UNSAY_ENVELOPE", "")
	t.Setenv("UNSAY_MASTER_KEY", base64.StdEncoding.EncodeToString(k2))
	t.Setenv("UNSAY_MASTER_KEYS_PREVIOUS", base64.StdEncoding.EncodeToString(k1))

	if code := runUnsay(t, []string{"rekey", "--db", path, "--envelope", "local"}); code != 0 {
		t.Fatalf("rekey exit %d, want 0", code)
	}
	only2, _ := envelope.NewLocal(k2)
	ids := keyIDs(t, path, only2)
	if len(ids) != 11 {
		t.Fatalf("%d versions, want 11 (the seed's eleven)", len(ids))
	}
	for _, id := range ids {
		if id != envelope.LocalKeyID(k2) {
			t.Fatalf("version sealed under %s after rekey, want %s", id, envelope.LocalKeyID(k2))
		}
	}
}

func TestRekey_RefusesAndChangesNothing(t *testing.T) {
	k1, k2 := rekeyTestKey(t), rekeyTestKey(t)
	path := seedSealed(t, k1)
	t.Setenv("UNSAY_AUDIT_KEY", "k")
	t.Setenv("UNSAY_ENVELOPE", "")
	t.Setenv("UNSAY_MASTER_KEYS_PREVIOUS", "")
	tests := []struct {
		name   string
		master string
		args   []string
	}{
		{"envelope none", base64.StdEncoding.EncodeToString(k2), []string{"--envelope", "none"}},
		{"no master key", "", []string{"--envelope", "local"}},
		{"short master key", base64.StdEncoding.EncodeToString(k2[:16]), []string{"--envelope", "local"}},
		// k2 without k1 as a previous key cannot open the stored versions.
		{"old key not provided", base64.StdEncoding.EncodeToString(k2), []string{"--envelope", "local"}},
		{"missing database", base64.StdEncoding.EncodeToString(k2), []string{"--envelope", "local", "--db", filepath.Join(t.TempDir(), "absent.db")}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("UNSAY_MASTER_KEY", tc.master)
			args := append([]string{"rekey", "--db", path}, tc.args...)
			if code := runUnsay(t, args); code == 0 {
				t.Fatalf("rekey %s exit 0, want a refusal", strings.Join(tc.args, " "))
			}
			only1, _ := envelope.NewLocal(k1)
			for _, id := range keyIDs(t, path, only1) {
				if id != envelope.LocalKeyID(k1) {
					t.Fatalf("a refused rekey changed a version's key to %s", id)
				}
			}
		})
	}
}

func TestRekey_SealsAPlaintextStore(t *testing.T) {
	k := rekeyTestKey(t)
	path := seedSealed(t, nil)
	t.Setenv("UNSAY_AUDIT_KEY", "k")
	t.Setenv("UNSAY_MASTER_KEY", base64.StdEncoding.EncodeToString(k))
	t.Setenv("UNSAY_MASTER_KEYS_PREVIOUS", "")
	t.Setenv("UNSAY_ENVELOPE", "local")
	if code := runUnsay(t, []string{"rekey", "--db", path}); code != 0 {
		t.Fatalf("rekey exit %d", code)
	}
	sealer, _ := envelope.NewLocal(k)
	for _, id := range keyIDs(t, path, sealer) {
		if id != envelope.LocalKeyID(k) {
			t.Fatalf("version at rest as %s, want sealed under %s", id, envelope.LocalKeyID(k))
		}
	}
}

// runUnsay runs the binary under test with the test's environment and
// returns its exit code.
func runUnsay(t *testing.T, args []string) int {
	t.Helper()
	out, err := exec.Command(bin, args...).CombinedOutput()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		t.Logf("unsay %s: %s", strings.Join(args, " "), out)
		return ee.ExitCode()
	default:
		t.Fatalf("unsay %s: %v", strings.Join(args, " "), err)
		return -1
	}
}
