package skill

import (
	"bytes"
	"context"
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/unsay/unsay/models"
)

// sessionEnded is a signed SessionEndedRequest of session with reason, an
// error type when reason is ERROR, and attrs as the session's attributes.
func sessionEnded(t *testing.T, session, reason string, attrs map[string]any) []byte {
	t.Helper()
	return sessionEndedWith(t, session, reason, "DEVICE_COMMUNICATION_ERROR", attrs)
}

// sessionEndedWith is sessionEnded with errType as the ERROR's type.
func sessionEndedWith(t *testing.T, session, reason, errType string, attrs map[string]any) []byte {
	t.Helper()
	var env map[string]any
	if err := json.Unmarshal(envelope(reqOpts{Type: TypeSessionEnded, Session: session}), &env); err != nil {
		t.Fatal(err)
	}
	req := env["request"].(map[string]any)
	req["reason"] = reason
	if reason == ReasonError {
		req["error"] = map[string]any{"type": errType, "message": "the device did not play it"}
	}
	env["session"].(map[string]any)["attributes"] = attrs
	b, err := json.Marshal(env)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// attributesOf is a response's session attributes as Alexa sends them
// back (JSON round trip).
func attributesOf(t *testing.T, out ResponseEnvelope) map[string]any {
	t.Helper()
	b, _ := json.Marshal(out.SessionAttributes)
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// P-24: Alexa's error report re-opens what the session's last response
// marked — kept in its session attributes — so the retraction is owed
// again and said saying so. Twins: a session that ends for any other
// reason re-opens nothing.
func TestNotPlayed_AnErrorReportMakesTheRetractionOwedAgain(t *testing.T) {
	wbURI := models.NewURI(models.AudienceUser, "ray", "weight_bearing")
	for _, reason := range []string{ReasonError, "USER_INITIATED", "EXCEEDED_MAX_REPROMPTS"} {
		t.Run(reason, func(t *testing.T) {
			r := newRig(t, nil)
			if err := r.care.MarkHeard(context.Background(), "ray", wbURI, 2, models.Hearing{}); err != nil {
				t.Fatal(err)
			}
			r.care.setPending("ray", retractionWB())
			r.care.facts["ray"][0] = retractionWB().Current // confirmed current
			out, _ := r.turn(reqOpts{Session: "sE"})
			if !strings.HasPrefix(plain(out), "Stop — your walking instruction has changed.") {
				t.Fatalf("launch: %q", plain(out))
			}
			attrs := attributesOf(t, out)
			if code, b := r.post(sessionEnded(t, "sE", reason, attrs), testCertURL, ""); code != 200 {
				t.Fatalf("session ended: %d %s", code, b)
			}
			calls := r.care.notPlayedCalls()
			if reason != ReasonError {
				if len(calls) != 0 {
					t.Fatalf("%s re-opened %v", reason, calls)
				}
				return
			}
			id, _ := attrs[AttrResponse].(string)
			want := []models.Marked{
				{URI: wbURI, HeardBefore: 2, From: 2, Version: 3, Response: id},                                                      // the retraction
				{URI: models.NewURI(models.AudienceUser, "ray", "anticoagulant"), HeardBefore: 0, From: 0, Version: 1, Response: id}, // the stale blood thinner, told
			}
			if len(calls) != 1 || !slices.Equal(calls[0], want) {
				t.Fatalf("re-opened %v, want %v (attributes %v)", calls, want, attrs)
			}
			again, _ := r.turn(reqOpts{Session: "sF"})
			if s := plain(again); !strings.HasPrefix(s, "Stop — as I may not have told you properly: your walking instruction has changed. I told you: “"+wbV2Text+"”") {
				t.Errorf("after the error report: %q", s)
			}
		})
	}
}

// linesWith returns the log lines of logs that contain s.
func linesWith(logs, s string) []string {
	var out []string
	for _, l := range strings.Split(logs, "\n") {
		if strings.Contains(l, s) {
			out = append(out, l)
		}
	}
	return out
}

// T14: each error report was logged twice — by the skill with the marks it
// handed over, by the speech principal with the facts re-opened — and
// "owed again" even when nothing became owed. Now the skill logs it once,
// with the patient, the session and how many facts were re-opened; a
// repeated report, which re-opens nothing, says that nothing became owed
// again (INFO) and not "owed again".
func TestNotPlayed_AnErrorReportIsLoggedOnceWithThePatientAndWhatBecameOwed(t *testing.T) {
	wbURI := models.NewURI(models.AudienceUser, "ray", "weight_bearing")
	r := newRig(t, nil)
	if err := r.care.MarkHeard(context.Background(), "ray", wbURI, 2, models.Hearing{}); err != nil {
		t.Fatal(err)
	}
	r.care.setPending("ray", retractionWB())
	r.care.facts["ray"][0] = retractionWB().Current
	out, _ := r.turn(reqOpts{Session: "sL"})
	attrs := attributesOf(t, out)
	if code, b := r.post(sessionEnded(t, "sL", ReasonError, attrs), testCertURL, ""); code != 200 {
		t.Fatalf("session ended: %d %s", code, b)
	}
	owed := linesWith(r.logs.String(), "alexa did not play a response")
	if len(owed) != 1 || !strings.Contains(owed[0], "level=WARN") || !strings.Contains(owed[0], "patient=ray") ||
		!strings.Contains(owed[0], "session=sL") || !strings.Contains(owed[0], "facts=2") {
		t.Fatalf("the report's lines = %q, want one WARN with patient=ray, session=sL and facts=2\n%s", owed, r.logs.String())
	}

	// Twin: the same report again re-opens nothing, and says so, once.
	if code, b := r.post(sessionEnded(t, "sL", ReasonError, attrs), testCertURL, ""); code != 200 {
		t.Fatalf("repeated report: %d %s", code, b)
	}
	if owed := linesWith(r.logs.String(), "alexa did not play a response"); len(owed) != 1 {
		t.Fatalf("a report that re-opened nothing was logged as owed again: %q", owed)
	}
	nothing := linesWith(r.logs.String(), "nothing became owed again")
	if len(nothing) != 1 || !strings.Contains(nothing[0], "level=INFO") || !strings.Contains(nothing[0], "patient=ray") {
		t.Fatalf("the repeated report's lines = %q, want one INFO line with patient=ray", nothing)
	}
}

// T14: the response to an error report that was written after Alexa's
// deadline (a slow ledger) was logged with patient="" and "left offered"
// though it offered nothing. Now it names the patient the report was for
// and says it carried nothing to mark heard. Twin: the same report
// answered in time logs no such line.
func TestNotPlayed_ALateAnswerToAnErrorReportIsLoggedWithItsPatient(t *testing.T) {
	for _, late := range []bool{true, false} {
		t.Run(map[bool]string{true: "late", false: "in time"}[late], func(t *testing.T) {
			r := newRig(t, nil)
			r.care.setPending("ray", retractionWB())
			r.care.facts["ray"][0] = retractionWB().Current
			out, _ := r.turn(reqOpts{Session: "sT"})
			if late {
				r.care.onNotPlayed = func() { r.setNow(t0.Add(AlexaResponseDeadline + time.Second)) }
			}
			if code, b := r.post(sessionEnded(t, "sT", ReasonError, attributesOf(t, out)), testCertURL, ""); code != 200 {
				t.Fatalf("session ended: %d %s", code, b)
			}
			lines := linesWith(r.logs.String(), "after Alexa's deadline")
			if !late {
				if len(lines) != 0 {
					t.Fatalf("a timely answer was logged late: %q", lines)
				}
				return
			}
			if len(lines) != 1 || !strings.Contains(lines[0], "patient=ray") || strings.Contains(lines[0], `patient=""`) ||
				!strings.Contains(lines[0], "carried nothing to mark heard") || strings.Contains(lines[0], "left offered") {
				t.Fatalf("the late answer's lines = %q, want one naming patient=ray and that it carried nothing to mark", lines)
			}
		})
	}
}

// Session attributes are the client's in development mode: every entry is
// checked, and a malformed one is ignored (logged); a valid one beside it
// still counts.
func TestNotPlayed_MalformedSessionAttributesAreIgnored(t *testing.T) {
	valid := map[string]any{"uri": "care://ray/weight_bearing", "heard": 2, "from": 2, "version": 3}
	for name, entry := range map[string]any{
		"another patient":       map[string]any{"uri": "care://bob/weight_bearing", "heard": 0, "from": 0, "version": 1},
		"assistant-only":        map[string]any{"uri": "care-internal://ray/risk", "heard": 0, "from": 0, "version": 1},
		"versioned":             map[string]any{"uri": "care://ray/weight_bearing@3", "heard": 2, "from": 2, "version": 3},
		"not a URI":             map[string]any{"uri": "walking", "heard": 0, "from": 0, "version": 1},
		"version 0":             map[string]any{"uri": "care://ray/weight_bearing", "heard": 0, "from": 0, "version": 0},
		"heard at the version":  map[string]any{"uri": "care://ray/weight_bearing", "heard": 3, "from": 2, "version": 3},
		"from past the version": map[string]any{"uri": "care://ray/weight_bearing", "heard": 0, "from": 4, "version": 3},
		"negative":              map[string]any{"uri": "care://ray/weight_bearing", "heard": -1, "from": 0, "version": 3},
		"a fraction":            map[string]any{"uri": "care://ray/weight_bearing", "heard": 1.5, "from": 0, "version": 3},
		"an unknown field":      map[string]any{"uri": "care://ray/weight_bearing", "heard": 2, "from": 2, "version": 3, "ok": true},
		"a string":              "care://ray/weight_bearing",
	} {
		t.Run(name, func(t *testing.T) {
			r := newRig(t, nil)
			r.post(sessionEnded(t, "sM", ReasonError, map[string]any{AttrMarked: []any{entry}}), testCertURL, "")
			if calls := r.care.notPlayedCalls(); len(calls) != 0 {
				t.Fatalf("re-opened %v", calls)
			}
			if !strings.Contains(r.logs.String(), "malformed session attributes ignored") {
				t.Errorf("not logged: %s", r.logs.String())
			}
			// Twin: beside a valid entry, only the valid one counts (the
			// MAC this service wrote for it).
			r.post(sessionEnded(t, "sN", ReasonError, r.issued(map[string]any{AttrMarked: []any{entry, valid}})), testCertURL, "")
			if calls := r.care.notPlayedCalls(); len(calls) != 1 || len(calls[0]) != 1 || calls[0][0].Version != 3 {
				t.Fatalf("re-opened %v, want the valid entry only", calls)
			}
		})
	}
	r := newRig(t, nil)
	r.post(sessionEnded(t, "sO", ReasonError, map[string]any{AttrMarked: "all of them"}), testCertURL, "")
	if calls := r.care.notPlayedCalls(); len(calls) != 0 {
		t.Fatalf("re-opened %v", calls)
	}
}

// P-24, the double failure: a response that tells a fact plainly at the
// version he heard may confirm that version against an earlier response's
// error report (finding B1), so it carries that telling in its session
// attributes (AttrConfirmed) and its own error report hands it to the care
// source as a Confirmed entry, which undoes the confirmation — S1's
// retraction and S2's telling both not played must not lose the
// retraction. Twin: a telling of a version he had not heard is a mark
// (AttrMarked), not a confirmation.
func TestNotPlayed_ATellingOfTheHeardVersionIsReportedAsAConfirmationToUndo(t *testing.T) {
	wbURI := models.NewURI(models.AudienceUser, "ray", "weight_bearing")
	ask := reqOpts{Type: TypeIntent, Intent: IntentCarePlan, Slots: topicSlot("weight_bearing", "ER_SUCCESS_MATCH"), Session: "sC"}
	for _, tt := range []struct {
		name      string
		heard     int // 0: never
		marked    []models.Marked
		confirmed bool
	}{
		{"told at the version he heard: a confirmation", 2, []models.Marked{{URI: wbURI, Version: 2, Confirmed: true}}, true},
		{"twin: told a version he never heard: a mark", 0, []models.Marked{{URI: wbURI, HeardBefore: 0, From: 0, Version: 2}}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t, nil)
			if tt.heard > 0 {
				if err := r.care.MarkHeard(context.Background(), "ray", wbURI, tt.heard, models.Hearing{}); err != nil {
					t.Fatal(err)
				}
			}
			out, _ := r.turn(ask)
			if !strings.Contains(plain(out), wbV2Text) {
				t.Fatalf("answer: %q", plain(out))
			}
			attrs := attributesOf(t, out)
			if _, ok := attrs[AttrConfirmed]; ok != tt.confirmed {
				t.Errorf("attributes %v: %s present = %v, want %v", attrs, AttrConfirmed, ok, tt.confirmed)
			}
			if code, b := r.post(sessionEnded(t, "sC", ReasonError, attrs), testCertURL, ""); code != 200 {
				t.Fatalf("session ended: %d %s", code, b)
			}
			calls := r.care.notPlayedCalls()
			want := slices.Clone(tt.marked)
			for i := range want {
				want[i].Response, _ = attrs[AttrResponse].(string)
			}
			if len(calls) != 1 || !slices.Equal(calls[0], want) {
				t.Fatalf("error report handed %v, want %v (attributes %v)", calls, want, attrs)
			}
		})
	}
}

// AttrConfirmed entries are checked like AttrMarked ones: a malformed one
// is ignored (logged); a valid one beside it still counts.
func TestNotPlayed_MalformedConfirmedAttributesAreIgnored(t *testing.T) {
	valid := map[string]any{"uri": "care://ray/weight_bearing", "version": 2}
	for name, entry := range map[string]any{
		"another patient": map[string]any{"uri": "care://bob/weight_bearing", "version": 2},
		"assistant-only":  map[string]any{"uri": "care-internal://ray/risk", "version": 1},
		"versioned":       map[string]any{"uri": "care://ray/weight_bearing@2", "version": 2},
		"version 0":       map[string]any{"uri": "care://ray/weight_bearing", "version": 0},
		"a heard field":   map[string]any{"uri": "care://ray/weight_bearing", "heard": 1, "version": 2},
		"a fraction":      map[string]any{"uri": "care://ray/weight_bearing", "version": 1.5},
		"a string":        "care://ray/weight_bearing",
	} {
		t.Run(name, func(t *testing.T) {
			r := newRig(t, nil)
			r.post(sessionEnded(t, "sM", ReasonError, map[string]any{AttrConfirmed: []any{entry}}), testCertURL, "")
			if calls := r.care.notPlayedCalls(); len(calls) != 0 {
				t.Fatalf("handed %v", calls)
			}
			if !strings.Contains(r.logs.String(), "malformed session attributes ignored") {
				t.Errorf("not logged: %s", r.logs.String())
			}
			r.post(sessionEnded(t, "sN", ReasonError, r.issued(map[string]any{AttrConfirmed: []any{entry, valid}})), testCertURL, "")
			if calls := r.care.notPlayedCalls(); len(calls) != 1 || len(calls[0]) != 1 || !calls[0][0].Confirmed || calls[0][0].Version != 2 {
				t.Fatalf("handed %v, want the valid entry only", calls)
			}
		})
	}
}

// P-24, finding F14: each response that marks something carries its own
// id (AttrResponse, fresh per response), and its error report hands that
// id with every mark, so the ledger applies the report once however often
// Alexa delivers it. The reports name a session this instance holds no
// record of (as one served by another instance), so only the attributes
// count — and only as this service wrote them (AttrMAC, finding W2).
// Twins: attributes without their MAC (an older build's) or with another
// id than the one it was made for are not taken, and logged; a malformed
// id is logged as such too.
func TestNotPlayed_EachResponsesReportCarriesItsOwnResponseID(t *testing.T) {
	r := newRig(t, nil)
	wbURI := models.NewURI(models.AudienceUser, "ray", "weight_bearing")
	if err := r.care.MarkHeard(context.Background(), "ray", wbURI, 2, models.Hearing{}); err != nil {
		t.Fatal(err)
	}
	ask := reqOpts{Type: TypeIntent, Intent: IntentCarePlan, Slots: topicSlot("weight_bearing", "ER_SUCCESS_MATCH"), Session: "sI"}
	out1, _ := r.turn(ask)
	out2, _ := r.turn(ask)
	a1, a2 := attributesOf(t, out1), attributesOf(t, out2)
	id1, _ := a1[AttrResponse].(string)
	id2, _ := a2[AttrResponse].(string)
	if len(id1) != 32 || !models.ValidID(id1) || id1 == id2 {
		t.Fatalf("response ids %q and %q: want two different 32-digit ids", id1, id2)
	}
	for _, tt := range []struct {
		name      string
		attrs     map[string]any
		wantID    string // "": nothing handed
		malformed bool
	}{
		{"the response's id is handed with its marks", a1, id1, false},
		{"its repeat hands the same id", a1, id1, false},
		{"twin: another response's report hands its own id", a2, id2, false},
		{"twin: an older build's attributes, without id or MAC, are not taken", map[string]any{AttrConfirmed: a1[AttrConfirmed]}, "", false},
		{"twin: one response's MAC with another's id is not taken", map[string]any{AttrConfirmed: a1[AttrConfirmed], AttrResponse: id2, AttrMAC: a1[AttrMAC]}, "", false},
		{"twin: a malformed id is logged, and not taken", map[string]any{AttrConfirmed: a1[AttrConfirmed], AttrResponse: "Not An Id!", AttrMAC: a1[AttrMAC]}, "", true},
		{"twin: an id that is not a string is logged, and not taken", map[string]any{AttrConfirmed: a1[AttrConfirmed], AttrResponse: 7, AttrMAC: a1[AttrMAC]}, "", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			before := len(r.care.notPlayedCalls())
			r.logs.Reset()
			if code, b := r.post(sessionEnded(t, "sJ", ReasonError, tt.attrs), testCertURL, ""); code != 200 {
				t.Fatalf("session ended: %d %s", code, b)
			}
			calls := r.care.notPlayedCalls()
			if tt.wantID == "" {
				if len(calls) != before {
					t.Fatalf("handed %v, want nothing", calls[before:])
				}
				if !strings.Contains(r.logs.String(), "session attributes this service did not write ignored") {
					t.Errorf("not logged: %s", r.logs.String())
				}
			} else if len(calls) != before+1 || len(calls[before]) != 1 || !calls[before][0].Confirmed || calls[before][0].Response != tt.wantID {
				t.Fatalf("handed %v, want one confirmation with response id %q", calls[before:], tt.wantID)
			}
			if got := strings.Contains(r.logs.String(), "malformed session attributes ignored"); got != tt.malformed {
				t.Errorf("malformed logged %v, want %v: %s", got, tt.malformed, r.logs.String())
			}
		})
	}
}

// issued is attrs as this service would have written them: with the MAC
// (AttrMAC) of the marks they name, under their AttrResponse id.
func (r *rig) issued(attrs map[string]any) map[string]any {
	ms, _, _ := echoedMarks(attrs, "ray")
	id, _ := attrs[AttrResponse].(string)
	out := maps.Clone(attrs)
	out[AttrMAC] = attributesMAC(r.skill.attrKey, id, ms)
	return out
}

// marksOf is what a response's session attributes name, as the error
// report hands them to the care source: AttrMarked's entries, then
// AttrConfirmed's, each with the response's id.
func marksOf(t *testing.T, attrs map[string]any) []models.Marked {
	t.Helper()
	ms, _, bad := echoedMarks(attrs, "ray")
	if bad > 0 {
		t.Fatalf("attributes %v: %d malformed", attrs, bad)
	}
	return ms
}

// P-24, finding T1: for ENDPOINT_TIMEOUT (Alexa never got the response) or
// INVALID_RESPONSE (Alexa refused it) Alexa's error report can only echo
// the session attributes it held — none in a new session, the previous
// response's in a longer one — so the skill re-opens what the last
// response it wrote on the session marked, from its own record, first,
// and then what the echoed attributes name. Twins: a session whose last
// response marked nothing re-opens nothing beyond the echoed attributes
// (nothing at all without them).
func TestNotPlayed_AReportCarryingAnEarlierResponsesAttributesOrNoneReopensTheLastResponsesMarks(t *testing.T) {
	wbURI := models.NewURI(models.AudienceUser, "ray", "weight_bearing")
	ask := func(session string) reqOpts {
		return reqOpts{Type: TypeIntent, Intent: IntentCarePlan, Slots: topicSlot("weight_bearing", "ER_SUCCESS_MATCH"), Session: session}
	}
	// setup runs the session's turns and returns the report's attributes
	// and the marks the care source must be handed, in order.
	for _, tt := range []struct {
		name    string
		errType string
		setup   func(t *testing.T, r *rig) (attrs map[string]any, want []models.Marked)
		again   bool // the next turn says the retraction again
	}{
		{"a new session's retraction, reported with no attributes (ENDPOINT_TIMEOUT)", "ENDPOINT_TIMEOUT", func(t *testing.T, r *rig) (map[string]any, []models.Marked) {
			r.care.setPending("ray", retractionWB())
			r.care.facts["ray"][0] = retractionWB().Current
			out, _ := r.turn(reqOpts{Session: "sT"})
			if !strings.HasPrefix(plain(out), "Stop — your walking instruction has changed.") {
				t.Fatalf("launch: %q", plain(out))
			}
			return nil, marksOf(t, attributesOf(t, out))
		}, true},
		{"a retraction after a telling, reported with the telling's attributes (INVALID_RESPONSE)", "INVALID_RESPONSE", func(t *testing.T, r *rig) (map[string]any, []models.Marked) {
			told, _ := r.turn(ask("sT"))
			a1 := attributesOf(t, told)
			if a1[AttrConfirmed] == nil {
				t.Fatalf("the telling confirms nothing: %v", a1)
			}
			r.care.setPending("ray", retractionWB())
			r.care.facts["ray"][0] = retractionWB().Current
			out, _ := r.turn(reqOpts{Session: "sT"})
			if !strings.HasPrefix(plain(out), "Stop — your walking instruction has changed.") {
				t.Fatalf("launch: %q", plain(out))
			}
			return a1, append(marksOf(t, attributesOf(t, out)), marksOf(t, a1)...)
		}, true},
		{"twin: the last response marked nothing, reported with no attributes", "ENDPOINT_TIMEOUT", func(t *testing.T, r *rig) (map[string]any, []models.Marked) {
			r.care.setPending("ray", retractionWB())
			r.care.facts["ray"][0] = retractionWB().Current
			first, _ := r.turn(reqOpts{Session: "sT"})
			if attributesOf(t, first)[AttrMarked] == nil {
				t.Fatalf("the retraction marks nothing")
			}
			help, _ := r.turn(reqOpts{Type: TypeIntent, Intent: IntentHelp, Session: "sT"})
			if help.SessionAttributes != nil {
				t.Fatalf("help marks %v", help.SessionAttributes)
			}
			return nil, nil
		}, false},
		{"twin: the last response marked nothing, reported with the retraction's attributes", "INVALID_RESPONSE", func(t *testing.T, r *rig) (map[string]any, []models.Marked) {
			r.care.setPending("ray", retractionWB())
			r.care.facts["ray"][0] = retractionWB().Current
			first, _ := r.turn(reqOpts{Session: "sT"})
			help, _ := r.turn(reqOpts{Type: TypeIntent, Intent: IntentHelp, Session: "sT"})
			if help.SessionAttributes != nil {
				t.Fatalf("help marks %v", help.SessionAttributes)
			}
			a1 := attributesOf(t, first)
			return a1, marksOf(t, a1)
		}, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t, nil)
			if err := r.care.MarkHeard(context.Background(), "ray", wbURI, 2, models.Hearing{}); err != nil {
				t.Fatal(err)
			}
			attrs, want := tt.setup(t, r)
			if code, b := r.post(sessionEndedWith(t, "sT", ReasonError, tt.errType, attrs), testCertURL, ""); code != 200 {
				t.Fatalf("session ended: %d %s", code, b)
			}
			calls := r.care.notPlayedCalls()
			switch {
			case want == nil && len(calls) != 0:
				t.Fatalf("re-opened %v, want nothing", calls)
			case want != nil && (len(calls) != 1 || !slices.Equal(calls[0], want)):
				t.Fatalf("re-opened %v, want %v", calls, want)
			}
			next, _ := r.turn(reqOpts{Session: "sU"})
			again := strings.HasPrefix(plain(next), "Stop — as I may not have told you properly: your walking instruction has changed. I told you: “"+wbV2Text+"”")
			if again != tt.again {
				t.Errorf("next turn %q: retraction said again = %v, want %v", plain(next), again, tt.again)
			}
		})
	}
}

// Finding T3 (defense in depth): echoed session attributes that disagree
// with the server's record of the same response — a forged "heard" —
// are not trusted: the record's marks are handed on, and the disagreement
// is logged. In a session this instance holds no record of (another
// instance's), forged attributes are not taken either (their MAC does not
// match, finding W2: he would be told "I told you: <words he was never
// told>"), logged; the twin, the genuine attributes there, are handed on
// as given.
func TestNotPlayed_AttributesThatDisagreeWithTheRecordOfTheSameResponseAreOverruledByIt(t *testing.T) {
	wbURI := models.NewURI(models.AudienceUser, "ray", "weight_bearing")
	for _, tt := range []struct {
		name, reportSession string
		forge               bool
		handed              string // "record", "attributes" or "nothing"
	}{
		{"the served session, forged: the record wins", "sF", true, "record"},
		{"an unknown session, forged: nothing is taken", "sOther", true, "nothing"},
		{"twin: an unknown session, genuine: the attributes as given", "sOther", false, "attributes"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t, nil)
			if err := r.care.MarkHeard(context.Background(), "ray", wbURI, 2, models.Hearing{}); err != nil {
				t.Fatal(err)
			}
			r.care.setPending("ray", retractionWB())
			r.care.facts["ray"][0] = retractionWB().Current
			out, _ := r.turn(reqOpts{Session: "sF"})
			attrs := attributesOf(t, out)
			recorded := marksOf(t, attrs)
			sent := attributesOf(t, out)
			if tt.forge {
				list := sent[AttrMarked].([]any)
				list[0].(map[string]any)["heard"] = 1 // "he heard v1": he never did
				list[0].(map[string]any)["from"] = 1
			}
			var want []models.Marked
			switch tt.handed {
			case "record":
				want = recorded
			case "attributes":
				want = marksOf(t, sent)
			}
			if code, b := r.post(sessionEnded(t, tt.reportSession, ReasonError, sent), testCertURL, ""); code != 200 {
				t.Fatalf("session ended: %d %s", code, b)
			}
			calls := r.care.notPlayedCalls()
			if want == nil {
				if len(calls) != 0 {
					t.Fatalf("handed %v, want nothing", calls)
				}
			} else if len(calls) != 1 || !slices.Equal(calls[0], want) {
				t.Fatalf("handed %v, want %v", calls, want)
			}
			if got := strings.Contains(r.logs.String(), "disagree with what the response marked"); got != (tt.handed == "record") {
				t.Errorf("disagreement logged %v: %s", got, r.logs.String())
			}
			if got := strings.Contains(r.logs.String(), "did not write ignored"); got != (tt.handed == "nothing") {
				t.Errorf("not-ours logged %v: %s", got, r.logs.String())
			}
		})
	}
}

// P-24, finding T1: Alexa's clock may run out before ours, so its report
// of a session's first response (no attributes) can arrive while that
// response is still being written: the report waits for the patient's
// turn lock, which the response holds until it has marked what it carried,
// and reads the session's record then — the retraction is re-opened, not
// missed. Twin: the same report after the turn, for a session that had no
// turn here, re-opens nothing.
func TestNotPlayed_AReportThatOvertakesTheResponsesWriteStillReopensIt(t *testing.T) {
	wbURI := models.NewURI(models.AudienceUser, "ray", "weight_bearing")
	for _, overtakes := range []bool{true, false} {
		t.Run(map[bool]string{true: "the report arrives during the write", false: "twin: a report for a session with no turn here"}[overtakes], func(t *testing.T) {
			r := newRig(t, func(c *Config) { c.TestPause = TestPause{At: TestPauseBeforeWrite, For: 400 * time.Millisecond} })
			if err := r.care.MarkHeard(context.Background(), "ray", wbURI, 2, models.Hearing{}); err != nil {
				t.Fatal(err)
			}
			r.care.setPending("ray", retractionWB())
			r.care.facts["ray"][0] = retractionWB().Current
			offered := make(chan struct{})
			var once sync.Once
			r.care.onOffered = func() { once.Do(func() { close(offered) }) } // then held before its write
			done := make(chan ResponseEnvelope)
			go func() {
				var out ResponseEnvelope
				_, b := r.post(envelope(reqOpts{Session: "sR"}), testCertURL, "")
				_ = json.Unmarshal(b, &out)
				done <- out
			}()
			<-offered
			session := "sR"
			if !overtakes {
				session = "sNone"
			}
			r.post(sessionEndedWith(t, session, ReasonError, "ENDPOINT_TIMEOUT", nil), testCertURL, "")
			out := <-done
			calls := r.care.notPlayedCalls()
			if !overtakes {
				if len(calls) != 0 {
					t.Fatalf("re-opened %v, want nothing", calls)
				}
				return
			}
			if want := marksOf(t, attributesOf(t, out)); len(want) == 0 || len(calls) != 1 || !slices.Equal(calls[0], want) {
				t.Fatalf("re-opened %v, want what the response marked: %v", calls, want)
			}
		})
	}
}

// Finding W2: the MAC is keyed from the secret every instance is given
// (Config.AttributesSecret, the audit key in the program), so one
// instance's attributes are honoured by another given the same secret —
// and not by one given another, nor after any mark is changed. Without a
// secret each process has its own random key.
func TestAttributesMAC_HonouredUnderTheSameSecretOnly(t *testing.T) {
	wb := models.NewURI(models.AudienceUser, "ray", "weight_bearing")
	ms := []models.Marked{{URI: wb, HeardBefore: 2, From: 2, Version: 3}, {URI: wb, Version: 2, Confirmed: true}}
	key := func(secret string) []byte {
		k, err := attributesKey([]byte(secret))
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	a, b, other := key("shared"), key("shared"), key("another")
	attrs := markedAttributes(a, ms, "0123456789abcdef0123456789abcdef")
	raw, _ := json.Marshal(attrs) // as Alexa echoes them: JSON
	var echoed map[string]any
	if err := json.Unmarshal(raw, &echoed); err != nil {
		t.Fatal(err)
	}
	got, _, bad := echoedMarks(echoed, "ray")
	if bad != 0 {
		t.Fatalf("%d malformed", bad)
	}
	if !attributesIssued(b, echoed, got) {
		t.Error("another instance with the same secret refused them")
	}
	if attributesIssued(other, echoed, got) {
		t.Error("an instance with another secret honoured them")
	}
	changed := slices.Clone(got)
	changed[0].HeardBefore = 1
	if attributesIssued(b, echoed, changed) {
		t.Error("a changed heard version still matched")
	}
	r1, r2 := key(""), key("")
	if bytes.Equal(r1, r2) || len(r1) != 32 {
		t.Errorf("no secret: keys %x and %x, want two random 32-byte keys", r1, r2)
	}
}
