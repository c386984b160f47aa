// Package skill is Unsay's Alexa custom-skill endpoint, POST /alexa: request
// and response types, request verification (P-22), intent routing, SSML,
// server-side session state, device linking and the APL screens of the Echo
// Show (apl/).
//
// The skill says only what its CareSource gives it. The speech principal
// (bridge/speech) implements CareSource over MCP with care.read.user alone;
// this package never imports store/ or bridge/ (P-18). On every turn from a
// linked device it speaks the pending announcements first, oldest first
// (P-19), then answers, and marks heard only what it put in outputSpeech
// — and, on a screen, the facts its care card shows — once the response
// was delivered (P-24).
package skill

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/unsay/unsay/apl"
	"github.com/unsay/unsay/models"
)

// Size limits.
const (
	// MaxRequestBytes caps the request body read before verification (256 KiB;
	// Alexa requests are a few KiB). A larger body is refused with 413.
	MaxRequestBytes = 256 << 10
	// MaxResponseBytes caps the whole response (120 KB). A response over it
	// loses its APL directive; speech is already ≤ 8,000 characters.
	MaxResponseBytes = 120 * 1000
)

// Config configures the skill. Zero values are safe defaults except that
// Verify with an empty SkillID makes /alexa answer 503.
type Config struct {
	// SkillID is the only accepted context.System.application.applicationId
	// (--alexa-skill-id).
	SkillID string
	// Verify turns request verification on (--alexa-verify, default true in
	// the command). Off is for local development only.
	Verify bool
	// ExtraRoots are trust anchors added to the system roots for the
	// certificate chain (--alexa-roots PEM; see ReadCertificatesFile).
	ExtraRoots []*x509.Certificate
	// CertOverrides serves a certificate URL's chain from a PEM file instead
	// of fetching it (--alexa-cert URL=PEMFILE, repeatable). Each URL must
	// pass the certificate URL rules; files are read by New.
	CertOverrides map[string]string
	// Clock is the server clock; nil is time.Now.
	Clock func() time.Time
	// DefaultPatient, if set, is the patient of a request that carries no
	// account-linking access token and whose Alexa user is not linked by a
	// six-digit code (--default-patient, for the demo). A request whose
	// token is refused (unverifiable, expired, revoked) gets the
	// LinkAccount card instead, as without the flag (defaultPatientFor);
	// without account linking configured no token is verified, and every
	// unlinked request gets it.
	DefaultPatient string
	// Logger receives refusals, session ends and errors; nil discards.
	Logger *slog.Logger
	// SharedReplays is the replay memory the instances serving the skill
	// share (set when they share a Postgres database); nil: each
	// instance's own memory only (VerifierConfig.Shared).
	SharedReplays SharedReplayMemory
	// AttributesSecret keys the MAC each response's session attributes
	// carry (AttrMAC; notplayed.go): every instance serving the skill must
	// be given the same one, so an error report one instance's attributes
	// come back in is honoured by another. Empty: a random key per process
	// (one instance).
	AttributesSecret []byte
	// HTTPClient fetches certificate chains; nil is a client with a 5 s timeout.
	HTTPClient *http.Client
	// Fetcher, if set, replaces HTTPClient for chain downloads (tests).
	Fetcher CertFetcher
	// KeptReportsFile, when set, is where the error reports the ledger
	// could not take yet are saved, so a stop or crash loses none: New
	// restores them, and their patients' turns say nothing as current
	// until they are applied (keptreports.go, keptfile.go). Its folder
	// must exist and be writable. Empty: in memory only.
	KeptReportsFile string
	// TestPause is for whole-program tests of P-24 only: it holds every
	// response that carries something to mark heard, at one point of its
	// delivery, so a test can kill the server there. Zero: off. The
	// command sets it from UNSAY_TEST_ALEXA_PAUSE, on loopback only. A
	// response built again because a revision overtook it while held
	// (respond) is not held again.
	TestPause TestPause
}

// TestPause holds responses at one point of their delivery (tests only).
type TestPause struct {
	At  string        // TestPauseBeforeWrite or TestPauseBeforeHeard
	For time.Duration // how long
}

// Points of a response's delivery where TestPause can hold it.
const (
	// TestPauseBeforeWrite: its announcements are recorded as offered; the
	// response is not written yet.
	TestPauseBeforeWrite = "before-write"
	// TestPauseBeforeHeard: the response was written in full and flushed;
	// nothing is marked heard yet.
	TestPauseBeforeHeard = "before-heard"
)

// Skill serves POST /alexa. It is safe for concurrent use.
type Skill struct {
	cfg      Config
	care     CareSource
	links    Links
	verifier *Verifier // nil when verification is off
	now      func() time.Time
	log      *slog.Logger
	sessions *sessionStore
	// patientLocks serialize the turns of a patient owed an announcement
	// (striped by hash) so that a tick and an intent racing on one instance
	// cannot both speak one announcement.
	patientLocks [64]sync.Mutex

	// revisions is care's RevisionCounter, nil when it has none: then no
	// response is checked for a revision that overtook it (overtaken).
	revisions RevisionCounter

	// kept holds error reports the ledger could not take yet (keptreports.go).
	kept keptReports

	// glosses remembers each spoken note's gloss sentence (issue 17).
	glosses models.GlossMemo

	// attrKey keys AttrMAC (attributesMAC), from Config.AttributesSecret.
	attrKey []byte
}

// New returns a Skill. care is required; links may be nil (then no device
// can link and only DefaultPatient is served). It fails on a nil care, an
// invalid DefaultPatient, a KeptReportsFile that cannot be read or is not
// one, a CertOverrides URL that breaks the certificate URL rules, or an
// unreadable override file.
func New(cfg Config, care CareSource, links Links) (*Skill, error) {
	if care == nil {
		return nil, errors.New("skill: a CareSource is required")
	}
	if cfg.DefaultPatient != "" && !models.ValidID(cfg.DefaultPatient) {
		return nil, fmt.Errorf("skill: default patient %q is not a valid patient id", cfg.DefaultPatient)
	}
	s := &Skill{cfg: cfg, care: care, links: links, now: cfg.Clock, log: cfg.Logger,
		sessions: newSessionStore(SessionStateTTL, SessionStateMax)}
	s.revisions, _ = care.(RevisionCounter)
	if s.now == nil {
		s.now = time.Now
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	var err error
	if s.attrKey, err = attributesKey(cfg.AttributesSecret); err != nil {
		return nil, err
	}
	if cfg.Verify && cfg.SkillID != "" {
		roots, err := x509.SystemCertPool()
		if err != nil {
			roots = x509.NewCertPool()
		}
		for _, c := range cfg.ExtraRoots {
			roots.AddCert(c)
		}
		var next CertFetcher = HTTPCertFetcher{Client: cfg.HTTPClient}
		if cfg.Fetcher != nil {
			next = cfg.Fetcher
		}
		f := overrideFetcher{pem: map[string][]byte{}, next: next}
		for raw, file := range cfg.CertOverrides {
			norm, err := NormalizeCertURL(raw)
			if err != nil {
				return nil, fmt.Errorf("skill: --alexa-cert %s: %w", raw, err)
			}
			b, err := os.ReadFile(file)
			if err != nil {
				return nil, fmt.Errorf("skill: --alexa-cert %s: %w", raw, err)
			}
			if _, err := parseCertificates(b); err != nil {
				return nil, fmt.Errorf("skill: --alexa-cert %s: %s: %w", raw, file, err)
			}
			f.pem[norm] = b
		}
		v, err := NewVerifier(VerifierConfig{SkillID: cfg.SkillID, Roots: roots, Fetcher: f, Clock: s.now, Shared: cfg.SharedReplays, Logger: s.log})
		if err != nil {
			return nil, err
		}
		s.verifier = v
	}
	// Last: restoring arms the kept reports' retry timers.
	if s.kept.file = cfg.KeptReportsFile; s.kept.file != "" {
		if err := s.restoreKept(); err != nil {
			return nil, fmt.Errorf("skill: kept error reports %s: %w (move it aside to start without them: their retractions may then never be said)", s.kept.file, err)
		}
	}
	return s, nil
}

// StartupNotes returns the phrases the startup line must carry about Alexa:
// "ALEXA VERIFICATION OFF" when verification is off, "no --alexa-skill-id:
// /alexa answers 503" when it is on without a skill id, "alexa verification
// on" otherwise, and "default patient {id} for unlinked devices" when set.
func (s *Skill) StartupNotes() []string {
	var notes []string
	switch {
	case !s.cfg.Verify:
		notes = append(notes, "ALEXA VERIFICATION OFF")
	case s.cfg.SkillID == "":
		notes = append(notes, "no --alexa-skill-id: /alexa answers 503")
	default:
		notes = append(notes, "alexa verification on")
	}
	if s.cfg.DefaultPatient != "" {
		notes = append(notes, "default patient "+s.cfg.DefaultPatient+" for unlinked devices")
	}
	return notes
}

// ServeHTTP answers POST /alexa. It reads the raw body (at most
// MaxRequestBytes, else 413), verifies it before anything else (any failure:
// 400 and a log line with the reason; no handler runs), then routes the
// request and answers 200 with a response envelope. Other methods get 405;
// with verification on and no skill id every request gets 503.
func (s *Skill) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	received := s.now()
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "method not allowed: POST only", http.StatusMethodNotAllowed)
		return
	}
	if s.cfg.Verify && s.verifier == nil {
		s.log.Warn("alexa request refused", "reason", "no --alexa-skill-id configured")
		http.Error(w, "alexa skill id not configured", http.StatusServiceUnavailable)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxRequestBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			s.log.Warn("alexa request refused", "reason", "body over limit", "limit", MaxRequestBytes)
			http.Error(w, "request body too large", http.StatusRequestEntityTooLarge)
			return
		}
		http.Error(w, "cannot read request body", http.StatusBadRequest)
		return
	}
	var env *RequestEnvelope
	if s.verifier != nil {
		env, err = s.verifier.Verify(r.Context(), r.Header, body)
	} else {
		if env, err = ParseEnvelope(body); err != nil {
			err = fmt.Errorf("%w: %v", ErrMalformed, err)
		}
	}
	if err != nil {
		s.log.Warn("alexa request refused", "reason", err.Error(), "remote", r.RemoteAddr)
		http.Error(w, "request verification failed", http.StatusBadRequest)
		return
	}
	s.respond(w, r, env, received)
}

// respond handles a verified request and delivers the response (P-24):
// its SSML is checked well-formed (an ill-formed response is replaced by
// a fixed apology and marks nothing); the announcements it carries, and
// the facts it tells that he has not heard at that version, are recorded
// as offered in one transaction (when that fails, the fixed apology is
// sent instead, marking nothing); just before that, and again at the last
// moment before the write, it is checked that no fact it speaks may have
// been revised since its turn's confirmation began (overtaken) — if one
// may have, it is built again from a fresh confirmation, at most
// maxRebuilds times, then it says the notes cannot be confirmed; it is
// written in full and flushed to Alexa's connection; only then is what it
// spoke marked heard — all under the patient's turn lock. A write that
// fails marks nothing: what it carried stays owed and is spoken again on
// the next turn, saying so. So does a response written into a connection
// Alexa had already closed (the request's context was done before the
// write began), and one written later than AlexaResponseDeadline after the
// request was received: Alexa has given up on it and played its own error
// (P-24). Before the write, what a turn's response marks (its id and
// marks, as its session attributes name them) is recorded as the
// session's last response, for Alexa's error report (notPlayed); a write
// that fails in any of those ways clears its marks there (nothing was
// marked heard).
func (s *Skill) respond(w http.ResponseWriter, r *http.Request, env *RequestEnvelope, received time.Time) {
	ctx := r.Context()
	h := s.handle(ctx, env)
	defer func() { h.release() }()
	// The ledger is written whatever the request's context does once
	// Alexa has its answer: each step within ledgerTimeout of its own.
	ledgerCtx := context.WithoutCancel(ctx)
	var b []byte
	var attempt string // the id of the attempt built before, if overtaken (its ledger record is replaced)
	for rebuilt := 0; ; rebuilt++ {
		if s.overtaken(h) { // before anything is recorded as offered
			h = s.rebuild(h, rebuilt)
			continue
		}
		var err error
		if h, b, err = s.offer(ledgerCtx, env, h, attempt); err != nil {
			s.log.Error("alexa response", "err", err)
			http.Error(w, "cannot build response", http.StatusInternalServerError)
			return
		}
		if len(h.marks) > 0 && rebuilt == 0 {
			s.testPause(TestPauseBeforeWrite, env, h)
		}
		if !s.overtaken(h) { // the last moment before the write
			break
		}
		attempt = h.sent.id
		h = s.rebuild(h, rebuilt)
	}
	carries := len(h.marks) > 0
	// The session's record of its last response, kept before the write:
	// Alexa's error report may overtake the marking below (notplayed.go).
	sid := env.SessionID()
	if turnLike(env) {
		s.sessions.recordSent(sid, h.patient, h.sent, s.now())
	}
	// Go's server cancels the request's context when the client closes
	// its connection. It is read just before the write: a client that
	// reads the answer and then hangs up also cancels it, afterwards, and
	// that response was delivered.
	hungUp := ctx.Err()
	w.Header().Set("Content-Type", "application/json;charset=UTF-8")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	n, err := w.Write(b)
	if err == nil && n < len(b) {
		err = io.ErrShortWrite
	}
	if err == nil {
		err = http.NewResponseController(w).Flush()
	}
	if err != nil {
		s.sessions.unmarkSent(sid, h.sent.id)
		s.undelivered(env, h, "alexa response not delivered", "err", err)
		return
	}
	if hungUp != nil {
		s.sessions.unmarkSent(sid, h.sent.id)
		s.undelivered(env, h, "alexa response written after Alexa closed the connection", "err", hungUp)
		return
	}
	if took := s.now().Sub(received); took > AlexaResponseDeadline {
		s.sessions.unmarkSent(sid, h.sent.id)
		s.undelivered(env, h, "alexa response written after Alexa's deadline", "took", took.Round(time.Millisecond), "deadline", AlexaResponseDeadline)
		return
	}
	if carries {
		s.testPause(TestPauseBeforeHeard, env, h)
	}
	if carries {
		lctx, cancel := context.WithTimeout(ledgerCtx, ledgerTimeout)
		s.markHeard(lctx, h.patient, h.marks, hearingOf(env, s.now()))
		cancel()
	}
	if env.Request.Type != TypeSessionEnded {
		end := h.out.Response.ShouldEndSession
		s.sessions.touch(env.SessionID(), liveSession{patient: h.patient, lastSeen: s.now(),
			screen: env.SupportsAPL(), ended: end != nil && *end})
	}
}

// turnLike reports whether env is a turn whose response is recorded as
// its session's last (a launch, an intent, a touch or tick of the card).
func turnLike(env *RequestEnvelope) bool {
	return env.Request.Type == TypeLaunch || env.Request.Type == TypeIntent || env.Request.Type == TypeAPLUserEvent
}

// undelivered logs (WARN) a response Alexa did not get, or got too late
// to play, once (T14): what happened (what), what that left — what it
// offered stays offered and nothing is marked heard, or that it carried
// nothing to mark — and whose it was: the patient when the request named
// one (a linked turn, or an error report whose patient was found), else
// no patient key at all (never patient=""), with the session and request
// type always.
func (s *Skill) undelivered(env *RequestEnvelope, h handled, what string, attrs ...any) {
	msg := what + "; it carried nothing to mark heard"
	if len(h.marks) > 0 || len(h.offered) > 0 {
		msg = what + "; what it offered stays offered, nothing marked heard"
	}
	who := []any{"session", env.SessionID(), "request", env.Request.Type}
	if h.patient != "" {
		who = append([]any{"patient", h.patient}, who...)
	}
	s.log.Warn(msg, append(who, attrs...)...)
}

// offer makes h sendable and encodes it (b): deliverable, for the device's
// APL runtime, its marks in the session attributes, without the marks of a
// care card that was not sent; then it records what h offers — its
// announcements and the facts it tells (toldOffers) — in one ledger
// transaction within ledgerTimeout — with, for a turn of an Alexa session,
// the record of what h marks as the session's last response
// (CareSource.OfferedResponse, replacing the record of attempt, the id of
// the attempt overtaken before it: finding U8). When that fails, h becomes
// the fixed apology, marking and offering nothing. err: the response
// cannot be encoded. ctx is not canceled when Alexa hangs up (the
// ledger's).
func (s *Skill) offer(ctx context.Context, env *RequestEnvelope, h handled, attempt string) (handled, []byte, error) {
	h = s.deliverable(h)
	h.out.Response.Directives = forRuntime(h.out.Response.Directives, env.APLMaxVersion())
	h.sent = sentResponse{id: newResponseID(), at: s.now()}
	h.sent.marks = responseMarks(h.marks, h.heardBefore, h.from, h.sent.id) // notplayed.go
	h.out.SessionAttributes = markedAttributes(s.attrKey, h.sent.marks, h.sent.id)
	b, directives, err := encodeResponse(h.out)
	if err == nil && (!directives || !sentCareCard(h.out.Response.Directives)) {
		// What the screen never showed was not told. Encoded again only
		// when that changes the response (a voice-only one rarely does).
		if kept := withoutCardMarks(h.marks); !directives || len(kept) != len(h.marks) {
			h.marks = kept
			h.sent.marks = responseMarks(h.marks, h.heardBefore, h.from, h.sent.id)
			h.out.SessionAttributes = markedAttributes(s.attrKey, h.sent.marks, h.sent.id)
			if !directives {
				h.out.Response.Directives, h.cardOffered = nil, nil
			}
			b, _, err = encodeResponse(h.out)
		}
	}
	if err != nil {
		return h, nil, err
	}
	if offers := append(append(h.offered, h.cardOffered...), toldOffers(h.marks)...); len(offers) > 0 {
		lctx, cancel := context.WithTimeout(ctx, ledgerTimeout)
		sent := models.SentResponse{ID: h.sent.id, Marks: h.sent.marks, At: h.sent.at, Replaces: attempt}
		if sid := env.SessionID(); turnLike(env) && models.ValidSessionID(sid) {
			sent.Session = sid // else recorded in memory only: a malformed id never costs the response
		}
		err := s.care.OfferedResponse(lctx, h.patient, offers, sent)
		cancel()
		if err != nil {
			// Unrecorded, a response that was then lost would leave the
			// ledger saying he never heard what it carried, and a later
			// revision would withdraw other words (P-24): it is not
			// sent. The apology marks and offers nothing; all it carried
			// stays owed.
			s.log.Error("alexa announcements and facts told not recorded as offered; the apology sent instead", "patient", h.patient, "err", err)
			h.out, h.marks, h.offered, h.cardOffered = safeResponse(), nil, nil, nil
			h.turn, h.sent.marks = nil, nil
			if b, _, err = encodeResponse(h.out); err != nil {
				return h, nil, err
			}
		}
	}
	return h, b, nil
}

// maxRebuilds bounds how often one request's response is built again
// because a revision overtook it (overtaken): two fresh confirmations,
// then the answer given when the notes cannot be confirmed.
const maxRebuilds = 2

// overtaken reports whether h speaks from facts its care source may have
// learnt were revised since its turn's confirmation began: the care
// source's RevisionCounter for the patient moved since the turn read it,
// just before Turn (P-24: a fact that cannot be confirmed current at speak
// time is not spoken as current). It is two atomic loads, so it runs twice
// on every turn: before the response's offers are recorded and at the
// last moment before it is written. It covers every revision whose
// notification reached the care source by then — a revision read by the
// turn itself but notified after it began counts too, and costs a rebuild
// — and every session the care source lost meanwhile. It does not cover a
// revision committed but not yet notified (about half a millisecond in
// process, from the store's commit to the principal's count) nor one
// committed while the response is on its way: those are withdrawn on his
// next turn, quoting what this response said, which was recorded as
// offered before the write. A response built from nothing confirmed (no
// care source count, the notes unconfirmed, the apology) is not checked.
func (s *Skill) overtaken(h handled) bool {
	t := h.turn
	return t != nil && t.counted && s.revisions.Revisions(t.patient) != t.revs
}

// rebuild is h's response built again from a fresh confirmation (the same
// request, answered the same way, from the session's state as h's turn
// found it), under the patient's turn lock, after h's lock is released.
// After maxRebuilds rebuilds it is the answer given when the notes cannot
// be confirmed ("I can't reach your care notes right now, so I won't read
// you an instruction that may have changed", with which instructions he
// heard are known to have changed), which marks nothing. A response
// rebuilt after its offers were recorded leaves them offered: the next
// turn quotes them as what he may have heard (P-24).
func (s *Skill) rebuild(h handled, rebuilt int) handled {
	h.release()
	old := h.turn
	t := s.newTurn(old.ctx, old.env, s.now(), old.patient)
	t.session, t.prefix = old.session, old.prefix
	if rebuilt >= maxRebuilds {
		s.log.Warn("alexa response overtaken by revisions again; the notes are not confirmed and nothing is said as current", "patient", old.patient, "rebuilt", rebuilt)
		var changed []models.URI
		for _, a := range old.snap.Pending {
			if a.IsRetraction() {
				changed = append(changed, a.URI())
			}
		}
		return s.build(t, reply{segs: say(textUnreachable, changedSince(changed), textTryAgain), end: endLeave})
	}
	s.log.Info("alexa response overtaken by a revision before it was written; built again from a fresh confirmation", "patient", old.patient, "rebuilt", rebuilt+1,
		"request", old.env.Request.Type, "intent", old.env.Request.Intent.Name, "session", old.env.SessionID())
	release := s.lockPatient(old.patient)
	out := s.build(t, h.route(t))
	out.release = release
	out.turn, out.route = t, h.route
	return out
}

// deliverable returns h, or — when its SSML is not well-formed — a fixed
// apology that marks nothing and offers nothing (P-24).
func (s *Skill) deliverable(h handled) handled {
	if err := checkResponse(h.out); err != nil {
		s.log.Error("alexa response not sent: ill-formed; nothing marked heard", "patient", h.patient, "err", err)
		h.out, h.marks, h.offered, h.cardOffered = safeResponse(), nil, nil, nil
		h.turn = nil // it says nothing as current
	}
	return h
}

// AlexaResponseDeadline is how long Alexa waits for a skill's response: 8
// seconds from sending the request (Alexa Skills Kit, "Host a Custom Skill
// as a Web Service": the service must answer within 8 s, or Alexa ends the
// session with SessionEndedRequest error ENDPOINT_TIMEOUT and speaks its
// own apology). A response written after it, counted from receipt, is
// never played, so nothing in it is marked heard (P-24).
const AlexaResponseDeadline = 8 * time.Second

// ledgerTimeout bounds recording a response's offers, and marking what it
// carried heard, each.
const ledgerTimeout = 5 * time.Second

// testPause holds h, the response to env, at point when Config.TestPause
// asks for it. The log line names the request held (its type, intent,
// session) and the versions it marks: only a response that marks
// something is held, so of a retraction cut for "more" only the part that
// completes it is (the parts before it mark nothing and pass at once).
func (s *Skill) testPause(point string, env *RequestEnvelope, h handled) {
	if s.cfg.TestPause.At != point || s.cfg.TestPause.For <= 0 {
		return
	}
	marks := make([]string, 0, len(h.marks))
	for _, m := range h.marks {
		if mk := fmt.Sprintf("%s v%d", m.URI, m.Version); !slices.Contains(marks, mk) { // a version told and withdrawn is named once
			marks = append(marks, mk)
		}
	}
	s.log.Warn("TEST PAUSE: holding an Alexa response "+point, "for", s.cfg.TestPause.For,
		"request", env.Request.Type, "intent", env.Request.Intent.Name, "session", env.SessionID(), "marks", strings.Join(marks, ", "))
	time.Sleep(s.cfg.TestPause.For)
}

// SessionOpen reports whether patient has a skill session open on a screen
// device — one that had a turn (a tick counts) within SessionOpenWindow
// (15 s) and whose last response did not end it. While it is open the care
// card's 5 s tick speaks a new announcement, so the out-of-session notifier
// (skill/proactive) sends nothing. Voice-only sessions never count: nothing
// would ask for the announcement before the microphone closes.
func (s *Skill) SessionOpen(patient string) bool { return s.sessions.open(patient, s.now()) }

// forRuntime makes every RenderDocument one the device's APL runtime can
// render (apl.ForRuntime), and drops those it cannot.
func forRuntime(ds []Directive, maxVersion string) []Directive {
	out := ds[:0:0]
	for _, d := range ds {
		if d.Type == RenderDocumentType {
			doc, ok := apl.ForRuntime(d.Document, maxVersion)
			if !ok {
				continue
			}
			d.Document = doc
		}
		out = append(out, d)
	}
	return out
}

// hearingOf says how a response to env, written in full at at, reached
// the patient: on a screen device (APL declared, an Echo Show) or voice
// only; unasked when it answers the open card's tick, else asked.
func hearingOf(env *RequestEnvelope, at time.Time) models.Hearing {
	h := models.Hearing{At: at, Device: models.DeviceVoice, Via: models.ViaAsked}
	if env.SupportsAPL() {
		h.Device = models.DeviceScreen
	}
	if env.Request.Type == TypeAPLUserEvent && env.Request.FirstArgument() == apl.ArgTick {
		h.Via = models.ViaCard
	}
	return h
}

// delivered is what one response carries of one fact: the latest
// announcement version it speaks in full (ann) and the latest version it
// tells as a plain fact (told), 0 for none.
type delivered struct {
	uri       models.URI
	ann, told int
}

// deliveredOf folds a response's marks into one delivered per fact, in
// the order the facts are first marked.
func deliveredOf(marks []mark) []delivered {
	var out []delivered
	at := map[models.URI]int{}
	for _, m := range marks {
		i, ok := at[m.URI]
		if !ok {
			i = len(out)
			at[m.URI] = i
			out = append(out, delivered{uri: m.URI})
		}
		if m.Told {
			out[i].told = max(out[i].told, m.Version)
		} else {
			out[i].ann = max(out[i].ann, m.Version)
		}
	}
	return out
}

// toldOffers are the offers of the facts a response tells plainly (newer
// than any announcement of the same fact it speaks): recorded with its
// announcements before it is written, so a crash before MarkTold leaves
// them offered and a later revision withdraws them (P-24).
func toldOffers(marks []mark) []models.Offer {
	var out []models.Offer
	for _, d := range deliveredOf(marks) {
		if d.told > d.ann {
			out = append(out, models.Offer{URI: d.uri, Version: d.told, Told: true})
		}
	}
	return out
}

// markHeard records what a delivered response carried, how: per fact, the
// latest announcement version it spoke (MarkHeard) and the latest version
// it told as a plain fact (MarkTold, only when newer than the announcement).
func (s *Skill) markHeard(ctx context.Context, patient string, marks []mark, how models.Hearing) {
	for _, d := range deliveredOf(marks) {
		if d.ann > 0 {
			if err := s.care.MarkHeard(ctx, patient, d.uri, d.ann, how); err != nil {
				s.log.Error("mark heard", "patient", patient, "uri", d.uri.String(), "version", d.ann, "err", err)
			}
		}
		if d.told > d.ann {
			if err := s.care.MarkTold(ctx, patient, d.uri, d.told, how); err != nil {
				s.log.Error("mark told", "patient", patient, "uri", d.uri.String(), "version", d.told, "err", err)
			}
		}
	}
}

func (s *Skill) lockPatient(patient string) func() {
	h := fnv.New32a()
	_, _ = h.Write([]byte(patient))
	mu := &s.patientLocks[h.Sum32()%uint32(len(s.patientLocks))]
	mu.Lock()
	return mu.Unlock
}

// ParseCertOverrides turns repeated --alexa-cert values "URL=PEMFILE" into
// Config.CertOverrides. It splits at the last "=" (a PEM path has none; a
// valid certificate URL has no query) and fails on an entry without one or
// with an empty side.
func ParseCertOverrides(values []string) (map[string]string, error) {
	out := make(map[string]string, len(values))
	for _, v := range values {
		i := strings.LastIndex(v, "=")
		if i <= 0 || i == len(v)-1 {
			return nil, fmt.Errorf("--alexa-cert %q: want URL=PEMFILE", v)
		}
		out[strings.TrimSpace(v[:i])] = strings.TrimSpace(v[i+1:])
	}
	return out, nil
}
