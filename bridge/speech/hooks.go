package speech

import "sync"

// queuedHook holds the callback told when an announcement is queued or
// extended for a patient (the out-of-session notifier, P-23).
type queuedHook struct {
	mu sync.Mutex
	fn func(patient string)
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
