package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/unsay/unsay/models"
)

// ErrAudioCorrupt: a stored clip does not match its version's chain hash
// (P-5) — a flipped byte, bytes moved between versions, a value and a clip
// swapped. It is never served as the version's sound; `unsay verify`
// locates the version. Not ErrNotFound: the fact is not absent.
var ErrAudioCorrupt = errors.New("the stored clip does not match its version hash")

// sealAudio returns the bytes to store for v's clip b: sealed by the same
// Sealer with the same AAD as v's value (P-6; one sealed flag covers both),
// or b itself in a plaintext store.
func (s *Store) sealAudio(ctx context.Context, v models.Version, b []byte) ([]byte, error) {
	if s.sealer == nil {
		return b, nil
	}
	aad, err := AAD(v.Patient, v.Domain, v.N, v.Audience)
	if err != nil {
		return nil, err
	}
	out, err := s.sealer.Seal(ctx, aad, b)
	if err != nil {
		return nil, sealerErr("store: seal audio", err)
	}
	return out, nil
}

// openAudio opens the stored clip bytes of row r (sealed when r is), with
// the same refusal of plaintext in a sealed store as open.
func (s *Store) openAudio(ctx context.Context, r row, stored []byte, forRekey bool) ([]byte, error) {
	if !forRekey && !r.sealed && s.sealer != nil {
		return nil, fmt.Errorf("%s audio: %w", r.v.URI(), errPlaintextInSealedStore)
	}
	if !r.sealed {
		return stored, nil
	}
	if s.sealer == nil {
		return nil, fmt.Errorf("%s audio: %w", r.v.URI(), ErrSealed)
	}
	aad, err := AAD(r.v.Patient, r.v.Domain, r.v.N, r.v.Audience)
	if err != nil {
		return nil, err
	}
	b, err := s.sealer.Open(ctx, aad, stored)
	if err != nil {
		return nil, sealerErr("open audio "+r.v.URI().String(), err)
	}
	return b, nil
}

// storedAudio reads the audio column of row r through q.
func (s *Store) storedAudio(ctx context.Context, q queryRower, r row) ([]byte, error) {
	var b []byte
	if err := s.queryRowPrepared(ctx, q, s.d.rebind(`SELECT audio FROM versions WHERE seq = ?`), r.seq).Scan(&b); err != nil {
		return nil, fmt.Errorf("store: read audio: %w", err)
	}
	return b, nil
}

// loadAudio fills r.v.Audio's Data and SHA256 from the database (opening
// sealed bytes) — a no-op for a text-only version. It does not check the
// chain hash (Verify and ReadAudio do).
func (s *Store) loadAudio(ctx context.Context, q queryRower, r *row, forRekey bool) error {
	if r.v.Audio == nil {
		return nil
	}
	stored, err := s.storedAudio(ctx, q, *r)
	if err != nil {
		return err
	}
	b, err := s.openAudio(ctx, *r, stored, forRekey)
	if err != nil {
		return err
	}
	a := *r.v.Audio
	a.Data, a.SHA256 = b, sha256Hex(b)
	r.v.Audio = &a
	return nil
}

// ReadAudio is Read with the version's clip loaded: when the version
// carries audio, its bytes (Audio.Data, opened when sealed) and digest, and
// its chain hash recomputed over the description and the bytes (P-5) — a
// clip that does not match is ErrAudioCorrupt, never served. Every check
// and every ErrNotFound is Read's (P-1, P-2, P-21). A text-only version is
// returned as Read returns it.
func (s *Store) ReadAudio(ctx context.Context, p models.Principal, rawURI string) (ReadResult, error) {
	r, err := s.readRow(ctx, p, rawURI)
	if err != nil {
		return ReadResult{}, err
	}
	if err := s.loadAudio(ctx, s.db, &r, false); err != nil {
		return ReadResult{}, s.failClosed(ctx, "read audio", r, err)
	}
	if r.v.Audio != nil && hashOf(r.v) != r.v.Hash {
		s.log.ErrorContext(ctx, "store: refusing a clip that does not match its version hash (run unsay verify)",
			"uri", r.v.URI().String(), "seq", r.seq)
		return ReadResult{}, fmt.Errorf("store: read %s: %w", r.v.URI(), ErrAudioCorrupt)
	}
	return ReadResult{Version: r.v, Latest: r.latest}, nil
}
