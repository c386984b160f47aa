package proactive

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Defaults of the audible budget (`unsay serve` --alert-budget,
// --quiet-hours and --time-zone read them).
const (
	// DefaultAlertBudget is the number of unasked notifications a patient
	// may get per sliding hour: 3.
	DefaultAlertBudget = 3
	// DefaultQuietHours is the daily window with none, in the patient's
	// time (ParseQuietHours): 21:00–08:00.
	DefaultQuietHours = "21:00-08:00"
	// DefaultTimeZone is the patient's IANA time zone for quiet hours.
	DefaultTimeZone = "Europe/London"
)

// Budget errors: ErrDisabled (match with errors.Is), and *SpentError and
// *QuietError (match with errors.As).
var (
	// ErrDisabled: the budget allows nothing (BudgetConfig.Max ≤ 0).
	ErrDisabled = errors.New("audible budget is zero")
)

// SpentError: every slot in the sliding hour is taken. RetryAfter is when
// the oldest slot leaves the window.
type SpentError struct{ RetryAfter time.Duration }

func (e *SpentError) Error() string {
	return fmt.Sprintf("audible budget spent; a slot frees in %s", e.RetryAfter.Round(time.Second))
}

// QuietError: now is inside the patient's quiet hours; defer until Until.
type QuietError struct{ Until time.Time }

func (e *QuietError) Error() string { return "quiet hours until " + e.Until.Format(time.RFC3339) }

// QuietHours is a daily window in the patient's time zone, e.g. 21:00–08:00
// (it may wrap midnight). A zero value has no quiet hours.
type QuietHours struct {
	Start, End time.Duration // offsets from local midnight
	Loc        *time.Location
}

// ErrQuietHoursEmpty: a quiet-hours window that starts when it ends
// ("08:00-08:00"), which could mean none or all day; ParseQuietHours
// refuses it. None is "off"; no notification at all is an alert budget
// of 0.
var ErrQuietHoursEmpty = errors.New("the window starts when it ends")

// ParseQuietHours parses "HH:MM-HH:MM" (24-hour, e.g. "21:00-08:00", which
// wraps midnight) as local times in loc; nil loc is UTC. "" or "off" means
// no quiet hours. Any other shape, or an hour > 23 or minute > 59, is an
// error; a window whose start equals its end is ErrQuietHoursEmpty.
func ParseQuietHours(s string, loc *time.Location) (QuietHours, error) {
	if s == "" || s == "off" {
		return QuietHours{}, nil
	}
	a, b, ok := strings.Cut(s, "-")
	if !ok {
		return QuietHours{}, fmt.Errorf("quiet hours %q: want HH:MM-HH:MM", s)
	}
	start, err1 := parseClock(a)
	end, err2 := parseClock(b)
	if err := errors.Join(err1, err2); err != nil {
		return QuietHours{}, fmt.Errorf("quiet hours %q: %w", s, err)
	}
	if start == end {
		return QuietHours{}, fmt.Errorf("quiet hours %q: %w", s, ErrQuietHoursEmpty)
	}
	if loc == nil {
		loc = time.UTC
	}
	return QuietHours{Start: start, End: end, Loc: loc}, nil
}

func parseClock(s string) (time.Duration, error) {
	h, m, ok := strings.Cut(strings.TrimSpace(s), ":")
	hh, err1 := strconv.Atoi(h)
	mm, err2 := strconv.Atoi(m)
	if !ok || err1 != nil || err2 != nil || hh < 0 || hh > 23 || mm < 0 || mm > 59 {
		return 0, fmt.Errorf("bad time %q", s)
	}
	return time.Duration(hh)*time.Hour + time.Duration(mm)*time.Minute, nil
}

// Until returns when the quiet window containing t ends, or the zero time
// when t is not inside quiet hours.
func (q QuietHours) Until(t time.Time) time.Time {
	if q.Loc == nil || q.Start == q.End {
		return time.Time{}
	}
	lt := t.In(q.Loc)
	midnight := time.Date(lt.Year(), lt.Month(), lt.Day(), 0, 0, 0, 0, q.Loc)
	off := lt.Sub(midnight)
	if q.Start < q.End { // same-day window, e.g. 13:00–14:00
		if off >= q.Start && off < q.End {
			return midnight.Add(q.End)
		}
		return time.Time{}
	}
	// wraps midnight, e.g. 21:00–08:00
	if off >= q.Start {
		return midnight.AddDate(0, 0, 1).Add(q.End)
	}
	if off < q.End {
		return midnight.Add(q.End)
	}
	return time.Time{}
}

// BudgetStore keeps the budget's slots where every instance shares them
// (store.AlertBudget; P-18: this package never imports the store). Times
// are the budget's clock. Its methods are safe for concurrent use.
type BudgetStore interface {
	// ReserveSlot takes one slot for patient at at, atomically across
	// every caller and instance, unless max slots are already charged
	// (reserved and not refunded) after since: then it takes none, and
	// returns id 0 and when the oldest of them was reserved.
	ReserveSlot(ctx context.Context, patient string, max int, since, at time.Time) (id int64, oldest time.Time, err error)
	// RefundSlot gives slot id back: it no longer counts.
	RefundSlot(ctx context.Context, id int64) error
	// SlotsUsed counts patient's slots charged after since.
	SlotsUsed(ctx context.Context, patient string, since time.Time) (int, error)
}

// Budget is the audible budget: at most Max unasked notifications per
// patient per sliding Window, kept in its BudgetStore so every instance
// shares it (P-23). A slot is reserved atomically before sending and
// charged unless the API proves nothing was delivered.
type Budget struct {
	slots  BudgetStore
	max    int
	window time.Duration
	quiet  QuietHours
	clock  func() time.Time
}

// BudgetConfig configures NewBudget.
type BudgetConfig struct {
	// Slots keeps the reserved slots (store.AlertBudget). Required.
	Slots BudgetStore
	// Max is the number of slots per Window (--alert-budget, 3 in the
	// command); ≤ 0 disables the budget: Reserve returns ErrDisabled.
	Max int
	// Window is the sliding window; ≤ 0 means 1 h.
	Window time.Duration
	Quiet  QuietHours       // --quiet-hours
	Clock  func() time.Time // nil is time.Now
}

// NewBudget returns the budget. It fails when cfg.Slots is nil.
func NewBudget(cfg BudgetConfig) (*Budget, error) {
	if cfg.Slots == nil {
		return nil, errors.New("proactive: budget needs a slot store")
	}
	if cfg.Window <= 0 {
		cfg.Window = time.Hour
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	return &Budget{slots: cfg.Slots, max: cfg.Max, window: cfg.Window, quiet: cfg.Quiet, clock: cfg.Clock}, nil
}

// Reservation is one reserved slot. Call Refund only when the API proved
// nothing was delivered; otherwise the slot stays charged.
type Reservation struct {
	b  *Budget
	id int64
}

// Reserve takes one slot for patient, atomically: two racing callers with
// one slot left get one reservation between them. Errors: ErrDisabled,
// *QuietError (defer, don't drop), *SpentError.
func (b *Budget) Reserve(ctx context.Context, patient string) (Reservation, error) {
	if b.max <= 0 {
		return Reservation{}, ErrDisabled
	}
	now := b.clock()
	if until := b.quiet.Until(now); !until.IsZero() {
		return Reservation{}, &QuietError{Until: until}
	}
	id, oldest, err := b.slots.ReserveSlot(ctx, patient, b.max, now.Add(-b.window), now)
	if err != nil {
		return Reservation{}, fmt.Errorf("proactive: reserve: %w", err)
	}
	if id == 0 {
		retry := oldest.Add(b.window).Sub(now)
		return Reservation{}, &SpentError{RetryAfter: max(retry, time.Second)}
	}
	return Reservation{b: b, id: id}, nil
}

// Refund gives the slot back. Call it only when the API proved nothing was
// delivered (a 4xx before acceptance); a timeout or 5xx stays charged.
func (r Reservation) Refund(ctx context.Context) error {
	if r.b == nil {
		return nil
	}
	if err := r.b.slots.RefundSlot(ctx, r.id); err != nil {
		return fmt.Errorf("proactive: refund: %w", err)
	}
	return nil
}

// Used reports how many slots patient has charged in the current window
// (reserved and not refunded).
func (b *Budget) Used(ctx context.Context, patient string) (int, error) {
	n, err := b.slots.SlotsUsed(ctx, patient, b.clock().Add(-b.window))
	if err != nil {
		return 0, fmt.Errorf("proactive: used: %w", err)
	}
	return n, nil
}
