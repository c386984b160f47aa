// Package proactive tells Ray, out of session, that there is a message from
// his care team: one Alexa Proactive Events notification
// (AMAZON.MessageAlert.Activated), unicast to his linked Alexa user, within
// an audible budget shared by every instance (P-23).
//
// The retraction itself is never put in a notification: it is spoken at the
// next launch. This package does not import store/ or bridge/ (P-18); it
// keeps the budget's slots in its own table through database/sql (Budget,
// on the handle bridge/app gives it).
package proactive

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
)

// Default endpoints (Login with Amazon and the Proactive Events API).
const (
	DefaultTokenURL = "https://api.amazon.com/auth/O2/token"
	// Scope is the LWA scope for proactive events.
	Scope = "alexa::proactive_events"
)

// ClientConfig configures Client.
type ClientConfig struct {
	ClientID     string // --alexa-client-id
	ClientSecret string // UNSAY_ALEXA_CLIENT_SECRET
	// TokenURL is the LWA token endpoint; "" means DefaultTokenURL.
	TokenURL string
	// APIBase overrides the region base URL taken from the link's apiEndpoint
	// (--proactive-api-url: operator configuration, used as given); "" uses
	// the link's, which must be one of Amazon's regional Alexa API hosts
	// (CheckAPIEndpoint).
	APIBase string
	// Live selects the live path /v1/proactiveEvents; otherwise the
	// development stage /v1/proactiveEvents/stages/development.
	Live       bool
	HTTPClient *http.Client // nil: a client with a 10 s timeout
	Clock      func() time.Time

	// allowAPIEndpoint, tests only, accepts a link's apiEndpoint besides
	// Amazon's hosts (a local fake API). Nil in every real configuration.
	allowAPIEndpoint func(raw string) bool
}

// ErrAPIEndpoint: the apiEndpoint stored with a link is not one of Amazon's
// regional Alexa API hosts. Nothing was sent — no token, no event — so the
// notification is undelivered.
var ErrAPIEndpoint = errors.New("proactive: apiEndpoint is not an Amazon Alexa API host")

// CheckAPIEndpoint returns the canonical base URL ("https://api.eu.amazonalexa.com")
// of an apiEndpoint stored at link time when it is one of Amazon's regional
// Alexa API hosts — api.amazonalexa.com (North America),
// api.eu.amazonalexa.com (Europe) and api.fe.amazonalexa.com (Far East),
// as the Proactive Events API documents them — over https, on port 443 if any, with no
// user info, path, query or fragment; host and scheme are case-insensitive.
// Anything else is an error wrapping ErrAPIEndpoint: the Login with Amazon
// access token is never sent to it.
func CheckAPIEndpoint(raw string) (string, error) {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil {
		return "", fmt.Errorf("%w: unparsable", ErrAPIEndpoint)
	}
	host := strings.ToLower(u.Hostname())
	switch {
	case !strings.EqualFold(u.Scheme, "https"):
		return "", fmt.Errorf("%w: scheme %q is not https", ErrAPIEndpoint, u.Scheme)
	case u.User != nil || u.Opaque != "":
		return "", fmt.Errorf("%w: user info or opaque URL", ErrAPIEndpoint)
	case host != "api.amazonalexa.com" && host != "api.eu.amazonalexa.com" && host != "api.fe.amazonalexa.com":
		return "", fmt.Errorf("%w: host %q", ErrAPIEndpoint, host)
	case u.Port() != "" && u.Port() != "443":
		return "", fmt.Errorf("%w: port %s", ErrAPIEndpoint, u.Port())
	case (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.ForceQuery || u.Fragment != "":
		return "", fmt.Errorf("%w: path, query or fragment present", ErrAPIEndpoint)
	}
	return "https://" + host, nil
}

// Client sends proactive events. It caches the LWA access token until 60 s
// before it expires. Safe for concurrent use.
type Client struct {
	cfg ClientConfig

	mu      sync.Mutex
	token   string
	expires time.Time
}

// NewClient checks the configuration: a client id and secret are required.
func NewClient(cfg ClientConfig) (*Client, error) {
	var missing []string
	if cfg.ClientID == "" {
		missing = append(missing, "--alexa-client-id")
	}
	if cfg.ClientSecret == "" {
		missing = append(missing, "UNSAY_ALEXA_CLIENT_SECRET")
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("proactive notifications need %s", strings.Join(missing, " and "))
	}
	if cfg.TokenURL == "" {
		cfg.TokenURL = DefaultTokenURL
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{Timeout: 10 * time.Second}
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	return &Client{cfg: cfg}, nil
}

// APIError is a non-2xx answer. Undelivered is true only when the API proved
// nothing was delivered: a 4xx answer, which Alexa gives before accepting an
// event (P-23: charged unless proven undelivered).
type APIError struct {
	Status      int
	Body        string // at most 512 bytes of the answer, for logs
	Undelivered bool
}

func (e *APIError) Error() string {
	return fmt.Sprintf("proactive events API answered %d", e.Status)
}

// accessToken returns a cached LWA token or fetches a new one
// (client_credentials grant, scope alexa::proactive_events).
func (c *Client) accessToken(ctx context.Context) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.cfg.Clock()
	if c.token != "" && now.Before(c.expires) {
		return c.token, nil
	}
	form := url.Values{
		"grant_type":    {"client_credentials"},
		"client_id":     {c.cfg.ClientID},
		"client_secret": {c.cfg.ClientSecret},
		"scope":         {Scope},
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.cfg.TokenURL, strings.NewReader(form.Encode()))
	if err != nil {
		return "", fmt.Errorf("token request: %w", err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := c.cfg.HTTPClient.Do(req)
	if err != nil {
		return "", fmt.Errorf("token request: %w", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("token endpoint answered %d", resp.StatusCode)
	}
	var tok struct {
		AccessToken string `json:"access_token"`
		ExpiresIn   int    `json:"expires_in"` // seconds
	}
	if err := json.Unmarshal(body, &tok); err != nil || tok.AccessToken == "" {
		return "", errors.New("token endpoint answered without an access_token")
	}
	c.token = tok.AccessToken
	c.expires = now.Add(time.Duration(tok.ExpiresIn)*time.Second - time.Minute)
	return c.token, nil
}

// Event is the body of one AMAZON.MessageAlert.Activated unicast event.
type Event struct {
	Timestamp           string              `json:"timestamp"`
	ReferenceID         string              `json:"referenceId"`
	ExpiryTime          string              `json:"expiryTime"`
	Event               EventBody           `json:"event"`
	LocalizedAttributes []map[string]string `json:"localizedAttributes"`
	RelevantAudience    Audience            `json:"relevantAudience"`
}

// EventBody names the schema and carries its payload.
type EventBody struct {
	Name    string         `json:"name"`
	Payload map[string]any `json:"payload"`
}

// Audience is the unicast audience: one Alexa user.
type Audience struct {
	Type    string            `json:"type"`
	Payload map[string]string `json:"payload"`
}

// NewMessageAlert builds the event "a message from your care team": no
// clinical content ever leaves in a notification. expiry is clamped by the
// caller to Alexa's window (use 1 h).
func NewMessageAlert(userID, referenceID string, now time.Time, expiry time.Duration) Event {
	return Event{
		Timestamp:   now.UTC().Format(time.RFC3339),
		ReferenceID: referenceID,
		ExpiryTime:  now.Add(expiry).UTC().Format(time.RFC3339),
		Event: EventBody{
			Name: "AMAZON.MessageAlert.Activated",
			Payload: map[string]any{
				"state":        map[string]string{"status": "UNREAD", "freshness": "NEW"},
				"messageGroup": map[string]any{"creator": map[string]string{"name": "your care team"}, "count": 1, "urgency": "URGENT"},
			},
		},
		LocalizedAttributes: []map[string]string{{"locale": "en-GB"}, {"locale": "en-US"}},
		RelevantAudience:    Audience{Type: "Unicast", Payload: map[string]string{"user": userID}},
	}
}

// Send posts ev to the Proactive Events API in the region of apiEndpoint
// (the apiEndpoint stored at link time, e.g. https://api.eu.amazonalexa.com),
// unless ClientConfig.APIBase overrides it. An apiEndpoint that is not one
// of Amazon's Alexa API hosts (CheckAPIEndpoint) is refused with an error
// wrapping ErrAPIEndpoint before any token is fetched or sent. It returns
// *APIError for a non-2xx answer, or a transport error (delivery unknown:
// the caller must treat it as charged).
func (c *Client) Send(ctx context.Context, apiEndpoint string, ev Event) error {
	base := c.cfg.APIBase
	if base == "" {
		if c.cfg.allowAPIEndpoint != nil && c.cfg.allowAPIEndpoint(apiEndpoint) {
			base = apiEndpoint
		} else {
			var err error
			if base, err = CheckAPIEndpoint(apiEndpoint); err != nil {
				return err
			}
		}
	}
	tok, err := c.accessToken(ctx)
	if err != nil {
		return err
	}
	path := "/v1/proactiveEvents/stages/development"
	if c.cfg.Live {
		path = "/v1/proactiveEvents"
	}
	body, err := json.Marshal(ev)
	if err != nil {
		return fmt.Errorf("encode event: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(base, "/")+path, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("event request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := c.cfg.HTTPClient.Do(req)
	if err != nil {
		return fmt.Errorf("event request: %w", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode/100 == 2 {
		return nil
	}
	if resp.StatusCode == http.StatusUnauthorized {
		c.mu.Lock()
		c.token = "" // force a refresh next time
		c.mu.Unlock()
	}
	return &APIError{Status: resp.StatusCode, Body: string(b), Undelivered: resp.StatusCode/100 == 4}
}
