// Package web holds Unsay's pages, embedded so the binary runs from any
// directory: echo.html (the Echo Show card, also served over MCP as
// ui://unsay/echo — P-16), index.html and clinician.html.
//
// The pages are self-contained: inline CSS and JavaScript, no external
// fonts, scripts or URLs, no build step. They talk only to this server
// (/mcp, /write, /verify) and carry bearer tokens only in the Authorization
// header, never in a query string.
//
// echo.html: with #token=… (a reader token, taken from the fragment and
// removed from the address bar) it speaks MCP Streamable HTTP to /mcp
// (protocol 2025-11-25): initialize, every page of resources/list, a read
// and a subscription per care:// fact, and the GET event stream to re-read
// on notifications/resources/updated; a read's _meta "unsay/retraction"
// becomes the retraction card on top. Inside an MCP Apps host (an iframe, no
// token: the view holds none and fetches nothing — its resource declares no
// connect domain) it sends ui/initialize and renders the structuredContent
// of each ui/notifications/tool-result (whats_changed's changes,
// care_instruction's instructions); when the host proxies tool calls
// (serverTools) it asks whats_changed through the host every 15 s, so a
// revision published while it is on screen is drawn. Without either it
// shows only how to open it. One filter (speakableURI) admits unversioned care:// URIs only: nothing
// from the assistant-only scheme is ever rendered (P-1, P-16).
//
// Elements carry data-testid attributes for the browser tests:
//
//	echo.html       fact-row (one per fact; data-uri), stale, retraction
//	                (retraction-old, retraction-new, retraction-who), no-token,
//	                status, error, waiting
//	index.html      verify-form, verify-uri, verify-submit, verify-all-form,
//	                verify-token, verify-all-submit, verify-message,
//	                verify-result, chain (data-uri), verdict, version-row
//	clinician.html  token, signin-submit, error-token, signed-in, sub, signout,
//	                write-form, patient, domain, audience, audience-note, value,
//	                authorLabel, staleAfter, write-submit, write-result
//	                (data-subscribers), current, current-version,
//	                current-value, history, history-row, patient-suggestion
//	                (a patient that is not the token's), new-topic (its
//	                question, choices, create), and error-<field>
//	                for patient, domain, audience, value, authorId,
//	                authorLabel, staleAfter, priority and form
package web

import (
	"embed"
	"net/http"
)

//go:embed echo.html index.html clinician.html
var pages embed.FS

// Paths the Handler serves, and the embedded page behind each.
const (
	PathIndex     = "/"          // index.html: what Unsay is, live chain verification
	PathEcho      = "/echo.html" // echo.html: the Echo Show card (P-16)
	PathClinician = "/clinician" // clinician.html: sign in with care.write, write a revision
	contentType   = "text/html; charset=utf-8"
)

// routes maps an exact request path to its embedded file. Nothing else is
// served: no directory listing, no path cleaning, no filesystem access.
var routes = map[string]string{
	PathIndex:     "index.html",
	PathEcho:      "echo.html",
	PathClinician: "clinician.html",
}

// contentSecurityPolicy lets a page run its own inline script and style and
// talk only to this origin (fetch to /mcp, /write, /verify); it loads nothing
// from anywhere else and may not be framed by another site. (Inside an MCP
// Apps host the card arrives over MCP as ui://unsay/echo, not through this
// handler, so the host's own sandbox applies there.)
const contentSecurityPolicy = "default-src 'none'; script-src 'unsafe-inline'; " +
	"style-src 'unsafe-inline'; connect-src 'self'; img-src 'self' data:; media-src blob:; " +
	"base-uri 'none'; form-action 'none'; frame-ancestors 'self'"

// EchoHTML returns the bytes of echo.html: the same bytes GET /echo.html
// serves and the MCP resource ui://unsay/echo carries (P-16). The result is
// a fresh copy; callers may keep or modify it.
func EchoHTML() []byte { return mustPage("echo.html") }

// mustPage reads an embedded page. The names are fixed at compile time by
// the go:embed directive above, so a failure is a build defect and panics.
func mustPage(name string) []byte {
	b, err := pages.ReadFile(name)
	if err != nil {
		panic("web: embedded page missing: " + name)
	}
	return b
}

// Handler serves exactly three paths with GET or HEAD:
//
//	/            index.html
//	/echo.html   echo.html
//	/clinician   clinician.html
//
// Every other path — including /index.html, /clinician.html, /web.go and
// anything with "..", "//" or a trailing slash — is 404 (no redirect, no
// cleaning: the path must match exactly). Another method on a served path is
// 405 with an Allow header. Pages carry Content-Type text/html; charset=utf-8,
// nosniff, no-referrer, a Content-Security-Policy that allows only this
// origin, and Cache-Control no-cache.
func Handler() http.Handler {
	return http.HandlerFunc(serve)
}

func serve(w http.ResponseWriter, r *http.Request) {
	name, ok := routes[r.URL.Path]
	if !ok || (r.URL.RawPath != "" && r.URL.RawPath != r.URL.Path) {
		http.NotFound(w, r)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	b := mustPage(name)
	h := w.Header()
	h.Set("Content-Type", contentType)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Content-Security-Policy", contentSecurityPolicy)
	h.Set("Cache-Control", "no-cache")
	if r.Method == http.MethodHead {
		return
	}
	_, _ = w.Write(b)
}
