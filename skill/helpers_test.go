package skill

import (
	"bytes"
	"context"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/unsay/unsay/models"
)

// t0 is the test clock's "now".
var t0 = time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)

const (
	testSkillID = "amzn1.ask.skill.11111111-2222-3333-4444-555555555555"
	testUserID  = "amzn1.ask.account.RAY"
	testCertURL = "https://s3.amazonaws.com/echo.api/echo-api-cert.pem"
)

// testPKI is a root → intermediate → leaf chain (leaf SAN echo-api.amazon.com)
// plus variants that must be refused.
type testPKI struct {
	root      *x509.Certificate
	leafKey   *rsa.PrivateKey
	chainPEM  []byte // leaf + intermediate, like the file Amazon serves
	noSANPEM  []byte // leaf without the SAN, same key
	otherPEM  []byte // leaf under an untrusted root, same key
	leafUntil time.Time
}

var (
	pkiOnce sync.Once
	pki     testPKI
)

func mustCert(tb testing.TB, tmpl, parent *x509.Certificate, pub, priv any) *x509.Certificate {
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, pub, priv)
	if err != nil {
		tb.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

func pemOf(certs ...*x509.Certificate) []byte {
	var b bytes.Buffer
	for _, c := range certs {
		_ = pem.Encode(&b, &pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
	}
	return b.Bytes()
}

func getPKI(tb testing.TB) testPKI {
	tb.Helper()
	pkiOnce.Do(func() {
		key := func() *rsa.PrivateKey {
			k, err := rsa.GenerateKey(rand.Reader, 2048)
			if err != nil {
				tb.Fatal(err)
			}
			return k
		}
		ca := func(cn string, serial int64) *x509.Certificate {
			return &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: cn},
				NotBefore: t0.Add(-365 * 24 * time.Hour), NotAfter: t0.Add(5 * 365 * 24 * time.Hour),
				IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign}
		}
		rootKey, interKey, otherKey, leafKey := key(), key(), key(), key()
		rootT := ca("Unsay Test Root", 1)
		root := mustCert(tb, rootT, rootT, &rootKey.PublicKey, rootKey)
		inter := mustCert(tb, ca("Unsay Test Intermediate", 2), root, &interKey.PublicKey, rootKey)
		otherT := ca("Untrusted Root", 3)
		other := mustCert(tb, otherT, otherT, &otherKey.PublicKey, otherKey)
		until := t0.Add(30 * 24 * time.Hour)
		leafT := func(serial int64, san []string) *x509.Certificate {
			return &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "echo-api.amazon.com"},
				NotBefore: t0.Add(-24 * time.Hour), NotAfter: until, DNSNames: san,
				KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
		}
		leaf := mustCert(tb, leafT(10, []string{"echo-api.amazon.com"}), inter, &leafKey.PublicKey, interKey)
		noSAN := mustCert(tb, leafT(11, []string{"example.com"}), inter, &leafKey.PublicKey, interKey)
		otherLeaf := mustCert(tb, leafT(12, []string{"echo-api.amazon.com"}), other, &leafKey.PublicKey, otherKey)
		pki = testPKI{root: root, leafKey: leafKey, chainPEM: pemOf(leaf, inter), noSANPEM: pemOf(noSAN, inter),
			otherPEM: pemOf(otherLeaf, other), leafUntil: until}
	})
	if pki.root == nil {
		tb.Fatal("test PKI not built")
	}
	return pki
}

func (p testPKI) sign(body []byte) string {
	sum := sha256.Sum256(body)
	sig, err := rsa.SignPKCS1v15(rand.Reader, p.leafKey, crypto.SHA256, sum[:])
	if err != nil {
		panic(err)
	}
	return base64.StdEncoding.EncodeToString(sig)
}

// countingFetcher serves pem for every URL and counts fetches per URL.
type countingFetcher struct {
	pem []byte
	n   atomic.Int64
	mu  sync.Mutex
	got []string
}

func (f *countingFetcher) FetchCertChain(_ context.Context, u string) ([]byte, error) {
	f.n.Add(1)
	f.mu.Lock()
	f.got = append(f.got, u)
	f.mu.Unlock()
	return f.pem, nil
}

// fakeCare is an in-memory CareSource with a heard ledger: MarkHeard removes
// pending announcements up to the heard version and records every call.
type fakeCare struct {
	mu       sync.Mutex
	facts    map[string][]models.Version
	pending  map[string][]models.Announcement
	heard    []heardCall
	hows     []models.Hearing // MarkHeard's how, one per heard call
	calls    atomic.Int64     // Turn calls
	failFact error
	offered  map[int64]bool // Offered ids
	offers   []models.Offer // every offer, in order
	// failOffered, when set, is what Offered returns (the heard ledger
	// cannot be written), recording nothing.
	failOffered error
	discard     bool          // MarkHeard records nothing (benchmarks)
	delay       time.Duration // MarkHeard waits this long first (widens races)
	// onTurn, when set, runs at the start of Turn with the request's
	// context (a slow confirmation, a client that hangs up meanwhile).
	onTurn func(ctx context.Context)
	// onNotPlayed, when set, runs at the start of NotPlayed (a slow ledger).
	onNotPlayed func()
	// failNotPlayed, while not empty, is what the next NotPlayed calls
	// return, one each, the first first, recording nothing (a store that
	// cannot commit, finding V5); a nil entry fails nothing. notPlayedTries
	// counts every NotPlayed call.
	failNotPlayed  []error
	notPlayedTries int
	// afterTurn, when set, runs once Turn has taken its snapshot, and
	// onOffered at the start of Offered (a revision landing after the
	// confirmation, before the offers are recorded or while the
	// response is held before its write).
	afterTurn, onOffered func()
	// revs is the RevisionCounter: every revise counts, as the speech
	// principal counts each resources/updated.
	revs atomic.Uint64
	// old holds versions replaced by revise or announced, by versioned URI.
	old map[models.URI]models.Version
	// notPlayed is every NotPlayed call's entries, in order; each
	// re-opened entry is owed again (an announcement from From, Again).
	notPlayed [][]models.Marked
	// sent is what OfferedResponse recorded, per patient and session, the
	// last first (the heard ledger's record; sent_test.go).
	sent map[[2]string][]models.SentResponse

	// together, when > 0, holds each Turn until that many are in flight at
	// once (or 5 s pass): whether concurrent turns of one patient overlap.
	together int
	inFlight atomic.Int64
	overlap  atomic.Int64 // the most Turns in flight at once
}

type heardCall struct {
	Patient string
	URI     string
	Version int
	Told    bool // MarkTold: spoken as a plain fact
}

// Turn answers the facts and pending announcements as set, the way the
// speech principal does once it has confirmed them (sorted by URI;
// failFact fails the whole turn, naming the pending retractions).
func (f *fakeCare) Turn(ctx context.Context, patient string) (models.Snapshot, error) {
	f.calls.Add(1)
	if f.onTurn != nil {
		f.onTurn(ctx)
	}
	if f.together > 0 {
		n := f.inFlight.Add(1)
		for m := f.overlap.Load(); n > m && !f.overlap.CompareAndSwap(m, n); m = f.overlap.Load() {
		}
		deadline := time.Now().Add(5 * time.Second)
		for f.overlap.Load() < int64(f.together) && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		defer f.inFlight.Add(-1)
	}
	if f.afterTurn != nil {
		defer f.afterTurn() // after the unlock below
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failFact != nil {
		var snap models.Snapshot
		for _, a := range f.pending[patient] {
			if a.IsRetraction() {
				snap.Withdrawn = append(snap.Withdrawn, a.URI())
			}
		}
		return snap, f.failFact
	}
	facts := append([]models.Version(nil), f.facts[patient]...)
	sort.Slice(facts, func(i, j int) bool { return facts[i].FactURI().String() < facts[j].FactURI().String() })
	pending := append([]models.Announcement(nil), f.pending[patient]...)
	for i := range pending {
		pending[i].Again = pending[i].Again || f.offered[pending[i].ID]
	}
	heard := map[models.URI]int{}
	for _, c := range f.heard {
		if u, err := models.ParseURI(c.URI); err == nil && c.Patient == patient {
			heard[u] = max(heard[u], c.Version)
		}
	}
	return models.Snapshot{Facts: facts, Pending: pending, Heard: heard}, nil
}

// NotPlayed records the entries and owes each one again: an announcement
// from the version it withdrew (none: a first hearing) to the version
// marked, said again, unless one is pending for the fact.
func (f *fakeCare) NotPlayed(_ context.Context, patient string, ms []models.Marked) (int, error) {
	if f.onNotPlayed != nil {
		f.onNotPlayed()
	}
	reopened := 0
	f.mu.Lock()
	defer f.mu.Unlock()
	f.notPlayedTries++
	if len(f.failNotPlayed) > 0 {
		err := f.failNotPlayed[0]
		f.failNotPlayed = f.failNotPlayed[1:]
		if err != nil {
			return 0, err
		}
	}
	f.notPlayed = append(f.notPlayed, ms)
	for _, m := range ms {
		if m.Confirmed {
			continue // the fake keeps no confirmations to undo (the ledger's contract: ledgertest)
		}
		owed := false
		for _, a := range f.pending[patient] {
			owed = owed || a.URI() == m.URI
		}
		for _, v := range f.facts[patient] {
			if owed || v.FactURI() != m.URI || v.N != m.Version {
				continue
			}
			a := models.Announcement{ID: int64(1000 + len(f.pending[patient])), Patient: patient, Current: v, Again: true}
			if m.From > 0 {
				h := f.old[m.URI.WithVersion(m.From)]
				a.Heard = &h
				f.pending[patient] = append([]models.Announcement{a}, f.pending[patient]...) // stop first
				reopened++
				continue
			}
			f.pending[patient] = append(f.pending[patient], a)
			reopened++
		}
	}
	return reopened, nil
}

func (f *fakeCare) notPlayedCalls() [][]models.Marked {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([][]models.Marked(nil), f.notPlayed...)
}

// Offered records the announcements put in a response about to be written.
func (f *fakeCare) Offered(_ context.Context, _ string, offers []models.Offer) error {
	if f.onOffered != nil {
		f.onOffered()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failOffered != nil {
		return f.failOffered
	}
	if f.offered == nil {
		f.offered = map[int64]bool{}
	}
	for _, o := range offers {
		if !o.Told {
			f.offered[o.ID] = true
		}
		f.offers = append(f.offers, o)
	}
	return nil
}

// MarkHeard records a delivered announcement: pending announcements of
// uri up to version are heard.
func (f *fakeCare) MarkHeard(_ context.Context, patient string, uri models.URI, version int, how models.Hearing) error {
	return f.mark(patient, uri, version, how, false)
}

// MarkTold records a fact told: it never clears a pending retraction,
// only first hearings up to version (P-19).
func (f *fakeCare) MarkTold(_ context.Context, patient string, uri models.URI, version int, how models.Hearing) error {
	return f.mark(patient, uri, version, how, true)
}

func (f *fakeCare) mark(patient string, uri models.URI, version int, how models.Hearing, told bool) error {
	if f.discard {
		return nil
	}
	time.Sleep(f.delay)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.heard = append(f.heard, heardCall{patient, uri.String(), version, told})
	f.hows = append(f.hows, how)
	var keep []models.Announcement
	for _, a := range f.pending[patient] {
		if a.URI() == uri && a.Current.N <= version && !(told && a.IsRetraction()) {
			continue
		}
		keep = append(keep, a)
	}
	f.pending[patient] = keep
	return nil
}

// Revisions is the RevisionCounter of every patient: the revisions so far.
func (f *fakeCare) Revisions(string) uint64 { return f.revs.Load() }

// revise replaces the patient's fact of v's domain by v and queues what the
// speech principal would: a retraction of the old version when he was told
// or heard it (a MarkHeard or MarkTold call), else a first hearing. It
// counts in Revisions, as the notification of the revision would.
func (f *fakeCare) revise(v models.Version, id int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	defer f.revs.Add(1)
	a := models.Announcement{ID: id, Patient: v.Patient, Current: v}
	heard := 0
	for _, c := range f.heard {
		if c.URI == v.FactURI().String() {
			heard = max(heard, c.Version)
		}
	}
	for i, cur := range f.facts[v.Patient] {
		if cur.Domain == v.Domain {
			if f.old == nil {
				f.old = map[models.URI]models.Version{}
			}
			f.old[cur.URI()] = cur
			if heard >= cur.N {
				a.Heard = &cur
			}
			f.facts[v.Patient][i] = v
		}
	}
	f.pending[v.Patient] = append(f.pending[v.Patient], a)
}

// announcementOffers returns the offers of announcements (not facts told).
func (f *fakeCare) announcementOffers() []models.Offer {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []models.Offer
	for _, o := range f.offers {
		if !o.Told {
			out = append(out, o)
		}
	}
	return out
}

// toldOffers returns the offers of facts told plainly, as "uri vN".
func (f *fakeCare) toldOffers() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, o := range f.offers {
		if o.Told {
			out = append(out, fmt.Sprintf("%s v%d", o.URI, o.Version))
		}
	}
	return out
}

func (f *fakeCare) heardCalls() []heardCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]heardCall(nil), f.heard...)
}

func (f *fakeCare) setPending(patient string, a ...models.Announcement) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pending[patient] = a
	for _, x := range a {
		if x.Heard != nil {
			if f.old == nil {
				f.old = map[models.URI]models.Version{}
			}
			f.old[x.Heard.URI()] = *x.Heard
		}
	}
}

func ver(domain string, n int, value, author string, age time.Duration) models.Version {
	return models.Version{Patient: "ray", Domain: domain, N: n, Audience: models.AudienceUser, Value: value,
		AuthorID: author, AuthorLabel: author, WrittenAt: t0.Add(-age)}
}

const (
	wbV2Text = "Partial weight-bearing, about half your body weight."
	wbV3Text = "Full weight-bearing as tolerated."
)

// rayCare is the demo patient: walking (v2), a stale blood thinner note,
// exercises and contact.
func rayCare() *fakeCare {
	anti := ver("anticoagulant", 1, "Rivaroxaban 10 mg once daily.", "Dr Mensah, GP", 9*24*time.Hour)
	anti.StaleAfter = t0.Add(-24 * time.Hour)
	return &fakeCare{
		facts: map[string][]models.Version{"ray": {
			ver("weight_bearing", 2, wbV2Text, "Mr Adeyemi, surgical team", 2*24*time.Hour),
			anti,
			ver("exercise", 1, "Ankle pumps hourly; heel slides ten times, twice daily.", "Sarah Okafor, physio", 24*time.Hour+time.Hour),
			ver("contact", 1, "Ward 4 physio line weekdays 9 to 5; out of hours call 111.", "Ward 4 admin", 5*24*time.Hour),
		}},
		pending: map[string][]models.Announcement{},
	}
}

// retractionWB is the pending retraction of walking v2 → v3 by the physio, just now.
func retractionWB() models.Announcement {
	heard := ver("weight_bearing", 2, wbV2Text, "Mr Adeyemi, surgical team", 2*24*time.Hour)
	cur := ver("weight_bearing", 3, wbV3Text, "Sarah Okafor, physio", 0)
	return models.Announcement{ID: 7, Patient: "ray", Heard: &heard, Current: cur}
}

type fakeLinks struct {
	mu      sync.Mutex
	linked  map[string]string // alexa user → patient
	codes   map[string]string // code → patient
	blocked bool
	paused  time.Time // non-zero: every redemption is refused with a *LinkPausedError
	redeems []string  // "user|endpoint|code"
	lookErr error     // non-nil: LinkedPatient fails with it (a locked store)
}

func (l *fakeLinks) RedeemLinkCode(_ context.Context, user, endpoint, code string, _ time.Time) (string, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.redeems = append(l.redeems, user+"|"+endpoint+"|"+code)
	if !l.paused.IsZero() {
		return "", &LinkPausedError{Until: l.paused}
	}
	if l.blocked {
		return "", ErrLinkBlocked
	}
	p, ok := l.codes[code]
	if !ok {
		return "", ErrLinkCodeInvalid
	}
	delete(l.codes, code)
	if l.linked == nil {
		l.linked = map[string]string{}
	}
	l.linked[user] = p
	return p, nil
}

func (l *fakeLinks) LinkedPatient(_ context.Context, user string) (string, string, bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lookErr != nil {
		return "", "", false, l.lookErr
	}
	p, ok := l.linked[user]
	return p, "https://api.eu.amazonalexa.com", ok, nil
}

// reqOpts shapes a request envelope.
type reqOpts struct {
	Type   string
	Intent string
	Slots  map[string]Slot
	APL    bool
	// APLVersion is the device's APL runtime.maxVersion (default 2024.3).
	APLVersion string
	Session    string
	SkillID    string
	Timestamp  time.Time
	Arguments  []any
	Extra      string // a free text put in requestId, to carry non-ASCII bytes
	// RequestID is request.requestId; "" is a new one for every envelope
	// (Alexa's ids are unique; the verifier refuses one it has seen).
	RequestID string
}

// requestSeq numbers the envelopes' request ids.
var requestSeq atomic.Int64

func envelope(o reqOpts) []byte {
	if o.Type == "" {
		o.Type = TypeLaunch
	}
	if o.SkillID == "" {
		o.SkillID = testSkillID
	}
	if o.Session == "" {
		o.Session = "amzn1.echo-api.session.1"
	}
	if o.Timestamp.IsZero() {
		o.Timestamp = t0
	}
	ifaces := map[string]any{}
	if o.APL {
		v := o.APLVersion
		if v == "" {
			v = "2024.3"
		}
		ifaces[APLInterface] = map[string]any{"runtime": map[string]any{"maxVersion": v}}
	}
	if o.RequestID == "" {
		o.RequestID = fmt.Sprintf("amzn1.echo-api.request.%d", requestSeq.Add(1))
	}
	req := map[string]any{"type": o.Type, "requestId": o.RequestID + o.Extra, "locale": "en-GB",
		"timestamp": o.Timestamp.UTC().Format(time.RFC3339)}
	if o.Type == TypeIntent {
		req["intent"] = map[string]any{"name": o.Intent, "confirmationStatus": "NONE", "slots": o.Slots}
	}
	if o.Arguments != nil {
		req["arguments"] = o.Arguments
		req["token"] = "unsay-care-card"
	}
	if o.Type == TypeSessionEnded {
		req["reason"] = "USER_INITIATED"
	}
	app := map[string]any{"applicationId": o.SkillID}
	user := map[string]any{"userId": testUserID}
	env := map[string]any{
		"version": "1.0",
		"session": map[string]any{"new": o.Type == TypeLaunch, "sessionId": o.Session, "application": app, "user": user},
		"context": map[string]any{"System": map[string]any{"application": app, "user": user,
			"device":      map[string]any{"deviceId": "amzn1.ask.device.1", "supportedInterfaces": ifaces},
			"apiEndpoint": "https://api.eu.amazonalexa.com", "apiAccessToken": "tok"}},
		"request": req,
	}
	b, err := json.Marshal(env)
	if err != nil {
		panic(err)
	}
	return b
}

func topicSlot(id string, code string) map[string]Slot {
	s := Slot{Name: SlotTopic, Value: "walking", Resolutions: &Resolutions{ResolutionsPerAuthority: []Resolution{{Authority: "amzn1.er-authority.echo-sdk.x.CareTopic"}}}}
	s.Resolutions.ResolutionsPerAuthority[0].Status.Code = code
	if code == "ER_SUCCESS_MATCH" {
		s.Resolutions.ResolutionsPerAuthority[0].Values = make([]struct {
			Value struct {
				Name string `json:"name"`
				ID   string `json:"id"`
			} `json:"value"`
		}, 1)
		s.Resolutions.ResolutionsPerAuthority[0].Values[0].Value.Name = id
		s.Resolutions.ResolutionsPerAuthority[0].Values[0].Value.ID = id
	}
	return map[string]Slot{SlotTopic: s}
}

// rig is a verified skill on an httptest server.
type rig struct {
	t       testing.TB
	pki     testPKI
	care    *fakeCare
	links   *fakeLinks
	skill   *Skill
	srv     *httptest.Server
	fetcher *countingFetcher
	now     time.Time
	nowMu   sync.Mutex
	logs    *bytes.Buffer
	// inflight counts requests the handler has not finished: marks are
	// recorded after the response is written, so turn waits for them.
	inflight inflight
}

// inflight counts running handlers; wait returns once none runs.
type inflight struct {
	mu   sync.Mutex
	cond *sync.Cond
	n    int
}

func (f *inflight) add(d int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.cond == nil {
		f.cond = sync.NewCond(&f.mu)
	}
	f.n += d
	f.cond.Broadcast()
}

func (f *inflight) wait() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.cond == nil {
		f.cond = sync.NewCond(&f.mu)
	}
	for f.n > 0 {
		f.cond.Wait()
	}
}

func newRig(tb testing.TB, mutate func(*Config)) *rig {
	tb.Helper()
	p := getPKI(tb)
	// The skill is made rigUptime before t0, as a server that has been up
	// a while: a turn signed before it started is refused (signedSince).
	r := &rig{t: tb, pki: p, care: rayCare(), links: &fakeLinks{}, now: t0.Add(-rigUptime), fetcher: &countingFetcher{pem: p.chainPEM}, logs: &bytes.Buffer{}}
	cfg := Config{SkillID: testSkillID, Verify: true, ExtraRoots: []*x509.Certificate{p.root},
		Clock: r.clock, DefaultPatient: "ray", Fetcher: r.fetcher, Logger: newTestLogger(r.logs)}
	if mutate != nil {
		mutate(&cfg)
	}
	s, err := New(cfg, r.care, r.links)
	if err != nil {
		tb.Fatal(err)
	}
	r.skill = s
	r.setNow(t0)
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.inflight.add(1)
		defer r.inflight.add(-1)
		s.ServeHTTP(w, req)
	}))
	tb.Cleanup(r.srv.Close)
	return r
}

// rigUptime is how long before t0 a rig's skill was made.
const rigUptime = 10 * time.Minute

func (r *rig) clock() time.Time   { r.nowMu.Lock(); defer r.nowMu.Unlock(); return r.now }
func (r *rig) setNow(t time.Time) { r.nowMu.Lock(); r.now = t; r.nowMu.Unlock() }

// post sends body signed with the test leaf key (sig "" signs it; "-" omits
// the header) and the given cert URL ("" omits the header).
func (r *rig) post(body []byte, certURL, sig string) (int, []byte) {
	r.t.Helper()
	req, err := http.NewRequest(http.MethodPost, r.srv.URL, bytes.NewReader(body))
	if err != nil {
		r.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json; charset=utf-8")
	switch sig {
	case "":
		req.Header.Set(HeaderSignature256, r.pki.sign(body))
	case "-":
	default:
		req.Header.Set(HeaderSignature256, sig)
	}
	if certURL != "" {
		req.Header.Set(HeaderCertChainURL, certURL)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		r.t.Fatal(err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	_, _ = b.ReadFrom(resp.Body)
	r.inflight.wait() // the handler marks heard after writing
	return resp.StatusCode, b.Bytes()
}

// turn posts a correctly signed request and decodes the 200 response.
func (r *rig) turn(o reqOpts) (ResponseEnvelope, []byte) {
	r.t.Helper()
	code, b := r.post(envelope(o), testCertURL, "")
	if code != http.StatusOK {
		r.t.Fatalf("status %d: %s\nlogs: %s", code, b, r.logs.String())
	}
	var out ResponseEnvelope
	if err := json.Unmarshal(b, &out); err != nil {
		r.t.Fatalf("response is not JSON: %v: %s", err, b)
	}
	return out, b
}

func writeFile(tb testing.TB, name string, b []byte) string {
	p := filepath.Join(tb.TempDir(), name)
	if err := os.WriteFile(p, b, 0o600); err != nil {
		tb.Fatal(err)
	}
	return p
}

var errBoom = errors.New("boom")
