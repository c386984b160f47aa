package httpapi

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/unsay/unsay/bridge/auth"
	"github.com/unsay/unsay/bridge/caretopic"
	"github.com/unsay/unsay/models"
	"github.com/unsay/unsay/store"
)

// Signed-write protocol (P-12).
const (
	// HeaderTimestamp carries the signing time: Unix seconds, decimal digits only.
	HeaderTimestamp = "X-Unsay-Timestamp"
	// HeaderSignature carries "v1=" + lowercase hex HMAC-SHA256(secret, timestamp + "." + rawBody).
	HeaderSignature = "X-Unsay-Signature"
	// SignatureWindow is how far (either way) a signed timestamp may be from
	// the server clock: 300 s.
	SignatureWindow = 300 * time.Second
	// MaxWriteBody caps a /write body without its audio: 256 KiB; more is
	// answered 413.
	MaxWriteBody = 256 << 10
	// MaxAudioWriteBody caps a /write body that carries a clip: MaxWriteBody
	// plus the standard base64 of models.MaxAudioBytes (1 MiB of audio).
	MaxAudioWriteBody = MaxWriteBody + (models.MaxAudioBytes+2)/3*4
	// DevWriteSecret is the development write secret used when
	// UNSAY_WRITE_SECRET is unset; the startup line must announce it.
	DevWriteSecret = "unsay-development-write-secret-NOT-FOR-DEPLOYMENT"
)

// Audit vocabulary for /write rows (store.AuditEntry).
const (
	// ActorHMAC is the audit actor of a write whose signature verified:
	// some holder of the shared write secret, not a person.
	ActorHMAC = "hmac"
	// ActorAnonymous is the audit actor of an attempt whose credential did
	// not verify (or that carried none).
	ActorAnonymous = "anonymous"
	viaHMAC        = "hmac"
	viaBearer      = "bearer"
	outcomeOK      = "accepted"
	outcomeRefused = "refused"
)

// SignWrite returns the X-Unsay-Signature value for body signed at ts
// (Unix seconds): "v1=" + lowercase hex HMAC-SHA256(secret, "{ts}." + body).
// The server verifies exactly these bytes before parsing anything.
func SignWrite(secret []byte, ts int64, body []byte) string {
	return "v1=" + hex.EncodeToString(writeMAC(secret, strconv.FormatInt(ts, 10), body))
}

func writeMAC(secret []byte, ts string, body []byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(ts))
	m.Write([]byte{'.'})
	m.Write(body)
	return m.Sum(nil)
}

// WriteRequest is the JSON body of POST /write. Unknown fields are refused.
// The HTTP layer checks only the body's shape (one JSON object, each key
// once and spelled exactly, the documented types, UTF-8 without lone
// surrogate escapes, staleAfter as RFC 3339); every rule about the values
// is store.Validate's, the one write validator.
type WriteRequest struct {
	Patient  string          `json:"patient"`
	Domain   string          `json:"domain"`
	Audience models.Audience `json:"audience"` // "user" or "assistant"; required, fixed per domain (P-3)
	// Value is the instruction: a speakable (user) value at most
	// models.MaxSpeakableValueRunes characters in any script, any value at
	// most models.MaxValueBytes bytes of UTF-8 (which that many characters
	// always fit in), only characters XML 1.0 allows.
	Value       string   `json:"value"`
	AuthorID    string   `json:"authorId"`
	AuthorLabel string   `json:"authorLabel"`          // "Sarah Okafor, physio"
	StaleAfter  string   `json:"staleAfter,omitempty"` // RFC 3339; empty: never stale
	Priority    *float64 `json:"priority,omitempty"`   // 0…1, a hint only (P-4)
	// Audio is a clip the fact carries besides its description (Value):
	// standard base64 (RFC 4648 §4, padded) of at most models.MaxAudioBytes
	// (1 MiB), with AudioType "audio/mpeg" or "audio/wav". The signature
	// covers the body, so the clip's bytes too. store.Validate checks the
	// container (a mislabelled file is refused saying what it is) and that
	// a speakable clip is an MP3 Alexa plays.
	Audio     string `json:"audio,omitempty"`
	AudioType string `json:"audioType,omitempty"`
	// ExistingTopic says the writer means to revise a topic on record: for
	// a patient with facts on record, a domain he has no fact of is then
	// refused 409 (field "domain", naming his topics the writer may read
	// or write), nothing written — a mistyped "walkng" would otherwise be
	// spoken to him at once beside the instruction it meant to revise
	// (finding U12). `unsay write` sets it unless --new-topic is given.
	// Absent or false: a new topic is created, as before. Either way a
	// new topic whose spoken name is another topic's is refused 409
	// (finding V2, newTopicRefusal).
	ExistingTopic bool `json:"existingTopic,omitempty"`
	// ExistingPatient says the writer means a patient on record: a patient
	// with no facts on record is then refused 409 (field "patient"), nothing
	// written — a mistyped "rayy" would otherwise be saved as a new patient
	// while Ray kept the instruction it meant to revise (finding V6a).
	// `unsay write` sets it unless --new-patient is given. Absent or false:
	// a write may create a patient's first fact, as before.
	ExistingPatient bool `json:"existingPatient,omitempty"`
}

// WriteResponse is the answer to an accepted (201), unchanged (200) or
// replayed (200) write.
type WriteResponse struct {
	URI         string `json:"uri"` // versioned: care://ray/weight_bearing/v3
	Version     int    `json:"version"`
	Hash        string `json:"hash"`
	Subscribers int    `json:"subscribers"` // authorized sessions subscribed at commit
	Replayed    bool   `json:"replayed,omitempty"`
	// Unchanged: the write repeated the current version (store.PublishResult.Unchanged);
	// nothing was written and uri, version, hash name the current version.
	Unchanged bool `json:"unchanged,omitempty"`
	// Audio describes the clip the version carries, when it has one.
	Audio *WriteAudio `json:"audio,omitempty"`
	// NewPatient: this write created the patient's first fact — nothing
	// was on record for this patient id before, so a typo in it sends the
	// change to nobody. Set only on version 1 of a fact.
	NewPatient bool `json:"newPatient,omitempty"`
	// NewTopic: this write created the first fact of this domain for a
	// patient already on record — a typo in the domain ("walkng") makes a
	// new instruction and leaves the one it meant to revise current.
	// Topics names the patient's other domains the writer may read or write
	// (sorted, names only) so the writer can see which one was meant. Set
	// only on version 1 of a fact.
	NewTopic bool     `json:"newTopic,omitempty"`
	Topics   []string `json:"topics,omitempty"`
}

// WriteAudio is what the store found in a written clip's headers.
type WriteAudio struct {
	MIMEType   string `json:"mimeType"`
	Size       int    `json:"size"`       // bytes
	DurationMs int64  `json:"durationMs"` // milliseconds
	Alexa      bool   `json:"alexa"`      // an MP3 Alexa's SSML <audio> plays
}

// attempt is what the audit row of one /write records.
type attempt struct {
	actor  string
	via    string
	uri    string
	author string
}

// handleWrite serves POST /write (P-12, P-14):
//
//   - the body is read raw, capped at MaxWriteBody (413 too_large);
//   - it is authenticated before it is parsed: EITHER an HMAC signature
//     (HeaderTimestamp, HeaderSignature; 401 bad_signature, 401
//     stale_timestamp outside ±SignatureWindow) OR a bearer token with
//     care.write (401 bad_signature for a token that does not verify, 403
//     forbidden without care.write); not both (400 invalid);
//   - a source past RefusalBurst refused, unauthenticated attempts (one
//     more per RefusalEvery) is answered 429 with Retry-After instead of
//     401, and those answers are audited as one row per kind with a count
//     (rate_limited); a good credential from the same source is served;
//   - then parsed for shape (400 invalid naming the field) and validated by
//     store.Validate (400 invalid naming the field and the rule: XML-
//     forbidden characters, a speakable value over
//     models.MaxSpeakableValueRunes characters, …);
//   - a bearer token's sub must equal authorId (403 forbidden) and the
//     token must be bound to the patient (403 wrong_patient); an
//     assistant-only fact — audience assistant, or a domain that is —
//     needs care.write.assistant too (403 forbidden, the same answer
//     whether or not the domain exists). A verified signature is a
//     clinician system's and holds every write right;
//   - store.Publish commits (201), or finds the write repeats the current
//     version — same value, audience, authorId, authorLabel, staleAfter and
//     priority — (200, "unchanged": true, the current version, nothing
//     written, audited accepted/ok), or recognises a replayed signed request
//     through its idempotency key (200, "replayed": true, nothing written —
//     also when the replay comes after the write's own staleAfter passed,
//     which refuses a new write: store.ReplayOf),
//     or refuses an audience change (409 audience_change, nothing written);
//   - a store that cannot commit (a full or read-only disk, an unreachable
//     database, a SQLite file another process holds locked past the busy
//     timeout) is 503 with Retry-After and the reason, nothing written,
//     after at most one busy timeout (T4);
//   - a client that hangs up before the write committed is audited
//     abandoned (nothing written) and logged at INFO, not as a store failure.
//
// Every path appends one audit row with a closed reason (repeats of the
// last row collapse into it with a count). The actor is ActorHMAC for a
// verified signature, the token's sub for a verified token, ActorAnonymous
// otherwise. A store that cannot commit cannot keep the row either: the
// attempt's row then waits in memory (pendingAudit) and is appended once
// writes commit again; a 503 does not wait for it.
func (a *API) handleWrite(w http.ResponseWriter, r *http.Request) {
	at := attempt{actor: ActorAnonymous, via: viaHMAC}
	_, hasAuthz := r.Header["Authorization"]
	_, hasSig := r.Header[HeaderSignature]
	_, hasTS := r.Header[HeaderTimestamp]
	var principal models.Principal
	if hasAuthz {
		at.via = viaBearer
		if hasSig || hasTS {
			a.refuseWrite(w, r, at, http.StatusBadRequest, store.ReasonInvalid, "send either a bearer token or a signature, not both", "")
			return
		}
		p, err := a.principal(r)
		if errors.Is(err, auth.ErrNoToken) {
			a.refuseUnauthenticated(w, r, at, "", store.ReasonBadSignature, "the Authorization header holds no bearer token")
			return
		}
		if err != nil {
			a.refuseUnauthenticated(w, r, at, "invalid_token", store.ReasonBadSignature, "invalid bearer token")
			return
		}
		at.actor = p.Subject
		if !p.Can(models.ScopeWrite) {
			a.challenge(w, "insufficient_scope", models.ScopeWrite)
			a.refuseWrite(w, r, at, http.StatusForbidden, store.ReasonForbidden, "the token does not hold care.write", "")
			return
		}
		principal = p
	}

	body, tooLarge, err := readBody(w, r, MaxAudioWriteBody)
	if tooLarge {
		a.refuseWrite(w, r, at, http.StatusRequestEntityTooLarge, store.ReasonTooLarge,
			fmt.Sprintf("body exceeds %d bytes (%d bytes without its audio; a clip may be at most %d bytes)", MaxAudioWriteBody, MaxWriteBody, models.MaxAudioBytes), "")
		return
	}
	if err != nil {
		if r.Context().Err() != nil {
			a.abandonWrite(r, at, "while sending the body")
			return
		}
		a.refuseWrite(w, r, at, http.StatusBadRequest, store.ReasonInvalid, "could not read the body", "")
		return
	}

	var idempotencyKey string
	if !hasAuthz {
		key, reason, msg := a.checkSignature(r, body)
		if reason != "" {
			a.refuseUnauthenticated(w, r, at, "", reason, msg)
			return
		}
		at.actor, idempotencyKey = ActorHMAC, key
	}

	req, verr := parseWriteRequest(body)
	if req != nil {
		at.author = req.AuthorID
		at.uri = requestURI(req)
		if len(body)-len(req.Audio) > MaxWriteBody {
			a.refuseWrite(w, r, at, http.StatusRequestEntityTooLarge, store.ReasonTooLarge, fmt.Sprintf("body exceeds %d bytes without its audio", MaxWriteBody), "")
			return
		}
	} else if len(body) > MaxWriteBody {
		a.refuseWrite(w, r, at, http.StatusRequestEntityTooLarge, store.ReasonTooLarge, fmt.Sprintf("body exceeds %d bytes", MaxWriteBody), "")
		return
	}
	if verr != nil {
		a.refuseWrite(w, r, at, http.StatusBadRequest, store.ReasonInvalid, verr.Reason, verr.Field)
		return
	}
	in, verr := req.input()
	var replay *store.PublishResult
	if verr == nil {
		verr = staleAfterAhead(in.StaleAfter, a.now())
		if verr != nil && idempotencyKey != "" {
			// A signed write retried after its own review date passed: if
			// its first attempt was stored, this is that write's replay
			// (the key is the signature's, so the body is the same), and
			// it gets the replay's answer, not a refusal of what was
			// accepted (P-12).
			res, ok, err := a.cfg.Store.ReplayOf(r.Context(), idempotencyKey)
			if err != nil {
				a.log.ErrorContext(r.Context(), "write: replay lookup failed; refused as a new write", "actor", at.actor, "err", err)
			}
			if ok {
				replay, verr = &res, nil
			}
		}
	}
	if verr != nil {
		a.refuseWrite(w, r, at, http.StatusBadRequest, store.ReasonInvalid, verr.Reason, verr.Field)
		return
	}
	// The one validator, before any right is checked, so a refusal names
	// the field whatever the credential (Publish validates again).
	if _, err := store.Validate(in); err != nil {
		ve := &store.ValidationError{Field: "body", Reason: "invalid"}
		errors.As(err, &ve)
		a.refuseWrite(w, r, at, http.StatusBadRequest, store.ReasonInvalid, ve.Reason, ve.Field)
		return
	}
	if hasAuthz {
		if principal.Subject != req.AuthorID {
			a.refuseWrite(w, r, at, http.StatusForbidden, store.ReasonForbidden, "authorId must equal the token's subject", "authorId")
			return
		}
		if !principal.CanAccessPatient(req.Patient) {
			a.refuseWrite(w, r, at, http.StatusForbidden, store.ReasonWrongPatient, "the token is not bound to this patient", "patient")
			return
		}
	} else {
		// Trusted server code: a verified signature is a clinician system's
		// and may write either audience of this one patient.
		principal = models.Principal{Subject: ActorHMAC, Scopes: []models.Scope{models.ScopeWrite, models.ScopeWriteAssistant}, Patients: []string{req.Patient}}
		in.IdempotencyKey = idempotencyKey
	}

	if replay == nil {
		msg, field, creates, ok := a.newTopicRefusal(r.Context(), principal, req)
		if ok && creates {
			// A write that creates a topic is checked again and published
			// under its patient's lock, so two writes creating topics of one
			// spoken name at once cannot both pass the check (finding V2;
			// in this process — instances on one database still can).
			unlock := a.creating.lock(req.Patient)
			defer unlock()
			msg, field, _, ok = a.newTopicRefusal(r.Context(), principal, req)
		}
		if !ok {
			a.refuseWrite(w, r, at, http.StatusConflict, store.ReasonInvalid, msg, field)
			return
		}
	}

	// The accepted row is appended in the version's own transaction: one
	// durable commit per write (P-14).
	in.Audit = &store.AuditEntry{Actor: at.actor, Via: at.via, Author: at.author}
	started := time.Now()
	var res store.PublishResult
	if replay != nil {
		res, err = *replay, nil
	} else {
		res, err = a.cfg.Store.Publish(r.Context(), principal, in)
	}
	elapsed := time.Since(started)
	var (
		ve *store.ValidationError
		ue *store.UnavailableError
	)
	switch {
	case errors.As(err, &ve):
		a.refuseWrite(w, r, at, http.StatusBadRequest, store.ReasonInvalid, ve.Reason, ve.Field)
		return
	case errors.Is(err, store.ErrNeedsAssistantWrite):
		a.challenge(w, "insufficient_scope", models.ScopeWriteAssistant)
		a.refuseWrite(w, r, at, http.StatusForbidden, store.ReasonForbidden, store.ErrNeedsAssistantWrite.Error(), "")
		return
	case errors.Is(err, store.ErrAudienceChange):
		a.refuseWrite(w, r, at, http.StatusConflict, store.ReasonAudienceChange, "this domain's audience cannot change", "audience")
		return
	case errors.Is(err, store.ErrForbidden):
		a.refuseWrite(w, r, at, http.StatusForbidden, store.ReasonForbidden, "forbidden", "")
		return
	case errors.Is(err, store.ErrAbandoned):
		a.abandonWrite(r, at, "before the write committed")
		return
	case errors.As(err, &ue):
		a.unavailable(w, r, at, ue)
		return
	case err != nil:
		a.log.ErrorContext(r.Context(), "write: store failure", "actor", at.actor, "via", at.via, "uri", at.uri, "err", err)
		writeError(w, http.StatusInternalServerError, "internal error", "")
		return
	}

	resp := WriteResponse{
		URI:       res.Version.URI().String(),
		Version:   res.Version.N,
		Hash:      res.Version.Hash,
		Replayed:  res.Replayed,
		Unchanged: res.Unchanged,
	}
	if au := res.Version.Audio; au != nil {
		resp.Audio = &WriteAudio{MIMEType: au.MIMEType, Size: au.Size, DurationMs: au.Duration.Milliseconds(), Alexa: au.AlexaPlayable}
	}
	if a.cfg.Subscribers != nil {
		resp.Subscribers = a.cfg.Subscribers(res.Version.FactURI())
	}
	if res.Version.N == 1 && !res.Replayed && !res.Unchanged {
		// One query on the facts key, only when the write made version 1.
		// Only the topics this writer may read or write are named (P-1: an
		// assistant-only topic's name is not shown to a care.write-only writer).
		if topics, err := a.cfg.Store.Topics(r.Context(), req.Patient); err == nil {
			others := slices.DeleteFunc(topics, func(t store.Topic) bool { return t.Domain == res.Version.Domain })
			resp.NewPatient = len(others) == 0
			if !resp.NewPatient {
				resp.NewTopic = true
				for _, t := range others {
					if principal.CanWrite(req.Patient, t.Audience) || principal.CanRead(req.Patient, t.Audience) {
						resp.Topics = append(resp.Topics, t.Domain)
					}
				}
			}
		}
	}
	at.uri = resp.URI
	status, outcome, reason := http.StatusCreated, store.OutcomeAccepted, store.ReasonOK
	switch {
	case res.Replayed:
		status, outcome, reason = http.StatusOK, store.OutcomeRefused, store.ReasonReplay
	case res.Unchanged:
		status = http.StatusOK // accepted, nothing committed: no publish latency to observe
	case a.cfg.OnPublish != nil:
		a.cfg.OnPublish(elapsed)
	}
	if !res.Audited {
		a.audit(r.Context(), at, outcome, reason)
	}
	a.log.InfoContext(r.Context(), "write", "status", status, "reason", string(reason), "actor", at.actor,
		"via", at.via, "uri", resp.URI, "subscribers", resp.Subscribers, "publish_ms", float64(elapsed.Microseconds())/1000)
	writeJSON(w, status, resp)
}

// refuseWrite audits a refused attempt and answers it.
func (a *API) refuseWrite(w http.ResponseWriter, r *http.Request, at attempt, status int, reason store.AuditReason, msg, field string) {
	a.audit(r.Context(), at, store.OutcomeRefused, reason)
	a.log.InfoContext(r.Context(), "write refused", "status", status, "reason", string(reason), "actor", at.actor,
		"via", at.via, "uri", at.uri, "field", field)
	writeError(w, status, msg, field)
}

// refuseUnauthenticated answers an attempt whose credential did not verify:
// 401 with a challenge (errCode for WWW-Authenticate) and its own audit
// row while the source's refusal budget lasts (refusalLimiter), then 429
// with Retry-After, counted into one audit row per kind (rateLimitedAudit)
// and not logged one by one.
func (a *API) refuseUnauthenticated(w http.ResponseWriter, r *http.Request, at attempt, errCode string, reason store.AuditReason, msg string) {
	ok, wait := a.refusals.take(sourceOf(r), a.now())
	if ok {
		a.challenge(w, errCode, "")
		a.refuseWrite(w, r, at, http.StatusUnauthorized, reason, msg, "")
		return
	}
	a.rateLimited.add(store.AuditEntry{Actor: at.actor, Via: at.via, Outcome: store.OutcomeRefused, Reason: store.ReasonRateLimited})
	w.Header().Set("Retry-After", retryAfterSeconds(wait))
	writeError(w, http.StatusTooManyRequests, fmt.Sprintf("too many refused attempts from this address: retry after %s s", retryAfterSeconds(wait)), "")
}

// abandonWrite audits a write whose client hung up before it committed:
// nothing was written and no one is left to answer.
func (a *API) abandonWrite(r *http.Request, at attempt, when string) {
	a.audit(r.Context(), at, store.OutcomeAbandoned, store.ReasonAbandoned)
	a.log.InfoContext(r.Context(), "write abandoned: the client hung up "+when, "actor", at.actor, "via", at.via, "uri", at.uri)
}

// unavailable answers a write the store cannot commit: 503, Retry-After,
// and the reason (a full or read-only disk, an unreachable or busy
// database). Publish has failed, so nothing was written. The attempt's
// audit row cannot be committed now either — trying would wait out the
// busy timeout a second time, past the client's deadline (T4) — so it is
// kept by pendingAudit and appended once the store commits again.
func (a *API) unavailable(w http.ResponseWriter, r *http.Request, at attempt, ue *store.UnavailableError) {
	a.pending.add(a.entry(at, store.OutcomeRefused, store.ReasonUnavailable))
	a.log.ErrorContext(r.Context(), "write: the store cannot commit", "reason", ue.Reason, "actor", at.actor, "via", at.via, "uri", at.uri, "err", ue.Err)
	w.Header().Set("Retry-After", retryAfterSeconds(ue.RetryAfter))
	writeError(w, http.StatusServiceUnavailable, "the store cannot commit writes right now: "+ue.Reason+"; nothing was written, retry later", "")
}

func (a *API) entry(at attempt, outcome string, reason store.AuditReason) store.AuditEntry {
	return store.AuditEntry{Actor: at.actor, URI: at.uri, Outcome: outcome, Reason: reason, Via: at.via, Author: at.author}
}

// audit appends the row even when the client has gone away. While the
// store is known not to commit (store.WriteHealthState's last answer,
// asked without waiting), or when the append fails so, the row is kept by
// pendingAudit for when it can, so a refusal is not held up by a row that
// cannot be written now.
func (a *API) audit(ctx context.Context, at attempt, outcome string, reason store.AuditReason) {
	e := a.entry(at, outcome, reason)
	known, cancel := context.WithCancel(context.WithoutCancel(ctx))
	cancel() // the last answer, without waiting for a probe
	if a.cfg.Store.WriteHealthState(known).Err != nil {
		a.pending.add(e)
		return
	}
	err := a.cfg.Store.Audit(context.WithoutCancel(ctx), e)
	switch {
	case errors.Is(err, store.ErrUnavailable):
		a.pending.add(e)
	case err != nil:
		a.log.ErrorContext(ctx, "write: audit append failed", "reason", string(reason), "actor", at.actor, "err", err)
	}
}

// checkSignature verifies the HMAC headers over the raw body. It returns the
// idempotency key of a good request, or the audit reason and a message.
func (a *API) checkSignature(r *http.Request, body []byte) (key string, reason store.AuditReason, msg string) {
	tsVals, sigVals := r.Header.Values(HeaderTimestamp), r.Header.Values(HeaderSignature)
	if len(tsVals) != 1 || len(sigVals) != 1 {
		return "", store.ReasonBadSignature, "send exactly one " + HeaderTimestamp + " and one " + HeaderSignature + " header, or a bearer token"
	}
	ts, sig := tsVals[0], sigVals[0]
	if len(ts) == 0 || len(ts) > 12 || strings.TrimLeft(ts, "0123456789") != "" {
		return "", store.ReasonBadSignature, HeaderTimestamp + " must be Unix seconds in decimal"
	}
	hexSig, ok := strings.CutPrefix(sig, "v1=")
	if !ok || len(hexSig) != 2*sha256.Size || strings.TrimLeft(hexSig, "0123456789abcdef") != "" {
		return "", store.ReasonBadSignature, HeaderSignature + " must be v1=<64 lowercase hex digits>"
	}
	given, _ := hex.DecodeString(hexSig)
	if len(a.cfg.WriteSecret) == 0 || !hmac.Equal(writeMAC(a.cfg.WriteSecret, ts, body), given) {
		return "", store.ReasonBadSignature, "signature does not match"
	}
	secs, _ := strconv.ParseInt(ts, 10, 64)
	if d := a.now().Sub(time.Unix(secs, 0)); d > SignatureWindow || d < -SignatureWindow {
		return "", store.ReasonStaleTimestamp, "timestamp is outside the 300 s window"
	}
	sum := sha256.Sum256([]byte("unsay/write/v1\x00" + ts + "\x00" + hexSig))
	return hex.EncodeToString(sum[:]), "", ""
}

// principal verifies the request's bearer token.
func (a *API) principal(r *http.Request) (models.Principal, error) {
	if a.cfg.Verifier == nil {
		return models.Principal{}, errors.New("no token verifier configured")
	}
	return a.cfg.Verifier.FromRequest(r)
}

// newTopicRefusal checks a write that would create a topic: ok when req's
// domain is one of the patient's topics on record (a revision: nothing
// more is checked). Else, for an ExistingPatient write, a patient with no
// facts on record is refused (field "patient", finding V6a). Else,
// whatever ExistingTopic says, it is refused (field "domain") when
// the new domain's spoken name — or a CareTopic name or synonym of it — is
// one of another topic's (one of the patient's speakable topics, or a
// CareTopic value): two topics Ray calls by the same name can never both
// be asked for, and both would be said as current (finding V2; see
// topicCollision). An assistant-only topic is never asked for by name, so
// it collides with none (finding W3). Then, for an
// ExistingTopic write, when the patient has facts on record it is refused
// naming them (finding U12). A refusal's message names only topics the
// principal may read or write (P-1: an assistant-only topic is not named to
// a care.write-only writer). One Topics query; a store error lets the
// write through unless it collides with a CareTopic value (it is no worse
// than a write without ExistingTopic or ExistingPatient) and is logged.
// A revision of a fact the store knows without reading (store.KnownFact:
// this process committed it recently) makes no query at all. It returns
// the refusal's message and field, or ok — with creates when the write
// would create the topic.
func (a *API) newTopicRefusal(ctx context.Context, principal models.Principal, req *WriteRequest) (msg, field string, creates, ok bool) {
	if a.cfg.Store.KnownFact(req.Patient, req.Domain) {
		return "", "", false, true
	}
	topics, err := a.cfg.Store.Topics(ctx, req.Patient)
	if err != nil {
		a.log.WarnContext(ctx, "write: topics not read; only the interaction model's topics are checked", "patient", req.Patient, "err", err)
		topics = nil
	}
	if slices.ContainsFunc(topics, func(t store.Topic) bool { return t.Domain == req.Domain }) {
		return "", "", false, true
	}
	if req.ExistingPatient && err == nil && len(topics) == 0 {
		return fmt.Sprintf("%q has no care notes; nothing was saved. Check the patient id (ids are exact and lower case); "+
			"to write a new patient's first note, send existingPatient false (unsay write --new-patient)", req.Patient), "patient", true, false
	}
	msg, ok = a.topicRefusal(principal, req, topics)
	return msg, "domain", true, ok
}

// topicRefusal is newTopicRefusal's check of the domain of a write that
// would create a topic of req's patient, whose topics on record are topics
// (none of them req.Domain): the message of its refusal, or ok.
func (a *API) topicRefusal(principal models.Principal, req *WriteRequest, topics []store.Topic) (string, bool) {
	visible := func(t store.Topic) bool {
		return principal.CanWrite(req.Patient, t.Audience) || principal.CanRead(req.Patient, t.Audience)
	}
	// Only topics Ray can hear share a spoken name with another: the skill
	// reads speakable facts alone, so an assistant-only topic is never asked
	// for by name — and counting it let a care.write-only writer learn an
	// assistant-only topic's name by a near miss (finding W3).
	speakable := slices.DeleteFunc(slices.Clone(topics), func(t store.Topic) bool { return t.Audience == models.AudienceAssistant })
	if other, name, onRecord, ok := topicCollision(caretopic.Default(), req.Domain, speakable); ok {
		switch {
		case !onRecord:
			return fmt.Sprintf("%q is how %s asks for %q, a topic the skill knows; nothing was saved. Write that domain to give %s a %s instruction, "+
				"or choose a domain with another name", name, req.Patient, other.Domain, req.Patient, name), false
		case visible(other):
			return fmt.Sprintf("%s already has %q, which %s calls %q; nothing was saved. Revise that one, or choose a domain with another name",
				req.Patient, other.Domain, req.Patient, name), false
		default:
			return fmt.Sprintf("%q is already the name of another of %s's topics; nothing was saved. Choose a domain with another name",
				name, req.Patient), false
		}
	}
	if !req.ExistingTopic || len(topics) == 0 {
		return "", true
	}
	var names []string
	for _, t := range topics {
		if visible(t) {
			names = append(names, t.Domain)
		}
	}
	return fmt.Sprintf("%s has no %q notes; existing topics: %s; nothing was saved. To revise one, write it with that domain; "+
		"to create this topic, send existingTopic false (unsay write --new-topic)", req.Patient, req.Domain, strings.Join(names, ", ")), false
}

// topicCollision finds the topic a new domain would share a spoken name
// with (finding V2): among topics (the patient's, none of them domain) and
// then CareTopic's values, the first other whose Names (caretopic: spoken
// name, normalized — "wound_care" and "wound-care" are both "wound care" —
// and a CareTopic value's names and synonyms) share one with domain's.
// onRecord says other is one of topics. Two CareTopic values never
// collide (entity resolution tells them apart by id).
func topicCollision(m *caretopic.Model, domain string, topics []store.Topic) (other store.Topic, name string, onRecord, ok bool) {
	names := m.Names(domain)
	shared := func(d string) (string, bool) {
		if m.IsValue(domain) && m.IsValue(d) {
			return "", false
		}
		for _, n := range m.Names(d) {
			if slices.Contains(names, n) {
				return n, true
			}
		}
		return "", false
	}
	for _, t := range topics {
		if n, ok := shared(t.Domain); ok {
			return t, n, true, true
		}
	}
	values := make([]string, 0, len(m.Name))
	for d := range m.Name {
		values = append(values, d)
	}
	slices.Sort(values)
	for _, d := range values {
		if d == domain || slices.ContainsFunc(topics, func(t store.Topic) bool { return t.Domain == d }) {
			continue
		}
		if n, ok := shared(d); ok {
			return store.Topic{Domain: d}, n, false, true
		}
	}
	return store.Topic{}, "", false, false
}

// parseWriteRequest decodes body for shape only: one JSON object, each key
// once and spelled exactly (see exactKeys), each value valid UTF-8 without
// a lone surrogate escape (encoding/json would silently turn either into
// U+FFFD, so the parsed value would differ from the signed bytes), the
// documented types, no unknown fields, no trailing data. It returns the
// request decoded so far (for the audit row) and a validation error naming
// the field. Rules about the values are store.Validate's.
func parseWriteRequest(body []byte) (*WriteRequest, *store.ValidationError) {
	if verr := exactKeys(body, writeKeys); verr != nil {
		return nil, verr
	}
	if !utf8.Valid(body) {
		return nil, &store.ValidationError{Field: "body", Reason: "body must be UTF-8"}
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	var req WriteRequest
	if err := dec.Decode(&req); err != nil {
		return nil, jsonError(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, &store.ValidationError{Field: "body", Reason: "body must hold exactly one JSON object"}
	}
	if req.StaleAfter != "" {
		if _, err := time.Parse(time.RFC3339, req.StaleAfter); err != nil {
			return &req, &store.ValidationError{Field: "staleAfter", Reason: "must be an RFC 3339 time"}
		}
	}
	return &req, nil
}

// staleAfterAhead refuses a review date (staleAfter) that is not after
// now, as `unsay write --stale-after` does: an instruction past its review
// date the moment it is written is read to the patient as stale at once,
// so a past time is a typo. Zero (never stale) passes.
func staleAfterAhead(t, now time.Time) *store.ValidationError {
	if t.IsZero() || t.After(now) {
		return nil
	}
	return &store.ValidationError{Field: "staleAfter", Reason: "must be in the future (RFC 3339, after the server's now, " +
		now.UTC().Format(time.RFC3339) + "): the instruction would be stale as soon as it is saved"}
}

// jsonError turns a decoding error into a ValidationError naming the field,
// never quoting the body.
func jsonError(err error) *store.ValidationError {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) && te.Field != "" {
		if strings.HasPrefix(te.Value, "number") && te.Type.Kind() != reflect.String {
			// A number that fits no float64 (1e400): not a wrong type.
			return &store.ValidationError{Field: te.Field, Reason: "is a number out of range"}
		}
		return &store.ValidationError{Field: te.Field, Reason: "must be a JSON " + jsonKind(te.Type.Kind())}
	}
	if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		name = strings.Trim(name, `"`)
		if name == "" || len(name) > 64 || strings.IndexFunc(name, func(r rune) bool { return !unicode.IsPrint(r) }) >= 0 {
			name = "body"
		}
		return &store.ValidationError{Field: name, Reason: "unknown field"}
	}
	return &store.ValidationError{Field: "body", Reason: "body must be one JSON object"}
}

func jsonKind(k reflect.Kind) string {
	switch k {
	case reflect.String:
		return "string"
	case reflect.Float64, reflect.Pointer:
		return "number"
	}
	return "value of the documented type"
}

// input converts a parsed request into a store.PublishInput.
func (q *WriteRequest) input() (store.PublishInput, *store.ValidationError) {
	in := store.PublishInput{
		Patient: q.Patient, Domain: q.Domain, Audience: q.Audience, Value: q.Value,
		AuthorID: q.AuthorID, AuthorLabel: q.AuthorLabel,
	}
	if q.StaleAfter != "" {
		t, err := time.Parse(time.RFC3339, q.StaleAfter)
		if err != nil {
			return in, &store.ValidationError{Field: "staleAfter", Reason: "must be an RFC 3339 time"}
		}
		in.StaleAfter = t.UTC()
	}
	if q.Priority != nil {
		in.Priority = *q.Priority
	}
	if q.Audio != "" {
		b, err := base64.StdEncoding.Strict().DecodeString(q.Audio)
		if err != nil {
			return in, &store.ValidationError{Field: "audio", Reason: "must be standard base64 (RFC 4648 §4, padded)"}
		}
		in.Audio = b
	}
	in.AudioType = q.AudioType
	return in, nil
}

// requestURI is the unversioned URI the request names, or "" when its
// patient, domain or audience is not valid.
func requestURI(q *WriteRequest) string {
	if !models.ValidID(q.Patient) || !models.ValidID(q.Domain) || !q.Audience.Valid() {
		return ""
	}
	return models.NewURI(q.Audience, q.Patient, q.Domain).String()
}

// writeKeys are the body's fields, spelled exactly.
var writeKeys = map[string]bool{"patient": true, "domain": true, "audience": true, "value": true,
	"authorId": true, "authorLabel": true, "staleAfter": true, "priority": true, "audio": true, "audioType": true, "existingTopic": true, "existingPatient": true}

// exactKeys refuses a top-level key that is repeated or not spelled exactly
// as documented, and a value that is not valid UTF-8 or holds a lone
// surrogate escape (naming its field, with store.ReasonXMLForbidden).
// encoding/json matches keys case-insensitively and lets the last
// duplicate win, so {"PATIENT":"bob","patient":"ray"} would mean one thing
// to us and another to a different parser of the same signed bytes.
func exactKeys(body []byte, allowed map[string]bool) *store.ValidationError {
	dec := json.NewDecoder(bytes.NewReader(body))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil // not an object: the decoder reports it
	}
	seen := map[string]bool{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil
		}
		key, _ := t.(string)
		switch {
		case !allowed[key]:
			name := key
			if name == "" || len(name) > 64 || strings.IndexFunc(name, func(r rune) bool { return !unicode.IsPrint(r) }) >= 0 {
				name = "body"
			}
			return &store.ValidationError{Field: name, Reason: "unknown field (keys are case-sensitive)"}
		case seen[key]:
			return &store.ValidationError{Field: key, Reason: "repeated field"}
		}
		seen[key] = true
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil
		}
		if !utf8.Valid(raw) {
			return &store.ValidationError{Field: key, Reason: store.ReasonXMLForbidden + ": found invalid UTF-8"}
		}
		if loneSurrogateEscape(raw) {
			return &store.ValidationError{Field: key, Reason: store.ReasonXMLForbidden + ": found a lone surrogate escape (\\uD800–\\uDFFF)"}
		}
	}
	return nil
}

// loneSurrogateEscape reports whether the JSON text raw holds a \uXXXX
// escape of a UTF-16 surrogate that is not half of a high–low pair.
func loneSurrogateEscape(raw []byte) bool {
	hex4 := func(i int) (rune, bool) {
		if i+6 > len(raw) || raw[i] != '\\' || raw[i+1] != 'u' {
			return 0, false
		}
		v, err := strconv.ParseUint(string(raw[i+2:i+6]), 16, 16)
		return rune(v), err == nil
	}
	for i := 0; i < len(raw); i++ {
		if raw[i] != '\\' {
			continue
		}
		if i+1 < len(raw) && raw[i+1] != 'u' {
			i++ // a two-character escape (\\, \", \n, …)
			continue
		}
		r, ok := hex4(i)
		if !ok {
			continue // malformed: the decoder refuses it
		}
		switch {
		case r >= 0xD800 && r <= 0xDBFF:
			if lo, ok := hex4(i + 6); ok && lo >= 0xDC00 && lo <= 0xDFFF {
				i += 11
				continue
			}
			return true
		case r >= 0xDC00 && r <= 0xDFFF:
			return true
		}
		i += 5
	}
	return false
}

// patientLocks are striped mutexes keyed by patient id (FNV-1a): lock
// holds the stripe of one patient and returns its unlock. The zero value
// is ready.
type patientLocks struct {
	stripes [64]sync.Mutex
}

func (l *patientLocks) lock(patient string) (unlock func()) {
	h := fnv.New32a()
	_, _ = h.Write([]byte(patient))
	m := &l.stripes[h.Sum32()%uint32(len(l.stripes))]
	m.Lock()
	return m.Unlock
}
