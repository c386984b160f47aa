package cmd

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/unsay/unsay/bridge/app"
	"github.com/unsay/unsay/bridge/auth"
	"github.com/unsay/unsay/bridge/httpapi"
	"github.com/unsay/unsay/bridge/oauth"
	"github.com/unsay/unsay/models"
	"github.com/unsay/unsay/store"
)

// cmdToken mints a development bearer token (HS256, aud {public-url}/mcp)
// and prints only the JWT on stdout:
//
//	unsay token --patient ray [--patient …] --scope care.read.user [--scope …]
//	            [--sub NAME] [--ttl 1h] [--public-url URL]
//
// --ttl is at most 30 days (maxDevTokenTTL), with --db at most
// oauth.InternalTokenMaxTTL (a day).
//
// Without --sub it mints a unique subject (dev-<random>) and says so on
// stderr: two tokens never share a subject, and so never an MCP session
// identity, by accident (P-21). For /write with a bearer token the
// subject must equal authorId: give --sub. The secret is
// UNSAY_TOKEN_SECRET, or auth.DevTokenSecret (said on stderr).
func cmdToken(ctx context.Context, args []string) error {
	c, fs := newCommand("token")
	var patients, scopes listFlag
	fs.Var(&patients, "patient", "patient id the token is bound to (repeatable)")
	fs.Var(&scopes, "scope", "scope: care.read.user, care.read.assistant, care.write, care.write.assistant or care.link (repeatable)")
	sub := fs.String("sub", "", "the token's subject (sub): the audit actor; for /write it must equal authorId (default: a unique dev-… subject)")
	ttl := fs.Duration("ttl", time.Hour, "lifetime of the token, e.g. 30m or 24h")
	publicURL := fs.String("public-url", app.DefaultURL, "the server's public URL; the token's aud is {public-url}/mcp")
	db := fs.String("db", "", "sign with the embedded authorization server's key in this database (a public URL, where HS256 is off)")
	env := fs.String("envelope", "none", "with --db: the envelope the keys are sealed with (none, local, kms)")
	if _, err := parseFlags(c, fs, args); err != nil {
		return err
	}
	valid := make([]string, 0, 3)
	for _, s := range models.AllScopes() {
		valid = append(valid, string(s))
	}
	switch {
	case len(patients) == 0:
		return usageErr("token", "--patient is required: the patient the token reads or writes, e.g. --patient ray")
	case len(scopes) == 0:
		return usageErr("token", "--scope is required: one or more of %s", strings.Join(valid, ", "))
	case *ttl <= 0:
		return usageErr("token", "--ttl %s: want a positive duration such as 1h", *ttl)
	case *db != "" && *ttl > oauth.InternalTokenMaxTTL:
		return usageErr("token", "--ttl %s: a token signed with the authorization server's key (--db) lives at most %s; mint a new one when it ends", *ttl, fmtHours(oauth.InternalTokenMaxTTL))
	case *db == "" && *ttl > maxDevTokenTTL:
		return usageErr("token", "--ttl %s: a development token lives at most %s (30 days); mint a new one when it ends", *ttl, fmtHours(maxDevTokenTTL))
	}
	for _, p := range patients {
		if err := patientIDErr("token", p); err != nil {
			return err
		}
	}
	sc := make([]models.Scope, len(scopes))
	for i, s := range scopes {
		sc[i] = models.Scope(s)
		if !sc[i].Valid() {
			return usageErr("token", "--scope %q is not a scope Unsay knows: want %s", s, strings.Join(valid, ", "))
		}
	}
	if err := checkBaseURL(*publicURL); err != nil {
		return usageErr("token", "--public-url %q is malformed: %v", *publicURL, err)
	}
	if *sub != "" && !store.ValidAuthorID(*sub) {
		return usageErr("token", "--sub %q: a subject is 1–64 characters of a-z 0-9 _ . @ : - (the audit actor; for /write it must equal authorId, which takes only these), e.g. --sub okafor", *sub)
	}
	subject := *sub
	if subject == "" {
		subject = "dev-" + randomHex(6)
		fmt.Fprintf(os.Stderr, "unsay token: no --sub: the subject is %s (give --sub NAME to write as a clinician)\n", subject)
	}
	if *db != "" {
		tok, err := mintWithAS(ctx, *db, *env, strings.TrimRight(*publicURL, "/"), subject, sc, patients, *ttl) // main_oauth.go
		if err != nil {
			return err
		}
		fmt.Println(tok)
		return nil
	}
	tok, err := auth.Mint(auth.Config{Secret: secretFromEnv("UNSAY_TOKEN_SECRET", auth.DevTokenSecret, "token"), PublicURL: *publicURL},
		subject, sc, patients, *ttl)
	if err != nil {
		return err
	}
	fmt.Println(tok)
	return nil
}

// maxDevTokenTTL caps a development (HS256) token's --ttl: 30 days. A
// bearer token that outlives any test session (an 11-year one was minted
// without comment) is a typo or a token nobody will revoke.
const maxDevTokenTTL = 30 * 24 * time.Hour

// fmtHours writes d as whole hours ("24h", "720h"), as --ttl takes it.
func fmtHours(d time.Duration) string { return strconv.Itoa(int(d/time.Hour)) + "h" }

func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return strconv.FormatInt(time.Now().UnixNano(), 36)
	}
	return fmt.Sprintf("%x", b)
}

// parseStaleAfter reads --stale-after: an RFC 3339 time, or a duration from
// now ("72h"), as the RFC 3339 time /write takes. Either must be after now:
// an instruction past its review date the moment it is written would be
// read to the patient as past its review date at once, so a negative
// duration or a past time is a typo, refused.
func parseStaleAfter(v string, now time.Time) (string, error) {
	const want = "want a time in the future (RFC 3339, 2026-10-12T09:00:00Z) or a positive duration from now (72h)"
	if d, err := time.ParseDuration(v); err == nil {
		if d <= 0 {
			return "", fmt.Errorf("the review date would be now or in the past: %s", want)
		}
		return now.Add(d).UTC().Format(time.RFC3339), nil
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return "", errors.New(want)
	}
	if !t.After(now) {
		return "", fmt.Errorf("that is in the past: %s", want)
	}
	return v, nil
}

// writeFlags maps /write's JSON fields to the flags of `unsay write`, so a
// refusal names the flag a person typed.
var writeFlags = map[string]string{
	"patient": "--patient", "domain": "--domain", "value": "--value", "authorId": "--author",
	"authorLabel": "--author-label", "audience": "--audience", "staleAfter": "--stale-after", "priority": "--priority",
}

// cmdWrite signs a clinician's revision with the shared write secret and
// POSTs it to {url}/write, then prints what was saved — "saved
// care://ray/weight_bearing as version 3; Ray will hear the retraction at
// his next turn if its words changed (…)" — or, with --json, the server's JSON answer. A refusal is
// printed with the flag it concerns and exits 1:
//
//	unsay write --url URL --patient ray --domain weight_bearing --value "…"
//	            --author okafor --author-label "Sarah Okafor, physio"
//	            [--audience user] [--stale-after T] [--priority P] [--json]
//
// --stale-after is an RFC 3339 time or a duration from now ("72h"), after
// now (parseStaleAfter). A UNSAY_WRITE_SECRET under app.MinSecretBytes is
// refused before anything is sent: serve refuses such a secret.
// The secret is UNSAY_WRITE_SECRET, or httpapi.DevWriteSecret (said on stderr).
func cmdWrite(ctx context.Context, args []string) error {
	c, fs := newCommand("write")
	base := fs.String("url", app.DefaultURL, "the server's base URL")
	req := httpapi.WriteRequest{}
	fs.StringVar(&req.Patient, "patient", "", "patient id, e.g. ray")
	fs.StringVar(&req.Domain, "domain", "", "domain, e.g. weight_bearing")
	fs.StringVar(&req.Value, "value", "", "the instruction, as the clinician wrote it")
	fs.StringVar(&req.AuthorID, "author", "", "the clinician's id, e.g. okafor")
	fs.StringVar(&req.AuthorLabel, "author-label", "", `how the patient hears the author, e.g. "Sarah Okafor, physio"`)
	audience := fs.String("audience", string(models.AudienceUser), "user (speakable) or assistant (never spoken); fixed per domain")
	staleAfter := fs.String("stale-after", "", "RFC 3339 time, or a duration from now (72h), after which the fact is stale")
	priority := fs.String("priority", "", "0…1, a hint for hosts")
	asJSON := fs.Bool("json", false, "print the server's JSON answer instead of a sentence")
	audioFile := fs.String("audio", "", "a clip the fact carries (.mp3 or .wav, at most 1 MiB; a speakable one must be an MP3 Alexa plays); --value describes it")
	audioType := fs.String("audio-type", "", "the clip's MIME type (audio/mpeg or audio/wav); default from the file's extension")
	newTopic := fs.Bool("new-topic", false, "create a topic the patient has no notes of (without it such a write is refused, naming his topics: a mistyped --domain is not saved)")
	newPatient := fs.Bool("new-patient", false, "write a patient's first note (without it a --patient with no notes on record is refused: a mistyped id is not saved)")
	if _, err := parseFlags(c, fs, args); err != nil {
		return err
	}
	req.ExistingTopic, req.ExistingPatient = !*newTopic, !*newPatient
	if *audioFile != "" {
		clip, typ, err := readClip(*audioFile, *audioType)
		if err != nil {
			return usageErr("write", "--audio %s: %v", *audioFile, err)
		}
		req.Audio, req.AudioType = base64.StdEncoding.EncodeToString(clip), typ
	}
	for _, f := range []struct{ name, v, example string }{
		{"patient", req.Patient, "--patient ray"}, {"domain", req.Domain, "--domain weight_bearing"},
		{"value", req.Value, `--value "Full weight-bearing as tolerated."`}, {"author", req.AuthorID, "--author okafor"},
		{"author-label", req.AuthorLabel, `--author-label "Sarah Okafor, physio"`},
	} {
		if strings.TrimSpace(f.v) == "" {
			return usageErr("write", "--%s is required, e.g. %s", f.name, f.example)
		}
	}
	if err := patientIDErr("write", req.Patient); err != nil {
		return err
	}
	req.Audience = models.Audience(*audience)
	if !req.Audience.Valid() {
		return usageErr("write", "--audience %q: want user (speakable) or assistant (never spoken)", *audience)
	}
	if *staleAfter != "" {
		at, err := parseStaleAfter(*staleAfter, time.Now())
		if err != nil {
			return usageErr("write", "--stale-after %q: %v", *staleAfter, err)
		}
		req.StaleAfter = at
	}
	if *priority != "" {
		p, err := strconv.ParseFloat(*priority, 64)
		if err != nil || p < 0 || p > 1 {
			return usageErr("write", "--priority %q: want a number from 0 to 1", *priority)
		}
		req.Priority = &p
	}
	if err := checkBaseURL(*base); err != nil {
		return usageErr("write", "--url %q is malformed: %v", *base, err)
	}
	body, err := json.Marshal(req)
	if err != nil {
		return err
	}
	secret := secretFromEnv("UNSAY_WRITE_SECRET", httpapi.DevWriteSecret, "write")
	if n := len(secret); n < app.MinSecretBytes {
		return usageErr("write", "UNSAY_WRITE_SECRET is %d bytes: unsay serve refuses a write secret under %d bytes, so no server can have this one; set the server's secret", n, app.MinSecretBytes)
	}
	url := strings.TrimRight(*base, "/") + "/write"
	for attempt := 1; ; attempt++ {
		ts := time.Now().Unix()
		status, answer, err := post(ctx, url, body, map[string]string{
			httpapi.HeaderTimestamp: strconv.FormatInt(ts, 10),
			httpapi.HeaderSignature: httpapi.SignWrite(secret, ts, body),
		})
		if err != nil {
			return err
		}
		// A fresh invocation is never a replay of itself: "replayed" means an
		// identical body was signed in the same second by an earlier write
		// (a revert, say). Sign again in the next second so it is applied.
		var r httpapi.WriteResponse
		if status == http.StatusOK && json.Unmarshal(answer, &r) == nil && r.Replayed && attempt < 3 {
			time.Sleep(time.Until(time.Unix(ts+1, 0)))
			continue
		}
		if *asJSON {
			return printAnswer(url, status, answer, nil)
		}
		return printAnswer(url, status, answer, func(answer []byte) string { return writeSentence(req, answer) })
	}
}

// readClip reads the --audio file, at most models.MaxAudioBytes, and its
// MIME type: typ if given, else from the extension (.mp3, .wav). The
// server checks the container (store.Validate).
func readClip(path, typ string) ([]byte, string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, "", err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, models.MaxAudioBytes+1))
	if err != nil {
		return nil, "", err
	}
	if len(b) > models.MaxAudioBytes {
		return nil, "", fmt.Errorf("a clip may be at most %d bytes (1 MiB)", models.MaxAudioBytes)
	}
	if typ == "" {
		switch strings.ToLower(filepath.Ext(path)) {
		case ".mp3":
			typ = models.AudioMPEG
		case ".wav", ".wave":
			typ = models.AudioWAV
		default:
			return nil, "", errors.New("cannot tell its type from the name: add --audio-type audio/mpeg or audio/wav")
		}
	}
	return b, typ, nil
}

// writeSentence says what an accepted write did, for a person.
func writeSentence(req httpapi.WriteRequest, answer []byte) string {
	var r httpapi.WriteResponse
	if err := json.Unmarshal(answer, &r); err != nil || r.URI == "" {
		return string(answer)
	}
	fact := r.URI
	if i := strings.LastIndex(fact, "/v"); i > 0 {
		fact = fact[:i]
	}
	who := capitalize(req.Patient)
	if a := r.Audio; a != nil && !r.Unchanged && !r.Replayed {
		fact += fmt.Sprintf(" (a %.1f s %s clip)", float64(a.DurationMs)/1000, a.MIMEType)
	}
	switch {
	case r.Unchanged:
		return fmt.Sprintf("unchanged: %s is already version %d with these words; nothing was saved\n", fact, r.Version)
	case r.Replayed:
		return fmt.Sprintf("already saved: %s version %d (this signed request was applied before)\n", fact, r.Version)
	case r.Version == 1 && r.NewPatient:
		return fmt.Sprintf("saved %s as version 1, but %q had no care notes before this: a new patient, who may have no device yet. "+
			"If you meant another patient, this change did not reach them: write it again with the right --patient\n", fact, req.Patient)
	case r.Version == 1 && r.NewTopic:
		// Only with --new-topic: without it the server refuses a topic the
		// patient has no notes of (ExistingTopic; finding U12).
		return fmt.Sprintf("saved %s as version 1, a new topic for %s (his other topics: %s)%s\n",
			fact, req.Patient, strings.Join(r.Topics, ", "), newTopicHearing(req, who))
	case req.Audience == models.AudienceAssistant:
		return fmt.Sprintf("saved %s as version %d; assistant-only: it is never spoken to %s\n", fact, r.Version, who)
	case r.Version == 1:
		return fmt.Sprintf("saved %s as version 1 (a new topic); %s will hear it at his next turn\n", fact, who)
	}
	// The 201 does not say whether the words changed: a version with the
	// previous words and only a new author, review date or priority is
	// saved, and Ray hears nothing of it.
	return fmt.Sprintf("saved %s as version %d; %s will hear the retraction at his next turn if its words changed "+
		"(a new author, review date or priority with the same words is not retracted)\n", fact, r.Version, who)
}

// newTopicHearing is what a deliberate new topic does, after the warning.
func newTopicHearing(req httpapi.WriteRequest, who string) string {
	if req.Audience == models.AudienceAssistant {
		return "; assistant-only: it is never spoken to " + who
	}
	return "; " + who + " will hear it at his next turn"
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// cmdLink creates a six-digit device-linking code for a patient through
// POST {url}/link and prints the code, how long it is valid and until when
// in local time ("482913  valid for 10 minutes, until 10:24 BST"), and the
// server's note when an older code was retired (at most 3 live codes):
//
//	unsay link --url URL --patient ray [--token T] [--public-url URL] [--json]
//
// Without --token it mints a five-minute care.link token bound to the
// patient (sub "unsay-link", aud {public-url}/mcp, public URL defaulting to
// --url) with UNSAY_TOKEN_SECRET or the development default.
func cmdLink(ctx context.Context, args []string) error {
	c, fs := newCommand("link")
	base := fs.String("url", app.DefaultURL, "the server's base URL")
	patient := fs.String("patient", "", "patient id, e.g. ray")
	token := fs.String("token", "", "a bearer token with care.link bound to the patient (default: mint one)")
	publicURL := fs.String("public-url", "", "the server's public URL, for a minted token's audience (default: --url)")
	asJSON := fs.Bool("json", false, "print the server's JSON answer instead of a sentence")
	if _, err := parseFlags(c, fs, args); err != nil {
		return err
	}
	if *patient == "" {
		return usageErr("link", "--patient is required: the patient the Echo will be linked to, e.g. --patient ray")
	}
	if err := patientIDErr("link", *patient); err != nil {
		return err
	}
	if err := checkBaseURL(*base); err != nil {
		return usageErr("link", "--url %q is malformed: %v", *base, err)
	}
	if *token == "" {
		pub := *publicURL
		if pub == "" {
			pub = *base
		}
		tok, err := auth.Mint(auth.Config{Secret: secretFromEnv("UNSAY_TOKEN_SECRET", auth.DevTokenSecret, "token"), PublicURL: pub},
			"unsay-link", []models.Scope{models.ScopeLink}, []string{*patient}, 5*time.Minute)
		if err != nil {
			return err
		}
		*token = tok
	}
	body, err := json.Marshal(httpapi.LinkRequest{Patient: *patient})
	if err != nil {
		return err
	}
	format := func(answer []byte) string { return linkSentence(answer, *patient, time.Local) }
	if *asJSON {
		format = nil
	}
	return postAndPrint(ctx, strings.TrimRight(*base, "/")+"/link", body, map[string]string{"Authorization": "Bearer " + *token}, format)
}

// linkSentence formats a /link answer for patient in loc: the code, its
// validity and its expiry in local time, who says it, and any note the
// server added.
func linkSentence(answer []byte, patient string, loc *time.Location) string {
	var l struct {
		httpapi.LinkResponse
		Note string `json:"note"`
	}
	if err := json.Unmarshal(answer, &l); err != nil || l.Code == "" {
		return string(answer)
	}
	exp, err := time.Parse(time.RFC3339, l.ExpiresAt)
	if err != nil {
		return fmt.Sprintf("%s\texpires %s\n", l.Code, l.ExpiresAt)
	}
	s := fmt.Sprintf("%s\tvalid for %s, until %s (single use); %s says “my code is %s”\n",
		l.Code, spokenMinutes(store.LinkCodeTTL), exp.In(loc).Format("15:04 MST"), capitalize(patient), strings.Join(strings.Split(l.Code, ""), " "))
	if l.Note != "" {
		s += l.Note + "\n"
	}
	return s
}

func spokenMinutes(d time.Duration) string {
	m := int(d.Round(time.Minute) / time.Minute)
	if m == 1 {
		return "1 minute"
	}
	return fmt.Sprintf("%d minutes", m)
}

// secretFromEnv returns the secret in env, or dev (announced on stderr as
// the development default for what) when env is unset or empty.
func secretFromEnv(env, dev, what string) []byte {
	if v := os.Getenv(env); v != "" {
		return []byte(v)
	}
	fmt.Fprintf(os.Stderr, "unsay: %s is unset: using the DEVELOPMENT default %s secret\n", env, what)
	return []byte(dev)
}

// postAndPrint POSTs a JSON body with headers (30 s timeout) and prints the
// answer on stdout, through format when given and the answer is 2xx. A
// non-2xx answer is reported on stderr and exits 1.
func postAndPrint(ctx context.Context, url string, body []byte, headers map[string]string, format func([]byte) string) error {
	status, answer, err := post(ctx, url, body, headers)
	if err != nil {
		return err
	}
	return printAnswer(url, status, answer, format)
}

// post POSTs a JSON body with headers (30 s timeout) and returns the status
// and up to 1 MiB of the answer.
func post(ctx context.Context, url string, body []byte, headers map[string]string) (int, []byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	started := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, noAnswer(url, time.Since(started), err)
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return 0, nil, fmt.Errorf("reading the answer: %w", err)
	}
	return resp.StatusCode, answer, nil
}

// noAnswer is the error for a request to url that got no answer after
// waited: a timeout means a server took the request and did not answer in
// time — busy (a database locked by another process, say), so the request
// may or may not have been applied, and the URL is not to blame; any other
// failure (refused, unknown host) means no server answers there.
func noAnswer(url string, waited time.Duration, err error) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("no answer from %s within %s: a server there is busy (a database locked by another process, say) or the host does not answer; the request may or may not have been applied — see the server's log, and once it answers run the command again (a write of the same words then changes nothing if the first was saved): %w",
			url, waited.Round(100*time.Millisecond), err)
	}
	return fmt.Errorf("no answer from %s (is `unsay serve` running there? give --url): %w", url, err)
}

// printAnswer prints a 2xx answer (through format when given). A non-2xx
// answer is reported on stderr — the server's message, and the flag its
// field names — with the JSON on stdout when format is nil, and exits 1.
func printAnswer(url string, status int, answer []byte, format func([]byte) string) error {
	ok := status >= 200 && status < 300
	switch {
	case ok && format != nil:
		fmt.Print(format(answer))
		return nil
	case ok || format == nil:
		os.Stdout.Write(answer)
		if len(answer) > 0 && answer[len(answer)-1] != '\n' {
			fmt.Println()
		}
	}
	if ok {
		return nil
	}
	var e struct {
		Error string `json:"error"`
		Field string `json:"field"`
	}
	msg := strings.TrimSpace(string(answer))
	if json.Unmarshal(answer, &e) == nil && e.Error != "" {
		msg = e.Error
		if f := writeFlags[e.Field]; f != "" {
			msg = f + ": " + msg
		} else if e.Field != "" {
			msg = e.Field + ": " + msg
		}
	}
	fmt.Fprintf(os.Stderr, "unsay: %s refused it (%d %s): %s\n", url, status, http.StatusText(status), msg)
	return exitError{code: 1}
}

// patientIDErr is nil for a valid patient id, else cmd's usage error
// saying what one is, with the id in lower case when that is one ("--patient
// \"Ray\": patient ids are lower case: did you mean ray?"; finding U14).
func patientIDErr(cmd, p string) error {
	if models.ValidID(p) {
		return nil
	}
	if lower := strings.ToLower(p); models.ValidID(lower) {
		return usageErr(cmd, "--patient %q: patient ids are lower case: did you mean %s?", p, lower)
	}
	return usageErr(cmd, "--patient %q: a patient id is 1–64 characters of a-z 0-9 _ . -", p)
}
