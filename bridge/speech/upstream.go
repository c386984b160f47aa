package speech

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/unsay/unsay/models"
)

// upstream is one connection to the Unsay MCP server, as the speech
// principal uses it: list the resources, read one, and be told of
// revisions (events). It is the only place that knows how the principal
// subscribes: today a 2025-11-25 session (initialize, resources/subscribe,
// the standalone GET event stream, keep-alive pings — mcpSession below);
// moving to 2026-07-28 subscriptions/listen replaces dial and mcpSession,
// nothing else.
//
// Its methods are safe for concurrent use: the principal's worker syncs
// while the skill's turns confirm facts over the same upstream.
type upstream interface {
	// ID names the connection in logs.
	ID() string
	// List returns the URI of every resource listed, all pages.
	List(ctx context.Context) ([]string, error)
	// Watch asks to be told (an event) of every later revision of uri.
	Watch(ctx context.Context, uri string) error
	// Read reads uri once.
	Read(ctx context.Context, uri string) (*mcp.ReadResourceResult, error)
	// Done is closed when the connection is over; Err then says why.
	Done() <-chan struct{}
	Err() error
	// Close ends the connection.
	Close() error
}

// event is what the server told the principal: a fact was revised
// (notifications/resources/updated {uri}) or the list changed
// (notifications/resources/list_changed: a fact was created).
type event struct {
	uri         string // "" for listChanged
	listChanged bool
}

// dialConfig is what dial needs: where, how, and where events go.
type dialConfig struct {
	url       string
	http      *http.Client  // carries the bearer token
	keepAlive time.Duration // between pings; 0: none
	events    chan<- event  // receives every event until stop closes
	stop      <-chan struct{}
}

// dial opens an MCP session at models.ProtocolVersion. Events are handed to
// cfg.events on the SDK's notification goroutine, which waits until the
// principal's loop takes each (it never does I/O, so the wait is short).
func dial(ctx context.Context, cfg dialConfig) (upstream, error) {
	send := func(e event) {
		select {
		case cfg.events <- e:
		case <-cfg.stop:
		}
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "unsay-speech", Version: "1"}, &mcp.ClientOptions{
		ResourceUpdatedHandler: func(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
			if req != nil && req.Params != nil {
				send(event{uri: req.Params.URI})
			}
		},
		ResourceListChangedHandler: func(context.Context, *mcp.ResourceListChangedRequest) { send(event{listChanged: true}) },
		KeepAlive:                  cfg.keepAlive,
		Capabilities:               &mcp.ClientCapabilities{},
	})
	t := &mcp.StreamableClientTransport{Endpoint: cfg.url, HTTPClient: cfg.http}
	cs, err := client.Connect(ctx, t, &mcp.ClientSessionOptions{ProtocolVersion: models.ProtocolVersion})
	if err != nil {
		return nil, fmt.Errorf("speech: connect: %w", err)
	}
	s := &mcpSession{cs: cs, done: make(chan struct{})}
	go func() {
		err := cs.Wait()
		if err == nil {
			err = errors.New("closed by the server")
		}
		s.err = err
		close(s.done)
	}()
	return s, nil
}

// mcpSession is an upstream over one 2025-11-25 client session.
type mcpSession struct {
	cs   *mcp.ClientSession
	done chan struct{}
	err  error // set before done closes
}

func (s *mcpSession) ID() string            { return s.cs.ID() }
func (s *mcpSession) Done() <-chan struct{} { return s.done }
func (s *mcpSession) Close() error          { return s.cs.Close() }

func (s *mcpSession) Err() error {
	select {
	case <-s.done:
		return s.err
	default:
		return nil
	}
}

// maxListPages bounds List against a server whose cursors never end.
const maxListPages = 100000

func (s *mcpSession) List(ctx context.Context) ([]string, error) {
	var out []string
	cursor := ""
	for range maxListPages {
		res, err := s.cs.ListResources(ctx, &mcp.ListResourcesParams{Cursor: cursor})
		if err != nil {
			return nil, fmt.Errorf("speech: list: %w", err)
		}
		for _, r := range res.Resources {
			if r != nil {
				out = append(out, r.URI)
			}
		}
		if res.NextCursor == "" || res.NextCursor == cursor {
			return out, nil
		}
		cursor = res.NextCursor
	}
	return nil, errors.New("speech: list: too many pages")
}

func (s *mcpSession) Watch(ctx context.Context, uri string) error {
	if err := s.cs.Subscribe(ctx, &mcp.SubscribeParams{URI: uri}); err != nil {
		return fmt.Errorf("speech: subscribe %s: %w", uri, err)
	}
	return nil
}

func (s *mcpSession) Read(ctx context.Context, uri string) (*mcp.ReadResourceResult, error) {
	res, err := s.cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
	if err != nil {
		return nil, fmt.Errorf("speech: read %s: %w", uri, err)
	}
	return res, nil
}

// isResourceError reports whether err concerns one resource — the server
// answered with a JSON-RPC error (-32002 for anything not found), or the
// contents are unusable — rather than the connection.
func isResourceError(err error) bool {
	var we *jsonrpc.Error
	return errors.As(err, &we) || errors.Is(err, ErrBadResource)
}

// codeResourceNotFound is the JSON-RPC error of every read the Unsay server
// does not serve (P-2).
const codeResourceNotFound = -32002

// isGone reports whether err says the server does not serve this resource
// to this principal (-32002), or serves contents it cannot speak — as
// opposed to a server that failed to answer (any other error).
func isGone(err error) bool {
	var we *jsonrpc.Error
	if errors.As(err, &we) {
		return we.Code == codeResourceNotFound
	}
	return errors.Is(err, ErrBadResource)
}
