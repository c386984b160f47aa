// Package cmd is the unsay command: every subcommand, its flags and what
// it prints. main.go only wires the signals and the exit code (Run).
//
//	unsay serve    run the server (MCP at /mcp, /write, /alexa, web pages)
//	unsay ask      say something to a running server's /alexa, as an Echo would
//	unsay token    mint a development bearer token
//	unsay write    sign and POST a clinician's revision to /write
//	unsay link     create a six-digit device-linking code (POST /link)
//	unsay verify   check every hash chain (and the audit log) offline
//	unsay keygen   generate the Ed25519 key that signs chain heads (UNSAY_SIGNING_KEY)
//	unsay rekey    re-seal every stored value under the current key
//	unsay bench    measure write → MCP client → spoken retraction latency
//	unsay client   OAuth clients of the embedded authorization server (add, list, approve, remove)
//	unsay grants   what people granted OAuth clients (list, revoke)
//	unsay version  print the version and commit
//	unsay help     describe every command (unsay help CMD: its flags)
//
// Every flag --foo-bar also reads UNSAY_FOO_BAR; the flag wins. Secrets come
// only from the environment. A command refuses arguments it does not take
// (bridge/cli), and `unsay CMD -h` lists its flags, their UNSAY_ twins and
// the secrets it reads.
//
// Files, by command: serve.go, ask.go, client.go (token, write, link),
// offline.go (verify, keygen, rekey), bench.go, oauth.go (client, grants),
// version.go; cmd.go the dispatch and the flag helpers.
package cmd

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/unsay/unsay/bridge/cli"
)

// command is one subcommand: its help (cli.Command) and its function.
type command struct {
	cli.Command
	run func(context.Context, []string) error
}

// Secrets, as the -h texts name them.
var (
	secretToken         = cli.Secret{Env: "UNSAY_TOKEN_SECRET", Help: "HS256 key of bearer tokens, ≥ 32 bytes (development default on loopback only)"}
	secretWrite         = cli.Secret{Env: "UNSAY_WRITE_SECRET", Help: "HMAC key of signed writes, ≥ 32 bytes (development default on loopback only)"}
	secretAudit         = cli.Secret{Env: "UNSAY_AUDIT_KEY", Help: "HMAC key of the audit log's chain, ≥ 32 bytes (development default on loopback only)"}
	secretMaster        = cli.Secret{Env: "UNSAY_MASTER_KEY", Help: "base64 AES-256 key for --envelope local"}
	secretPrevious      = cli.Secret{Env: "UNSAY_MASTER_KEYS_PREVIOUS", Help: "comma-separated older master keys that sealed older values"}
	secretKMS           = cli.Secret{Env: "UNSAY_KMS_KEY_ID", Help: "the KMS key for --envelope kms (with the usual AWS credential chain)"}
	secretSigning       = cli.Secret{Env: "UNSAY_SIGNING_KEY", Help: "Ed25519 key that signs chain heads and the audit head (unsay keygen; development default on loopback only)"}
	secretSigningPublic = cli.Secret{Env: "UNSAY_SIGNING_PUBLIC_KEY", Help: "the public half of UNSAY_SIGNING_KEY, to check signed heads"}
	secretLWA           = cli.Secret{Env: "UNSAY_ALEXA_CLIENT_SECRET", Help: "Login with Amazon client secret, for proactive notifications"}
)

// Build is what `unsay version` reports besides what Go stamps into the
// binary: the values main was linked with (-ldflags "-X main.version=…
// -X main.commit=…"), "" when unset.
type Build struct {
	Version string // v1.2.0
	Commit  string // the git commit
}

// commands lists every subcommand, in the order `unsay help` shows them;
// b is what `unsay version` reports.
func commands(b Build) []command {
	return []command{
		{cli.Command{Name: "serve", Synopsis: "unsay serve [flags]",
			Summary: "Run the server: MCP at /mcp, signed writes at /write, device links at /link, /verify, Alexa at /alexa, and the Echo Show card and clinician page.",
			Secrets: []cli.Secret{secretToken, secretWrite, secretAudit, secretSigning, secretMaster, secretPrevious, secretKMS, secretLWA}}, cmdServe},
		{cli.Command{Name: "ask", Synopsis: `unsay ask [flags] "UTTERANCE" ["UTTERANCE"…]`, Args: "UTTERANCE…",
			Summary: "Say something to a running server's /alexa as an Echo Show would, and print what Ray hears and what the card shows (each utterance is one turn of one session)."}, cmdAsk},
		{cli.Command{Name: "token", Synopsis: "unsay token --patient P --scope S [--scope S…] [--sub NAME] [flags]",
			Summary: "Mint a development bearer token (HS256) for a server and print it.",
			Secrets: []cli.Secret{secretToken}}, cmdToken},
		{cli.Command{Name: "write", Synopsis: `unsay write --patient P --domain D --value "TEXT" --author ID --author-label "NAME, ROLE" [--audio clip.mp3] [flags]`,
			Summary: "Sign a clinician's revision and POST it to a server's /write; print what was saved and what Ray will hear.",
			Secrets: []cli.Secret{secretWrite}}, cmdWrite},
		{cli.Command{Name: "link", Synopsis: "unsay link --patient P [flags]",
			Summary: "Create a six-digit code that links an Echo to a patient (POST /link); print it and when it expires.",
			Secrets: []cli.Secret{secretToken}}, cmdLink},
		{cli.Command{Name: "verify", Synopsis: "unsay verify [--db PATH] [--audit] [flags]",
			Summary: "Check every fact's hash chain (and, with --audit, the audit log) in a database, offline.",
			Secrets: []cli.Secret{secretAudit, secretSigningPublic, secretSigning, secretMaster, secretPrevious, secretKMS}}, cmdVerify},
		{cli.Command{Name: "keygen", Synopsis: "unsay keygen [--out FILE]",
			Summary: "Generate the Ed25519 key that signs chain heads and the audit log's head (UNSAY_SIGNING_KEY) and print its public key."}, cmdKeygen},
		{cli.Command{Name: "rekey", Synopsis: "unsay rekey --envelope local|kms [--db PATH] [flags]",
			Summary: "Re-seal every stored value under the current key, with the server stopped.",
			Secrets: []cli.Secret{secretAudit, secretMaster, secretPrevious, secretKMS}}, cmdRekey},
		{cli.Command{Name: "bench", Synopsis: "unsay bench [--n 200] [flags]",
			Summary: "Measure write → MCP client and write → spoken retraction latency, in-process or against a running server.",
			Secrets: []cli.Secret{secretToken, secretWrite}}, cmdBench},
		{cli.Command{Name: "client", Synopsis: "unsay client add|list|approve|remove [ID] [flags]", Args: "add|list|approve|remove [ID]",
			Summary: "Manage the embedded OAuth authorization server's clients: register one, list them, approve assistant scopes for one, remove one."}, cmdClient},
		{cli.Command{Name: "grants", Synopsis: "unsay grants list|revoke [ID] [flags]", Args: "list|revoke [ID]",
			Summary: "List what people granted OAuth clients, or revoke a grant (effective on the client's next request)."}, cmdGrants},
		{cli.Command{Name: "version", Synopsis: "unsay version",
			Summary: "Print the version, the commit it was built from and the Go version."},
			func(ctx context.Context, args []string) error { return cmdVersion(ctx, args, b) }},
		{cli.Command{Name: "help", Synopsis: "unsay help [COMMAND]", Args: "[COMMAND]",
			Summary: "Describe every command, or one command's flags."}, nil},
	}
}

// Run runs the command line args (without the program's name) and
// returns the process exit code: 0 done (and for help), 1 failed, 2 a
// command line that cannot run (an unknown command or flag, a bad value, a
// stray argument: the message names it). When ctx ends, a running `unsay
// serve` stops gracefully. b is what `unsay version` reports.
func Run(ctx context.Context, args []string, b Build) int {
	cmds := commands(b)
	overview := func(w io.Writer) {
		list := make([]cli.Command, len(cmds))
		for i, c := range cmds {
			list[i] = c.Command
		}
		cli.Overview(w, list)
	}
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "-help" || args[0] == "help" && len(args) == 1 {
		overview(os.Stdout)
		return 0
	}
	name := args[0]
	if name == "help" {
		name, args = args[1], []string{args[1], "-h"}
	}
	if name == "--version" || name == "-version" {
		name = "version"
	}
	for _, c := range cmds {
		if c.Name != name || c.run == nil {
			continue
		}
		err := c.run(ctx, args[1:])
		var ue *cli.UsageError
		var ee exitError
		switch {
		case err == nil, errors.Is(err, cli.ErrHelp):
			return 0
		case errors.As(err, &ee):
			return ee.code
		case errors.As(err, &ue):
			fmt.Fprintln(os.Stderr, "unsay "+name+":", err)
			return 2
		}
		fmt.Fprintln(os.Stderr, "unsay "+name+":", err)
		return 1
	}
	list := make([]cli.Command, len(cmds))
	for i, c := range cmds {
		list[i] = c.Command
	}
	msg := fmt.Sprintf("unsay: unknown command %q", name)
	if near := cli.Closest(name, list); near != "" {
		msg += fmt.Sprintf(" (did you mean %q?)", near)
	}
	fmt.Fprintln(os.Stderr, msg+"; `unsay help` lists the commands")
	return 2
}

// exitError carries a specific exit code out of a command (verify: 1 on a broken chain).
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

// newCommand returns the flag set of the named command.
func newCommand(name string) (cli.Command, *flag.FlagSet) {
	for _, c := range commands(Build{}) {
		if c.Name == name {
			return c.Command, cli.NewFlagSet(c.Command)
		}
	}
	panic("unsay: no command " + name) // every caller names itself
}

// parseFlags parses args for the command (see cli.Parse): flags, then
// UNSAY_ twins; positional arguments are returned only to commands that
// take them and refused otherwise.
func parseFlags(c cli.Command, fs *flag.FlagSet, args []string) ([]string, error) {
	return cli.Parse(c, fs, args, os.Stdout, nil)
}

// usageErr is a command line that cannot run (exit 2), naming the flag.
func usageErr(cmd, format string, a ...any) error {
	return &cli.UsageError{Cmd: cmd, Err: fmt.Errorf(format, a...)}
}

// listFlag is a repeatable string flag (--allowed-origin a --allowed-origin b).
// From the environment it takes a comma-separated list.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }

func (l *listFlag) Set(v string) error {
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			*l = append(*l, s)
		}
	}
	return nil
}
