package bridge

import (
	"context"
	"runtime"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/unsay/unsay/models"
)

// fanBatches lets one revision's resources/updated reach its sessions on
// several cores, and parses its URI once for all of them. The SDK's
// ResourceUpdated calls the sending middleware for each subscribed session
// in turn, on the caller's goroutine, with the same params; while fanOut
// has a batch registered for those params, sendFilter re-authorizes each
// session's send with the batch's parsed URI and, on four cores or more
// (parallel), queues it to the batch instead of running it; fanOut then
// runs the queued sends spread over goroutines (fanWorkers) and waits for
// all of them before it sends anything else for the revision — so each
// session still receives its notifications of a revision, and of
// successive revisions, in order. On fewer cores each send runs at once,
// as the SDK calls it: the streams' writers need the other core (two
// senders on two cores starved them; the last session got a revision
// later). A send never waits on a client (its stream only queues, P-25),
// so no session's send delays another's. Safe for concurrent use.
type fanBatches struct {
	mu sync.Mutex
	m  map[*mcp.ResourceUpdatedNotificationParams]*fanBatch
}

// fanBatch is the sends queued for one revision's params.
type fanBatch struct {
	uri parsedURI // params.URI
	// parallel: sends are queued and run by fanBatches.run, on
	// fanWorkers goroutines; otherwise each runs when the SDK makes it.
	parallel bool
	mu       sync.Mutex
	sends    []func()
}

// parsedURI is a care URI as sent (raw) and parsed (u).
type parsedURI struct {
	raw string
	u   models.URI
}

// begin registers a batch for params, which name uri; run it with
// fanBatches.run.
func (f *fanBatches) begin(params *mcp.ResourceUpdatedNotificationParams, uri models.URI) *fanBatch {
	b := &fanBatch{uri: parsedURI{raw: params.URI, u: uri}, parallel: fanWorkers(1<<20) > 1}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.m == nil {
		f.m = make(map[*mcp.ResourceUpdatedNotificationParams]*fanBatch)
	}
	f.m[params] = b
	return b
}

// lookup returns the batch registered for the request's params, or nil.
func (f *fanBatches) lookup(req mcp.Request) *fanBatch {
	p, ok := req.GetParams().(*mcp.ResourceUpdatedNotificationParams)
	if !ok {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.m[p]
}

// add queues one session's send.
func (b *fanBatch) add(send func()) {
	b.mu.Lock()
	b.sends = append(b.sends, send)
	b.mu.Unlock()
}

// run unregisters the batch of params (later sends with them run at once)
// and runs its queued sends, in fanWorkers goroutines, returning once all
// have returned.
func (f *fanBatches) run(params *mcp.ResourceUpdatedNotificationParams, b *fanBatch) {
	f.mu.Lock()
	delete(f.m, params)
	f.mu.Unlock()
	b.mu.Lock()
	sends := b.sends
	b.sends = nil
	b.mu.Unlock()
	workers := fanWorkers(len(sends))
	var wg sync.WaitGroup
	for w := 1; w < workers; w++ {
		wg.Go(func() {
			for i := w; i < len(sends); i += workers {
				sends[i]()
			}
		})
	}
	for i := 0; i < len(sends); i += workers {
		sends[i]()
	}
	wg.Wait()
}

// fanWorkers is how many goroutines send a batch of n: half the cores (the
// other half runs the streams' writers, which do the writing to the
// connections), and one below a few dozen sessions.
func fanWorkers(n int) int {
	return min(max(1, runtime.GOMAXPROCS(0)/2), max(1, n/32))
}

// detached is ctx without its cancellation: the SDK cancels the context of
// a ResourceUpdated once it returns, before the batch's sends run.
func detached(ctx context.Context) context.Context { return context.WithoutCancel(ctx) }
