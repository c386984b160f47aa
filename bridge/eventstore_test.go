package bridge

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/unsay/unsay/models"
)

func TestFrameAllowed_ReadsEveryURIShapeAndFailsClosed(t *testing.T) {
	user := models.Principal{Subject: "u", Scopes: []models.Scope{models.ScopeReadUser}, Patients: []string{"ray"}}
	dual := models.Principal{Subject: "d", Scopes: []models.Scope{models.ScopeReadUser, models.ScopeReadAssistant}, Patients: []string{"ray"}}
	for _, tc := range []struct {
		name       string
		frame      string
		user, dual bool
	}{
		{"params.uri internal", `{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":"care-internal://ray/risk"}}`, false, true},
		{"params.uri speakable", `{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":"care://ray/weight_bearing"}}`, true, true},
		{"params.data.uri internal", `{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"notice","data":{"uri":"care-internal://ray/risk","version":2}}}`, false, true},
		{"result.contents[].uri internal", `{"jsonrpc":"2.0","id":3,"result":{"contents":[{"uri":"care-internal://ray/risk/v1","text":"x"}]}}`, false, true},
		{"result.resources[].uri mixed", `{"jsonrpc":"2.0","id":4,"result":{"resources":[{"uri":"care://ray/contact"},{"uri":"care-internal://ray/risk"}]}}`, false, true},
		{"whats_changed structuredContent", `{"jsonrpc":"2.0","id":5,"result":{"structuredContent":{"changes":[{"uri":"care-internal://ray/risk"}]}}}`, false, true},
		{"another patient", `{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":"care://someone/weight_bearing"}}`, false, false},
		{"unparseable uri fails closed", `{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":"care://ray/weight_bearing/"}}`, false, false},
		{"unknown scheme fails closed", `{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":"app://nope"}}`, false, false},
		{"internal URI in free text", `{"jsonrpc":"2.0","id":6,"result":{"content":[{"type":"text","text":"see care-internal://ray/risk"}]}}`, false, true},
		{"not JSON fails closed", `{"jsonrpc":`, false, false},
		{"the card", `{"jsonrpc":"2.0","id":7,"result":{"contents":[{"uri":"ui://unsay/echo"}]}}`, true, true},
		{"no URI at all", `{"jsonrpc":"2.0","id":8,"result":{}}`, true, true},
		{"list_changed", `{"jsonrpc":"2.0","method":"notifications/resources/list_changed","params":{}}`, true, true},
	} {
		if got := frameAllowed(user, []byte(tc.frame)); got != tc.user {
			t.Errorf("%s: user allowed = %v, want %v", tc.name, got, tc.user)
		}
		if got := frameAllowed(dual, []byte(tc.frame)); got != tc.dual {
			t.Errorf("%s: dual allowed = %v, want %v", tc.name, got, tc.dual)
		}
		if got := frameAllowed(models.Principal{}, []byte(tc.frame)); got && strings.Contains(tc.frame, "://") && !strings.Contains(tc.frame, "ui://") {
			t.Errorf("%s: allowed for no principal", tc.name)
		}
	}
}

func TestRedact_NotificationBecomesRedactedAndResponseKeepsItsID(t *testing.T) {
	if got := redact([]byte(`{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":"care-internal://ray/risk"}}`)); !bytes.Equal(got, RedactedFrame) {
		t.Errorf("notification redacted to %s", got)
	}
	got := redact([]byte(`{"jsonrpc":"2.0","id":42,"result":{"contents":[{"uri":"care-internal://ray/risk"}]}}`))
	var m map[string]any
	if err := json.Unmarshal(got, &m); err != nil || m["id"] != float64(42) || m["error"] == nil || bytes.Contains(got, []byte("care-internal")) {
		t.Errorf("response redacted to %s", got)
	}
}

// TestReplay_ANarrowedTokenCannotResumeAndUndeliveredFramesReplay: a
// dual-scope session stores revisions while no stream is attached; a
// user-only token of the same subject and patients cannot resume it (403:
// the session is bound to its scopes too). Twin: the session's own token
// opening the stream without Last-Event-ID gets every stored frame — none
// was ever delivered — at its own event id, internal ones included, and
// the next live event follows on.
func TestReplay_ANarrowedTokenCannotResumeAndUndeliveredFramesReplay(t *testing.T) {
	h := newHarness(t)
	wide := h.token("reasoner", dualScopes)
	narrow := h.token("reasoner", userScopes)
	sid := h.rawInit(wide)
	for i, params := range []string{`{"level":"info"}`, `{"uri":"care-internal://ray/risk"}`, `{"uri":"care://ray/weight_bearing"}`} {
		method := "resources/subscribe"
		if i == 0 {
			method = "logging/setLevel"
		}
		if r := h.rawCall(wide, sid, 10+i, method, params); r["error"] != nil {
			t.Fatalf("%s: %v", method, r["error"])
		}
	}
	before := counterValue(h.srv.metrics.notificationsSent.WithLabelValues(methodMessage))
	h.publish("risk", models.AudienceAssistant, "Fall risk HIGH; a second fall on the ward.")
	h.publish("weight_bearing", models.AudienceUser, "Full weight-bearing as tolerated.")
	waitUntil(t, func() bool {
		return counterValue(h.srv.metrics.notificationsSent.WithLabelValues(methodMessage)) >= before+2
	})

	for _, last := range []string{"", "_0"} {
		_, status, cancel := h.openStream(narrow, sid, last)
		cancel()
		if status != http.StatusForbidden {
			t.Errorf("narrowed resume (Last-Event-ID %q): %d, want 403", last, status)
		}
	}

	ch, cancel := h.resume(wide, sid, "")
	defer cancel()
	got := nextEvents(t, ch, 4)
	for i, ev := range got {
		if ev.id != fmt.Sprintf("_%d", i) {
			t.Errorf("event %d has id %q, want _%d", i, ev.id, i)
		}
		if bytes.Equal(ev.data, RedactedFrame) {
			t.Errorf("event %s redacted for the session's own principal", ev.id)
		}
	}
	if !bytes.Contains(got[0].data, []byte("care-internal://ray/risk")) || !bytes.Contains(got[3].data, []byte("care://ray/weight_bearing")) {
		t.Errorf("replayed %s … %s", got[0].data, got[3].data)
	}
	h.publish("weight_bearing", models.AudienceUser, "Full weight-bearing; no frame needed.")
	if live := nextEvents(t, ch, 1); live[0].id != "_4" {
		t.Errorf("first live event id %q, want _4", live[0].id)
	}
}

// resume opens the GET stream, retrying while a previous GET on the same
// stream is still being torn down (409).
func (h *harness) resume(tok, sid, last string) (<-chan sseEvent, func()) {
	h.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		ch, status, cancel := h.openStream(tok, sid, last)
		if status == 200 {
			return ch, cancel
		}
		cancel()
		if status != 409 || time.Now().After(deadline) {
			h.t.Fatalf("resume %q: %d", last, status)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func waitUntil(t testing.TB, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 5 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func counterValue(c prometheus.Counter) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		return -1
	}
	return m.GetCounter().GetValue()
}

func histogramCount(hg prometheus.Histogram) uint64 {
	var m dto.Metric
	if err := hg.Write(&m); err != nil {
		return 0
	}
	return m.GetHistogram().GetSampleCount()
}

func TestInstructions_NeverTripTheReplayFilterForAnyReadScope(t *testing.T) {
	frame := []byte(`{"jsonrpc":"2.0","id":1,"result":{"instructions":` + strconv.Quote(Instructions) + `}}`)
	for _, p := range []models.Principal{
		{Subject: "u", Scopes: []models.Scope{models.ScopeReadUser}, Patients: []string{"ray"}},
		{Subject: "a", Scopes: []models.Scope{models.ScopeReadAssistant}, Patients: []string{"ray"}},
	} {
		if !frameAllowed(p, frame) {
			t.Errorf("a replayed initialize result is withheld from %v", p.Scopes)
		}
	}
	// Twin: a frame naming an internal URI is withheld from the user scope.
	bad := []byte(`{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":"care-internal://ray/risk"}}`)
	if frameAllowed(models.Principal{Subject: "u", Scopes: []models.Scope{models.ScopeReadUser}, Patients: []string{"ray"}}, bad) {
		t.Error("an internal URI frame replayed to a user-scoped principal")
	}
}

// TestEventLog_IdenticalFramesShareTheirBytesAndReplayExactly: the same
// frame stored for many sessions is held once (its stored handles are
// equal), and each session's replay still yields its own frames, byte for
// byte, in order, a copy the caller may change. Twin: frames that differ
// are held apart.
func TestEventLog_IdenticalFramesShareTheirBytesAndReplayExactly(t *testing.T) {
	l := newEventLog(1<<20, DefaultRetainedPOSTStreams)
	same := []byte(`{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":"care://ray/weight_bearing"}}`)
	for i := range 50 {
		l.append(fmt.Sprint("s", i), "", bytes.Clone(same))
		l.append(fmt.Sprint("s", i), "", fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%d,"result":{}}`, i))
	}
	l.mu.Lock()
	a, b := l.sessions["s0"].streams[""].frames, l.sessions["s49"].streams[""].frames
	shared, apart := a[0] == b[0], a[1] != b[1]
	l.mu.Unlock()
	if !shared {
		t.Error("an identical frame of two sessions is held twice")
	}
	if !apart {
		t.Error("two different frames share one copy")
	}
	if got := l.size(); got != 50*len(same)+50*len(`{"jsonrpc":"2.0","id":0,"result":{}}`)+40 {
		t.Errorf("size %d: the bound counts every stored frame", got)
	}
	for _, i := range []int{0, 49} {
		frames, err := l.after(fmt.Sprint("s", i), "", -1)
		if err != nil || len(frames) != 2 {
			t.Fatalf("after: %d frames, %v", len(frames), err)
		}
		if !bytes.Equal(frames[0], same) || string(frames[1]) != fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"result":{}}`, i) {
			t.Errorf("session %d replays %q", i, frames)
		}
		frames[0][0] = 'X' // the caller's copy
	}
	if frames, _ := l.after("s1", "", -1); !bytes.Equal(frames[0], same) {
		t.Errorf("a caller's change reached the stored frame: %q", frames[0])
	}
}
