package speech

import (
	"sync"

	"github.com/unsay/unsay/models"
)

// queuedHook holds the callback told when an announcement is queued or
// extended for a patient (the out-of-session notifier, P-23).
type queuedHook struct {
	mu       sync.Mutex
	fn       func(patient string)
	notified map[string]int // fact URI → the latest version told to fn
}

// OnQueued sets fn to be called, on the principal's own goroutine, each time
// an announcement is queued or extended for a patient. fn must not block
// (the notifier's Revision only signals). A later call replaces fn.
func (p *Principal) OnQueued(fn func(patient string)) {
	p.hook.mu.Lock()
	p.hook.fn = fn
	p.hook.mu.Unlock()
}

func (p *Principal) notifyQueued(patient string) {
	p.hook.mu.Lock()
	fn := p.hook.fn
	p.hook.mu.Unlock()
	if fn != nil {
		fn(patient)
	}
}

// markNotified reports whether the revision of uri up to version is news to
// the hook (not told before), and records it.
func (p *Principal) markNotified(uri models.URI, version int) bool {
	p.hook.mu.Lock()
	defer p.hook.mu.Unlock()
	if p.hook.notified == nil {
		p.hook.notified = map[string]int{}
	}
	if p.hook.notified[uri.String()] >= version {
		return false
	}
	p.hook.notified[uri.String()] = version
	return true
}
