package status

import (
	"embed"
	"io/fs"
	"net/http"
)

// consoleFiles is the admin console: one page, its script and stylesheet,
// served from the binary with no external assets (DESIGN §3).
//
//go:embed console/index.html console/console.js console/console.css
var consoleFiles embed.FS

// consoleCSP allows only the console's own files and same-origin fetches.
const consoleCSP = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; " +
	"base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// consoleHandler serves /admin/ (the page) and /admin/<file>; anything
// else under /admin/ is 404.
func consoleHandler() http.Handler {
	sub, err := fs.Sub(consoleFiles, "console")
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	files := http.StripPrefix("/admin", http.FileServerFS(sub))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", consoleCSP)
		h.Set("Cache-Control", "no-cache")
		files.ServeHTTP(w, r)
	})
}
