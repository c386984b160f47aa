package bridge

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/unsay/unsay/models"
)

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestLogs_NeverCarryATokenOrAValue runs the whole surface with the logger
// at Info (the level unsay serve uses) and then at Debug, and searches the
// log for the bearer tokens, every fact value involved and the session ids
// (the SDK logs them at INFO on every subscribe). Twin: at
// Debug the log does name the sessions, by their sessionRef.
func TestLogs_NeverCarryATokenOrAValue(t *testing.T) {
	for _, level := range []slog.Level{slog.LevelInfo, slog.LevelDebug} {
		t.Run(level.String(), func(t *testing.T) {
			var buf syncBuffer
			h := newHarness(t, func(c *Config) {
				c.Logger = slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: level}))
			})
			ctx := context.Background()
			userTok, dualTok := h.token("host", userScopes), h.token("reasoner", dualScopes)
			user, dual := h.connect(userTok), h.connect(dualTok)
			for _, c := range []*client{user, dual} {
				c.listAll(t)
				//lint:ignore SA1019 the test drives the 2025-11-25 logging channel the server keeps
				_ = c.cs.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "debug"})
				if _, err := c.cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "care://ray/weight_bearing"}); err != nil {
					t.Fatal(err)
				}
				if err := c.cs.Subscribe(ctx, &mcp.SubscribeParams{URI: "care://ray/weight_bearing"}); err != nil {
					t.Fatal(err)
				}
			}
			_, _ = dual.cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "care-internal://ray/risk"})
			_, _ = user.cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "care-internal://ray/risk"})
			h.publish("weight_bearing", models.AudienceUser, "Full weight-bearing as tolerated.")
			user.waitFor(t, isEvent("updated care://ray/weight_bearing"))
			_, _ = user.cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "care://ray/weight_bearing"})
			_, _ = dual.cs.CallTool(ctx, &mcp.CallToolParams{Name: ToolWhatsChanged, Arguments: map[string]any{"since": "2020-01-01T00:00:00Z"}})
			_, _ = dual.cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: PromptBriefCarer, Arguments: map[string]string{"patient": "ray"}})

			log := buf.String()
			if level == slog.LevelDebug && (!strings.Contains(log, sessionRef(user.cs.ID())) || !strings.Contains(log, "resource subscribed")) {
				t.Fatalf("the sessions were not logged at Debug; the check would prove nothing:\n%s", log)
			}
			for _, secret := range []string{userTok, dualTok, strings.Split(userTok, ".")[2], "Full weight-bearing", "Partial weight-bearing", "Fall risk", "Rivaroxaban", "Stop — ", user.cs.ID(), dual.cs.ID()} {
				if strings.Contains(log, secret) {
					t.Errorf("the log carries %q", secret)
				}
			}
		})
	}
}
