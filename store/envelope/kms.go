package envelope

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/aws-sdk-go-v2/service/kms/types"

	"github.com/unsay/unsay/store"
)

// Environment variables of the kms provider.
const (
	envKMSKeyID    = "UNSAY_KMS_KEY_ID"
	envKMSEndpoint = "UNSAY_KMS_ENDPOINT"
	envKMSRegion   = "UNSAY_KMS_REGION"
	// EncryptionContextKey is the KMS encryption-context key whose value is
	// the record AAD ("patient|domain|v{n}|audience"). KMS binds the wrapped
	// data key to it, so a record's wrapped key does not unwrap for another
	// record (it appears in CloudTrail, which is why it holds no value).
	EncryptionContextKey = "unsay:record"
	// credentialProbeTimeout bounds New's one attempt to retrieve AWS credentials.
	credentialProbeTimeout = 5 * time.Second
	// kmsMaxAttempts and kmsMaxBackoff bound a KMS call: a read that waits
	// on an unreachable KMS fails within a few seconds rather than holding
	// the Alexa response past its deadline.
	kmsMaxAttempts = 3
	kmsMaxBackoff  = 500 * time.Millisecond
)

// kmsAPI is the part of *kms.Client the provider uses.
type kmsAPI interface {
	GenerateDataKey(ctx context.Context, in *kms.GenerateDataKeyInput, optFns ...func(*kms.Options)) (*kms.GenerateDataKeyOutput, error)
	Decrypt(ctx context.Context, in *kms.DecryptInput, optFns ...func(*kms.Options)) (*kms.DecryptOutput, error)
}

// kmsKeyring wraps one data key per seal with AWS KMS.
type kmsKeyring struct {
	client kmsAPI
	keyID  string // UNSAY_KMS_KEY_ID as configured (key id, ARN, alias)
}

// newKMS configures the kms provider, collecting every problem into one
// *ConfigError before refusing.
func newKMS(ctx context.Context, cfg Config, getenv func(string) string) (store.Sealer, error) {
	ce := &ConfigError{Mode: "kms"}
	keyID := strings.TrimSpace(getenv(envKMSKeyID))
	if keyID == "" {
		ce.Missing = append(ce.Missing, envKMSKeyID)
	}
	endpoint := firstNonEmpty(cfg.KMSEndpoint, getenv(envKMSEndpoint))
	if endpoint != "" {
		if u, err := url.Parse(endpoint); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			ce.Invalid = append(ce.Invalid, envKMSEndpoint+" (--kms-endpoint): want an http(s) URL")
		}
	}
	region := firstNonEmpty(cfg.KMSRegion, getenv(envKMSRegion), getenv("AWS_REGION"), getenv("AWS_DEFAULT_REGION"))

	var opts []func(*config.LoadOptions) error
	if region != "" {
		opts = append(opts, config.WithRegion(region))
	}
	if p := strings.TrimSpace(getenv("AWS_PROFILE")); p != "" {
		opts = append(opts, config.WithSharedConfigProfile(p))
	}
	ak, sk := strings.TrimSpace(getenv("AWS_ACCESS_KEY_ID")), strings.TrimSpace(getenv("AWS_SECRET_ACCESS_KEY"))
	staticCreds := ak != "" && sk != ""
	switch {
	case staticCreds:
		opts = append(opts, config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider(ak, sk, getenv("AWS_SESSION_TOKEN"))))
	case ak != "":
		ce.Missing = append(ce.Missing, "AWS_SECRET_ACCESS_KEY")
	case sk != "":
		ce.Missing = append(ce.Missing, "AWS_ACCESS_KEY_ID")
	}
	opts = append(opts, config.WithRetryer(func() aws.Retryer {
		return retry.NewStandard(func(o *retry.StandardOptions) {
			o.MaxAttempts = kmsMaxAttempts
			o.MaxBackoff = kmsMaxBackoff
		})
	}))

	awsCfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		ce.Invalid = append(ce.Invalid, "AWS configuration: "+err.Error())
	} else {
		if awsCfg.Region == "" {
			ce.Missing = append(ce.Missing, "AWS_REGION (or --kms-region / UNSAY_KMS_REGION)")
		}
		if ak == "" && sk == "" && !credentialsAvailable(ctx, awsCfg) {
			ce.Missing = append(ce.Missing, "AWS credentials (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, AWS_PROFILE, or an instance/task role)")
		}
	}
	// Local master keys, when set, only open records sealed before a move to KMS.
	local := loadLocalKeys(getenv, ce, false)
	if !ce.empty() {
		return nil, ce
	}
	client := kms.NewFromConfig(awsCfg, func(o *kms.Options) {
		if endpoint != "" {
			o.BaseEndpoint = aws.String(endpoint)
		}
		if cfg.HTTPClient != nil {
			// Set on the KMS client only: the AWS config loader refuses a
			// custom client alongside AWS_CA_BUNDLE.
			o.HTTPClient = cfg.HTTPClient
		}
	})
	kr := &kmsKeyring{client: client, keyID: keyID}
	if local != nil {
		return newSealer(kr, local), nil
	}
	return newSealer(kr), nil
}

// credentialsAvailable probes the AWS credential chain once.
func credentialsAvailable(ctx context.Context, c aws.Config) bool {
	if c.Credentials == nil {
		return false
	}
	pctx, cancel := context.WithTimeout(ctx, credentialProbeTimeout)
	defer cancel()
	creds, err := c.Credentials.Retrieve(pctx)
	return err == nil && creds.HasKeys()
}

func firstNonEmpty(vs ...string) string {
	for _, v := range vs {
		if v = strings.TrimSpace(v); v != "" {
			return v
		}
	}
	return ""
}

func (k *kmsKeyring) id() byte { return providerKMS }

func (k *kmsKeyring) describe() string { return "kms (key " + k.keyID + ")" }

func encryptionContext(aad []byte) (map[string]string, bool) {
	if !utf8.Valid(aad) {
		return nil, false
	}
	return map[string]string{EncryptionContextKey: string(aad)}, true
}

func (k *kmsKeyring) newDataKey(ctx context.Context, aad []byte) ([]byte, string, []byte, error) {
	ec, ok := encryptionContext(aad)
	if !ok {
		return nil, "", nil, sealErr(ErrAAD, errors.New("AAD is not UTF-8"))
	}
	out, err := k.client.GenerateDataKey(ctx, &kms.GenerateDataKeyInput{
		KeyId:             aws.String(k.keyID),
		KeySpec:           types.DataKeySpecAes256,
		EncryptionContext: ec,
	})
	if err != nil {
		return nil, "", nil, sealErr(ErrKeyUnavailable, fmt.Errorf("kms GenerateDataKey: %w", err))
	}
	if len(out.Plaintext) != DataKeySize || len(out.CiphertextBlob) == 0 {
		clear(out.Plaintext)
		return nil, "", nil, sealErr(ErrKeyUnavailable, fmt.Errorf("kms GenerateDataKey: data key %d bytes, wrapped key %d bytes", len(out.Plaintext), len(out.CiphertextBlob)))
	}
	keyID := aws.ToString(out.KeyId) // the key ARN: what Decrypt is pinned to
	if keyID == "" {
		keyID = k.keyID
	}
	return out.Plaintext, keyID, out.CiphertextBlob, nil
}

func (k *kmsKeyring) dataKey(ctx context.Context, aad []byte, keyID string, material []byte) ([]byte, error) {
	ec, ok := encryptionContext(aad)
	if !ok {
		return nil, openErr(ErrAAD, errors.New("AAD is not UTF-8"))
	}
	out, err := k.client.Decrypt(ctx, &kms.DecryptInput{
		CiphertextBlob:    material,
		KeyId:             aws.String(keyID), // pinned to the header's key: rotation reads old keys
		EncryptionContext: ec,
	})
	if err != nil {
		var invalid *types.InvalidCiphertextException
		var incorrect *types.IncorrectKeyException
		if errors.As(err, &invalid) || errors.As(err, &incorrect) {
			// The wrapped key is not for this record (other AAD) or was altered.
			return nil, openErr(ErrAuthentication, fmt.Errorf("kms Decrypt: %w", err))
		}
		return nil, openErr(ErrKeyUnavailable, fmt.Errorf("kms Decrypt: %w", err))
	}
	if len(out.Plaintext) != DataKeySize {
		clear(out.Plaintext)
		return nil, openErr(ErrKeyUnavailable, fmt.Errorf("kms Decrypt: data key %d bytes", len(out.Plaintext)))
	}
	return out.Plaintext, nil
}
