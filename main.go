// Command unsay keeps a patient's care plan live for a voice assistant and
// takes back what the assistant said when a clinician changes an
// instruction. The commands are bridge/cmd's (`unsay help` lists them);
// main stops a running server gracefully on SIGINT or SIGTERM and exits
// with the command's code.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/unsay/unsay/bridge/cmd"
)

// version and commit are set at build time with
// -ldflags "-X main.version=v1.2.0 -X main.commit=abc1234"; otherwise
// `unsay version` reads the module and VCS information Go stamps into the
// binary.
var version, commit string

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cmd.Run(ctx, os.Args[1:], cmd.Build{Version: version, Commit: commit})
	stop()
	os.Exit(code)
}
