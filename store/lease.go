package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"
)

// Leases let several instances agree that exactly one of them does a job at
// a time — speaking for one patient (bridge/speech's speaker leases), the
// running server a database has (`unsay serve`'s lease). A lease is a row
// {name, holder, expires}: whoever holds a live lease keeps it by renewing
// it before it expires; a lease whose holder stopped renewing is free from
// its expiry on, and the next AcquireLease takes it. Expiry is judged by the
// store's clock (Options.Clock), so instances should run NTP-synchronised
// clocks; a skew of s seconds lets a dead holder's lease be taken s seconds
// early or late. Works on SQLite and Postgres alike.

// ErrLeaseInput: a lease name or holder is empty or longer than 256 bytes,
// or a ttl is not positive. Nothing was written. errors.Is(err, ErrInvalid) too.
var ErrLeaseInput = fmt.Errorf("%w: lease name and holder must be 1–256 bytes and ttl positive", ErrInvalid)

func checkLease(name, holder string, ttl time.Duration, needTTL bool) error {
	if name == "" || len(name) > 256 || holder == "" || len(holder) > 256 || (needTTL && ttl <= 0) {
		return ErrLeaseInput
	}
	return nil
}

// AcquireLease takes the lease name for holder until now+ttl if it is free
// (never taken, released, or expired) or already holder's (then it is
// extended). It reports whether holder holds it now. It is one atomic
// upsert, so of several instances racing for a free lease exactly one wins.
// ttl is a duration (≤ 10 s for the speech lease, so a dead holder's lease
// is taken within 15 s). Errors: ErrLeaseInput, the database.
func (s *Store) AcquireLease(ctx context.Context, name, holder string, ttl time.Duration) (bool, error) {
	if err := checkLease(name, holder, ttl, true); err != nil {
		return false, err
	}
	now := s.clock()
	res, err := s.db.ExecContext(ctx, s.d.rebind(`INSERT INTO leases (name, holder, expires_ms) VALUES (?, ?, ?)
		ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, expires_ms = excluded.expires_ms
		WHERE leases.holder = excluded.holder OR leases.expires_ms <= ?`),
		name, holder, now.Add(ttl).UnixMilli(), now.UnixMilli())
	if err != nil {
		return false, fmt.Errorf("store: acquire lease %q: %w", name, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("store: acquire lease %q: %w", name, err)
	}
	return n == 1, nil
}

// RenewLease extends holder's live lease name to now+ttl. It reports false
// — and changes nothing — when holder does not hold a live lease (it
// expired, even if nobody took it since: the holder must treat the lease as
// lost and acquire it again). Errors: ErrLeaseInput, the database.
func (s *Store) RenewLease(ctx context.Context, name, holder string, ttl time.Duration) (bool, error) {
	if err := checkLease(name, holder, ttl, true); err != nil {
		return false, err
	}
	now := s.clock()
	res, err := s.db.ExecContext(ctx, s.d.rebind(`UPDATE leases SET expires_ms = ?
		WHERE name = ? AND holder = ? AND expires_ms > ?`),
		now.Add(ttl).UnixMilli(), name, holder, now.UnixMilli())
	if err != nil {
		return false, fmt.Errorf("store: renew lease %q: %w", name, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("store: renew lease %q: %w", name, err)
	}
	return n == 1, nil
}

// ReleaseLease gives up holder's lease name at once, so another instance
// may take it without waiting for it to expire. Releasing a lease holder
// does not hold is a no-op. Errors: ErrLeaseInput, the database.
func (s *Store) ReleaseLease(ctx context.Context, name, holder string) error {
	if err := checkLease(name, holder, 0, false); err != nil {
		return err
	}
	if _, err := s.db.ExecContext(ctx, s.d.rebind(`DELETE FROM leases WHERE name = ? AND holder = ?`), name, holder); err != nil {
		return fmt.Errorf("store: release lease %q: %w", name, err)
	}
	return nil
}

// LeaseHolder returns who holds the live lease name and when it expires,
// or ("", zero time, nil) when nobody does (never taken, released or
// expired by the store's clock). Errors: the database.
func (s *Store) LeaseHolder(ctx context.Context, name string) (holder string, expires time.Time, err error) {
	var ms int64
	err = s.db.QueryRowContext(ctx, s.d.rebind(`SELECT holder, expires_ms FROM leases WHERE name = ? AND expires_ms > ?`),
		name, s.clock().UnixMilli()).Scan(&holder, &ms)
	if errors.Is(err, sql.ErrNoRows) {
		return "", time.Time{}, nil
	}
	if err != nil {
		return "", time.Time{}, fmt.Errorf("store: lease holder %q: %w", name, err)
	}
	return holder, time.UnixMilli(ms).UTC(), nil
}

// LeaseKeeper holds a set of leases for one holder (this instance's id):
// it acquires each free one, renews the ones it holds every TTL/3, and
// tells the caller when it gains or loses one. The zero value is not
// usable; set Store, Holder and TTL.
type LeaseKeeper struct {
	Store  *Store
	Holder string        // this instance's id, e.g. hostname:pid:random
	TTL    time.Duration // lease lifetime; ≤ 10 s so a dead holder's lease moves within 15 s

	mu   sync.Mutex
	held map[string]time.Time // name → when our lease surely expires (by the local clock)
}

// Held returns the names of the leases this keeper holds now, sorted
// (for /readyz).
func (k *LeaseKeeper) Held() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	out := make([]string, 0, len(k.held))
	for n := range k.held {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// Run keeps the leases in names until ctx ends: every TTL/3 it renews each
// lease it holds and tries to acquire each it does not. onAcquire(name) is
// called when it gains a lease; onLose(name) when it loses one — a renewal
// refused, or no successful renewal for so long that the lease may have
// expired (onLose is called before that instant, so two instances never
// both believe they hold it, clocks permitting). When ctx ends, Run
// releases every lease it holds (calling onLose for each) and returns.
// The callbacks run on Run's goroutine and should not block for long.
// Errors: ErrLeaseInput for an unusable keeper; database errors are
// retried, not returned.
func (k *LeaseKeeper) Run(ctx context.Context, names []string, onAcquire, onLose func(name string)) error {
	if k.Store == nil || checkLease("x", k.Holder, k.TTL, true) != nil {
		return ErrLeaseInput
	}
	if onAcquire == nil {
		onAcquire = func(string) {}
	}
	if onLose == nil {
		onLose = func(string) {}
	}
	k.mu.Lock()
	k.held = map[string]time.Time{}
	k.mu.Unlock()
	every := k.TTL / 3
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		k.tick(ctx, names, onAcquire, onLose)
		select {
		case <-ctx.Done():
			k.releaseAll(onLose)
			return nil
		case <-t.C:
		}
	}
}

func (k *LeaseKeeper) tick(ctx context.Context, names []string, onAcquire, onLose func(string)) {
	for _, name := range names {
		if ctx.Err() != nil {
			return
		}
		start := time.Now()
		k.mu.Lock()
		until, held := k.held[name]
		k.mu.Unlock()
		if held {
			ok, err := k.Store.RenewLease(ctx, name, k.Holder, k.TTL)
			switch {
			case err == nil && ok:
				k.setHeld(name, start.Add(k.TTL))
			case err == nil && !ok, time.Now().Add(k.TTL / 3).After(until):
				// Refused, or renewals are failing and the lease could
				// expire before the next tick: let it go now.
				k.drop(name)
				onLose(name)
			default:
				k.Store.log.Warn("store: renew lease", "lease", name, "err", err)
			}
			continue
		}
		ok, err := k.Store.AcquireLease(ctx, name, k.Holder, k.TTL)
		if err != nil {
			if ctx.Err() == nil {
				k.Store.log.Warn("store: acquire lease", "lease", name, "err", err)
			}
			continue
		}
		if ok {
			k.setHeld(name, start.Add(k.TTL))
			onAcquire(name)
		}
	}
}

func (k *LeaseKeeper) setHeld(name string, until time.Time) {
	k.mu.Lock()
	k.held[name] = until
	k.mu.Unlock()
}

func (k *LeaseKeeper) drop(name string) {
	k.mu.Lock()
	delete(k.held, name)
	k.mu.Unlock()
}

func (k *LeaseKeeper) releaseAll(onLose func(string)) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, name := range k.Held() {
		if err := k.Store.ReleaseLease(ctx, name, k.Holder); err != nil {
			k.Store.log.Warn("store: release lease", "lease", name, "err", err)
		}
		k.drop(name)
		onLose(name)
	}
}
