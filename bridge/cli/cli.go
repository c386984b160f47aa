// Package cli holds the command-line plumbing of the unsay command that is
// not a command itself: flag sets whose -h lists every flag with its
// UNSAY_ environment twin and the secrets the command reads, flag parsing
// that refuses stray arguments instead of ignoring them, and a log handler
// that keeps the MCP SDK's per-session lines out of the default log level.
//
// The commands themselves are bridge/cmd's. It imports nothing else from
// Unsay.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"sort"
	"strings"
	"text/tabwriter"
)

// Secret is an environment variable a command reads that has no flag
// (secrets come only from the environment).
type Secret struct {
	Env  string // UNSAY_TOKEN_SECRET
	Help string // "HS256 key of bearer tokens (≥ 32 bytes); development default on loopback"
}

// Command describes one subcommand for its -h text.
type Command struct {
	Name     string   // "write"
	Synopsis string   // "unsay write --patient P --domain D --value TEXT --author ID [flags]"
	Summary  string   // one sentence: what it does
	Secrets  []Secret // environment-only variables it reads
	// Args names the positional arguments it takes ("UTTERANCE…"); empty
	// means none, and any positional argument is refused.
	Args string
}

// EnvName is the environment twin of a flag: --foo-bar reads UNSAY_FOO_BAR.
func EnvName(flagName string) string {
	return "UNSAY_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// NewFlagSet returns a ContinueOnError flag set for c whose own output is
// discarded: Parse reports errors, and Usage writes the help text.
func NewFlagSet(c Command) *flag.FlagSet {
	fs := flag.NewFlagSet(c.Name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return fs
}

// Usage writes c's help: the synopsis, the summary, every flag with its
// default and its UNSAY_ twin, and the secrets.
func Usage(w io.Writer, c Command, fs *flag.FlagSet) {
	fmt.Fprintf(w, "usage: %s\n\n%s\n", c.Synopsis, c.Summary)
	var n int
	fs.VisitAll(func(*flag.Flag) { n++ })
	if n > 0 {
		fmt.Fprintf(w, "\nflags (each --foo-bar is also read from UNSAY_FOO_BAR; the flag wins):\n")
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fs.VisitAll(func(f *flag.Flag) {
			name, usage := flag.UnquoteUsage(f)
			arg := "--" + f.Name
			if name != "" {
				arg += " " + name
			}
			if def := f.DefValue; def != "" && def != "false" && def != "[]" {
				usage += " (default " + def + ")"
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\n", arg, EnvName(f.Name), usage)
		})
		tw.Flush()
	}
	if len(c.Secrets) > 0 {
		fmt.Fprintf(w, "\nsecrets (environment only, never flags):\n")
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		for _, s := range c.Secrets {
			fmt.Fprintf(tw, "  %s\t%s\n", s.Env, s.Help)
		}
		tw.Flush()
	}
}

// ErrHelp is returned by Parse after it printed the help for -h or --help.
var ErrHelp = flag.ErrHelp

// UsageError is a command line that cannot be run: an unknown flag, a bad
// value, or a stray argument. Its message names the flag or the argument
// and says how to see the flags.
type UsageError struct {
	Cmd string
	Err error
}

func (e *UsageError) Error() string {
	return fmt.Sprintf("%v (unsay %s -h lists the flags)", e.Err, e.Cmd)
}

func (e *UsageError) Unwrap() error { return e.Err }

// Parse parses args into fs for c and then fills every flag not given on
// the command line from its UNSAY_ twin (lookup is os.LookupEnv when nil);
// the flag wins. Flags and positional arguments may be interleaved
// (`unsay ask "what changed" --url …`), and "--" ends the flags. It returns
// the positional arguments. A command whose Args is empty takes none: any
// is a *UsageError naming it — never silently ignored. -h prints Usage to
// stdout and returns ErrHelp.
func Parse(c Command, fs *flag.FlagSet, args []string, stdout io.Writer, lookup func(string) (string, bool)) ([]string, error) {
	if lookup == nil {
		lookup = os.LookupEnv
	}
	var positional []string
	for {
		err := fs.Parse(args)
		if errors.Is(err, flag.ErrHelp) {
			Usage(stdout, c, fs)
			return nil, ErrHelp
		}
		if err != nil {
			return nil, &UsageError{Cmd: c.Name, Err: err}
		}
		consumed := len(args) - fs.NArg()
		rest := fs.Args()
		if consumed > 0 && args[consumed-1] == "--" {
			positional = append(positional, rest...)
			break
		}
		if len(rest) == 0 {
			break
		}
		positional = append(positional, rest[0])
		args = rest[1:]
	}
	if c.Args == "" && len(positional) > 0 {
		return nil, &UsageError{Cmd: c.Name, Err: strayArgs(c, fs, positional)}
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var errs []error
	fs.VisitAll(func(f *flag.Flag) {
		if set[f.Name] {
			return
		}
		env := EnvName(f.Name)
		if v, ok := lookup(env); ok {
			if err := fs.Set(f.Name, v); err != nil {
				errs = append(errs, fmt.Errorf("%s=%q: %w", env, v, err))
			}
		}
	})
	if err := errors.Join(errs...); err != nil {
		return nil, &UsageError{Cmd: c.Name, Err: err}
	}
	return positional, nil
}

// strayArgs words the refusal of positional arguments, suggesting --db for
// a path when the command has that flag.
func strayArgs(c Command, fs *flag.FlagSet, args []string) error {
	msg := fmt.Sprintf("unsay %s takes no arguments, got %q", c.Name, args)
	if len(args) == 1 && fs.Lookup("db") != nil && (strings.ContainsAny(args[0], "./") || strings.HasPrefix(args[0], "postgres")) {
		msg += fmt.Sprintf("; did you mean --db %s?", args[0])
	}
	return errors.New(msg)
}

// Overview writes the top-level help: one sentence per command, in order.
func Overview(w io.Writer, cmds []Command) {
	fmt.Fprintf(w, "unsay keeps a patient's care plan live for a voice assistant and takes back\nwhat it said when a clinician changes an instruction.\n\nusage: unsay COMMAND [flags]\n\ncommands:\n")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, c := range cmds {
		fmt.Fprintf(tw, "  %s\t%s\n", c.Name, c.Summary)
	}
	tw.Flush()
	fmt.Fprintf(w, "\n`unsay COMMAND -h` (or `unsay help COMMAND`) lists a command's flags, their\nUNSAY_ environment twins and the secrets it reads.\n")
}

// Closest returns the command name nearest to name (a typo), or "".
func Closest(name string, cmds []Command) string {
	best, bestD := "", 3
	for _, c := range cmds {
		if d := distance(name, c.Name); d < bestD {
			best, bestD = c.Name, d
		}
	}
	return best
}

// distance is the Levenshtein distance between a and b.
func distance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}

// SortedKeys returns m's keys sorted (for messages listing valid values).
func SortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// sdkPackage prefixes the functions of the official MCP Go SDK.
const sdkPackage = "github.com/modelcontextprotocol/go-sdk/"

// QuietSDK wraps h so that the MCP SDK's own INFO lines ("server
// connecting", "session initialized", "resource subscribed" with session
// ids, one per session and subscription) are logged at DEBUG: at the
// default level the log shows Unsay's own lines only. WARN and ERROR from
// the SDK pass unchanged. The SDK is recognised by the function that
// logged (the record's PC).
func QuietSDK(h slog.Handler) slog.Handler { return quietSDK{h} }

type quietSDK struct{ next slog.Handler }

func (q quietSDK) Enabled(ctx context.Context, l slog.Level) bool { return q.next.Enabled(ctx, l) }

func (q quietSDK) Handle(ctx context.Context, r slog.Record) error {
	if r.Level == slog.LevelInfo && fromSDK(r.PC) {
		if !q.next.Enabled(ctx, slog.LevelDebug) {
			return nil
		}
		r = r.Clone()
		r.Level = slog.LevelDebug
	}
	return q.next.Handle(ctx, r)
}

func (q quietSDK) WithAttrs(as []slog.Attr) slog.Handler { return quietSDK{q.next.WithAttrs(as)} }
func (q quietSDK) WithGroup(name string) slog.Handler    { return quietSDK{q.next.WithGroup(name)} }

func fromSDK(pc uintptr) bool {
	if pc == 0 {
		return false
	}
	f, _ := runtime.CallersFrames([]uintptr{pc}).Next()
	return strings.HasPrefix(f.Function, sdkPackage)
}
