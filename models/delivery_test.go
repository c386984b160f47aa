package models

import (
	"testing"
	"time"
)

func TestTimeline_EachVersionSaysWhereItStandsWithRay(t *testing.T) {
	at := func(min int) time.Time { return time.Date(2026, 11, 29, 10, min, 0, 0, time.UTC) }
	heard := func(v, min int, d Device, via Via) DeliveryEvent {
		return DeliveryEvent{Kind: DeliveryHeard, Version: v, At: at(min), Device: d, Via: via}
	}
	ev := func(k DeliveryKind, v, min int) DeliveryEvent { return DeliveryEvent{Kind: k, Version: v, At: at(min)} }
	states := func(ds []VersionDelivery) []DeliveryState {
		var out []DeliveryState
		for _, d := range ds {
			out = append(out, d.State)
		}
		return out
	}
	tests := []struct {
		name   string
		latest int
		rec    DeliveryRecord
		want   []DeliveryState
		check  func(t *testing.T, ds []VersionDelivery)
	}{
		{"a retraction pending after a notification", 2, DeliveryRecord{
			Heard: 1, Followed: true, Pending: &PendingDelivery{From: 1, To: 2},
			Events: []DeliveryEvent{heard(1, 0, DeviceScreen, ViaAsked), ev(DeliveryQueued, 2, 12), ev(DeliveryNotified, 2, 14)},
		}, []DeliveryState{StateHeard, StatePending}, func(t *testing.T, ds []VersionDelivery) {
			p := ds[1]
			if p.Withdraws != 1 || !p.QueuedAt.Equal(at(12)) || !p.NotifiedAt.Equal(at(14)) || p.Offered {
				t.Errorf("pending v2 = %+v", p)
			}
			if !ds[0].WithdrawnAt.IsZero() || ds[0].Device != DeviceScreen {
				t.Errorf("heard v1 = %+v; not withdrawn yet", ds[0])
			}
		}},
		{"heard on the Echo Show withdraws the older version", 2, DeliveryRecord{
			Heard: 2, Followed: true,
			Events: []DeliveryEvent{heard(1, 0, DeviceVoice, ViaAsked), ev(DeliveryQueued, 2, 12), ev(DeliveryOffered, 2, 16), heard(2, 16, DeviceScreen, ViaCard)},
		}, []DeliveryState{StateHeard, StateHeard}, func(t *testing.T, ds []VersionDelivery) {
			if !ds[0].WithdrawnAt.Equal(at(16)) || ds[1].Via != ViaCard || ds[1].Device != DeviceScreen || !ds[1].At.Equal(at(16)) {
				t.Errorf("timeline = %+v", ds)
			}
		}},
		{"stacked revisions: the middle one was replaced before he heard it", 3, DeliveryRecord{
			Heard: 1, Followed: true, Pending: &PendingDelivery{From: 1, To: 3, Offered: true},
			Events: []DeliveryEvent{heard(1, 0, DeviceScreen, ViaAsked), ev(DeliveryQueued, 2, 5), ev(DeliveryQueued, 3, 6), ev(DeliveryOffered, 3, 7)},
		}, []DeliveryState{StateHeard, StateReplaced, StatePending}, func(t *testing.T, ds []VersionDelivery) {
			if !ds[2].Offered || !ds[2].OfferedAt.Equal(at(7)) {
				t.Errorf("offered, not confirmed: %+v", ds[2])
			}
		}},
		{"the same words: nothing to tell", 2, DeliveryRecord{
			Heard: 2, Followed: true, Events: []DeliveryEvent{heard(1, 0, DeviceScreen, ViaAsked), ev(DeliveryUnchanged, 2, 3)},
		}, []DeliveryState{StateHeard, StateUnchanged}, nil},
		{"his starting point is heard when he asks", 1, DeliveryRecord{Baseline: 1, Followed: true},
			[]DeliveryState{StateUnasked}, nil},
		{"just written, not yet queued", 2, DeliveryRecord{Heard: 1, Baseline: 1, Followed: true},
			[]DeliveryState{StateHeard, StateReading}, func(t *testing.T, ds []VersionDelivery) {
				if !ds[0].At.IsZero() {
					t.Errorf("heard before times were kept has no time: %+v", ds[0])
				}
			}},
		{"no device linked: nothing will tell him", 2, DeliveryRecord{Heard: 0},
			[]DeliveryState{StateReplaced, StateNoDevice}, nil},
		{"first hearing pending", 1, DeliveryRecord{Followed: true, Pending: &PendingDelivery{From: 0, To: 1}},
			[]DeliveryState{StatePending}, func(t *testing.T, ds []VersionDelivery) {
				if ds[0].Withdraws != 0 {
					t.Errorf("a first hearing withdraws nothing: %+v", ds[0])
				}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ds := Timeline(tt.latest, tt.rec)
			got := states(ds)
			if len(got) != len(tt.want) {
				t.Fatalf("states = %v, want %v", got, tt.want)
			}
			for i := range got {
				if got[i] != tt.want[i] || ds[i].Version != i+1 {
					t.Fatalf("states = %v, want %v", got, tt.want)
				}
			}
			if tt.check != nil {
				tt.check(t, ds)
			}
		})
	}
	if Timeline(0, DeliveryRecord{Heard: 3}) != nil {
		t.Error("no versions: want nil")
	}
}
