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

var errNoSealer = errors.New("no sealer configured")

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

// seal returns the bytes to store for v's value and whether they are sealed.
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
		return nil, false, fmt.Errorf("store: seal: %w", err)
	}
	return b, true, nil
}

// open returns r's plaintext value, opening it when sealed.
func (s *Store) open(ctx context.Context, r row) (string, error) {
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
		return "", fmt.Errorf("open %s: %w", r.v.URI(), err)
	}
	return string(b), nil
}
