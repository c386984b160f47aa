package httpapi

import (
	"errors"
	"net/http"

	"github.com/unsay/unsay/models"
	"github.com/unsay/unsay/store"
)

// Chain is one hash-chain verdict as /verify shows it (P-5, P-26): hashes,
// versions, authors' ids, times and head signatures, never a value.
type Chain struct {
	URI      string `json:"uri"`
	Intact   bool   `json:"intact"`
	BrokenAt int    `json:"brokenAt"` // first version that disagrees; 0 when intact
	// Problem says what disagreed at BrokenAt, e.g. "hash does not match",
	// or store.ProblemHeadSignature for a chain rewritten with recomputed
	// hashes; absent when intact.
	Problem  string    `json:"problem,omitempty"`
	Versions []Receipt `json:"versions"`
	// Head is the chain's head (its latest version) as signed at commit.
	Head *Head `json:"head,omitempty"`
	// SigningKey is the public key head signatures verify under, so anyone
	// can check them offline.
	SigningKey SigningKey `json:"signingKey"`
}

// Head is a signed chain head (P-26).
type Head struct {
	Version   int64  `json:"version"`
	Hash      string `json:"hash"`
	Signature string `json:"signature"` // base64 Ed25519 over "unsay/v1/chain-head\n{versioned uri}\n{hash}"; "" when unsigned
	KeyID     string `json:"keyId"`
	// SignatureValid: the signature verifies under SigningKey.
	SignatureValid bool `json:"signatureValid"`
}

// SigningKey names the Ed25519 public key of a Chain's head signatures.
type SigningKey struct {
	Algorithm string `json:"alg"`       // "Ed25519"
	KeyID     string `json:"keyId"`     // store.KeyID: 16 hex digits
	PublicKey string `json:"publicKey"` // base64, 32 bytes (UNSAY_SIGNING_PUBLIC_KEY)
}

// Receipt is one version of a Chain.
type Receipt struct {
	Version   int                  `json:"version"`
	Hash      string               `json:"hash"`
	PrevHash  string               `json:"prevHash"`
	WrittenAt string               `json:"writtenAt"` // models.TimeLayout, UTC
	AuthorID  string               `json:"authorId"`
	AtRest    *store.AtRestReceipt `json:"atRest,omitempty"` // absent when stored as plaintext
	// Signature is the head signature made when this version was committed;
	// absent for a version written before heads were signed.
	Signature string `json:"signature,omitempty"`
}

// ChainList is the answer to GET /verify without a uri.
type ChainList struct {
	Intact bool    `json:"intact"` // every chain listed is intact
	Chains []Chain `json:"chains"`
}

// notFoundBody is the one 404 shape, whatever the cause (P-2).
type notFoundBody struct {
	Error string `json:"error"`
	URI   string `json:"uri"`
}

// handleVerify serves GET /verify: chain verdicts with their signed heads
// (P-26) and the public key that checks them.
//
//   - ?uri=… is public: without a token it verifies as an anonymous
//     principal holding care.read.user for every patient; with a bearer
//     token, as the token's principal (so care.read.assistant can verify
//     care-internal:// chains). 200 Chain. Anything that principal cannot
//     read — forbidden, absent, malformed — is 404 {"error": "resource not
//     found", "uri": <as asked>}, the same shape every time (P-2).
//   - without uri it lists every chain the bearer token can read (200
//     ChainList), and needs a token (401 otherwise).
//
// A token that is presented and does not verify is 401, never downgraded
// to the anonymous principal.
func (a *API) handleVerify(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	var p models.Principal
	tokenGiven := false
	if _, ok := r.Header["Authorization"]; ok {
		tp, err := a.principal(r)
		if err != nil {
			a.challenge(w, "invalid_token", "")
			writeError(w, http.StatusUnauthorized, "invalid bearer token", "")
			return
		}
		p, tokenGiven = tp, true
	}
	if !q.Has("uri") {
		if !tokenGiven {
			a.challenge(w, "", "")
			writeError(w, http.StatusUnauthorized, "listing every chain needs a bearer token; pass ?uri= to verify one", "")
			return
		}
		a.verifyAll(w, r, p)
		return
	}
	raw := q.Get("uri")
	if !tokenGiven {
		// Anonymous: the speakable scope for every patient (/verify is
		// public for care:// chains).
		p = models.System("public", models.ScopeReadUser)
	}
	res, err := a.cfg.Store.Verify(r.Context(), p, raw)
	if err == nil && missingVersion(raw, res) {
		err = store.ErrNotFound // a version that does not exist is absent too (P-2)
	}
	if errors.Is(err, store.ErrNotFound) {
		writeJSON(w, http.StatusNotFound, notFoundBody{Error: "resource not found", URI: raw})
		return
	}
	if err != nil {
		a.log.ErrorContext(r.Context(), "verify: store failure", "err", err)
		writeError(w, http.StatusInternalServerError, "internal error", "")
		return
	}
	writeJSON(w, http.StatusOK, a.chainOf(res))
}

func (a *API) verifyAll(w http.ResponseWriter, r *http.Request, p models.Principal) {
	facts, err := a.cfg.Store.List(r.Context(), p)
	if err != nil {
		a.log.ErrorContext(r.Context(), "verify: store failure", "err", err)
		writeError(w, http.StatusInternalServerError, "internal error", "")
		return
	}
	out := ChainList{Intact: true, Chains: make([]Chain, 0, len(facts))}
	for _, f := range facts {
		res, err := a.cfg.Store.Verify(r.Context(), p, f.Current.FactURI().String())
		if errors.Is(err, store.ErrNotFound) {
			continue // removed from under us, or not readable after all
		}
		if err != nil {
			a.log.ErrorContext(r.Context(), "verify: store failure", "err", err)
			writeError(w, http.StatusInternalServerError, "internal error", "")
			return
		}
		c := a.chainOf(res)
		out.Intact = out.Intact && c.Intact
		out.Chains = append(out.Chains, c)
	}
	writeJSON(w, http.StatusOK, out)
}

// missingVersion reports whether raw names a version the chain does not hold.
func missingVersion(raw string, res store.VerifyResult) bool {
	u, err := models.ParseURI(raw)
	return err != nil || u.Version > len(res.Versions)
}

func (a *API) chainOf(res store.VerifyResult) Chain {
	pub := a.cfg.Store.PublicKey()
	c := Chain{URI: res.URI, Intact: res.Intact, BrokenAt: res.BrokenAt, Problem: res.Problem, Versions: make([]Receipt, len(res.Versions)),
		SigningKey: SigningKey{Algorithm: "Ed25519", KeyID: store.KeyID(pub), PublicKey: store.FormatPublicKey(pub)}}
	for i, v := range res.Versions {
		c.Versions[i] = Receipt{
			Version:   v.N,
			Hash:      v.Hash,
			PrevHash:  v.PrevHash,
			WrittenAt: v.WrittenAt.UTC().Format(timeLayout),
			AuthorID:  v.AuthorID,
			AtRest:    v.AtRest,
			Signature: v.Signature,
		}
	}
	if h := res.Head; h != nil {
		c.Head = &Head{Version: h.N, Hash: h.Hash, Signature: h.Signature, KeyID: h.KeyID, SignatureValid: h.Valid}
	}
	return c
}
