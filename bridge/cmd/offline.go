package cmd

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/unsay/unsay/bridge/app"
	"github.com/unsay/unsay/bridge/cli"
	"github.com/unsay/unsay/models"
	"github.com/unsay/unsay/store"
	"github.com/unsay/unsay/store/envelope"
)

// cmdVerify checks every hash chain (P-5) and its signed head (P-26) and,
// with --audit, the audit log's HMAC chain (P-14) and its signed head,
// offline: `unsay verify --db PATH [--audit] [--envelope none|local|kms]`.
// It takes no positional argument: the database is --db (a stray path is
// refused, never ignored).
// It prints one line per chain — intact, the head version and the key that
// signed it, or BROKEN at the first version that disagrees and why ("head
// signature does not match" for a chain rewritten with recomputed hashes)
// — and exits 0 when everything is intact, 1 otherwise (exitError{1}). The
// audit key is UNSAY_AUDIT_KEY, the head key UNSAY_SIGNING_PUBLIC_KEY (or
// the public half of UNSAY_SIGNING_KEY), each else the development default
// (announced on stderr). An encrypted store needs the envelope that sealed
// it (--envelope and its UNSAY_MASTER_KEY / KMS settings) to open values.
func cmdVerify(ctx context.Context, args []string) error {
	c, fs := newCommand("verify")
	db := fs.String("db", app.DefaultDB, "SQLite database file, or a postgres:// URL, to verify")
	audit := fs.Bool("audit", false, "also verify the audit log's HMAC chain")
	env := fs.String("envelope", "none", "envelope the values were sealed with: none, local or kms")
	kmsEndpoint := fs.String("kms-endpoint", "", "KMS endpoint URL override (kms envelope)")
	kmsRegion := fs.String("kms-region", "", "AWS region (kms envelope)")
	if _, err := parseFlags(c, fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	s, err := openOffline(ctx, "verify", *db, envelope.Config{Mode: *env, KMSEndpoint: *kmsEndpoint, KMSRegion: *kmsRegion})
	if err != nil {
		return err
	}
	defer s.Close()
	fmt.Printf("head signatures checked against Ed25519 key %s (%s)\n", store.KeyID(s.PublicKey()), store.FormatPublicKey(s.PublicKey()))
	results, err := s.VerifyAll(ctx, models.System("unsay-verify", models.ScopeReadUser, models.ScopeReadAssistant))
	if err != nil {
		return sealedHint(err, *db, *env)
	}
	ok := true
	for _, r := range results {
		switch {
		case !r.Intact:
			ok = false
			fmt.Printf("%s BROKEN at v%d (%d versions): %s\n", r.URI, r.BrokenAt, len(r.Versions), r.Problem)
		case r.Head != nil && r.Head.Valid:
			fmt.Printf("%s intact (%d versions), head v%d signed by key %s\n", r.URI, len(r.Versions), r.Head.N, r.Head.KeyID)
		default:
			fmt.Printf("%s intact (%d versions), head not signed yet (written before head signing; the server signs it at its next start)\n", r.URI, len(r.Versions))
		}
	}
	if *audit {
		v, err := s.VerifyAuditLog(ctx)
		if err != nil {
			return err
		}
		switch {
		case v.BadRow != 0:
			ok = false
			fmt.Printf("audit log BROKEN at row %d: %s\n", v.BadRow, v.Problem)
		case v.Head != nil && v.Head.Valid:
			fmt.Printf("audit log intact (%d rows), head signed by key %s\n", v.Rows, v.Head.KeyID)
		default:
			fmt.Printf("audit log intact (%d rows)\n", v.Rows)
		}
	}
	if !ok {
		return exitError{1}
	}
	return nil
}

// sealedHint adds the --envelope flag to an error about sealed values read
// without an envelope.
func sealedHint(err error, db, env string) error {
	if strings.TrimSpace(env) == "none" && strings.Contains(strings.ToLower(err.Error()), "seal") {
		return fmt.Errorf("%w — the database %s holds sealed values: give the envelope that sealed them, e.g. --envelope local with UNSAY_MASTER_KEY", err, db)
	}
	return err
}

// cmdKeygen generates the Ed25519 key that signs chain heads (P-26):
// `unsay keygen [--out FILE]`. Without --out it prints
//
//	UNSAY_SIGNING_KEY=<base64 seed>           the secret: the server's environment only
//	UNSAY_SIGNING_PUBLIC_KEY=<base64 key>     public: for `unsay verify` and /verify
//
// With --out it writes the secret line to FILE (mode 0600) and prints only
// the public one. FILE is an environment file of that one line
// (signingKeyFile): load it with `export $(cat FILE)`, systemd's
// EnvironmentFile= or `docker run --env-file FILE`. A FILE that already
// exists is never overwritten: keygen prints the public key of the key it
// holds.
func cmdKeygen(ctx context.Context, args []string) error {
	c, fs := newCommand("keygen")
	out := fs.String("out", "", "write the environment file UNSAY_SIGNING_KEY=… (0600; load it with export $(cat FILE)) instead of stdout; an existing file is kept")
	if _, err := parseFlags(c, fs, args); err != nil {
		return err
	}
	if *out != "" {
		if b, err := os.ReadFile(*out); err == nil {
			k, err := parseSigningKeyFile(b)
			if err != nil {
				return fmt.Errorf("%s exists and holds no signing key: %w", *out, err)
			}
			fmt.Fprintf(os.Stderr, "unsay keygen: %s exists; keeping its key\n", *out)
			fmt.Printf("UNSAY_SIGNING_PUBLIC_KEY=%s\n", store.FormatPublicKey(k.Public().(ed25519.PublicKey)))
			return nil
		}
	}
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return err
	}
	secret := signingKeyFile(priv)
	if *out == "" {
		fmt.Print(secret)
	} else {
		f, err := os.OpenFile(*out, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return err
		}
		if _, err := f.WriteString(secret); err != nil {
			f.Close()
			return err
		}
		if err := f.Close(); err != nil {
			return err
		}
	}
	fmt.Printf("UNSAY_SIGNING_PUBLIC_KEY=%s\n", store.FormatPublicKey(pub))
	if *out != "" {
		fmt.Fprintf(os.Stderr, "unsay keygen: key %s in %s; load it into every server instance's environment (export $(cat %s), or EnvironmentFile=/--env-file) and give the public key to whoever verifies\n", store.KeyID(pub), *out, *out)
	} else {
		fmt.Fprintf(os.Stderr, "unsay keygen: key %s; give UNSAY_SIGNING_KEY to every server instance and the public key to whoever verifies\n", store.KeyID(pub))
	}
	return nil
}

// signingKeyPrefix starts the one line of the file `unsay keygen --out`
// writes.
const signingKeyPrefix = "UNSAY_SIGNING_KEY="

// signingKeyFile is what `unsay keygen --out` writes: one line,
// UNSAY_SIGNING_KEY=<standard base64 of the 32-byte seed>, newline — an
// environment file that `export $(cat FILE)`, `set -a; . FILE`, systemd's
// EnvironmentFile= and `docker run --env-file` all read the same way (the
// value has no space, quote or shell character).
func signingKeyFile(k ed25519.PrivateKey) string {
	return signingKeyPrefix + store.FormatSigningKey(k) + "\n"
}

// parseSigningKeyFile reads back a file signingKeyFile wrote (surrounding
// white space allowed).
func parseSigningKeyFile(b []byte) (ed25519.PrivateKey, error) {
	line := strings.TrimSpace(string(b))
	if !strings.HasPrefix(line, signingKeyPrefix) || strings.ContainsAny(line, "\n\r") {
		return nil, fmt.Errorf("want the one line %s<base64 seed> that unsay keygen --out writes", signingKeyPrefix)
	}
	return store.ParseSigningKey(strings.TrimPrefix(line, signingKeyPrefix))
}

// checkSigningKeyEnv refuses UNSAY_SIGNING_KEY holding the whole line of
// keygen's file (UNSAY_SIGNING_KEY=$(cat FILE)), saying how to load it.
func checkSigningKeyEnv() error {
	if strings.HasPrefix(os.Getenv("UNSAY_SIGNING_KEY"), signingKeyPrefix) {
		return fmt.Errorf("UNSAY_SIGNING_KEY holds the whole line of the file unsay keygen --out writes (%s…): load the file as an environment file, export $(cat FILE), not UNSAY_SIGNING_KEY=$(cat FILE)", signingKeyPrefix)
	}
	return nil
}

// openOffline opens the store at db for an offline command (verify, rekey)
// with the envelope env, the audit key UNSAY_AUDIT_KEY and the head keys
// UNSAY_SIGNING_KEY / UNSAY_SIGNING_PUBLIC_KEY (each else the development
// default, said on stderr). A SQLite file must exist: an offline check
// never creates an empty database. A database that holds sealed values
// opened without an envelope is refused with the flag to add.
func openOffline(ctx context.Context, cmd, db string, env envelope.Config) (*store.Store, error) {
	if _, err := os.Stat(db); err != nil && !store.IsPostgresDSN(db) {
		return nil, fmt.Errorf("--db (UNSAY_DB) %s: no database there (%v); give the file `unsay serve` uses with --db", db, unwrapPath(err))
	}
	if strings.TrimSpace(env.Mode) == "kms" {
		if err := checkKMSKeyID(); err != nil {
			return nil, &cli.UsageError{Cmd: cmd, Err: fmt.Errorf("--envelope (UNSAY_ENVELOPE): %w", err)}
		}
	}
	sealer, err := envelope.New(ctx, env)
	if err != nil {
		return nil, err
	}
	auditKey := []byte(os.Getenv("UNSAY_AUDIT_KEY"))
	if len(auditKey) == 0 {
		fmt.Fprintf(os.Stderr, "unsay %s: UNSAY_AUDIT_KEY unset; using the development default audit key\n", cmd)
	}
	opts := store.Options{DSN: db, AuditKey: auditKey, Sealer: sealer}
	if err := checkSigningKeyEnv(); err != nil {
		return nil, err
	}
	if v := os.Getenv("UNSAY_SIGNING_KEY"); v != "" {
		if opts.SigningKey, err = store.ParseSigningKey(v); err != nil {
			return nil, fmt.Errorf("UNSAY_SIGNING_KEY: %w", err)
		}
	}
	if v := os.Getenv("UNSAY_SIGNING_PUBLIC_KEY"); v != "" {
		if opts.PublicKey, err = store.ParsePublicKey(v); err != nil {
			return nil, fmt.Errorf("UNSAY_SIGNING_PUBLIC_KEY: %w", err)
		}
	}
	if opts.SigningKey == nil && opts.PublicKey == nil {
		fmt.Fprintf(os.Stderr, "unsay %s: UNSAY_SIGNING_PUBLIC_KEY and UNSAY_SIGNING_KEY unset; checking heads against the development key\n", cmd)
	}
	s, err := store.Open(ctx, opts)
	if err != nil {
		return nil, errors.New(strings.Replace(err.Error(), "store: store: ", "store: ", 1))
	}
	if sealer == nil {
		if err := s.CheckStartup(ctx); err != nil && strings.Contains(err.Error(), "sealed values") {
			s.Close()
			return nil, fmt.Errorf("the database %s holds sealed values: give the envelope that sealed them, e.g. `unsay %s --db %s --envelope local` with UNSAY_MASTER_KEY set", db, cmd, db)
		}
	}
	return s, nil
}

// cmdRekey re-seals every stored version under the current key (P-6
// rotation): `unsay rekey --db PATH --envelope local|kms [--kms-endpoint URL]
// [--kms-region R]`. It refuses while a server holds the database (the
// serve lease, ServeLease, is live). The envelope reads UNSAY_MASTER_KEY
// (the new key) and UNSAY_MASTER_KEYS_PREVIOUS (keys that sealed older
// versions), or UNSAY_KMS_KEY_ID and the AWS credential chain; a plaintext
// store is sealed for the first time. Hashes are over plaintext and do not
// change. It runs in one transaction: a version that fails to open
// (unknown key, tampered bytes, KMS outage) aborts it with nothing changed.
// It then verifies every chain and prints the count; exit 1 if a chain is
// broken. The audit key is UNSAY_AUDIT_KEY, or the development default
// (announced).
func cmdRekey(ctx context.Context, args []string) error {
	c, fs := newCommand("rekey")
	db := fs.String("db", app.DefaultDB, "SQLite database file, or a postgres:// URL, to re-seal (stop the server first)")
	env := fs.String("envelope", "none", "envelope to seal under: local or kms (none is refused)")
	kmsEndpoint := fs.String("kms-endpoint", "", "KMS endpoint URL override (kms envelope)")
	kmsRegion := fs.String("kms-region", "", "AWS region (kms envelope)")
	if _, err := parseFlags(c, fs, args); err != nil {
		return err
	}
	if m := strings.TrimSpace(*env); m != "local" && m != "kms" {
		return usageErr("rekey", "--envelope (UNSAY_ENVELOPE) is %q: rekey needs local or kms", m)
	}
	s, err := openOffline(ctx, "rekey", *db, envelope.Config{Mode: *env, KMSEndpoint: *kmsEndpoint, KMSRegion: *kmsRegion})
	if err != nil {
		return err
	}
	defer s.Close()
	holder, expires, err := s.LeaseHolder(ctx, ServeLease)
	if err != nil {
		return fmt.Errorf("checking for a running server: %w", err)
	}
	if holder != "" && time.Now().Before(expires) {
		return fmt.Errorf("a server holds %s: %s. Stop it first (Ctrl-C, or SIGTERM); a server killed with -9 lets go within %s", *db, holder, ServeLeaseTTL)
	}
	n, err := s.Rekey(ctx)
	if err != nil {
		return err
	}
	fmt.Printf("re-sealed %d versions under %s\n", n, envelope.Describe(s.Sealer()))
	results, err := s.VerifyAll(ctx, models.System("unsay-rekey", models.ScopeReadUser, models.ScopeReadAssistant))
	if err != nil {
		return fmt.Errorf("verify after rekey: %w", err)
	}
	for _, r := range results {
		if !r.Intact {
			fmt.Printf("%s BROKEN at v%d\n", r.URI, r.BrokenAt)
			return exitError{1}
		}
	}
	fmt.Printf("%d chains intact\n", len(results))
	return nil
}
