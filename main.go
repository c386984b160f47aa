// Command unsay keeps a patient's care plan live for a voice assistant and
// takes back what the assistant said when a clinician changes an instruction.
//
//	unsay serve    run the server (MCP at /mcp, /write, /alexa, web pages)
//	unsay token    mint a development bearer token
//	unsay write    sign and POST a clinician's revision to /write
//	unsay link     create a six-digit device-linking code (POST /link)
//	unsay verify   check every hash chain (and the audit log) offline
//	unsay rekey    re-seal every stored value under the current key
//	unsay bench    measure write → MCP client → spoken retraction latency
//
// Every flag --foo-bar also reads UNSAY_FOO_BAR; the flag wins. Secrets come
// only from the environment.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:])
	stop()
	os.Exit(code)
}

// run dispatches a subcommand and returns the process exit code.
func run(ctx context.Context, args []string) int {
	if len(args) == 0 {
		usage()
		return 2
	}
	cmds := map[string]func(context.Context, []string) error{
		"serve":  cmdServe,
		"token":  cmdToken,
		"write":  cmdWrite,
		"link":   cmdLink,
		"verify": cmdVerify,
		"rekey":  cmdRekey,
		"bench":  cmdBench,
	}
	cmd, ok := cmds[args[0]]
	if !ok {
		usage()
		return 2
	}
	if err := cmd(ctx, args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		var ee exitError
		if errors.As(err, &ee) {
			return ee.code
		}
		fmt.Fprintln(os.Stderr, "unsay "+args[0]+":", err)
		return 1
	}
	return 0
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: unsay serve|token|write|link|verify|rekey|bench [flags]   (unsay CMD -h for flags)")
}

// exitError carries a specific exit code out of a command (verify: 1 on a broken chain).
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

// parseFlags parses args into fs, then fills every flag not given on the
// command line from UNSAY_FOO_BAR (for --foo-bar). The flag wins.
func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var errs []error
	fs.VisitAll(func(f *flag.Flag) {
		if set[f.Name] {
			return
		}
		env := "UNSAY_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		if v, ok := os.LookupEnv(env); ok {
			if err := fs.Set(f.Name, v); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", env, err))
			}
		}
	})
	return errors.Join(errs...)
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

// ---- serve (owned by the bridge-MCP work; wired with skill and speech) ----

func cmdServe(ctx context.Context, args []string) error { return errors.New("not implemented yet") }

// ---- token, write, link (owned by the bridge-HTTP work) ----

func cmdToken(ctx context.Context, args []string) error { return errors.New("not implemented yet") }
func cmdWrite(ctx context.Context, args []string) error { return errors.New("not implemented yet") }
func cmdLink(ctx context.Context, args []string) error  { return errors.New("not implemented yet") }

// ---- verify, rekey (owned by the store / envelope work) ----

func cmdVerify(ctx context.Context, args []string) error { return errors.New("not implemented yet") }
func cmdRekey(ctx context.Context, args []string) error  { return errors.New("not implemented yet") }

// ---- bench (owned by the speech work) ----

func cmdBench(ctx context.Context, args []string) error { return errors.New("not implemented yet") }
