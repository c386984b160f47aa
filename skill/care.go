package skill

import (
	"context"
	"errors"
	"time"

	"github.com/unsay/unsay/models"
)

// CareSource is the skill's only way to the patient's facts. The speech
// principal (bridge/speech) implements it by reading over MCP with a token
// that holds care.read.user and nothing else, so the skill has no code path
// to an assistant-only fact (P-18). Tests use an in-memory fake.
type CareSource interface {
	// Turn returns what may be said to the patient now: his speakable
	// facts and the announcements he must hear first (retractions first,
	// oldest first, P-19), every version confirmed current with the care
	// store at speak time and its staleness judged then (P-24). On error
	// nothing may be said as current; the snapshot may still name, in
	// Withdrawn, facts whose version he heard is known to be superseded.
	Turn(ctx context.Context, patient string) (models.Snapshot, error)
	// Offered records, durably and in one transaction, that offers are in
	// a response about to be written — its announcements, and the versions
	// of facts it tells plainly (models.Offer.Told): until MarkHeard (or
	// MarkTold) confirms the delivery Ray may have heard each offer's
	// version — a later revision withdraws it — and they are spoken again
	// saying so (models.Announcement.Again, P-24). A fact told at a version
	// he already heard, or newer, changes nothing.
	Offered(ctx context.Context, patient string, offers []models.Offer) error
	// OfferedResponse is Offered for a response about to be written on an
	// Alexa session that marks something (sent: the session id, the
	// response's id, its marks as its session attributes name them, the
	// skill's time, and the id of the attempt it replaces when it was
	// built again): in the same transaction it records sent as the
	// session's last response, shared by every instance and kept across a
	// restart, so Alexa's error report of it finds what it marked
	// wherever it arrives (SentResponses; P-24, finding U8). When Offered
	// writes nothing (every fact told at the version he heard), it is
	// recorded only by a telling that will confirm a version not yet
	// confirmed (its report must undo that), never a transaction per
	// turn. A sent without Session or Marks is Offered alone.
	OfferedResponse(ctx context.Context, patient string, offers []models.Offer, sent models.SentResponse) error
	// SentResponses returns what OfferedResponse recorded for session and
	// patient: the last two responses at most, the last first, within a
	// day (models.SentMemory), each mark's Response its response's id.
	SentResponses(ctx context.Context, patient, session string) ([]models.SentResponse, error)
	// MarkHeard records that the patient heard the announcement (a
	// retraction or a first hearing) of the fact uri (unversioned) at
	// version — called only for what a response carried in full, and only
	// after that response was written to Alexa's connection (P-24). how
	// says when that was, on which kind of device, and whether he asked or
	// the open card spoke unasked (the clinician's timeline).
	MarkHeard(ctx context.Context, patient string, uri models.URI, version int, how models.Hearing) error
	// MarkTold records that version of the fact uri was told as a plain
	// fact (an answer, the launch, a row of the care card on a screen),
	// under the same conditions as MarkHeard, confirming its offer. It
	// never settles a pending retraction (P-19).
	MarkTold(ctx context.Context, patient string, uri models.URI, version int, how models.Hearing) error
	// NotPlayed re-opens what a response Alexa reported not played had
	// marked (a SessionEndedRequest with reason ERROR; the skill keeps
	// each response's marks in its session attributes): in one
	// transaction, each fact whose heard version is still the one marked
	// goes back to HeardBefore, the version marked becomes offered and the
	// announcement is owed again, said saying so (P-24). A later confirmed
	// delivery is never undone; a second call changes nothing more. An
	// entry with Confirmed (AttrConfirmed: the response told that version
	// plainly at the version he had heard) undoes the confirmation that
	// telling may have made, so a double failure never loses the
	// retraction. Each entry's Response names the response that made it
	// (AttrResponse): a report of a response already reported (Alexa
	// delivering one report twice) changes nothing; "" is applied as it
	// comes. It reports how many facts it re-opened (0: nothing became
	// owed — a repeated report, or heard moved on since), for the skill's
	// one log line of the report (T14).
	NotPlayed(ctx context.Context, patient string, marked []models.Marked) (reopened int, err error)
}

// RevisionCounter is implemented by a CareSource that is told of each
// revision of a patient's facts as it is published (the speech principal:
// notifications/resources/updated over its subscription). Revisions returns
// a number that changes whenever the care source may have learnt that one
// of patient's speakable facts was revised; it must be safe for concurrent
// use and cheap (an atomic load: it is read twice on every turn). The skill
// reads it just before a turn's confirmation (Turn) and again just before
// the response is written: when it differs, the response is built again
// from a fresh confirmation, so a fact revised meanwhile is never said as
// current (P-24). A CareSource without it gets no such check.
type RevisionCounter interface {
	Revisions(patient string) uint64
}

// Links maps Alexa users to patients (device linking with a six-digit code
// that a carer created with POST /link).
type Links interface {
	// RedeemLinkCode links alexaUserID (and the request's apiEndpoint) to a patient; errors: ErrLinkCodeInvalid, ErrLinkBlocked, *LinkPausedError (defined in skill).
	RedeemLinkCode(ctx context.Context, alexaUserID, apiEndpoint, code string, now time.Time) (patient string, err error)
	LinkedPatient(ctx context.Context, alexaUserID string) (patient, apiEndpoint string, ok bool, err error)
}

// Linking errors returned by a Links implementation. Match with errors.Is.
var (
	// ErrLinkCodeInvalid: the code is unknown, expired (10 minutes) or already used.
	ErrLinkCodeInvalid = errors.New("link code invalid or expired")
	// ErrLinkBlocked: five wrong codes from this Alexa user within 10
	// minutes; linking is blocked for this user for 15 minutes.
	ErrLinkBlocked = errors.New("linking blocked after too many wrong codes")
)

// LinkPausedError: too many wrong codes from every device together;
// linking is paused for everyone until Until (at most ten minutes).
type LinkPausedError struct{ Until time.Time }

func (e *LinkPausedError) Error() string {
	return "linking paused after too many wrong codes from every device, until " + e.Until.UTC().Format(time.RFC3339)
}
