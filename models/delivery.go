package models

import (
	"slices"
	"time"
)

// The delivery vocabulary: how a revision of a speakable fact travels from
// the clinician's write to Ray's ears, as the heard ledger (bridge/speech)
// records it and the clinician's timeline shows it ("did Ray hear my
// change?"). Like the ledger it names patients, facts, versions, times and
// devices — never clinical text.

// Device is the kind of Alexa device a response reached.
type Device string

const (
	// DeviceScreen is a device with a screen (an Echo Show): the request
	// declared Alexa.Presentation.APL.
	DeviceScreen Device = "screen"
	// DeviceVoice is a device without a screen (an Echo speaker).
	DeviceVoice Device = "voice"
)

// Via says how something came to be said to the patient.
type Via string

const (
	// ViaAsked: in a turn Ray started — he opened the skill, asked, or
	// touched the screen.
	ViaAsked Via = "asked"
	// ViaCard: unasked, by the open care card's tick (the Echo Show he was
	// looking at spoke it without a word from him).
	ViaCard Via = "card"
	// ViaNotification: unasked, by a proactive notification ("a message
	// from your care team", P-23). It carries no words: the retraction
	// itself is still spoken at his next turn.
	ViaNotification Via = "notification"
)

// Hearing is how one response reached the patient: when it was written in
// full to Alexa's connection (the server clock; zero means "now" to the
// ledger), on which kind of device, and how it came to be said. The skill
// passes it with every MarkHeard.
type Hearing struct {
	At     time.Time
	Device Device // "" when unknown
	Via    Via    // "" when unknown
}

// DeliveryKind names one event of a fact's delivery log.
type DeliveryKind string

const (
	// DeliveryQueued: an announcement reaching Version was queued for Ray
	// (or a pending one extended to it).
	DeliveryQueued DeliveryKind = "queued"
	// DeliveryOffered: the announcement of Version was put in a response to
	// Alexa; DeliveryHeard follows once that response was written in full
	// (P-24). Offered and never heard: it is spoken again, saying so.
	DeliveryOffered DeliveryKind = "offered"
	// DeliveryHeard: Ray heard Version (Device and Via say how).
	DeliveryHeard DeliveryKind = "heard"
	// DeliveryUnchanged: Version's words are the ones Ray had heard, so
	// there was nothing to tell him; the ledger moved on.
	DeliveryUnchanged DeliveryKind = "unchanged"
	// DeliveryNotified: a proactive notification told Ray, unasked, that a
	// message waits, while Version was pending (Via is ViaNotification).
	DeliveryNotified DeliveryKind = "notified"
)

// Valid reports whether k is one of the kinds above.
func (k DeliveryKind) Valid() bool {
	switch k {
	case DeliveryQueued, DeliveryOffered, DeliveryHeard, DeliveryUnchanged, DeliveryNotified:
		return true
	}
	return false
}

// DeliveryEvent is one event of a fact's delivery log: at most one of each
// kind per version (the first), so a log is bounded by five events per
// version.
type DeliveryEvent struct {
	Kind    DeliveryKind
	Version int
	At      time.Time
	Device  Device // DeliveryHeard only; "" when unknown
	Via     Via    // DeliveryHeard and DeliveryNotified; "" when unknown
}

// PendingDelivery is the announcement Ray is owed for a fact: from the
// version he heard (0: he never heard one — a first hearing) to To, the
// latest he will hear. Offered: it was put in a response whose delivery
// was never confirmed (P-24).
type PendingDelivery struct {
	From, To int
	Offered  bool
}

// DeliveryRecord is the heard ledger's record of one speakable fact.
type DeliveryRecord struct {
	// Heard is the version Ray last heard; 0 when never.
	Heard int
	// Baseline is the version the speech principal first followed him at:
	// at or below it nothing is announced (he hears it when he asks, P-19).
	Baseline int
	// Pending is the announcement he is owed, nil when none.
	Pending *PendingDelivery
	// Offered is every version he may have heard, ascending: each put in
	// a response whose delivery was never confirmed, or was confirmed and
	// then reported not played by Alexa (the heard ledger's offers).
	Offered []int
	// Events is the delivery log, oldest first.
	Events []DeliveryEvent
	// Followed: the speech principal follows the patient (a device is
	// linked to him, or he is configured): a revision will reach him.
	Followed bool
}

// DeliveryState is where one version of a fact stands with Ray.
type DeliveryState string

const (
	// StateHeard: Ray heard this version. At, Device and Via say when and
	// how when recorded (zero for what he heard before delivery times were
	// kept). WithdrawnAt is set once he heard a later version.
	StateHeard DeliveryState = "heard"
	// StatePending: Ray will hear this version at his next turn, a
	// retraction of Withdraws when Withdraws > 0, else a first hearing.
	StatePending DeliveryState = "pending"
	// StateUnchanged: its words equal those Ray had heard: nothing to tell.
	StateUnchanged DeliveryState = "unchanged"
	// StateReplaced: a later version replaced it before Ray heard it.
	StateReplaced DeliveryState = "replaced"
	// StateUnconfirmed: sent to Alexa, but whether Ray heard it is not
	// known — the delivery was never confirmed, or Alexa reported the
	// response not played — so the next retraction withdraws it too
	// (P-24). At is when it was sent (offered) or, failing that, when its
	// delivery was first recorded; zero when neither was.
	StateUnconfirmed DeliveryState = "unconfirmed"
	// StateUnasked: his starting point when the speech principal began to
	// follow him — never announced; he hears it when he asks.
	StateUnasked DeliveryState = "unasked"
	// StateReading: just written; the speech principal has not queued it
	// yet (seconds).
	StateReading DeliveryState = "reading"
	// StateNoDevice: no device is linked to the patient, so nothing will
	// tell him.
	StateNoDevice DeliveryState = "nodevice"
)

// VersionDelivery is whether, and how, Ray heard one version of a fact.
type VersionDelivery struct {
	Version int
	State   DeliveryState
	// At is when he heard it (StateHeard) or when its words were found
	// unchanged (StateUnchanged); zero when not recorded.
	At     time.Time
	Device Device
	Via    Via
	// WithdrawnAt (StateHeard): when he heard a later version, which
	// withdrew this one; zero while it stands.
	WithdrawnAt time.Time
	// Withdraws (StatePending): the version the retraction withdraws; 0
	// for a first hearing.
	Withdraws int
	// Offered (StatePending): it was put in a response whose delivery was
	// never confirmed; he will hear it again, saying so (P-24).
	Offered bool
	// QueuedAt, OfferedAt and NotifiedAt (StatePending): when the
	// announcement was queued, when it was offered (Offered), and when a
	// notification told him unasked that a message waits; each zero when
	// it did not happen or was not recorded.
	QueuedAt, OfferedAt, NotifiedAt time.Time
}

// Timeline returns, for versions 1…latest of a fact, where each stands with
// Ray according to rec, oldest first:
//
//   - the pending announcement's To is StatePending (Withdraws its From,
//     with the queued, offered and notified times), even with a heard
//     event (Alexa reported that response was not played);
//   - a version he may have heard (rec.Offered) newer than the one he
//     heard for certain is StateUnconfirmed, even with a heard event
//     (Alexa reported that response was not played; breakit8);
//   - a version with a heard event is StateHeard (when, on which device,
//     how), WithdrawnAt the first later version's heard event;
//   - one with an unchanged event is StateUnchanged;
//   - rec.Heard without an event is StateHeard with no time (heard before
//     delivery times were recorded);
//   - any other version below latest, or below what he heard or is owed,
//     is StateReplaced;
//   - latest itself, not heard and not pending: StateNoDevice when the
//     patient is not followed, StateUnasked at or below the baseline,
//     else StateReading.
//
// latest < 1 gives nil. It is a pure function of its arguments.
func Timeline(latest int, rec DeliveryRecord) []VersionDelivery {
	if latest < 1 {
		return nil
	}
	first := map[DeliveryKind]map[int]DeliveryEvent{}
	for _, e := range rec.Events {
		m := first[e.Kind]
		if m == nil {
			m = map[int]DeliveryEvent{}
			first[e.Kind] = m
		}
		if _, seen := m[e.Version]; !seen {
			m[e.Version] = e
		}
	}
	heard := first[DeliveryHeard]
	out := make([]VersionDelivery, 0, latest)
	for n := 1; n <= latest; n++ {
		d := VersionDelivery{Version: n}
		owedPast := rec.Pending != nil && rec.Pending.To > n
		switch e, ok := heard[n]; {
		case rec.Pending != nil && rec.Pending.To == n:
			// Owed, even when a heard event says otherwise: Alexa reported
			// that response was not played, or he heard an older version
			// last, so it is said again.
			d.State, d.Withdraws = StatePending, rec.Pending.From
			d.QueuedAt = first[DeliveryQueued][n].At
			if d.Offered = rec.Pending.Offered; d.Offered {
				d.OfferedAt = first[DeliveryOffered][n].At
			}
			d.NotifiedAt = first[DeliveryNotified][n].At
		case n > rec.Heard && slices.Contains(rec.Offered, n):
			d.State, d.At = StateUnconfirmed, first[DeliveryOffered][n].At
			if d.At.IsZero() && ok {
				d.At = e.At
			}
		case ok:
			d.State, d.At, d.Device, d.Via = StateHeard, e.At, e.Device, e.Via
			for m := n + 1; m <= latest; m++ {
				if later, ok := heard[m]; ok {
					d.WithdrawnAt = later.At
					break
				}
			}
		case hasEvent(first, DeliveryUnchanged, n):
			d.State, d.At = StateUnchanged, first[DeliveryUnchanged][n].At
		case n == rec.Heard:
			d.State = StateHeard
		case n < latest || rec.Heard > n || owedPast:
			d.State = StateReplaced
		case !rec.Followed:
			d.State = StateNoDevice
		case n <= rec.Baseline:
			d.State = StateUnasked
		default:
			d.State = StateReading
		}
		out = append(out, d)
	}
	return out
}

func hasEvent(first map[DeliveryKind]map[int]DeliveryEvent, k DeliveryKind, n int) bool {
	_, ok := first[k][n]
	return ok
}
