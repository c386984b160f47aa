package app_test

import (
	"context"
	"net"
	"path/filepath"
	"strings"
	"testing"

	"github.com/unsay/unsay/bridge/app"
	"github.com/unsay/unsay/skill"
)

func TestNew_RefusesDevelopmentSettingsOffLoopback(t *testing.T) {
	secret := []byte("a-production-secret-of-at-least-32-bytes!")
	safe := app.Config{TokenSecret: secret, WriteSecret: secret, AuditKey: secret, Alexa: skill.Config{Verify: true, SkillID: "amzn1.ask.skill.x"}}
	cases := []struct {
		name  string
		tweak func(*app.Config)
		want  string
	}{
		{"development secrets", func(c *app.Config) { c.TokenSecret = nil }, "UNSAY_TOKEN_SECRET"},
		{"verification off", func(c *app.Config) { c.Alexa.Verify = false }, "--alexa-verify=false"},
		{"a default patient", func(c *app.Config) { c.Alexa.DefaultPatient = "ray" }, "--default-patient"},
		{"a public URL in front of a loopback listener", func(c *app.Config) {
			c.Addr, c.PublicURL, c.Alexa.Verify = "127.0.0.1:0", "https://care.example.org", false
		}, "--alexa-verify=false"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := safe
			cfg.Addr, cfg.DB = "0.0.0.0:0", filepath.Join(t.TempDir(), "u.db")
			tc.tweak(&cfg)
			_, err := app.New(context.Background(), cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New = %v, want a refusal naming %s", err, tc.want)
			}
			// Twin: the same settings on loopback start (development is allowed there).
			cfg.Addr, cfg.PublicURL = "127.0.0.1:0", ""
			a, err := app.New(context.Background(), cfg)
			if err != nil {
				t.Fatalf("on loopback New = %v", err)
			}
			a.Close()
		})
	}
}

func TestNew_FailsWithAnErrorNotAPanicWhenThePortIsTaken(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, err = app.New(context.Background(), app.Config{Addr: ln.Addr().String(), DB: filepath.Join(t.TempDir(), "u.db")})
	if err == nil || !strings.Contains(err.Error(), "listen") {
		t.Fatalf("New on a taken port = %v, want a listen error", err)
	}
}
