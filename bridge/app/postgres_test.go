package app_test

import (
	"crypto/rand"
	"database/sql"
	"fmt"
	"net/url"
	"os"
	"strings"
	"testing"

	"github.com/unsay/unsay/skill/alexatest"
)

// postgresDSN returns a DSN whose search_path is a fresh schema (dropped at
// cleanup) of the database UNSAY_TEST_POSTGRES names; without it the test
// is skipped loudly, and under UNSAY_REQUIRE_ALL=1 that is a failure.
func postgresDSN(t *testing.T) string {
	t.Helper()
	base := os.Getenv("UNSAY_TEST_POSTGRES")
	if base == "" {
		msg := "SKIPPED: the program on Postgres — set UNSAY_TEST_POSTGRES=postgres://… (apt-get install postgresql)"
		if os.Getenv("UNSAY_REQUIRE_ALL") == "1" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	admin, err := sql.Open("pgx", base)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Close() })
	schema := "app_test_" + strings.ToLower(fmt.Sprintf("%x", rand.Text()[:8]))
	if _, err := admin.Exec("CREATE SCHEMA " + schema); err != nil {
		t.Fatalf("create schema: %v", err)
	}
	t.Cleanup(func() { _, _ = admin.Exec("DROP SCHEMA " + schema + " CASCADE") })
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

// P-19 on Postgres, the whole program: the speech principal's heard ledger
// lives in the store's database, so across restarts a retraction queued
// before is still owed (nothing lost) and one heard is never said again
// (nothing repeated).
func TestRun_OnPostgresNothingLostAndNothingRepeated(t *testing.T) {
	r := newRigOn(t, postgresDSN(t))
	dev := &alexatest.Device{SkillID: skillID, UserID: "amzn1.ask.account.RAY", DeviceID: "amzn1.ask.device.SHOW", SessionID: "s1"}
	r.link(dev)
	if first := r.say(dev, alexatest.Request{}); !strings.Contains(first, heardSentence) {
		t.Fatalf("launch said %q", first)
	}
	r.write("weight_bearing", newSentence, "okafor", "Sarah Okafor, physio")
	r.waitPending(1)

	r.stop()
	r.start()
	r.waitPending(1)
	dev.SessionID = "s2"
	if next := r.say(dev, alexatest.Request{}); !strings.HasPrefix(next, "Stop") || !strings.Contains(next, heardSentence) {
		t.Fatalf("after a restart the launch did not open with the retraction: %q", next)
	}
	r.stop()
	r.start()
	r.waitPending(0)
	dev.SessionID = "s3"
	if again := r.say(dev, alexatest.Request{}); strings.Contains(again, "I told you") || !strings.Contains(again, newSentence) {
		t.Fatalf("after hearing and restarting: %q", again)
	}
}
