package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/unsay/unsay/bridge/auth"
	"github.com/unsay/unsay/bridge/caretopic"
	"github.com/unsay/unsay/models"
	"github.com/unsay/unsay/store"
	"github.com/unsay/unsay/store/envelope"
)

const (
	publicURL   = "http://unsay.test"
	tokenSecret = "token-secret-for-tests-0123456789abcdef"
	writeSecret = "write-secret-for-tests"
)

// everything reads every fact of every patient (test-side inspection only).
var everything = models.System("test", models.ScopeReadUser, models.ScopeReadAssistant)

type fixture struct {
	t      testing.TB
	st     *store.Store
	dsn    string // the store's SQLite file
	srv    *httptest.Server
	router http.Handler
	api    *API
	now    time.Time  // the API's clock at the start (signature window, link codes)
	clock  *testClock // the API's clock; Advance moves it
	logs   *syncBuffer
	tokCfg auth.Config
}

// testClock is a settable clock, safe for concurrent use.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *testClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *testClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// syncBuffer is a bytes.Buffer safe for concurrent writes (the API's log).
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

func newFixture(t testing.TB) *fixture { return newSealedFixture(t, nil) }

// newSealedFixture seals values at rest with sealer (nil: plaintext).
func newSealedFixture(t testing.TB, sealer store.Sealer) *fixture {
	t.Helper()
	return newFixtureWith(t, store.Options{Sealer: sealer})
}

// newFixtureWith opens the store with opts (its DSN and AuditKey set here).
func newFixtureWith(t testing.TB, opts store.Options) *fixture {
	t.Helper()
	ctx := t.Context()
	now := time.Now().UTC().Truncate(time.Second)
	dsn := filepath.Join(t.TempDir(), "unsay.db")
	opts.DSN, opts.AuditKey = dsn, []byte("audit-key-for-tests")
	st, err := store.Open(ctx, opts)
	if err != nil {
		t.Fatalf("store.Open: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	if _, err := store.Seed(ctx, st, now); err != nil {
		t.Fatalf("store.Seed: %v", err)
	}
	tokCfg := auth.Config{Secret: []byte(tokenSecret), PublicURL: publicURL}
	v, err := auth.NewVerifier(tokCfg)
	if err != nil {
		t.Fatal(err)
	}
	clock := &testClock{now: now}
	logs := &syncBuffer{}
	api := New(Config{
		Store:                st,
		Verifier:             v,
		WriteSecret:          []byte(writeSecret),
		PublicURL:            publicURL,
		AuthorizationServers: []string{"https://as.example"},
		Clock:                clock.Now,
		Logger:               slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Subscribers: func(u models.URI) int {
			if u.String() == "care://ray/weight_bearing" {
				return 2
			}
			return 0
		},
	})
	r := chi.NewRouter()
	api.Routes(r)
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	return &fixture{t: t, st: st, dsn: dsn, srv: srv, router: r, api: api, now: now, clock: clock, logs: logs, tokCfg: tokCfg}
}

func (f *fixture) token(sub string, patients []string, scopes ...models.Scope) string {
	f.t.Helper()
	tok, err := auth.Mint(f.tokCfg, sub, scopes, patients, time.Hour)
	if err != nil {
		f.t.Fatal(err)
	}
	return tok
}

type answer struct {
	status int
	header http.Header
	body   []byte
}

func (a answer) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(a.body, &m); err != nil {
		t.Fatalf("body is not a JSON object: %v: %s", err, a.body)
	}
	return m
}

func (f *fixture) do(method, path string, body []byte, headers map[string]string) answer {
	f.t.Helper()
	req, err := http.NewRequest(method, f.srv.URL+path, bytes.NewReader(body))
	if err != nil {
		f.t.Fatal(err)
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := f.srv.Client().Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return answer{status: resp.StatusCode, header: resp.Header, body: b}
}

// signed posts body to /write signed at ts with the server's write secret.
func (f *fixture) signed(body []byte, ts int64) answer {
	return f.do(http.MethodPost, "/write", body, map[string]string{
		HeaderTimestamp: strconv.FormatInt(ts, 10),
		HeaderSignature: SignWrite([]byte(writeSecret), ts, body),
		"Content-Type":  "application/json",
	})
}

func (f *fixture) bearer(body []byte, token string) answer {
	return f.do(http.MethodPost, "/write", body, map[string]string{"Authorization": "Bearer " + token})
}

func (f *fixture) versions(uri string) int {
	f.t.Helper()
	h, err := f.st.History(context.Background(), everything, uri)
	if err != nil {
		return 0
	}
	return len(h)
}

// auditMark is where the audit log stood: its last row and that row's count.
type auditMark struct{ seq, count int64 }

func (f *fixture) auditSeq() auditMark {
	f.t.Helper()
	rows, err := f.st.AuditRows(context.Background(), 0, 0)
	if err != nil {
		f.t.Fatal(err)
	}
	if len(rows) == 0 {
		return auditMark{}
	}
	last := rows[len(rows)-1]
	return auditMark{seq: last.Seq, count: last.Count}
}

// auditAfter returns the audit rows appended after seq.
func (f *fixture) auditAfter(seq int64) []store.AuditEntry {
	f.t.Helper()
	rows, err := f.st.AuditRows(context.Background(), seq, 0)
	if err != nil {
		f.t.Fatal(err)
	}
	return rows
}

// oneAuditRow asserts exactly one attempt was audited since m — one new
// row, or the last row's count up by one (a repeat collapsed into it) —
// and returns the row that records it.
func (f *fixture) oneAuditRow(m auditMark) store.AuditEntry {
	f.t.Helper()
	rows := f.auditAfter(m.seq)
	if len(rows) == 1 && rows[0].Count == 1 {
		return rows[0]
	}
	if len(rows) == 0 && m.seq > 0 {
		tail := f.auditAfter(m.seq - 1)
		if len(tail) == 1 && tail[0].Count == m.count+1 {
			return tail[0]
		}
	}
	f.t.Fatalf("want exactly one new audited attempt, got rows %+v after seq %d (count %d)", rows, m.seq, m.count)
	return store.AuditEntry{}
}

// seededValues are the values of every seeded fact, both audiences.
func (f *fixture) seededValues() []string {
	f.t.Helper()
	facts, err := f.st.List(context.Background(), everything)
	if err != nil {
		f.t.Fatal(err)
	}
	var out []string
	for _, fact := range facts {
		h, err := f.st.History(context.Background(), everything, fact.Current.FactURI().String())
		if err != nil {
			f.t.Fatal(err)
		}
		for _, v := range h {
			out = append(out, v.Value)
		}
	}
	if len(out) < 8 {
		f.t.Fatalf("seed has %d values, want at least 8", len(out))
	}
	return out
}

func writeBody(mut func(map[string]any)) []byte {
	m := map[string]any{
		"patient":     "ray",
		"domain":      "weight_bearing",
		"audience":    "user",
		"value":       "Full weight-bearing as tolerated.",
		"authorId":    "okafor",
		"authorLabel": "Sarah Okafor, physio",
	}
	if mut != nil {
		mut(m)
	}
	b, _ := json.Marshal(m)
	return b
}

func TestWrite_SignedWriteCommitsTheNextVersionAndAuditsItAsHMAC(t *testing.T) {
	f := newFixture(t)
	seq := f.auditSeq()
	a := f.signed(writeBody(nil), f.now.Unix())
	if a.status != http.StatusCreated {
		t.Fatalf("status = %d, body %s", a.status, a.body)
	}
	var resp WriteResponse
	if err := json.Unmarshal(a.body, &resp); err != nil {
		t.Fatal(err)
	}
	h, err := f.st.History(t.Context(), everything, "care://ray/weight_bearing")
	if err != nil {
		t.Fatal(err)
	}
	last := h[len(h)-1]
	if resp.URI != "care://ray/weight_bearing/v3" || resp.Version != 3 || resp.Hash != last.Hash || resp.Subscribers != 2 || resp.Replayed {
		t.Fatalf("answer = %+v, want v3 with hash %s and 2 subscribers", resp, last.Hash)
	}
	if last.Value != "Full weight-bearing as tolerated." || last.AuthorID != "okafor" {
		t.Fatalf("stored %+v", last)
	}
	row := f.oneAuditRow(seq)
	if row.Actor != ActorHMAC || row.Via != "hmac" || row.Reason != store.ReasonOK || row.Outcome != "accepted" ||
		row.Author != "okafor" || row.URI != "care://ray/weight_bearing/v3" {
		t.Fatalf("audit row = %+v", row)
	}
}

// A write that creates a patient's first fact says so (newPatient): a
// typo in the patient id would otherwise send a physio's change to nobody
// while the answer read like any new topic. The twins: a new topic of a
// patient on record, and a revision, do not say it.
//
// A write that creates a new topic of a patient on record says so
// (newTopic) and names the patient's other topics: a typo in the domain
// ("walkng") makes a new instruction and leaves the one meant current.
// The twins: a patient's first fact, and a revision, do not say it.
func TestWrite_AFirstVersionSaysNewPatientOrNewTopicNamingTheOthers(t *testing.T) {
	f := newFixture(t)
	for _, tc := range []struct {
		name      string
		patient   string
		domain    string
		want      bool
		newTopic  bool
		topicsHas string
	}{
		{"a typo: no care notes for rayy", "rayy", "weight_bearing", true, false, ""},
		{"the same patient's second topic", "rayy", "exercise", false, true, "weight_bearing"},
		{"a new topic of ray, on record", "ray", "walkng", false, true, "weight_bearing"},
		{"a revision of ray's", "ray", "weight_bearing", false, false, ""},
		{"a revision of the new topic", "ray", "walkng", false, false, ""},
	} {
		a := f.signed(writeBody(func(m map[string]any) {
			m["patient"], m["domain"], m["value"] = tc.patient, tc.domain, "Words for "+tc.name+"."
		}), f.now.Unix())
		if a.status != http.StatusCreated {
			t.Fatalf("%s: status %d, body %s", tc.name, a.status, a.body)
		}
		var resp WriteResponse
		if err := json.Unmarshal(a.body, &resp); err != nil {
			t.Fatal(err)
		}
		if resp.NewPatient != tc.want {
			t.Errorf("%s: newPatient = %v, want %v (%s)", tc.name, resp.NewPatient, tc.want, a.body)
		}
		if resp.NewTopic != tc.newTopic {
			t.Errorf("%s: newTopic = %v, want %v (%s)", tc.name, resp.NewTopic, tc.newTopic, a.body)
		}
		if tc.topicsHas != "" && !slices.Contains(resp.Topics, tc.topicsHas) {
			t.Errorf("%s: topics = %v, want them to name %s", tc.name, resp.Topics, tc.topicsHas)
		}
		if slices.Contains(resp.Topics, tc.domain) {
			t.Errorf("%s: topics = %v name the written domain itself", tc.name, resp.Topics)
		}
		if !tc.newTopic && len(resp.Topics) != 0 {
			t.Errorf("%s: topics = %v, want none", tc.name, resp.Topics)
		}
	}
}

// U12: a write that says existingTopic is refused 409 (field domain,
// naming the patient's topics, nothing written, an audit row) when the
// patient has notes on record and none of its domain — a mistyped
// "walkng" is not saved and spoken to Ray beside the instruction it meant
// to revise. Twins: the same write to a topic on record, to a new
// patient, and without existingTopic are saved.
func TestWrite_ExistingTopicRefusesATopicThePatientHasNoNotesOf(t *testing.T) {
	f := newFixture(t)
	for _, tc := range []struct {
		name            string
		patient, domain string
		existing        bool
		status          int
	}{
		{"a mistyped topic of ray", "ray", "walkng", true, http.StatusConflict},
		{"a topic on record", "ray", "weight_bearing", true, http.StatusCreated},
		// Now known to the store without a read (store.KnownFact): the
		// revision is answered without the Topics query, the typo still not.
		{"a topic this process revised", "ray", "weight_bearing", true, http.StatusCreated},
		{"a mistyped topic of ray, once ray's walking was revised", "ray", "walkng", true, http.StatusConflict},
		{"a new patient's first topic", "newpatient", "walkng", true, http.StatusCreated},
		{"a new topic of ray, meant (no existingTopic)", "ray", "wound_care", false, http.StatusCreated},
	} {
		seq := f.auditSeq()
		a := f.signed(writeBody(func(m map[string]any) {
			m["patient"], m["domain"], m["value"] = tc.patient, tc.domain, "Words for "+tc.name+"."
			if tc.existing {
				m["existingTopic"] = true
			}
		}), f.now.Unix())
		if a.status != tc.status {
			t.Fatalf("%s: status %d, want %d; body %s", tc.name, a.status, tc.status, a.body)
		}
		if tc.status != http.StatusConflict {
			continue
		}
		var e struct{ Error, Field string }
		if err := json.Unmarshal(a.body, &e); err != nil || e.Field != "domain" || !strings.Contains(e.Error, "weight_bearing") || !strings.Contains(e.Error, "nothing was saved") {
			t.Errorf("%s: refusal %s, want field domain naming ray's topics", tc.name, a.body)
		}
		topics, err := f.st.Topics(context.Background(), tc.patient)
		if err != nil {
			t.Fatal(err)
		}
		if slices.ContainsFunc(topics, func(tp store.Topic) bool { return tp.Domain == tc.domain }) {
			t.Errorf("%s: the refused topic was written", tc.name)
		}
		if row := f.oneAuditRow(seq); row.Outcome == "accepted" || row.Reason != store.ReasonInvalid {
			t.Errorf("%s: audit row %+v, want a refusal", tc.name, row)
		}
	}
}

// V2's race: writes that create topics of one spoken name ("rash care",
// "rash-care", "rash.care") at the same moment cannot all pass the check —
// each was checked against topics on record before any had committed —
// so exactly one is saved and the others are refused 409; in ten rounds.
// Twin: writes creating topics of distinct names at once are all saved.
func TestWrite_NewTopicsOfOneSpokenNameWrittenAtOnceAreSavedOnce(t *testing.T) {
	f := newFixture(t)
	for round := range 10 {
		base := fmt.Sprintf("rash%d", round)
		for _, tc := range []struct {
			domains []string
			saved   int
		}{
			{[]string{base + "_care", base + "-care", base + ".care"}, 1},
			{[]string{base + "_a", base + "_b", base + "_c"}, 3},
		} {
			status := make([]int, len(tc.domains))
			var wg sync.WaitGroup
			for i, d := range tc.domains {
				wg.Add(1)
				go func() {
					defer wg.Done()
					status[i] = f.signed(writeBody(func(m map[string]any) {
						m["domain"], m["value"] = d, "Words for "+d+"."
					}), f.now.Unix()).status
				}()
			}
			wg.Wait()
			saved := 0
			for _, st := range status {
				switch st {
				case http.StatusCreated:
					saved++
				case http.StatusConflict:
				default:
					t.Fatalf("%v: status %v", tc.domains, status)
				}
			}
			if saved != tc.saved {
				t.Errorf("%v written at once: %d saved (%v), want %d", tc.domains, saved, status, tc.saved)
			}
		}
	}
}

// V6a: a write that says existingPatient is refused 409 (field patient,
// nothing written, an audit row) when the patient has no facts on record —
// a mistyped "rayy" would otherwise be saved for nobody while Ray kept the
// old words. Twins: the same write for ray (on record) is saved, and so is
// one for the new patient without existingPatient.
func TestWrite_ExistingPatientRefusesAPatientWithNoNotes(t *testing.T) {
	f := newFixture(t)
	for _, tc := range []struct {
		name     string
		patient  string
		existing bool
		status   int
	}{
		{"a mistyped patient", "rayy", true, http.StatusConflict},
		{"a patient on record", "ray", true, http.StatusCreated},
		{"a new patient, meant (no existingPatient)", "rayy", false, http.StatusCreated},
	} {
		seq := f.auditSeq()
		a := f.signed(writeBody(func(m map[string]any) {
			m["patient"], m["value"] = tc.patient, "Words for "+tc.name+"."
			if tc.existing {
				m["existingPatient"] = true
			}
		}), f.now.Unix())
		if a.status != tc.status {
			t.Fatalf("%s: status %d, want %d; body %s", tc.name, a.status, tc.status, a.body)
		}
		if tc.status != http.StatusConflict {
			continue
		}
		var e struct{ Error, Field string }
		if err := json.Unmarshal(a.body, &e); err != nil || e.Field != "patient" || !strings.Contains(e.Error, "no care notes") || !strings.Contains(e.Error, "nothing was saved") {
			t.Errorf("%s: refusal %s, want field patient saying he has no notes", tc.name, a.body)
		}
		if topics, err := f.st.Topics(context.Background(), tc.patient); err != nil || len(topics) != 0 {
			t.Errorf("%s: topics %v (%v) after the refusal, want none", tc.name, topics, err)
		}
		if row := f.oneAuditRow(seq); row.Outcome == "accepted" || row.Reason != store.ReasonInvalid {
			t.Errorf("%s: audit row %+v, want a refusal", tc.name, row)
		}
	}
}

// V2: a write that would create a topic whose spoken name is another
// topic's — one of the patient's ("wound-care" beside "wound_care") or a
// CareTopic value's name or synonym ("blood_thinner", "walking",
// "crutches"), on record or not — is refused 409 (field domain, naming the
// topic it collides with, nothing written, an audit row), with or without
// existingTopic: two topics Ray calls by one name cannot both be asked for
// and would both be said as current. Twins: a new topic with a name of its
// own, a revision of a CareTopic value, and a new patient's own topic are
// saved, and so is a speakable topic whose name is an assistant-only
// topic's: Ray never asks for an assistant-only topic, and refusing it
// told a care.write-only writer the hidden topic's name (W3, P-1).
func TestWrite_ANewTopicWhoseSpokenNameIsAnotherTopicsIsRefused(t *testing.T) {
	f := newFixture(t)
	careWrite := f.token("okafor", []string{"ray"}, models.ScopeWrite)
	for _, tc := range []struct {
		name            string
		patient, domain string
		existing        bool
		token           string // empty: signed
		status          int
		names           []string // in the refusal
		hides           string   // not in the refusal
	}{
		{"a new topic of its own", "ray", "wound_care", false, "", http.StatusCreated, nil, ""},
		{"another new topic of its own", "ray", "blood_test", false, "", http.StatusCreated, nil, ""},
		{"a revision of the anticoagulant", "ray", "anticoagulant", true, "", http.StatusCreated, nil, ""},
		{"a new patient's own topic", "sam", "wound_care", true, "", http.StatusCreated, nil, ""},
		{"blood_thinner, --new-topic", "ray", "blood_thinner", false, "", http.StatusConflict, []string{"anticoagulant", "blood thinner"}, ""},
		{"blood_thinner, existingTopic", "ray", "blood_thinner", true, "", http.StatusConflict, []string{"anticoagulant", "blood thinner"}, ""},
		{"walking", "ray", "walking", false, "", http.StatusConflict, []string{"weight_bearing", "walking"}, ""},
		{"a synonym: crutches", "ray", "crutches", false, "", http.StatusConflict, []string{"weight_bearing", "crutches"}, ""},
		{"wound-care beside wound_care", "ray", "wound-care", false, "", http.StatusConflict, []string{"wound_care", "wound care"}, ""},
		{"wound.care beside wound_care", "ray", "wound.care", false, "", http.StatusConflict, []string{"wound_care", "wound care"}, ""},
		{"a CareTopic value a new patient has not", "sam2", "blood_thinner", false, "", http.StatusConflict, []string{"anticoagulant", "blood thinner"}, ""},
		{"an assistant-only topic's name, care.write only", "ray", "gait-note", false, careWrite, http.StatusCreated, nil, ""},
		{"an assistant-only topic's name, signed", "ray", "risk_", false, "", http.StatusCreated, nil, ""},
	} {
		seq := f.auditSeq()
		body := writeBody(func(m map[string]any) {
			m["patient"], m["domain"], m["value"] = tc.patient, tc.domain, "Words for "+tc.name+"."
			if tc.existing {
				m["existingTopic"] = true
			}
		})
		var a answer
		if tc.token != "" {
			a = f.bearer(body, tc.token)
		} else {
			a = f.signed(body, f.now.Unix())
		}
		if a.status != tc.status {
			t.Fatalf("%s: status %d, want %d; body %s", tc.name, a.status, tc.status, a.body)
		}
		if tc.status != http.StatusConflict {
			continue
		}
		var e struct{ Error, Field string }
		if err := json.Unmarshal(a.body, &e); err != nil || e.Field != "domain" || !strings.Contains(e.Error, "nothing was saved") {
			t.Errorf("%s: refusal %s, want field domain saying nothing was saved", tc.name, a.body)
		}
		for _, n := range tc.names {
			if !strings.Contains(e.Error, n) {
				t.Errorf("%s: refusal %q does not name %q", tc.name, e.Error, n)
			}
		}
		if tc.hides != "" && strings.Contains(e.Error, tc.hides) {
			t.Errorf("%s: refusal %q names the assistant-only %q (P-1)", tc.name, e.Error, tc.hides)
		}
		topics, err := f.st.Topics(context.Background(), tc.patient)
		if err != nil {
			t.Fatal(err)
		}
		if slices.ContainsFunc(topics, func(tp store.Topic) bool { return tp.Domain == tc.domain }) {
			t.Errorf("%s: the refused topic was written", tc.name)
		}
		if row := f.oneAuditRow(seq); row.Outcome == "accepted" || row.Reason != store.ReasonInvalid {
			t.Errorf("%s: audit row %+v, want a refusal", tc.name, row)
		}
	}
}

// A new topic's answer names only the topics the writer may read or
// write (P-1): a care.write-only bearer is told ray's speakable topics,
// never the name of an assistant-only one (risk, adherence, gait_note);
// the twin, a writer holding care.write.assistant, is told those too.
func TestWrite_ANewTopicNamesOnlyTheTopicsTheWriterMayReadOrWrite(t *testing.T) {
	f := newFixture(t)
	for _, tc := range []struct {
		name          string
		scopes        []models.Scope
		domain        string
		wantAssistant bool
	}{
		{"care.write only", []models.Scope{models.ScopeWrite}, "walkng", false},
		{"care.write and care.write.assistant", []models.Scope{models.ScopeWrite, models.ScopeWriteAssistant}, "walkng2", true},
	} {
		a := f.bearer(writeBody(func(m map[string]any) { m["domain"] = tc.domain }), f.token("okafor", []string{"ray"}, tc.scopes...))
		if a.status != http.StatusCreated {
			t.Fatalf("%s: status %d, body %s", tc.name, a.status, a.body)
		}
		var resp WriteResponse
		if err := json.Unmarshal(a.body, &resp); err != nil {
			t.Fatal(err)
		}
		if !resp.NewTopic || !slices.Contains(resp.Topics, "weight_bearing") {
			t.Errorf("%s: newTopic %v, topics %v; want newTopic naming weight_bearing", tc.name, resp.NewTopic, resp.Topics)
		}
		if got := slices.Contains(resp.Topics, "risk"); got != tc.wantAssistant {
			t.Errorf("%s: topics %v name the assistant-only risk = %v, want %v", tc.name, resp.Topics, got, tc.wantAssistant)
		}
	}
}

func TestWrite_BodyMutatedAfterSigningIsRefusedWithAnAuditRowAndNothingWritten(t *testing.T) {
	f := newFixture(t)
	signedBody := writeBody(nil)
	ts := f.now.Unix()
	sig := SignWrite([]byte(writeSecret), ts, signedBody)
	mutated := bytes.Replace(signedBody, []byte("Full"), []byte("Fuller"), 1)

	seq := f.auditSeq()
	a := f.do(http.MethodPost, "/write", mutated, map[string]string{HeaderTimestamp: strconv.FormatInt(ts, 10), HeaderSignature: sig})
	if a.status != http.StatusUnauthorized {
		t.Fatalf("mutated body: status = %d, want 401", a.status)
	}
	row := f.oneAuditRow(seq)
	if row.Reason != store.ReasonBadSignature || row.Outcome != "refused" || row.Actor != ActorAnonymous || row.Author != "" || row.URI != "" {
		t.Fatalf("audit row = %+v (the body must not be parsed before authentication)", row)
	}
	if n := f.versions("care://ray/weight_bearing"); n != 2 {
		t.Fatalf("versions = %d, want 2 (nothing written)", n)
	}
	if strings.Contains(string(a.body), sig[3:]) {
		t.Fatal("the answer echoes the signature")
	}

	// The twin: the bytes that were signed.
	a = f.do(http.MethodPost, "/write", signedBody, map[string]string{HeaderTimestamp: strconv.FormatInt(ts, 10), HeaderSignature: sig})
	if a.status != http.StatusCreated {
		t.Fatalf("signed body: status = %d, want 201: %s", a.status, a.body)
	}
}

func TestWrite_BadOrMissingSignatureHeadersAre401BadSignature(t *testing.T) {
	f := newFixture(t)
	body := writeBody(nil)
	ts := strconv.FormatInt(f.now.Unix(), 10)
	good := SignWrite([]byte(writeSecret), f.now.Unix(), body)
	cases := []struct {
		name    string
		headers map[string]string
		want    int
	}{
		{"no credential", map[string]string{}, 401},
		{"signature without timestamp", map[string]string{HeaderSignature: good}, 401},
		{"timestamp without signature", map[string]string{HeaderTimestamp: ts}, 401},
		{"wrong secret", map[string]string{HeaderTimestamp: ts, HeaderSignature: SignWrite([]byte("other"), f.now.Unix(), body)}, 401},
		{"no v1= prefix", map[string]string{HeaderTimestamp: ts, HeaderSignature: good[3:]}, 401},
		{"upper-case hex", map[string]string{HeaderTimestamp: ts, HeaderSignature: "v1=" + strings.ToUpper(good[3:])}, 401},
		{"timestamp in milliseconds", map[string]string{HeaderTimestamp: ts + "000", HeaderSignature: good}, 401},
		{"signed timestamp differs from the header", map[string]string{HeaderTimestamp: strconv.FormatInt(f.now.Unix()-1, 10), HeaderSignature: good}, 401},
		{"good", map[string]string{HeaderTimestamp: ts, HeaderSignature: good}, 201},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			seq := f.auditSeq()
			a := f.do(http.MethodPost, "/write", body, tc.headers)
			if a.status != tc.want {
				t.Fatalf("status = %d, want %d: %s", a.status, tc.want, a.body)
			}
			row := f.oneAuditRow(seq)
			if tc.want == 401 {
				if row.Reason != store.ReasonBadSignature || row.Via != "hmac" {
					t.Fatalf("audit row = %+v", row)
				}
				if !strings.HasPrefix(a.header.Get("WWW-Authenticate"), "Bearer resource_metadata=") {
					t.Fatalf("401 without a WWW-Authenticate challenge: %q", a.header.Get("WWW-Authenticate"))
				}
			} else if row.Reason != store.ReasonOK {
				t.Fatalf("audit row = %+v", row)
			}
		})
	}
}

func TestWrite_TimestampOutsideThe300SecondWindowIsRefusedOnBothSides(t *testing.T) {
	f := newFixture(t)
	cases := []struct {
		name   string
		offset time.Duration
		want   int
	}{
		{"301 s old", -301 * time.Second, 401},
		{"301 s ahead", 301 * time.Second, 401},
		{"300 s old", -300 * time.Second, 201},
		{"300 s ahead", 300 * time.Second, 201},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			body := writeBody(func(m map[string]any) { m["value"] = fmt.Sprintf("Partial weight-bearing, revision %d.", i) })
			before := f.versions("care://ray/weight_bearing")
			seq := f.auditSeq()
			a := f.signed(body, f.now.Add(tc.offset).Unix())
			if a.status != tc.want {
				t.Fatalf("status = %d, want %d: %s", a.status, tc.want, a.body)
			}
			row := f.oneAuditRow(seq)
			after := f.versions("care://ray/weight_bearing")
			if tc.want == 401 {
				if row.Reason != store.ReasonStaleTimestamp || after != before {
					t.Fatalf("audit %+v, versions %d → %d", row, before, after)
				}
			} else if row.Reason != store.ReasonOK || after != before+1 {
				t.Fatalf("audit %+v, versions %d → %d", row, before, after)
			}
		})
	}
}

func TestWrite_ReplayedSignedWriteIsAppliedOnceAndAnsweredWithTheSameBody(t *testing.T) {
	f := newFixture(t)
	body := writeBody(nil)
	ts := f.now.Unix()
	first := f.signed(body, ts)
	if first.status != http.StatusCreated {
		t.Fatalf("first: %d %s", first.status, first.body)
	}
	seq := f.auditSeq()
	second := f.signed(body, ts)
	if second.status != http.StatusOK {
		t.Fatalf("replay: status = %d, want 200: %s", second.status, second.body)
	}
	a, b := first.json(t), second.json(t)
	if b["replayed"] != true {
		t.Fatalf("replay answer lacks replayed:true: %s", second.body)
	}
	delete(b, "replayed")
	if !mapsEqual(a, b) {
		t.Fatalf("replay body %v differs from the first %v", b, a)
	}
	if n := f.versions("care://ray/weight_bearing"); n != 3 {
		t.Fatalf("versions = %d, want 3 (applied once)", n)
	}
	row := f.oneAuditRow(seq)
	if row.Reason != store.ReasonReplay || row.Outcome != "refused" || row.Actor != ActorHMAC {
		t.Fatalf("audit row = %+v", row)
	}
	// The same body signed at another second is a new request, not a
	// replay: it is applied, and found to repeat the current version.
	seq = f.auditSeq()
	third := f.signed(body, ts-1)
	if c := third.json(t); third.status != http.StatusOK || c["replayed"] != nil || c["unchanged"] != true {
		t.Fatalf("a fresh signature was treated as a replay: %d %s", third.status, third.body)
	}
	if row := f.oneAuditRow(seq); row.Reason != store.ReasonOK || row.Outcome != "accepted" {
		t.Fatalf("fresh signature audit row = %+v", row)
	}
}

// P-12: a signed write whose review date (staleAfter) is a few seconds
// ahead is stored; its retry — the same signed request, within the
// signature window — arrives after that review date has passed. The first
// write is stored, so the retry is its replay: 200, "replayed", the first
// answer, nothing written, audited as a replay — not 400 for a review
// date that was ahead when the write was accepted. Twin: a new write (a
// fresh signature, so a new idempotency key) with the same, now past,
// staleAfter is still 400 naming staleAfter, with its audit row, and
// writes nothing.
func TestWrite_ARetryOfAStoredSignedWriteAfterItsStaleAfterPassedIsTheReplay(t *testing.T) {
	f := newFixture(t)
	body := writeBody(func(m map[string]any) { m["staleAfter"] = f.now.Add(20 * time.Second).Format(time.RFC3339) })
	ts := f.now.Unix()
	first := f.signed(body, ts)
	if first.status != http.StatusCreated {
		t.Fatalf("first: %d %s", first.status, first.body)
	}
	versions := f.versions("care://ray/weight_bearing")
	f.clock.Advance(time.Minute) // the review date has passed; the signature is still in its window

	seq := f.auditSeq()
	retry := f.signed(body, ts)
	if retry.status != http.StatusOK {
		t.Fatalf("retry: status = %d, want 200 (the replay): %s", retry.status, retry.body)
	}
	a, b := first.json(t), retry.json(t)
	if b["replayed"] != true {
		t.Fatalf("retry answer lacks replayed:true: %s", retry.body)
	}
	delete(b, "replayed")
	if !mapsEqual(a, b) {
		t.Fatalf("retry body %v differs from the first %v", b, a)
	}
	if n := f.versions("care://ray/weight_bearing"); n != versions {
		t.Fatalf("versions = %d, want %d (applied once)", n, versions)
	}
	if row := f.oneAuditRow(seq); row.Reason != store.ReasonReplay || row.Outcome != "refused" || row.Actor != ActorHMAC {
		t.Fatalf("retry audit row = %+v", row)
	}

	seq = f.auditSeq()
	fresh := f.signed(body, f.clock.Now().Unix())
	var e errorBody
	if err := json.Unmarshal(fresh.body, &e); fresh.status != http.StatusBadRequest || err != nil || e.Field != "staleAfter" || !strings.Contains(e.Error, "must be in the future") {
		t.Fatalf("a new write with a past staleAfter: %d %s, want 400 naming staleAfter", fresh.status, fresh.body)
	}
	if row := f.oneAuditRow(seq); row.Reason != store.ReasonInvalid || row.Outcome != "refused" || row.Actor != ActorHMAC {
		t.Fatalf("new write audit row = %+v", row)
	}
	if n := f.versions("care://ray/weight_bearing"); n != versions {
		t.Fatalf("versions = %d, want %d (nothing written)", n, versions)
	}
}

func TestWrite_IdenticalWriteIs200UnchangedWithAnAuditRowAndNoNewVersion(t *testing.T) {
	sealer, err := envelope.NewLocal(bytes.Repeat([]byte{7}, envelope.MinMasterKeySize))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		sealer store.Sealer
	}{{"plaintext", nil}, {"sealed", sealer}} {
		t.Run(tc.name, func(t *testing.T) {
			f := newSealedFixture(t, tc.sealer)
			ts := f.now.Unix()
			first := f.signed(writeBody(nil), ts)
			if first.status != http.StatusCreated || first.json(t)["unchanged"] != nil {
				t.Fatalf("first write: %d %s", first.status, first.body)
			}
			okafor := f.token("okafor", []string{"ray"}, models.ScopeWrite)
			for _, via := range []struct {
				name string
				send func() answer
			}{
				{"hmac", func() answer { return f.signed(writeBody(nil), ts-1) }}, // a fresh signature, not a replay
				{"bearer", func() answer { return f.bearer(writeBody(nil), okafor) }},
			} {
				seq := f.auditSeq()
				a := via.send()
				if a.status != http.StatusOK {
					t.Fatalf("%s: identical write: status = %d, want 200: %s", via.name, a.status, a.body)
				}
				got, want := a.json(t), first.json(t)
				if got["unchanged"] != true || got["replayed"] != nil {
					t.Fatalf("%s: identical write lacks unchanged:true: %s", via.name, a.body)
				}
				delete(got, "unchanged")
				if !mapsEqual(got, want) {
					t.Fatalf("%s: unchanged answer %v does not name the current version %v", via.name, got, want)
				}
				if n := f.versions("care://ray/weight_bearing"); n != 3 {
					t.Fatalf("%s: versions = %d, want 3 (nothing written)", via.name, n)
				}
				row := f.oneAuditRow(seq)
				if row.Outcome != "accepted" || row.Reason != store.ReasonOK || row.Via != via.name || row.URI != "care://ray/weight_bearing/v3" {
					t.Fatalf("%s: audit row = %+v", via.name, row)
				}
			}
			// Twin: a different value (or the same with a new priority) is a new version, 201.
			for i, mut := range []func(map[string]any){
				func(m map[string]any) { m["value"] = "Partial weight-bearing with the frame." },
				func(m map[string]any) { m["value"] = "Partial weight-bearing with the frame."; m["priority"] = 0.9 },
			} {
				a := f.signed(writeBody(mut), ts)
				if a.status != http.StatusCreated || a.json(t)["unchanged"] != nil || a.json(t)["version"] != float64(4+i) {
					t.Fatalf("changed write %d: %d %s", i, a.status, a.body)
				}
			}
		})
	}
}

func mapsEqual(a, b map[string]any) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return bytes.Equal(ja, jb)
}

func TestWrite_BearerTokenMustHoldWriteBeTheAuthorAndBeBoundToThePatient(t *testing.T) {
	f := newFixture(t)
	okafor := f.token("okafor", []string{"ray"}, models.ScopeWrite)
	cases := []struct {
		name       string
		token      string
		body       []byte
		extra      map[string]string
		want       int
		reason     store.AuditReason
		actor      string
		wantHeader string
	}{
		{"sub is the author", okafor, writeBody(nil), nil, 201, store.ReasonOK, "okafor", ""},
		{"sub is not the author", f.token("mensah", []string{"ray"}, models.ScopeWrite), writeBody(nil), nil, 403, store.ReasonForbidden, "mensah", ""},
		{"bound to another patient", f.token("okafor", []string{"ada"}, models.ScopeWrite), writeBody(nil), nil, 403, store.ReasonWrongPatient, "okafor", ""},
		{"no care.write", f.token("okafor", []string{"ray"}, models.ScopeReadUser, models.ScopeReadAssistant), writeBody(nil), nil, 403, store.ReasonForbidden, "okafor",
			`Bearer resource_metadata="` + publicURL + `/.well-known/oauth-protected-resource", error="insufficient_scope", scope="care.write"`},
		{"invalid token", okafor + "x", writeBody(nil), nil, 401, store.ReasonBadSignature, ActorAnonymous,
			`Bearer resource_metadata="` + publicURL + `/.well-known/oauth-protected-resource", error="invalid_token"`},
		{"basic credentials", okafor, writeBody(nil), map[string]string{"Authorization": "Basic b2thZm9yOng="}, 401, store.ReasonBadSignature, ActorAnonymous,
			`Bearer resource_metadata="` + publicURL + `/.well-known/oauth-protected-resource"`},
		{"token and signature together", okafor, writeBody(nil), map[string]string{HeaderTimestamp: "1", HeaderSignature: "v1=00"}, 400, store.ReasonInvalid, ActorAnonymous, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := f.versions("care://ray/weight_bearing")
			seq := f.auditSeq()
			h := map[string]string{"Authorization": "Bearer " + tc.token}
			for k, v := range tc.extra {
				h[k] = v
			}
			a := f.do(http.MethodPost, "/write", tc.body, h)
			if a.status != tc.want {
				t.Fatalf("status = %d, want %d: %s", a.status, tc.want, a.body)
			}
			row := f.oneAuditRow(seq)
			if row.Reason != tc.reason || row.Actor != tc.actor || row.Via != "bearer" {
				t.Fatalf("audit row = %+v, want reason %s actor %s via bearer", row, tc.reason, tc.actor)
			}
			if tc.wantHeader != "" && a.header.Get("WWW-Authenticate") != tc.wantHeader {
				t.Fatalf("WWW-Authenticate = %q, want %q", a.header.Get("WWW-Authenticate"), tc.wantHeader)
			}
			wantVersions := before
			if tc.want == 201 {
				wantVersions++
			}
			if n := f.versions("care://ray/weight_bearing"); n != wantVersions {
				t.Fatalf("versions %d → %d", before, n)
			}
		})
	}
}

func TestWrite_AudienceChangeIs409AndWritesNothing(t *testing.T) {
	f := newFixture(t)
	seq := f.auditSeq()
	a := f.signed(writeBody(func(m map[string]any) { m["audience"] = "assistant" }), f.now.Unix())
	if a.status != http.StatusConflict {
		t.Fatalf("status = %d, want 409: %s", a.status, a.body)
	}
	if row := f.oneAuditRow(seq); row.Reason != store.ReasonAudienceChange || row.Actor != ActorHMAC {
		t.Fatalf("audit row = %+v", row)
	}
	if n := f.versions("care://ray/weight_bearing"); n != 2 {
		t.Fatalf("versions = %d, want 2", n)
	}
	if _, err := f.st.Read(t.Context(), everything, "care-internal://ray/weight_bearing"); err == nil {
		t.Fatal("an assistant record appeared under the user domain")
	}
	// Twin: the domain's own audience.
	if a := f.signed(writeBody(nil), f.now.Unix()); a.status != http.StatusCreated {
		t.Fatalf("same audience: status = %d: %s", a.status, a.body)
	}
}

func TestWrite_BodyOverTheCapIs413WithAnAuditRowAndAtTheCapIsAccepted(t *testing.T) {
	f := newFixture(t)
	// A valid JSON object padded with spaces to exactly n bytes.
	padded := func(n int) []byte {
		b := writeBody(nil)
		pad := bytes.Repeat([]byte{' '}, n-len(b))
		return append(append(b[:len(b)-1:len(b)-1], pad...), '}')
	}
	atCap, overCap := padded(MaxWriteBody), padded(MaxWriteBody+1)
	if len(atCap) != MaxWriteBody || len(overCap) != MaxWriteBody+1 {
		t.Fatalf("padding: %d %d", len(atCap), len(overCap))
	}
	seq := f.auditSeq()
	a := f.signed(overCap, f.now.Unix())
	if a.status != http.StatusRequestEntityTooLarge {
		t.Fatalf("over the cap: status = %d, want 413", a.status)
	}
	if row := f.oneAuditRow(seq); row.Reason != store.ReasonTooLarge || row.Outcome != "refused" {
		t.Fatalf("audit row = %+v", row)
	}
	if n := f.versions("care://ray/weight_bearing"); n != 2 {
		t.Fatalf("versions = %d", n)
	}
	if a := f.signed(atCap, f.now.Unix()); a.status != http.StatusCreated {
		t.Fatalf("at the cap: status = %d: %s", a.status, a.body)
	}
}

func TestWrite_InvalidFieldsAre400NamingTheFieldAndNeverEchoTheValue(t *testing.T) {
	f := newFixture(t)
	const secretValue = "SENTINEL-VALUE-never-echoed"
	base := func(m map[string]any) { m["value"] = secretValue }
	mut := func(fn func(map[string]any)) []byte {
		return writeBody(func(m map[string]any) { base(m); fn(m) })
	}
	cases := []struct {
		name  string
		body  []byte
		field string
	}{
		{"missing patient", mut(func(m map[string]any) { delete(m, "patient") }), "patient"},
		{"upper-case patient", mut(func(m map[string]any) { m["patient"] = "Ray" }), "patient"},
		{"domain with a slash", mut(func(m map[string]any) { m["domain"] = "a/b" }), "domain"},
		{"missing audience", mut(func(m map[string]any) { delete(m, "audience") }), "audience"},
		{"unknown audience", mut(func(m map[string]any) { m["audience"] = "both" }), "audience"},
		{"blank value", mut(func(m map[string]any) { m["value"] = "   " }), "value"},
		{"value over MaxValueBytes", mut(func(m map[string]any) { m["value"] = secretValue + strings.Repeat("x", models.MaxValueBytes) }), "value"},
		{"value is a number", mut(func(m map[string]any) { m["value"] = 7 }), "value"},
		{"missing authorId", mut(func(m map[string]any) { delete(m, "authorId") }), "authorId"},
		{"authorId with a space", mut(func(m map[string]any) { m["authorId"] = "sarah okafor" }), "authorId"},
		{"missing authorLabel", mut(func(m map[string]any) { delete(m, "authorLabel") }), "authorLabel"},
		{"staleAfter not RFC 3339", mut(func(m map[string]any) { m["staleAfter"] = "tomorrow" }), "staleAfter"},
		{"staleAfter in the past", mut(func(m map[string]any) { m["staleAfter"] = f.now.Add(-time.Minute).Format(time.RFC3339) }), "staleAfter"},
		{"staleAfter now", mut(func(m map[string]any) { m["staleAfter"] = f.now.Format(time.RFC3339) }), "staleAfter"},
		{"priority above 1", mut(func(m map[string]any) { m["priority"] = 2 }), "priority"},
		{"priority a string", mut(func(m map[string]any) { m["priority"] = "high" }), "priority"},
		{"unknown field", mut(func(m map[string]any) { m["writtenAt"] = "2020-01-01T00:00:00Z" }), "writtenAt"},
		{"not JSON", []byte("patient=ray&value=" + secretValue), "body"},
		{"an array", []byte(`["` + secretValue + `"]`), "body"},
		{"trailing data", append(mut(func(map[string]any) {}), []byte(` {"x":1}`)...), "body"},
		{"invalid UTF-8", append(mut(func(map[string]any) {})[:10], 0xff, 0xfe), "body"},
		{"null", []byte("null"), "patient"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			seq := f.auditSeq()
			a := f.signed(tc.body, f.now.Unix())
			if a.status != http.StatusBadRequest {
				t.Fatalf("status = %d, want 400: %s", a.status, a.body)
			}
			var e errorBody
			if err := json.Unmarshal(a.body, &e); err != nil || e.Error == "" {
				t.Fatalf("error body %s", a.body)
			}
			if e.Field != tc.field {
				t.Fatalf("field = %q, want %q (%s)", e.Field, tc.field, e.Error)
			}
			if strings.HasPrefix(tc.name, "staleAfter ") && tc.name != "staleAfter not RFC 3339" && !strings.Contains(e.Error, "must be in the future") {
				t.Fatalf("a past staleAfter is refused saying %q, want it to say it must be in the future", e.Error)
			}
			if strings.Contains(string(a.body), "SENTINEL") {
				t.Fatalf("the answer echoes the value: %s", a.body)
			}
			if row := f.oneAuditRow(seq); row.Reason != store.ReasonInvalid || row.Actor != ActorHMAC {
				t.Fatalf("audit row = %+v", row)
			}
		})
	}
	// Twin: the same base body, valid, with every optional field.
	ok := mut(func(m map[string]any) {
		m["staleAfter"] = f.now.Add(48 * time.Hour).Format(time.RFC3339)
		m["priority"] = 0.5
	})
	if a := f.signed(ok, f.now.Unix()); a.status != http.StatusCreated {
		t.Fatalf("valid twin: status = %d: %s", a.status, a.body)
	}
	r, err := f.st.Read(t.Context(), everything, "care://ray/weight_bearing")
	if err != nil || r.Version.Value != secretValue || !r.Version.StaleAfter.Equal(f.now.Add(48*time.Hour)) || r.Version.Priority != 0.5 {
		t.Fatalf("stored %+v, err %v", r.Version, err)
	}
}

func TestVerify_PublicChainShowsHashesAndTimesButNeverAValue(t *testing.T) {
	f := newFixture(t)
	a := f.do(http.MethodGet, "/verify?uri="+url.QueryEscape("care://ray/weight_bearing"), nil, nil)
	if a.status != http.StatusOK {
		t.Fatalf("status = %d: %s", a.status, a.body)
	}
	var c Chain
	if err := json.Unmarshal(a.body, &c); err != nil {
		t.Fatal(err)
	}
	if c.URI == "" || !c.Intact || c.BrokenAt != 0 || len(c.Versions) != 2 || c.Versions[1].PrevHash != c.Versions[0].Hash || c.Versions[0].WrittenAt == "" {
		t.Fatalf("chain = %+v", c)
	}
	for _, v := range f.seededValues() {
		if strings.Contains(string(a.body), v) {
			t.Fatalf("/verify body contains a value: %q", v)
		}
	}
	if c.Versions[0].AtRest != nil || strings.Contains(string(a.body), "atRest") {
		t.Fatalf("a plaintext store shows an at-rest receipt: %s", a.body)
	}
}

func TestVerify_SealedStoreShowsAtRestReceiptsAndStillNoValue(t *testing.T) {
	sealer, err := envelope.NewLocal(bytes.Repeat([]byte{7}, envelope.MinMasterKeySize))
	if err != nil {
		t.Fatal(err)
	}
	f := newSealedFixture(t, sealer)
	a := f.do(http.MethodGet, "/verify?uri="+url.QueryEscape("care://ray/weight_bearing"), nil, nil)
	if a.status != http.StatusOK {
		t.Fatalf("status = %d: %s", a.status, a.body)
	}
	var c Chain
	if err := json.Unmarshal(a.body, &c); err != nil {
		t.Fatal(err)
	}
	if !c.Intact || len(c.Versions) != 2 {
		t.Fatalf("chain = %+v", c)
	}
	for _, v := range c.Versions {
		r := v.AtRest
		if r == nil || r.Provider == "" || r.KeyID == "" || r.Nonce == "" || r.Tag == "" ||
			r.AAD != fmt.Sprintf("ray|weight_bearing|v%d|user", v.Version) {
			t.Fatalf("version %d: at-rest receipt %+v", v.Version, r)
		}
	}
	for _, v := range f.seededValues() {
		if strings.Contains(string(a.body), v) {
			t.Fatalf("/verify body contains a value: %q", v)
		}
	}
}

func TestVerify_ListingNeedsATokenAndShowsOnlyWhatItCanReadWithoutValues(t *testing.T) {
	f := newFixture(t)
	if a := f.do(http.MethodGet, "/verify", nil, nil); a.status != http.StatusUnauthorized ||
		a.header.Get("WWW-Authenticate") != `Bearer resource_metadata="`+publicURL+`/.well-known/oauth-protected-resource"` {
		t.Fatalf("listing without a token: %d %q", a.status, a.header.Get("WWW-Authenticate"))
	}
	list := func(tok string) ChainList {
		t.Helper()
		a := f.do(http.MethodGet, "/verify", nil, map[string]string{"Authorization": "Bearer " + tok})
		if a.status != http.StatusOK {
			t.Fatalf("status = %d: %s", a.status, a.body)
		}
		for _, v := range f.seededValues() {
			if strings.Contains(string(a.body), v) {
				t.Fatalf("/verify listing contains a value: %q", v)
			}
		}
		var l ChainList
		if err := json.Unmarshal(a.body, &l); err != nil {
			t.Fatal(err)
		}
		return l
	}
	user := list(f.token("carer", []string{"ray"}, models.ScopeReadUser))
	both := list(f.token("host", []string{"ray"}, models.ScopeReadUser, models.ScopeReadAssistant))
	other := list(f.token("host", []string{"ada"}, models.ScopeReadUser, models.ScopeReadAssistant))
	uris := func(l ChainList) []string {
		var out []string
		for _, c := range l.Chains {
			out = append(out, c.URI)
		}
		return out
	}
	for _, u := range uris(user) {
		if !strings.HasPrefix(u, "care://") {
			t.Fatalf("a user-scoped listing shows %s", u)
		}
	}
	if len(user.Chains) != 5 || len(both.Chains) != 8 || !user.Intact || !both.Intact {
		t.Fatalf("user %v, both %v", uris(user), uris(both))
	}
	if !slices.Contains(uris(both), "care-internal://ray/risk") {
		t.Fatalf("a dual-scope listing misses care-internal://ray/risk: %v", uris(both))
	}
	if len(other.Chains) != 0 {
		t.Fatalf("a token bound to another patient lists %v (P-21)", uris(other))
	}
}

func TestVerify_UnreadableURIIs404WithTheSameShapeAsAnAbsentOne(t *testing.T) {
	f := newFixture(t)
	get := func(uri string, headers map[string]string) answer {
		return f.do(http.MethodGet, "/verify?uri="+url.QueryEscape(uri), nil, headers)
	}
	normalize := func(a answer, uri string) string {
		return strings.Replace(string(a.body), strconvQuote(uri), `"URI"`, 1)
	}
	absent := get("care://ray/nonsense", nil)
	if absent.status != http.StatusNotFound {
		t.Fatalf("absent: %d", absent.status)
	}
	for _, uri := range []string{"care-internal://ray/risk", "care-internal://ray/nonsense", "care://ray/weight_bearing/v9", "care://ray/weight_bearing/3", "app://nope", ""} {
		a := get(uri, nil)
		if a.status != http.StatusNotFound {
			t.Fatalf("%q: status = %d, want 404: %s", uri, a.status, a.body)
		}
		if normalize(a, uri) != normalize(absent, "care://ray/nonsense") {
			t.Fatalf("%q: body %s differs in shape from the absent %s", uri, a.body, absent.body)
		}
		if a.header.Get("Content-Type") != absent.header.Get("Content-Type") {
			t.Fatalf("%q: content type differs", uri)
		}
	}
	// Twin: the same internal chain with a token that may read it.
	tok := f.token("host", []string{"ray"}, models.ScopeReadAssistant)
	if a := get("care-internal://ray/risk", map[string]string{"Authorization": "Bearer " + tok}); a.status != http.StatusOK {
		t.Fatalf("assistant token: status = %d: %s", a.status, a.body)
	}
	// Twin: a version that exists.
	if a := get("care://ray/weight_bearing/v2", nil); a.status != http.StatusOK {
		t.Fatalf("existing version: status = %d: %s", a.status, a.body)
	}
	// A presented token that fails is 401, never the anonymous view.
	if a := get("care://ray/weight_bearing", map[string]string{"Authorization": "Bearer " + tok + "x"}); a.status != http.StatusUnauthorized {
		t.Fatalf("bad token: status = %d", a.status)
	}
}

func strconvQuote(s string) string { b, _ := json.Marshal(s); return string(b) }

func TestLink_LinkTokenBoundToThePatientCreatesASixDigitCode(t *testing.T) {
	f := newFixture(t)
	post := func(body string, tok string) answer {
		h := map[string]string{}
		if tok != "" {
			h["Authorization"] = "Bearer " + tok
		}
		return f.do(http.MethodPost, "/link", []byte(body), h)
	}
	writer := f.token("carer", []string{"ray"}, models.ScopeLink)
	a := post(`{"patient":"ray"}`, writer)
	if a.status != http.StatusCreated {
		t.Fatalf("status = %d: %s", a.status, a.body)
	}
	var l LinkResponse
	if err := json.Unmarshal(a.body, &l); err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(l.Code)
	if err != nil || n < 100000 || n > 999999 {
		t.Fatalf("code = %q", l.Code)
	}
	exp, err := time.Parse(time.RFC3339, l.ExpiresAt)
	if err != nil || !exp.Equal(f.now.Add(10*time.Minute)) {
		t.Fatalf("expiresAt = %q, want now+10m", l.ExpiresAt)
	}
	if p, err := f.st.RedeemLinkCode(t.Context(), "amzn1.ask.account.test", "https://api.amazonalexa.com", l.Code, f.now); err != nil || p != "ray" {
		t.Fatalf("the code does not redeem for ray: %q %v", p, err)
	}

	cases := []struct {
		name string
		body string
		tok  string
		want int
	}{
		{"no token", `{"patient":"ray"}`, "", 401},
		{"invalid token", `{"patient":"ray"}`, writer + "x", 401},
		{"read-only token", `{"patient":"ray"}`, f.token("carer", []string{"ray"}, models.ScopeReadUser), 403},
		// care.write no longer implies care.link: a clinician's write token
		// links no device, and a carer's link token writes no fact.
		{"care.write token", `{"patient":"ray"}`, f.token("okafor", []string{"ray"}, models.ScopeWrite, models.ScopeWriteAssistant), 403},
		{"bound to another patient", `{"patient":"ray"}`, f.token("carer", []string{"ada"}, models.ScopeLink), 403},
		{"bad patient id", `{"patient":"Ray!"}`, writer, 400},
		// A patient nothing has been written for (a mistyped id) gets no
		// code: it would link an Echo to an empty plan.
		{"patient with no care record", `{"patient":"rya"}`, f.token("carer", []string{"rya"}, models.ScopeLink), 404},
		{"unknown field", `{"patient":"ray","code":"123456"}`, writer, 400},
		{"valid again", `{"patient":"ray"}`, writer, 201},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if a := post(tc.body, tc.tok); a.status != tc.want {
				t.Fatalf("status = %d, want %d: %s", a.status, tc.want, a.body)
			}
		})
	}
}

func TestMetadata_BothResourcesAdvertiseScopesHeaderBearerAndAuthorizationServers(t *testing.T) {
	f := newFixture(t)
	for path, resource := range map[string]string{
		"/.well-known/oauth-protected-resource":     publicURL,
		"/.well-known/oauth-protected-resource/mcp": publicURL + "/mcp",
	} {
		a := f.do(http.MethodGet, path, nil, nil)
		if a.status != http.StatusOK {
			t.Fatalf("%s: %d", path, a.status)
		}
		var m struct {
			Resource               string   `json:"resource"`
			ScopesSupported        []string `json:"scopes_supported"`
			BearerMethodsSupported []string `json:"bearer_methods_supported"`
			AuthorizationServers   []string `json:"authorization_servers"`
		}
		if err := json.Unmarshal(a.body, &m); err != nil {
			t.Fatal(err)
		}
		if m.Resource != resource || !slices.Equal(m.ScopesSupported, []string{"care.read.user", "care.read.assistant", "care.write", "care.write.assistant", "care.link"}) ||
			!slices.Equal(m.BearerMethodsSupported, []string{"header"}) || !slices.Equal(m.AuthorizationServers, []string{"https://as.example"}) {
			t.Fatalf("%s: %+v", path, m)
		}
	}
}

func TestSignWrite_IsHMACSHA256OverTimestampDotBodyInLowercaseHex(t *testing.T) {
	// Computed independently: printf '1700000000.{}' | openssl dgst -sha256 -hmac key
	got := SignWrite([]byte("key"), 1700000000, []byte("{}"))
	if want := "v1=9d713ed406bb7076d4123f0dc2c39d2df5c654ed4b0cd56b52c8b4c940bd63ae"; got != want {
		t.Fatalf("SignWrite = %q, want %q", got, want)
	}
	if got == SignWrite([]byte("key"), 1700000001, []byte("{}")) || got == SignWrite([]byte("key"), 1700000000, []byte("{ }")) {
		t.Fatal("the signature does not cover both the timestamp and the body")
	}
}

// BenchmarkWrite_SignedCommit measures one signed POST /write end to end:
// HTTP over loopback, HMAC over the raw body, a durable SQLite commit and
// the audit row. Run with a small -benchtime (the machine is shared).
func BenchmarkWrite_SignedCommit(b *testing.B) {
	f := newFixture(b)
	i := 0
	for b.Loop() {
		i++
		body := writeBody(func(m map[string]any) { m["value"] = fmt.Sprintf("Revision %d.", i) })
		if a := f.signed(body, f.now.Unix()); a.status != http.StatusCreated {
			b.Fatalf("status %d: %s", a.status, a.body)
		}
	}
}

func TestParseWriteRequest_RefusesRepeatedAndCaseVariantKeys(t *testing.T) {
	good := `{"patient":"ray","domain":"weight_bearing","audience":"user","value":"Walk.","authorId":"okafor","authorLabel":"Sarah Okafor, physio"}`
	if _, verr := parseWriteRequest([]byte(good)); verr != nil {
		t.Fatalf("exact keys refused: %v", verr)
	}
	for _, body := range []string{
		`{"PATIENT":"bob","patient":"ray","domain":"weight_bearing","audience":"user","value":"Walk.","authorId":"okafor","authorLabel":"S"}`,
		`{"patient":"bob","patient":"ray","domain":"weight_bearing","audience":"user","value":"Walk.","authorId":"okafor","authorLabel":"S"}`,
		`{"patient":"ray","domain":"weight_bearing","audience":"user","value":"Walk.","authorId":"okafor","authorLabel":"S","ſtaleAfter":"2030-01-01T00:00:00Z"}`,
	} {
		if _, verr := parseWriteRequest([]byte(body)); verr == nil {
			t.Errorf("accepted %s", body)
		}
	}
}

func TestExactKeys_LinkBodyRefusesRepeatedAndCaseVariantPatient(t *testing.T) {
	if ve := exactKeys([]byte(`{"patient":"ray"}`), linkKeys); ve != nil {
		t.Fatalf("exact link body refused: %v", ve)
	}
	for _, body := range []string{`{"patient":"ray","patient":"bob"}`, `{"Patient":"bob"}`} {
		if ve := exactKeys([]byte(body), linkKeys); ve == nil {
			t.Errorf("accepted %s", body)
		}
	}
}

// The cost of the V2 check on a write creating a topic of a patient with
// ten topics on record (besides the one Topics query).
func BenchmarkTopicCollision(b *testing.B) {
	m := caretopic.Default()
	var topics []store.Topic
	for _, d := range []string{"adherence", "anticoagulant", "blood_test", "contact", "diet", "exercise", "exercise_clip", "gait_note", "risk", "weight_bearing"} {
		topics = append(topics, store.Topic{Domain: d, Audience: models.AudienceUser})
	}
	for b.Loop() {
		if _, _, _, ok := topicCollision(m, "wound_care", topics); ok {
			b.Fatal("wound_care collides")
		}
	}
}

// A care.write-only writer probing with existingTopic (nothing saved) gets
// the same answer for a near miss of an assistant-only topic's name
// ("risk_", "gait.note") as for a name no topic has: before, the near miss
// was refused as "already the name of another of ray's topics", naming
// the hidden topic (W3, P-1). Twin: a near miss of a speakable topic's
// name is still refused naming it (V2).
func TestWrite_AnExistingTopicProbeCannotFindAnAssistantOnlyTopicsName(t *testing.T) {
	f := newFixture(t)
	careWrite := f.token("okafor", []string{"ray"}, models.ScopeWrite)
	probe := func(domain string) (int, string) {
		a := f.bearer(writeBody(func(m map[string]any) {
			m["patient"], m["domain"], m["value"], m["existingTopic"] = "ray", domain, "Probe.", true
		}), careWrite)
		var e struct{ Error string }
		_ = json.Unmarshal(a.body, &e)
		return a.status, strings.ReplaceAll(e.Error, strconv.Quote(domain), `"X"`)
	}
	noneStatus, none := probe("zz_probe_")
	if noneStatus != http.StatusConflict {
		t.Fatalf("a name no topic has: %d %q, want 409", noneStatus, none)
	}
	for _, d := range []string{"risk_", "gait.note", "adherence_"} {
		if st, msg := probe(d); st != noneStatus || msg != none {
			t.Errorf("near miss %q of an assistant-only topic: %d %q, want the answer for no topic: %d %q", d, st, msg, noneStatus, none)
		}
	}
	if st, msg := probe("weight-bearing"); st != http.StatusConflict || !strings.Contains(msg, "weight_bearing") {
		t.Errorf("near miss of a speakable topic: %d %q, want 409 naming weight_bearing", st, msg)
	}
}

// A number too large for any float64 is named as out of range, not as the
// wrong type (breakit7, cosmetic); its twins: a string where a number goes
// is the wrong type, and a number in range is accepted.
func TestParseWriteRequest_AnOutOfRangeNumberIsNamedAsSuch(t *testing.T) {
	base := `{"patient":"ray","domain":"weight_bearing","audience":"user","value":"Walk.","authorId":"okafor","authorLabel":"Sarah Okafor, physio","priority":%s}`
	for _, tc := range []struct{ priority, reason string }{
		{"1e400", "is a number out of range"},
		{`"high"`, "must be a JSON number"},
		{"0.5", ""},
	} {
		_, verr := parseWriteRequest([]byte(fmt.Sprintf(base, tc.priority)))
		switch {
		case tc.reason == "" && verr != nil:
			t.Errorf("priority %s refused: %v", tc.priority, verr)
		case tc.reason != "" && (verr == nil || verr.Field != "priority" || verr.Reason != tc.reason):
			t.Errorf("priority %s: %+v, want priority %q", tc.priority, verr, tc.reason)
		}
	}
}
