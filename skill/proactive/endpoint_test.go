package proactive

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeEndpoint is the tests' override: it lets a link's apiEndpoint be the
// local fake API at base (and nothing else besides Amazon's hosts).
func fakeEndpoint(base string) func(string) bool {
	return func(raw string) bool { return raw == base }
}

func TestCheckAPIEndpoint_OnlyAmazonsRegionalAlexaHosts(t *testing.T) {
	accept := map[string]string{
		"https://api.amazonalexa.com":       "https://api.amazonalexa.com",
		"https://api.eu.amazonalexa.com":    "https://api.eu.amazonalexa.com",
		"https://api.fe.amazonalexa.com":    "https://api.fe.amazonalexa.com",
		"https://api.eu.amazonalexa.com/":   "https://api.eu.amazonalexa.com",
		"HTTPS://API.EU.AMAZONALEXA.COM":    "https://api.eu.amazonalexa.com",
		"https://api.amazonalexa.com:443":   "https://api.amazonalexa.com",
		" https://api.fe.amazonalexa.com\n": "https://api.fe.amazonalexa.com",
	}
	for in, want := range accept {
		if got, err := CheckAPIEndpoint(in); err != nil || got != want {
			t.Errorf("CheckAPIEndpoint(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{
		"http://api.amazonalexa.com",
		"https://api.amazonalexa.com.evil.example",
		"https://evil.example/api.amazonalexa.com",
		"https://api.amazonalexa.com@evil.example",
		"https://user:pw@api.amazonalexa.com",
		"https://api.amazonalexa.com:8443",
		"https://api.amazonalexa.com/v1",
		"https://api.amazonalexa.com?x=1",
		"https://api.amazonalexa.com#frag",
		"https://api.na.amazonalexa.com",
		"https://amazonalexa.com",
		"https://127.0.0.1",
		"api.amazonalexa.com",
		"",
	} {
		if got, err := CheckAPIEndpoint(in); !errors.Is(err, ErrAPIEndpoint) {
			t.Errorf("CheckAPIEndpoint(%q) = %q, %v; want ErrAPIEndpoint", in, got, err)
		}
	}
}

// recordingTransport answers every request itself (no network), recording
// the host and Authorization header each one carried.
type recordingTransport struct {
	mu   sync.Mutex
	seen []string // "host Authorization"
}

func (rt *recordingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	rt.mu.Lock()
	rt.seen = append(rt.seen, r.URL.Host+" "+r.Header.Get("Authorization"))
	rt.mu.Unlock()
	rec := httptest.NewRecorder()
	if r.URL.Path == "/auth/O2/token" {
		rec.Header().Set("Content-Type", "application/json")
		_, _ = rec.WriteString(`{"access_token":"lwa-secret-token","expires_in":3600}`)
	} else {
		rec.WriteHeader(http.StatusAccepted)
	}
	return rec.Result(), nil
}

func (rt *recordingTransport) requests() []string {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return append([]string(nil), rt.seen...)
}

// A link's apiEndpoint that is not Amazon's is refused before anything is
// sent: no token is fetched and nothing reaches that host. Twin: Amazon's
// European host receives the event with the token.
func TestClient_NeverSendsTheLWATokenToAHostOtherThanAmazons(t *testing.T) {
	rt := &recordingTransport{}
	c, err := NewClient(ClientConfig{ClientID: "id", ClientSecret: "s3cret", HTTPClient: &http.Client{Transport: rt}})
	if err != nil {
		t.Fatal(err)
	}
	ev := NewMessageAlert("amzn1.ask.account.RAY", "ref-1", time.Now(), time.Hour)
	for _, stored := range []string{"https://collector.evil.example", "http://api.eu.amazonalexa.com", "https://api.eu.amazonalexa.com.evil.example"} {
		if err := c.Send(context.Background(), stored, ev); !errors.Is(err, ErrAPIEndpoint) {
			t.Errorf("Send to a link's apiEndpoint %q: %v, want ErrAPIEndpoint", stored, err)
		}
	}
	if got := rt.requests(); len(got) != 0 {
		t.Fatalf("requests made for foreign endpoints: %q", got)
	}
	if err := c.Send(context.Background(), "https://api.eu.amazonalexa.com", ev); err != nil {
		t.Fatalf("Send to Amazon's European host: %v", err)
	}
	got := rt.requests()
	if len(got) != 2 || got[0] != "api.amazon.com " || got[1] != "api.eu.amazonalexa.com Bearer lwa-secret-token" {
		t.Fatalf("requests %q, want the LWA token fetch then the event to api.eu.amazonalexa.com", got)
	}
}

// A link whose apiEndpoint is refused leaves the audible budget uncharged
// (nothing was delivered, P-23). Twin: Amazon's host charges the slot.
func TestNotifier_AForeignAPIEndpointIsUndeliveredAndRefunded(t *testing.T) {
	ctx := context.Background()
	for endpoint, charged := range map[string]int{"https://collector.evil.example": 0, "https://api.eu.amazonalexa.com": 1} {
		clk := &fakeClock{t: time.Date(2026, 10, 8, 12, 0, 0, 0, time.UTC)}
		b := newBudget(t, newSlots(t), 3, QuietHours{}, clk)
		c, err := NewClient(ClientConfig{ClientID: "id", ClientSecret: "s3cret", HTTPClient: &http.Client{Transport: &recordingTransport{}}, Clock: clk.Now})
		if err != nil {
			t.Fatal(err)
		}
		var pending atomic.Bool
		pending.Store(true)
		n, err := NewNotifier(NotifierConfig{
			Budget: b, Sender: c, Clock: clk.Now,
			Recipients: func(context.Context, string) ([]Recipient, error) {
				return []Recipient{{UserID: "amzn1.ask.account.RAY", APIEndpoint: endpoint}}, nil
			},
			SessionOpen: func(string) bool { return false },
			HasPending:  func(context.Context, string) (bool, error) { return pending.Load(), nil },
		})
		if err != nil {
			t.Fatal(err)
		}
		n.Revision("ray")
		clk.Advance(10 * time.Second)
		n.processDue(ctx)
		used, err := b.Used(ctx, "ray")
		if err != nil {
			t.Fatal(err)
		}
		if used != charged {
			t.Errorf("apiEndpoint %s: %d slots charged, want %d", endpoint, used, charged)
		}
	}
}

// The test-only override is what lets the other tests use a local fake
// API; without it the same local URL is refused.
func TestClient_TheLocalFakeAPINeedsTheTestOverride(t *testing.T) {
	f := &fakeAlexa{}
	srv := f.server(t)
	plain, _ := NewClient(ClientConfig{ClientID: "id", ClientSecret: "s3cret", TokenURL: srv.URL + "/auth/O2/token"})
	if err := plain.Send(context.Background(), srv.URL, NewMessageAlert("u", "r", time.Now(), time.Hour)); !errors.Is(err, ErrAPIEndpoint) {
		t.Fatalf("a local URL without the override: %v, want ErrAPIEndpoint", err)
	}
	over, _ := NewClient(ClientConfig{ClientID: "id", ClientSecret: "s3cret", TokenURL: srv.URL + "/auth/O2/token", allowAPIEndpoint: fakeEndpoint(srv.URL)})
	if err := over.Send(context.Background(), srv.URL, NewMessageAlert("u", "r", time.Now(), time.Hour)); err != nil {
		t.Fatalf("with the override: %v", err)
	}
	if f.events.Load() != 1 || f.tokens.Load() != 1 {
		t.Fatalf("events %d tokens %d, want 1 and 1 (only the overridden client sent)", f.events.Load(), f.tokens.Load())
	}
}
