//go:build e2e

package e2e_test

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	_ "modernc.org/sqlite" // another process's connection to the database file

	"github.com/unsay/unsay/test/harness"
)

// Finding V5 (P-24), as the tester found it: the launch retracts the
// walking instruction (the seed's words → revision); another process
// holds the SQLite file with BEGIN EXCLUSIVE while Alexa's ERROR report of
// that response arrives, so the heard ledger cannot commit it within the
// skill's 5 s. The report is kept, not dropped: once the lock is released
// the next turn says the retraction again, saying so. Twin: the same
// report with the database free re-opens it at once (the restart test's
// twin and TestNotPlayed_AnErrorReportMakesTheRetractionOwedAgain). And
// when the server is killed (SIGKILL) while the report is kept, the
// server started again after the lock is released applies it from
// unsay.db.kept-reports and says the retraction again all the same.
func TestSpeechSafety_AnErrorReportThatMeetsALockedDatabaseStillOwesTheRetraction(t *testing.T) {
	for _, c := range []struct {
		name           string
		locked, killed bool
	}{
		{"the report meets a locked database", true, false},
		{"the server is killed while the report is kept", true, true},
		{"twin: the database is free", false, false},
	} {
		locked := c.locked
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			heardAndRevised(t, dir)
			s := startWith(t, safetyPart, harness.Options{Dir: dir, Args: []string{"--alexa-verify=false", "--default-patient", "ray"}})
			dev := harness.NewDevice("ray")
			var r1 *harness.Reply
			for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
				if r1 = ask(t, s, dev.Launch()); !strings.Contains(r1.Speech(), "can't reach your care notes") {
					break
				}
			}
			if !strings.HasPrefix(r1.Speech(), "Stop — your walking instruction has changed.") || !strings.Contains(r1.Speech(), revision) {
				t.Fatalf("launch: %q", r1.Speech())
			}
			backlogAtMost(t, s, 0) // its marks are committed

			release := func() {}
			if locked {
				release = lockDatabase(t, filepath.Join(dir, "unsay.db"))
			}
			end := dev.SessionEnded("ERROR")
			end["session"].(map[string]any)["attributes"] = r1.Body.SessionAttributes
			end["request"].(map[string]any)["error"] = map[string]any{"type": "DEVICE_COMMUNICATION_ERROR", "message": "not played"}
			ask(t, s, end)
			if c.killed {
				// Saved before its first ledger attempt, which waits on the
				// lock: killed during that wait, it is not lost either.
				file := filepath.Join(dir, "unsay.db.kept-reports")
				for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
					if _, err := os.Stat(file); err == nil {
						break
					} else if time.Now().After(deadline) {
						t.Fatalf("the report was never saved in %s: %v\n%s", file, err, s.Output())
					}
				}
				s.Kill()
				release()
				var err error
				if s, err = s.Restart(context.Background()); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = s.Stop() })
			}
			release()

			next := launchUntilStop(t, s, dev)
			if !strings.HasPrefix(next, "Stop — as I may not have told you properly: your walking instruction has changed.") || !strings.Contains(next, revision) {
				t.Fatalf("after the error report: %q\n%s", next, s.Output())
			}
			if c.killed && !strings.Contains(s.Output(), "alexa error reports restored") {
				t.Errorf("no line saying the report was restored:\n%s", s.Output())
			}
			if locked && !c.killed && !strings.Contains(s.Output(), "alexa error report kept") {
				t.Errorf("no line saying the report was kept:\n%s", s.Output())
			}
		})
	}
}

// lockDatabase takes the SQLite file's write lock at path on a connection
// of its own (BEGIN EXCLUSIVE), as `sqlite3 unsay.db 'BEGIN EXCLUSIVE;'`
// would, until the returned release is called.
func lockDatabase(t *testing.T, path string) (release func()) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	conn, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(context.Background(), "BEGIN EXCLUSIVE"); err != nil {
		t.Fatal(err)
	}
	done := false
	release = func() {
		if done {
			return
		}
		done = true
		if _, err := conn.ExecContext(context.Background(), "ROLLBACK"); err != nil {
			t.Error(err)
		}
		conn.Close()
		db.Close()
	}
	t.Cleanup(release)
	return release
}
