package envelope_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/unsay/unsay/models"
	"github.com/unsay/unsay/store"
	"github.com/unsay/unsay/store/envelope"
)

// kmsEnv is a complete kms configuration pointing at f (static test
// credentials, so the AWS SDK signs every request).
func kmsEnv(keyID string) map[string]string {
	return map[string]string{
		"UNSAY_KMS_KEY_ID":      keyID,
		"AWS_REGION":            "eu-west-2",
		"AWS_ACCESS_KEY_ID":     "AKIDEXAMPLE",
		"AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
	}
}

func newKMSSealer(t testing.TB, f *fakeKMS, keyID string, extra ...map[string]string) store.Sealer {
	t.Helper()
	e := kmsEnv(keyID)
	for _, m := range extra {
		for k, v := range m {
			e[k] = v
		}
	}
	s, err := envelope.New(context.Background(), envelope.Config{Mode: "kms", Getenv: env(e), KMSEndpoint: f.srv.URL, HTTPClient: f.srv.Client()})
	if err != nil {
		t.Fatalf("New(kms): %v", err)
	}
	return s
}

func TestKMS_RoundTripThroughGenerateDataKeyAndDecrypt(t *testing.T) {
	f := newFakeKMS(t)
	arn := f.addKey(t, "unsay")
	s := newKMSSealer(t, f, "alias/unsay")
	if s.Name() != "kms" {
		t.Fatalf("Name = %q", s.Name())
	}
	aad := mustAAD(t, "ray", "risk", 1, models.AudienceAssistant)
	sealed := seal(t, s, aad, riskValue)
	if got := f.generate.Load(); got != 1 {
		t.Fatalf("GenerateDataKey calls = %d, want 1", got)
	}
	ec, _ := f.lastCtx.Load().(map[string]string)
	if ec[envelope.EncryptionContextKey] != "ray|risk|v1|assistant" || len(ec) != 1 {
		t.Fatalf("encryption context = %v", ec)
	}
	if strings.Contains(string(sealed), "Fall-risk") {
		t.Fatal("plaintext in sealed bytes")
	}
	pt, err := s.Open(context.Background(), aad, sealed)
	if err != nil || string(pt) != riskValue {
		t.Fatalf("Open = %q, %v", pt, err)
	}
	if got := f.decrypt.Load(); got != 1 {
		t.Fatalf("Decrypt calls = %d, want 1", got)
	}
	if f.unsigned.Load() != 0 {
		t.Fatal("a request reached KMS without a SigV4 signature")
	}
	rc, err := s.Receipt(aad, sealed)
	if err != nil || rc.Provider != "kms" || rc.KeyID != arn || rc.AAD != string(aad) || len(rc.Nonce) != 24 || len(rc.Tag) != 32 {
		t.Fatalf("Receipt = %+v, %v", rc, err)
	}
	if got := envelope.Describe(s); got != "kms (key alias/unsay)" {
		t.Fatalf("Describe = %q", got)
	}
}

func TestKMS_RefusesCiphertextInAnotherSlot(t *testing.T) {
	f := newFakeKMS(t)
	f.addKey(t, "unsay")
	s := newKMSSealer(t, f, "alias/unsay")
	risk := mustAAD(t, "ray", "risk", 1, models.AudienceAssistant)
	sealed := seal(t, s, risk, riskValue)
	for name, aad := range map[string][]byte{
		"another record":     mustAAD(t, "ray", "weight_bearing", 1, models.AudienceUser),
		"the other audience": mustAAD(t, "ray", "risk", 1, models.AudienceUser),
		"another version":    mustAAD(t, "ray", "risk", 2, models.AudienceAssistant),
	} {
		t.Run(name, func(t *testing.T) {
			pt, err := s.Open(context.Background(), aad, sealed)
			if pt != nil || !errors.Is(err, envelope.ErrAuthentication) {
				t.Fatalf("Open = %q, %v; want ErrAuthentication", pt, err)
			}
			var e *envelope.Error
			if !errors.As(err, &e) || e.Temporary() {
				t.Fatalf("a paste must not look like an outage: %v", err)
			}
		})
	}
	if pt, err := s.Open(context.Background(), risk, sealed); err != nil || string(pt) != riskValue {
		t.Fatalf("own slot: %q, %v", pt, err)
	}
}

func TestKMS_RefusesAlteredWrappedKeyOrKeyID(t *testing.T) {
	f := newFakeKMS(t)
	arn := f.addKey(t, "unsay")
	other := f.addKey(t, "other")
	s := newKMSSealer(t, f, arn)
	aad := mustAAD(t, "ray", "risk", 1, models.AudienceAssistant)
	sealed := seal(t, s, aad, riskValue)

	relabelled := []byte(strings.Replace(string(sealed), arn, other, 1))
	if pt, err := s.Open(context.Background(), aad, relabelled); pt != nil || !errors.Is(err, envelope.ErrAuthentication) {
		t.Fatalf("key id swapped: %q, %v; want ErrAuthentication", pt, err)
	}
	nonceAt, _ := layout(t, sealed)
	blob := slices.Clone(sealed)
	blob[nonceAt-20] ^= 0x01 // inside the CiphertextBlob
	if pt, err := s.Open(context.Background(), aad, blob); pt != nil || !errors.Is(err, envelope.ErrAuthentication) {
		t.Fatalf("wrapped key altered: %q, %v; want ErrAuthentication", pt, err)
	}
}

// isolateAWSEnv keeps the AWS SDK from finding credentials or a region on
// this machine (shared files, IMDS), so only what the test passes counts.
func isolateAWSEnv(t *testing.T) {
	dir := t.TempDir()
	for k, v := range map[string]string{
		"AWS_EC2_METADATA_DISABLED":              "true",
		"AWS_CONFIG_FILE":                        filepath.Join(dir, "config"),
		"AWS_SHARED_CREDENTIALS_FILE":            filepath.Join(dir, "credentials"),
		"AWS_ACCESS_KEY_ID":                      "",
		"AWS_SECRET_ACCESS_KEY":                  "",
		"AWS_SESSION_TOKEN":                      "",
		"AWS_PROFILE":                            "",
		"AWS_REGION":                             "",
		"AWS_DEFAULT_REGION":                     "",
		"AWS_WEB_IDENTITY_TOKEN_FILE":            "",
		"AWS_CONTAINER_CREDENTIALS_FULL_URI":     "",
		"AWS_CONTAINER_CREDENTIALS_RELATIVE_URI": "",
	} {
		t.Setenv(k, v)
	}
}

func TestNew_KMSRefusesToStartUnconfiguredNamingEveryMissingVariable(t *testing.T) {
	isolateAWSEnv(t)
	tests := []struct {
		name    string
		env     map[string]string
		missing []string // each must appear in ConfigError.Missing and the message
	}{
		{"nothing set", map[string]string{}, []string{"UNSAY_KMS_KEY_ID", "AWS_REGION", "AWS credentials"}},
		{"key id only", map[string]string{"UNSAY_KMS_KEY_ID": "alias/unsay"}, []string{"AWS_REGION", "AWS credentials"}},
		{"no key id", map[string]string{"AWS_REGION": "eu-west-2", "AWS_ACCESS_KEY_ID": "AKID", "AWS_SECRET_ACCESS_KEY": "secret"}, []string{"UNSAY_KMS_KEY_ID"}},
		{"half the key pair", map[string]string{"UNSAY_KMS_KEY_ID": "k", "AWS_REGION": "eu-west-2", "AWS_ACCESS_KEY_ID": "AKID"}, []string{"AWS_SECRET_ACCESS_KEY"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			s, err := envelope.New(ctx, envelope.Config{Mode: "kms", Getenv: env(tc.env)})
			if s != nil || !errors.Is(err, envelope.ErrConfig) {
				t.Fatalf("New = %v, %v; want nil, ErrConfig", s, err)
			}
			var ce *envelope.ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("%T is not *ConfigError", err)
			}
			if len(ce.Missing) != len(tc.missing) {
				t.Fatalf("Missing = %q, want exactly %q", ce.Missing, tc.missing)
			}
			for _, want := range tc.missing {
				if !strings.Contains(strings.Join(ce.Missing, "\n"), want) || !strings.Contains(err.Error(), want) {
					t.Fatalf("%v does not name %s", err, want)
				}
			}
			if strings.Contains(err.Error(), "secret") {
				t.Fatalf("error echoes a secret: %v", err)
			}
		})
	}
	// Positive twin: the same isolated environment, fully configured, starts.
	f := newFakeKMS(t)
	f.addKey(t, "unsay")
	if s := newKMSSealer(t, f, "alias/unsay"); s.Name() != "kms" {
		t.Fatalf("Name = %q", s.Name())
	}
}

func TestNew_KMSRefusesBadEndpointAndBadLocalKeys(t *testing.T) {
	e := kmsEnv("alias/unsay")
	e["UNSAY_MASTER_KEY"] = "short"
	s, err := envelope.New(context.Background(), envelope.Config{Mode: "kms", Getenv: env(e), KMSEndpoint: "localhost:4566"})
	var ce *envelope.ConfigError
	if s != nil || !errors.As(err, &ce) {
		t.Fatalf("New = %v, %v; want *ConfigError", s, err)
	}
	msg := strings.Join(ce.Invalid, "; ")
	if !strings.Contains(msg, "UNSAY_KMS_ENDPOINT") || !strings.Contains(msg, "UNSAY_MASTER_KEY") {
		t.Fatalf("Invalid = %q, want endpoint and master key named", ce.Invalid)
	}
}

func TestKMS_OutageFailsOpenAndSealRatherThanServing(t *testing.T) {
	for _, mode := range []string{"500", "closed"} {
		t.Run(mode, func(t *testing.T) {
			f := newFakeKMS(t)
			f.addKey(t, "unsay")
			s := newKMSSealer(t, f, "alias/unsay")
			aad := mustAAD(t, "ray", "weight_bearing", 1, models.AudienceUser)
			sealed := seal(t, s, aad, weightBearing)
			if mode == "500" {
				f.failing.Store(true)
			} else {
				f.srv.Close()
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			pt, err := s.Open(ctx, aad, sealed)
			if pt != nil || !errors.Is(err, envelope.ErrOpen) || !errors.Is(err, envelope.ErrKeyUnavailable) {
				t.Fatalf("Open during outage = %q, %v; want nil, ErrKeyUnavailable", pt, err)
			}
			var tmp interface{ Temporary() bool }
			if !errors.As(err, &tmp) || !tmp.Temporary() {
				t.Fatalf("outage not Temporary: %v", err)
			}
			b, err := s.Seal(ctx, aad, []byte(weightBearing))
			if b != nil || !errors.Is(err, envelope.ErrSeal) || !errors.Is(err, envelope.ErrKeyUnavailable) {
				t.Fatalf("Seal during outage = %x, %v; want nil, ErrKeyUnavailable", b, err)
			}
			if mode == "500" {
				// Positive twin: KMS back, the same bytes open.
				f.failing.Store(false)
				if pt, err := s.Open(ctx, aad, sealed); err != nil || string(pt) != weightBearing {
					t.Fatalf("after recovery: %q, %v", pt, err)
				}
			}
		})
	}
}

func TestKMS_RotationOpensOldKeyAndSealsUnderNewKey(t *testing.T) {
	f := newFakeKMS(t)
	oldARN := f.addKey(t, "old")
	newARN := f.addKey(t, "new")
	aad := mustAAD(t, "ray", "weight_bearing", 4, models.AudienceUser)
	sealedOld := seal(t, newKMSSealer(t, f, oldARN), aad, weightBearing)

	rotated := newKMSSealer(t, f, newARN)
	if pt, err := rotated.Open(context.Background(), aad, sealedOld); err != nil || string(pt) != weightBearing {
		t.Fatalf("rotated opens old: %q, %v", pt, err)
	}
	rc, err := rotated.Receipt(aad, seal(t, rotated, aad, weightBearing))
	if err != nil || rc.KeyID != newARN {
		t.Fatalf("new seal under %v (%v), want %s", rc, err, newARN)
	}
}

func TestKMS_OpensLocalSealsForMigrationButNeverSealsLocally(t *testing.T) {
	f := newFakeKMS(t)
	arn := f.addKey(t, "unsay")
	master := randomKey(t)
	aad := mustAAD(t, "ray", "risk", 3, models.AudienceAssistant)
	sealedLocal := seal(t, newLocal(t, master), aad, riskValue)

	withLocal := newKMSSealer(t, f, arn, map[string]string{"UNSAY_MASTER_KEY": b64(master)})
	if pt, err := withLocal.Open(context.Background(), aad, sealedLocal); err != nil || string(pt) != riskValue {
		t.Fatalf("kms+local opens local seal: %q, %v", pt, err)
	}
	rc, err := withLocal.Receipt(aad, seal(t, withLocal, aad, riskValue))
	if err != nil || rc.Provider != "kms" {
		t.Fatalf("kms mode sealed with %v, %v; want kms", rc, err)
	}
	// Refusal twin: kms without the local key cannot open it.
	if pt, err := newKMSSealer(t, f, arn).Open(context.Background(), aad, sealedLocal); pt != nil || !errors.Is(err, envelope.ErrUnknownKey) {
		t.Fatalf("kms alone opens local seal: %q, %v; want ErrUnknownKey", pt, err)
	}
}

func TestMain(m *testing.M) {
	// No test may reach a real AWS endpoint or instance metadata.
	os.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	os.Exit(m.Run())
}
