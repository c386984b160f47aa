package bridge

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/unsay/unsay/models"
)

// fakeDelivery is an in-memory heard ledger.
type fakeDelivery struct {
	mu    sync.Mutex
	recs  map[string]models.DeliveryRecord // fact URI → record
	log   []string                         // fact URIs changed; id = index + 1
	fn    func()
	asked []string // fact URIs Delivery was asked for
}

func newFakeDelivery() *fakeDelivery { return &fakeDelivery{recs: map[string]models.DeliveryRecord{}} }

func (f *fakeDelivery) Delivery(_ context.Context, u models.URI) (models.DeliveryRecord, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.asked = append(f.asked, u.String())
	return f.recs[u.String()], nil
}

func (f *fakeDelivery) DeliveryChanges(_ context.Context, cursor int64) ([]models.URI, int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []models.URI
	for i := int(cursor); i < len(f.log); i++ {
		u, _ := models.ParseURI(f.log[i])
		out = append(out, u)
	}
	return out, int64(len(f.log)), nil
}

func (f *fakeDelivery) DeliveryCursor(context.Context) (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return int64(len(f.log)), nil
}

func (f *fakeDelivery) OnDelivery(fn func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fn = fn
}

// set replaces uri's record and logs the change; signal says whether this
// process's hook is told (false: a change another instance committed).
func (f *fakeDelivery) set(uri string, rec models.DeliveryRecord, signal bool) {
	f.mu.Lock()
	f.recs[uri] = rec
	f.log = append(f.log, uri)
	fn := f.fn
	f.mu.Unlock()
	if signal && fn != nil {
		fn()
	}
}

func (f *fakeDelivery) askedFor(uri string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, a := range f.asked {
		if a == uri {
			return true
		}
	}
	return false
}

const wbDelivery = "care-delivery://ray/weight_bearing"

func readTimeline(t *testing.T, c *client, uri string) (DeliveryTimeline, string, error) {
	t.Helper()
	res, err := c.cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: uri})
	if err != nil {
		return DeliveryTimeline{}, "", err
	}
	if len(res.Contents) != 1 || res.Contents[0].URI != uri || res.Contents[0].MIMEType != DeliveryMIMEType {
		t.Fatalf("read %s: contents %+v", uri, res.Contents)
	}
	var tl DeliveryTimeline
	if err := json.Unmarshal([]byte(res.Contents[0].Text), &tl); err != nil {
		t.Fatalf("read %s: %v: %s", uri, err, res.Contents[0].Text)
	}
	return tl, res.Contents[0].Text, nil
}

func wantNotFound(t *testing.T, what, uri string, err error) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: %s was served", what, uri)
	}
	we := wireError(t, err)
	if we.Code != CodeResourceNotFound || we.Message != "Resource not found: "+uri {
		t.Fatalf("%s: %s: error %d %q, want the one not-found answer (P-2)", what, uri, we.Code, we.Message)
	}
}

// Authorization of the delivery-state resource: a write-scoped token bound
// to the patient reads it; a reader token, another patient's token and an
// assistant-only domain get the one not-found answer — each refusal beside
// its positive twin.
func TestDelivery_ReadNeedsAWriteTokenBoundToThePatient(t *testing.T) {
	fd := newFakeDelivery()
	fd.recs["care://ray/weight_bearing"] = models.DeliveryRecord{Heard: 1, Followed: true, Pending: &models.PendingDelivery{From: 1, To: 2},
		Events: []models.DeliveryEvent{{Kind: models.DeliveryHeard, Version: 1, At: time.Now().Add(-time.Hour), Device: models.DeviceScreen, Via: models.ViaAsked}}}
	h := newHarnessExtra(t, Extra{Delivery: fd})
	writer := h.connect(h.token("okafor", []models.Scope{models.ScopeWrite, models.ScopeReadUser}))

	t.Run("a clinician's write token bound to ray reads ray's timeline", func(t *testing.T) {
		tl, _, err := readTimeline(t, writer, wbDelivery)
		if err != nil {
			t.Fatal(err)
		}
		if tl.Patient != "ray" || tl.Domain != "weight_bearing" || tl.Latest != 2 || len(tl.Versions) != 2 || tl.Heard != 1 || !tl.Followed {
			t.Fatalf("timeline = %+v", tl)
		}
		v1, v2 := tl.Versions[0], tl.Versions[1]
		if v1.State != models.StateHeard || v1.Device != models.DeviceScreen || v1.At == "" || v1.AuthorID == "" || v1.AuthorLabel == "" || v1.WrittenAt == "" {
			t.Errorf("v1 = %+v", v1)
		}
		if v2.State != models.StatePending || v2.Withdraws != 1 {
			t.Errorf("v2 = %+v, want pending, withdrawing v1", v2)
		}
	})
	t.Run("it carries delivery state, times and authors, never the words", func(t *testing.T) {
		_, text, err := readTimeline(t, writer, wbDelivery)
		if err != nil {
			t.Fatal(err)
		}
		history, err := h.st.History(context.Background(), models.System("test", models.ScopeReadUser, models.ScopeReadAssistant), "care://ray/weight_bearing")
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range history {
			if strings.Contains(text, v.Value) {
				t.Errorf("the timeline carries version %d's words: %s", v.N, text)
			}
		}
		if strings.Contains(text, "care://") || strings.Contains(text, "care-internal://") {
			t.Errorf("the timeline names a care URI (the replay filter would withhold it): %s", text)
		}
	})
	t.Run("a reader token without care.write is refused", func(t *testing.T) {
		for _, scopes := range [][]models.Scope{userScopes, dualScopes} {
			c := h.connect(h.token("carer", scopes))
			_, _, err := readTimeline(t, c, wbDelivery)
			wantNotFound(t, "reader "+(models.Principal{Scopes: scopes}).ScopeString(), wbDelivery, err)
			// Positive twin: the same token reads the fact itself.
			if _, err := c.cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: "care://ray/weight_bearing"}); err != nil {
				t.Fatalf("the reader cannot read the fact: %v", err)
			}
		}
	})
	t.Run("another patient's write token: not found", func(t *testing.T) {
		c := h.connect(h.tokenFor("okafor", []models.Scope{models.ScopeWrite, models.ScopeReadUser}, time.Hour, "bob"))
		_, _, err := readTimeline(t, c, wbDelivery)
		wantNotFound(t, "bob's token", wbDelivery, err)
		_, _, err = readTimeline(t, c, "care-delivery://bob/weight_bearing")
		wantNotFound(t, "bob's token, bob's absent fact", "care-delivery://bob/weight_bearing", err)
	})
	t.Run("an assistant-only fact never appears, whatever the scopes", func(t *testing.T) {
		all := h.connect(h.token("okafor", []models.Scope{models.ScopeWrite, models.ScopeWriteAssistant, models.ScopeReadUser, models.ScopeReadAssistant}))
		for _, uri := range []string{"care-delivery://ray/risk", "care-delivery://ray/gait_note"} {
			_, _, err := readTimeline(t, all, uri)
			wantNotFound(t, "assistant-only", uri, err)
			if fd.askedFor("care://" + strings.TrimPrefix(uri, "care-delivery://")) {
				t.Errorf("the ledger was asked about %s", uri)
			}
		}
		// Positive twin: the same token reads a speakable fact's timeline.
		if _, _, err := readTimeline(t, all, wbDelivery); err != nil {
			t.Fatalf("the full-scope token cannot read the speakable timeline: %v", err)
		}
	})
	t.Run("absent and malformed URIs: the same not found", func(t *testing.T) {
		for _, uri := range []string{"care-delivery://ray/nonsense", "care-delivery://ray/weight_bearing/v2",
			"care-delivery://Ray/weight_bearing", "care-delivery://ray/", "care-delivery://ray//weight_bearing", "care-delivery:ray/weight_bearing"} {
			_, _, err := readTimeline(t, writer, uri)
			wantNotFound(t, "malformed", uri, err)
		}
	})
}

// Without a heard ledger wired in, every delivery URI is not found.
func TestDelivery_NotFoundWithoutALedger(t *testing.T) {
	h := newHarness(t)
	c := h.connect(h.token("okafor", []models.Scope{models.ScopeWrite, models.ScopeReadUser}))
	_, _, err := readTimeline(t, c, wbDelivery)
	wantNotFound(t, "no ledger", wbDelivery, err)
}

func TestDelivery_SubscribeIsAuthorizedLikeRead(t *testing.T) {
	h := newHarnessExtra(t, Extra{Delivery: newFakeDelivery()})
	reader := h.connect(h.token("carer", userScopes))
	err := reader.cs.Subscribe(context.Background(), &mcp.SubscribeParams{URI: wbDelivery})
	wantNotFound(t, "reader subscribe", wbDelivery, err)
	writer := h.connect(h.token("okafor", []models.Scope{models.ScopeWrite, models.ScopeReadUser}))
	if err := writer.cs.Subscribe(context.Background(), &mcp.SubscribeParams{URI: wbDelivery}); err != nil {
		t.Fatalf("writer subscribe: %v", err)
	}
	err = writer.cs.Subscribe(context.Background(), &mcp.SubscribeParams{URI: "care-delivery://ray/risk"})
	wantNotFound(t, "assistant-only subscribe", "care-delivery://ray/risk", err)
}

// Live: a ledger change sends updated for the fact's delivery URI to the
// subscribed writer — at once for this process, by polling for another
// instance's — and a new version does too; nobody else receives it.
func TestDelivery_UpdatedReachesOnlySubscribedWriters(t *testing.T) {
	fd := newFakeDelivery()
	h := newHarnessExtra(t, Extra{Delivery: fd})
	clinician := h.token("okafor", []models.Scope{models.ScopeWrite, models.ScopeReadUser})
	writer := h.connect(clinician)
	if err := writer.cs.Subscribe(context.Background(), &mcp.SubscribeParams{URI: wbDelivery}); err != nil {
		t.Fatal(err)
	}
	idle := h.connect(clinician) // bound to ray, not subscribed
	reader := h.connect(h.token("carer", userScopes))
	if err := reader.cs.Subscribe(context.Background(), &mcp.SubscribeParams{URI: "care://ray/weight_bearing"}); err != nil {
		t.Fatal(err)
	}
	want := "updated " + wbDelivery

	fd.set("care://ray/weight_bearing", models.DeliveryRecord{Heard: 2, Followed: true}, true)
	writer.waitFor(t, func(e string) bool { return e == want })

	fd.set("care://ray/weight_bearing", models.DeliveryRecord{Heard: 2, Followed: true}, false) // another instance
	writer.waitFor(t, func(e string) bool { return e == want })

	h.publish("weight_bearing", models.AudienceUser, "Walk with one crutch.")
	writer.waitFor(t, func(e string) bool { return e == want })
	reader.waitFor(t, func(e string) bool { return e == "updated care://ray/weight_bearing" })

	for _, c := range []*client{idle, reader} {
		for _, e := range c.drain(300 * time.Millisecond) {
			if strings.Contains(e, DeliveryScheme) {
				t.Errorf("an unsubscribed or reader session got %q", e)
			}
		}
	}
	tl, _, err := readTimeline(t, writer, wbDelivery)
	if err != nil || tl.Latest != 3 || tl.Versions[2].State != models.StateReading {
		t.Fatalf("after the new version: %+v, %v", tl, err)
	}
}

// TestDelivery_On2026ReadAndListenFollowTheSameRule: over 2026-07-28 a
// write token bound to ray reads the timeline (a complete, private result)
// and its listen acknowledges the delivery URI and then carries its
// updated; a reader token gets the era's one not-found answer (-32602) on
// read and the URI is simply missing from its acknowledgement.
func TestDelivery_On2026ReadAndListenFollowTheSameRule(t *testing.T) {
	fd := newFakeDelivery()
	fd.recs["care://ray/weight_bearing"] = models.DeliveryRecord{Heard: 1, Followed: true, Pending: &models.PendingDelivery{From: 1, To: 2}}
	h := newHarnessExtra(t, Extra{Delivery: fd})
	writer := h.token("okafor", []models.Scope{models.ScopeWrite, models.ScopeReadUser})
	reader := h.token("carer", userScopes)
	params := fmt.Sprintf(`{"uri":%q}`, wbDelivery)

	st, f := h.modernCall(writer, 1, "resources/read", wbDelivery, params)
	res, _ := f["result"].(map[string]any)
	if st != http.StatusOK || res == nil || res["resultType"] != "complete" || res["cacheScope"] != "private" {
		t.Fatalf("writer read over 2026-07-28: HTTP %d %v; want a complete, private result", st, f)
	}
	st, f = h.modernCall(reader, 2, "resources/read", wbDelivery, params)
	if code, msg, _ := errorOf(f); st != http.StatusBadRequest || code != CodeResourceNotFoundModern || msg != "Resource not found: "+wbDelivery {
		t.Errorf("reader read over 2026-07-28: HTTP %d, %d %q; want 400, -32602 not found", st, code, msg)
	}

	asked := `{"resourceSubscriptions":["` + wbDelivery + `","care://ray/weight_bearing"]}`
	rl := h.openListen(reader, 3, asked)
	if got, _ := rl.next(t); strings.Join(ackedURIs(t, got), " ") != "care://ray/weight_bearing" {
		t.Errorf("reader's listen acknowledged %q, want the fact only", ackedURIs(t, got))
	}
	wl := h.openListen(writer, 4, asked)
	if got, _ := wl.next(t); strings.Join(ackedURIs(t, got), " ") != wbDelivery+" care://ray/weight_bearing" {
		t.Fatalf("writer's listen acknowledged %q, want the delivery URI and the fact", ackedURIs(t, got))
	}
	fd.set("care://ray/weight_bearing", models.DeliveryRecord{Heard: 2, Followed: true}, true)
	for {
		f, ok := wl.next(t)
		if !ok {
			t.Fatal("the writer's listen ended before the delivery update")
		}
		if p, _ := f["params"].(map[string]any); f["method"] == methodUpdated && p["uri"] == wbDelivery {
			break
		}
	}
	for _, f := range rl.quiet(300 * time.Millisecond) {
		if p, _ := f["params"].(map[string]any); p["uri"] == wbDelivery {
			t.Errorf("the reader's listen carried the delivery update: %v", f)
		}
	}
}
