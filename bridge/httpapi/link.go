package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/unsay/unsay/bridge/auth"
	"github.com/unsay/unsay/models"
	"github.com/unsay/unsay/store"
)

// MaxLinkBody caps a /link body: 4 KiB.
const MaxLinkBody = 4 << 10

// LinkRequest is the JSON body of POST /link.
type LinkRequest struct {
	Patient string `json:"patient"`
}

// LinkResponse is the answer to POST /link (201).
type LinkResponse struct {
	Code      string `json:"code"`      // six digits, 100000–999999, single use
	ExpiresAt string `json:"expiresAt"` // RFC 3339, UTC
	// Note tells the carer when the new code retired the oldest live one
	// (at most store.LinkMaxLiveCodes per patient): "3 codes were already
	// live for ray; the oldest, valid until 10:24 UTC, no longer works."
	Note string `json:"note,omitempty"`
}

// handleLink serves POST /link {patient}: a carer holding a bearer token
// with care.link bound to the patient creates a device-linking code
// (store.CreateLinkCode) → 201 LinkResponse. care.link is its own scope:
// care.write does not imply it (a write token is a clinician's; linking an
// Echo is a carer's errand, and the carer's token writes nothing). Refusals:
// 401 no or invalid token (WWW-Authenticate names the metadata; 429 with
// Retry-After past the source's refusal budget, as on /write), 403 without
// care.link (insufficient_scope) or for a patient the token is not bound
// to, 404 for a patient with no care record (field patient), 413 over
// MaxLinkBody, 400 a malformed body naming the field, 503 with
// Retry-After when the store cannot commit. The code is never logged.
func (a *API) handleLink(w http.ResponseWriter, r *http.Request) {
	p, err := a.principal(r)
	if err != nil {
		msg, code := "invalid bearer token", "invalid_token"
		if errors.Is(err, auth.ErrNoToken) {
			msg, code = "a bearer token with care.link is required", ""
		}
		if ok, wait := a.refusals.take(sourceOf(r), a.now()); !ok {
			w.Header().Set("Retry-After", retryAfterSeconds(wait))
			writeError(w, http.StatusTooManyRequests, fmt.Sprintf("too many refused attempts from this address: retry after %s s", retryAfterSeconds(wait)), "")
			return
		}
		a.challenge(w, code, "")
		writeError(w, http.StatusUnauthorized, msg, "")
		return
	}
	if !p.Can(models.ScopeLink) {
		a.challenge(w, "insufficient_scope", models.ScopeLink)
		writeError(w, http.StatusForbidden, "the token does not hold care.link", "")
		return
	}
	body, tooLarge, err := readBody(w, r, MaxLinkBody)
	if tooLarge {
		writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("body exceeds %d bytes", MaxLinkBody), "")
		return
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, "could not read the body", "")
		return
	}
	if ve := exactKeys(body, linkKeys); ve != nil {
		writeError(w, http.StatusBadRequest, ve.Reason, ve.Field)
		return
	}
	var req LinkRequest
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		ve := jsonError(err)
		writeError(w, http.StatusBadRequest, ve.Reason, ve.Field)
		return
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		writeError(w, http.StatusBadRequest, "body must hold exactly one JSON object", "body")
		return
	}
	if !models.ValidID(req.Patient) {
		writeError(w, http.StatusBadRequest, "must be 1-64 characters of a-z 0-9 _ . -", "patient")
		return
	}
	if !p.CanAccessPatient(req.Patient) {
		writeError(w, http.StatusForbidden, "the token is not bound to this patient", "patient")
		return
	}
	// A patient with no care record (a mistyped id, or nothing written for
	// him yet): a code would link an Echo to an empty plan.
	if facts, err := a.cfg.Store.List(r.Context(), linkCheck(req.Patient)); err == nil && len(facts) == 0 {
		writeError(w, http.StatusNotFound, fmt.Sprintf("no care record for patient %q: nothing has been written for them; check the id", req.Patient), "patient")
		return
	}
	var note string
	if n, oldest, err := a.cfg.Store.LiveLinkCodes(r.Context(), req.Patient, a.now()); err == nil && n >= store.LinkMaxLiveCodes {
		note = fmt.Sprintf("%d codes were already live for %s; the oldest, valid until %s UTC, no longer works.", n, req.Patient, oldest.Format("15:04"))
	}
	code, expires, err := a.cfg.Store.CreateLinkCode(r.Context(), req.Patient, a.now())
	var (
		ve *store.ValidationError
		ue *store.UnavailableError
	)
	switch {
	case errors.As(err, &ve):
		writeError(w, http.StatusBadRequest, ve.Reason, ve.Field)
		return
	case errors.As(err, &ue):
		a.log.ErrorContext(r.Context(), "link: the store cannot commit", "reason", ue.Reason, "actor", p.Subject, "err", ue.Err)
		w.Header().Set("Retry-After", retryAfterSeconds(ue.RetryAfter))
		writeError(w, http.StatusServiceUnavailable, "the store cannot commit right now: "+ue.Reason+"; retry later", "")
		return
	case err != nil:
		a.log.ErrorContext(r.Context(), "link: store failure", "actor", p.Subject, "patient", req.Patient, "err", err)
		writeError(w, http.StatusInternalServerError, "internal error", "")
		return
	}
	a.log.InfoContext(r.Context(), "link code created", "actor", p.Subject, "patient", req.Patient, "expires_at", expires.UTC())
	writeJSON(w, http.StatusCreated, LinkResponse{Code: code, ExpiresAt: expires.UTC().Format(timeLayout), Note: note})
}

// linkCheck is the server-internal principal that asks whether patient has
// any fact, of either audience, before a code is made for him. It never
// leaves the handler: the caller learns only that the record exists.
func linkCheck(patient string) models.Principal {
	return models.Principal{Subject: "unsay-link-check", Scopes: []models.Scope{models.ScopeReadUser, models.ScopeReadAssistant}, Patients: []string{patient}}
}

// timeLayout is RFC 3339 with milliseconds, UTC.
const timeLayout = models.TimeLayout

// linkKeys are POST /link's fields, spelled exactly (see exactKeys).
var linkKeys = map[string]bool{"patient": true}
