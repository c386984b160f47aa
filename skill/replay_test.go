package skill

import (
	"bytes"
	"context"
	"crypto/x509"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// signedHeader signs body with the test leaf.
func (r *rig) signedHeader(body []byte) http.Header {
	h := http.Header{}
	h.Set(HeaderSignature256, r.pki.sign(body))
	h.Set(HeaderCertChainURL, testCertURL)
	return h
}

// Finding 5 (P-22): a captured signed request replayed within its
// timestamp window is refused with 400 before any handler runs, so it
// cannot use up the retraction Ray's real next turn must hear; a request
// with its own id is served (twin).
func TestServeHTTP_AReplayedRequestIsRefusedAndUsesUpNothing(t *testing.T) {
	r := newRig(t, nil)
	r.care.setPending("ray", retractionWB())
	r.care.facts["ray"][0] = retractionWB().Current
	captured := envelope(reqOpts{Type: TypeIntent, Intent: IntentWhatsChanged})
	// The tester's replay: the captured request, sent again in its window.
	r.care.discard = true // the first delivery is lost to Ray (say, another room)
	if code, _ := r.post(captured, testCertURL, ""); code != http.StatusOK {
		t.Fatalf("the original: %d", code)
	}
	r.care.discard = false
	r.setNow(t0.Add(100 * time.Second))
	calls := r.care.calls.Load()
	if code, b := r.post(captured, testCertURL, ""); code != http.StatusBadRequest {
		t.Fatalf("the replay: %d %s, want 400", code, b)
	}
	if r.care.calls.Load() != calls || len(r.care.heardCalls()) != 0 {
		t.Fatalf("the replay reached the care source: %d turns, heard %v", r.care.calls.Load()-calls, r.care.heardCalls())
	}
	// Twin: Ray's real next turn (its own id) hears the retraction.
	out, _ := r.turn(reqOpts{Type: TypeIntent, Intent: IntentWhatsChanged, Timestamp: t0.Add(100 * time.Second)})
	if s := plain(out); !strings.HasPrefix(s, "Stop —") {
		t.Fatalf("the real turn: %q, want the retraction", s)
	}
}

func TestVerifier_RemembersRequestIDsForTheWindowAndNoLonger(t *testing.T) {
	r := newRig(t, nil)
	v := r.skill.verifier
	ctx := context.Background()
	a := envelope(reqOpts{RequestID: "amzn1.echo-api.request.A"})
	if _, err := v.Verify(ctx, r.signedHeader(a), a); err != nil {
		t.Fatalf("first: %v", err)
	}
	if _, err := v.Verify(ctx, r.signedHeader(a), a); !errors.Is(err, ErrReplay) {
		t.Fatalf("the same request again: %v, want ErrReplay", err)
	}
	// Another body with the same id (a replay re-signed is impossible; a
	// body altered keeps the id) is refused too; another id is accepted.
	a2 := envelope(reqOpts{RequestID: "amzn1.echo-api.request.A", Intent: IntentHelp, Type: TypeIntent})
	if _, err := v.Verify(ctx, r.signedHeader(a2), a2); !errors.Is(err, ErrReplay) {
		t.Fatalf("the same id in another body: %v, want ErrReplay", err)
	}
	b := envelope(reqOpts{RequestID: "amzn1.echo-api.request.B"})
	if _, err := v.Verify(ctx, r.signedHeader(b), b); err != nil {
		t.Fatalf("another id: %v", err)
	}
	// A forged request is never remembered: its id stays usable.
	c := envelope(reqOpts{RequestID: "amzn1.echo-api.request.C"})
	forged := r.signedHeader(c)
	forged.Set(HeaderSignature256, r.pki.sign([]byte("something else")))
	if _, err := v.Verify(ctx, forged, c); !errors.Is(err, ErrSignature) {
		t.Fatalf("forged: %v", err)
	}
	if _, err := v.Verify(ctx, r.signedHeader(c), c); err != nil {
		t.Fatalf("the genuine request after a forgery of its id: %v", err)
	}
	// Once the window has passed the timestamp refuses a replay, and the
	// ids are forgotten: the memory does not grow with time.
	r.setNow(t0.Add(TimestampTolerance + 2*time.Second))
	if _, err := v.Verify(ctx, r.signedHeader(a), a); !errors.Is(err, ErrTimestamp) {
		t.Fatalf("after the window: %v, want ErrTimestamp", err)
	}
	d := envelope(reqOpts{RequestID: "amzn1.echo-api.request.D", Timestamp: t0.Add(TimestampTolerance + 2*time.Second)})
	if _, err := v.Verify(ctx, r.signedHeader(d), d); err != nil {
		t.Fatal(err)
	}
	v.replays.mu.Lock()
	n := len(v.replays.until)
	v.replays.mu.Unlock()
	if n != 1 {
		t.Errorf("%d ids remembered after the window, want 1 (D)", n)
	}
	// No id at all is refused.
	e := bytes.Replace(envelope(reqOpts{RequestID: "X", Timestamp: t0.Add(TimestampTolerance + 2*time.Second)}), []byte(`"requestId":"X"`), []byte(`"requestId":""`), 1)
	if _, err := v.Verify(ctx, r.signedHeader(e), e); !errors.Is(err, ErrReplay) {
		t.Fatalf("no request id: %v, want ErrReplay", err)
	}
}

// The memory is bounded: when every remembered id is still in its window
// a new request is refused (fail closed), and accepted once room is made.
func TestVerifier_AFullReplayMemoryFailsClosed(t *testing.T) {
	r := newRig(t, nil)
	v := r.skill.verifier
	v.replays.max = 3
	ctx := context.Background()
	for i := range 3 {
		b := envelope(reqOpts{})
		if _, err := v.Verify(ctx, r.signedHeader(b), b); err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
	}
	b := envelope(reqOpts{})
	if _, err := v.Verify(ctx, r.signedHeader(b), b); !errors.Is(err, ErrReplay) {
		t.Fatalf("over the bound: %v, want ErrReplay", err)
	}
	later := t0.Add(TimestampTolerance + 2*time.Second)
	r.setNow(later)
	b = envelope(reqOpts{Timestamp: later})
	if _, err := v.Verify(ctx, r.signedHeader(b), b); err != nil {
		t.Fatalf("after the window made room: %v", err)
	}
}

// A restart empties the replay memory, so a turn signed before this
// Verifier was made is refused as a possible replay (ErrReplay): a signed
// LaunchRequest accepted by the process before a restart, replayed to the
// new one within Alexa's 150 s window, cannot use up Ray's retraction.
// The twins: a turn signed in the second the new Verifier started, or
// later, is accepted, and so is an older AlexaSkillEvent (never spoken,
// delivered up to an hour late), each once.
func TestVerify_ATurnSignedBeforeARestartIsRefusedAndOneSignedAfterIsAccepted(t *testing.T) {
	p := getPKI(t)
	roots := x509.NewCertPool()
	roots.AddCert(p.root)
	now := t0
	verifier := func() *Verifier {
		v, err := NewVerifier(VerifierConfig{SkillID: testSkillID, Roots: roots, Fetcher: &countingFetcher{pem: p.chainPEM},
			Clock: func() time.Time { return now }})
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	signed := func(o reqOpts) http.Header {
		h := http.Header{}
		h.Set(HeaderCertChainURL, testCertURL)
		h.Set(HeaderSignature256, p.sign(envelope(o)))
		return h
	}
	before := reqOpts{RequestID: "amzn1.echo-api.request.before-restart", Timestamp: t0.Add(-20 * time.Second)}
	first := verifier()
	first.since = t0.Add(-time.Hour) // up for an hour
	if _, err := first.Verify(context.Background(), signed(before), envelope(before)); err != nil {
		t.Fatalf("the first process refused a genuine turn: %v", err)
	}
	if _, err := first.Verify(context.Background(), signed(before), envelope(before)); !errors.Is(err, ErrReplay) {
		t.Fatalf("the first process accepted its replay: %v", err)
	}

	restarted := verifier() // a new process at t0: its memory is empty
	if _, err := restarted.Verify(context.Background(), signed(before), envelope(before)); !errors.Is(err, ErrReplay) || !strings.Contains(err.Error(), "before this server started") {
		t.Fatalf("after a restart a replayed turn was not refused as signed before the server started: %v", err)
	}
	now = t0.Add(700 * time.Millisecond) // the same second as the start: Alexa's timestamps have no fraction
	for _, o := range []reqOpts{
		{RequestID: "amzn1.echo-api.request.same-second", Timestamp: t0},
		{RequestID: "amzn1.echo-api.request.after", Timestamp: t0.Add(time.Second)},
		{RequestID: "amzn1.echo-api.request.skill-event", Type: "AlexaSkillEvent.SkillEnabled", Timestamp: t0.Add(-30 * time.Minute)},
	} {
		if _, err := restarted.Verify(context.Background(), signed(o), envelope(o)); err != nil {
			t.Errorf("%s (signed %s): refused after the restart: %v", o.RequestID, o.Timestamp.Format(time.RFC3339), err)
		}
		if _, err := restarted.Verify(context.Background(), signed(o), envelope(o)); !errors.Is(err, ErrReplay) {
			t.Errorf("%s: its replay was accepted: %v", o.RequestID, err)
		}
	}
}

// sharedMemory is a SharedReplayMemory in a map, as several instances'
// database holds it; err, if set, is every call's answer.
type sharedMemory struct {
	mu   sync.Mutex
	seen map[[32]byte]time.Time
	err  error
}

func (m *sharedMemory) RememberAlexaRequest(_ context.Context, digest [32]byte, _, until time.Time) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.err != nil {
		return false, m.err
	}
	if m.seen == nil {
		m.seen = map[[32]byte]time.Time{}
	}
	if _, ok := m.seen[digest]; ok {
		return false, nil
	}
	m.seen[digest] = until
	return true, nil
}

// P-22 behind a load balancer: two skills (two instances) sharing a replay
// memory — a request one accepted is refused by the other, which never saw
// it, before any care source is asked; another id is accepted by either.
// When the shared memory cannot be reached the request is served (its
// database holds the heard ledger too, so a replay can mark nothing then)
// and the failure is logged. Twin: without a shared memory the other
// instance accepts the replay (the gap the shared memory closes).
func TestVerifier_ARequestAnotherInstanceAcceptedIsRefusedThroughTheSharedMemory(t *testing.T) {
	shared := &sharedMemory{}
	withShared := func(c *Config) { c.SharedReplays = shared }
	a, b, alone := newRig(t, withShared), newRig(t, withShared), newRig(t, nil)
	ctx := context.Background()
	captured := envelope(reqOpts{RequestID: "amzn1.echo-api.request.shared-1"})
	if _, err := a.skill.verifier.Verify(ctx, a.signedHeader(captured), captured); err != nil {
		t.Fatalf("on A: %v", err)
	}
	if _, err := b.skill.verifier.Verify(ctx, b.signedHeader(captured), captured); !errors.Is(err, ErrReplay) || !strings.Contains(err.Error(), "another instance") {
		t.Fatalf("replayed to B: %v, want ErrReplay naming another instance", err)
	}
	if code, _ := b.post(captured, testCertURL, ""); code != http.StatusBadRequest || b.care.calls.Load() != 0 {
		t.Fatalf("replayed to B over HTTP: %d, %d care turns; want 400 and none", code, b.care.calls.Load())
	}
	if _, err := alone.skill.verifier.Verify(ctx, alone.signedHeader(captured), captured); err != nil {
		t.Fatalf("twin, an instance without the shared memory: %v, want accepted", err)
	}
	other := envelope(reqOpts{RequestID: "amzn1.echo-api.request.shared-2"})
	if _, err := b.skill.verifier.Verify(ctx, b.signedHeader(other), other); err != nil {
		t.Fatalf("another id on B: %v", err)
	}
	shared.err = errors.New("connection refused")
	down := envelope(reqOpts{RequestID: "amzn1.echo-api.request.shared-3"})
	if _, err := a.skill.verifier.Verify(ctx, a.signedHeader(down), down); err != nil {
		t.Fatalf("with the shared memory unreachable: %v, want served", err)
	}
	if !strings.Contains(a.logs.String(), "replay memory shared by the instances not reached") {
		t.Errorf("the shared memory's failure is not logged: %s", a.logs.String())
	}
	if _, err := a.skill.verifier.Verify(ctx, a.signedHeader(down), down); !errors.Is(err, ErrReplay) {
		t.Errorf("the same request again on A while the shared memory is down: %v, want ErrReplay (A's own memory)", err)
	}
}
