package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/unsay/unsay/models"
)

// ErrSealed: a value is stored sealed but the store has no Sealer to open it.
var ErrSealed = errors.New("value is sealed and no sealer is configured")

// ErrSealerUnavailable: the Sealer failed for a reason that is not the
// stored bytes' — its key service is unreachable, throttled or refusing
// (store/envelope's ErrKeyUnavailable; any error for which
// errors.As(err, &t) with t interface{ Temporary() bool } finds
// t.Temporary() true). Read, History, List, Since, Verify, Publish and
// Rekey return an error wrapping both this and the sealer's error: never
// ErrNotFound (the fact is not absent) and never a BrokenAt verdict (the
// chain is not broken). Nothing is served or written. Callers answer an
// internal error (MCP -32603, HTTP 500/503) and may retry.
var ErrSealerUnavailable = errors.New("the sealer's key service is unavailable")

var errNoSealer = errors.New("no sealer configured")

// errPlaintextInSealedStore: a row is marked unsealed (plaintext) in a
// store that has a Sealer. Only Rekey, sealing a store for the first time,
// expects such rows; anywhere else they are forged (someone with write
// access to the database set sealed = 0 and wrote plaintext), so reads fail
// closed (ErrNotFound to the caller, a logged reason) and Verify reports
// the version at BrokenAt (P-6).
var errPlaintextInSealedStore = errors.New("a plaintext value is stored in a store that seals values")

// temporary reports whether err is a sealer outage rather than a verdict on
// the bytes: some error in its chain has Temporary() == true.
func temporary(err error) bool {
	var t interface{ Temporary() bool }
	return errors.As(err, &t) && t.Temporary()
}

// sealerErr wraps a Sealer error, adding ErrSealerUnavailable to an outage.
func sealerErr(op string, err error) error {
	if temporary(err) {
		return fmt.Errorf("%s: %w: %w", op, ErrSealerUnavailable, err)
	}
	return fmt.Errorf("%s: %w", op, err)
}

// AAD is the additional authenticated data binding a sealed value to its
// record (P-6): "patient|domain|v{n}|audience". '|' is reserved: a
// component containing it is refused with an error wrapping ErrInvalid.
func AAD(patient, domain string, n int, a models.Audience) ([]byte, error) {
	for _, c := range []string{patient, domain, string(a)} {
		if strings.Contains(c, "|") {
			return nil, fmt.Errorf("%w: AAD component contains the reserved '|'", ErrInvalid)
		}
	}
	if n < 1 {
		return nil, fmt.Errorf("%w: AAD version must be ≥ 1", ErrInvalid)
	}
	return []byte(patient + "|" + domain + "|v" + strconv.Itoa(n) + "|" + string(a)), nil
}

// seal returns the bytes to store for v's value and whether they are
// sealed. Only v's Patient, Domain, N, Audience (the AAD) and Value are used.
func (s *Store) seal(ctx context.Context, v models.Version) ([]byte, bool, error) {
	if s.sealer == nil {
		return []byte(v.Value), false, nil
	}
	aad, err := AAD(v.Patient, v.Domain, v.N, v.Audience)
	if err != nil {
		return nil, false, err
	}
	b, err := s.sealer.Seal(ctx, aad, []byte(v.Value))
	if err != nil {
		return nil, false, sealerErr("store: seal", err)
	}
	return b, true, nil
}

// open returns r's plaintext value, opening it when sealed. With a Sealer
// configured, a row stored as plaintext is refused with
// errPlaintextInSealedStore (fail closed; see openForRekey).
func (s *Store) open(ctx context.Context, r row) (string, error) {
	if !r.sealed && s.sealer != nil {
		return "", fmt.Errorf("%s: %w", r.v.URI(), errPlaintextInSealedStore)
	}
	return s.openForRekey(ctx, r)
}

// openForRekey is open without the plaintext refusal: Rekey alone reads
// plaintext rows in a sealed store, to seal them for the first time.
func (s *Store) openForRekey(ctx context.Context, r row) (string, error) {
	if !r.sealed {
		return string(r.stored), nil
	}
	if s.sealer == nil {
		return "", fmt.Errorf("%s: %w", r.v.URI(), ErrSealed)
	}
	aad, err := AAD(r.v.Patient, r.v.Domain, r.v.N, r.v.Audience)
	if err != nil {
		return "", err
	}
	b, err := s.sealer.Open(ctx, aad, r.stored)
	if err != nil {
		return "", sealerErr("open "+r.v.URI().String(), err)
	}
	return string(b), nil
}

// failClosed turns an error from open into what a reader is told: a
// plaintext row in a sealed store is logged (where and why, never the
// value) and answered ErrNotFound; every other error is wrapped with op
// and is not ErrNotFound (an outage wraps ErrSealerUnavailable).
func (s *Store) failClosed(ctx context.Context, op string, r row, err error) error {
	if errors.Is(err, errPlaintextInSealedStore) {
		s.log.ErrorContext(ctx, "store: refusing a value stored as plaintext in a sealed store (possible tampering; run unsay verify)",
			"op", op, "uri", r.v.URI().String(), "seq", r.seq)
		return ErrNotFound
	}
	if errors.Is(err, ErrIntegrity) {
		s.log.ErrorContext(ctx, "store: refusing a version that does not match its chain hash (possible tampering; run unsay verify)",
			"op", op, "uri", r.v.URI().String(), "seq", r.seq)
	}
	return fmt.Errorf("store: %s: %w", op, err)
}
