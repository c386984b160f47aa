package app_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"path/filepath"
	"strings"
	"testing"

	"github.com/unsay/unsay/bridge/app"
	"github.com/unsay/unsay/skill"
	"github.com/unsay/unsay/store"
)

// TestNew_RefusesHMACSecretsUnder32BytesNamingTheVariable: a 1-byte
// UNSAY_WRITE_SECRET once started a server on a public URL, and the secret
// was recovered from one signed write. Each HMAC secret under 32 bytes is
// refused, naming its variable, on loopback too.
func TestNew_RefusesHMACSecretsUnder32BytesNamingTheVariable(t *testing.T) {
	strong := []byte(strings.Repeat("s", app.MinSecretBytes))
	for _, tc := range []struct {
		name  string
		tweak func(*app.Config)
	}{
		{"UNSAY_WRITE_SECRET", func(c *app.Config) { c.WriteSecret = []byte("x") }},
		{"UNSAY_AUDIT_KEY", func(c *app.Config) { c.AuditKey = strong[:app.MinSecretBytes-1] }},
		{"UNSAY_TOKEN_SECRET", func(c *app.Config) { c.TokenSecret = []byte("short") }},
	} {
		cfg := app.Config{Addr: "127.0.0.1:0", DB: filepath.Join(t.TempDir(), "u.db"), TokenSecret: strong, WriteSecret: strong, AuditKey: strong}
		tc.tweak(&cfg)
		if _, err := app.New(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), tc.name) {
			t.Errorf("a short %s: New = %v, want a refusal naming it", tc.name, err)
		}
	}
	// Positive twin: 32 bytes each start.
	a, err := app.New(context.Background(), app.Config{Addr: "127.0.0.1:0", DB: filepath.Join(t.TempDir(), "u.db"),
		TokenSecret: strong, WriteSecret: strong, AuditKey: strong})
	if err != nil {
		t.Fatalf("32-byte secrets: %v", err)
	}
	a.Close()
}

// TestNew_SigningKeyIsReadFromTheEnvironmentAndTheDevelopmentOneIsAnnounced:
// UNSAY_SIGNING_KEY signs the chain heads (P-26); unset, the public
// development key is used, said on the startup line, and refused off
// loopback like the other development secrets; a malformed one is refused
// naming the variable.
func TestNew_SigningKeyIsReadFromTheEnvironmentAndTheDevelopmentOneIsAnnounced(t *testing.T) {
	ctx := context.Background()
	dev, err := app.New(ctx, app.Config{Addr: "127.0.0.1:0", DB: filepath.Join(t.TempDir(), "u.db")})
	if err != nil {
		t.Fatal(err)
	}
	line := dev.StartupLine()
	devID := store.KeyID(store.DevSigningKey().Public().(ed25519.PublicKey))
	if !strings.Contains(line, "DEV DEFAULT UNSAY_SIGNING_KEY") || !strings.Contains(line, devID) {
		t.Fatalf("startup line %q does not announce the development signing key %s", line, devID)
	}
	dev.Close()

	_, k, _ := ed25519.GenerateKey(rand.Reader)
	a, err := app.New(ctx, app.Config{Addr: "127.0.0.1:0", DB: filepath.Join(t.TempDir(), "u.db"), SigningKey: []byte(store.FormatSigningKey(k))})
	if err != nil {
		t.Fatal(err)
	}
	if id := store.KeyID(k.Public().(ed25519.PublicKey)); !a.Store.PublicKey().Equal(k.Public()) || strings.Contains(a.StartupLine(), "DEV DEFAULT UNSAY_SIGNING_KEY") ||
		!strings.Contains(a.StartupLine(), id) {
		t.Fatalf("configured key not used or not named: %q", a.StartupLine())
	}
	a.Close()

	if _, err := app.New(ctx, app.Config{Addr: "127.0.0.1:0", DB: filepath.Join(t.TempDir(), "u.db"), SigningKey: []byte("not-a-key")}); err == nil ||
		!strings.Contains(err.Error(), "UNSAY_SIGNING_KEY") {
		t.Fatalf("a malformed key: %v", err)
	}
	secret := []byte(strings.Repeat("s", 40))
	_, err = app.New(ctx, app.Config{Addr: "0.0.0.0:0", DB: filepath.Join(t.TempDir(), "u.db"), TokenSecret: secret, WriteSecret: secret, AuditKey: secret,
		Alexa: skill.Config{Verify: true, SkillID: "amzn1.ask.skill.x"}})
	if err == nil || !strings.Contains(err.Error(), "UNSAY_SIGNING_KEY") {
		t.Fatalf("the development signing key off loopback: %v, want a refusal naming UNSAY_SIGNING_KEY", err)
	}
}
