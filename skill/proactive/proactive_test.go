package proactive

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeClock is a settable clock safe for concurrent use.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time          { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) Advance(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

// memSlots is a BudgetStore in memory: one mutex makes each reservation
// atomic, as the store's database lock does (store.AlertBudget, whose own
// tests run the SQL on SQLite and Postgres).
type memSlots struct {
	mu    sync.Mutex
	slots []memSlot
}

type memSlot struct {
	patient  string
	at       time.Time
	refunded bool
}

func newSlots(*testing.T) *memSlots { return &memSlots{} }

func (m *memSlots) charged(patient string, since time.Time) (n int, oldest time.Time) {
	for _, s := range m.slots {
		if s.patient == patient && s.at.After(since) && !s.refunded {
			if n == 0 || s.at.Before(oldest) {
				oldest = s.at
			}
			n++
		}
	}
	return n, oldest
}

func (m *memSlots) ReserveSlot(_ context.Context, patient string, max int, since, at time.Time) (int64, time.Time, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if n, oldest := m.charged(patient, since); n >= max {
		return 0, oldest, nil
	}
	m.slots = append(m.slots, memSlot{patient: patient, at: at})
	return int64(len(m.slots)), time.Time{}, nil
}

func (m *memSlots) RefundSlot(_ context.Context, id int64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if id >= 1 && int(id) <= len(m.slots) {
		m.slots[id-1].refunded = true
	}
	return nil
}

func (m *memSlots) SlotsUsed(_ context.Context, patient string, since time.Time) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, _ := m.charged(patient, since)
	return n, nil
}

func newBudget(t *testing.T, slots BudgetStore, max int, q QuietHours, clk *fakeClock) *Budget {
	t.Helper()
	b, err := NewBudget(BudgetConfig{Slots: slots, Max: max, Quiet: q, Clock: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// fakeAlexa is a local Proactive Events API and LWA token endpoint.
type fakeAlexa struct {
	tokens, events atomic.Int32
	status         atomic.Int32 // answer for events; 0 → 202
	mu             sync.Mutex
	lastEvent      map[string]any
	lastAuth       string
	lastPath       string
}

func (f *fakeAlexa) server(t *testing.T) *httptest.Server {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /auth/O2/token", func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		if r.Form.Get("grant_type") != "client_credentials" || r.Form.Get("scope") != Scope || r.Form.Get("client_secret") != "s3cret" {
			http.Error(w, `{"error":"invalid_client"}`, http.StatusUnauthorized)
			return
		}
		n := f.tokens.Add(1)
		_ = json.NewEncoder(w).Encode(map[string]any{"access_token": "tok-" + string(rune('0'+n)), "expires_in": 3600, "token_type": "bearer"})
	})
	mux.HandleFunc("POST /v1/proactiveEvents/stages/development", func(w http.ResponseWriter, r *http.Request) {
		f.events.Add(1)
		b, _ := io.ReadAll(r.Body)
		f.mu.Lock()
		f.lastEvent = map[string]any{}
		_ = json.Unmarshal(b, &f.lastEvent)
		f.lastAuth = r.Header.Get("Authorization")
		f.lastPath = r.URL.Path
		f.mu.Unlock()
		if s := f.status.Load(); s != 0 {
			w.WriteHeader(int(s))
			return
		}
		w.WriteHeader(http.StatusAccepted)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

func TestClient_SendsUnicastMessageAlertWithCachedToken(t *testing.T) {
	f := &fakeAlexa{}
	srv := f.server(t)
	clk := &fakeClock{t: time.Date(2026, 10, 8, 12, 0, 0, 0, time.UTC)}
	c, err := NewClient(ClientConfig{ClientID: "id", ClientSecret: "s3cret", TokenURL: srv.URL + "/auth/O2/token", Clock: clk.Now, allowAPIEndpoint: fakeEndpoint(srv.URL)})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i := 0; i < 2; i++ {
		if err := c.Send(ctx, srv.URL, NewMessageAlert("amzn1.ask.account.RAY", "ref-1", clk.Now(), time.Hour)); err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
	}
	if got := f.tokens.Load(); got != 1 {
		t.Fatalf("token fetched %d times, want 1 (cached)", got)
	}
	f.mu.Lock()
	ev, auth, path := f.lastEvent, f.lastAuth, f.lastPath
	f.mu.Unlock()
	if auth != "Bearer tok-1" || path != "/v1/proactiveEvents/stages/development" {
		t.Fatalf("auth %q path %q", auth, path)
	}
	evBody := ev["event"].(map[string]any)
	aud := ev["relevantAudience"].(map[string]any)
	if evBody["name"] != "AMAZON.MessageAlert.Activated" || aud["type"] != "Unicast" || aud["payload"].(map[string]any)["user"] != "amzn1.ask.account.RAY" {
		t.Fatalf("event shape: %v", ev)
	}
	if ev["referenceId"] != "ref-1" || ev["expiryTime"] != "2026-10-08T13:00:00Z" {
		t.Fatalf("reference/expiry: %v %v", ev["referenceId"], ev["expiryTime"])
	}

	// Past expiry (minus the 60 s margin) the token is refreshed.
	clk.Advance(time.Hour)
	if err := c.Send(ctx, srv.URL, NewMessageAlert("u", "ref-2", clk.Now(), time.Hour)); err != nil {
		t.Fatal(err)
	}
	if got := f.tokens.Load(); got != 2 {
		t.Fatalf("token fetched %d times after expiry, want 2", got)
	}
}

func TestClient_RefusesToStartWithoutCredentials(t *testing.T) {
	if _, err := NewClient(ClientConfig{}); err == nil {
		t.Fatal("want an error naming the missing settings")
	} else if msg := err.Error(); !contains(msg, "--alexa-client-id") || !contains(msg, "UNSAY_ALEXA_CLIENT_SECRET") {
		t.Fatalf("error %q does not name both settings", msg)
	}
	if _, err := NewClient(ClientConfig{ClientID: "id", ClientSecret: "x"}); err != nil {
		t.Fatalf("configured client refused: %v", err)
	}
}

func TestClient_FourXXIsProvenUndeliveredButFiveXXIsNot(t *testing.T) {
	f := &fakeAlexa{}
	srv := f.server(t)
	c, _ := NewClient(ClientConfig{ClientID: "id", ClientSecret: "s3cret", TokenURL: srv.URL + "/auth/O2/token", allowAPIEndpoint: fakeEndpoint(srv.URL)})
	for _, tc := range []struct {
		status      int32
		undelivered bool
	}{{400, true}, {403, true}, {500, false}, {503, false}} {
		f.status.Store(tc.status)
		err := c.Send(context.Background(), srv.URL, NewMessageAlert("u", "r", time.Now(), time.Hour))
		var apiErr *APIError
		if !errors.As(err, &apiErr) || apiErr.Undelivered != tc.undelivered {
			t.Fatalf("status %d: err %v, want Undelivered=%v", tc.status, err, tc.undelivered)
		}
	}
}

func TestBudget_RefusesPastMaxAndRecoversAsTheWindowSlides(t *testing.T) {
	clk := &fakeClock{t: time.Date(2026, 10, 8, 12, 0, 0, 0, time.UTC)}
	b := newBudget(t, newSlots(t), 3, QuietHours{}, clk)
	ctx := context.Background()
	for i := 0; i < 3; i++ {
		if _, err := b.Reserve(ctx, "ray"); err != nil {
			t.Fatalf("slot %d: %v", i+1, err)
		}
		clk.Advance(10 * time.Minute)
	}
	_, err := b.Reserve(ctx, "ray")
	var spent *SpentError
	if !errors.As(err, &spent) {
		t.Fatalf("fourth slot in the hour: %v, want SpentError", err)
	}
	if spent.RetryAfter != 30*time.Minute {
		t.Fatalf("retry after %s, want 30m (oldest leaves the window)", spent.RetryAfter)
	}
	// Another patient's budget is separate.
	if _, err := b.Reserve(ctx, "bench"); err != nil {
		t.Fatalf("other patient refused: %v", err)
	}
	clk.Advance(spent.RetryAfter + time.Millisecond)
	if _, err := b.Reserve(ctx, "ray"); err != nil {
		t.Fatalf("after the window slid: %v", err)
	}
}

func TestBudget_RefundGivesTheSlotBack(t *testing.T) {
	clk := &fakeClock{t: time.Date(2026, 10, 8, 12, 0, 0, 0, time.UTC)}
	b := newBudget(t, newSlots(t), 1, QuietHours{}, clk)
	ctx := context.Background()
	r, err := b.Reserve(ctx, "ray")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Reserve(ctx, "ray"); err == nil {
		t.Fatal("second slot granted with max 1")
	}
	if err := r.Refund(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Reserve(ctx, "ray"); err != nil {
		t.Fatalf("refunded slot not available: %v", err)
	}
}

func TestBudget_TwoRacingReservationsWithOneSlotLeftGetOne(t *testing.T) {
	clk := &fakeClock{t: time.Date(2026, 10, 8, 12, 0, 0, 0, time.UTC)}
	slots := newSlots(t)
	// Two Budget values over one slot store stand for two instances.
	a := newBudget(t, slots, 3, QuietHours{}, clk)
	b := newBudget(t, slots, 3, QuietHours{}, clk)
	ctx := context.Background()
	for i := 0; i < 2; i++ {
		if _, err := a.Reserve(ctx, "ray"); err != nil {
			t.Fatal(err)
		}
	}
	var ok atomic.Int32
	var wg sync.WaitGroup
	for _, bud := range []*Budget{a, b, a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := bud.Reserve(ctx, "ray"); err == nil {
				ok.Add(1)
			}
		}()
	}
	wg.Wait()
	if ok.Load() != 1 {
		t.Fatalf("%d racing reservations succeeded with one slot left, want 1", ok.Load())
	}
}

func TestQuietHours_DeferUntilTheWindowEnds(t *testing.T) {
	london, err := time.LoadLocation("Europe/London")
	if err != nil {
		t.Skip("no tzdata:", err)
	}
	q, err := ParseQuietHours("21:00-08:00", london)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		at    time.Time
		until time.Time
	}{
		{time.Date(2026, 10, 8, 22, 30, 0, 0, london), time.Date(2026, 10, 9, 8, 0, 0, 0, london)},
		{time.Date(2026, 10, 9, 6, 0, 0, 0, london), time.Date(2026, 10, 9, 8, 0, 0, 0, london)},
		{time.Date(2026, 10, 9, 8, 0, 0, 0, london), time.Time{}},
		{time.Date(2026, 10, 9, 20, 59, 0, 0, london), time.Time{}},
	}
	for _, c := range cases {
		if got := q.Until(c.at); !got.Equal(c.until) {
			t.Errorf("Until(%s) = %s, want %s", c.at, got, c.until)
		}
	}
	clk := &fakeClock{t: time.Date(2026, 10, 8, 22, 30, 0, 0, london)}
	b := newBudget(t, newSlots(t), 3, q, clk)
	_, err = b.Reserve(context.Background(), "ray")
	var qe *QuietError
	if !errors.As(err, &qe) {
		t.Fatalf("reserve in quiet hours: %v, want QuietError", err)
	}
	clk.Advance(10 * time.Hour)
	if _, err := b.Reserve(context.Background(), "ray"); err != nil {
		t.Fatalf("reserve after quiet hours: %v", err)
	}
	for _, bad := range []string{"21-08", "25:00-08:00", "21:00"} {
		if _, err := ParseQuietHours(bad, london); err == nil {
			t.Errorf("ParseQuietHours(%q) accepted", bad)
		}
	}
}

// A window that starts when it ends ("08:00-08:00") could mean none or
// all day, so it is refused (ErrQuietHoursEmpty) rather than read as
// either; twins: a one-minute window and one across midnight are windows,
// and "off" is none.
func TestParseQuietHours_AWindowThatStartsWhenItEndsIsRefusedAndAOneMinuteOneIsAccepted(t *testing.T) {
	for _, s := range []string{"08:00-08:00", "00:00-00:00", "23:59-23:59", " 8:00-08:00"} {
		if _, err := ParseQuietHours(s, time.UTC); !errors.Is(err, ErrQuietHoursEmpty) {
			t.Errorf("ParseQuietHours(%q) = %v, want ErrQuietHoursEmpty", s, err)
		}
	}
	at := time.Date(2026, 10, 9, 8, 0, 30, 0, time.UTC)
	for s, until := range map[string]time.Time{
		"08:00-08:01": time.Date(2026, 10, 9, 8, 1, 0, 0, time.UTC),
		"08:01-08:00": time.Time{}, // all day but 08:00–08:01
		"off":         time.Time{},
	} {
		q, err := ParseQuietHours(s, time.UTC)
		if err != nil {
			t.Errorf("ParseQuietHours(%q): %v", s, err)
			continue
		}
		if got := q.Until(at); !got.Equal(until) {
			t.Errorf("%q: Until(08:00:30) = %s, want %s", s, got, until)
		}
	}
}

// fakeSender records sends.
type fakeSender struct {
	mu   sync.Mutex
	sent []string
	err  error
}

func (s *fakeSender) Send(_ context.Context, _ string, ev Event) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sent = append(s.sent, ev.RelevantAudience.Payload["user"])
	return s.err
}

func (s *fakeSender) count() int { s.mu.Lock(); defer s.mu.Unlock(); return len(s.sent) }

func newNotifier(t *testing.T, b *Budget, s Sender, clk *fakeClock, open *atomic.Bool, pending *atomic.Bool) *Notifier {
	t.Helper()
	n, err := NewNotifier(NotifierConfig{
		Budget: b, Sender: s, Clock: clk.Now,
		Recipients: func(context.Context, string) ([]Recipient, error) {
			return []Recipient{{UserID: "amzn1.ask.account.RAY", APIEndpoint: "https://api.eu.amazonalexa.com"}}, nil
		},
		SessionOpen: func(string) bool { return open.Load() },
		HasPending:  func(context.Context, string) (bool, error) { return pending.Load(), nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestNotifier_SeveralRevisionsInAMinuteSendOneNotification(t *testing.T) {
	clk := &fakeClock{t: time.Date(2026, 10, 8, 12, 0, 0, 0, time.UTC)}
	s := &fakeSender{}
	var open, pending atomic.Bool
	pending.Store(true)
	n := newNotifier(t, newBudget(t, newSlots(t), 3, QuietHours{}, clk), s, clk, &open, &pending)
	ctx := context.Background()
	for i := 0; i < 4; i++ {
		n.Revision("ray")
		clk.Advance(2 * time.Second)
		n.processDue(ctx)
	}
	clk.Advance(40 * time.Second)
	n.Revision("ray")
	n.processDue(ctx)
	clk.Advance(10 * time.Second)
	n.processDue(ctx)
	if got := s.count(); got != 1 {
		t.Fatalf("%d notifications for a burst inside a minute, want 1", got)
	}
	// After the coalescing window a later revision notifies again.
	clk.Advance(2 * time.Minute)
	n.processDue(ctx)
	if got := s.count(); got != 2 {
		t.Fatalf("%d notifications after the window, want 2 (the folded revision)", got)
	}
}

func TestNotifier_SilentWhileASessionIsOpenOrNothingIsPending(t *testing.T) {
	clk := &fakeClock{t: time.Date(2026, 10, 8, 12, 0, 0, 0, time.UTC)}
	s := &fakeSender{}
	var open, pending atomic.Bool
	n := newNotifier(t, newBudget(t, newSlots(t), 3, QuietHours{}, clk), s, clk, &open, &pending)
	ctx := context.Background()

	open.Store(true)
	pending.Store(true)
	n.Revision("ray")
	clk.Advance(10 * time.Second)
	n.processDue(ctx)
	open.Store(false)
	pending.Store(false)
	clk.Advance(2 * time.Minute)
	n.Revision("ray")
	clk.Advance(10 * time.Second)
	n.processDue(ctx)
	if s.count() != 0 {
		t.Fatalf("notified %d times with a session open / nothing pending", s.count())
	}
	// Positive twin: closed session, something pending → one notification.
	pending.Store(true)
	n.Revision("ray")
	clk.Advance(10 * time.Second)
	n.processDue(ctx)
	if s.count() != 1 {
		t.Fatalf("notified %d times, want 1", s.count())
	}
}

func TestNotifier_DefersInQuietHoursAndSendsAfter(t *testing.T) {
	q, _ := ParseQuietHours("21:00-08:00", time.UTC)
	clk := &fakeClock{t: time.Date(2026, 10, 8, 22, 0, 0, 0, time.UTC)}
	s := &fakeSender{}
	var open, pending atomic.Bool
	pending.Store(true)
	n := newNotifier(t, newBudget(t, newSlots(t), 3, q, clk), s, clk, &open, &pending)
	ctx := context.Background()
	n.Revision("ray")
	clk.Advance(10 * time.Second)
	n.processDue(ctx)
	if s.count() != 0 {
		t.Fatal("notified in quiet hours")
	}
	clk.Advance(10 * time.Hour) // 08:00:10
	n.processDue(ctx)
	if s.count() != 1 {
		t.Fatalf("deferred notification sent %d times after quiet hours, want 1", s.count())
	}
}

func TestNotifier_RefundsOnlyWhenProvenUndelivered(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name    string
		err     error
		charged int
	}{
		{"4xx refunds", &APIError{Status: 403, Undelivered: true}, 0},
		{"5xx stays charged", &APIError{Status: 503}, 1},
		{"transport error stays charged", errors.New("timeout"), 1},
		{"accepted is charged", nil, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := &fakeClock{t: time.Date(2026, 10, 8, 12, 0, 0, 0, time.UTC)}
			b := newBudget(t, newSlots(t), 3, QuietHours{}, clk)
			var open, pending atomic.Bool
			pending.Store(true)
			n := newNotifier(t, b, &fakeSender{err: tc.err}, clk, &open, &pending)
			n.Revision("ray")
			clk.Advance(10 * time.Second)
			n.processDue(ctx)
			used, err := b.Used(ctx, "ray")
			if err != nil {
				t.Fatal(err)
			}
			if used != tc.charged {
				t.Fatalf("charged %d slots, want %d", used, tc.charged)
			}
		})
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

// The clinician's timeline hears of a notification only when the Alexa API
// accepted it; a refused or unknown outcome is never reported as told.
func TestNotifier_ToldOnlyForAnAcceptedNotification(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		err  error
		told bool
	}{
		{"accepted is told", nil, true},
		{"4xx is not told", &APIError{Status: 403, Undelivered: true}, false},
		{"5xx is not told", &APIError{Status: 503}, false},
		{"transport error is not told", errors.New("timeout"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := &fakeClock{t: time.Date(2026, 10, 8, 12, 0, 0, 0, time.UTC)}
			var open, pending atomic.Bool
			pending.Store(true)
			var told []string
			n, err := NewNotifier(NotifierConfig{
				Budget: newBudget(t, newSlots(t), 3, QuietHours{}, clk), Sender: &fakeSender{err: tc.err}, Clock: clk.Now,
				Recipients: func(context.Context, string) ([]Recipient, error) {
					return []Recipient{{UserID: "amzn1.ask.account.RAY", APIEndpoint: "https://api.eu.amazonalexa.com"}}, nil
				},
				SessionOpen: func(string) bool { return open.Load() },
				HasPending:  func(context.Context, string) (bool, error) { return pending.Load(), nil },
				Told:        func(_ context.Context, p string, at time.Time) { told = append(told, p+"@"+at.Format("15:04:05")) },
			})
			if err != nil {
				t.Fatal(err)
			}
			n.Revision("ray")
			clk.Advance(10 * time.Second)
			n.processDue(ctx)
			if got := len(told) == 1 && told[0] == "ray@12:00:10"; got != tc.told {
				t.Fatalf("told = %v, want told: %v", told, tc.told)
			}
		})
	}
}
