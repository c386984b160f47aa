package proactive

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"log/slog"
	"sync"
	"time"
)

// Recipient is one linked Alexa user of a patient and the region endpoint
// stored at link time.
type Recipient struct {
	UserID      string
	APIEndpoint string
}

// Sender is what Client does; tests substitute a fake.
type Sender interface {
	Send(ctx context.Context, apiEndpoint string, ev Event) error
}

// NotifierConfig configures NewNotifier. Budget, Sender, Recipients,
// SessionOpen and HasPending are required; Clock (time.Now) and Logger
// (slog.Default) are optional.
type NotifierConfig struct {
	Budget *Budget
	Sender Sender
	// Recipients lists the patient's linked Alexa users.
	Recipients func(ctx context.Context, patient string) ([]Recipient, error)
	// SessionOpen reports whether a skill session is open for the patient:
	// then the 5 s tick speaks the retraction and no notification is sent.
	SessionOpen func(patient string) bool
	// HasPending reports whether the patient still has something to hear;
	// a deferred notification is dropped once he has heard it.
	HasPending func(ctx context.Context, patient string) (bool, error)
	// Told, if set, is called after a notification the Alexa API accepted
	// (202) for at least one of the patient's devices, with the time it
	// was sent: the announcements pending then were told unasked that a
	// message waits (the clinician's timeline). An outcome that is not
	// known is charged to the budget (P-23) but not reported as told.
	Told func(ctx context.Context, patient string, at time.Time)
	// Settle is how long a first revision waits for more before sending, so
	// a burst becomes one notification (default 5 s). Coalesce is how long
	// after a send further revisions send nothing new (default 60 s).
	Settle, Coalesce time.Duration
	Clock            func() time.Time
	Logger           *slog.Logger
}

// Notifier turns revisions into at most one "message from your care team"
// per burst, within the budget, deferred (never dropped) in quiet hours or
// when the budget is spent (P-23).
type Notifier struct {
	cfg  NotifierConfig
	wake chan struct{}

	mu       sync.Mutex
	due      map[string]time.Time // patient → when to try sending
	lastSent map[string]time.Time
}

// NewNotifier validates cfg and applies defaults. It fails when a required
// field of cfg is nil.
func NewNotifier(cfg NotifierConfig) (*Notifier, error) {
	if cfg.Budget == nil || cfg.Sender == nil || cfg.Recipients == nil || cfg.SessionOpen == nil || cfg.HasPending == nil {
		return nil, errors.New("proactive: notifier config incomplete")
	}
	if cfg.Settle <= 0 {
		cfg.Settle = 5 * time.Second
	}
	if cfg.Coalesce <= 0 {
		cfg.Coalesce = time.Minute
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Notifier{cfg: cfg, wake: make(chan struct{}, 1), due: map[string]time.Time{}, lastSent: map[string]time.Time{}}, nil
}

// Revision tells the notifier that patient has something new to hear. It
// never blocks.
func (n *Notifier) Revision(patient string) {
	now := n.cfg.Clock()
	n.mu.Lock()
	if _, ok := n.due[patient]; !ok {
		at := now.Add(n.cfg.Settle)
		if last, ok := n.lastSent[patient]; ok && now.Sub(last) < n.cfg.Coalesce {
			at = last.Add(n.cfg.Coalesce) // inside the coalescing window: fold into one
		}
		n.due[patient] = at
	}
	n.mu.Unlock()
	select {
	case n.wake <- struct{}{}:
	default:
	}
}

// Run processes due notifications every second, and at once after a
// Revision, until ctx ends; it then returns ctx.Err().
func (n *Notifier) Run(ctx context.Context) error {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		case <-n.wake:
		}
		n.processDue(ctx)
	}
}

// processDue sends what is due at the clock's now.
func (n *Notifier) processDue(ctx context.Context) {
	now := n.cfg.Clock()
	n.mu.Lock()
	var ready []string
	for p, at := range n.due {
		if !now.Before(at) {
			ready = append(ready, p)
		}
	}
	n.mu.Unlock()
	for _, p := range ready {
		next := n.attempt(ctx, p, now)
		n.mu.Lock()
		if next.IsZero() {
			delete(n.due, p)
		} else {
			n.due[p] = next
		}
		n.mu.Unlock()
	}
}

// attempt tries to notify patient once; it returns when to try again, or
// the zero time when done (sent, or nothing left to say).
func (n *Notifier) attempt(ctx context.Context, patient string, now time.Time) time.Time {
	log := n.cfg.Logger.With("patient", patient)
	if n.cfg.SessionOpen(patient) {
		return time.Time{} // the open session's tick speaks it
	}
	if pending, err := n.cfg.HasPending(ctx, patient); err != nil {
		log.Warn("proactive: pending check failed", "err", err)
		return now.Add(30 * time.Second)
	} else if !pending {
		return time.Time{}
	}
	recips, err := n.cfg.Recipients(ctx, patient)
	if err != nil {
		log.Warn("proactive: recipients failed", "err", err)
		return now.Add(30 * time.Second)
	}
	if len(recips) == 0 {
		return time.Time{}
	}
	res, err := n.cfg.Budget.Reserve(ctx, patient)
	var quiet *QuietError
	var spent *SpentError
	switch {
	case errors.As(err, &quiet):
		log.Info("proactive: deferred for quiet hours", "until", quiet.Until)
		return quiet.Until
	case errors.As(err, &spent):
		log.Info("proactive: budget spent; deferred", "retryAfter", spent.RetryAfter)
		return now.Add(spent.RetryAfter)
	case errors.Is(err, ErrDisabled):
		return time.Time{}
	case err != nil:
		log.Warn("proactive: reserve failed", "err", err)
		return now.Add(30 * time.Second)
	}
	delivered, accepted := false, false
	for _, r := range recips {
		ev := NewMessageAlert(r.UserID, referenceID(), now, time.Hour)
		err := n.cfg.Sender.Send(ctx, r.APIEndpoint, ev)
		var apiErr *APIError
		switch {
		case err == nil:
			delivered, accepted = true, true
		case errors.As(err, &apiErr) && apiErr.Undelivered:
			log.Warn("proactive: event refused", "status", apiErr.Status)
		case errors.Is(err, ErrAPIEndpoint):
			log.Warn("proactive: not sent: the link's apiEndpoint is not an Amazon Alexa API host", "err", err)
		default:
			delivered = true // unknown outcome: charged (P-23)
			log.Warn("proactive: event outcome unknown; slot stays charged", "err", err)
		}
	}
	if !delivered {
		if err := res.Refund(ctx); err != nil {
			log.Warn("proactive: refund failed", "err", err)
		}
		return time.Time{}
	}
	n.mu.Lock()
	n.lastSent[patient] = now
	n.mu.Unlock()
	log.Info("proactive: notified")
	if accepted && n.cfg.Told != nil {
		n.cfg.Told(ctx, patient, now)
	}
	return time.Time{}
}

func referenceID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return "unsay-" + hex.EncodeToString(b[:])
}
