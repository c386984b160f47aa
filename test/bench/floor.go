package main

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/unsay/unsay/test/harness"
)

// The client's floor: mcp-live's client against a server that does the
// least its protocol allows — one resource held in memory, POST /write
// checks the HMAC, replaces the value (no disk, no chain, no audit, no
// authorization) and notifies the subscribers, resources/read answers
// from memory. Whatever this measures is the TS SDK client's own cost
// (and the loopback's), which no server can go below: the goal "≥ 3× the
// peer" needs a floor under a third of the peer's figure.

const floorURI = "care://ray/weight_bearing"

// startFloor serves the floor server on a loopback port in this process
// and returns its base URL and a stop function.
func startFloor() (string, func(), error) {
	var (
		mu    sync.Mutex
		value = "No weight on the leg."
	)
	srv := mcp.NewServer(&mcp.Implementation{Name: "unsay-bench-floor", Version: "0"}, &mcp.ServerOptions{
		SubscribeHandler:   func(context.Context, *mcp.SubscribeRequest) error { return nil },
		UnsubscribeHandler: func(context.Context, *mcp.UnsubscribeRequest) error { return nil },
	})
	srv.AddResource(&mcp.Resource{URI: floorURI, Name: "weight_bearing", MIMEType: "text/plain"},
		func(_ context.Context, r *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			mu.Lock()
			defer mu.Unlock()
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: r.Params.URI, MIMEType: "text/plain", Text: value}}}, nil
		})
	mux := http.NewServeMux()
	mux.Handle("/mcp", mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, `{"fsync":false}`) })
	mux.HandleFunc("POST /write", func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 256<<10))
		if err != nil {
			http.Error(w, "could not read the body", http.StatusBadRequest)
			return
		}
		m := hmac.New(sha256.New, []byte(harness.WriteSecret))
		io.WriteString(m, r.Header.Get("X-Unsay-Timestamp")+".")
		m.Write(body)
		if !hmac.Equal([]byte("v1="+hex.EncodeToString(m.Sum(nil))), []byte(r.Header.Get("X-Unsay-Signature"))) {
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		var in struct {
			Value string `json:"value"`
		}
		if err := json.Unmarshal(body, &in); err != nil {
			http.Error(w, "bad body", http.StatusBadRequest)
			return
		}
		mu.Lock()
		value = in.Value
		mu.Unlock()
		_ = srv.ResourceUpdated(r.Context(), &mcp.ResourceUpdatedNotificationParams{URI: floorURI})
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, `{"uri":"`+floorURI+`","notified":1}`)
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	hs := &http.Server{Handler: mux}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			panic(err)
		}
	}()
	return "http://" + ln.Addr().String(), func() { hs.Close(); <-done }, nil
}
