package bridge

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/unsay/unsay/models"
	"github.com/unsay/unsay/store"
	"github.com/unsay/unsay/web"
)

func uris(rs []*mcp.Resource) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.URI
	}
	return out
}

func TestList_PagesAtThreeOverURIOrderWithKeyCursor(t *testing.T) {
	h := newHarness(t)
	for _, tc := range []struct {
		name      string
		scopes    []models.Scope
		wantPages []int
		wantTotal int
	}{
		{"user scope sees 5 facts and the card", userScopes, []int{3, 3}, 6},
		{"dual scope sees 8 facts and the card", dualScopes, []int{3, 3, 3}, 9},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := h.connect(h.token("host-"+strings.Fields(tc.name)[0], tc.scopes))
			ctx := context.Background()
			var all []string
			var pages []int
			cursor := ""
			for i := 0; i < 10; i++ {
				res, err := c.cs.ListResources(ctx, &mcp.ListResourcesParams{Cursor: cursor})
				if err != nil {
					t.Fatalf("ListResources: %v", err)
				}
				pages = append(pages, len(res.Resources))
				all = append(all, uris(res.Resources)...)
				if res.NextCursor == "" {
					break
				}
				cursor = res.NextCursor
			}
			if len(all) != tc.wantTotal || len(pages) != len(tc.wantPages) {
				t.Fatalf("pages %v (%d entries: %q), want pages %v and %d entries", pages, len(all), all, tc.wantPages, tc.wantTotal)
			}
			for i := range pages {
				if pages[i] != tc.wantPages[i] {
					t.Errorf("page %d has %d entries, want %d", i, pages[i], tc.wantPages[i])
				}
			}
			for i := 1; i < len(all); i++ {
				if all[i-1] >= all[i] {
					t.Errorf("not in strict URI order: %q then %q", all[i-1], all[i])
				}
			}
			if !contains(all, EchoURI) {
				t.Errorf("the card %s is not listed: %q", EchoURI, all)
			}
			internal := 0
			for _, u := range all {
				if strings.HasPrefix(u, "care-internal://") {
					internal++
				}
			}
			wantInternal := 0
			if len(tc.scopes) == 2 {
				wantInternal = 3
			}
			if internal != wantInternal {
				t.Errorf("%d care-internal URIs listed, want %d: %q", internal, wantInternal, all)
			}
		})
	}
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

func TestList_CursorNotIssuedByServerIsInvalidParams(t *testing.T) {
	h := newHarness(t)
	c := h.connect(h.token("host", userScopes))
	ctx := context.Background()
	first, err := c.cs.ListResources(ctx, nil)
	if err != nil || first.NextCursor == "" {
		t.Fatalf("first page: %v, next %q", err, first.NextCursor)
	}
	// Positive twin: the cursor we were given resumes after the last URI.
	second, err := c.cs.ListResources(ctx, &mcp.ListResourcesParams{Cursor: first.NextCursor})
	if err != nil {
		t.Fatalf("issued cursor refused: %v", err)
	}
	if len(second.Resources) == 0 || second.Resources[0].URI <= first.Resources[len(first.Resources)-1].URI {
		t.Fatalf("issued cursor did not resume after %q: %q", first.Resources[len(first.Resources)-1].URI, uris(second.Resources))
	}
	tampered := first.NextCursor[:len(first.NextCursor)-2] + "AA"
	if tampered == first.NextCursor {
		tampered = first.NextCursor[:len(first.NextCursor)-2] + "BB"
	}
	for _, bogus := range []string{"bogus", "c1.Y2FyZTovL3JheS9leGVyY2lzZQ.AAAA", tampered, "care://ray/contact"} {
		_, err := c.cs.ListResources(ctx, &mcp.ListResourcesParams{Cursor: bogus})
		if err == nil {
			t.Errorf("cursor %q accepted", bogus)
			continue
		}
		if we := wireError(t, err); we.Code != jsonrpc.CodeInvalidParams {
			t.Errorf("cursor %q: code %d, want -32602", bogus, we.Code)
		}
	}
}

func TestRead_EveryFailureIsTheSameNotFound(t *testing.T) {
	h := newHarness(t)
	user := h.connect(h.token("host", userScopes))
	ctx := context.Background()
	for _, uri := range []string{
		"care-internal://ray/risk",      // forbidden to a user token
		"care-internal://ray/nonsense",  // absent
		"care://ray/weight_bearing/3",   // malformed: no v
		"care://ray/weight_bearing/v9",  // missing version
		"care://ray/risk",               // care:// naming an assistant record (P-1 check 2)
		"care://someone/weight_bearing", // another patient
		"care://ray/weight_bearing/",    // trailing slash
		"app://nope",                    // unknown scheme
		"",                              // nothing
	} {
		_, err := user.cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
		if err == nil {
			t.Errorf("read %q succeeded for a user token", uri)
			continue
		}
		we := wireError(t, err)
		if we.Code != CodeResourceNotFound {
			t.Errorf("read %q: code %d, want -32002", uri, we.Code)
		}
		if we.Message != "Resource not found: "+uri {
			t.Errorf("read %q: message %q", uri, we.Message)
		}
		var data map[string]any
		if err := json.Unmarshal(we.Data, &data); err != nil || len(data) != 1 || data["uri"] != uri {
			t.Errorf("read %q: data %s, want exactly {\"uri\": %q}", uri, we.Data, uri)
		}
	}
	// Positive twins: the same server reads a speakable fact for the user
	// token and the internal one for a dual-scope token.
	if _, err := user.cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "care://ray/weight_bearing"}); err != nil {
		t.Errorf("user read of care://ray/weight_bearing: %v", err)
	}
	dual := h.connect(h.token("reasoner", dualScopes))
	res, err := dual.cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "care-internal://ray/risk"})
	if err != nil {
		t.Fatalf("dual read of care-internal://ray/risk: %v", err)
	}
	if !strings.Contains(res.Contents[0].Text, "Fall risk") {
		t.Errorf("dual read text %q", res.Contents[0].Text)
	}
}

func TestRead_CarriesChainMetaAndStaleHeader(t *testing.T) {
	h := newHarness(t)
	c := h.connect(h.token("host", userScopes))
	ctx := context.Background()

	wb, err := c.cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "care://ray/weight_bearing"})
	if err != nil {
		t.Fatal(err)
	}
	rc := wb.Contents[0]
	if strings.HasPrefix(rc.Text, "[STALE") || !strings.HasPrefix(rc.Text, "Partial weight-bearing") {
		t.Errorf("fresh fact text %q", rc.Text)
	}
	want := map[string]any{MetaVersion: float64(2), MetaAudience: "user", MetaStale: false, MetaAuthor: "Mr Adeyemi, surgical team"}
	for k, v := range want {
		if rc.Meta[k] != v {
			t.Errorf("_meta[%s] = %v, want %v", k, rc.Meta[k], v)
		}
	}
	for _, k := range []string{MetaVersionHash, MetaPrevHash, MetaLastModified} {
		if s, _ := rc.Meta[k].(string); s == "" {
			t.Errorf("_meta[%s] missing", k)
		}
	}
	if _, ok := rc.Meta[MetaRetraction]; ok {
		t.Errorf("first read carries a retraction: %v", rc.Meta[MetaRetraction])
	}

	ac, err := c.cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "care://ray/anticoagulant"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(ac.Contents[0].Text, "[STALE — last changed nine days ago by Dr Mensah, GP; say this age aloud]") {
		t.Errorf("stale fact text %q", ac.Contents[0].Text)
	}
	if ac.Contents[0].Meta[MetaStale] != true {
		t.Errorf("stale fact _meta[%s] = %v", MetaStale, ac.Contents[0].Meta[MetaStale])
	}
}

func TestRead_SupersededVersionIsMarkedAndNeverRetracts(t *testing.T) {
	h := newHarness(t)
	c := h.connect(h.token("host", userScopes))
	ctx := context.Background()
	if _, err := c.cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "care://ray/weight_bearing"}); err != nil {
		t.Fatal(err)
	}
	res, err := c.cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "care://ray/weight_bearing/v1"})
	if err != nil {
		t.Fatal(err)
	}
	rc := res.Contents[0]
	if !strings.HasPrefix(rc.Text, "[SUPERSEDED") || !strings.Contains(rc.Text, "No weight through") {
		t.Errorf("superseded text %q", rc.Text)
	}
	if _, ok := rc.Meta[MetaRetraction]; ok {
		t.Errorf("superseded read carries a retraction")
	}
	// Twin: the current version by its explicit /v2 is not marked.
	cur, err := c.cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "care://ray/weight_bearing/v2"})
	if err != nil {
		t.Fatal(err)
	}
	if strings.HasPrefix(cur.Contents[0].Text, "[SUPERSEDED") {
		t.Errorf("current version marked superseded: %q", cur.Contents[0].Text)
	}
}

func TestEchoCard_IsListedAndReadsTheSameBytesAsEchoHTML(t *testing.T) {
	h := newHarness(t)
	c := h.connect(h.token("host", userScopes))
	res, err := c.cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: EchoURI})
	if err != nil {
		t.Fatal(err)
	}
	rc := res.Contents[0]
	if rc.MIMEType != EchoMIMEType {
		t.Errorf("mime %q, want %q", rc.MIMEType, EchoMIMEType)
	}
	page := h.do("GET", "/echo.html", "", nil, "")
	if page.status != 200 || string(page.body) != rc.Text || rc.Text != string(web.EchoHTML()) {
		t.Errorf("ui://unsay/echo (%d bytes) differs from GET /echo.html (%d, status %d)", len(rc.Text), len(page.body), page.status)
	}
	if strings.Contains(rc.Text, "care-internal://ray/") || strings.Contains(rc.Text, "Fall risk") {
		t.Errorf("the card carries assistant content")
	}
}

func TestSubscribe_RefusesNonCanonicalAndUnreadable(t *testing.T) {
	h := newHarness(t)
	user := h.connect(h.token("host", userScopes))
	ctx := context.Background()
	for _, tc := range []struct {
		uri  string
		code int64
	}{
		{"care://ray/weight_bearing/v2", jsonrpc.CodeInvalidParams},
		{"care://ray/weight_bearing/", jsonrpc.CodeInvalidParams},
		{"care://ray//weight_bearing", jsonrpc.CodeInvalidParams},
		{"care-internal://ray/risk/v1", jsonrpc.CodeInvalidParams},
		{"care-internal://ray/risk", CodeResourceNotFound},
		{"care-internal://ray/nonsense", CodeResourceNotFound},
		{"care://ray/nonsense", CodeResourceNotFound},
		{"app://nope", CodeResourceNotFound},
	} {
		err := user.cs.Subscribe(ctx, &mcp.SubscribeParams{URI: tc.uri})
		if err == nil {
			t.Errorf("subscribe %q accepted", tc.uri)
			continue
		}
		if we := wireError(t, err); int64(we.Code) != tc.code {
			t.Errorf("subscribe %q: code %d, want %d", tc.uri, we.Code, tc.code)
		}
	}
	if n := h.srv.Subscribers(models.NewURI(models.AudienceAssistant, "ray", "risk")); n != 0 {
		t.Errorf("refused subscription counted: %d", n)
	}
	// Positive twins.
	if err := user.cs.Subscribe(ctx, &mcp.SubscribeParams{URI: "care://ray/weight_bearing"}); err != nil {
		t.Errorf("canonical subscribe refused: %v", err)
	}
	dual := h.connect(h.token("reasoner", dualScopes))
	if err := dual.cs.Subscribe(ctx, &mcp.SubscribeParams{URI: "care-internal://ray/risk"}); err != nil {
		t.Errorf("dual subscribe to care-internal://ray/risk refused: %v", err)
	}
	if n := h.srv.Subscribers(models.NewURI(models.AudienceUser, "ray", "weight_bearing")); n != 1 {
		t.Errorf("Subscribers(weight_bearing) = %d, want 1", n)
	}
	if n := h.srv.Subscribers(models.NewURI(models.AudienceAssistant, "ray", "risk")); n != 1 {
		t.Errorf("Subscribers(risk) = %d, want 1", n)
	}
	if err := user.cs.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: "care://ray/weight_bearing"}); err != nil {
		t.Fatal(err)
	}
	if n := h.srv.Subscribers(models.NewURI(models.AudienceUser, "ray", "weight_bearing")); n != 0 {
		t.Errorf("after unsubscribe Subscribers = %d, want 0", n)
	}
}

// MetaListPatient: a list asked for one patient holds only that patient's
// facts the principal may read — not another patient's, not the card —
// still in pages of 3 over URI order with key cursors (P-11), the key sent
// with each page; a patient the token is not bound to lists nothing, and
// a value that is not a patient id is -32602. Twin: without the key the
// same principal lists both patients and the card.
func TestList_APatientFilterListsOnlyThatPatientsFactsInPagesOfThree(t *testing.T) {
	h := newHarness(t)
	writer := models.Principal{Subject: "okafor", Scopes: []models.Scope{models.ScopeWrite}, Patients: []string{"bob"}}
	if _, err := h.st.Publish(context.Background(), writer, store.PublishInput{Patient: "bob", Domain: "weight_bearing", Audience: models.AudienceUser,
		Value: "Non-weight-bearing.", AuthorID: "okafor", AuthorLabel: "Sarah Okafor, physio"}); err != nil {
		t.Fatal(err)
	}
	c := h.connect(h.tokenFor("host", userScopes, time.Hour, "ray", "bob"))
	ctx := context.Background()
	listAll := func(meta mcp.Meta) (all []string, pages []int, err error) {
		cursor := ""
		for range 10 {
			res, err := c.cs.ListResources(ctx, &mcp.ListResourcesParams{Meta: meta, Cursor: cursor})
			if err != nil {
				return all, pages, err
			}
			pages = append(pages, len(res.Resources))
			all = append(all, uris(res.Resources)...)
			if res.NextCursor == "" {
				break
			}
			cursor = res.NextCursor
		}
		return all, pages, nil
	}
	ray, pages, err := listAll(mcp.Meta{MetaListPatient: "ray"})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(pages, []int{3, 2}) || !slices.IsSorted(ray) {
		t.Errorf("ray's pages %v of %q, want [3 2] in URI order", pages, ray)
	}
	for _, u := range ray {
		if !strings.HasPrefix(u, "care://ray/") {
			t.Errorf("ray's list holds %s", u)
		}
	}
	if bob, _, err := listAll(mcp.Meta{MetaListPatient: "bob"}); err != nil || !slices.Equal(bob, []string{"care://bob/weight_bearing"}) {
		t.Errorf("bob's list %q (%v), want his one fact", bob, err)
	}
	if none, _, err := listAll(mcp.Meta{MetaListPatient: "carol"}); err != nil || len(none) != 0 {
		t.Errorf("a patient the token is not bound to lists %q (%v), want nothing", none, err)
	}
	for _, bad := range []any{7, "Ray Smith", ""} {
		if _, _, err := listAll(mcp.Meta{MetaListPatient: bad}); err == nil || wireError(t, err).Code != jsonrpc.CodeInvalidParams {
			t.Errorf("unsay/patient %#v: %v, want -32602", bad, err)
		}
	}
	all, _, err := listAll(nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != len(ray)+2 || !contains(all, "care://bob/weight_bearing") || !contains(all, EchoURI) {
		t.Errorf("twin: the unfiltered list %q, want ray's facts, bob's and the card", all)
	}
}
