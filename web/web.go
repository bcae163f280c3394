// Package web holds the shopper page and the merchant admin panel: plain
// HTML, CSS and JavaScript modules, embedded into the binary, no build
// step.
package web

import (
	"embed"
	"io/fs"
)

//go:embed static
var files embed.FS

// Static is the tree served under /static/ (index.html and admin.html are
// served at / and /admin).
var Static, _ = fs.Sub(files, "static")
