package cmd

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// A client whose server takes a request and never answers must not send
// the clinician to check the URL: the write may have been saved (finding
// T4). A port nobody listens on still gets the URL hint.
func TestPost_ATimeoutSaysTheRequestMayHaveBeenAppliedAndARefusalBlamesTheURL(t *testing.T) {
	release := make(chan struct{})
	hung := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-release }))
	t.Cleanup(func() { close(release); hung.Close() })

	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, _, err := post(ctx, hung.URL+"/write", []byte(`{}`), nil)
	if err == nil || !strings.Contains(err.Error(), "may or may not have been applied") || strings.Contains(err.Error(), "is `unsay serve` running there") {
		t.Fatalf("a server that took the request and hung: %v, want 'may or may not have been applied' and no URL hint", err)
	}

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + l.Addr().String()
	l.Close()
	_, _, err = post(context.Background(), closed+"/write", []byte(`{}`), nil)
	if err == nil || !strings.Contains(err.Error(), "is `unsay serve` running there") || strings.Contains(err.Error(), "may or may not") {
		t.Fatalf("a port nobody listens on: %v, want the URL hint", err)
	}
}
