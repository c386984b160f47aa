// Package web holds Unsay's pages, embedded so the binary runs from any
// directory: echo.html (the Echo Show card, also served over MCP as
// ui://unsay/echo — P-16), index.html and clinician.html.
package web

import (
	"embed"
	"net/http"
)

//go:embed echo.html index.html clinician.html
var pages embed.FS

// EchoHTML returns the bytes of echo.html: the same bytes GET /echo.html
// serves and the MCP resource ui://unsay/echo carries (P-16).
func EchoHTML() []byte { b, _ := pages.ReadFile("echo.html"); return b }

// Handler serves GET / (index.html), /echo.html and /clinician
// (clinician.html). Any other path is 404; nothing maps to the filesystem.
func Handler() http.Handler {
	mux := http.NewServeMux()
	page := func(name string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			b, err := pages.ReadFile(name)
			if err != nil {
				http.Error(w, "not found", http.StatusNotFound)
				return
			}
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			w.Header().Set("X-Content-Type-Options", "nosniff")
			_, _ = w.Write(b)
		}
	}
	mux.Handle("GET /{$}", page("index.html"))
	mux.Handle("GET /echo.html", page("echo.html"))
	mux.Handle("GET /clinician", page("clinician.html"))
	return mux
}
