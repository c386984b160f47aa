package envelope

import (
	"errors"
	"strings"
)

// Operation sentinels. Every error Seal returns matches ErrSeal, every error
// Open or Receipt returns matches ErrOpen (errors.Is); the kind sentinels below
// say why.
var (
	// ErrOpen: sealed bytes could not be opened. Nothing of the plaintext is returned.
	ErrOpen = errors.New("envelope: cannot open")
	// ErrSeal: a value could not be sealed. Nothing was written by the sealer.
	ErrSeal = errors.New("envelope: cannot seal")
)

// Kind sentinels, carried by *Error alongside ErrOpen or ErrSeal.
var (
	// ErrNotEnvelope: the bytes do not start with the envelope magic, or name a
	// format version or provider this build does not know (plaintext, another
	// format, or a corrupted header).
	ErrNotEnvelope = errors.New("not envelope bytes")
	// ErrTruncated: the bytes start like an envelope but end before the header,
	// nonce or 128-bit tag is complete.
	ErrTruncated = errors.New("truncated envelope")
	// ErrUnknownKey: the header names a provider or key id this configuration
	// does not hold (a retired master key, a key id that was altered). Add the
	// key to UNSAY_MASTER_KEYS_PREVIOUS to read such a record.
	ErrUnknownKey = errors.New("sealed under a key this configuration does not hold")
	// ErrAuthentication: AES-GCM (or KMS, for the wrapped data key) refused
	// the bytes: they were altered, or they belong to another record,
	// audience or version (P-6). This is evidence of tampering.
	ErrAuthentication = errors.New("authentication failed: bytes altered or sealed for another record, audience or version")
	// ErrKeyUnavailable: the key service failed (KMS unreachable, 5xx,
	// throttled, access denied, key disabled). Not evidence of tampering;
	// *Error.Temporary reports true. The read still fails closed.
	ErrKeyUnavailable = errors.New("key service unavailable")
	// ErrAAD: the additional authenticated data is empty, or a component
	// given to AAD is empty or contains the reserved separator "|".
	ErrAAD = errors.New("invalid additional authenticated data")
	// ErrConfig: the provider cannot start; see *ConfigError.
	ErrConfig = errors.New("envelope: not configured")
)

// Error is the type of every error Seal, Open and Receipt return.
// errors.Is matches its operation sentinel (ErrOpen or ErrSeal), its Kind,
// and its cause. Messages never contain plaintext or key material.
type Error struct {
	Op   string // "open" or "seal"
	Kind error  // ErrNotEnvelope, ErrTruncated, ErrUnknownKey, ErrAuthentication, ErrKeyUnavailable, ErrAAD
	Err  error  // underlying cause (a KMS API error, …); may be nil
}

func (e *Error) Error() string {
	s := "envelope: " + e.Op + ": " + e.Kind.Error()
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap exposes the operation sentinel, the kind and the cause to errors.Is/As.
func (e *Error) Unwrap() []error {
	op := ErrOpen
	if e.Op == "seal" {
		op = ErrSeal
	}
	errs := []error{op, e.Kind}
	if e.Err != nil {
		errs = append(errs, e.Err)
	}
	return errs
}

// Temporary reports whether the failure is the key service's (ErrKeyUnavailable)
// rather than the bytes'. The store, which cannot import this package, can ask
// with errors.As(err, &t) for t of type interface{ Temporary() bool } and
// report an outage instead of a chain break.
func (e *Error) Temporary() bool { return e.Kind == ErrKeyUnavailable }

func openErr(kind, cause error) error { return &Error{Op: "open", Kind: kind, Err: cause} }
func sealErr(kind, cause error) error { return &Error{Op: "seal", Kind: kind, Err: cause} }

// ConfigError is returned by New when a provider cannot start. It names every
// missing environment variable and every invalid one (never their values).
// errors.Is(err, ErrConfig) is true.
type ConfigError struct {
	Mode    string   // "local", "kms", or the unrecognised mode
	Missing []string // variables (or credential sources) that are unset
	Invalid []string // "NAME: reason" for variables that are set but unusable
}

func (e *ConfigError) Error() string {
	var parts []string
	if len(e.Missing) > 0 {
		parts = append(parts, "missing "+strings.Join(e.Missing, ", "))
	}
	if len(e.Invalid) > 0 {
		parts = append(parts, "invalid "+strings.Join(e.Invalid, "; "))
	}
	return "envelope " + e.Mode + ": refusing to start: " + strings.Join(parts, "; ")
}

// Unwrap makes errors.Is(err, ErrConfig) true.
func (e *ConfigError) Unwrap() error { return ErrConfig }

func (e *ConfigError) empty() bool { return len(e.Missing) == 0 && len(e.Invalid) == 0 }
