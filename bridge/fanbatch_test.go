package bridge

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/unsay/unsay/models"
)

// TestFanBatches_RunSendsEachQueuedSendOnceAcrossCoresBeforeReturning: a
// registered batch takes the sends made with its params, run performs
// each exactly once — a large batch on fanWorkers goroutines, two with
// four cores — and returns only after all of them; once run, the params
// find no batch (a late send runs at once). Twin: a request with other
// params never finds the batch, a small batch gets one goroutine, and with
// two cores a batch is not parallel (each send runs when the SDK makes it).
func TestFanBatches_RunSendsEachQueuedSendOnceAcrossCoresBeforeReturning(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4)) // four cores: two senders
	var f fanBatches
	params := &mcp.ResourceUpdatedNotificationParams{URI: "care://ray/weight_bearing"}
	u, _ := models.ParseURI(params.URI)
	b := f.begin(params, u)
	if !b.parallel {
		t.Fatal("a batch with four cores is not parallel")
	}
	if f.lookup(&mcp.ServerRequest[*mcp.ResourceUpdatedNotificationParams]{Params: params}) != b {
		t.Fatal("the batch's params do not find it")
	}
	other := &mcp.ResourceUpdatedNotificationParams{URI: params.URI}
	if f.lookup(&mcp.ServerRequest[*mcp.ResourceUpdatedNotificationParams]{Params: other}) != nil {
		t.Fatal("other params (same URI) found the batch")
	}
	const n = 1000
	var counts [n]atomic.Int32
	var mu sync.Mutex
	goroutines := map[uint64]bool{}
	for i := range n {
		b.add(func() {
			counts[i].Add(1)
			mu.Lock()
			goroutines[goid()] = true
			mu.Unlock()
		})
	}
	f.run(params, b)
	for i := range n {
		if c := counts[i].Load(); c != 1 {
			t.Fatalf("send %d ran %d times, want once (before run returned)", i, c)
		}
	}
	if len(goroutines) != fanWorkers(n) || fanWorkers(n) != 2 {
		t.Errorf("%d sends ran on %d goroutine(s), want %d (fanWorkers) = 2 with GOMAXPROCS 4", n, len(goroutines), fanWorkers(n))
	}
	if w := fanWorkers(10); w != 1 {
		t.Errorf("a batch of 10 is sent by %d goroutines, want 1", w)
	}
	if f.lookup(&mcp.ServerRequest[*mcp.ResourceUpdatedNotificationParams]{Params: params}) != nil {
		t.Error("the params still find a batch after run")
	}
	runtime.GOMAXPROCS(2)
	if b := f.begin(params, u); b.parallel {
		t.Error("a batch with two cores is parallel: its sends would starve the writers")
	}
}

// goid is the current goroutine's id, from its stack header.
func goid() uint64 {
	var buf [64]byte
	s := buf[:runtime.Stack(buf[:], false)]
	var id uint64
	for _, c := range s[len("goroutine "):] {
		if c < '0' || c > '9' {
			break
		}
		id = id*10 + uint64(c-'0')
	}
	return id
}
