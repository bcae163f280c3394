package server

import (
	"io/fs"
	"net/http"

	"github.com/gin-gonic/gin"

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
		body, err := fs.ReadFile(web.Static, name)
		if err != nil {
			panic("web: missing " + name) // embedded at build time
		}
		return func(c *gin.Context) { c.Data(http.StatusOK, "text/html; charset=utf-8", body) }
	}
	e.GET("/", pageHeaders, page("index.html"))
	e.GET("/admin", pageHeaders, page("admin.html"))
	assets := http.StripPrefix("/static", http.FileServerFS(web.Static))
	e.GET("/static/*file", pageHeaders, gin.WrapH(assets))
}
