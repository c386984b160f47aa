package app_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/unsay/unsay/bridge/app"
	"github.com/unsay/unsay/skill"
	"github.com/unsay/unsay/skill/alexatest"
	"github.com/unsay/unsay/store"
)

// The admin /readyz is 200 with the speech principal connected and caught
// up, and reports its lag; the admin /metrics exposes it.
func TestReadyz_ReportsTheSpeechPrincipalsReadinessAndLag(t *testing.T) {
	r := newRig(t)
	var body struct {
		OK     bool `json:"ok"`
		Speech struct {
			OK         bool     `json:"ok"`
			LagSeconds *float64 `json:"lagSeconds"`
			Confirming bool     `json:"confirming"`
		} `json:"speech"`
	}
	eventually(t, "ready", func() bool {
		resp, err := http.Get(r.app.AdminURL() + "/readyz")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		_ = json.NewDecoder(resp.Body).Decode(&body)
		return resp.StatusCode == http.StatusOK && body.OK
	})
	if !body.Speech.OK || body.Speech.LagSeconds == nil || !body.Speech.Confirming {
		t.Errorf("speech readiness %+v", body.Speech)
	}
	// A write to a followed patient is read at once: still ready, no lag.
	r.link(&alexatest.Device{SkillID: skillID, UserID: "amzn1.ask.account.RAY", DeviceID: "amzn1.ask.device.SHOW", SessionID: "s1", APL: true})
	r.write("weight_bearing", "Full weight-bearing as tolerated.", "okafor", "Sarah Okafor, physio")
	r.waitPending(1)
	if st := r.app.Speech.State(); !st.Ready || st.LagSeconds != 0 {
		t.Errorf("after a write the principal is %+v", st)
	}
	resp, err := http.Get(r.app.AdminURL() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	m, _ := io.ReadAll(resp.Body)
	for _, name := range []string{"unsay_speech_lag_seconds", "unsay_speech_ready 1"} {
		if !strings.Contains(string(m), name) {
			t.Errorf("/metrics lacks %s", name)
		}
	}
}

// The test-only pause is refused off loopback and for a malformed value;
// on loopback it starts, and the startup line says so.
func TestNew_TestPauseIsForLoopbackTestsOnly(t *testing.T) {
	secret := []byte("a-production-secret-of-at-least-32-bytes!")
	signing := []byte(store.FormatSigningKey(ed25519.NewKeyFromSeed(bytes.Repeat([]byte{7}, ed25519.SeedSize))))
	cfg := func(addr, public, pause string, dir string) app.Config {
		return app.Config{Addr: addr, PublicURL: public, DB: filepath.Join(dir, "u.db"), TokenSecret: secret, WriteSecret: secret, AuditKey: secret,
			SigningKey: signing,
			Alexa:      skill.Config{Verify: true, SkillID: "amzn1.ask.skill.x"},
			Getenv:     func(k string) string { return map[string]string{app.TestPauseEnv: pause}[k] }}
	}
	for _, tc := range []struct{ name, addr, public, pause string }{
		{"off loopback", "0.0.0.0:0", "", "before-heard:1s"},
		{"behind a public URL", "127.0.0.1:0", "https://care.example.org", "before-heard:1s"},
		{"an unknown point", "127.0.0.1:0", "", "after-lunch:1s"},
		{"no duration", "127.0.0.1:0", "", "before-write"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := app.New(context.Background(), cfg(tc.addr, tc.public, tc.pause, t.TempDir()))
			if err == nil || !strings.Contains(err.Error(), app.TestPauseEnv) {
				t.Fatalf("New = %v, want a refusal naming %s", err, app.TestPauseEnv)
			}
		})
	}
	a, err := app.New(context.Background(), cfg("127.0.0.1:0", "", "before-heard:1s", t.TempDir()))
	if err != nil {
		t.Fatalf("on loopback: %v", err)
	}
	defer a.Close()
	if !strings.Contains(a.StartupLine(), "TEST PAUSE before-heard") {
		t.Errorf("startup line %q does not announce the pause", a.StartupLine())
	}
}
