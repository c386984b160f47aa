package speech

// The rule that decides what Ray is owed when a fact's version is read
// (P-19: a retraction withdraws the version he actually heard; none if he
// never heard an older one; none twice; facts he was discharged with are
// not news). It is one pure function, decide, applied by the ledger inside
// the transaction that read its inputs (ledger.Observe), so every instance
// sharing the ledger decides alike.

// window is an announcement's versions: from the one he heard (0: never) to
// the latest.
type window struct{ From, To int }

// observation is what is known about one fact when its latest version is
// read.
type observation struct {
	Latest   int     // the version just read: the fact's current version
	Heard    int     // the version Ray last heard; 0 if never
	Baseline int     // the version the fact had when he was first followed; 0 if it did not exist then
	Same     bool    // the words of Heard and Latest are the same (meaningful when Heard > 0)
	Pending  *window // the announcement already queued for the fact, if any
}

// verdictKind is what decide tells the ledger to do.
type verdictKind int

const (
	keep   verdictKind = iota // nothing changes
	queue                     // queue a new announcement At
	extend                    // the pending announcement becomes At
	settle                    // nothing to say: drop any pending announcement; heard moves to At.To
)

// verdict is decide's answer.
type verdict struct {
	Kind verdictKind
	At   window
}

// decide applies P-19 to one observation:
//
//   - Latest ≤ Heard: he heard it, or newer — nothing.
//   - never heard and Latest ≤ Baseline: his starting point, not news —
//     nothing, on the first sync and after any reconnect or restart.
//   - heard, and the words did not change: nothing to say — settle (any
//     pending announcement is dropped and heard moves to Latest).
//   - an announcement already pending: it now runs from Heard to the later
//     of its end and Latest (stacked revisions collapse into one); nothing
//     if it already does.
//   - otherwise queue one from Heard (0: a first hearing) to Latest.
func decide(o observation) verdict {
	switch {
	case o.Latest <= o.Heard:
		return verdict{Kind: keep}
	case o.Heard == 0 && o.Latest <= o.Baseline:
		return verdict{Kind: keep}
	case o.Heard > 0 && o.Same:
		return verdict{Kind: settle, At: window{From: o.Heard, To: o.Latest}}
	case o.Pending != nil:
		want := window{From: o.Heard, To: max(o.Pending.To, o.Latest)}
		if *o.Pending == want {
			return verdict{Kind: keep}
		}
		return verdict{Kind: extend, At: want}
	}
	return verdict{Kind: queue, At: window{From: o.Heard, To: o.Latest}}
}
