package skill

import (
	"fmt"
	"testing"
	"time"

	"github.com/unsay/unsay/models"
)

func TestSessionStore_ExpiresAfterTTLAndIsBoundToPatient(t *testing.T) {
	s := newSessionStore(time.Minute, 10)
	s.put("s1", sessionState{patient: "ray", last: say("hello")}, t0)
	if got := s.get("s1", "ray", t0.Add(59*time.Second)); len(got.last) != 1 {
		t.Fatalf("state lost before its TTL: %+v", got)
	}
	if got := s.get("s1", "ray", t0.Add(time.Minute)); len(got.last) != 0 {
		t.Errorf("state outlived its TTL: %+v", got)
	}
	if got := s.get("s1", "other", t0); len(got.last) != 0 {
		t.Errorf("state served to another patient: %+v", got)
	}
	if got := s.get("", "ray", t0); len(got.last) != 0 {
		t.Errorf("state for an empty session id: %+v", got)
	}
}

func TestSessionStore_StaysBoundedDroppingTheSoonestToExpire(t *testing.T) {
	s := newSessionStore(time.Minute, 3)
	for i := 0; i < 3; i++ {
		s.put(fmt.Sprint("s", i), sessionState{patient: "ray", last: say("x")}, t0.Add(time.Duration(i)*time.Second))
	}
	s.put("s3", sessionState{patient: "ray", last: say("x")}, t0.Add(3*time.Second))
	if n := s.len(); n != 3 {
		t.Fatalf("%d entries, want 3", n)
	}
	if got := s.get("s0", "ray", t0.Add(4*time.Second)); len(got.last) != 0 {
		t.Error("the oldest entry was kept over the bound")
	}
	if got := s.get("s3", "ray", t0.Add(4*time.Second)); len(got.last) != 1 {
		t.Error("the newest entry was dropped")
	}
	// Updating an existing entry never evicts another.
	s.put("s1", sessionState{patient: "ray", last: say("y")}, t0.Add(5*time.Second))
	if s.len() != 3 || len(s.get("s2", "ray", t0.Add(5*time.Second)).last) != 1 {
		t.Error("updating an entry evicted another")
	}
}

func TestParseCertOverrides(t *testing.T) {
	got, err := ParseCertOverrides([]string{testCertURL + "=/tmp/chain.pem", "https://s3.amazonaws.com/echo.api/b.pem = certs/b.pem"})
	if err != nil || got[testCertURL] != "/tmp/chain.pem" || got["https://s3.amazonaws.com/echo.api/b.pem"] != "certs/b.pem" {
		t.Fatalf("got %v, %v", got, err)
	}
	for _, bad := range []string{"", "=x", testCertURL + "=", testCertURL} {
		if _, err := ParseCertOverrides([]string{bad}); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestSessionOpen_TrueOnlyForALiveScreenSessionOfThePatient(t *testing.T) {
	r := newRig(t, nil)
	if r.skill.SessionOpen("ray") {
		t.Fatal("open before any turn")
	}
	r.turn(reqOpts{Session: "voice"}) // voice-only launch: microphone open, no tick
	if r.skill.SessionOpen("ray") {
		t.Error("a voice-only session counted as open")
	}
	r.turn(reqOpts{APL: true, Session: "screen"})
	if !r.skill.SessionOpen("ray") {
		t.Fatal("a screen session just launched is not open")
	}
	if r.skill.SessionOpen("someone-else") {
		t.Error("another patient's session counted")
	}
	r.setNow(t0.Add(SessionOpenWindow + time.Second))
	if r.skill.SessionOpen("ray") {
		t.Error("a session silent for longer than the window is still open")
	}
	r.turn(reqOpts{Type: TypeAPLUserEvent, Arguments: []any{"tick"}, APL: true, Session: "screen", Timestamp: t0.Add(SessionOpenWindow + time.Second)})
	if !r.skill.SessionOpen("ray") {
		t.Error("a tick did not keep the session open")
	}
	r.turn(reqOpts{Type: TypeIntent, Intent: IntentStop, APL: true, Session: "screen", Timestamp: t0.Add(SessionOpenWindow + time.Second)})
	if r.skill.SessionOpen("ray") {
		t.Error("a session ended with Stop is still open")
	}
	r.turn(reqOpts{Type: TypeAPLUserEvent, Arguments: []any{"tick"}, APL: true, Session: "s2", Timestamp: t0.Add(SessionOpenWindow + time.Second)})
	r.turn(reqOpts{Type: TypeSessionEnded, APL: true, Session: "s2", Timestamp: t0.Add(SessionOpenWindow + time.Second)})
	if r.skill.SessionOpen("ray") {
		t.Error("a session ended by SessionEndedRequest is still open")
	}
}

// BenchmarkSessionStore_PutWhenFull is the cost of a new session's turn
// when the store holds SessionStateMax sessions (every Launch of a busy
// skill): a constant-time eviction, not a scan of every session.
func BenchmarkSessionStore_PutWhenFull(b *testing.B) {
	s := newSessionStore(SessionStateTTL, SessionStateMax)
	for i := range SessionStateMax {
		s.put(fmt.Sprint("warm-", i), sessionState{patient: "ray"}, t0)
	}
	b.ResetTimer()
	for i := range b.N {
		id := fmt.Sprint("s-", i)
		s.put(id, sessionState{patient: "ray"}, t0)
		s.touch(id, liveSession{patient: "ray", lastSeen: t0})
	}
}

// The record of the responses written on a session (for Alexa's error
// report, notPlayed): the last two, kept past the session's end (delete),
// expiring after the TTL, bounded; another patient's record starts anew;
// a failed write clears the marks of the last response only.
func TestSessionStore_RecordsTheLastTwoResponsesOfASessionBoundedAndExpiring(t *testing.T) {
	s := newSessionStore(time.Minute, 2)
	one := sentResponse{id: "r1", marks: []models.Marked{{Version: 1, Response: "r1"}}}
	two := sentResponse{id: "r2", marks: []models.Marked{{Version: 2, Response: "r2"}}}
	three := sentResponse{id: "r3"}
	s.recordSent("s1", "ray", one, t0)
	s.recordSent("s1", "ray", two, t0.Add(time.Second))
	s.delete("s1") // the session ended: the record stays for its report
	rec, ok := s.sentOf("s1", t0.Add(2*time.Second))
	if !ok || rec.patient != "ray" || rec.last.id != "r2" || rec.prev.id != "r1" || len(rec.last.marks) != 1 {
		t.Fatalf("record %+v, %v: want r2 last, r1 before it", rec, ok)
	}
	s.recordSent("s1", "ray", three, t0.Add(2*time.Second))
	if rec, _ := s.sentOf("s1", t0.Add(2*time.Second)); rec.last.id != "r3" || rec.prev.id != "r2" {
		t.Errorf("after a third response: %+v, want r3 last, r2 before it", rec)
	}
	s.unmarkSent("s1", "r2") // not the last: nothing changes
	s.unmarkSent("s1", "r3")
	if rec, _ := s.sentOf("s1", t0.Add(2*time.Second)); len(rec.prev.marks) != 1 || rec.last.marks != nil {
		t.Errorf("unmark: %+v", rec)
	}
	if _, ok := s.sentOf("s1", t0.Add(62*time.Second)); ok {
		t.Error("the record outlived its TTL")
	}
	s.recordSent("s1", "bob", one, t0.Add(3*time.Second))
	if rec, _ := s.sentOf("s1", t0.Add(3*time.Second)); rec.patient != "bob" || rec.prev.id != "" {
		t.Errorf("another patient's record kept the first's responses: %+v", rec)
	}
	s.recordSent("s2", "ray", one, t0.Add(4*time.Second))
	s.recordSent("s3", "ray", one, t0.Add(5*time.Second))
	if _, ok := s.sentOf("s1", t0.Add(5*time.Second)); ok {
		t.Error("the oldest record was kept over the bound")
	}
	if _, ok := s.sentOf("", t0); ok {
		t.Error("a record for an empty session id")
	}
}
