package cmd

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/unsay/unsay/bridge/app"
	"github.com/unsay/unsay/bridge/auth"
	"github.com/unsay/unsay/bridge/bench"
	"github.com/unsay/unsay/bridge/httpapi"
	"github.com/unsay/unsay/bridge/speech"
	"github.com/unsay/unsay/models"
	"github.com/unsay/unsay/store"
)

// cmdBench measures the main job's latency: `unsay bench [--n 200]
// [--warmup 10] [--json] [--url URL]`. Without --url it starts its own
// server in-process on a temporary SQLite database (durable commits) with
// the fixture patient "bench" and notifications off; with --url it measures
// a running server (UNSAY_WRITE_SECRET and UNSAY_TOKEN_SECRET must match
// it), following the patient with its own speech principal. It prints
// write→mcp-client and write→speech-retraction with p50/p95/p99/max in ms
// (sorted samples, index floor(p·n)), or JSON with --json, and exits 1 if
// any run is outside the 3,400 ms speech window.
func cmdBench(ctx context.Context, args []string) error {
	c, fs := newCommand("bench")
	n := fs.Int("n", 200, "measured revisions")
	warmup := fs.Int("warmup", 10, "unmeasured revisions first")
	asJSON := fs.Bool("json", false, "print JSON instead of lines")
	target := fs.String("url", "", "measure a running server at this base URL instead of an in-process one")
	patient := fs.String("patient", "bench", "fixture patient the revisions are written to")
	if _, err := parseFlags(c, fs, args); err != nil {
		return err
	}
	if *n < 1 || *warmup < 0 {
		return usageErr("bench", "--n %d --warmup %d: want at least 1 measured revision and 0 or more warm-up ones", *n, *warmup)
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	dir, err := os.MkdirTemp("", "unsay-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)

	cfg := bench.Config{Patient: *patient, N: *n, Warmup: *warmup}
	var tokenCfg auth.Config
	if *target == "" {
		a, err := app.New(ctx, app.Config{Addr: "127.0.0.1:0", DB: filepath.Join(dir, "bench.db"), Seed: "bench",
			SpeechPatients: []string{*patient}, Logger: logger})
		if err != nil {
			return err
		}
		defer a.Close()
		sctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- a.Serve(sctx) }()
		defer func() { cancel(); <-done }()
		cfg.BaseURL, cfg.Speech, tokenCfg = a.URL(), a.Speech, a.TokenConfig()
		cfg.WriteSecret = []byte(httpapi.DevWriteSecret)
	} else {
		cfg.BaseURL = strings.TrimRight(*target, "/")
		tokenCfg = auth.Config{Secret: secretFromEnv("UNSAY_TOKEN_SECRET", auth.DevTokenSecret, "token"), PublicURL: cfg.BaseURL}
		cfg.WriteSecret = secretFromEnv("UNSAY_WRITE_SECRET", httpapi.DevWriteSecret, "write")
		// Its heard ledger lives in a store of its own on a temporary file.
		ledger, err := store.Open(ctx, store.Options{DSN: filepath.Join(dir, "speech.db"), Logger: logger})
		if err != nil {
			return err
		}
		defer ledger.Close()
		tok, err := auth.Mint(tokenCfg, "unsay-bench-speech", []models.Scope{models.ScopeReadUser}, []string{*patient}, time.Hour)
		if err != nil {
			return err
		}
		sp, err := speech.New(speech.Config{MCPURL: cfg.BaseURL + "/mcp", Token: tok, Patients: []string{*patient}, Ledger: ledger.HeardLedger(), Logger: logger})
		if err != nil {
			return err
		}
		sctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- sp.Run(sctx) }()
		defer func() { cancel(); <-done }()
		cfg.Speech = sp
	}
	reader, err := auth.Mint(tokenCfg, "unsay-bench", []models.Scope{models.ScopeReadUser}, []string{*patient}, time.Hour)
	if err != nil {
		return err
	}
	cfg.ReaderToken = reader
	res, err := bench.Run(ctx, cfg)
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(res); err != nil {
			return err
		}
	} else {
		fmt.Println(res.MCPClient.Line())
		fmt.Println(res.SpeechRetraction.Line())
	}
	if out := res.MCPClient.OutsideWindow + res.SpeechRetraction.OutsideWindow; out > 0 {
		fmt.Fprintf(os.Stderr, "unsay bench: %d runs outside the %s speech window\n", out, bench.SpeechWindow)
		return exitError{code: 1}
	}
	return nil
}
