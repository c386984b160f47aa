//go:build e2e

package e2e_test

// `unsay serve` on a database whose chains were edited (F12, F13), through
// the real binary: it refuses to start, saying what it found.

import (
	"bytes"
	"context"
	"database/sql"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/unsay/unsay/store"
)

// serveOn starts `unsay serve` on path at addr and returns its exit error
// and output once it exits, or ready=true (the process killed) once
// /readyz answers 200 first.
func serveOn(t *testing.T, path, addr string) (ready bool, out string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var buf bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, "serve", "--addr", addr, "--db", path, "--seed", "none")
	cmd.Stdout, cmd.Stderr = &buf, &buf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	for {
		select {
		case <-exited:
			return false, buf.String()
		case <-ctx.Done():
			t.Fatalf("serve neither exited nor became ready: %s", buf.String())
		case <-time.After(100 * time.Millisecond):
		}
		if res, err := http.Get("http://" + addr + "/readyz"); err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				cmd.Process.Kill()
				<-exited
				return true, buf.String()
			}
		}
	}
}

func TestServe_Integrity_RefusesADatabaseWhoseChainWasEditedSayingWhatItFound(t *testing.T) {
	const auditKey = "integrity-e2e-audit-key-0123456789abcdef"
	t.Setenv("UNSAY_AUDIT_KEY", auditKey)
	for _, tc := range []struct{ name, addr, want string }{
		{"a non-head value (F12)", "127.0.0.1:18761", "care://ray/weight_bearing/v1: the version does not match its hash chain"},
		{"an audience (F13)", "127.0.0.1:18762", "the head signature of care://ray/gait_note/v2 does not match its chain under this key"},
		{"nothing (intact)", "127.0.0.1:18763", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "unsay.db")
			st, err := store.Open(context.Background(), store.Options{DSN: path, AuditKey: []byte(auditKey)})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := store.Seed(context.Background(), st, time.Date(2026, 10, 8, 9, 14, 0, 0, time.UTC)); err != nil {
				t.Fatal(err)
			}
			st.Close()
			db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)")
			if err != nil {
				t.Fatal(err)
			}
			var qs []string
			switch {
			case strings.Contains(tc.name, "F12"):
				qs = []string{`UPDATE versions SET value = CAST('You may now run and jump freely.' AS BLOB) WHERE domain = 'weight_bearing' AND n = 1`}
			case strings.Contains(tc.name, "F13"):
				qs = []string{`UPDATE versions SET audience = 'user' WHERE domain = 'gait_note'`, `UPDATE facts SET audience = 'user' WHERE domain = 'gait_note'`}
			}
			for _, q := range qs {
				if _, err := db.Exec(q); err != nil {
					t.Fatal(err)
				}
			}
			db.Close()
			ready, out := serveOn(t, path, tc.addr)
			switch {
			case tc.want == "" && !ready:
				t.Fatalf("serve on an intact database did not start: %s", out)
			case tc.want != "" && ready:
				t.Fatalf("serve started on a database with %s edited: %s", tc.name, out)
			case tc.want != "" && (!strings.Contains(out, tc.want) || strings.Contains(out, "development key, not")):
				t.Fatalf("serve refused with %q, want it to say %q", out, tc.want)
			}
		})
	}
}
