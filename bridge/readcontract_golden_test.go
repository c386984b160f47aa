package bridge

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/unsay/unsay/bridge/auth"
	"github.com/unsay/unsay/bridge/httpapi"
	"github.com/unsay/unsay/models"
	"github.com/unsay/unsay/store"
)

// The read contract's golden file: what this server's resources/read puts
// on the wire for a fresh fact, a stale one, a superseded version and a
// re-read that carries a retraction, on a fixed clock. bridge/speech's
// tests decode the same file, so the two sides of models.ReadMeta cannot
// drift apart unnoticed. Regenerate with: go test ./bridge -run Golden -update
const readContractGolden = "testdata/read_contract.golden.json"

// goldenUpdate reports whether -update was given. The flag is registered
// here unless another test file of the package registered it first.
func goldenUpdate() bool {
	f := flag.Lookup("update")
	if f == nil {
		return false
	}
	g, ok := f.Value.(flag.Getter)
	if !ok {
		return false
	}
	b, _ := g.Get().(bool)
	return b
}

func init() {
	if flag.Lookup("update") == nil {
		flag.Bool("update", false, "rewrite golden files")
	}
}

// goldenRead is one entry of the golden file.
type goldenRead struct {
	Asked    string                `json:"asked"`
	Contents *mcp.ResourceContents `json:"contents"`
}

func TestReadContract_Golden(t *testing.T) {
	clock := time.Date(2026, 10, 8, 9, 14, 0, 0, time.UTC)
	now := func() time.Time { return clock }
	ctx := context.Background()
	st, err := store.Open(ctx, store.Options{DSN: filepath.Join(t.TempDir(), "unsay.db"), Clock: now, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if _, err := store.Seed(ctx, st, clock); err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewUnstartedServer(nil)
	base := "http://" + ts.Listener.Addr().String()
	// Tokens on the real clock: the SDK checks "exp" against time.Now.
	tokens := auth.Config{Secret: testSecret, PublicURL: base}
	v, err := auth.NewVerifier(tokens)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := New(ctx, Config{PublicURL: base, Clock: now, Logger: slog.New(slog.DiscardHandler)}, st, v, Extra{})
	if err != nil {
		t.Fatal(err)
	}
	srv.Mount(httpapi.New(httpapi.Config{Store: st, Verifier: v, WriteSecret: []byte("golden-write-secret-0123456789"), PublicURL: base, Clock: now,
		Subscribers: srv.Subscribers, OnPublish: srv.ObservePublish}))
	ts.Config.Handler = srv.Handler()
	ts.Start()
	t.Cleanup(func() { srv.Close(); ts.CloseClientConnections(); ts.Close() })

	tok, err := auth.Mint(tokens, "golden", []models.Scope{models.ScopeReadUser}, []string{"ray"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	b := &bearer{base: http.DefaultTransport}
	b.tok.Store(tok)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "golden", Version: "1"}, nil).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: base + "/mcp", HTTPClient: &http.Client{Transport: b}},
		&mcp.ClientSessionOptions{ProtocolVersion: models.ProtocolVersion})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })

	var got []goldenRead
	read := func(uri string) {
		t.Helper()
		res, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
		if err != nil || len(res.Contents) != 1 {
			t.Fatalf("read %s: %v %+v", uri, err, res)
		}
		got = append(got, goldenRead{Asked: uri, Contents: res.Contents[0]})
	}
	read("care://ray/weight_bearing")    // fresh, current
	read("care://ray/anticoagulant")     // past its review date
	read("care://ray/weight_bearing/v1") // superseded
	p := models.Principal{Subject: "okafor", Scopes: []models.Scope{models.ScopeWrite}, Patients: []string{"ray"}}
	if _, err := st.Publish(ctx, p, store.PublishInput{Patient: "ray", Domain: "weight_bearing", Audience: models.AudienceUser,
		Value: "Full weight-bearing as tolerated.", AuthorID: "okafor", AuthorLabel: "Sarah Okafor, physio"}); err != nil {
		t.Fatal(err)
	}
	read("care://ray/weight_bearing") // the revision, with the retraction of what this session read

	out, err := json.MarshalIndent(got, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	out = append(out, '\n')
	if goldenUpdate() {
		if err := os.MkdirAll(filepath.Dir(readContractGolden), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(readContractGolden, out, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(readContractGolden)
	if err != nil {
		t.Fatalf("%v (run go test ./bridge -run Golden -update)", err)
	}
	if !bytes.Equal(out, want) {
		t.Fatalf("resources/read no longer writes %s (the speech side reads that file); if the change is meant, run go test ./bridge -run Golden -update\ngot:\n%s", readContractGolden, out)
	}
	// Every entry is the contract models decodes.
	for _, g := range got {
		u, err := models.ParseURI(g.Asked)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := models.DecodeRead(u, g.Contents.Text, g.Contents.Meta); err != nil {
			t.Errorf("%s: %v", g.Asked, err)
		}
	}
}
