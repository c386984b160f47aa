package speech

import "testing"

func TestDecide_WithdrawsWhatRayHeardOrMayHaveHeardOnceAndNeverHisStartingPoint(t *testing.T) {
	p := func(from, to int) *window { return &window{From: from, To: to} }
	tests := []struct {
		name string
		o    observation
		want verdict
	}{
		// He heard it or newer.
		{"heard this version", observation{Latest: 2, Heard: 2}, verdict{Kind: keep}},
		{"heard a newer one (a late read)", observation{Latest: 2, Heard: 3}, verdict{Kind: keep}},
		// His starting point (P-19: the facts he was discharged with are not news).
		{"first sync: the baseline itself", observation{Latest: 3, Baseline: 3}, verdict{Kind: keep}},
		{"after a reconnect: still the baseline", observation{Latest: 3, Baseline: 3}, verdict{Kind: keep}},
		{"after a reconnect: an older read than the baseline", observation{Latest: 2, Baseline: 3}, verdict{Kind: keep}},
		{"a revision after the baseline is news, told as a first hearing", observation{Latest: 4, Baseline: 3}, verdict{Kind: queue, At: window{0, 4}}},
		{"a fact created after he was followed", observation{Latest: 1}, verdict{Kind: queue, At: window{0, 1}}},
		{"a pending first hearing extended", observation{Latest: 5, Baseline: 3, Pending: p(0, 4)}, verdict{Kind: extend, At: window{0, 5}}},
		// A retraction of what he heard.
		{"a revision of what he heard", observation{Latest: 3, Heard: 2}, verdict{Kind: queue, At: window{2, 3}}},
		{"heard, below the baseline: still withdrawn", observation{Latest: 3, Heard: 1, Baseline: 3}, verdict{Kind: queue, At: window{1, 3}}},
		{"stacked revisions collapse into one", observation{Latest: 5, Heard: 2, Pending: p(2, 4)}, verdict{Kind: extend, At: window{2, 5}}},
		{"already pending exactly: none twice", observation{Latest: 4, Heard: 2, Pending: p(2, 4)}, verdict{Kind: keep}},
		{"an older read while a newer one is pending", observation{Latest: 3, Heard: 2, Pending: p(2, 4)}, verdict{Kind: keep}},
		{"he heard more since it was queued", observation{Latest: 4, Heard: 3, Pending: p(2, 4)}, verdict{Kind: extend, At: window{3, 4}}},
		// Nothing to say.
		{"the words did not change", observation{Latest: 3, Heard: 2, SameAsHeard: true}, verdict{Kind: settle, At: window{2, 3}}},
		{"changed back to what he heard", observation{Latest: 4, Heard: 2, SameAsHeard: true, Pending: p(2, 3)}, verdict{Kind: settle, At: window{2, 4}}},
		{"same words but never heard: a first hearing still", observation{Latest: 2, SameAsHeard: true}, verdict{Kind: queue, At: window{0, 2}}},
		{"an older read never settles what a newer one queued", observation{Latest: 3, Heard: 2, SameAsHeard: true, Pending: p(2, 4)}, verdict{Kind: keep}},
		// What he may have heard: offered in a response whose delivery is unconfirmed (P-24).
		{"offered, not yet confirmed, re-read: nothing new", observation{Latest: 3, Heard: 2, Offered: 3, SameAsOffered: true, Pending: p(2, 3)}, verdict{Kind: keep}},
		{"offered, then reverted to what he heard: the offered words are withdrawn", observation{Latest: 4, Heard: 2, Offered: 3, SameAsHeard: true, Pending: p(2, 3)}, verdict{Kind: extend, At: window{3, 4}}},
		{"offered, then revised anew: the offered words are withdrawn", observation{Latest: 4, Heard: 2, Offered: 3, Pending: p(2, 3)}, verdict{Kind: extend, At: window{3, 4}}},
		{"offered, then the same words again: still from what he heard", observation{Latest: 4, Heard: 2, Offered: 3, SameAsOffered: true, Pending: p(2, 3)}, verdict{Kind: extend, At: window{2, 4}}},
		{"offered, then the same words as both: nothing to say", observation{Latest: 4, Heard: 2, Offered: 3, SameAsHeard: true, SameAsOffered: true, Pending: p(2, 3)}, verdict{Kind: settle, At: window{2, 4}}},
		{"an offered first hearing, revised: the offered words are withdrawn", observation{Latest: 2, Offered: 1, Pending: p(0, 1)}, verdict{Kind: extend, At: window{1, 2}}},
		{"an offered first hearing re-read: nothing new", observation{Latest: 4, Offered: 4, Baseline: 3, SameAsOffered: true, Pending: p(0, 4)}, verdict{Kind: keep}},
		{"an offered first hearing, the same words again: still a first hearing", observation{Latest: 5, Offered: 4, Baseline: 3, SameAsOffered: true, Pending: p(0, 4)}, verdict{Kind: extend, At: window{0, 5}}},
		{"offered, the announcement gone, then revised: queued from the offered words", observation{Latest: 5, Heard: 2, Offered: 3, SameAsHeard: true}, verdict{Kind: queue, At: window{3, 5}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := decide(tt.o); got != tt.want {
				t.Fatalf("decide(%+v) = %+v, want %+v", tt.o, got, tt.want)
			}
		})
	}
}
