package web_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/unsay/unsay/models"
	"github.com/unsay/unsay/web"
)

// page fetches path from a real server running web.Handler.
func page(t *testing.T, srv *httptest.Server, method, path string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, srv.URL+path, nil)
	if err != nil {
		t.Fatalf("new request %s %s: %v", method, path, err)
	}
	res, err := srv.Client().Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	return res, b
}

func source(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

var served = []struct{ path, file, marker string }{
	{"/", "index.html", `data-testid="verify-result"`},
	{"/echo.html", "echo.html", `data-testid="no-token"`},
	{"/clinician", "clinician.html", `data-testid="write-result"`},
}

func TestHandler_ServesEachPageAsHTMLWithItsOwnBytes(t *testing.T) {
	srv := httptest.NewServer(web.Handler())
	defer srv.Close()
	for _, tc := range served {
		t.Run(tc.path, func(t *testing.T) {
			res, body := page(t, srv, http.MethodGet, tc.path)
			if res.StatusCode != http.StatusOK {
				t.Fatalf("status = %d, want 200", res.StatusCode)
			}
			if ct := res.Header.Get("Content-Type"); ct != "text/html; charset=utf-8" {
				t.Errorf("Content-Type = %q", ct)
			}
			if got := res.Header.Get("X-Content-Type-Options"); got != "nosniff" {
				t.Errorf("X-Content-Type-Options = %q", got)
			}
			csp := res.Header.Get("Content-Security-Policy")
			if !strings.Contains(csp, "connect-src 'self'") || !strings.Contains(csp, "default-src 'none'") {
				t.Errorf("Content-Security-Policy = %q: want only this origin", csp)
			}
			if !bytes.Equal(body, source(t, tc.file)) {
				t.Errorf("GET %s did not serve %s byte for byte", tc.path, tc.file)
			}
			if !bytes.Contains(body, []byte(tc.marker)) {
				t.Errorf("GET %s lacks %s: a placeholder?", tc.path, tc.marker)
			}
			head, hb := page(t, srv, http.MethodHead, tc.path)
			if head.StatusCode != http.StatusOK || len(hb) != 0 {
				t.Errorf("HEAD %s = %d with %d body bytes, want 200 and none", tc.path, head.StatusCode, len(hb))
			}
		})
	}
}

func TestHandler_NotFoundForAnyOtherPathIncludingTraversal(t *testing.T) {
	srv := httptest.NewServer(web.Handler())
	defer srv.Close()
	for _, p := range []string{
		"/../main.go", "/echo.html/..", "/web.go", "/web_test.go", "/index.html", "/clinician.html",
		"/echo.html/", "//echo.html", "/clinician/", "/./echo.html", "/%2e%2e/main.go", "/echo%2Ehtml",
		"/ECHO.HTML", "/echo.html/../web.go", "/favicon.ico", "/mcp",
	} {
		t.Run(p, func(t *testing.T) {
			res, body := page(t, srv, http.MethodGet, p)
			if res.StatusCode != http.StatusNotFound {
				t.Fatalf("GET %s = %d (Location %q), want 404", p, res.StatusCode, res.Header.Get("Location"))
			}
			if bytes.Contains(body, []byte("package web")) || bytes.Contains(body, []byte("<!doctype")) {
				t.Fatalf("GET %s leaked a file in its 404 body", p)
			}
		})
	}
}

// The same requests straight into the handler, where no client could have
// cleaned the path on the way.
func TestHandler_NotFoundForUncleanedRawPaths(t *testing.T) {
	h := web.Handler()
	for _, p := range []string{"/../main.go", "/echo.html/..", "/a/../echo.html", "/echo.html/."} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, p, nil))
		if rec.Code != http.StatusNotFound {
			t.Errorf("GET %s = %d (Location %q), want 404", p, rec.Code, rec.Header().Get("Location"))
		}
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/echo.html", nil))
	if rec.Code != http.StatusOK {
		t.Errorf("GET /echo.html = %d, want 200", rec.Code)
	}
}

func TestHandler_RefusesMethodsOtherThanGetAndHead(t *testing.T) {
	srv := httptest.NewServer(web.Handler())
	defer srv.Close()
	for _, m := range []string{http.MethodPost, http.MethodPut, http.MethodDelete} {
		res, _ := page(t, srv, m, "/clinician")
		if res.StatusCode != http.StatusMethodNotAllowed || res.Header.Get("Allow") != "GET, HEAD" {
			t.Errorf("%s /clinician = %d Allow %q, want 405 and GET, HEAD", m, res.StatusCode, res.Header.Get("Allow"))
		}
	}
	if res, _ := page(t, srv, http.MethodGet, "/clinician"); res.StatusCode != http.StatusOK {
		t.Errorf("GET /clinician = %d, want 200", res.StatusCode)
	}
}

// P-16: ui://unsay/echo carries EchoHTML(), which must be what /echo.html serves.
func TestEchoHTML_EqualsTheBytesOfGetEchoHTML(t *testing.T) {
	srv := httptest.NewServer(web.Handler())
	defer srv.Close()
	_, body := page(t, srv, http.MethodGet, "/echo.html")
	got := web.EchoHTML()
	if !bytes.Equal(got, body) {
		t.Fatal("EchoHTML() differs from GET /echo.html")
	}
	got[0] ^= 0xff // a caller modifying its copy must not change what is served
	if !bytes.Equal(web.EchoHTML(), body) {
		t.Fatal("modifying EchoHTML()'s result changed the embedded page")
	}
}

// externalRefs lists every reference in an HTML page that would reach
// another host: an absolute http(s) URL anywhere, a protocol-relative
// src/href/action, a CSS url() or @import that is not same-origin.
func externalRefs(page string) []string {
	var out []string
	for _, m := range regexp.MustCompile(`(?i)https?:`).FindAllStringIndex(page, -1) {
		out = append(out, page[m[0]:min(len(page), m[0]+40)])
	}
	// Attributes and CSS are checked outside script bodies (a script's
	// "data = []" is not an attribute; its URLs are covered above).
	page = regexp.MustCompile(`(?is)(<script[^>]*>).*?</script>`).ReplaceAllString(page, "$1</script>")
	attr := regexp.MustCompile(`(?i)\b(?:src|href|action|srcset|poster|data)\s*=\s*["']?([^"'\s>]*)`)
	for _, m := range attr.FindAllStringSubmatch(page, -1) {
		v := m[1]
		if !strings.HasPrefix(v, "/") && !strings.HasPrefix(v, "#") && !strings.HasPrefix(v, "data:") || strings.HasPrefix(v, "//") {
			out = append(out, m[0])
		}
	}
	for _, m := range regexp.MustCompile(`(?i)(?:url\(\s*["']?|@import\s+["'])([^"')]*)`).FindAllStringSubmatch(page, -1) {
		if !strings.HasPrefix(m[1], "/") || strings.HasPrefix(m[1], "//") {
			out = append(out, m[0])
		}
	}
	return out
}

func TestExternalRefs_FlagsEveryKindOfOutsideReference(t *testing.T) {
	for _, bad := range []string{
		`<script src="https://cdn.example/x.js"></script>`,
		`<img src="//cdn.example/x.png">`,
		`<a href="http://example.org">x</a>`,
		`<style>@import "fonts.css";</style>`,
		`<style>body{background:url(https://example.org/a.png)}</style>`,
		`<link rel="stylesheet" href="fonts.example/x.css">`,
		`<form action=evil.example/post>`,
		`<script>fetch("https://example.org/steal")</script>`,
		`<object data="evil.example/x.swf"></object>`,
	} {
		if len(externalRefs(bad)) == 0 {
			t.Errorf("externalRefs missed %s", bad)
		}
	}
	for _, good := range []string{`<a href="/clinician">x</a>`, `<a href="#top">x</a>`, `<link rel="icon" href="data:,">`, `<script>fetch("/verify?uri=" + u); var data = [];</script>`} {
		if got := externalRefs(good); len(got) != 0 {
			t.Errorf("externalRefs flagged same-origin %s: %q", good, got)
		}
	}
}

func TestPages_ReferenceNoExternalURL(t *testing.T) {
	for _, tc := range served {
		if refs := externalRefs(string(source(t, tc.file))); len(refs) != 0 {
			t.Errorf("%s references other hosts: %q", tc.file, refs)
		}
	}
}

// A token lives in memory (the card) or sessionStorage (the clinician page),
// never in localStorage, never in a query string.
func TestPages_NeverKeepATokenInLocalStorageOrAQuery(t *testing.T) {
	for _, tc := range served {
		s := string(source(t, tc.file))
		for _, bad := range []string{"localStorage", "?token=", "&token=", "access_token"} {
			if strings.Contains(s, bad) {
				t.Errorf("%s contains %q", tc.file, bad)
			}
		}
	}
	echo := string(source(t, "echo.html"))
	if strings.Contains(echo, "sessionStorage") {
		t.Error("echo.html stores something in sessionStorage: the reader token must stay in memory")
	}
	if !strings.Contains(echo, "history.replaceState") {
		t.Error("echo.html does not remove #token=… from the address bar")
	}
	if !strings.Contains(echo, `"Authorization": "Bearer " + this.token`) {
		t.Error("echo.html does not send its token in the Authorization header")
	}
}

// The card's only mention of the assistant-only scheme is inside the filter
// that refuses it: no code path renders it (P-1, P-16).
func TestEcho_MentionsCareInternalOnlyInsideTheFilter(t *testing.T) {
	s := string(source(t, "echo.html"))
	start := strings.Index(s, "function speakableURI(")
	if start < 0 {
		t.Fatal("echo.html has no speakableURI filter")
	}
	end := start + strings.Index(s[start:], "\n  }\n")
	filter := s[start:end]
	if !strings.Contains(filter, "care-internal://") {
		t.Error("the filter does not name the scheme it refuses")
	}
	if total, inside := strings.Count(s, "care-internal"), strings.Count(filter, "care-internal"); total != inside {
		t.Errorf("echo.html mentions care-internal %d times, only %d inside the filter", total, inside)
	}
	// Every place that takes a URI from the server or host passes it through the filter.
	for _, site := range []string{"applyRead(", "readOne(uri)", "notifications/resources/updated", "applyChanges(sc)"} {
		i := strings.Index(s, site)
		if i < 0 {
			t.Errorf("echo.html lost %s", site)
			continue
		}
		if j := strings.Index(s[i:], "speakableURI("); j < 0 || j > 900 {
			t.Errorf("%s is not guarded by speakableURI", site)
		}
	}
}

func TestPages_CarryTheTestIDsTheBrowserTestsUse(t *testing.T) {
	want := map[string][]string{
		"echo.html": {`"fact-row"`, `data-testid="retraction"`, `data-testid="no-token"`, `data-testid="status"`, `data-testid="error"`},
		"clinician.html": {`data-testid="token"`, `data-testid="signin-submit"`, `data-testid="patient"`, `data-testid="domain"`,
			`data-testid="audience"`, `data-testid="value"`, `data-testid="authorLabel"`, `data-testid="staleAfter"`,
			`data-testid="write-submit"`, `data-testid="write-result"`, `data-testid="current"`, `data-testid="history"`,
			`data-testid="error-patient"`, `data-testid="error-domain"`, `data-testid="error-audience"`, `data-testid="error-value"`,
			`data-testid="error-authorLabel"`, `data-testid="error-staleAfter"`, `data-testid="error-authorId"`, `data-testid="error-form"`},
		"index.html": {`data-testid="verify-form"`, `data-testid="verify-uri"`, `data-testid="verify-result"`, `href="/echo.html"`, `href="/clinician"`},
	}
	for file, ids := range want {
		s := string(source(t, file))
		for _, id := range ids {
			if !strings.Contains(s, id) {
				t.Errorf("%s lacks %s", file, id)
			}
		}
	}
}

// TestEcho_ErrorStatesSpeakToAPatientOrCarer proves the screens a patient
// or carer meets without a working link say what to do in their words —
// "Ask your care team for a new link to this screen" — and never name a
// developer's tool, a token or a scope.
func TestEcho_ErrorStatesSpeakToAPatientOrCarer(t *testing.T) {
	s := string(source(t, "echo.html"))
	section := func(marker string, n int) string {
		i := strings.Index(s, marker)
		if i < 0 {
			t.Fatalf("no %s in echo.html", marker)
		}
		return s[i:min(len(s), i+n)]
	}
	const ask = "Ask your care team for a new link to this screen."
	for _, marker := range []string{`data-testid="no-token"`, `data-testid="refused"`} {
		if !strings.Contains(section(marker, 400), ask) {
			t.Errorf("%s does not say %q", marker, ask)
		}
	}
	describe := section("function describe(err)", 700)
	describe = describe[:strings.Index(describe, "function refused")]
	noToken := section(`data-testid="no-token"`, 300)
	noToken = regexp.MustCompile(`<[^>]*>`).ReplaceAllString(noToken[strings.Index(noToken, ">")+1:strings.Index(noToken, "</section>")], " ")
	for _, text := range []string{noToken, describe} {
		for _, bad := range []string{"make run", "token", "care.read", "server"} {
			if strings.Contains(strings.ToLower(text), bad) {
				t.Errorf("a patient-facing message mentions %q:\n%s", bad, text)
			}
		}
	}
	if !strings.Contains(s, "please check it with your care team") {
		t.Error("the stale badge does not say what to do")
	}
}

// ---- The card's own JavaScript, run under Node -----------------------------

// pureJS returns the DOM-free block of echo.html (between /* <pure> and
// /* </pure> */).
func pureJS(t *testing.T) string {
	t.Helper()
	s := string(source(t, "echo.html"))
	i, j := strings.Index(s, "/* <pure>"), strings.Index(s, "/* </pure> */")
	if i < 0 || j < i {
		t.Fatal("echo.html lacks its /* <pure> */ … /* </pure> */ block")
	}
	return s[i:j]
}

// runNode runs the card's pure block followed by driver under Node and
// decodes what the driver prints with console.log(JSON.stringify(...)).
// Without node on PATH it skips loudly, or fails when UNSAY_REQUIRE_ALL=1.
func runNode(t *testing.T, driver string, out any) {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		msg := "SKIPPED: node not found; the card's JavaScript was not executed (install Node 20+: apt-get install nodejs)"
		if os.Getenv("UNSAY_REQUIRE_ALL") == "1" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	file := filepath.Join(t.TempDir(), "card.js")
	prog := "\"use strict\";\n(async function () {\n" + pureJS(t) + "\n" + driver + "\n})().catch(function (e) { console.error(e); process.exit(1); });\n"
	if err := os.WriteFile(file, []byte(prog), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, node, file)
	cmd.Stderr = &stderr
	b, err := cmd.Output()
	if err != nil {
		t.Fatalf("node: %v\n%s", err, stderr.String())
	}
	if err := json.Unmarshal(b, out); err != nil {
		t.Fatalf("node printed %q: %v", b, err)
	}
}

func TestEchoJS_FilterAdmitsOnlyUnversionedCareURIs(t *testing.T) {
	cases := map[string]bool{
		"care://ray/weight_bearing":    true,
		"care://ray/exercise_clip":     true,
		"care-internal://ray/risk":     false,
		"care-internal://ray/nonsense": false,
		"care://ray/weight_bearing/v2": false,
		"care://ray/weight_bearing/":   false,
		"care://ray//weight_bearing":   false,
		"CARE://ray/weight_bearing":    false,
		"ui://unsay/echo":              false,
		"app://nope":                   false,
		" care://ray/weight_bearing":   false,
		"care://ray/weight_bearing\n":  false,
	}
	uris := make([]string, 0, len(cases))
	for u := range cases {
		uris = append(uris, u)
	}
	in, _ := json.Marshal(uris)
	var got map[string]bool
	runNode(t, "var o = {}; "+string(in)+".forEach(function (u) { o[u] = speakableURI(u); }); console.log(JSON.stringify(o));", &got)
	for u, want := range cases {
		if got[u] != want {
			t.Errorf("speakableURI(%q) = %v, want %v", u, got[u], want)
		}
	}
}

// The card says ages the way Ray hears them: the same words as models.SpokenAge.
func TestEchoJS_SpokenAgeAndTopicMatchModels(t *testing.T) {
	ms := []int64{-5000, 0, 9999, 10000, 42000, 59999, 60000, 119999, 120000, 3599999, 3600000, 7199999, 7200000,
		86399999, 86400000, 172799999, 172800000, 9 * 86400000, 12 * 86400000}
	domains := []string{"weight_bearing", "anticoagulant", "exercise", "contact", "exercise_clip", "gait_note"}
	in, _ := json.Marshal(ms)
	dn, _ := json.Marshal(domains)
	var got struct {
		Ages   []string `json:"ages"`
		Topics []string `json:"topics"`
	}
	runNode(t, "console.log(JSON.stringify({ages: "+string(in)+".map(spokenAge), topics: "+string(dn)+".map(topic)}));", &got)
	if len(got.Ages) != len(ms) || len(got.Topics) != len(domains) {
		t.Fatalf("node answered %d ages, %d topics", len(got.Ages), len(got.Topics))
	}
	for i, m := range ms {
		if want := models.SpokenAge(time.Duration(m) * time.Millisecond); got.Ages[i] != want {
			t.Errorf("spokenAge(%d ms) = %q, models.SpokenAge = %q", m, got.Ages[i], want)
		}
	}
	for i, d := range domains {
		if want := models.Topic(d); got.Topics[i] != want {
			t.Errorf("topic(%q) = %q, models.Topic = %q", d, got.Topics[i], want)
		}
	}
}

// The card reads a stale fact's words without the header, and recovers the
// withdrawn sentence from a rendered retraction.
func TestEchoJS_StripsStaleHeaderAndFindsWithdrawnSentence(t *testing.T) {
	now := time.Date(2026, 10, 8, 9, 14, 0, 0, time.UTC)
	heard := models.Version{Patient: "ray", Domain: "weight_bearing", N: 2, Audience: models.AudienceUser,
		Value: "Partial weight-bearing, about half your body weight.", AuthorLabel: "Mr Adeyemi, surgical team", WrittenAt: now.Add(-48 * time.Hour)}
	cur := heard
	cur.N, cur.Value, cur.AuthorLabel, cur.WrittenAt = 3, "Full weight-bearing as tolerated.", "Sarah Okafor, physio", now
	sentence, err := models.RenderRetraction(heard, cur, now)
	if err != nil {
		t.Fatal(err)
	}
	staleText := models.StaleHeader(heard, now) + "\n" + heard.Value
	in, _ := json.Marshal([]string{sentence, staleText, heard.Value, "no quote here"})
	var got []string
	runNode(t, "var a = "+string(in)+"; console.log(JSON.stringify([withdrawnFrom(a[0]), stripStale(a[1]), stripStale(a[2]), withdrawnFrom(a[3])]));", &got)
	want := []string{heard.Value, heard.Value, heard.Value, ""}
	for i := range want {
		if i >= len(got) || got[i] != want[i] {
			t.Errorf("case %d: got %q, want %q", i, got, want)
			break
		}
	}
}

// readSSE parses what the Go SDK writes (prime events with empty data,
// CRLF, lines split across chunks, multi-line data, comments) and stops
// when asked.
func TestEchoJS_ReadSSEParsesFramesSplitAcrossChunks(t *testing.T) {
	driver := `
var chunks = ["id: _0\ndata: \n\n", "event: message\r\nid: _1\r\ndata: {\"a\":1}\r", "\n\r\n: keep-alive\n\n",
  "data: {\"b\":\ndata: 2}\n", "\nid: _3\ndata: {\"c\":3}\n\n", "data: {\"after\":\"stop\"}\n\n"];
function body() {
  var i = 0;
  return new ReadableStream({ pull: function (c) { if (i < chunks.length) c.enqueue(new TextEncoder().encode(chunks[i++])); else c.close(); } });
}
var all = [], first = [];
await readSSE(body(), function (ev) { all.push(ev); return false; });
await readSSE(body(), function (ev) { first.push(ev); return ev.id === "_1"; });
console.log(JSON.stringify({all: all, first: first}));`
	type ev struct {
		ID    *string `json:"id"`
		Event string  `json:"event"`
		Data  string  `json:"data"`
	}
	var got struct{ All, First []ev }
	runNode(t, driver, &got)
	s := func(v string) *string { return &v }
	want := []ev{
		{ID: s("_0")},
		{ID: s("_1"), Event: "message", Data: `{"a":1}`},
		{Data: "{\"b\":\n2}"},
		{ID: s("_3"), Data: `{"c":3}`},
		{Data: `{"after":"stop"}`},
	}
	if d := cmp.Diff(want, got.All); d != "" {
		t.Errorf("events (-want +got):\n%s", d)
	}
	if len(got.First) != 2 {
		t.Errorf("returning true after _1 should stop reading; got %d events", len(got.First))
	}
}

// U1: quick revisions withdraw every wording the card showed — the one on
// screen for minutes before them as much as those on screen for an
// instant — without the new words, repeats or empty ones; a retraction on
// screen for SETTLE_MS or more, or one of another fact, is not carried
// into the next (its twin). The card names at most MAX_WITHDRAWN: the
// first, "…", and the newest.
func TestEchoJS_QuickRevisionsWithdrawEveryWordingTheCardShowed(t *testing.T) {
	var got []string
	runNode(t, `
var now = 1000000;
var r1 = {uri: "care://ray/weight_bearing", withdrawn: withdrawnList(null, "care://ray/weight_bearing", ["Touch-toe."], "Full.", now), shownAt: now};
var r2 = {uri: r1.uri, withdrawn: withdrawnList(r1, r1.uri, ["Full."], "Non.", now + 300), shownAt: now + 300};
var r3 = withdrawnList(r2, r1.uri, ["Non.", ""], "Full.", now + 600);
var settled = withdrawnList(r2, r1.uri, ["Non."], "Full.", now + 300 + SETTLE_MS);
var other = withdrawnList(r2, "care://ray/exercise", ["Ankle pumps."], "Heel slides.", now + 600);
var many = shownWithdrawn(["a", "b", "c", "d", "e", "f"]);
console.log(JSON.stringify([r3.join("|"), settled.join("|"), other.join("|"), many.join("|"), shownWithdrawn(r3).join("|")]));`, &got)
	want := []string{"Touch-toe.|Non.", "Non.", "Ankle pumps.", "a|…|e|f", "Touch-toe.|Non."}
	if len(got) != len(want) {
		t.Fatalf("got %q, want %q", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("case %d: got %q, want %q", i, got[i], want[i])
		}
	}
}

// U7: a card that showed other words of a fact than the later version it
// reads withdraws them itself (a new session after its stream dropped gets
// no retraction from the server); the same version, the same words, an
// older version or a fact it never showed withdraw nothing.
func TestEchoJS_ACardThatShowedOtherWordsWithdrawsThemItself(t *testing.T) {
	var got []bool
	runNode(t, `
var old = {version: 3, value: "Charlie walking rule."};
console.log(JSON.stringify([
  showedOtherWords(old, {version: 4, value: "After restart: walk with the frame only."}),
  showedOtherWords(old, {version: 3, value: "Charlie walking rule."}),
  showedOtherWords(old, {version: 4, value: "Charlie walking rule."}),
  showedOtherWords(old, {version: 2, value: "Older words."}),
  showedOtherWords(undefined, {version: 4, value: "First read."}),
]));`, &got)
	want := []bool{true, false, false, false, false}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("case %d: got %v, want %v", i, got[i], want[i])
		}
	}
}

// U7: an event stream that goes silent without closing (a NAT drop, a
// Wi-Fi roam) is given up: readSSE with a silence bound throws a
// SilenceError after the events it had, so the card listens again (and
// shows "Reconnecting…") instead of showing superseded words under "Live"
// for as long as the socket stays half-open. Twin: keep-alive comments
// alone keep a quiet stream alive until it closes.
func TestEchoJS_ReadSSEGivesUpAStreamThatFallsSilentButKeepAlivesKeepItOpen(t *testing.T) {
	driver := `
function stalled() {
  var sent = false;
  return new ReadableStream({ pull: function (c) { if (!sent) { sent = true; c.enqueue(new TextEncoder().encode("id: _0\ndata: {\"a\":1}\n\n")); } else return new Promise(function () {}); } });
}
function keptAlive() {
  var n = 0;
  return new ReadableStream({ pull: function (c) {
    return new Promise(function (ok) { setTimeout(function () {
      if (n++ < 8) c.enqueue(new TextEncoder().encode(": keep-alive\n\n")); else c.close();
      ok();
    }, 50); });
  } });
}
var got = {stalled: [], kept: []};
try { await readSSE(stalled(), function (ev) { got.stalled.push(ev.data); return false; }, 200); got.stalledErr = "none"; }
catch (e) { got.stalledErr = e.name; }
try { await readSSE(keptAlive(), function (ev) { got.kept.push(ev.data); return false; }, 200); got.keptErr = "none"; }
catch (e) { got.keptErr = e.name; }
console.log(JSON.stringify(got));`
	var got struct {
		Stalled, Kept       []string
		StalledErr, KeptErr string
	}
	runNode(t, driver, &got)
	if got.StalledErr != "SilenceError" || len(got.Stalled) != 1 || got.Stalled[0] != `{"a":1}` {
		t.Errorf("a stream silent past the bound: %+v, want its one event then a SilenceError", got)
	}
	if got.KeptErr != "none" || len(got.Kept) != 0 {
		t.Errorf("a stream kept alive by comments: %+v, want it read to its end without an error", got)
	}
}

// U15: the card marks a fact past its review date when the date it was
// read with (unsay/staleAfter) passes, as well as one served stale; one
// whose date is ahead, or with none, is not marked.
func TestEchoJS_AFactIsMarkedStaleWhenItsReviewDatePassesWithoutARead(t *testing.T) {
	var got []bool
	runNode(t, `
var due = 1000000;
console.log(JSON.stringify([
  staleAt({stale: false, staleAfter: due}, due - 1),
  staleAt({stale: false, staleAfter: due}, due),
  staleAt({stale: true, staleAfter: 0}, 0),
  staleAt({stale: false, staleAfter: 0}, due * 10),
]));`, &got)
	want := []bool{false, true, true, false}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("case %d: got %v, want %v", i, got[i], want[i])
		}
	}
}
