package bridge

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"sync"
	"time"
	"unique"

	sdkauth "github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/unsay/unsay/models"
)

// RedactedFrame replaces, on replay, a stored notification the resuming
// principal may not see, so event numbering stays aligned (P-9). Clients
// ignore unknown notifications.
var RedactedFrame = []byte(`{"jsonrpc":"2.0","method":"notifications/unsay/redacted","params":{}}`)

// replayStore is the mcp.EventStore of every session: an eventLog holding
// the frames, and re-authorization of every stored frame against the
// resuming principal on replay (GET with Last-Event-ID). The SDK calls it
// per session and stream, so a replay never yields another session's or
// another stream's frames.
type replayStore struct {
	log         *eventLog
	principalOf func(*sdkauth.TokenInfo) (models.Principal, bool)
	expired     func(exp time.Time) bool
	onClose     func(sessionID string)
	onWithheld  func()
}

// newReplayStore: expired reports whether a token expiring at exp has
// expired (a resuming token that has is treated as no principal).
func newReplayStore(maxBytes int, principalOf func(*sdkauth.TokenInfo) (models.Principal, bool), expired func(exp time.Time) bool, onClose func(string), onWithheld func()) *replayStore {
	return &replayStore{log: newEventLog(maxBytes, DefaultRetainedPOSTStreams), principalOf: principalOf, expired: expired, onClose: onClose, onWithheld: onWithheld}
}

func (r *replayStore) Open(_ context.Context, sessionID, streamID string) error {
	r.log.open(sessionID, streamID)
	return nil
}

func (r *replayStore) Append(_ context.Context, sessionID, streamID string, data []byte) error {
	r.log.append(sessionID, streamID, data)
	return nil
}

// After yields the frames stored after index, each re-authorized against
// the principal of the resuming request (auth.TokenInfoFromContext(ctx) is
// fresh here). A frame naming a URI that principal may not see, or a URI
// that does not parse, is replaced: a notification by RedactedFrame, a
// response by a -32002 error response with the same id and no URI.
// Without a verified principal, or with one whose token has expired, every
// frame naming a URI is replaced. An index past the last stored event
// (a forged or stale Last-Event-ID) yields ErrReplayPastEnd and one before
// the oldest retained yields mcp.ErrEventsPurged: the SDK answers both 400
// "failed to replay events", so nothing is ever skipped silently.
func (r *replayStore) After(ctx context.Context, sessionID, streamID string, index int) iter.Seq2[[]byte, error] {
	ti := sdkauth.TokenInfoFromContext(ctx)
	p, ok := r.principalOf(ti)
	if !ok || r.expired == nil || r.expired(ti.Expiration) {
		p = models.Principal{}
	}
	frames, err := r.log.after(sessionID, streamID, index)
	return func(yield func([]byte, error) bool) {
		if err != nil {
			yield(nil, err)
			return
		}
		for _, data := range frames {
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

func (r *replayStore) SessionClosed(_ context.Context, sessionID string) error {
	if r.onClose != nil {
		r.onClose(sessionID)
	}
	r.log.closeSession(sessionID)
	return nil
}

// DefaultRetainedPOSTStreams is how many POST response streams of one
// session are kept for resumption: the 16 most recent (a client resumes an
// interrupted POST at once or not at all; the standalone stream is always
// kept).
const DefaultRetainedPOSTStreams = 16

// Replay errors (besides mcp.ErrEventsPurged).
var (
	// ErrReplayPastEnd: Last-Event-ID names an event after the last one
	// this stream stored — forged, or from another incarnation.
	ErrReplayPastEnd = errors.New("bridge: Last-Event-ID is past the end of the stream")
	// ErrReplayUnknown: no such session or stream in the event log.
	ErrReplayUnknown = errors.New("bridge: unknown session or stream")
)

// eventLog holds the frames of every session's streams in memory, bounded
// by maxBytes of frame data in all (counted per stored frame, though
// identical frames share their bytes): when a frame would pass the bound,
// the oldest frames (of whichever stream) go first. Unlike the SDK's
// MemoryEventStore, it knows where each stream starts and ends, so After
// can refuse an index past the end (ErrReplayPastEnd) instead of
// renumbering the stream from it, and bounds tell a no-Last-Event-ID GET
// where to start. Each session keeps the standalone stream and its
// maxPOST most recent other streams. Safe for concurrent use.
type eventLog struct {
	mu       sync.Mutex
	maxBytes int
	maxPOST  int
	nBytes   int
	sessions map[string]*sessionLog
	// order lists every retained frame, oldest first, from head on; stale
	// counts its refs to dropped streams.
	order []frameRef
	head  int
	stale int
}

type sessionLog struct {
	streams map[string]*streamLog
	posts   []string // ids of the non-standalone streams, oldest first
}

type streamLog struct {
	first int // index of frames[0]
	// frames are interned (frame): sessions sent the same bytes (the
	// initialize result, each revision's resources/updated) share one copy.
	frames []frame

	bytes int
	gone  bool // dropped: its refs in order are stale
}

// frame is one stored frame; the zero frame is an empty one (a priming
// event).
type frame struct{ h unique.Handle[string] }

func internFrame(data []byte) frame {
	if len(data) == 0 {
		return frame{}
	}
	return frame{unique.Make(string(data))}
}

// bytes returns a copy of the frame's data (nil for an empty one).
func (f frame) bytes() []byte {
	if f == (frame{}) {
		return nil
	}
	return []byte(f.h.Value())
}

type frameRef struct {
	s    *streamLog
	idx  int
	size int
}

func newEventLog(maxBytes, maxPOST int) *eventLog {
	return &eventLog{maxBytes: maxBytes, maxPOST: maxPOST, sessions: make(map[string]*sessionLog)}
}

// stream returns the stream's log, creating it. Requires l.mu.
func (l *eventLog) stream(sessionID, streamID string) *streamLog {
	sl, ok := l.sessions[sessionID]
	if !ok {
		sl = &sessionLog{streams: make(map[string]*streamLog)}
		l.sessions[sessionID] = sl
	}
	st, ok := sl.streams[streamID]
	if !ok {
		st = &streamLog{}
		sl.streams[streamID] = st
		if streamID != "" {
			sl.posts = append(sl.posts, streamID)
			for len(sl.posts) > l.maxPOST {
				l.dropLocked(sl.streams[sl.posts[0]])
				delete(sl.streams, sl.posts[0])
				sl.posts = sl.posts[1:]
			}
		}
	}
	return st
}

func (l *eventLog) open(sessionID, streamID string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.stream(sessionID, streamID)
}

func (l *eventLog) append(sessionID, streamID string, data []byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	st := l.stream(sessionID, streamID)
	// Purge before adding, so the newest frame is always kept.
	l.purgeLocked(len(data))
	l.order = append(l.order, frameRef{s: st, idx: st.first + len(st.frames), size: len(data)})
	st.frames = append(st.frames, internFrame(data))
	st.bytes += len(data)
	l.nBytes += len(data)
}

// purgeLocked drops the oldest frames until adding incoming bytes keeps
// the log within maxBytes. Requires l.mu.
func (l *eventLog) purgeLocked(incoming int) {
	for l.nBytes+incoming > l.maxBytes && l.head < len(l.order) {
		ref := l.order[l.head]
		l.order[l.head] = frameRef{}
		l.head++
		if ref.s.gone {
			l.stale--
			continue
		}
		if ref.idx != ref.s.first || len(ref.s.frames) == 0 {
			continue
		}
		ref.s.frames[0] = frame{}
		ref.s.frames = ref.s.frames[1:]
		ref.s.first++
		ref.s.bytes -= ref.size
		l.nBytes -= ref.size
	}
	live := len(l.order) - l.head
	if (l.head > 1024 && l.head > live) || (l.stale > 1024 && l.stale > live/2) {
		kept := make([]frameRef, 0, max(0, live-l.stale))
		for _, ref := range l.order[l.head:] {
			if !ref.s.gone {
				kept = append(kept, ref)
			}
		}
		l.order, l.head, l.stale = kept, 0, 0
	}
}

// dropLocked forgets a stream's frames. Requires l.mu.
func (l *eventLog) dropLocked(st *streamLog) {
	if st == nil || st.gone {
		return
	}
	st.gone = true
	l.stale += len(st.frames)
	l.nBytes -= st.bytes
	st.frames, st.bytes = nil, 0
}

// after returns a copy of the frames stored after index (-1: all retained
// from the stream's start).
func (l *eventLog) after(sessionID, streamID string, index int) ([][]byte, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	sl, ok := l.sessions[sessionID]
	if !ok {
		return nil, ErrReplayUnknown
	}
	st, ok := sl.streams[streamID]
	if !ok {
		return nil, ErrReplayUnknown
	}
	next := st.first + len(st.frames)
	switch {
	case index >= next:
		return nil, fmt.Errorf("%w (index %d, the stream has %d events)", ErrReplayPastEnd, index, next)
	case index+1 < st.first:
		return nil, fmt.Errorf("index %d: %w", index, mcp.ErrEventsPurged)
	}
	kept := st.frames[index+1-st.first:]
	out := make([][]byte, len(kept))
	for i, f := range kept {
		out[i] = f.bytes()
	}
	return out, nil
}

// bounds reports the stream's oldest retained index and the index its
// next event will get; ok is false for an unknown stream.
func (l *eventLog) bounds(sessionID, streamID string) (first, next int, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	sl, ok := l.sessions[sessionID]
	if !ok {
		return 0, 0, false
	}
	st, ok := sl.streams[streamID]
	if !ok {
		return 0, 0, false
	}
	return st.first, st.first + len(st.frames), true
}

// size is the frame data held, in bytes.
func (l *eventLog) size() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.nBytes
}

func (l *eventLog) closeSession(sessionID string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	sl, ok := l.sessions[sessionID]
	if !ok {
		return
	}
	for _, st := range sl.streams {
		l.dropLocked(st)
	}
	delete(l.sessions, sessionID)
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
