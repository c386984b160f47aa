package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/unsay/unsay/models"
)

// Verify recomputes the chain of the fact named by rawURI (P-5), opening
// each sealed value, and checks its signed heads (P-26); ErrNotFound if p
// cannot read it (P-1, P-2, P-21).
//
// BrokenAt is the first version n whose stored prevHash is not version
// n-1's stored hash ("" for n = 1), whose number is out of sequence, whose
// recomputed VersionHash over its plaintext (AudioVersionHash over the
// description and the clip's bytes, for a version with audio) differs from
// its stored hash, whose sealed clip fails to open,
// whose sealed value fails to open (one failure shape for both), or — when
// the store has a Sealer — whose value is stored as plaintext (P-6: forged
// by someone with write access to the database, or not yet rekeyed); or
// whose head signature (made when it was committed) does not verify under
// the store's public key (ProblemHeadSignature: a chain rewritten with
// recomputed hashes by someone holding the database and the data key).
// The chain's head must be signed, and so must every version after the
// first signed one (ProblemHeadUnsigned); versions written before heads
// were signed may not be, and a database not yet signed (SignLegacyHeads)
// passes unsigned with Head.Valid false. Problem says what disagreed at
// BrokenAt. Versions holds a receipt for every version (never a value), and
// Head the head as signed.
//
// No verdict is given when a verdict cannot be had: a sealed value with no
// Sealer configured returns an error wrapping ErrSealed, and a sealer outage
// (a temporary error: KMS unreachable, throttled) returns an error wrapping
// ErrSealerUnavailable and the sealer's error — an outage is not a broken chain.
func (s *Store) Verify(ctx context.Context, p models.Principal, rawURI string) (VerifyResult, error) {
	u, err := parseReadable(p, rawURI)
	if err != nil {
		return VerifyResult{}, err
	}
	rs, err := s.historyRows(ctx, u)
	if err != nil {
		return VerifyResult{}, err
	}
	if u.Version > len(rs) {
		return VerifyResult{}, ErrNotFound
	}
	legacy, err := s.legacyUnsigned(ctx, s.db)
	if err != nil {
		return VerifyResult{}, err
	}
	res := VerifyResult{URI: u.Unversioned().String(), Intact: true}
	prev, signedSeen := "", false
	for i, r := range rs {
		rec := VersionReceipt{N: r.v.N, Hash: r.v.Hash, PrevHash: r.v.PrevHash, WrittenAt: r.v.WrittenAt, AuthorID: r.v.AuthorID,
			Signature: r.headSig, KeyID: r.headKey}
		ok := r.v.N == i+1 && r.v.PrevHash == prev
		problem := "out of sequence, or prevHash does not match"
		if r.sealed {
			if s.sealer != nil {
				if aad, err := AAD(r.v.Patient, r.v.Domain, r.v.N, r.v.Audience); err == nil {
					rec.AtRest, _ = s.sealer.Receipt(aad, r.stored)
				}
			}
			if rec.AtRest == nil {
				rec.AtRest = &AtRestReceipt{Provider: "unknown"}
			}
		}
		if ok {
			value, err := s.open(ctx, r)
			audioProblem := false
			if err == nil {
				r.v.Value = value
				if err = s.loadAudio(ctx, s.db, &r, false); err != nil && !errors.Is(err, ErrSealed) && !errors.Is(err, ErrSealerUnavailable) {
					audioProblem = true
				}
			}
			switch {
			case errors.Is(err, ErrSealed), errors.Is(err, ErrSealerUnavailable):
				return VerifyResult{}, fmt.Errorf("store: verify: %w", err)
			case audioProblem:
				ok, problem = false, "the clip does not open"
			case err != nil:
				ok, problem = false, "the value does not open"
			default: // over the description and, for a clip, its bytes (AudioVersionHash)
				ok, problem = hashOf(r.v) == r.v.Hash, "hash does not match"
			}
		}
		if ok {
			isHead := i == len(rs)-1
			switch {
			case r.headSig != "":
				signedSeen = true
				ok, problem = s.verifyHead(chainHeadPreimage(r.v.URI(), r.v.Hash), r.headSig), ProblemHeadSignature
			case legacy:
				// written before heads were signed; adopted at the next start
			case signedSeen || isHead:
				ok, problem = false, ProblemHeadUnsigned
			}
		}
		if !ok && res.Intact {
			res.Intact, res.BrokenAt, res.Problem = false, i+1, problem
		}
		res.Versions = append(res.Versions, rec)
		prev = r.v.Hash
	}
	if len(rs) > 0 {
		res.Head = s.signedHead(rs[len(rs)-1])
	}
	return res, nil
}

// VerifyAll verifies the chain of every fact p may read (FactURIs order).
func (s *Store) VerifyAll(ctx context.Context, p models.Principal) ([]VerifyResult, error) {
	us, err := s.FactURIs(ctx, p)
	if err != nil {
		return nil, err
	}
	out := make([]VerifyResult, 0, len(us))
	for _, u := range us {
		r, err := s.Verify(ctx, p, u.String())
		if err != nil {
			return nil, fmt.Errorf("%s: %w", u, err)
		}
		out = append(out, r)
	}
	return out, nil
}
