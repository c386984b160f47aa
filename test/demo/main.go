// Command demo runs Unsay's main job end to end against the real binary and
// prints the transcript (`make demo`): Ray links his Echo Show and hears his
// walking instruction; the physio writes "Full weight-bearing as tolerated."
// with `unsay write`; Ray's next turn opens with the retraction.
//
//	go run ./test/demo [-bin bin/unsay]
//
// Every Alexa request is signed with a throwaway test CA that the server is
// told to trust (--alexa-roots, --alexa-cert); nothing leaves the machine.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"

	"github.com/unsay/unsay/test/harness"
)

func main() {
	bin := flag.String("bin", "", "the unsay binary (default: $UNSAY_E2E_BIN, else go build)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, *bin); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, bin string) error {
	dir, err := os.MkdirTemp("", "unsay-demo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if bin != "" {
		os.Setenv("UNSAY_E2E_BIN", bin)
	}
	if bin, err = harness.Binary(ctx, dir); err != nil {
		return err
	}
	fmt.Println("Unsay demo: the main job, end to end (real binary, real sockets, signed Alexa requests)")
	fmt.Println(strings.Repeat("─", 78))
	d, err := harness.RunDemo(ctx, bin, dir, os.Stdout)
	if err != nil {
		return err
	}
	fmt.Println(strings.Repeat("─", 78))
	after := d.AfterWrite.Speech()
	fmt.Printf("Ray first heard:        “%s”\n", d.HeardSentence)
	fmt.Printf("next turn opens with:   %.120s…\n", after)
	for _, p := range harness.AssistantOnlyPhrases {
		for _, r := range d.All {
			if strings.Contains(strings.ToLower(string(r.Raw)), p) {
				return fmt.Errorf("assistant-only text %q reached Ray's device", p)
			}
		}
	}
	fmt.Println("assistant-only notes:   never spoken, never on screen")
	return nil
}
