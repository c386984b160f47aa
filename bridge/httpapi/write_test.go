package httpapi

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf16"

	"github.com/go-chi/chi/v5"

	"github.com/unsay/unsay/models"
	"github.com/unsay/unsay/store"
)

// rawWriteBody is a valid body with the JSON text of one field's value
// spliced in as is (so escapes such as \ud800 reach the server unchanged).
func rawWriteBody(field, jsonText string) []byte {
	m := map[string]string{
		"patient": `"ray"`, "domain": `"weight_bearing"`, "audience": `"user"`,
		"value": `"Full weight-bearing as tolerated."`, "authorId": `"okafor"`, "authorLabel": `"Sarah Okafor, physio"`,
	}
	m[field] = jsonText
	var b bytes.Buffer
	b.WriteString("{")
	first := true
	for _, k := range []string{"patient", "domain", "audience", "value", "authorId", "authorLabel"} {
		if !first {
			b.WriteString(",")
		}
		first = false
		fmt.Fprintf(&b, "%q:%s", k, m[k])
	}
	b.WriteString("}")
	return b.Bytes()
}

// TestWrite_XMLForbiddenCharactersAre400NamingTheFieldAndTheRule: a pasted
// control character in a value was accepted and made every later SSML
// response that mentioned the fact ill-formed. Each class XML 1.0 forbids —
// as a JSON escape, a raw byte, or a lone surrogate escape (which
// encoding/json would quietly turn into U+FFFD) — is refused in the value,
// the author label and the domain: 400 naming the field and the rule, an
// audit row, nothing stored.
func TestWrite_XMLForbiddenCharactersAre400NamingTheFieldAndTheRule(t *testing.T) {
	f := newFixture(t)
	classes := []struct {
		name string
		text string // JSON text inside the string's quotes
	}{
		{"NUL", `\u0000`},
		{"U+0001", `\u0001`},
		{"vertical tab", `\u000b`},
		{"form feed", `\f`},
		{"U+001F", `\u001f`},
		{"U+FFFE", `\ufffe`},
		{"U+FFFF", `\uffff`},
		{"a raw U+FFFF", "\uffff"},
		{"a lone high surrogate", `\ud800`},
		{"a lone low surrogate", `\udfff`},
		{"a high surrogate then a letter", `\ud83ex`},
		{"a raw invalid UTF-8 byte", "\xff"},
	}
	for _, field := range []string{"value", "authorLabel", "domain"} {
		for _, c := range classes {
			t.Run(field+"/"+c.name, func(t *testing.T) {
				seq := f.auditSeq()
				body := rawWriteBody(field, `"Walk`+c.text+`ing"`)
				a := f.signed(body, f.now.Unix())
				if a.status != http.StatusBadRequest {
					t.Fatalf("status = %d, want 400: %s", a.status, a.body)
				}
				var e errorBody
				if err := json.Unmarshal(a.body, &e); err != nil || e.Field != field || !strings.Contains(e.Error, "XML 1.0") {
					t.Fatalf("answer %s: want field %q and the XML rule", a.body, field)
				}
				if row := f.oneAuditRow(seq); row.Reason != store.ReasonInvalid || row.Outcome != store.OutcomeRefused {
					t.Fatalf("audit row = %+v", row)
				}
				if n := f.versions("care://ray/weight_bearing"); n != 2 {
					t.Fatalf("versions = %d, want the seeded 2", n)
				}
			})
		}
	}
	// Positive twin: tab, LF, CR and a surrogate pair (an emoji) are fine.
	value := "Walk\twith the frame.\nRest.\r\nThen more \U0001F9B5."
	a := f.signed(rawWriteBody("value", `"Walk\twith the frame.\nRest.\r\nThen more \ud83e\uddb5."`), f.now.Unix())
	if a.status != http.StatusCreated {
		t.Fatalf("valid twin: %d %s", a.status, a.body)
	}
	r, err := f.st.Read(t.Context(), everything, "care://ray/weight_bearing")
	if err != nil || r.Version.Value != value {
		t.Fatalf("stored %q, %v; want %q", r.Version.Value, err, value)
	}
}

// TestWrite_SpeakableValueOverOneResponseIs400NamingTheLimit: a value of
// 16 KiB was accepted and then locked every turn. A speakable value
// over models.MaxSpeakableValueRunes characters is refused with the limit
// named; one at the limit is accepted, and so is an assistant-only value of
// models.MaxValueBytes (never spoken).
func TestWrite_SpeakableValueOverOneResponseIs400NamingTheLimit(t *testing.T) {
	f := newFixture(t)
	seq := f.auditSeq()
	a := f.signed(writeBody(func(m map[string]any) { m["value"] = strings.Repeat("a", 16<<10) }), f.now.Unix())
	if a.status != http.StatusBadRequest || !strings.Contains(string(a.body), strconv.Itoa(models.MaxSpeakableValueRunes)) ||
		!strings.Contains(string(a.body), `"field":"value"`) {
		t.Fatalf("16 KiB speakable value: %d %s; want 400 naming the limit on value", a.status, a.body)
	}
	if row := f.oneAuditRow(seq); row.Reason != store.ReasonInvalid {
		t.Fatalf("audit row = %+v", row)
	}
	if n := f.versions("care://ray/weight_bearing"); n != 2 {
		t.Fatalf("versions = %d", n)
	}
	if a := f.signed(writeBody(func(m map[string]any) { m["value"] = strings.Repeat("é", models.MaxSpeakableValueRunes) }), f.now.Unix()); a.status != http.StatusCreated {
		t.Fatalf("a value at the limit: %d %s", a.status, a.body)
	}
	if a := f.signed(writeBody(func(m map[string]any) {
		m["domain"], m["audience"], m["value"] = "notes", "assistant", strings.Repeat("a", models.MaxValueBytes)
	}), f.now.Unix()); a.status != http.StatusCreated {
		t.Fatalf("an assistant-only value of MaxValueBytes: %d %s", a.status, a.body)
	}
}

// TestWrite_SixThousandCharactersOfAnyScriptAreOneSpeakableValue: the
// README promises 6,000 characters for a speakable value; 6,000 emoji were
// refused as "at most 16384 bytes" (emoji alone are now refused as holding
// no word, V7: a 4-byte letter, U+20000, is the widest case). Each script
// at the limit is accepted,
// sent as raw UTF-8 and as the \uXXXX escapes Python's json.dumps writes
// (the widest body such a value makes, still under MaxWriteBody); one
// character more is a 400 naming the character limit.
func TestWrite_SixThousandCharactersOfAnyScriptAreOneSpeakableValue(t *testing.T) {
	f := newFixture(t)
	for i, char := range []string{"护", "𠀀"} {
		value := strings.Repeat(char, models.MaxSpeakableValueRunes)
		for _, escaped := range []bool{false, true} {
			body := writeBody(func(m map[string]any) { m["domain"], m["value"] = fmt.Sprintf("script%d", i), value })
			if escaped {
				body = asciiJSON(body)
			}
			if len(body) > MaxWriteBody {
				t.Fatalf("a %d-byte body is over MaxWriteBody", len(body))
			}
			if a := f.signed(body, f.now.Unix()); a.status != http.StatusCreated && a.status != http.StatusOK {
				t.Errorf("%d × %q (escaped %v, %d bytes): %d %s; want accepted", models.MaxSpeakableValueRunes, char, escaped, len(body), a.status, a.body)
			}
		}
		a := f.signed(writeBody(func(m map[string]any) { m["domain"], m["value"] = fmt.Sprintf("script%d", i), value+char }), f.now.Unix())
		if a.status != http.StatusBadRequest || !strings.Contains(string(a.body), fmt.Sprintf("at most %d characters", models.MaxSpeakableValueRunes)) {
			t.Errorf("%d × %q: %d %s; want 400 naming the character limit", models.MaxSpeakableValueRunes+1, char, a.status, a.body)
		}
	}
}

// asciiJSON re-encodes a JSON object with every non-ASCII character as
// \uXXXX escapes (surrogate pairs above U+FFFF), as Python's json.dumps does.
func asciiJSON(body []byte) []byte {
	var b strings.Builder
	for _, r := range string(body) {
		switch {
		case r < 0x80:
			b.WriteRune(r)
		case r > 0xFFFF:
			r1, r2 := utf16.EncodeRune(r)
			fmt.Fprintf(&b, "\\u%04x\\u%04x", r1, r2)
		default:
			fmt.Fprintf(&b, "\\u%04x", r)
		}
	}
	return []byte(b.String())
}

// TestWrite_AssistantOnlyFactsNeedCareWriteAssistantWithOneAnswerForAll:
// a care.write token overwrote assistant-only facts it could not read, and
// a 409 told it which domains were assistant-only. Now every assistant-only
// write without care.write.assistant gets the same 403, byte for byte,
// whether the domain exists or not; nothing is written.
func TestWrite_AssistantOnlyFactsNeedCareWriteAssistantWithOneAnswerForAll(t *testing.T) {
	f := newFixture(t)
	tok := f.token("okafor", []string{"ray"}, models.ScopeWrite)
	var first []byte
	for _, tc := range []struct {
		name string
		body []byte
	}{
		{"an existing assistant-only domain", writeBody(func(m map[string]any) { m["domain"], m["audience"] = "risk", "assistant" })},
		{"a new assistant-only domain", writeBody(func(m map[string]any) { m["domain"], m["audience"] = "mood", "assistant" })},
		{"a speakable domain asked as assistant", writeBody(func(m map[string]any) { m["audience"] = "assistant" })},
		{"an assistant-only domain asked as user", writeBody(func(m map[string]any) { m["domain"] = "risk" })},
	} {
		seq := f.auditSeq()
		a := f.bearer(tc.body, tok)
		if a.status != http.StatusForbidden || !strings.Contains(a.header.Get("WWW-Authenticate"), "care.write.assistant") {
			t.Fatalf("%s: %d %s (%s), want 403 naming care.write.assistant", tc.name, a.status, a.body, a.header.Get("WWW-Authenticate"))
		}
		if first == nil {
			first = a.body
		} else if !bytes.Equal(a.body, first) {
			t.Fatalf("%s: answer %s differs from %s", tc.name, a.body, first)
		}
		if row := f.oneAuditRow(seq); row.Reason != store.ReasonForbidden || row.Actor != "okafor" {
			t.Fatalf("%s: audit row = %+v", tc.name, row)
		}
	}
	if n := f.versions("care-internal://ray/risk"); n != 1 {
		t.Fatalf("risk versions = %d, want 1", n)
	}
	if n := f.versions("care-internal://ray/mood"); n != 0 {
		t.Fatalf("mood versions = %d, want 0", n)
	}
	// A care.link token writes nothing either.
	if a := f.bearer(writeBody(nil), f.token("okafor", []string{"ray"}, models.ScopeLink)); a.status != http.StatusForbidden {
		t.Fatalf("care.link token on /write: %d %s", a.status, a.body)
	}

	// Positive twins: care.write writes a speakable fact; with
	// care.write.assistant the assistant-only one; a signed write (a
	// clinician system) has both rights; and P-3's 409 is still the answer
	// to a writer that holds both.
	if a := f.bearer(writeBody(nil), tok); a.status != http.StatusCreated {
		t.Fatalf("care.write speakable write: %d %s", a.status, a.body)
	}
	both := f.token("okafor", []string{"ray"}, models.ScopeWrite, models.ScopeWriteAssistant)
	if a := f.bearer(writeBody(func(m map[string]any) { m["domain"], m["audience"] = "risk", "assistant" }), both); a.status != http.StatusCreated {
		t.Fatalf("care.write.assistant write: %d %s", a.status, a.body)
	}
	if a := f.signed(writeBody(func(m map[string]any) {
		m["domain"], m["audience"], m["value"] = "mood", "assistant", "Low mood."
	}), f.now.Unix()); a.status != http.StatusCreated {
		t.Fatalf("signed assistant-only write: %d %s", a.status, a.body)
	}
	if a := f.bearer(writeBody(func(m map[string]any) { m["domain"] = "risk"; m["value"] = "x" }), both); a.status != http.StatusConflict {
		t.Fatalf("audience change with both scopes: %d %s, want 409", a.status, a.body)
	}
}

// TestWrite_FloodOfBadSignaturesIs429AfterTheBurstAndAuditedAsOneRow:
// 2,000 bad-signature writes once added 2,000 chained rows that can never
// be pruned. Now a source gets RefusalBurst refusals, then 429 with
// Retry-After; the 429s are audited as one row with their count.
func TestWrite_FloodOfBadSignaturesIs429AfterTheBurstAndAuditedAsOneRow(t *testing.T) {
	f := newFixture(t)
	const attempts = 60
	before := f.auditSeq()
	body := writeBody(nil)
	statuses := map[int]int{}
	for i := range attempts {
		a := f.do(http.MethodPost, "/write", body, map[string]string{
			HeaderTimestamp: strconv.FormatInt(f.now.Unix(), 10),
			HeaderSignature: SignWrite([]byte("not the secret"), f.now.Unix(), body),
		})
		statuses[a.status]++
		if a.status == http.StatusTooManyRequests {
			ra, err := strconv.Atoi(a.header.Get("Retry-After"))
			if err != nil || ra < 1 || ra > int(RefusalEvery/time.Second) {
				t.Fatalf("attempt %d: Retry-After %q", i+1, a.header.Get("Retry-After"))
			}
		}
	}
	if statuses[http.StatusUnauthorized] != RefusalBurst || statuses[http.StatusTooManyRequests] != attempts-RefusalBurst {
		t.Fatalf("statuses = %v, want %d × 401 then 429s", statuses, RefusalBurst)
	}
	// Every attempt is counted, in a bounded number of rows.
	deadline := time.Now().Add(30 * time.Second)
	for {
		rows := f.auditAfter(before.seq - 1)
		var total int64
		for _, r := range rows {
			if r.Seq == before.seq {
				total -= before.count // the row that was last before the flood
			}
			total += r.Count
		}
		if total == attempts {
			if len(rows) > 3 {
				t.Fatalf("%d attempts took %d audit rows: %+v", attempts, len(rows), rows)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("audited %d of %d attempts after 30 s: %+v", total, attempts, rows)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if bad, err := f.st.VerifyAudit(t.Context()); err != nil || bad != 0 {
		t.Fatalf("VerifyAudit = %d, %v", bad, err)
	}

	// Positive twins: a good signature from the same source is served at
	// once; once Retry-After has passed, a bad one is a plain 401 again.
	if a := f.signed(body, f.now.Unix()); a.status != http.StatusCreated {
		t.Fatalf("good signature during the flood: %d %s", a.status, a.body)
	}
	f.clock.Advance(RefusalEvery)
	if a := f.do(http.MethodPost, "/write", body, map[string]string{
		HeaderTimestamp: strconv.FormatInt(f.now.Unix(), 10),
		HeaderSignature: SignWrite([]byte("not the secret"), f.now.Unix(), body),
	}); a.status != http.StatusUnauthorized {
		t.Fatalf("after Retry-After: %d, want 401", a.status)
	}
}

func TestRefusalLimiter_IsPerSourceAndRefills(t *testing.T) {
	l := newRefusalLimiter()
	now := time.Unix(1_800_000_000, 0)
	for i := range RefusalBurst {
		if ok, _ := l.take("198.51.100.7", now); !ok {
			t.Fatalf("refusal %d refused within the burst", i+1)
		}
	}
	ok, wait := l.take("198.51.100.7", now)
	if ok || wait <= 0 || wait > RefusalEvery {
		t.Fatalf("past the burst: ok %v, wait %v", ok, wait)
	}
	if ok, _ := l.take("203.0.113.9", now); !ok {
		t.Fatal("another source shares the first one's budget")
	}
	if ok, _ := l.take("198.51.100.7", now.Add(wait)); !ok {
		t.Fatal("no refill after the wait it announced")
	}
}

// withFullDisk makes the fixture's store report SQLITE_FULL for any write
// that needs a new page (max_page_count pinned at the current size) on the
// pool's one connection, after warming the write path's prepared
// statements (preparing needs a connection of its own).
func withFullDisk(t *testing.T, f *fixture) (restore func()) {
	t.Helper()
	for _, v := range []string{"Warm one.", "Warm two."} {
		if a := f.signed(writeBody(func(m map[string]any) { m["domain"], m["value"] = "warm_up", v }), f.now.Unix()); a.status != http.StatusCreated {
			t.Fatalf("warm-up write: %d %s", a.status, a.body)
		}
	}
	for range 2 { // a refused attempt, then its repeat (the collapse path)
		f.do(http.MethodPost, "/write", []byte("{}"), map[string]string{HeaderTimestamp: "1", HeaderSignature: "v1=00"})
	}
	undo, err := f.st.SimulateFullDisk(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return func() {
		if err := undo(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestWrite_FullDiskIs503WithRetryAfterAndTheReason: a full disk made
// every write a bare 500 "internal error". Now it is 503 with Retry-After
// and the reason, and nothing is written. (WriteHealth, which readiness
// reads, is the store's test: TestPublish_FullDisk….)
func TestWrite_FullDiskIs503WithRetryAfterAndTheReason(t *testing.T) {
	f := newFixture(t)
	restore := withFullDisk(t, f)
	big := writeBody(func(m map[string]any) {
		m["domain"], m["audience"], m["value"] = "notes", "assistant", strings.Repeat("n", models.MaxValueBytes)
	})
	a := f.signed(big, f.now.Unix())
	if a.status != http.StatusServiceUnavailable || a.header.Get("Retry-After") == "" || !strings.Contains(string(a.body), "the disk is full") {
		t.Fatalf("write on a full disk: %d (Retry-After %q) %s; want 503 with Retry-After naming the disk", a.status, a.header.Get("Retry-After"), a.body)
	}
	if n := f.versions("care-internal://ray/notes"); n != 0 {
		t.Fatalf("versions = %d on a full disk", n)
	}
	if strings.Contains(f.logs.String(), "write: store failure") {
		t.Fatalf("logged as a bare store failure:\n%s", f.logs.String())
	}
	// Positive twin: room again, the same write is accepted.
	restore()
	if a := f.signed(big, f.now.Unix()); a.status != http.StatusCreated {
		t.Fatalf("after the disk has room: %d %s", a.status, a.body)
	}
}

// holdWriteLock takes the SQLite file's write lock at path on a connection
// of its own (BEGIN EXCLUSIVE), as another process (`sqlite3 unsay.db
// 'BEGIN EXCLUSIVE;'`) would, until release is called.
func holdWriteLock(t *testing.T, path string) (release func()) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(context.Background(), "BEGIN EXCLUSIVE"); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	release = func() {
		once.Do(func() {
			if _, err := conn.ExecContext(context.Background(), "ROLLBACK"); err != nil {
				t.Error(err)
			}
			conn.Close()
			db.Close()
		})
	}
	t.Cleanup(release)
	return release
}

// TestWrite_RefusedWhileAnotherProcessHoldsTheLockIs503WithinTheBusyTimeoutAndLosesNothing
// (T4): a signed write refused because another process held the
// database's lock waited the busy timeout, and then its refusal's audit
// row waited a second one before the 503 was written — past the server's
// write deadline once (31 s). Now the 503 comes within one busy timeout
// (bounded here at 1.5 of it), says the database is busy and nothing was
// written, with Retry-After; nothing is written; and the refusal's audit
// row, kept meanwhile, is appended once the lock is released, the chain
// intact. Twin: released, the same write is accepted.
func TestWrite_RefusedWhileAnotherProcessHoldsTheLockIs503WithinTheBusyTimeoutAndLosesNothing(t *testing.T) {
	const busy = 2 * time.Second
	f := newFixtureWith(t, store.Options{BusyTimeout: busy})
	mark := f.auditSeq()
	release := holdWriteLock(t, f.dsn)
	body := writeBody(nil)
	start := time.Now()
	a := f.signed(body, f.now.Unix())
	if d := time.Since(start); d > busy*3/2 {
		t.Errorf("the refused write was answered after %s; the busy timeout is %s", d, busy)
	}
	if a.status != http.StatusServiceUnavailable || a.header.Get("Retry-After") == "" ||
		!strings.Contains(string(a.body), "the database is busy") || !strings.Contains(string(a.body), "nothing was written") {
		t.Fatalf("write while locked: %d (Retry-After %q) %s; want 503 with Retry-After saying the database is busy and nothing was written",
			a.status, a.header.Get("Retry-After"), a.body)
	}
	if n := f.versions("care://ray/weight_bearing"); n != 2 {
		t.Fatalf("versions = %d after a refused write, want the seeded 2", n)
	}

	release()
	deadline := time.Now().Add(10 * time.Second)
	var rows []store.AuditEntry
	for {
		rows = f.auditAfter(mark.seq)
		if len(rows) > 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if len(rows) != 1 || rows[0].Outcome != store.OutcomeRefused || rows[0].Reason != store.ReasonUnavailable ||
		rows[0].Actor != ActorHMAC || rows[0].URI != "care://ray/weight_bearing" || rows[0].Count != 1 {
		t.Fatalf("audit rows after the lock was released = %+v, want the refusal's one row (refused, unavailable)", rows)
	}
	if bad, err := f.st.VerifyAudit(context.Background()); err != nil || bad != 0 {
		t.Fatalf("VerifyAudit = %d, %v; want intact", bad, err)
	}
	if strings.Contains(f.logs.String(), "audit rows lost") {
		t.Fatalf("an audit row was lost:\n%s", f.logs.String())
	}

	// Positive twin: the same write, the lock released, is accepted.
	if a := f.signed(body, f.now.Unix()); a.status != http.StatusCreated {
		t.Fatalf("after the lock was released: %d %s", a.status, a.body)
	}
	if n := f.versions("care://ray/weight_bearing"); n != 3 {
		t.Fatalf("versions = %d after the accepted write, want 3", n)
	}
}

// TestClose_LogsAndCountsTheAuditRowsTheStoreStillCannotCommit (T4): a
// refusal's audit row kept while the store cannot commit, and still not
// committable when the API closes, is logged at ERROR and counted
// (Config.OnAuditLost), not dropped silently. Twin: released before Close,
// the row is appended and nothing is counted lost.
func TestClose_LogsAndCountsTheAuditRowsTheStoreStillCannotCommit(t *testing.T) {
	for _, released := range []bool{false, true} {
		t.Run(map[bool]string{false: "still locked", true: "released"}[released], func(t *testing.T) {
			f := newFixtureWith(t, store.Options{BusyTimeout: 500 * time.Millisecond})
			logs := &syncBuffer{}
			var lost atomic.Int64
			api := New(Config{Store: f.st, WriteSecret: []byte(writeSecret), PublicURL: publicURL, Clock: f.clock.Now,
				Logger: slog.New(slog.NewTextHandler(logs, nil)), OnAuditLost: func(n int64) { lost.Add(n) }})
			r := chi.NewRouter()
			api.Routes(r)
			mark := f.auditSeq()
			release := holdWriteLock(t, f.dsn)
			body := writeBody(nil)
			req := httptest.NewRequest(http.MethodPost, "/write", bytes.NewReader(body))
			req.Header.Set(HeaderTimestamp, strconv.FormatInt(f.now.Unix(), 10))
			req.Header.Set(HeaderSignature, SignWrite([]byte(writeSecret), f.now.Unix(), body))
			rec := httptest.NewRecorder()
			r.ServeHTTP(rec, req)
			if rec.Code != http.StatusServiceUnavailable {
				t.Fatalf("write while locked: %d %s", rec.Code, rec.Body)
			}
			if released {
				release()
			}
			api.Close()
			rows := f.auditAfter(mark.seq)
			if released {
				if lost.Load() != 0 || len(rows) != 1 || rows[0].Reason != store.ReasonUnavailable {
					t.Fatalf("released before Close: lost %d, rows %+v; want the refusal's row and nothing lost", lost.Load(), rows)
				}
				return
			}
			if lost.Load() != 1 || !strings.Contains(logs.String(), "level=ERROR") || !strings.Contains(logs.String(), "audit rows lost") ||
				!strings.Contains(logs.String(), "reason=unavailable") {
				t.Fatalf("closed while locked: lost %d, log:\n%s\nwant 1 counted and an ERROR line naming the reason", lost.Load(), logs.String())
			}
			release()
			if rows := f.auditAfter(mark.seq); len(rows) != 0 {
				t.Fatalf("rows appended after Close: %+v", rows)
			}
		})
	}
}

// TestWrite_ClientHangingUpIsAuditedAbandonedNotLoggedAsAStoreFailure: a
// client that went away mid-write was logged at ERROR as a store failure
// and left no audit row. Now the attempt is audited abandoned, nothing is
// written, and nothing is logged at ERROR.
func TestWrite_ClientHangingUpIsAuditedAbandonedNotLoggedAsAStoreFailure(t *testing.T) {
	f := newFixture(t)
	body := writeBody(nil)
	req := func(ctx context.Context) *http.Request {
		r := httptest.NewRequestWithContext(ctx, http.MethodPost, "/write", bytes.NewReader(body))
		r.Header.Set(HeaderTimestamp, strconv.FormatInt(f.now.Unix(), 10))
		r.Header.Set(HeaderSignature, SignWrite([]byte(writeSecret), f.now.Unix(), body))
		return r
	}
	gone, hangUp := context.WithCancel(t.Context())
	hangUp() // the client hung up after sending its body
	seq := f.auditSeq()
	f.router.ServeHTTP(httptest.NewRecorder(), req(gone))
	row := f.oneAuditRow(seq)
	if row.Outcome != store.OutcomeAbandoned || row.Reason != store.ReasonAbandoned || row.Actor != ActorHMAC {
		t.Fatalf("audit row = %+v, want abandoned", row)
	}
	if n := f.versions("care://ray/weight_bearing"); n != 2 {
		t.Fatalf("versions = %d, want the seeded 2", n)
	}
	if logs := f.logs.String(); strings.Contains(logs, "level=ERROR") || !strings.Contains(logs, "write abandoned") {
		t.Fatalf("log:\n%s\nwant an INFO line about the abandoned write and no ERROR", logs)
	}
	// Positive twin: the same request with the client still there commits.
	rec := httptest.NewRecorder()
	f.router.ServeHTTP(rec, req(t.Context()))
	if rec.Code != http.StatusCreated {
		t.Fatalf("live client: %d %s", rec.Code, rec.Body)
	}
}

// TestVerify_P26_ShowsTheSignedHeadAndFailsARewrittenChain: the public
// /verify reports each chain's head as signed at commit and the public key
// to check it with; a chain rewritten with recomputed hashes (by someone
// with the database in hand) reads "head signature does not match".
func TestVerify_P26_ShowsTheSignedHeadAndFailsARewrittenChain(t *testing.T) {
	f := newFixture(t)
	get := func() Chain {
		t.Helper()
		a := f.do(http.MethodGet, "/verify?uri=care://ray/weight_bearing", nil, nil)
		if a.status != http.StatusOK {
			t.Fatalf("/verify: %d %s", a.status, a.body)
		}
		var c Chain
		if err := json.Unmarshal(a.body, &c); err != nil {
			t.Fatal(err)
		}
		return c
	}
	c := get()
	pub := f.st.PublicKey()
	if !c.Intact || c.Head == nil || !c.Head.SignatureValid || c.Head.Version != 2 || c.Head.Signature == "" ||
		c.SigningKey.PublicKey != store.FormatPublicKey(pub) || c.Head.KeyID != store.KeyID(pub) || c.SigningKey.Algorithm != "Ed25519" {
		t.Fatalf("intact chain: %+v (head %+v)", c, c.Head)
	}
	for _, v := range c.Versions {
		if v.Signature == "" {
			t.Fatalf("v%d shows no head signature", v.Version)
		}
	}

	// The attacker rewrites v1 and recomputes v1's and v2's hashes, on a
	// connection of its own to the database file.
	db, err := sql.Open("sqlite", "file:"+f.dsn+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var (
		writtenAt [2]int64
		author    [2]string
		value     [2]string
	)
	for i := range 2 {
		if err := db.QueryRow(`SELECT written_at, author_id, value FROM versions WHERE patient = 'ray' AND domain = 'weight_bearing' AND n = ?`, i+1).
			Scan(&writtenAt[i], &author[i], &value[i]); err != nil {
			t.Fatal(err)
		}
	}
	value[0] = "Full weight-bearing from day one."
	h1 := store.VersionHash("", value[0], time.UnixMilli(writtenAt[0]), author[0])
	h2 := store.VersionHash(h1, value[1], time.UnixMilli(writtenAt[1]), author[1])
	for n, q := range map[int][]any{
		1: {`UPDATE versions SET value = ?, hash = ? WHERE patient = 'ray' AND domain = 'weight_bearing' AND n = 1`, []byte(value[0]), h1},
		2: {`UPDATE versions SET prev_hash = ?, hash = ? WHERE patient = 'ray' AND domain = 'weight_bearing' AND n = 2`, h1, h2},
	} {
		if _, err := db.Exec(q[0].(string), q[1:]...); err != nil {
			t.Fatalf("rewrite v%d: %v", n, err)
		}
	}
	c = get()
	if c.Intact || c.BrokenAt != 1 || c.Problem != store.ProblemHeadSignature || c.Head.SignatureValid {
		t.Fatalf("rewritten chain: intact %v, broken at %d, problem %q, head %+v; want %q at v1", c.Intact, c.BrokenAt, c.Problem, c.Head, store.ProblemHeadSignature)
	}
	if strings.Contains(fmt.Sprint(c), "Full weight-bearing from day one") {
		t.Fatal("/verify shows a value")
	}
}

// TestClose_WritesTheCountOfRateLimitedAttemptsNotYetAudited: 429s are
// counted for up to a second before their row is written; Close (at
// shutdown) writes them at once, so a stop loses none.
func TestClose_WritesTheCountOfRateLimitedAttemptsNotYetAudited(t *testing.T) {
	f := newFixture(t)
	body := writeBody(nil)
	bad := map[string]string{HeaderTimestamp: strconv.FormatInt(f.now.Unix(), 10), HeaderSignature: SignWrite([]byte("wrong"), f.now.Unix(), body)}
	for range RefusalBurst {
		f.do(http.MethodPost, "/write", body, bad)
	}
	seq := f.auditSeq()
	for range 3 {
		if a := f.do(http.MethodPost, "/write", body, bad); a.status != http.StatusTooManyRequests {
			t.Fatalf("status %d, want 429", a.status)
		}
	}
	f.api.Close()
	rows := f.auditAfter(seq.seq)
	if len(rows) != 1 || rows[0].Count != 3 || rows[0].Reason != store.ReasonRateLimited || rows[0].Actor != ActorAnonymous {
		t.Fatalf("rows after Close = %+v, want one rate_limited row counting 3", rows)
	}
	f.api.Close() // nothing pending: writes nothing
	if rows := f.auditAfter(seq.seq); len(rows) != 1 {
		t.Fatalf("a second Close wrote rows: %+v", rows)
	}
}
