package speech

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// pagedServer serves resources/list at 3 over URI order with a key cursor,
// as the bridge does (P-11): a cursor names the URI its page starts after
// and the server's key (a restart changes it: every cursor it issued
// before is -32602). It records each page asked for, and can hold the
// first page until the others are asked for.
type pagedServer struct {
	mu      sync.Mutex
	uris    []string
	key     string
	asked   []string // cursors, in the order the pages were asked for
	fail    map[string]bool
	waitFor int           // hold the first page until this many other pages are asked for…
	arrived chan struct{} // …each announced here
}

func (s *pagedServer) list(cursor string) (*mcp.ListResourcesResult, error) {
	s.mu.Lock()
	s.asked = append(s.asked, cursor)
	wait, arrived := s.waitFor, s.arrived
	s.mu.Unlock()
	if cursor == "" && wait > 0 {
		timeout := time.After(10 * time.Second)
		for range wait {
			select {
			case <-arrived:
			case <-timeout:
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the other pages were not asked for while the first was in flight"}
			}
		}
	} else if cursor != "" && arrived != nil {
		arrived <- struct{}{}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail[cursor] {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "Internal error"}
	}
	all := slices.Sorted(slices.Values(s.uris))
	start := 0
	if cursor != "" {
		key, after, ok := strings.Cut(cursor, "|")
		if !ok || key != s.key {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "Invalid params: unknown cursor"}
		}
		start, _ = slices.BinarySearchFunc(all, after, func(u, k string) int {
			if u <= k {
				return -1
			}
			return 1
		})
	}
	end := min(start+3, len(all))
	res := &mcp.ListResourcesResult{}
	for _, u := range all[start:end] {
		res.Resources = append(res.Resources, &mcp.Resource{URI: u, Name: u})
	}
	if end < len(all) {
		res.NextCursor = s.key + "|" + all[end-1]
	}
	return res, nil
}

func (s *pagedServer) set(f func(s *pagedServer)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f(s)
}

func (s *pagedServer) takeAsked() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.asked
	s.asked = nil
	return out
}

// connectPaged serves s over MCP and returns a client session on it.
func connectPaged(t *testing.T, s *pagedServer) *mcp.ClientSession {
	t.Helper()
	srv := mcp.NewServer(&mcp.Implementation{Name: "paged", Version: "1"}, nil)
	srv.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method == "resources/list" {
				return s.list(req.(*mcp.ListResourcesRequest).Params.Cursor)
			}
			return next(ctx, method, req)
		}
	})
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(hs.Close)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil).Connect(context.Background(),
		&mcp.StreamableClientTransport{Endpoint: hs.URL}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

func uriNames(rs []*mcp.Resource) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.URI
	}
	return out
}

func facts(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("care://ray/%s%02d", prefix, i)
	}
	return out
}

// TestPager_AsksForEveryHeldPageWithTheFirst proves a listing after the
// first costs one round trip: the first page is held by the server until
// the other two pages were asked for, which happens only if they are
// asked for at once; the first listing, which holds no cursors, asks page
// by page (its twin: the server holds nothing then).
func TestPager_AsksForEveryHeldPageWithTheFirst(t *testing.T) {
	s := &pagedServer{uris: facts("f", 8), key: "k1"}
	cs := connectPaged(t, s)
	var p pager
	ctx := context.Background()
	got, err := p.list(ctx, cs, "")
	if err != nil {
		t.Fatal(err)
	}
	if want := facts("f", 8); !slices.Equal(uriNames(got), want) {
		t.Fatalf("first listing %v, want %v", uriNames(got), want)
	}
	if asked := s.takeAsked(); !slices.Equal(asked, []string{"", "k1|care://ray/f02", "k1|care://ray/f05"}) {
		t.Fatalf("first listing asked for %q, want the three pages in sequence", asked)
	}
	s.set(func(s *pagedServer) { s.waitFor, s.arrived = 2, make(chan struct{}, 2) })
	got, err = p.list(ctx, cs, "")
	if err != nil {
		t.Fatalf("second listing: %v (the first page was answered only once the others were asked for)", err)
	}
	if want := facts("f", 8); !slices.Equal(uriNames(got), want) {
		t.Fatalf("second listing %v, want %v", uriNames(got), want)
	}
	if asked := s.takeAsked(); len(asked) != 3 {
		t.Fatalf("second listing asked for %q, want three pages", asked)
	}
}

// TestPager_ListsExactlyWhatIsServedWhenTheListChanges: between two
// listings the list changes so that the cursors held no longer chain (or
// the server restarted with a new cursor key); the second listing is still
// exactly the server's whole list in URI order, each page asked for once
// more at most, and the listing after it asks for pages at once again.
func TestPager_ListsExactlyWhatIsServedWhenTheListChanges(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(s *pagedServer)
	}{
		{"unchanged", func(*pagedServer) {}},
		{"a fact added on the first page", func(s *pagedServer) { s.uris = append(s.uris, "care://ray/a") }},
		{"a fact added on the last page", func(s *pagedServer) { s.uris = append(s.uris, "care://ray/z") }},
		{"a fact added that makes a page more", func(s *pagedServer) { s.uris = append(s.uris, "care://ray/z1", "care://ray/z2") }},
		{"a fact no longer listed", func(s *pagedServer) {
			s.uris = slices.DeleteFunc(s.uris, func(u string) bool { return u == "care://ray/f02" })
		}},
		{"a page fewer", func(s *pagedServer) { s.uris = s.uris[:5] }},
		{"one page only", func(s *pagedServer) { s.uris = s.uris[:2] }},
		{"the server restarted (new cursor key)", func(s *pagedServer) { s.key = "k2" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &pagedServer{uris: facts("f", 8), key: "k1"}
			cs := connectPaged(t, s)
			var p pager
			ctx := context.Background()
			if _, err := p.list(ctx, cs, ""); err != nil {
				t.Fatal(err)
			}
			s.set(tc.change)
			var want []string
			s.set(func(s *pagedServer) { want = slices.Sorted(slices.Values(s.uris)) })
			for i := range 2 {
				s.takeAsked()
				got, err := p.list(ctx, cs, "")
				if err != nil {
					t.Fatalf("listing %d: %v", i+2, err)
				}
				if !slices.Equal(uriNames(got), want) {
					t.Fatalf("listing %d: %v, want %v", i+2, uriNames(got), want)
				}
				pages := (len(want) + 2) / 3
				if asked := s.takeAsked(); len(asked) > 2*pages+1 || i == 1 && len(asked) != pages {
					t.Fatalf("listing %d asked for %q (%d pages served)", i+2, asked, pages)
				}
			}
		})
	}
}

// TestPager_PageFailureFailsTheListing: a page asked for ahead that the
// listing uses fails, so the listing fails, as it would page by page; a
// page asked for ahead that the listing does not use (the list changed)
// fails without failing it.
func TestPager_PageFailureFailsTheListing(t *testing.T) {
	for _, tc := range []struct {
		name    string
		shrink  bool
		wantErr bool
	}{
		{"the failed page is used", false, true},
		{"the failed page is not used", true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &pagedServer{uris: facts("f", 8), key: "k1"}
			cs := connectPaged(t, s)
			var p pager
			ctx := context.Background()
			if _, err := p.list(ctx, cs, ""); err != nil {
				t.Fatal(err)
			}
			s.set(func(s *pagedServer) {
				s.fail = map[string]bool{"k1|care://ray/f05": true}
				if tc.shrink {
					s.uris = s.uris[:4] // pages end at f02 and f03 now: f05's page is not part of the list
				}
			})
			got, err := p.list(ctx, cs, "")
			if (err != nil) != tc.wantErr {
				t.Fatalf("list: %v, %v; want an error: %v", uriNames(got), err, tc.wantErr)
			}
			if !tc.wantErr && !slices.Equal(uriNames(got), facts("f", 4)) {
				t.Fatalf("list %v, want %v", uriNames(got), facts("f", 4))
			}
		})
	}
}
