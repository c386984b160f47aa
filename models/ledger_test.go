package models

import "testing"

func TestDecide_WithdrawsWhatRayHeardOrMayHaveHeardOnceAndNeverHisStartingPoint(t *testing.T) {
	p := func(from, to int) *Window { return &Window{From: from, To: to} }
	tests := []struct {
		name string
		o    Observation
		want Verdict
	}{
		// He heard it or newer.
		{"heard this version", Observation{Latest: 2, Heard: 2}, Verdict{Kind: Keep}},
		{"heard a newer one (a late read)", Observation{Latest: 2, Heard: 3}, Verdict{Kind: Keep}},
		// His starting point (P-19: the facts he was discharged with are not news).
		{"first sync: the baseline itself", Observation{Latest: 3, Baseline: 3}, Verdict{Kind: Keep}},
		{"after a reconnect: still the baseline", Observation{Latest: 3, Baseline: 3}, Verdict{Kind: Keep}},
		{"after a reconnect: an older read than the baseline", Observation{Latest: 2, Baseline: 3}, Verdict{Kind: Keep}},
		{"a revision after the baseline is news, told as a first hearing", Observation{Latest: 4, Baseline: 3}, Verdict{Kind: Queue, At: Window{0, 4}}},
		{"a fact created after he was followed", Observation{Latest: 1}, Verdict{Kind: Queue, At: Window{0, 1}}},
		{"a pending first hearing extended", Observation{Latest: 5, Baseline: 3, Pending: p(0, 4)}, Verdict{Kind: Extend, At: Window{0, 5}}},
		// A retraction of what he heard.
		{"a revision of what he heard", Observation{Latest: 3, Heard: 2}, Verdict{Kind: Queue, At: Window{2, 3}}},
		{"heard, below the baseline: still withdrawn", Observation{Latest: 3, Heard: 1, Baseline: 3}, Verdict{Kind: Queue, At: Window{1, 3}}},
		{"stacked revisions collapse into one", Observation{Latest: 5, Heard: 2, Pending: p(2, 4)}, Verdict{Kind: Extend, At: Window{2, 5}}},
		{"already pending exactly: none twice", Observation{Latest: 4, Heard: 2, Pending: p(2, 4)}, Verdict{Kind: Keep}},
		{"an older read while a newer one is pending", Observation{Latest: 3, Heard: 2, Pending: p(2, 4)}, Verdict{Kind: Keep}},
		{"he heard more since it was queued", Observation{Latest: 4, Heard: 3, Pending: p(2, 4)}, Verdict{Kind: Extend, At: Window{3, 4}}},
		// Nothing to say.
		{"the words did not change", Observation{Latest: 3, Heard: 2, SameAsHeard: true}, Verdict{Kind: Settle, At: Window{2, 3}}},
		{"changed back to what he heard", Observation{Latest: 4, Heard: 2, SameAsHeard: true, Pending: p(2, 3)}, Verdict{Kind: Settle, At: Window{2, 4}}},
		{"same words but never heard: a first hearing still", Observation{Latest: 2, SameAsHeard: true}, Verdict{Kind: Queue, At: Window{0, 2}}},
		{"an older read never settles what a newer one queued", Observation{Latest: 3, Heard: 2, SameAsHeard: true, Pending: p(2, 4)}, Verdict{Kind: Keep}},
		// What he may have heard: offered in a response whose delivery is unconfirmed (P-24).
		{"offered, not yet confirmed, re-read: nothing new", Observation{Latest: 3, Heard: 2, Offered: 3, Pending: p(2, 3)}, Verdict{Kind: Keep}},
		{"offered, then reverted to what he heard: the offered words are withdrawn", Observation{Latest: 4, Heard: 2, Offered: 3, Unlike: 3, SameAsHeard: true, Pending: p(2, 3)}, Verdict{Kind: Extend, At: Window{3, 4}}},
		{"offered, then revised anew: the offered words are withdrawn", Observation{Latest: 4, Heard: 2, Offered: 3, Unlike: 3, Pending: p(2, 3)}, Verdict{Kind: Extend, At: Window{3, 4}}},
		{"offered, then the same words again: still from what he heard", Observation{Latest: 4, Heard: 2, Offered: 3, Pending: p(2, 3)}, Verdict{Kind: Extend, At: Window{2, 4}}},
		{"offered, then the same words as both: nothing to say", Observation{Latest: 4, Heard: 2, Offered: 3, SameAsHeard: true, Pending: p(2, 3)}, Verdict{Kind: Settle, At: Window{2, 4}}},
		{"an offered first hearing, revised: the offered words are withdrawn", Observation{Latest: 2, Offered: 1, Unlike: 1, Pending: p(0, 1)}, Verdict{Kind: Extend, At: Window{1, 2}}},
		{"an offered first hearing re-read: nothing new", Observation{Latest: 4, Offered: 4, Baseline: 3, Pending: p(0, 4)}, Verdict{Kind: Keep}},
		{"an offered first hearing, the same words again: still a first hearing", Observation{Latest: 5, Offered: 4, Baseline: 3, Pending: p(0, 4)}, Verdict{Kind: Extend, At: Window{0, 5}}},
		// Two unconfirmed offers in a row (finding F10): the newest says the
		// latest's words, the earlier does not — it is still withdrawn.
		{"offered twice, the newest as the latest: the earlier offer is withdrawn", Observation{Latest: 5, Heard: 2, Offered: 4, Unlike: 3, Pending: p(3, 4)}, Verdict{Kind: Extend, At: Window{3, 5}}},
		{"offered twice, the newest as the latest, he heard the same: the earlier offer is withdrawn", Observation{Latest: 5, Heard: 2, Offered: 4, Unlike: 3, SameAsHeard: true, Pending: p(3, 4)}, Verdict{Kind: Extend, At: Window{3, 5}}},
		{"an offered first hearing offered twice, the newest as the latest: the earlier offer is withdrawn", Observation{Latest: 3, Offered: 2, Unlike: 1, Pending: p(1, 2)}, Verdict{Kind: Extend, At: Window{1, 3}}},
		{"offered twice, both as the latest and as heard: nothing to say", Observation{Latest: 5, Heard: 2, Offered: 4, SameAsHeard: true, Pending: p(2, 4)}, Verdict{Kind: Settle, At: Window{2, 5}}},
		{"offered, the announcement gone, then revised: queued from the offered words", Observation{Latest: 5, Heard: 2, Offered: 3, Unlike: 3, SameAsHeard: true}, Verdict{Kind: Queue, At: Window{3, 5}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Decide(tt.o); got != tt.want {
				t.Fatalf("Decide(%+v) = %+v, want %+v", tt.o, got, tt.want)
			}
		})
	}
}
