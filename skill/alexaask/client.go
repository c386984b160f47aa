package alexaask

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/unsay/unsay/skill/alexatest"
)

// Client posts requests to a server's /alexa.
type Client struct {
	// URL is the /alexa endpoint: http://127.0.0.1:8080/alexa.
	URL string
	// CA signs every request (SignatureCertChainUrl alexatest.CertURL and
	// Signature-256) when set; nil sends unsigned requests, which only a
	// development server (--alexa-verify=false, loopback) accepts.
	CA *alexatest.PKI
	// HTTP is the client; nil means one with a 15 s timeout.
	HTTP *http.Client
}

// ErrRefused is an answer other than 200 from /alexa; the error text says
// what the status means for the person at the terminal.
var ErrRefused = errors.New("alexa endpoint refused the request")

// Send posts body and returns the response envelope's bytes. A connection
// failure names the URL; a non-200 answer wraps ErrRefused with a hint
// (400: the server verifies signatures; 503: no --alexa-skill-id).
func (c *Client) Send(ctx context.Context, body []byte) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.URL, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("--url: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	if c.CA != nil {
		req.Header.Set("SignatureCertChainUrl", alexatest.CertURL)
		req.Header.Set("Signature-256", c.CA.Sign(body))
	}
	hc := c.HTTP
	if hc == nil {
		hc = &http.Client{Timeout: 15 * time.Second}
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("no answer from %s (is `unsay serve` running there? `make run` starts one): %w", c.URL, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("reading the answer from %s: %w", c.URL, err)
	}
	if resp.StatusCode == http.StatusOK {
		return raw, nil
	}
	msg := strings.TrimSpace(string(raw))
	var hint string
	switch {
	case resp.StatusCode == http.StatusBadRequest && c.CA == nil:
		hint = "; the server verifies Alexa signatures: on loopback start it with --alexa-verify=false --default-patient ray, or sign with --alexa-test-ca DIR"
	case resp.StatusCode == http.StatusBadRequest:
		hint = "; the server does not trust this test CA or skill id: start it with the flags `unsay ask --alexa-test-ca DIR` printed, and the same --alexa-skill-id"
	case resp.StatusCode == http.StatusServiceUnavailable:
		hint = "; the server verifies Alexa requests but has no --alexa-skill-id"
	}
	return nil, fmt.Errorf("%w: %s answered %d %s: %s%s", ErrRefused, c.URL, resp.StatusCode, http.StatusText(resp.StatusCode), msg, hint)
}
