package skill

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

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
// a first hearing — the version, with nothing withdrawn — against an
// earlier response's error report (MarkTold; finding B1): that report's
// rollback is then held back. Its own error report must undo that
// confirmation (models.Marked.Confirmed), or a double failure — both
// responses not played — would leave the version heard that he never
// heard (P-24). A retraction's report is never held back by a plain
// telling (finding U2: a telling does not say the words changed), so for
// a retraction the confirmation changes nothing.
const AttrConfirmed = "confirmed"

// AttrResponse is the session attribute holding the id of the response
// whose marks AttrMarked and AttrConfirmed are: 32 lowercase hex digits,
// random per response (models.Marked.Response). Alexa may deliver one
// response's error report twice (a retry, a late resend); the ledger
// applies one response's report once, so the repeat never undoes a
// delivery confirmed after the first (finding F14). Attributes without it
// (an older build's) or whose value is not of models.ValidID's form
// (logged) fail AttrMAC, so only the server's records of the session
// count for them.
const AttrResponse = "response"

// AttrMAC is the session attribute holding the MAC of a response's marks:
// 32 lowercase hex digits, the first 128 bits of HMAC-SHA256 keyed from
// Config.AttributesSecret over the response's id and its marks as
// AttrMarked and AttrConfirmed name them, in order (attributesMAC). An
// error report's attributes that name a response neither the session's
// record nor the heard ledger holds count only when it matches: a forged
// report (development mode, where no signature binds a request to Alexa)
// cannot choose what he is said to have heard — "I told you: “<words he
// was never told>”" (finding W2) — while a genuine one, from any instance
// given the same secret, still re-opens what it marked. Genuine
// attributes replayed in another session re-open a response's marks once
// (the ledger applies one response id's report once): a repeat, the safe
// direction.
const AttrMAC = "mac"

// attributesKey is the AttrMAC key: HMAC-SHA256(secret, a label) — the
// secret is shared with other uses (the audit key) — or 32 random bytes
// for an empty secret. err: no randomness.
func attributesKey(secret []byte) ([]byte, error) {
	if len(secret) == 0 {
		k := make([]byte, 32)
		if _, err := rand.Read(k); err != nil {
			return nil, fmt.Errorf("skill: session attributes key: %w", err)
		}
		return k, nil
	}
	m := hmac.New(sha256.New, secret)
	m.Write([]byte("unsay/alexa-session-attributes/v1"))
	return m.Sum(nil), nil
}

// attributesMAC is AttrMAC's value for the response id whose marks are ms
// (AttrMarked's entries, then AttrConfirmed's, as markedAttributes writes
// and echoedMarks reads them).
func attributesMAC(key []byte, id string, ms []models.Marked) string {
	m := hmac.New(sha256.New, key)
	fmt.Fprintf(m, "%q\n", id)
	for _, k := range ms {
		fmt.Fprintf(m, "%q %d %d %d %t\n", k.URI.String(), k.HeardBefore, k.From, k.Version, k.Confirmed)
	}
	return hex.EncodeToString(m.Sum(nil)[:16])
}

// attributesIssued reports whether attrs carry AttrMAC for their
// AttrResponse id (as a string, whatever its form) and the marks echoedMarks
// read from them: attributes this service wrote, not changed since.
func attributesIssued(key []byte, attrs map[string]any, ms []models.Marked) bool {
	got, _ := attrs[AttrMAC].(string)
	id, _ := attrs[AttrResponse].(string)
	want := attributesMAC(key, id, ms)
	return len(got) == len(want) && hmac.Equal([]byte(got), []byte(want))
}

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

// responseMarks are the marks of a response whose marks are marks, as
// its session attributes name them (markedAttributes) and as the
// session's record of its last response keeps them (sentResponse): per
// fact, the announcement it speaks in full (from its retraction's From) or
// the version it tells that he had not heard (heardBefore below it) — at
// most MaxMarkedAttributes of them, first — then the facts it tells at the
// version he heard, as Confirmed entries (they may confirm that version;
// whether this telling is the first to do so is decided by the ledger
// after the write, so every such telling is listed), at most
// MaxMarkedAttributes. Each carries id, the response's id (AttrResponse).
// Silent marks (unchanged words: nothing said) are left out; nil when
// nothing is left.
func responseMarks(marks []mark, heardBefore, from map[models.URI]int, id string) []models.Marked {
	var list, confirmed []models.Marked
	for _, d := range deliveredOf(marks) {
		before := heardBefore[d.uri]
		switch f, announced := from[d.uri]; {
		case d.ann > 0 && announced && d.ann >= d.told && before < d.ann:
			list = append(list, models.Marked{URI: d.uri, HeardBefore: before, From: f, Version: d.ann, Response: id})
		case d.told > d.ann && before < d.told:
			list = append(list, models.Marked{URI: d.uri, HeardBefore: before, From: before, Version: d.told, Response: id})
		case d.told > d.ann && before == d.told:
			confirmed = append(confirmed, models.Marked{URI: d.uri, Version: d.told, Confirmed: true, Response: id})
		}
	}
	return append(list[:min(len(list), MaxMarkedAttributes)], confirmed[:min(len(confirmed), MaxMarkedAttributes)]...)
}

// markedAttributes are the session attributes of a response whose marks
// are ms (responseMarks) and whose id is id: AttrMarked, AttrConfirmed,
// AttrResponse and AttrMAC (keyed by key); nil when ms is empty.
func markedAttributes(key []byte, ms []models.Marked, id string) map[string]any {
	var list []markedAttr
	var confirmed []confirmedAttr
	var told, confirms []models.Marked // ms as echoedMarks reads them back: marked, then confirmed
	for _, m := range ms {
		if m.Confirmed {
			confirmed = append(confirmed, confirmedAttr{URI: m.URI.String(), Version: m.Version})
			confirms = append(confirms, m)
		} else {
			list = append(list, markedAttr{URI: m.URI.String(), Heard: m.HeardBefore, From: m.From, Version: m.Version})
			told = append(told, m)
		}
	}
	if len(list) == 0 && len(confirmed) == 0 {
		return nil
	}
	attrs := map[string]any{AttrResponse: id, AttrMAC: attributesMAC(key, id, append(told, confirms...))}
	if len(list) > 0 {
		attrs[AttrMarked] = list
	}
	if len(confirmed) > 0 {
		attrs[AttrConfirmed] = confirmed
	}
	return attrs
}

// notPlayed handles Alexa's error report for env's session (P-24): it
// re-opens, under the patient's turn lock, in one CareSource.NotPlayed
// call —
//
//  1. the marks of the last response written on the session (its record:
//     this instance's, sessionStore.sentOf, merged with the heard
//     ledger's, below), first: Alexa's report is of the
//     session's last response, and for ENDPOINT_TIMEOUT (Alexa never got
//     it) or INVALID_RESPONSE (Alexa refused it) Alexa cannot echo that
//     response's session attributes — it echoes those it held: the
//     previous response's, or none in a new session (finding T1);
//  2. then the marks of the response the echoed session attributes name
//     (AttrResponse): when it is the recorded last or the one before it,
//     as the record holds them — attributes that disagree with the record
//     of the same response are logged and the record is trusted (finding
//     T3; Alexa's signature protects them in production, development mode
//     does not); otherwise (attributes of a response neither record
//     holds) as the attributes give them when their AttrMAC is this
//     service's (finding W2; else logged and ignored), each entry checked
//     (malformed ones logged and ignored).
//
// The rule errs toward a repeat, never toward losing a retraction: the
// earlier response the attributes name was accepted by Alexa and most
// likely played, but its speech may not have been; it is re-opened too,
// after the last, so that for a fact both marked what he heard goes back
// past both — the next retraction withdraws what he heard before the
// earlier one as told and the earlier one's words as words he may have
// heard (a repeat when it was played). A response's marks appear once
// (deduplicated by response id), and the ledger applies one response id's
// report once, so a repeated report changes nothing. A last response that
// marked nothing (or whose write failed: nothing was marked heard) adds
// nothing.
//
// The record is read under the patient's turn lock: a response still
// being written when the report arrives (Alexa's clock ran out before
// ours) records itself before its write and holds the lock, if it owes
// something, until it has marked what it carried, so the report re-opens
// it. The record is read from the heard ledger too, always
// (CareSource.SentResponses: every response that marked something recorded
// it there with its offers, in the same transaction), and merged with
// this instance's memory (mergeSent): a report that reaches another
// instance, or this one after a restart, finds the reported response's
// marks all the same (finding U8) — and so does one that reaches this
// instance after another instance wrote a later response of the session,
// which this instance's memory alone would miss. That is why the ledger is
// read even when the memory has a record: the report path is rare, the
// read is one indexed query, and the memory may be stale. When the
// ledger cannot be read, the memory and the echoed attributes are used
// (logged).
//
// It logs the report once (T14): WARN naming how many facts were re-opened
// (their announcements owed again) when any were, INFO saying nothing
// became owed when none were (a repeated report, or heard since), ERROR
// when the ledger refused its marks — each with the patient and session.
// A report the store could not commit (any other error) is kept and
// applied again until it commits, after any kept before it, and the
// patient's turns say nothing as current meanwhile (keptreports.go,
// finding V5); keepReport and applyKept log it. It returns the patient it
// re-opened for ("" when there was none).
func (s *Skill) notPlayed(ctx context.Context, env *RequestEnvelope) (patient string) {
	if env.Session == nil {
		return ""
	}
	sid := env.SessionID()
	rec, recorded := s.sessions.sentOf(sid, s.now())
	attrs := env.Session.Attributes
	echoes := attrs[AttrMarked] != nil || attrs[AttrConfirmed] != nil
	// The record names the patient whose ledger its marks were made on;
	// without it, the request's (a session's first response may still be
	// on its way: Alexa's clock can run out before ours).
	patient = rec.patient
	if !recorded {
		var err error
		patient, err = s.patientFor(ctx, env)
		if err != nil || patient == "" {
			if echoes {
				s.log.Warn("alexa error report: no patient to re-open for", "session", sid, "err", err)
			}
			return ""
		}
	}
	release := s.lockPatient(patient)
	defer release()
	// Read again under the lock: a response to this session still being
	// written and marked holds it (a turn that owes something) until it
	// has marked what it carried, and has recorded itself before its write.
	if again, ok := s.sessions.sentOf(sid, s.now()); ok && again.patient == patient {
		rec, recorded = again, true
	}
	rec, recorded = s.ledgerRecord(ctx, patient, sid, rec, recorded)
	if !recorded && !echoes {
		return patient
	}
	echoed, echoedID, bad := echoedMarks(attrs, patient)
	if bad > 0 {
		s.log.Warn("alexa error report: malformed session attributes ignored", "session", sid, "entries", bad)
	}
	var ms []models.Marked
	if recorded {
		ms = append(ms, rec.last.marks...)
	}
	switch {
	case recorded && echoedID != "" && (echoedID == rec.last.id || echoedID == rec.prev.id):
		held := rec.last
		if echoedID == rec.prev.id {
			held = rec.prev
			ms = append(ms, held.marks...)
		}
		if !slices.Equal(echoed, held.marks) {
			s.log.Warn("alexa error report: session attributes disagree with what the response marked; the server's record re-opened",
				"patient", patient, "session", sid, "response", echoedID, "attributes", len(echoed), "recorded", len(held.marks))
		}
	case len(echoed) > 0 && !attributesIssued(s.attrKey, attrs, echoed):
		// Not as this service wrote them (forged, changed, or an older
		// build's): what they say he heard is not taken (finding W2).
		s.log.Warn("alexa error report: session attributes this service did not write ignored (their MAC does not match)",
			"patient", patient, "session", sid, "entries", len(echoed))
	default:
		ms = append(ms, echoed...)
	}
	if len(ms) == 0 {
		return patient
	}
	// Saved before anything can wait on the store (keptreports.go).
	defer s.saveAhead(patient, sid, ms)()
	// Recorded whatever the request's context does once Alexa has its answer.
	if s.applyKept(ctx, patient, ledgerTimeout) {
		// Earlier reports are still kept: this one waits behind them, in
		// the order they came (keptreports.go, finding V5).
		s.keepReport(patient, sid, ms, nil)
		return patient
	}
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ledgerTimeout)
	defer cancel()
	n, err := s.care.NotPlayed(lctx, patient, ms)
	switch {
	case err != nil && !errors.Is(err, models.ErrReportRefused):
		// The store could not commit it (busy, locked, down): kept and
		// applied again until it commits (finding V5).
		s.keepReport(patient, sid, ms, err)
	case err != nil:
		s.log.Error("alexa error report: nothing re-opened, the ledger refused it", "patient", patient, "session", sid, "marks", len(ms), "err", err)
	case n == 0:
		s.log.Info("alexa error report: nothing became owed again (a repeated report, or heard since)", "patient", patient, "session", sid, "marks", len(ms))
	default:
		s.log.Warn("alexa did not play a response; its facts are re-opened and their announcements owed again", "patient", patient, "session", sid, "facts", n, "marks", len(ms))
	}
	return patient
}

// ledgerRecord is rec, this instance's record of session sid (when
// recorded), merged with the heard ledger's record of the responses
// written on sid for patient (mergeSent), and whether either has one. When
// the ledger cannot be read it is rec, logged.
func (s *Skill) ledgerRecord(ctx context.Context, patient, sid string, rec sentRecord, recorded bool) (sentRecord, bool) {
	if !models.ValidSessionID(sid) {
		return rec, recorded // never recorded there (offer)
	}
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ledgerTimeout)
	defer cancel()
	kept, err := s.care.SentResponses(lctx, patient, sid)
	if err != nil {
		s.log.Warn("alexa error report: the ledger's record of the session's responses not read; this instance's memory and the echoed attributes are used",
			"patient", patient, "session", sid, "err", err)
		return rec, recorded
	}
	return mergeSent(rec, recorded, patient, kept)
}

// mergeSent is the record of a session's last two responses for patient
// from this instance's memory (rec, when recorded) and the ledger's (kept,
// the last first): every response either names, once by id — the
// memory's copy first (it knows a write that failed: no marks) — the
// latest by when it was built (to the millisecond, the ledger's
// precision; ties keep the memory's order, then the ledger's) as last,
// the next as prev. The ledger holds only responses that marked
// something, the memory every response this instance wrote: a later
// response that marked nothing, in memory, stays last. Instances' clocks
// order their responses; one session's turns are seconds apart.
func mergeSent(rec sentRecord, recorded bool, patient string, kept []models.SentResponse) (sentRecord, bool) {
	var all []sentResponse
	if recorded {
		for _, r := range []sentResponse{rec.last, rec.prev} {
			if r.id != "" {
				all = append(all, r)
			}
		}
	}
	for _, k := range kept {
		if slices.ContainsFunc(all, func(r sentResponse) bool { return r.id == k.ID }) {
			continue
		}
		all = append(all, sentResponse{id: k.ID, marks: k.Marks, at: k.At})
	}
	if len(all) == 0 {
		return rec, recorded
	}
	slices.SortStableFunc(all, func(a, b sentResponse) int {
		return b.at.Truncate(time.Millisecond).Compare(a.at.Truncate(time.Millisecond))
	})
	out := sentRecord{patient: patient, last: all[0], expires: rec.expires}
	if len(all) > 1 {
		out.prev = all[1]
	}
	return out, true
}

// echoedMarks reads the marks a report's session attributes name for
// patient: AttrMarked's entries, then AttrConfirmed's, each with the
// AttrResponse id when it is of models.ValidID's form (echoedID; "" when
// absent or malformed — then applied without one, as an older build's
// report), and how many entries (or a malformed id) were refused.
func echoedMarks(attrs map[string]any, patient string) (ms []models.Marked, echoedID string, bad int) {
	if v := attrs[AttrMarked]; v != nil {
		ms, bad = parseMarked(v, patient)
	}
	if v := attrs[AttrConfirmed]; v != nil {
		cs, cbad := parseConfirmed(v, patient)
		ms, bad = append(ms, cs...), bad+cbad
	}
	if v, ok := attrs[AttrResponse]; ok {
		if id, _ := v.(string); models.ValidID(id) {
			echoedID = id
			for i := range ms {
				ms[i].Response = id
			}
		} else {
			bad++ // applied without an id, as an older build's report
		}
	}
	return ms, echoedID, bad
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
