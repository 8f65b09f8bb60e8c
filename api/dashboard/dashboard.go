package dashboard

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"net/http"
	"path"
	"strings"
	"time"
)

// static holds the page and its assets; embed needs a package-level
// variable, and an embed.FS is read-only.
//
//go:embed static
var static embed.FS

// Paths the page is served under. Mount Handler at both, e.g.
// "GET "+PagePattern: the page at the root, its assets under AssetPrefix.
const (
	// PagePattern is the page's route pattern (the root only, so that
	// unknown paths keep the API's JSON 404).
	PagePattern = "/{$}"
	// AssetPrefix is the prefix of the page's assets (a route pattern
	// too: the subtree under it).
	AssetPrefix = "/ui/"
)

// contentSecurityPolicy allows the page to load its own script and style
// and to call its own node, and nothing else: no inline script, no other
// origin. Chart colours are set through the CSSOM, which the policy allows.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// file is one embedded file, ready to serve.
type file struct {
	body  []byte
	ctype string
	etag  string
}

// handler serves the embedded files. Safe for concurrent use: it is
// read-only after Handler builds it.
type handler struct {
	files map[string]file // by name under static/, e.g. "app.js"
}

// Handler returns the dashboard's handler: GET / serves the page, GET
// /ui/NAME its assets; any other path answers 404. Responses carry an
// ETag (the content's hash) and Cache-Control: no-cache, so a browser
// revalidates cheaply and never runs a stale script after an upgrade.
func Handler() http.Handler {
	h := &handler{files: map[string]file{}}
	err := fs.WalkDir(static, "static", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := static.ReadFile(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		h.files[strings.TrimPrefix(p, "static/")] = file{body: b, ctype: contentType(p), etag: `"` + hex.EncodeToString(sum[:8]) + `"`}
		return nil
	})
	if err != nil {
		// The files are compiled in: failing to read them is a broken
		// build, not an input.
		panic("dashboard: embedded files unreadable: " + err.Error())
	}
	return h
}

func contentType(name string) string {
	switch path.Ext(name) {
	case ".html":
		return "text/html; charset=utf-8"
	case ".js":
		return "text/javascript; charset=utf-8"
	case ".css":
		return "text/css; charset=utf-8"
	case ".svg":
		return "image/svg+xml"
	}
	return "application/octet-stream"
}

// ServeHTTP implements http.Handler.
func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	name := "index.html"
	if r.URL.Path != "/" {
		var ok bool
		if name, ok = strings.CutPrefix(r.URL.Path, AssetPrefix); !ok || name == "index.html" {
			name = ""
		}
	}
	f, ok := h.files[name]
	if !ok {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"error":{"code":"not_found","message":"no such dashboard file"}}` + "\n"))
		return
	}
	hd := w.Header()
	hd.Set("Content-Type", f.ctype)
	hd.Set("Cache-Control", "no-cache")
	hd.Set("ETag", f.etag)
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Referrer-Policy", "no-referrer")
	if name == "index.html" {
		hd.Set("Content-Security-Policy", contentSecurityPolicy)
	}
	// ServeContent answers If-None-Match with 304, and HEAD.
	http.ServeContent(w, r, name, time.Time{}, bytes.NewReader(f.body))
}
