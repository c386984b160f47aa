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
// to an assistant-only fact (P-18, T-7). Tests use an in-memory fake.
type CareSource interface {
	// Facts returns the patient's current speakable facts (audience user), sorted by URI.
	Facts(ctx context.Context, patient string) ([]models.Version, error)
	// Pending returns announcements the patient must hear first, oldest first (P-19).
	Pending(ctx context.Context, patient string) ([]models.Announcement, error)
	// MarkHeard records that the patient heard version of the fact uri (unversioned) — called only for what was put in outputSpeech, after the response is built.
	MarkHeard(ctx context.Context, patient string, uri models.URI, version int) error
}

// Links maps Alexa users to patients (device linking with a six-digit code
// that a carer created with POST /link).
type Links interface {
	// RedeemLinkCode links alexaUserID (and the request's apiEndpoint) to a patient; errors: ErrLinkCodeInvalid, ErrLinkBlocked (defined in skill).
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
