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
	// DefaultPatient, if set, is the patient of every unlinked device
	// (--default-patient, for the demo).
	DefaultPatient string
	// Logger receives refusals, session ends and errors; nil discards.
	Logger *slog.Logger
	// HTTPClient fetches certificate chains; nil is a client with a 5 s timeout.
	HTTPClient *http.Client
	// Fetcher, if set, replaces HTTPClient for chain downloads (tests).
	Fetcher CertFetcher
	// TestPause is for whole-program tests of P-24 only: it holds every
	// response that carries something to mark heard, at one point of its
	// delivery, so a test can kill the server there. Zero: off. The
	// command sets it from UNSAY_TEST_ALEXA_PAUSE, on loopback only.
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
}

// New returns a Skill. care is required; links may be nil (then no device
// can link and only DefaultPatient is served). It fails on a nil care, an
// invalid DefaultPatient, a CertOverrides URL that breaks the certificate
// URL rules, or an unreadable override file.
func New(cfg Config, care CareSource, links Links) (*Skill, error) {
	if care == nil {
		return nil, errors.New("skill: a CareSource is required")
	}
	if cfg.DefaultPatient != "" && !models.ValidID(cfg.DefaultPatient) {
		return nil, fmt.Errorf("skill: default patient %q is not a valid patient id", cfg.DefaultPatient)
	}
	s := &Skill{cfg: cfg, care: care, links: links, now: cfg.Clock, log: cfg.Logger,
		sessions: newSessionStore(SessionStateTTL, SessionStateMax)}
	if s.now == nil {
		s.now = time.Now
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
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
		v, err := NewVerifier(VerifierConfig{SkillID: cfg.SkillID, Roots: roots, Fetcher: f, Clock: s.now})
		if err != nil {
			return nil, err
		}
		s.verifier = v
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
// sent instead, marking nothing); it is written in full and flushed to Alexa's
// connection; only then is what it spoke marked heard — all under the
// patient's turn lock. A write that fails marks nothing: what it carried
// stays owed and is spoken again on the next turn, saying so. So does a
// response written into a connection Alexa had already closed (the
// request's context was done before the write began), and one written
// later than AlexaResponseDeadline after the request was received: Alexa
// has given up on it and played its own error (P-24).
func (s *Skill) respond(w http.ResponseWriter, r *http.Request, env *RequestEnvelope, received time.Time) {
	ctx := r.Context()
	h := s.handle(ctx, env)
	defer h.release()
	h = s.deliverable(h)
	h.out.Response.Directives = forRuntime(h.out.Response.Directives, env.APLMaxVersion())
	h.out.SessionAttributes = markedAttributes(h.marks, h.heardBefore, h.from) // notplayed.go
	b, directives, err := encodeResponse(h.out)
	if err == nil && (!directives || !sentCareCard(h.out.Response.Directives)) {
		// What the screen never showed was not told. Encoded again only
		// when that changes the response (a voice-only one rarely does).
		if kept := withoutCardMarks(h.marks); !directives || len(kept) != len(h.marks) {
			h.marks = kept
			h.out.SessionAttributes = markedAttributes(h.marks, h.heardBefore, h.from)
			if !directives {
				h.out.Response.Directives, h.cardOffered = nil, nil
			}
			b, _, err = encodeResponse(h.out)
		}
	}
	if err != nil {
		s.log.Error("alexa response", "err", err)
		http.Error(w, "cannot build response", http.StatusInternalServerError)
		return
	}
	// The ledger is written after the response whatever the request's
	// context does once Alexa has its answer.
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ledgerTimeout)
	defer cancel()
	if offers := append(append(h.offered, h.cardOffered...), toldOffers(h.marks)...); len(offers) > 0 {
		if err := s.care.Offered(lctx, h.patient, offers); err != nil {
			// Unrecorded, a response that was then lost would leave the
			// ledger saying he never heard what it carried, and a later
			// revision would withdraw other words (P-24): it is not
			// sent. The apology marks and offers nothing; all it carried
			// stays owed.
			s.log.Error("alexa announcements and facts told not recorded as offered; the apology sent instead", "patient", h.patient, "err", err)
			h.out, h.marks, h.offered, h.cardOffered = safeResponse(), nil, nil, nil
			if b, _, err = encodeResponse(h.out); err != nil {
				s.log.Error("alexa response", "err", err)
				http.Error(w, "cannot build response", http.StatusInternalServerError)
				return
			}
		}
	}
	carries := len(h.marks) > 0
	if carries {
		s.testPause(TestPauseBeforeWrite)
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
		s.log.Warn("alexa response not delivered; nothing marked heard", "patient", h.patient, "err", err)
		return
	}
	if hungUp != nil {
		s.log.Warn("alexa response written after Alexa closed the connection; left offered, nothing marked heard", "patient", h.patient, "err", hungUp)
		return
	}
	if took := s.now().Sub(received); took > AlexaResponseDeadline {
		s.log.Warn("alexa response written after Alexa's deadline; left offered, nothing marked heard", "patient", h.patient, "took", took.Round(time.Millisecond), "deadline", AlexaResponseDeadline)
		return
	}
	if carries {
		s.testPause(TestPauseBeforeHeard)
	}
	s.markHeard(lctx, h.patient, h.marks, hearingOf(env, s.now()))
	if env.Request.Type != TypeSessionEnded {
		end := h.out.Response.ShouldEndSession
		s.sessions.touch(env.SessionID(), liveSession{patient: h.patient, lastSeen: s.now(),
			screen: env.SupportsAPL(), ended: end != nil && *end})
	}
}

// deliverable returns h, or — when its SSML is not well-formed — a fixed
// apology that marks nothing and offers nothing (P-24).
func (s *Skill) deliverable(h handled) handled {
	if err := checkResponse(h.out); err != nil {
		s.log.Error("alexa response not sent: ill-formed; nothing marked heard", "patient", h.patient, "err", err)
		h.out, h.marks, h.offered, h.cardOffered = safeResponse(), nil, nil, nil
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

// ledgerTimeout bounds recording a response's offers and marks.
const ledgerTimeout = 5 * time.Second

// testPause holds a response at point when Config.TestPause asks for it.
func (s *Skill) testPause(point string) {
	if s.cfg.TestPause.At != point || s.cfg.TestPause.For <= 0 {
		return
	}
	s.log.Warn("TEST PAUSE: holding an Alexa response "+point, "for", s.cfg.TestPause.For)
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
