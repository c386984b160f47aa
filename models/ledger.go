package models

import (
	"errors"
	"slices"
	"time"
)

// The heard ledger's vocabulary (P-19, P-24): what the speech principal
// (bridge/speech) and the ledger that keeps it durable (store) exchange.
// Like the ledger it names patients, facts (unversioned care:// URIs as
// strings), versions, announcement ids and states — never clinical text.

// ErrHeardMoved is returned by a ledger's Observe when the heard or
// offered version changed between the caller's read and its write; the
// caller re-reads and decides again. Match with errors.Is.
var ErrHeardMoved = errors.New("speech: heard version moved")

// ErrReportRefused is wrapped by a not-played report's error (the skill's
// CareSource.NotPlayed) when its marks themselves were refused — a
// malformed patient or entry: trying again changes nothing. Any other
// error of that call is the store's (busy, locked, down), and the skill
// keeps the report and applies it again once the store commits (P-24,
// finding V5). Match with errors.Is.
var ErrReportRefused = errors.New("not-played report refused")

// HeardState is what Ray heard of one fact: the version he heard for
// certain (Heard; 0 for none) and every version he may have heard
// (Offered: each put in a response whose delivery was never confirmed,
// since the last confirmed one), ascending; nil for none (P-24, finding
// F10: a second unconfirmed offer never hides the first).
type HeardState struct {
	Heard   int
	Offered []int
}

// LastOffered is the newest version he may have heard, 0 if none.
func (h HeardState) LastOffered() int { return lastOf(h.Offered) }

// Equal reports whether h and o are the same state.
func (h HeardState) Equal(o HeardState) bool {
	return h.Heard == o.Heard && slices.Equal(h.Offered, o.Offered)
}

// FactLedger is what the ledger holds about one fact of a patient: the
// version he heard for certain, every version he may have heard
// (ascending, as HeardState.Offered) and his baseline (the version he was
// first followed at); 0 or nil for none.
type FactLedger struct {
	Heard    int
	Offered  []int
	Baseline int
}

// LastOffered is the newest version he may have heard, 0 if none.
func (f FactLedger) LastOffered() int { return lastOf(f.Offered) }

func lastOf(vs []int) int {
	if len(vs) == 0 {
		return 0
	}
	return vs[len(vs)-1]
}

// QueuedAnnouncement is one pending announcement as the ledger stores it:
// its queue id (stable across restarts), the patient, the fact (an
// unversioned care:// URI), the version whose words it withdraws (From; 0
// for a first hearing) and the latest it reaches (To). Offered: an offer
// of the fact is unconfirmed — he may have heard it — so it is said again
// saying so (P-24).
type QueuedAnnouncement struct {
	ID      int64
	Patient string
	URI     string
	From    int
	To      int
	Offered bool
}

// LedgerOffer is one Offer as the ledger records it (URI as a string):
// an announcement (ID, its fact, the version spoken) or, with Told, a
// version of a fact told plainly (ID 0).
type LedgerOffer struct {
	ID      int64
	URI     string
	Version int
	Told    bool
}

// NotPlayedMemory is how long the heard ledger remembers the id of a
// response whose not-played report it applied (LedgerMark.Response), so
// that the same report delivered again changes nothing (finding F14). A
// repeat later than that is applied again: a retraction said once more,
// never one lost (P-24).
const NotPlayedMemory = 24 * time.Hour

// LedgerMark is one Marked as the ledger re-opens it (URI as a string):
// the version a response spoke, the version heard before it and the one
// its retraction withdrew. With Confirmed it is instead a response's plain
// telling of the version he had heard (Version; HeardBefore and From 0),
// which may have confirmed that version (MarkTold: not reopenable); its
// report undoes the confirmation (NotPlayed). Response is the id of the
// response that made the mark (Marked.Response; "" when unknown): the
// ledger applies one response's report once (finding F14).
type LedgerMark struct {
	URI                        string
	HeardBefore, From, Version int
	Confirmed                  bool
	Response                   string
}

// Withdrew reports whether the response that made m moved Ray off words
// he had heard, or may have heard — a retraction (From > 0), or a plain
// telling of a version newer than the one he heard for certain
// (HeardBefore > 0) — rather than giving him a fact's first words (a
// first hearing, or its plain telling: HeardBefore and From 0). A
// Confirmed entry withdrew nothing. Reported not played, such a response
// owes its retraction again even when a later response told the same
// version plainly: the plain telling gave him the new words but never
// said they withdrew the old ones (NotPlayed; finding U2, P-24).
func (m LedgerMark) Withdrew() bool {
	return !m.Confirmed && (m.From > 0 || m.HeardBefore > 0)
}

// DeliveryChange is one row of the delivery log, by id (ids grow in
// commit order): the fact whose log grew.
type DeliveryChange struct {
	ID  int64
	URI string
}

// The rule that decides what Ray is owed when a fact's version is read
// (P-19: a retraction withdraws the version he actually heard; none if he
// never heard an older one; none twice; facts he was discharged with are
// not news; P-24: losing or distorting a retraction is worse than
// repeating one). It is one pure function, Decide, applied by the ledger
// inside the transaction that read its inputs (the ledger's Observe), so
// every instance sharing the ledger decides alike.
//
// What Ray has heard of a fact is two versions:
//
//   - Heard: the version whose words he last heard for certain — the last
//     response confirmed delivered (written in full to Alexa) that carried
//     it, even when a newer version was current by then;
//   - Offered: the versions he may have heard — each put in a response
//     whose delivery was never confirmed (a crash or a failed write between
//     writing it and the ledger's commit, or a turn still under way), all
//     of them kept until a confirmed delivery reaches them.
//
// A later version is compared with the words of both: it withdraws the
// words he may have heard when they differ from it (a quick revert during
// his turn withdraws the instruction the turn told him, not nothing), and
// is said saying so ("as I may not have told you properly") while the
// offer is unconfirmed (P-19). The announcement withdraws from the newest
// offered version whose words differ from the latest (Unlike); when the
// retraction is spoken the words of every other offered version are
// withdrawn with it (bridge/speech's Turn, Announcement.MayAlso).

// Window is an announcement's versions: from the one whose words it
// withdraws (0: none — a first hearing) to the latest.
type Window struct{ From, To int }

// Observation is what is known about one fact when its latest version is
// read.
type Observation struct {
	Latest   int // the version just read: the fact's current version
	Heard    int // the version Ray last heard for certain; 0 if never
	Offered  int // the newest version he may have heard (offered, delivery unconfirmed); 0 if none
	Baseline int // the version the fact had when he was first followed; 0 if it did not exist then
	// SameAsHeard: the words of Heard and Latest are the same (meaningful
	// when Heard > 0).
	SameAsHeard bool
	// Unlike is the newest of the versions he may have heard whose words
	// differ from Latest's — Offered itself, or an earlier unconfirmed
	// offer when Offered says Latest's words; 0 when every one says them
	// (or none was offered).
	Unlike  int
	Pending *Window // the announcement already queued for the fact, if any
}

// VerdictKind is what Decide tells the ledger to do.
type VerdictKind int

const (
	Keep   VerdictKind = iota // nothing changes
	Queue                     // queue a new announcement At
	Extend                    // the pending announcement becomes At
	Settle                    // nothing to say: drop any pending announcement; heard moves to At.To, the offer is settled
)

// Verdict is Decide's answer.
type Verdict struct {
	Kind VerdictKind
	At   Window
}

// Decide applies P-19 and P-24 to one observation:
//
//   - Latest ≤ Heard: he heard it, or newer — nothing.
//   - an older read than the pending announcement's latest: that one
//     decided already — nothing.
//   - never heard nor offered, and Latest ≤ Baseline: his starting point,
//     not news — nothing, on the first sync and after any reconnect or
//     restart.
//   - offered, unconfirmed: the latest words differ from those of a
//     version he may have heard — the announcement withdraws them: from
//     Unlike (the newest such) to Latest; they equal the words of every
//     version he may have heard and what he heard for certain — nothing to
//     say, settle; those of every version he may have heard only (or he
//     never heard any before) — the announcement runs from Heard, as
//     offered.
//   - heard, and the words did not change: nothing to say — settle (any
//     pending announcement is dropped and heard moves to Latest).
//   - otherwise one announcement from Heard (0: a first hearing) to the
//     later of Latest and the pending one's end — queued, or the pending
//     one extended (stacked revisions collapse into one); nothing if it
//     already is that.
func Decide(o Observation) Verdict {
	switch {
	case o.Latest <= o.Heard:
		return Verdict{Kind: Keep}
	case o.Pending != nil && o.Latest < o.Pending.To:
		return Verdict{Kind: Keep}
	case o.Heard == 0 && o.Offered == 0 && o.Latest <= o.Baseline:
		return Verdict{Kind: Keep}
	}
	from := o.Heard
	switch {
	case o.Unlike > 0:
		from = o.Unlike
	case o.Heard > 0 && o.SameAsHeard:
		return Verdict{Kind: Settle, At: Window{From: o.Heard, To: o.Latest}}
	}
	if o.Pending == nil {
		return Verdict{Kind: Queue, At: Window{From: from, To: o.Latest}}
	}
	want := Window{From: from, To: max(o.Pending.To, o.Latest)}
	if *o.Pending == want {
		return Verdict{Kind: Keep}
	}
	return Verdict{Kind: Extend, At: want}
}

// SentMemory is how long the heard ledger keeps the record of the
// responses written on an Alexa session (LedgerSent; finding U8): a day,
// like NotPlayedMemory — Alexa's error report of a response comes within
// seconds of it, on whichever instance, after whatever restart.
const SentMemory = 24 * time.Hour

// SentPerSession is how many responses of one session the ledger keeps
// the record of: the last and the one before it (the session attributes an
// error report echoes are those of one of the two).
const SentPerSession = 2

// MaxSessionID bounds an Alexa session id the ledger records (Alexa's are
// "amzn1.echo-api.session." and a UUID, about 60 bytes).
const MaxSessionID = 256

// ValidSessionID reports whether s is an Alexa session id the ledger may
// record: 1 to MaxSessionID bytes of printable ASCII, no space.
func ValidSessionID(s string) bool {
	if s == "" || len(s) > MaxSessionID {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] > '~' {
			return false
		}
	}
	return true
}

// SentResponse is the record of one response written on an Alexa session
// that marked something heard (P-24, finding U8): the session (Alexa's
// session id), the response's id (Marked.Response, the AttrResponse its
// session attributes carry), its marks (each with that Response) and when
// the skill wrote it (its clock). The skill hands it to the care source
// with the response's offers (CareSource.OfferedResponse), which keeps it
// in the heard ledger in the same transaction, so that Alexa's error
// report of the response finds what it marked on any instance and after a
// restart, whatever session attributes Alexa echoes. Replaces is the id of
// the attempt at the same response it replaces ("" for none): one built
// again because a revision overtook it, never written.
type SentResponse struct {
	Session  string
	ID       string
	Marks    []Marked
	At       time.Time
	Replaces string
}

// LedgerSent is one SentResponse as the ledger keeps it (marks as
// LedgerMark): patient-scoped, at most SentPerSession per session, for
// SentMemory after At.
type LedgerSent struct {
	Session  string
	Response string
	Marks    []LedgerMark
	At       time.Time
	Replaces string
}
