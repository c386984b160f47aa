package speech

import (
	"context"
	"time"

	"github.com/unsay/unsay/models"
)

// LedgerStore is the durable heard ledger the principal keeps (P-19,
// P-24): per patient and fact (an unversioned care:// URI as a string),
// the version Ray heard for certain, every one he may have heard (each
// offered in a response whose delivery is unconfirmed), his baseline, the
// announcement queue and the delivery log — patients, URIs, versions,
// ids, states, times and device kinds, never clinical text. It is shared
// by every instance on one database, so it is what the instances agree
// on; the store implements it (store.HeardLedger), and Config.Ledger hands
// it to the principal, which never imports the store (P-18).
//
// Every write is one transaction under the ledger's write lock, taken
// before it reads what it decides on, so a read-then-write decision never
// interleaves with another writer, on any instance; the delivery-log rows
// a change writes are written in its transaction. A time a write stamps
// (at, Hearing.At) is the principal's clock; zero means the ledger's own.
// Its methods are safe for concurrent use.
type LedgerStore interface {
	// Heard returns the version Ray last heard of uri for certain, 0 if
	// never.
	Heard(ctx context.Context, patient, uri string) (int, error)
	// HeardState returns what he heard of uri, for certain and maybe.
	HeardState(ctx context.Context, patient, uri string) (models.HeardState, error)
	// HeardOf returns, per fact of patient he heard, the version he heard
	// for certain.
	HeardOf(ctx context.Context, patient string) (map[string]int, error)
	// Facts returns, per fact of patient the ledger knows, what he heard
	// for certain, every version he may have heard (ascending) and his
	// baseline.
	Facts(ctx context.Context, patient string) (map[string]models.FactLedger, error)
	// Pending returns patient's pending announcements, oldest (lowest id)
	// first, each Offered while an offer of its fact is unconfirmed.
	Pending(ctx context.Context, patient string) ([]models.QueuedAnnouncement, error)
	// Status returns the heard version of uri and the to_version of its
	// pending announcement (0 when none).
	Status(ctx context.Context, patient, uri string) (heard, pendingTo int, err error)
	// Backlog counts pending announcements for every patient.
	Backlog(ctx context.Context) (int, error)
	// Followed reports which of patients have a recorded baseline.
	Followed(ctx context.Context, patients []string) (map[string]bool, error)
	// Follow records patient's baseline (uri → version; a recorded one
	// never moves) and that he is followed.
	Follow(ctx context.Context, patient string, facts map[string]int) error
	// Observe applies models.Decide to latest, the fact's current version,
	// inside one locked transaction that reads the heard state, the
	// baseline and the pending announcement: nothing, queue, extend, or
	// settle. sameHeard compares latest's words with those of
	// expect.Heard; unlike is the newest of expect.Offered whose words
	// differ from latest's (0: none; models.Observation.Unlike);
	// models.ErrHeardMoved when the heard state is no longer expect. It
	// reports whether it changed anything.
	Observe(ctx context.Context, patient, uri string, expect models.HeardState, latest int, sameHeard bool, unlike int, at time.Time) (bool, error)
	// Offered records, in one transaction, offers put in a response about
	// to be written: until confirmed he may have heard each version — every
	// one is kept, a later offer never replaces an earlier (finding F10).
	// Offers of announcements no longer pending are ignored; a fact told
	// is written only when he has not heard that version or newer and no
	// retraction of it is pending.
	Offered(ctx context.Context, patient string, offers []models.LedgerOffer, at time.Time) error
	// OfferedResponse is Offered, and in the same transaction it records
	// sent as the last response written on its session for patient (the
	// one before it kept, older ones dropped: models.SentPerSession), in
	// place of the record of sent.Replaces (P-24, finding U8). When Offered
	// writes nothing (every offer a fact told at a version he heard) it
	// records sent only if one of its Confirmed marks tells the heard
	// version before any telling confirmed it (this telling will: its
	// report must undo that) — a transaction once per version marked,
	// never per turn — else nothing. Records go after models.SentMemory.
	OfferedResponse(ctx context.Context, patient string, offers []models.LedgerOffer, sent models.LedgerSent, at time.Time) error
	// SentResponses returns the record of the responses written on session
	// for patient, the last first (at most models.SentPerSession), those
	// recorded within models.SentMemory before at; each mark's Response is
	// its response's id. Every instance reads the same record.
	SentResponses(ctx context.Context, patient, session string, at time.Time) ([]models.LedgerSent, error)
	// MarkHeard records that the announcement of uri at version was
	// delivered: version is what he heard last, even if older than the
	// ledger's; every offer up to it is confirmed; a pending announcement
	// reaching no further is heard, one reaching further starts from it.
	MarkHeard(ctx context.Context, patient, uri string, version int, how models.Hearing) error
	// MarkTold records that version of uri was told as a plain fact,
	// reporting whether the ledger changed: heard moves forward (never
	// back) and a first hearing it covers is heard, but a pending
	// retraction is never settled by it (P-19, P-24).
	MarkTold(ctx context.Context, patient, uri string, version int, how models.Hearing) (bool, error)
	// NotPlayed re-opens, in one transaction, what responses Alexa did not
	// play had marked, where heard is still the version marked — or was
	// settled forward from it since by a revision saying its words (Observe,
	// Drop: no delivery; finding T8): heard goes back, the version is
	// offered, the announcement owed again. A later plain telling of the
	// version (MarkTold) never holds back the rollback of a response that
	// withdrew words he had heard (models.LedgerMark.Withdrew: a
	// retraction; finding U2): it gave the new words, not the withdrawal.
	// A first hearing's rollback refused because a later response
	// confirmed the version (MarkTold) is remembered; a Confirmed entry (that later response's
	// report) undoes the confirmation: the remembered rollback is done,
	// or else the version is reopenable again (P-24: either order of the
	// two reports leaves the retraction owed). A report of a response
	// (LedgerMark.Response) whose report it applied within the last
	// models.NotPlayedMemory changes nothing (finding F14: Alexa may deliver one
	// report twice); marks without a Response are applied every time. It
	// reports how many facts it re-opened.
	NotPlayed(ctx context.Context, patient string, ms []models.LedgerMark, at time.Time) (int, error)
	// Drop settles the pending announcement id (its words did not change):
	// dropped, and heard moves to its to_version — a settle, no delivery,
	// as Observe's (NotPlayed still rolls back past it). A no-op when it is
	// no longer pending.
	Drop(ctx context.Context, id int64, at time.Time) error
	// Notified logs a notified event at to_version for each announcement
	// pending for patient (unless it has one).
	Notified(ctx context.Context, patient string, at time.Time) error
	// Delivery returns the record of uri: heard, baseline, the pending
	// announcement and the delivery log, oldest first (Followed unset).
	Delivery(ctx context.Context, patient, uri string) (models.DeliveryRecord, error)
	// DeliveryChanges returns the delivery-log rows after id after, in id
	// (commit) order, at most limit, whichever instance wrote them.
	DeliveryChanges(ctx context.Context, after int64, limit int) ([]models.DeliveryChange, error)
	// DeliveryCursor returns the id of the latest delivery-log row, 0 when
	// none.
	DeliveryCursor(ctx context.Context) (int64, error)
	// OnWrite sets fn to be called after every write this handle commits
	// (nil removes it); fn must not block.
	OnWrite(fn func())
}

// The ledger's rows, as the principal's code names them.
type (
	row        = models.QueuedAnnouncement
	offer      = models.LedgerOffer
	marked     = models.LedgerMark
	heardState = models.HeardState
)

// errHeardMoved: the heard or offered version changed between the
// caller's read and its write; the caller re-reads and decides again.
var errHeardMoved = models.ErrHeardMoved

// ledger is the principal's handle on its LedgerStore: the store's
// methods, with the times the principal stamps read from its clock.
type ledger struct {
	LedgerStore
	now func() time.Time
}

// Observe is LedgerStore.Observe at the principal's now.
func (l ledger) Observe(ctx context.Context, patient, uri string, expect heardState, latest int, sameHeard bool, unlike int) (bool, error) {
	return l.LedgerStore.Observe(ctx, patient, uri, expect, latest, sameHeard, unlike, l.now())
}

// Offered is LedgerStore.Offered at the principal's now.
func (l ledger) Offered(ctx context.Context, patient string, offers []offer) error {
	if len(offers) == 0 {
		return nil
	}
	return l.LedgerStore.Offered(ctx, patient, offers, l.now())
}

// OfferedResponse is LedgerStore.OfferedResponse at the principal's now.
func (l ledger) OfferedResponse(ctx context.Context, patient string, offers []offer, sent models.LedgerSent) error {
	if len(offers) == 0 {
		return nil
	}
	return l.LedgerStore.OfferedResponse(ctx, patient, offers, sent, l.now())
}

// SentResponses is LedgerStore.SentResponses at the principal's now.
func (l ledger) SentResponses(ctx context.Context, patient, session string) ([]models.LedgerSent, error) {
	return l.LedgerStore.SentResponses(ctx, patient, session, l.now())
}

// MarkHeard is LedgerStore.MarkHeard, how.At zero meaning the principal's now.
func (l ledger) MarkHeard(ctx context.Context, patient, uri string, version int, how models.Hearing) error {
	return l.LedgerStore.MarkHeard(ctx, patient, uri, version, l.stamp(how))
}

// markTold is LedgerStore.MarkTold, how.At zero meaning the principal's now.
func (l ledger) markTold(ctx context.Context, patient, uri string, version int, how models.Hearing) (bool, error) {
	return l.LedgerStore.MarkTold(ctx, patient, uri, version, l.stamp(how))
}

// NotPlayed is LedgerStore.NotPlayed at the principal's now.
func (l ledger) NotPlayed(ctx context.Context, patient string, ms []marked) (int, error) {
	return l.LedgerStore.NotPlayed(ctx, patient, ms, l.now())
}

// Drop is LedgerStore.Drop at the principal's now.
func (l ledger) Drop(ctx context.Context, id int64) error {
	return l.LedgerStore.Drop(ctx, id, l.now())
}

func (l ledger) stamp(how models.Hearing) models.Hearing {
	if how.At.IsZero() {
		how.At = l.now()
	}
	return how
}
