package skill

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/unsay/unsay/apl"
)

// TestLaunch_SendsAPLOnlyAsNewAsTheDevicesRuntime proves the card follows
// runtime.maxVersion: a current Echo Show gets the document as written; an
// Echo Show 5 declaring APL 1.6 gets one declaring 1.6 with Frame
// backgroundColor; a runtime older than apl.MinRuntime gets the spoken
// answer and no directive (and the answer still ends like a voice device's).
func TestLaunch_SendsAPLOnlyAsNewAsTheDevicesRuntime(t *testing.T) {
	for _, tc := range []struct {
		runtime     string
		wantVersion string // "" = no directive
	}{
		{"2024.3", apl.Version},
		{"2025.1", apl.Version},
		{"1.6", "1.6"},
		{"1.4", "1.4"},
		{"1.3", ""},
		{"1.0", ""},
	} {
		t.Run(tc.runtime, func(t *testing.T) {
			r := newRig(t, nil)
			out, _ := r.turn(reqOpts{APL: true, APLVersion: tc.runtime})
			if out.Response.OutputSpeech == nil || !strings.Contains(out.Response.OutputSpeech.SSML, "walking instruction") {
				t.Fatalf("no spoken walking instruction: %+v", out.Response.OutputSpeech)
			}
			ds := out.Response.Directives
			if tc.wantVersion == "" {
				if len(ds) != 0 {
					t.Fatalf("APL %s: sent %d directives to a runtime older than %s", tc.runtime, len(ds), apl.MinRuntime)
				}
				return
			}
			if len(ds) != 1 {
				t.Fatalf("APL %s: %d directives, want the care card", tc.runtime, len(ds))
			}
			var doc map[string]any
			if err := json.Unmarshal(ds[0].Document, &doc); err != nil {
				t.Fatal(err)
			}
			if doc["version"] != tc.wantVersion {
				t.Errorf("APL %s: document version %v, want %s", tc.runtime, doc["version"], tc.wantVersion)
			}
			old := tc.wantVersion != apl.Version
			if got := strings.Contains(string(ds[0].Document), `"backgroundColor"`); got != old {
				t.Errorf("APL %s: backgroundColor present = %v, want %v", tc.runtime, got, old)
			}
		})
	}
}
