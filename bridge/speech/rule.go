package speech

// The rule that decides what Ray is owed when a fact's version is read
// (P-19: a retraction withdraws the version he actually heard; none if he
// never heard an older one; none twice; facts he was discharged with are
// not news; P-24: losing or distorting a retraction is worse than
// repeating one). It is one pure function, decide, applied by the ledger
// inside the transaction that read its inputs (ledger.Observe), so every
// instance sharing the ledger decides alike.
//
// What Ray has heard of a fact is two versions:
//
//   - Heard: the version whose words he last heard for certain — the last
//     response confirmed delivered (written in full to Alexa) that carried
//     it, even when a newer version was current by then;
//   - Offered: the version he may have heard — put in a response whose
//     delivery was never confirmed (a crash or a failed write between
//     writing it and the ledger's commit, or a turn still under way).
//
// A later version is compared with the words of both: it withdraws the
// words he may have heard when they differ from it (a quick revert during
// his turn withdraws the instruction the turn told him, not nothing), and
// is said saying so ("as I may not have told you properly", CONVERSATIONS
// §7) while the offer is unconfirmed.

// window is an announcement's versions: from the one whose words it
// withdraws (0: none — a first hearing) to the latest.
type window struct{ From, To int }

// observation is what is known about one fact when its latest version is
// read.
type observation struct {
	Latest   int // the version just read: the fact's current version
	Heard    int // the version Ray last heard for certain; 0 if never
	Offered  int // the version he may have heard (offered, delivery unconfirmed); 0 if none
	Baseline int // the version the fact had when he was first followed; 0 if it did not exist then
	// SameAsHeard: the words of Heard and Latest are the same (meaningful
	// when Heard > 0); SameAsOffered: those of Offered and Latest
	// (meaningful when Offered > 0).
	SameAsHeard, SameAsOffered bool
	Pending                    *window // the announcement already queued for the fact, if any
}

// verdictKind is what decide tells the ledger to do.
type verdictKind int

const (
	keep   verdictKind = iota // nothing changes
	queue                     // queue a new announcement At
	extend                    // the pending announcement becomes At
	settle                    // nothing to say: drop any pending announcement; heard moves to At.To, the offer is settled
)

// verdict is decide's answer.
type verdict struct {
	Kind verdictKind
	At   window
}

// decide applies P-19 and P-24 to one observation:
//
//   - Latest ≤ Heard: he heard it, or newer — nothing.
//   - an older read than the pending announcement's latest: that one
//     decided already — nothing.
//   - never heard nor offered, and Latest ≤ Baseline: his starting point,
//     not news — nothing, on the first sync and after any reconnect or
//     restart.
//   - offered, unconfirmed: the latest words equal both what he may have
//     heard and what he heard for certain — nothing to say, settle; equal
//     to what he may have heard only (or he never heard any before) — the
//     announcement runs from Heard, as offered; otherwise it withdraws the
//     words he may have heard: from Offered to Latest.
//   - heard, and the words did not change: nothing to say — settle (any
//     pending announcement is dropped and heard moves to Latest).
//   - otherwise one announcement from Heard (0: a first hearing) to the
//     later of Latest and the pending one's end — queued, or the pending
//     one extended (stacked revisions collapse into one); nothing if it
//     already is that.
func decide(o observation) verdict {
	switch {
	case o.Latest <= o.Heard:
		return verdict{Kind: keep}
	case o.Pending != nil && o.Latest < o.Pending.To:
		return verdict{Kind: keep}
	case o.Heard == 0 && o.Offered == 0 && o.Latest <= o.Baseline:
		return verdict{Kind: keep}
	}
	from := o.Heard
	switch {
	case o.Offered > 0:
		switch {
		case o.SameAsOffered && o.Heard > 0 && o.SameAsHeard:
			return verdict{Kind: settle, At: window{From: o.Heard, To: o.Latest}}
		case !o.SameAsOffered:
			from = o.Offered
		}
	case o.Heard > 0 && o.SameAsHeard:
		return verdict{Kind: settle, At: window{From: o.Heard, To: o.Latest}}
	}
	if o.Pending == nil {
		return verdict{Kind: queue, At: window{From: from, To: o.Latest}}
	}
	want := window{From: from, To: max(o.Pending.To, o.Latest)}
	if *o.Pending == want {
		return verdict{Kind: keep}
	}
	return verdict{Kind: extend, At: want}
}
