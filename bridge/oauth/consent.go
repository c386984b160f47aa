package oauth

import (
	"crypto/sha256"
	"crypto/subtle"
	_ "embed"
	"encoding/base64"
	"errors"
	"html/template"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"

	"github.com/unsay/unsay/models"
	"github.com/unsay/unsay/store"
)

//go:embed consent.html
var consentHTML string

//go:embed consent.css
var consentCSS string

var consentTmpl = template.Must(template.New("consent").Parse(strings.Replace(consentHTML, "/*CSS*/", consentCSS, 1)))

// consentCSP allows the page's one inline style block (by its hash) and
// nothing else: no script, no frames, no framing (clickjacking).
var consentCSP = func() string {
	h := sha256.Sum256([]byte(consentCSS))
	return "default-src 'none'; style-src 'sha256-" + base64.StdEncoding.EncodeToString(h[:]) + "'; frame-ancestors 'none'; base-uri 'none'"
}()

// consentPage is what consent.html renders.
type consentPage struct {
	Title string // the <title>: plain text, a client name in it isolated by U+2068…U+2069
	// Lead and Tail are the heading's words before and after the client's
	// name, which the page isolates in <bdi>; without a client the heading
	// is Title.
	Lead, Tail string
	Step       string // "code", "confirm" or "message"
	ID, CSRF   string
	Client     string // displayClientName of the client's name
	Host       string // where the person is sent back to
	Unverified bool   // a self-registered client or a metadata document: nobody checked who made it
	Patient    string
	Grants     []string // what is granted, in plain words
	Cannot     string
	Message    string // the message step's text, or an error above the form
	Alert      bool
}

// scopeWords says what a scope lets the client do, in plain words, for the
// person who grants it.
func scopeWords(sc, name, approvedBy string) string {
	switch models.Scope(sc) {
	case models.ScopeReadUser:
		return "Read " + name + "'s care notes aloud — the instructions written for " + name +
			", with who wrote each one and when — and hear when one changes."
	case models.ScopeReadAssistant:
		by := "the care team"
		if approvedBy != "" {
			by = approvedBy
		}
		return "Also read the notes the care team wrote only for the assistant's own reasoning. These are never read aloud. Approved by " + by + ", not by this page."
	}
	return ""
}

func (s *Server) writePage(w http.ResponseWriter, status int, p consentPage) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Security-Policy", consentCSP)
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "same-origin") // no-referrer would make Chromium send "Origin: null" on the form POST
	w.WriteHeader(status)
	if err := consentTmpl.Execute(w, p); err != nil {
		s.log.Error("oauth: consent page", "err", err)
	}
}

func (s *Server) messagePage(w http.ResponseWriter, status int, title, msg string) {
	s.writePage(w, status, consentPage{Title: title, Step: "message", Message: msg, Alert: status >= 400})
}

// textPaused says that linking is paused for everyone (too many wrong codes
// from every device together: store.LinkPausedError) and for how long, in
// whole minutes rounded up, at least one — as the skill says it.
func textPaused(wait time.Duration) string {
	n := max(1, int((wait+time.Minute-1)/time.Minute))
	unit := " minutes"
	if n == 1 {
		unit = " minute"
	}
	return "Too many wrong codes were tried on this service just now, so linking is paused for everyone. " +
		"Please try your code again in " + models.SpellNumber(n) + unit + ". If it has run out by then, ask the care team for a new one."
}

const textExpired = "This linking page has expired or was already used. Go back to the app you were linking and start again."

const (
	textOtherBrowser = "This linking page was opened in another browser. Finish linking there, or go back to the app you were linking and start again."
	textNoCookie     = "Unsay could not tell that this is the browser that opened this linking page: this page needs its cookie. " +
		"Allow cookies for this site, go back to the app you were linking and start again."
)

// consentCookie names the cookie that binds a pending authorization
// request's consent page to one browser: 32 random bytes, base64url. The
// first GET of the page binds the request to SHA-256 of the browser's
// cookie (store.BindOAuthAuthRequestBrowser, set when the browser has
// none); every POST — the link code, Allow, Deny — must carry the cookie
// that hashes to it. So whoever else fetched the consent URL (the client
// that started the request, holding the page's csrf value) cannot answer
// for the person who typed the code. HttpOnly, SameSite=Lax (the page is
// reached by a cross-site redirect from the client, on which a Strict
// cookie is not sent; the POSTs are same-origin), Secure when the issuer
// is https, Path the consent endpoint only.
const consentCookie = "unsay_consent"

// consentCookieAge is how long a browser keeps its consent cookie; each
// opening of a consent page renews it.
const consentCookieAge = time.Hour

// browserCookie returns the request's consent cookie when it has the shape
// of one this server issues, else "".
func browserCookie(r *http.Request) string {
	ck, err := r.Cookie(consentCookie)
	if err != nil {
		return ""
	}
	if b, err := base64.RawURLEncoding.DecodeString(ck.Value); err != nil || len(b) != 32 {
		return ""
	}
	return ck.Value
}

func browserHash(cookie string) []byte {
	h := sha256.Sum256([]byte(cookie))
	return h[:]
}

// bindBrowser binds a to the browser of r (giving it a consent cookie
// when it has none) and reports whether it may see the page; when not, it
// has written the refusal (403: bound to another browser).
func (s *Server) bindBrowser(w http.ResponseWriter, r *http.Request, a *authRequest) bool {
	cookie := browserCookie(r)
	if cookie == "" {
		cookie = randomToken(32)
	}
	http.SetCookie(w, &http.Cookie{Name: consentCookie, Value: cookie, Path: PathConsent, MaxAge: int(consentCookieAge / time.Second),
		HttpOnly: true, Secure: strings.HasPrefix(s.issuer, "https://"), SameSite: http.SameSiteLaxMode})
	switch err := s.st.BindOAuthAuthRequestBrowser(r.Context(), a.row.ID, browserHash(cookie)); {
	case err == nil:
		return true
	case errors.Is(err, store.ErrAuthRequestState):
		s.log.Warn("oauth: consent page opened by a second browser; refused", "client", a.row.ClientID, "from", clientAddress(r))
		s.messagePage(w, http.StatusForbidden, "Opened in another browser", textOtherBrowser)
	case errors.Is(err, store.ErrOAuthNotFound):
		s.messagePage(w, http.StatusBadRequest, "Link expired", textExpired)
	default:
		s.log.Error("oauth: consent: bind browser", "err", err)
		s.messagePage(w, http.StatusInternalServerError, "Something went wrong", "Unsay could not load this page. Please try again in a minute.")
	}
	return false
}

// sameBrowser reports whether r carries the consent cookie a is bound to;
// when not, it has written the refusal (403), and a is unchanged.
func (s *Server) sameBrowser(w http.ResponseWriter, r *http.Request, a *authRequest) bool {
	cookie := browserCookie(r)
	if cookie != "" && len(a.row.BrowserHash) > 0 && subtle.ConstantTimeCompare(browserHash(cookie), a.row.BrowserHash) == 1 {
		return true
	}
	s.log.Warn("oauth: consent answer from a browser the page is not bound to; refused", "client", a.row.ClientID, "from", clientAddress(r), "cookie", cookie != "")
	if cookie == "" {
		s.messagePage(w, http.StatusForbidden, "Linking not confirmed", textNoCookie)
	} else {
		s.messagePage(w, http.StatusForbidden, "Opened in another browser", textOtherBrowser)
	}
	return false
}

// handleConsentPage shows the step the request is at: the link code, or
// what is granted with Allow / Don't allow. The first browser to open it
// is the only one that may answer it (consentCookie); another gets 403.
func (s *Server) handleConsentPage(w http.ResponseWriter, r *http.Request) {
	a, c, ok := s.consentRequest(w, r, r.URL.Query().Get("id"))
	if !ok || !s.bindBrowser(w, r, a) {
		return
	}
	s.writePage(w, http.StatusOK, s.pageFor(a, c, ""))
}

func (s *Server) consentRequest(w http.ResponseWriter, r *http.Request, id string) (*authRequest, *client, bool) {
	if id == "" || len(id) > 64 {
		s.messagePage(w, http.StatusBadRequest, "Link expired", textExpired)
		return nil, nil, false
	}
	a, err := s.storage.authRequestByID(r.Context(), id)
	if err != nil || a.grant != nil {
		if err != nil && !errors.Is(err, store.ErrOAuthNotFound) {
			s.log.Error("oauth: consent: authorization request", "err", err)
			s.messagePage(w, http.StatusInternalServerError, "Something went wrong", "Unsay could not load this page. Please try again in a minute.")
			return nil, nil, false
		}
		s.messagePage(w, http.StatusBadRequest, "Link expired", textExpired)
		return nil, nil, false
	}
	c, err := s.storage.client(r.Context(), a.row.ClientID)
	if err != nil {
		s.messagePage(w, http.StatusBadRequest, "Link expired", textExpired)
		return nil, nil, false
	}
	return a, c, true
}

func (s *Server) pageFor(a *authRequest, c *client, message string) consentPage {
	client := displayClientName(c.c.Name)
	if client == "" {
		client = "an app"
	}
	p := consentPage{ID: a.row.ID, CSRF: a.row.CSRF, Client: client, Host: hostOf(a.d.RedirectURI),
		Unverified: c.c.Kind != store.ClientRegistered, Message: message, Alert: message != ""}
	heading := func(lead, tail string) {
		p.Lead, p.Tail = lead, tail
		p.Title = lead + "\u2068" + client + "\u2069" + tail
	}
	if a.row.Patient == "" {
		heading("Link ", " to a care plan")
		p.Step = "code"
		return p
	}
	name := s.cfg.PatientName(a.row.Patient)
	heading("Allow ", " to read "+name+"'s care notes?")
	p.Step, p.Patient = "confirm", name
	for _, sc := range a.d.Scopes {
		if words := scopeWords(sc, name, c.c.ApprovedBy); words != "" {
			p.Grants = append(p.Grants, words)
		}
	}
	if a.d.Refresh {
		p.Grants = append(p.Grants, "Stay linked until you remove it.")
	}
	cannot := []string{"change anything in " + name + "'s care plan"}
	if !slices.Contains(a.d.Scopes, string(models.ScopeReadAssistant)) {
		cannot = append(cannot, "read the notes meant only for the assistant")
	}
	p.Cannot = "It cannot " + strings.Join(cannot, ", ") + ", or see anyone else's notes."
	return p
}

// handleConsentForm takes the page's three actions: "code" (redeem a link
// code: the person may link to that patient), "allow" (make the grant and
// send the person back with a code) and "deny" (send them back with
// access_denied). Every answer to the client carries "iss" (RFC 9207).
// Each needs the consent cookie of the browser the page is bound to and
// the page's csrf value; without them it is 403 and the request is
// unchanged.
func (s *Server) handleConsentForm(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 4<<10)
	if err := r.ParseForm(); err != nil {
		s.messagePage(w, http.StatusBadRequest, "Link expired", textExpired)
		return
	}
	a, c, ok := s.consentRequest(w, r, r.PostForm.Get("id"))
	if !ok || !s.sameBrowser(w, r, a) {
		return
	}
	if subtle.ConstantTimeCompare([]byte(r.PostForm.Get("csrf")), []byte(a.row.CSRF)) != 1 {
		s.messagePage(w, http.StatusForbidden, "Link expired", textExpired)
		return
	}
	ctx := r.Context()
	switch r.PostForm.Get("action") {
	case "deny":
		_ = s.st.DeleteOAuthAuthRequest(ctx, a.row.ID)
		s.redirectError(w, r, a, oidc.ErrAccessDenied().WithDescription("the person did not allow it"))
	case "code":
		if a.row.Patient != "" {
			http.Redirect(w, r, PathConsent+"?id="+url.QueryEscape(a.row.ID), http.StatusSeeOther)
			return
		}
		s.redeem(w, r, a, c, strings.ReplaceAll(strings.TrimSpace(r.PostForm.Get("code")), " ", ""))
	case "allow":
		if a.row.Patient == "" {
			s.writePage(w, http.StatusBadRequest, s.pageFor(a, c, "Enter the six-digit code first."))
			return
		}
		s.allow(w, r, a)
	default:
		s.writePage(w, http.StatusBadRequest, s.pageFor(a, c, "Choose one of the buttons."))
	}
}

// validCode reports whether code has the shape of a link code: six ASCII
// digits. One that cannot have been issued (CreateLinkCode's start at
// 100000, so "000000" or "012345") still has that shape: it is tried, and
// refused as a wrong code, not as one without six digits.
func validCode(code string) bool {
	if len(code) != 6 {
		return false
	}
	for i := range len(code) {
		if code[i] < '0' || code[i] > '9' {
			return false
		}
	}
	return true
}

func (s *Server) redeem(w http.ResponseWriter, r *http.Request, a *authRequest, c *client, code string) {
	if !validCode(code) {
		s.writePage(w, http.StatusBadRequest, s.pageFor(a, c, "A linking code has six digits. Please check it and try again."))
		return
	}
	ctx := r.Context()
	now := s.now()
	patient, err := s.st.RedeemLinkCodeForConsent(ctx, "consent:"+clientAddress(r), code, now)
	var paused *store.LinkPausedError
	switch {
	case errors.As(err, &paused):
		wait := max(time.Second, paused.Until.Sub(now))
		w.Header().Set("Retry-After", strconv.Itoa(int((wait+time.Second-1)/time.Second)))
		s.writePage(w, http.StatusTooManyRequests, s.pageFor(a, c, textPaused(wait)))
		return
	case errors.Is(err, store.ErrLinkBlocked):
		w.Header().Set("Retry-After", "900")
		s.writePage(w, http.StatusTooManyRequests, s.pageFor(a, c, "Too many wrong codes were tried. Please wait fifteen minutes, then ask the care team for a new code."))
		return
	case errors.Is(err, store.ErrLinkCodeInvalid):
		s.writePage(w, http.StatusBadRequest, s.pageFor(a, c, "That code didn't work. A code lasts ten minutes and works once. Ask the care team for a new one."))
		return
	case err != nil:
		s.log.Error("oauth: consent: link code", "err", err)
		s.writePage(w, http.StatusInternalServerError, s.pageFor(a, c, "Unsay could not check the code. Please try again in a minute."))
		return
	}
	if err := s.st.SetOAuthAuthRequestPatient(ctx, a.row.ID, patient); err != nil {
		s.messagePage(w, http.StatusBadRequest, "Link expired", textExpired)
		return
	}
	http.Redirect(w, r, PathConsent+"?id="+url.QueryEscape(a.row.ID), http.StatusSeeOther)
}

func (s *Server) allow(w http.ResponseWriter, r *http.Request, a *authRequest) {
	ctx := r.Context()
	// "ac:" like the other kinds' "cc:" and "internal:": an id never
	// starts with "-", so `unsay grants revoke ID` never reads it as a flag.
	id := "ac:" + randomToken(12)
	g := store.OAuthGrant{ID: id, ClientID: a.row.ClientID, Kind: store.GrantAuthorizationCode, Subject: "oauth:" + id,
		Patient: a.row.Patient, Scopes: a.d.Scopes, Resource: a.d.Resource,
		Consent: "link code on the consent page, from " + clientAddress(r), CreatedAt: s.now()}
	if err := s.st.CreateOAuthGrant(ctx, g); err != nil {
		s.log.Error("oauth: consent: grant", "err", err)
		s.messagePage(w, http.StatusInternalServerError, "Something went wrong", "Unsay could not save this. Please try again in a minute.")
		return
	}
	if err := s.st.SetOAuthAuthRequestGrant(ctx, a.row.ID, id); err != nil {
		_ = s.st.RevokeOAuthGrant(ctx, id, "consent page (request already answered)", s.now())
		s.messagePage(w, http.StatusBadRequest, "Link expired", textExpired)
		return
	}
	a.grant = &g
	a.row.GrantID = id
	callback, err := op.BuildAuthResponseCallbackURL(ctx, a, s.provider)
	if err != nil {
		s.log.Error("oauth: consent: code", "err", err)
		s.messagePage(w, http.StatusInternalServerError, "Something went wrong", "Unsay could not finish linking. Please try again.")
		return
	}
	s.log.Info("oauth: grant made on the consent page", "grant", id, "client", a.row.ClientID, "patient", a.row.Patient, "scopes", strings.Join(a.d.Scopes, " "))
	http.Redirect(w, r, addIss(callback, s.issuer), http.StatusSeeOther)
}

// redirectError sends the person back to the client with an OAuth error.
func (s *Server) redirectError(w http.ResponseWriter, r *http.Request, a *authRequest, e *oidc.Error) {
	e.State = a.d.State
	loc, err := op.AuthResponseURL(a.d.RedirectURI, oidc.ResponseTypeCode, oidc.ResponseMode(a.d.ResponseMode), e, s.provider.Encoder())
	if err != nil {
		s.messagePage(w, http.StatusBadRequest, "Link expired", textExpired)
		return
	}
	http.Redirect(w, r, addIss(loc, s.issuer), http.StatusSeeOther)
}
