package httpapi

import (
	"errors"
	"net/http"

	"github.com/unsay/unsay/models"
	"github.com/unsay/unsay/store"
)

// Chain is one hash-chain verdict as /verify shows it (P-5): hashes,
// versions, authors' ids and times, never a value.
type Chain struct {
	URI      string    `json:"uri"`
	Intact   bool      `json:"intact"`
	BrokenAt int       `json:"brokenAt"` // first version that disagrees; 0 when intact
	Versions []Receipt `json:"versions"`
}

// Receipt is one version of a Chain.
type Receipt struct {
	Version   int                  `json:"version"`
	Hash      string               `json:"hash"`
	PrevHash  string               `json:"prevHash"`
	WrittenAt string               `json:"writtenAt"` // models.TimeLayout, UTC
	AuthorID  string               `json:"authorId"`
	AtRest    *store.AtRestReceipt `json:"atRest,omitempty"` // absent when stored as plaintext
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

// handleVerify serves GET /verify.
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
		// Anonymous: the speakable scope for every patient (DESIGN.md,
		// HTTP: /verify is public for care:// chains).
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
	writeJSON(w, http.StatusOK, chainOf(res))
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
		c := chainOf(res)
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

func chainOf(res store.VerifyResult) Chain {
	c := Chain{URI: res.URI, Intact: res.Intact, BrokenAt: res.BrokenAt, Versions: make([]Receipt, len(res.Versions))}
	for i, v := range res.Versions {
		c.Versions[i] = Receipt{
			Version:   v.N,
			Hash:      v.Hash,
			PrevHash:  v.PrevHash,
			WrittenAt: v.WrittenAt.UTC().Format(timeLayout),
			AuthorID:  v.AuthorID,
			AtRest:    v.AtRest,
		}
	}
	return c
}
