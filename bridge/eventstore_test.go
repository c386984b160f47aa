package bridge

import (
	"bytes"
	"encoding/json"
	"fmt"
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

// TestReplay_NarrowedResumeReplacesInternalFrames subscribes a dual-scope
// session, lets revisions be stored while no stream is attached, then
// resumes with a user-only token of the same subject: internal frames come
// back as notifications/unsay/redacted at their own event ids, speakable
// ones intact; the live stream after the narrowed resume carries no
// internal frame. The wide resume afterwards is the control: the frames
// were stored and replay works, so the narrowed replay withheld on scope.
func TestReplay_NarrowedResumeReplacesInternalFrames(t *testing.T) {
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

	ch, status, cancel := h.openStream(narrow, sid, "")
	if status != 200 {
		t.Fatalf("narrowed resume: %d", status)
	}
	got := nextEvents(t, ch, 4)
	want := []struct {
		redacted bool
		contains string
	}{{true, ""}, {true, ""}, {false, `"uri":"care://ray/weight_bearing"`}, {false, `"uri":"care://ray/weight_bearing"`}}
	for i, ev := range got {
		if ev.id != fmt.Sprintf("_%d", i) {
			t.Errorf("event %d has id %q, want _%d", i, ev.id, i)
		}
		if bytes.Contains(ev.data, []byte("care-internal")) {
			t.Errorf("narrowed replay event %s carries an internal URI: %s", ev.id, ev.data)
		}
		if want[i].redacted != bytes.Equal(ev.data, RedactedFrame) {
			t.Errorf("event %s = %s, redacted want %v", ev.id, ev.data, want[i].redacted)
		}
		if want[i].contains != "" && !bytes.Contains(ev.data, []byte(want[i].contains)) {
			t.Errorf("event %s = %s, want it to contain %s", ev.id, ev.data, want[i].contains)
		}
	}
	// Live after the narrowed resume: the internal revision is withheld,
	// the speakable one arrives as the next event id.
	h.publish("risk", models.AudienceAssistant, "Fall risk HIGH; walking aid at all times.")
	h.publish("weight_bearing", models.AudienceUser, "Full weight-bearing; no frame needed.")
	live := nextEvents(t, ch, 2)
	for _, ev := range live {
		if bytes.Contains(ev.data, []byte("care-internal")) || bytes.Equal(ev.data, RedactedFrame) {
			t.Errorf("live event after narrowed resume: %s %s", ev.id, ev.data)
		}
	}
	if live[0].id != "_4" {
		t.Errorf("first live event id %q, want _4", live[0].id)
	}
	cancel()

	// Control: the wide resume replays the internal frames as stored.
	ch2, c2 := h.resume(wide, sid, "_3")
	evs := nextEvents(t, ch2, 2)
	if evs[0].id != "_4" || !bytes.Contains(evs[0].data, []byte("care://ray/weight_bearing")) {
		t.Errorf("wide resume from _3 starts with %s %s", evs[0].id, evs[0].data)
	}
	c2()
	ch3, c3 := h.resume(wide, sid, "")
	defer c3()
	all := nextEvents(t, ch3, 2)
	if !bytes.Contains(all[0].data, []byte(`"uri":"care-internal://ray/risk"`)) || !bytes.Contains(all[1].data, []byte(`"uri":"care-internal://ray/risk"`)) {
		t.Errorf("wide resume did not replay the internal frames: %s / %s", all[0].data, all[1].data)
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
