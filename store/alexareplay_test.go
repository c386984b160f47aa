package store

import (
	"context"
	"crypto/sha256"
	"testing"
	"time"
)

// Two instances on one database share the Alexa replay memory: a request
// id one recorded is refused by the other (a replay behind a load
// balancer), and by itself again; the twins — another id, on either
// instance — are recorded as new. A digest whose window passed is pruned,
// so the table does not grow without end (P-22).
func TestRememberAlexaRequest_AnIdOneInstanceRecordedIsAReplayOnTheOther(t *testing.T) {
	dsn := testDSN(t)
	a, b := openDSN(t, dsn), openDSN(t, dsn)
	ctx := context.Background()
	now := time.Unix(1_800_000_000, 0)
	until := now.Add(151 * time.Second)
	remember := func(s *Store, id string, at time.Time) bool {
		t.Helper()
		first, err := s.RememberAlexaRequest(ctx, sha256.Sum256([]byte(id)), at, at.Add(151*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		return first
	}
	if !remember(a, "amzn1.echo-api.request.1", now) {
		t.Fatal("a new request id on instance A was taken as a replay")
	}
	if remember(b, "amzn1.echo-api.request.1", now) {
		t.Error("the request id instance A accepted was new to instance B: a replay behind a load balancer passes")
	}
	if remember(a, "amzn1.echo-api.request.1", now) {
		t.Error("the request id instance A accepted was new to A again")
	}
	if !remember(b, "amzn1.echo-api.request.2", now) || !remember(a, "amzn1.echo-api.request.3", now) {
		t.Error("another request id was taken as a replay")
	}
	// Past the window every digest recorded so far is pruned by the
	// alexaReplayPruneEvery-th call.
	later := until.Add(time.Second)
	for i := 0; i < alexaReplayPruneEvery; i++ {
		remember(a, "amzn1.echo-api.request.later-"+time.Duration(i).String(), later)
	}
	var old int
	if err := a.db.QueryRow(a.d.rebind(`SELECT COUNT(*) FROM alexa_request_seen WHERE until_ms <= ?`), until.UnixMilli()).Scan(&old); err != nil {
		t.Fatal(err)
	}
	if old != 0 {
		t.Errorf("%d digests whose window passed are still kept", old)
	}
}
