package skill

import (
	"bytes"
	"context"
	"crypto/x509"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/unsay/unsay/models"
)

// OfferedResponse is Offered, recording sent — when it has a session and
// marks and Offered succeeded — as its session's last response (the last
// two kept, sent.Replaces replaced), as the heard ledger does; a malformed
// session id is refused, as the speech principal refuses it.
func (f *fakeCare) OfferedResponse(ctx context.Context, patient string, offers []models.Offer, sent models.SentResponse) error {
	if sent.Session != "" && len(sent.Marks) > 0 && !models.ValidSessionID(sent.Session) {
		return errors.New("fake care: invalid session id") // as the speech principal refuses it
	}
	if err := f.Offered(ctx, patient, offers); err != nil {
		return err
	}
	if sent.Session == "" || len(sent.Marks) == 0 {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.sent == nil {
		f.sent = map[[2]string][]models.SentResponse{}
	}
	k := [2]string{patient, sent.Session}
	list := slices.DeleteFunc(slices.Clone(f.sent[k]), func(s models.SentResponse) bool {
		return s.ID == sent.ID || sent.Replaces != "" && s.ID == sent.Replaces
	})
	sent.Replaces, sent.Marks = "", slices.Clone(sent.Marks)
	list = append([]models.SentResponse{sent}, list...)
	f.sent[k] = list[:min(len(list), models.SentPerSession)]
	return nil
}

// SentResponses returns what OfferedResponse recorded for session.
func (f *fakeCare) SentResponses(_ context.Context, patient, session string) ([]models.SentResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.sent[[2]string{patient, session}]), nil
}

// instance is another skill on r's care source and links — another
// instance behind the load balancer, or r's after a restart: its memory
// (sessions, records of responses written) starts empty; what it shares is
// the care source and its heard ledger. It is made, as newRig's, rigUptime
// before t0 (the test envelopes are signed at t0), and its clock reads r's
// now.
func (r *rig) instance(tb testing.TB) *rig {
	tb.Helper()
	o := &rig{t: tb, pki: r.pki, care: r.care, links: r.links, now: t0.Add(-rigUptime), fetcher: &countingFetcher{pem: r.pki.chainPEM}, logs: &bytes.Buffer{}}
	cfg := Config{SkillID: testSkillID, Verify: true, ExtraRoots: []*x509.Certificate{r.pki.root},
		Clock: o.clock, DefaultPatient: "ray", Fetcher: o.fetcher, Logger: newTestLogger(o.logs)}
	s, err := New(cfg, o.care, o.links)
	if err != nil {
		tb.Fatal(err)
	}
	o.skill = s
	o.setNow(r.clock())
	o.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		o.inflight.add(1)
		defer o.inflight.add(-1)
		s.ServeHTTP(w, req)
	}))
	tb.Cleanup(o.srv.Close)
	return o
}

// P-24, finding U8: the record of what each response marked is the heard
// ledger's (CareSource.OfferedResponse), not only the instance's memory,
// so Alexa's ENDPOINT_TIMEOUT report of a retraction — echoing the
// attributes of the response before it, the only ones Alexa holds —
// re-opens the retraction on an instance that did not write it: one
// restarted since, another behind the load balancer, or the writer itself
// after another instance wrote a later response of the session (its
// memory stale). Twins: the writer itself re-opens it as before; a report
// of a session with no response recorded re-opens only what its
// attributes name.
func TestNotPlayed_AReportOnAnInstanceThatDidNotWriteTheResponseReopensItsMarksFromTheLedger(t *testing.T) {
	ask := func(session string) reqOpts {
		return reqOpts{Type: TypeIntent, Intent: IntentCarePlan, Slots: topicSlot("weight_bearing", "ER_SUCCESS_MATCH"), Session: session}
	}
	wbURI := models.NewURI(models.AudienceUser, "ray", "weight_bearing")
	for _, tt := range []struct {
		name string
		// reporter is the instance the report reaches, given the writer.
		reporter func(t *testing.T, writer *rig) *rig
		// session is the session the report names.
		session string
		// stale: another instance writes the retraction, after the writer
		// wrote the telling (the writer's memory holds the telling only).
		stale bool
		again bool
	}{
		{"a fresh instance (a restart, or another instance)", func(t *testing.T, w *rig) *rig { return w.instance(t) }, "sT", false, true},
		{"the writer, after another instance wrote the session's later response", func(_ *testing.T, w *rig) *rig { return w }, "sT", true, true},
		{"twin: the writer itself", func(_ *testing.T, w *rig) *rig { return w }, "sT", false, true},
		{"twin: a fresh instance, a session with nothing recorded and no attributes", func(t *testing.T, w *rig) *rig { return w.instance(t) }, "sOther", false, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w := newRig(t, nil)
			if err := w.care.MarkHeard(context.Background(), "ray", wbURI, 2, models.Hearing{}); err != nil {
				t.Fatal(err)
			}
			told, _ := w.turn(ask("sT"))
			a1 := attributesOf(t, told)
			if a1[AttrConfirmed] == nil {
				t.Fatalf("the telling confirms nothing: %v", a1)
			}
			w.care.setPending("ray", retractionWB())
			w.care.facts["ray"][0] = retractionWB().Current
			w.setNow(w.clock().Add(3 * time.Second)) // his next turn
			retracting := w
			if tt.stale {
				retracting = w.instance(t)
			}
			out, _ := retracting.turn(reqOpts{Session: "sT"})
			if !strings.HasPrefix(plain(out), "Stop — your walking instruction has changed.") {
				t.Fatalf("launch: %q", plain(out))
			}
			want := append(marksOf(t, attributesOf(t, out)), marksOf(t, a1)...)
			attrs := a1
			if tt.session != "sT" {
				attrs, want = nil, nil
			}
			r := tt.reporter(t, w)
			if code, b := r.post(sessionEndedWith(t, tt.session, ReasonError, "ENDPOINT_TIMEOUT", attrs), testCertURL, ""); code != 200 {
				t.Fatalf("session ended: %d %s", code, b)
			}
			calls := w.care.notPlayedCalls()
			switch {
			case want == nil && len(calls) != 0:
				t.Fatalf("re-opened %v, want nothing", calls)
			case want != nil && (len(calls) != 1 || !slices.Equal(calls[0], want)):
				t.Fatalf("re-opened %v, want %v (the retraction's marks, then the telling's)\nlogs: %s", calls, want, r.logs)
			}
			next, _ := r.turn(reqOpts{Session: "sU"})
			again := strings.HasPrefix(plain(next), "Stop — as I may not have told you properly: your walking instruction has changed. I told you: “"+wbV2Text+"”")
			if again != tt.again {
				t.Errorf("next turn %q: retraction said again = %v, want %v", plain(next), again, tt.again)
			}
		})
	}
}

// Finding U8: the record the skill hands the ledger is the response's id
// and its marks, as its session attributes name them, on the session's
// id; an attempt overtaken by a revision and built again is replaced, so
// the record's two responses are two that were written. Twin: a response
// that marks nothing records nothing.
func TestNotPlayed_TheLedgersRecordOfAResponseIsWhatItsAttributesName(t *testing.T) {
	r := newRig(t, nil)
	r.care.setPending("ray", retractionWB())
	r.care.facts["ray"][0] = retractionWB().Current
	out, _ := r.turn(reqOpts{Session: "sT"})
	attrs := attributesOf(t, out)
	got, _ := r.care.SentResponses(context.Background(), "ray", "sT")
	if len(got) != 1 || got[0].ID != attrs[AttrResponse] || !slices.Equal(got[0].Marks, marksOf(t, attrs)) || got[0].Session != "sT" {
		t.Fatalf("recorded %+v; want response %v marking %v", got, attrs[AttrResponse], marksOf(t, attrs))
	}
	help, _ := r.turn(reqOpts{Type: TypeIntent, Intent: IntentHelp, Session: "sT"})
	if help.SessionAttributes != nil {
		t.Fatalf("help marks %v", help.SessionAttributes)
	}
	if again, _ := r.care.SentResponses(context.Background(), "ray", "sT"); len(again) != 1 {
		t.Fatalf("a response marking nothing was recorded: %+v", again)
	}
}

// Finding U8: a response overtaken by a revision after its offers (and its
// record) were written is built again; the record of the attempt never
// written is replaced by the rebuilt one's, so the ledger's two responses
// of the session are the one Alexa got and the one before it. Twin: with
// no revision the record is the one response's (TestNotPlayed_TheLedgersRecordOfAResponseIsWhatItsAttributesName).
func TestNotPlayed_AnAttemptOvertakenBeforeItsWriteLeavesNoRecordOfItsOwn(t *testing.T) {
	r := newRig(t, nil)
	told, _ := r.turn(reqOpts{Type: TypeIntent, Intent: IntentCarePlan, Slots: topicSlot("weight_bearing", "ER_SUCCESS_MATCH"), Session: "sT"})
	first := attributesOf(t, told)[AttrResponse]
	r.care.setPending("ray", retractionWB())
	r.care.facts["ray"][0] = retractionWB().Current
	r.care.onOffered = once(func() {
		a := retractionWB()
		a.Current, a.Again = ver("weight_bearing", 4, wbV4Text, "Sarah Okafor, physio", 0), true
		r.care.setPending("ray", a)
		r.care.mu.Lock()
		r.care.facts["ray"][0] = a.Current
		r.care.mu.Unlock()
		r.care.revs.Add(1)
	})
	out, _ := r.turn(reqOpts{Session: "sT"})
	if !strings.Contains(r.logs.String(), "overtaken by a revision") {
		t.Fatalf("no rebuild: %q", plain(out))
	}
	attrs := attributesOf(t, out)
	got, _ := r.care.SentResponses(context.Background(), "ray", "sT")
	var ids []any
	for _, g := range got {
		ids = append(ids, g.ID)
	}
	if want := []any{attrs[AttrResponse], first}; !slices.Equal(ids, want) {
		t.Fatalf("the session's record holds responses %v; want %v (the one written, then the telling before it)", ids, want)
	}
}

// A session id the ledger would refuse (models.ValidSessionID: here one
// with a space) never turns a response into the apology: the response is
// sent and marked as always, recorded in memory only. Twin: a well-formed
// id is recorded in the ledger too.
func TestNotPlayed_AMalformedSessionIDIsRecordedInMemoryOnlyAndTheResponseStillSent(t *testing.T) {
	for _, tt := range []struct {
		session  string
		recorded bool
	}{
		{"s with space", false},
		{"twin:sT", true},
	} {
		t.Run(tt.session, func(t *testing.T) {
			r := newRig(t, nil)
			r.care.setPending("ray", retractionWB())
			r.care.facts["ray"][0] = retractionWB().Current
			out, _ := r.turn(reqOpts{Session: tt.session})
			if !strings.HasPrefix(plain(out), "Stop — your walking instruction has changed.") {
				t.Fatalf("launch: %q", plain(out))
			}
			got, _ := r.care.SentResponses(context.Background(), "ray", tt.session)
			if (len(got) == 1) != tt.recorded {
				t.Fatalf("ledger record %+v, want recorded = %v", got, tt.recorded)
			}
		})
	}
}
