package bridge

import (
	"bytes"
	"context"
	"encoding/json"
	"iter"
	"time"

	sdkauth "github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/unsay/unsay/models"
)

// RedactedFrame replaces, on replay, a stored notification the resuming
// principal may not see, so event numbering stays aligned (P-9). Clients
// ignore unknown notifications.
var RedactedFrame = []byte(`{"jsonrpc":"2.0","method":"notifications/unsay/redacted","params":{}}`)

// replayStore is an mcp.EventStore that keeps frames in a bounded
// mcp.MemoryEventStore and re-authorizes every stored frame against the
// resuming principal on replay (GET with Last-Event-ID). The SDK calls it
// per session and stream, so a replay never yields another session's or
// another stream's frames.
type replayStore struct {
	inner       *mcp.MemoryEventStore
	principalOf func(*sdkauth.TokenInfo) (models.Principal, bool)
	expired     func(exp time.Time) bool
	onClose     func(sessionID string)
	onWithheld  func()
}

// newReplayStore: expired reports whether a token expiring at exp has
// expired (a resuming token that has is treated as no principal).
func newReplayStore(maxBytes int, principalOf func(*sdkauth.TokenInfo) (models.Principal, bool), expired func(exp time.Time) bool, onClose func(string), onWithheld func()) *replayStore {
	inner := mcp.NewMemoryEventStore(nil)
	inner.SetMaxBytes(maxBytes)
	return &replayStore{inner: inner, principalOf: principalOf, expired: expired, onClose: onClose, onWithheld: onWithheld}
}

func (r *replayStore) Open(ctx context.Context, sessionID, streamID string) error {
	return r.inner.Open(ctx, sessionID, streamID)
}

func (r *replayStore) Append(ctx context.Context, sessionID, streamID string, data []byte) error {
	return r.inner.Append(ctx, sessionID, streamID, data)
}

// After yields the frames stored after index, each re-authorized against
// the principal of the resuming request (auth.TokenInfoFromContext(ctx) is
// fresh here). A frame naming a URI that principal may not see, or a URI
// that does not parse, is replaced: a notification by RedactedFrame, a
// response by a -32002 error response with the same id and no URI.
// Without a verified principal, or with one whose token has expired, every
// frame naming a URI is replaced.
func (r *replayStore) After(ctx context.Context, sessionID, streamID string, index int) iter.Seq2[[]byte, error] {
	ti := sdkauth.TokenInfoFromContext(ctx)
	p, ok := r.principalOf(ti)
	if !ok || r.expired == nil || r.expired(ti.Expiration) {
		p = models.Principal{}
	}
	return func(yield func([]byte, error) bool) {
		for data, err := range r.inner.After(ctx, sessionID, streamID, index) {
			if err != nil {
				yield(nil, err)
				return
			}
			if len(data) > 0 && !frameAllowed(p, data) {
				data = redact(data)
				if r.onWithheld != nil {
					r.onWithheld()
				}
			}
			if !yield(data, nil) {
				return
			}
		}
	}
}

func (r *replayStore) SessionClosed(ctx context.Context, sessionID string) error {
	if r.onClose != nil {
		r.onClose(sessionID)
	}
	return r.inner.SessionClosed(ctx, sessionID)
}

// frameAllowed reports whether p may see every URI the JSON-RPC frame
// names: in params.uri, params.data.uri, result.contents[].uri,
// result.resources[].uri, and any other "uri" member anywhere in the frame
// (a whats_changed result's structuredContent.changes[].uri). It fails
// closed: a frame that is not JSON, or that names a URI that does not parse
// as a care URI (other than ui://unsay/echo), is not allowed; so is any
// frame mentioning a care scheme p holds no scope for.
func frameAllowed(p models.Principal, frame []byte) bool {
	for _, part := range models.Partitions() {
		if !p.Can(part.Scope) && bytes.Contains(frame, []byte(part.Scheme+"://")) {
			return false
		}
	}
	var v any
	if err := json.Unmarshal(frame, &v); err != nil {
		return false
	}
	ok := true
	walkURIs(v, func(uri string) {
		if ok && !canSeeURI(p, uri) {
			ok = false
		}
	})
	return ok
}

// walkURIs calls f with the string value of every "uri" member in v, at
// any depth.
func walkURIs(v any, f func(string)) {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if k == "uri" {
				if s, ok := e.(string); ok {
					f(s)
					continue
				}
			}
			walkURIs(e, f)
		}
	case []any:
		for _, e := range x {
			walkURIs(e, f)
		}
	}
}

// redact returns the replacement for a withheld frame: RedactedFrame for a
// notification, or an error response with the same id for a response, so a
// resumed request is answered rather than left waiting.
func redact(frame []byte) []byte {
	var msg struct {
		ID json.RawMessage `json:"id"`
	}
	if err := json.Unmarshal(frame, &msg); err != nil || len(msg.ID) == 0 || string(msg.ID) == "null" {
		return RedactedFrame
	}
	out, err := json.Marshal(map[string]any{
		"jsonrpc": "2.0",
		"id":      msg.ID,
		"error":   map[string]any{"code": CodeResourceNotFound, "message": "Resource not found"},
	})
	if err != nil {
		return RedactedFrame
	}
	return out
}
