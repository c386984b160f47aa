package skill

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/unsay/unsay/apl"
	"github.com/unsay/unsay/models"
)

// failingWriter is a connection to Alexa that breaks when written to.
type failingWriter struct {
	h http.Header
}

func (w *failingWriter) Header() http.Header       { return w.h }
func (w *failingWriter) Write([]byte) (int, error) { return 0, errors.New("connection reset by peer") }
func (w *failingWriter) WriteHeader(int)           {}

// serveTo runs one signed request straight through the handler into w.
func (r *rig) serveTo(w http.ResponseWriter, o reqOpts) {
	r.t.Helper()
	body := envelope(o)
	req := httptest.NewRequest(http.MethodPost, "/alexa", bytes.NewReader(body))
	req.Header.Set(HeaderSignature256, r.pki.sign(body))
	req.Header.Set(HeaderCertChainURL, testCertURL)
	r.skill.ServeHTTP(w, req)
}

// P-24, heard means delivered: a response that could not be written marks
// nothing; what it carried stays owed and the next turn speaks it again,
// saying it may not have been told properly.
func TestDelivery_AFailedWriteMarksNothingAndTheNextTurnSpeaksItAgain(t *testing.T) {
	r := newRig(t, nil)
	r.care.setPending("ray", retractionWB())
	r.serveTo(&failingWriter{h: http.Header{}}, reqOpts{})
	if calls := r.care.heardCalls(); len(calls) != 0 {
		t.Fatalf("an undelivered response marked %v heard", calls)
	}
	out, _ := r.turn(reqOpts{Session: "s2"})
	if s := plain(out); !strings.HasPrefix(s, "Stop — as I may not have told you properly: your walking instruction has changed. I told you: “Partial") {
		t.Fatalf("next turn = %q, want the retraction again, saying so", s)
	}
	if heardSet(r.care.heardCalls())["care://ray/weight_bearing"] != 3 {
		t.Errorf("delivered now, not marked heard: %v", r.care.heardCalls())
	}
	// Twin: once delivered, it is not said again.
	if again, _ := r.turn(reqOpts{Session: "s3"}); strings.Contains(plain(again), "Stop —") {
		t.Errorf("repeated after delivery: %q", plain(again))
	}
}

// P-24: when the heard ledger cannot record what a response offers, the
// response is not sent — lost after the write, it would leave the ledger
// saying he never heard it, and a later revision would withdraw other
// words. The apology goes instead, marking nothing, and the retraction is
// spoken on the next turn, once the ledger records it. The twin is that
// next turn.
func TestDelivery_AnOfferTheLedgerCannotRecordIsNotSpoken(t *testing.T) {
	r := newRig(t, nil)
	r.care.setPending("ray", retractionWB())
	r.care.mu.Lock()
	r.care.failOffered = errors.New("heard ledger: begin: context deadline exceeded")
	r.care.mu.Unlock()
	out, _ := r.turn(reqOpts{})
	if s := plain(out); strings.Contains(s, "Stop") || strings.Contains(s, "Partial") || !strings.Contains(s, "can't reach your care notes") {
		t.Fatalf("with the ledger failing the turn said %q, want the apology and nothing of the retraction", s)
	}
	if calls := r.care.heardCalls(); len(calls) != 0 {
		t.Fatalf("a response not sent marked %v heard", calls)
	}
	r.care.mu.Lock()
	r.care.failOffered = nil
	r.care.mu.Unlock()
	out, _ = r.turn(reqOpts{Session: "s2"})
	if s := plain(out); !strings.HasPrefix(s, "Stop — your walking instruction has changed. I told you: “Partial") {
		t.Fatalf("next turn = %q, want the retraction", s)
	}
	if heardSet(r.care.heardCalls())["care://ray/weight_bearing"] != 3 {
		t.Errorf("delivered now, not marked heard: %v", r.care.heardCalls())
	}
}

func TestDelivery_ADeliveredResponseMarksWhatItSpoke(t *testing.T) {
	r := newRig(t, nil)
	r.care.setPending("ray", retractionWB())
	w := httptest.NewRecorder()
	r.serveTo(w, reqOpts{})
	if w.Code != http.StatusOK || w.Header().Get("Content-Length") == "" {
		t.Fatalf("status %d, Content-Length %q", w.Code, w.Header().Get("Content-Length"))
	}
	if heardSet(r.care.heardCalls())["care://ray/weight_bearing"] != 3 {
		t.Errorf("delivered retraction not marked: %v", r.care.heardCalls())
	}
}

// P-24: when the care notes cannot be confirmed current, no instruction is
// spoken as current, what Ray heard that is known to be withdrawn is said
// to have changed, and nothing is marked; a tick stays silent.
func TestUnconfirmed_SaysItCannotReachTheNotesAndSpeaksNothingAsCurrent(t *testing.T) {
	r := newRig(t, nil)
	r.care.setPending("ray", retractionWB())
	r.care.failFact = errBoom
	for _, o := range []reqOpts{{}, {Type: TypeIntent, Intent: IntentCarePlan, Slots: topicSlot("weight_bearing", "ER_SUCCESS_MATCH")}, {Type: TypeIntent, Intent: IntentRepeat}} {
		out, raw := r.turn(o)
		s := plain(out)
		if !strings.HasPrefix(s, textUnreachable) || !strings.Contains(s, "Your walking instruction has changed since I last told you.") || endState(raw) != "true" {
			t.Errorf("%s %s: %q (end %s)", o.Type, o.Intent, s, endState(raw))
		}
		if strings.Contains(s, wbV2Text) || strings.Contains(s, wbV3Text) || strings.Contains(s, "Stop —") {
			t.Errorf("%s %s: an unconfirmed instruction was spoken: %q", o.Type, o.Intent, s)
		}
	}
	if _, raw := r.turn(reqOpts{Type: TypeAPLUserEvent, Arguments: []any{"tick"}, APL: true}); string(raw) != `{"version":"1.0","response":{}}` {
		t.Errorf("unconfirmed tick: %s", raw)
	}
	if len(r.care.heardCalls()) != 0 {
		t.Errorf("marked heard while unconfirmed: %v", r.care.heardCalls())
	}
	// Twin: confirmed again, the retraction is spoken.
	r.care.failFact = nil
	if out, _ := r.turn(reqOpts{}); !strings.HasPrefix(plain(out), "Stop — your walking instruction has changed.") {
		t.Errorf("confirmed turn: %q", plain(out))
	}
}

// Every class of character XML 1.0 forbids is absent from the SSML, and
// the response is well-formed; what XML allows is kept.
func TestSSML_XMLForbiddenCharactersNeverReachTheSpeech(t *testing.T) {
	forbidden := map[string]string{
		"NUL": "\x00", "U+0001": "\x01", "vertical tab": "\v", "form feed": "\f", "U+001F": "\x1f",
		"U+FFFE": "\uFFFE", "U+FFFF": "\uFFFF", "invalid UTF-8": "\xff\xfe", "a lone surrogate's bytes": "\xed\xa0\x80",
	}
	for name, c := range forbidden {
		t.Run(name, func(t *testing.T) {
			r := newRig(t, nil)
			r.care.facts["ray"][0].Value = "Full" + c + " weight-bearing as tolerated."
			r.care.facts["ray"][0].AuthorLabel = "Sarah" + c + " Okafor"
			out, _ := r.turn(reqOpts{Type: TypeIntent, Intent: IntentCarePlan, Slots: topicSlot("weight_bearing", "ER_SUCCESS_MATCH")})
			s := ssml(out)
			if strings.Contains(s, c) {
				t.Errorf("%q reached the SSML: %q", c, s)
			}
			if err := checkSSML(s); err != nil {
				t.Errorf("ill-formed: %v", err)
			}
			if !strings.Contains(plain(out), "“Full weight-bearing as tolerated.”") {
				t.Errorf("the words around it are lost: %q", plain(out))
			}
		})
	}
	// Twin: tab, line feed, accents and symbols outside the BMP are XML.
	kept := "Walk\tslowly\nwith the frame — café ✓ 🦵"
	if got := EscapeSSML(kept); got != kept {
		t.Errorf("EscapeSSML(%q) = %q", kept, got)
	}
}

func TestCheckSSML_RefusesWhatIsNotWellFormedSSML(t *testing.T) {
	for _, bad := range []string{
		"<speak>unclosed",
		"<speak>a & b</speak>",
		"<speak>\x01</speak>",
		"<speak><b>2</b></speak>",
		"<speak>a</speak><speak>b</speak>",
		"text <speak>a</speak>",
		"",
	} {
		if err := checkSSML(bad); !errors.Is(err, errIllFormed) {
			t.Errorf("checkSSML(%q) = %v, want errIllFormed", bad, err)
		}
	}
	for _, good := range []string{"<speak>Goodbye.</speak>", `<speak>Stop.<break time="500ms"/> a &amp; b</speak>`} {
		if err := checkSSML(good); err != nil {
			t.Errorf("checkSSML(%q) = %v", good, err)
		}
	}
}

// An ill-formed response is never sent and marks nothing: the apology is
// said instead.
func TestDelivery_AnIllFormedResponseIsReplacedAndMarksNothing(t *testing.T) {
	r := newRig(t, nil)
	h := handled{out: emptyResponse(), marks: []mark{{URI: models.NewURI(models.AudienceUser, "ray", "weight_bearing"), Version: 3}}, offered: []models.Offer{{ID: 7, URI: models.NewURI(models.AudienceUser, "ray", "weight_bearing"), Version: 3}}, patient: "ray"}
	h.out.Response.OutputSpeech = ssmlSpeech("<speak>Stop \x01</speak>")
	got := r.skill.deliverable(h)
	if len(got.marks) != 0 || len(got.offered) != 0 || checkResponse(got.out) != nil || !strings.Contains(got.out.Response.OutputSpeech.SSML, "reach your care notes") {
		t.Fatalf("ill-formed response kept: %+v", got)
	}
	// Twin: a well-formed response goes as built.
	h.out.Response.OutputSpeech = ssmlSpeech("<speak>Stop.</speak>")
	if got := r.skill.deliverable(h); len(got.marks) != 1 || len(got.offered) != 1 || got.out.Response.OutputSpeech.SSML != "<speak>Stop.</speak>" {
		t.Fatalf("well-formed response changed: %+v", got)
	}
}

// P-24 with a value at the write limit: it is spoken whole across "more",
// marked heard only when its last part was delivered, and a short critical
// retraction queued behind it is spoken in the first response.
func TestLongValue_AtTheLimitSpokenWholeAcrossMoreWithoutBlockingALaterRetraction(t *testing.T) {
	r := newRig(t, nil)
	var b strings.Builder
	for i := 0; ; i++ {
		s := "Walk & rest <2h> then ice <1h>. " // escaped, longer than one response: cut for "more"
		if b.Len()+len(s) > models.MaxSpeakableValueRunes {
			break
		}
		b.WriteString(s)
	}
	long := strings.TrimSpace(b.String())
	heardLong := ver("exercise", 1, strings.ReplaceAll(long, "2h", "3h"), "Sarah Okafor, physio", 24*time.Hour)
	curLong := ver("exercise", 2, long, "Sarah Okafor, physio", time.Minute)
	longAnn := models.Announcement{ID: 1, Patient: "ray", Heard: &heardLong, Current: curLong}
	heardAnti := ver("anticoagulant", 1, "Rivaroxaban 10 mg once daily.", "Dr Mensah, GP", 9*24*time.Hour)
	curAnti := ver("anticoagulant", 2, "Stop the rivaroxaban today.", "Dr Mensah, GP", 0)
	shortAnn := models.Announcement{ID: 2, Patient: "ray", Heard: &heardAnti, Current: curAnti}
	r.care.setPending("ray", longAnn, shortAnn)
	// The care source confirms the facts at the versions announced.
	r.care.facts["ray"][1], r.care.facts["ray"][2] = curAnti, curLong

	first, raw := r.turn(reqOpts{Session: "sL"})
	s := plain(first)
	if speechLen(ssml(first)) > MaxSSMLChars {
		t.Fatalf("response of %d characters", speechLen(ssml(first)))
	}
	if !strings.HasPrefix(s, "Stop — your blood thinner instruction has changed.") || !strings.Contains(s, "“Stop the rivaroxaban today.”") {
		t.Fatalf("the short retraction is not spoken first: %.200q", s)
	}
	if !strings.Contains(s, "Stop — your exercise instruction has changed.") || !strings.HasSuffix(s, MoreCue) || endState(raw) != "false" {
		t.Fatalf("the long retraction does not start, to be continued: …%q", s[max(0, len(s)-120):])
	}
	heard := heardSet(r.care.heardCalls())
	if heard["care://ray/anticoagulant"] != 2 {
		t.Errorf("the short retraction was not marked heard: %v", heard)
	}
	if _, ok := heard["care://ray/exercise"]; ok {
		t.Fatalf("the long retraction was marked heard before its end was spoken")
	}

	spoken := strings.TrimSuffix(s, MoreCue)
	for i := 0; i < 5; i++ {
		out, _ := r.turn(reqOpts{Type: TypeIntent, Intent: IntentMore, Session: "sL"})
		part := plain(out)
		if speechLen(ssml(out)) > MaxSSMLChars {
			t.Fatalf("part of %d characters", speechLen(ssml(out)))
		}
		if strings.Contains(part, "Stop —") {
			t.Fatalf("more restarted an announcement: %.120q", part)
		}
		spoken += " " + strings.TrimSuffix(part, MoreCue)
		if !strings.HasSuffix(part, MoreCue) {
			break
		}
	}
	if !strings.Contains(strings.Join(strings.Fields(spoken), " "), long) {
		t.Errorf("the parts do not make the whole value")
	}
	if heardSet(r.care.heardCalls())["care://ray/exercise"] != 2 {
		t.Errorf("after its last part, the long retraction is heard: %v", r.care.heardCalls())
	}
}

// Repeat after help, fallback or a question says the question
// too and keeps the session open; after an answer it does not ask.
func TestRepeat_AfterAQuestionRepeatsTheQuestionAndKeepsTheSessionOpen(t *testing.T) {
	for _, o := range []reqOpts{
		{Type: TypeIntent, Intent: IntentHelp},
		{Type: TypeIntent, Intent: IntentFallback},
		{Type: TypeIntent, Intent: IntentCarePlan, Slots: topicSlot("", "ER_SUCCESS_NO_MATCH")},
		{},
	} {
		r := newRig(t, nil)
		o.Session = "sQ"
		first, _ := r.turn(o)
		again, raw := r.turn(reqOpts{Type: TypeIntent, Intent: IntentRepeat, Session: "sQ"})
		if ssml(again) != ssml(first) || endState(raw) != "false" || again.Response.Reprompt == nil {
			t.Errorf("%s %s: repeat = %q (end %s), want %q and the session open", o.Type, o.Intent, ssml(again), endState(raw), ssml(first))
		}
	}
	// Twin: repeating an answer that asked nothing does not ask.
	r := newRig(t, nil)
	r.turn(reqOpts{Type: TypeIntent, Intent: IntentCarePlan, Slots: topicSlot("contact", "ER_SUCCESS_MATCH"), Session: "sA"})
	if _, raw := r.turn(reqOpts{Type: TypeIntent, Intent: IntentRepeat, Session: "sA"}); endState(raw) != "true" {
		t.Errorf("repeat of an answer: end %s", endState(raw))
	}
}

// P-24, staleness at speak time in every form: a review date that passes
// between two turns, on an answer, an unasked first hearing, the new
// sentence of a retraction and the cards.
func TestStaleness_AReviewDatePassingBetweenTwoTurnsIsSaidAgeFirst(t *testing.T) {
	ex := "Ankle pumps hourly; heel slides ten times, twice daily."
	t.Run("answer", func(t *testing.T) {
		r := newRig(t, nil)
		r.care.facts["ray"][2].StaleAfter = t0.Add(time.Hour) // exercise
		ask := reqOpts{Type: TypeIntent, Intent: IntentCarePlan, Slots: topicSlot("exercise", "ER_SUCCESS_MATCH"), APL: true}
		out, raw := r.turn(ask)
		if s := plain(out); !strings.HasPrefix(s, "Your exercise instruction from Sarah Okafor, physio, yesterday") || strings.Contains(s, "review date") || strings.Contains(string(raw), `"byline":"Yesterday · Sarah Okafor, physio"`) {
			t.Fatalf("before the review date: %q", s)
		}
		r.setNow(t0.Add(2 * time.Hour))
		ask.Timestamp = t0.Add(2 * time.Hour)
		out, raw = r.turn(ask)
		if s := plain(out); !strings.HasPrefix(s, "Yesterday, Sarah Okafor, physio, wrote your exercise instruction: “"+ex+"” It is now past its review date.") || !strings.HasSuffix(s, models.CheckWithTeam) {
			t.Fatalf("after the review date: %q", s)
		}
		if !strings.Contains(string(raw), `"byline":"Yesterday · Sarah Okafor, physio"`) {
			t.Errorf("care card row not stale age first: %s", raw)
		}
	})
	t.Run("unasked first hearing", func(t *testing.T) {
		r := newRig(t, nil)
		v := ver("wound_care", 1, "Keep the dressing dry.", "Nurse Patel", 9*24*time.Hour)
		v.StaleAfter = t0.Add(-time.Minute)
		r.care.setPending("ray", models.Announcement{ID: 3, Patient: "ray", Current: v})
		out, _ := r.turn(reqOpts{Type: TypeAPLUserEvent, Arguments: []any{"tick"}, APL: true})
		if s := plain(out); !strings.HasPrefix(s, "Nine days ago, Nurse Patel wrote your wound care instruction: “Keep the dressing dry.” It is now past its review date. Please check it with your care team.") {
			t.Errorf("stale first hearing: %q", s)
		}
	})
	t.Run("the new sentence of a retraction", func(t *testing.T) {
		r := newRig(t, nil)
		a := retractionWB()
		a.Current.WrittenAt = t0.Add(-9 * 24 * time.Hour)
		a.Current.StaleAfter = t0.Add(-time.Minute)
		r.care.setPending("ray", a)
		out, raw := r.turn(reqOpts{APL: true})
		if s := plain(out); !strings.Contains(s, "Nine days ago, Sarah Okafor, physio, changed it to: “"+wbV3Text+"” It is now past its review date.") {
			t.Errorf("stale retraction: %q", s)
		}
		if d := out.Response.Directives; len(d) != 1 || d[0].Token != apl.TokenRetraction || !strings.Contains(string(raw), `"byline":"Nine days ago · Sarah Okafor, physio · Past its review date.`) {
			t.Errorf("retraction card not stale age first: %s", raw)
		}
	})
}

// postAndHangUp sends a signed request over a raw connection and, once
// the handler is in the care source's Turn (reached), closes it without
// reading the answer, as Alexa does once it has given up; it returns once
// the handler has finished.
func (r *rig) postAndHangUp(o reqOpts, reached <-chan struct{}, hungUp chan<- struct{}) {
	r.t.Helper()
	body := envelope(o)
	conn, err := net.Dial("tcp", r.srv.Listener.Addr().String())
	if err != nil {
		r.t.Fatal(err)
	}
	fmt.Fprintf(conn, "POST /alexa HTTP/1.1\r\nHost: alexa\r\nContent-Type: application/json\r\nContent-Length: %d\r\n%s: %s\r\n%s: %s\r\n\r\n%s",
		len(body), HeaderSignature256, r.pki.sign(body), HeaderCertChainURL, testCertURL, body)
	<-reached
	conn.Close()
	close(hungUp)
	r.inflight.wait()
}

// P-24, heard means delivered: a response written into a connection Alexa
// has already closed is not heard — the retraction it carried stays
// offered and the next turn says it again, saying so. Twin: the same
// response to a client that waits for it is heard.
func TestDelivery_AResponseWrittenIntoAClosedConnectionIsNotHeard(t *testing.T) {
	r := newRig(t, nil)
	r.care.setPending("ray", retractionWB())
	reached, hungUp := make(chan struct{}), make(chan struct{})
	var once sync.Once // a turn owed an announcement is decided again under the patient's lock
	r.care.onTurn = func(ctx context.Context) {
		once.Do(func() { close(reached) })
		<-hungUp
		select { // the server has seen the connection close
		case <-ctx.Done():
		case <-time.After(30 * time.Second):
			t.Error("the request's context was never done after the client hung up")
		}
	}
	r.postAndHangUp(reqOpts{}, reached, hungUp)
	r.care.onTurn = nil
	if calls := r.care.heardCalls(); len(calls) != 0 {
		t.Fatalf("a response written into a closed connection marked %v heard", calls)
	}
	if offers := r.care.announcementOffers(); len(offers) != 1 || offers[0].ID != 7 {
		t.Fatalf("offers = %v, want the retraction offered before the write; logs %s", offers, r.logs)
	}
	if !strings.Contains(r.logs.String(), "after Alexa closed the connection") {
		t.Errorf("no warning logged: %s", r.logs.String())
	}
	out, _ := r.turn(reqOpts{Session: "s2"})
	if s := plain(out); !strings.HasPrefix(s, "Stop — as I may not have told you properly: your walking instruction has changed.") {
		t.Fatalf("next turn = %q, want the retraction again, saying so", s)
	}
	// Twin: a client that waits for the answer hears it.
	if heardSet(r.care.heardCalls())["care://ray/weight_bearing"] != 3 {
		t.Errorf("a delivered response was not marked heard: %v", r.care.heardCalls())
	}
}

// P-24: a response written later than Alexa's 8 s deadline is never
// played: nothing in it is heard and it is said again; Alexa's
// ENDPOINT_TIMEOUT report for it (no attributes) then re-opens nothing, as
// nothing was marked. Twin: one written within the deadline is heard, and
// the same report re-opens its marks (the session's record).
func TestDelivery_AResponseLaterThanAlexasDeadlineIsNotHeard(t *testing.T) {
	for _, tt := range []struct {
		took  time.Duration
		heard bool
	}{
		{AlexaResponseDeadline + time.Second, false},
		{AlexaResponseDeadline - time.Second, true},
	} {
		t.Run(tt.took.String(), func(t *testing.T) {
			r := newRig(t, nil)
			r.care.setPending("ray", retractionWB())
			r.care.onTurn = func(context.Context) { r.setNow(t0.Add(tt.took)) } // a slow confirmation
			out, _ := r.turn(reqOpts{Session: "sD"})
			_, heard := heardSet(r.care.heardCalls())["care://ray/weight_bearing"]
			if heard != tt.heard {
				t.Fatalf("took %v: heard = %v, want %v (calls %v)", tt.took, heard, tt.heard, r.care.heardCalls())
			}
			if !tt.heard && !strings.Contains(r.logs.String(), "after Alexa's deadline") {
				t.Errorf("no warning logged: %s", r.logs.String())
			}
			r.post(sessionEndedWith(t, "sD", ReasonError, "ENDPOINT_TIMEOUT", nil), testCertURL, "")
			calls := r.care.notPlayedCalls()
			if want := marksOf(t, attributesOf(t, out)); tt.heard != (len(calls) == 1 && slices.Equal(calls[0], want)) || !tt.heard && len(calls) != 0 {
				t.Errorf("took %v: the report re-opened %v (the response marked %v)", tt.took, calls, want)
			}
		})
	}
}

// P-24: a fact told plainly is offered before the response is written and
// confirmed (MarkTold) only after — so a response that never reaches Alexa
// leaves it offered, never heard. Twin: delivered, it is told.
func TestDelivery_AFactToldIsOfferedBeforeTheWriteAndToldOnlyAfter(t *testing.T) {
	ask := reqOpts{Type: TypeIntent, Intent: IntentCarePlan, Slots: topicSlot("exercise", "ER_SUCCESS_MATCH")}
	r := newRig(t, nil)
	r.serveTo(&failingWriter{h: http.Header{}}, ask)
	if got := r.care.toldOffers(); !slices.Equal(got, []string{"care://ray/exercise v1"}) {
		t.Fatalf("told offers = %v, want the exercise answer offered before the write", got)
	}
	if calls := r.care.heardCalls(); len(calls) != 0 {
		t.Fatalf("an undelivered answer was told: %v", calls)
	}
	r.turn(ask)
	if calls := r.care.heardCalls(); len(calls) != 1 || !calls[0].Told || calls[0].URI != "care://ray/exercise" || calls[0].Version != 1 {
		t.Fatalf("delivered answer: calls %v, want MarkTold(exercise v1)", calls)
	}
	if got := r.care.toldOffers(); len(got) != 2 {
		t.Errorf("told offers = %v, want one per response", got)
	}
}
