package skill

import (
	"strings"
	"testing"
	"time"
)

// linkRefusals are the linking answers that link nothing, and how each is
// brought about on the rig.
var linkRefusals = []struct {
	name, code, want string
	setup            func(*fakeLinks)
}{
	{"wrong code", "111111", "That code didn't work.", nil},
	{"no code", "", textCodeAsk, nil},
	{"wrong shape", "12345", textCodeShape, nil},
	{"blocked", "482913", textCodeBlocked, func(l *fakeLinks) { l.blocked = true }},
	{"paused", "482913", "paused for everyone", func(l *fakeLinks) { l.paused = t0.Add(4 * time.Minute) }},
}

// P-24, U4: on a device whose patient is known — linked by code, or the
// default patient — a linking request that is refused (a wrong code, none,
// a wrong shape, blocked, paused) opens with the retraction he is owed,
// like every other answer, then refuses; the retraction is marked heard.
// Twin: on a device with no patient there is nothing to announce: the
// refusal alone, and the care source is never asked.
func TestLinkDevice_ARefusalOnAKnownPatientsDeviceSaysTheOwedRetractionFirst(t *testing.T) {
	for _, known := range []string{"default patient", "linked by code"} {
		for _, tc := range linkRefusals {
			t.Run(known+"/"+tc.name, func(t *testing.T) {
				r := newRig(t, func(c *Config) {
					if known != "default patient" {
						c.DefaultPatient = ""
					}
				})
				if known == "linked by code" {
					r.links.linked = map[string]string{testUserID: "ray"}
				}
				if tc.setup != nil {
					tc.setup(r.links)
				}
				a := retractionWB()
				r.care.setPending("ray", a)
				r.care.facts["ray"][0] = a.Current
				out, _ := r.turn(reqOpts{Type: TypeIntent, Intent: IntentLinkDevice, Session: "new-u4", Slots: map[string]Slot{SlotCode: {Name: SlotCode, Value: tc.code}}})
				said := plain(out)
				iStop, iRefuse := strings.Index(said, "Stop — your walking instruction has changed."), strings.Index(said, tc.want)
				if iStop != 0 || iRefuse < iStop {
					t.Fatalf("said %q: want the retraction first, then %q", said, tc.want)
				}
				if heardSet(r.care.heardCalls())["care://ray/weight_bearing"] != 3 {
					t.Errorf("the retraction was not marked heard: %v", r.care.heardCalls())
				}
			})
		}
	}
	for _, tc := range linkRefusals {
		t.Run("twin: no patient/"+tc.name, func(t *testing.T) {
			r := newRig(t, func(c *Config) { c.DefaultPatient = "" })
			if tc.setup != nil {
				tc.setup(r.links)
			}
			r.care.setPending("ray", retractionWB())
			out, _ := r.turn(reqOpts{Type: TypeIntent, Intent: IntentLinkDevice, Session: "new-u4", Slots: map[string]Slot{SlotCode: {Name: SlotCode, Value: tc.code}}})
			said := plain(out)
			if !strings.HasPrefix(said, tc.want) && !strings.Contains(said, tc.want) || strings.Contains(said, "Stop") {
				t.Fatalf("said %q: want %q alone", said, tc.want)
			}
			if r.care.calls.Load() != 0 || len(r.care.heardCalls()) != 0 {
				t.Errorf("a device with no patient reached the care source")
			}
		})
	}
}

// P-24, U4: a refusal on a known patient's device whose notes cannot be
// confirmed says which instructions changed and the refusal, nothing as
// current, and marks nothing. Twin: confirmed, it says the retraction.
func TestLinkDevice_ARefusalWhenTheNotesCannotBeConfirmedSaysNothingAsCurrent(t *testing.T) {
	for _, fail := range []bool{true, false} {
		r := newRig(t, nil)
		a := retractionWB()
		r.care.setPending("ray", a)
		r.care.facts["ray"][0] = a.Current
		if fail {
			r.care.failFact = errBoom
		}
		out, _ := r.turn(reqOpts{Type: TypeIntent, Intent: IntentLinkDevice, Slots: map[string]Slot{SlotCode: {Name: SlotCode, Value: "111111"}}})
		said := plain(out)
		switch {
		case fail && (!strings.HasPrefix(said, "Your walking instruction has changed since I last told you. That code didn't work.") || strings.Contains(said, wbV3Text)):
			t.Errorf("unconfirmed: %q", said)
		case fail && len(r.care.heardCalls()) != 0:
			t.Errorf("unconfirmed, marked %v", r.care.heardCalls())
		case !fail && !strings.Contains(said, wbV3Text):
			t.Errorf("confirmed: %q", said)
		}
	}
}
