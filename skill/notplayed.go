package skill

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"

	"github.com/unsay/unsay/models"
)

// Alexa's error report (P-24): a SessionEndedRequest with reason ERROR
// (error.type INVALID_RESPONSE, DEVICE_COMMUNICATION_ERROR,
// INTERNAL_SERVICE_ERROR, ENDPOINT_TIMEOUT) says Alexa did not play the
// last response of the session. Each response therefore carries, in its
// session attributes, what it marked heard and what it may have confirmed
// (AttrConfirmed) — which Alexa hands back with the next request of the
// session, that report included — and the report re-opens it, or undoes
// the confirmation, through CareSource.NotPlayed.

// ReasonError is the SessionEndedRequest reason of an error report.
const ReasonError = "ERROR"

// AttrMarked is the session attribute holding what a response marked
// heard: a list of {"uri": unversioned care:// URI, "heard": the version
// he heard before, "from": the version its retraction withdrew (a fact
// told: heard), "version": the version it spoke or showed}, at most
// MaxMarkedAttributes entries.
const AttrMarked = "marked"

// AttrConfirmed is the session attribute holding the facts a response
// told plainly at the version he had heard for certain: a list of
// {"uri": unversioned care:// URI, "version": that version}, at most
// MaxMarkedAttributes entries. Written in full, such a telling confirms
// the version against an earlier response's error report (MarkTold;
// finding B1), so its own error report must undo that confirmation
// (models.Marked.Confirmed): otherwise a double failure — the retraction's
// response and the telling's both not played — would lose the retraction
// (P-24).
const AttrConfirmed = "confirmed"

// AttrResponse is the session attribute holding the id of the response
// whose marks AttrMarked and AttrConfirmed are: 32 lowercase hex digits,
// random per response (models.Marked.Response). Alexa may deliver one
// response's error report twice (a retry, a late resend); the ledger
// applies one response's report once, so the repeat never undoes a
// delivery confirmed after the first (finding F14). A report without it
// (attributes written by an older build) is applied as it comes; one
// whose value is not of models.ValidID's form is applied the same way,
// logged.
const AttrResponse = "response"

// newResponseID is a fresh AttrResponse value: 128 random bits in hex.
func newResponseID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24)
	return hex.EncodeToString(b[:])
}

// MaxMarkedAttributes bounds AttrMarked and AttrConfirmed (one entry per fact a response
// marks; the care card's rows count only when he had not heard them).
const MaxMarkedAttributes = 100

// confirmedAttr is one AttrConfirmed entry.
type confirmedAttr struct {
	URI     string `json:"uri"`
	Version int    `json:"version"`
}

// markedAttr is one AttrMarked entry.
type markedAttr struct {
	URI     string `json:"uri"`
	Heard   int    `json:"heard"`
	From    int    `json:"from"`
	Version int    `json:"version"`
}

// markedAttributes are the session attributes of a response whose marks
// are marks: per fact, the announcement it speaks in full (from its
// retraction's From) or the version it tells that he had not heard
// (heardBefore below it); nil when it marks nothing of the kind. Silent
// marks (unchanged words: nothing said) are left out. The facts it tells
// at the version he heard are its AttrConfirmed entries (they may confirm
// that version; whether this telling is the first to do so is decided by
// the ledger after the write, so every such telling is listed). id, the
// response's id, is its AttrResponse.
func markedAttributes(marks []mark, heardBefore, from map[models.URI]int, id string) map[string]any {
	var list []markedAttr
	var confirmed []confirmedAttr
	for _, d := range deliveredOf(marks) {
		before := heardBefore[d.uri]
		switch f, announced := from[d.uri]; {
		case d.ann > 0 && announced && d.ann >= d.told && before < d.ann:
			list = append(list, markedAttr{URI: d.uri.String(), Heard: before, From: f, Version: d.ann})
		case d.told > d.ann && before < d.told:
			list = append(list, markedAttr{URI: d.uri.String(), Heard: before, From: before, Version: d.told})
		case d.told > d.ann && before == d.told:
			confirmed = append(confirmed, confirmedAttr{URI: d.uri.String(), Version: d.told})
		}
	}
	if len(list) == 0 && len(confirmed) == 0 {
		return nil
	}
	attrs := map[string]any{AttrResponse: id}
	if len(list) > 0 {
		attrs[AttrMarked] = list[:min(len(list), MaxMarkedAttributes)]
	}
	if len(confirmed) > 0 {
		attrs[AttrConfirmed] = confirmed[:min(len(confirmed), MaxMarkedAttributes)]
	}
	return attrs
}

// notPlayed handles Alexa's error report for env's session: the patient's
// marks kept in its session attributes are re-opened, under his turn lock.
// Malformed entries (attributes are client-controlled in development mode)
// are logged and ignored.
func (s *Skill) notPlayed(ctx context.Context, env *RequestEnvelope) {
	if env.Session == nil || env.Session.Attributes[AttrMarked] == nil && env.Session.Attributes[AttrConfirmed] == nil {
		return
	}
	patient, err := s.patientFor(ctx, env)
	if err != nil || patient == "" {
		s.log.Warn("alexa error report: no patient to re-open for", "session", env.SessionID(), "err", err)
		return
	}
	var ms []models.Marked
	bad := 0
	if v := env.Session.Attributes[AttrMarked]; v != nil {
		ms, bad = parseMarked(v, patient)
	}
	if v := env.Session.Attributes[AttrConfirmed]; v != nil {
		cs, cbad := parseConfirmed(v, patient)
		ms, bad = append(ms, cs...), bad+cbad
	}
	if v, ok := env.Session.Attributes[AttrResponse]; ok {
		if id, _ := v.(string); models.ValidID(id) {
			for i := range ms {
				ms[i].Response = id
			}
		} else {
			bad++ // applied without an id, as an older build's report
		}
	}
	if bad > 0 {
		s.log.Warn("alexa error report: malformed session attributes ignored", "session", env.SessionID(), "entries", bad)
	}
	if len(ms) == 0 {
		return
	}
	release := s.lockPatient(patient)
	defer release()
	// Recorded whatever the request's context does once Alexa has its answer.
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ledgerTimeout)
	defer cancel()
	if err := s.care.NotPlayed(lctx, patient, ms); err != nil {
		s.log.Error("alexa error report: not re-opened", "patient", patient, "err", err)
		return
	}
	s.log.Warn("alexa did not play a response; what it marked is owed again", "patient", patient, "facts", len(ms))
}

// attrList is v, a session attribute's value, as a JSON list of at most
// MaxMarkedAttributes entries, and how many entries were refused (the
// rest of a longer list; 1 for a value that is not a list).
func attrList(v any) ([]json.RawMessage, int) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, 1
	}
	var list []json.RawMessage
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, 1
	}
	if len(list) > MaxMarkedAttributes {
		return list[:MaxMarkedAttributes], len(list) - MaxMarkedAttributes
	}
	return list, 0
}

// decodeAttr decodes one session-attribute entry e into dst strictly (no
// field but dst's) and parses *uri, which dst's decoding
// set: it returns the URI and true when it is an unversioned speakable
// care:// fact of patient, false for anything else.
func decodeAttr(e json.RawMessage, dst any, uri *string, patient string) (models.URI, bool) {
	dec := json.NewDecoder(bytes.NewReader(e))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		return models.URI{}, false
	}
	u, err := models.ParseURI(*uri)
	if err != nil || u.Audience() != models.AudienceUser || u.Version != 0 || u.Patient != patient {
		return models.URI{}, false
	}
	return u, true
}

// parseConfirmed reads an AttrConfirmed value strictly: each entry an
// object of exactly uri and version, the URI an unversioned care:// fact
// of patient, version ≥ 1. It returns the valid entries as Marked with
// Confirmed (at most MaxMarkedAttributes) and how many were refused.
func parseConfirmed(v any, patient string) ([]models.Marked, int) {
	list, bad := attrList(v)
	var out []models.Marked
	for _, e := range list {
		var a confirmedAttr
		u, ok := decodeAttr(e, &a, &a.URI, patient)
		if !ok || a.Version < 1 {
			bad++
			continue
		}
		out = append(out, models.Marked{URI: u, Version: a.Version, Confirmed: true})
	}
	return out, bad
}

// parseMarked reads an AttrMarked value strictly: each entry an object of
// exactly uri, heard, from and version, integers, the URI an unversioned
// care:// fact of patient, version ≥ 1, heard and from in [0, version).
// It returns the valid entries (at most MaxMarkedAttributes) and how many
// were refused.
func parseMarked(v any, patient string) ([]models.Marked, int) {
	list, bad := attrList(v)
	var out []models.Marked
	for _, e := range list {
		var a markedAttr
		u, ok := decodeAttr(e, &a, &a.URI, patient)
		if !ok || a.Version < 1 || a.Heard < 0 || a.Heard >= a.Version || a.From < 0 || a.From >= a.Version {
			bad++
			continue
		}
		out = append(out, models.Marked{URI: u, HeardBefore: a.Heard, From: a.From, Version: a.Version})
	}
	return out, bad
}
