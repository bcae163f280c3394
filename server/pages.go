package server

import (
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/seckill/seckill"
	"github.com/seckill/seckill/web"
)

// pageHeaders keep the pages to their own origin: scripts, styles and
// connections (fetch, WebSocket) only from here, no framing.
func pageHeaders(c *gin.Context) {
	h := c.Writer.Header()
	h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; "+
		"connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "same-origin")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Cache-Control", "no-cache")
	c.Next()
}

// pages serves the shopper page at /, the admin panel at /admin and their
// assets under /static/, all embedded in the binary.
func (s *Server) pages(e *gin.Engine) {
	page := func(name string) gin.HandlerFunc {
		body := mustRead(name)
		return func(c *gin.Context) { c.Data(http.StatusOK, "text/html; charset=utf-8", body) }
	}
	e.GET("/", pageHeaders, page("index.html"))
	// An account's verification link: the shopper page confirms it.
	e.GET("/verify", pageHeaders, page("index.html"))
	e.GET("/admin", pageHeaders, page("admin.html"))
	e.GET("/static/*file", pageHeaders, serveAsset)
}

func mustRead(name string) []byte {
	body, err := fs.ReadFile(web.Static, name)
	if err != nil {
		panic("web: missing " + name) // embedded at build time
	}
	return body
}

// serveAsset serves one embedded file, in full (the assets are small; no
// ranges or conditional requests, so no answer of the file server's own).
// Anything else under /static/ (a missing file, a directory, a path that
// climbs out) is a JSON 404, never a listing or a plain-text answer.
func serveAsset(c *gin.Context) {
	name := strings.TrimPrefix(c.Param("file"), "/")
	if !fs.ValidPath(name) {
		abort(c, errNotFound)
		return
	}
	body, err := fs.ReadFile(web.Static, name)
	if err != nil {
		abort(c, errNotFound)
		return
	}
	ct := mime.TypeByExtension(path.Ext(name))
	if ct == "" {
		ct = "application/octet-stream"
	}
	c.Data(http.StatusOK, ct, body)
}

var errNotFound = seckill.ErrNotFound

// notFoundPage is what a browser gets for an unknown page.
var notFoundPage = mustRead("404.html")

// noMethod answers a known path asked with a method it does not take:
// 405 with the JSON error body (Gin has set Allow).
func noMethod(c *gin.Context) { abort(c, seckill.ErrMethodNotAllowed) }

// noRoute answers an unknown path: a page for a browser navigating to it,
// the JSON error body for everything else (API calls, assets, scripts).
func noRoute(c *gin.Context) {
	p := c.Request.URL.Path
	api := strings.HasPrefix(p, "/api/") || strings.HasPrefix(p, "/admin/api/") || strings.HasPrefix(p, "/ws/") ||
		strings.HasPrefix(p, "/static/")
	if !api && c.Request.Method == http.MethodGet && strings.Contains(c.GetHeader("Accept"), "text/html") {
		pageHeaders(c)
		c.Data(http.StatusNotFound, "text/html; charset=utf-8", notFoundPage)
		c.Abort()
		return
	}
	abort(c, errNotFound)
}
