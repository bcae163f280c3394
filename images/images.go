// Package images makes a merchant's product image safe to store and
// serve. An upload is a JPEG, PNG or WebP file, recognised by its first
// bytes whatever it claims to be; its dimensions are read from its header
// before any pixel is decoded, so a small file that would decode into
// gigabytes (a decompression bomb) is refused; it is decoded, scaled to
// fit MaxSide and encoded anew as a JPEG, so nothing of the file but its
// pixels survives: no metadata (camera, place), no appended script or
// archive (a polyglot), no colour profile trick.
package images

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"io"

	"golang.org/x/image/draw"
	"golang.org/x/image/webp"

	"github.com/seckill/seckill"
)

const (
	// MaxPixels bounds what an upload may decode to (width × height);
	// MaxDimension bounds either side. 25 MP is 100 MB of RGBA at most.
	MaxPixels    = 25_000_000
	MaxDimension = 10_000
	// MaxSide is the longest side of a stored image, in pixels.
	MaxSide = 1200
	// Quality is the stored JPEG's.
	Quality = 85
)

// The refusals of an upload (invalid_request, field "image").
var (
	ErrType    = refusal("must be a JPEG, PNG or WebP image")
	ErrPixels  = refusal("is too large: at most 25 megapixels and 10000 pixels a side")
	ErrCorrupt = refusal("is damaged or incomplete: it could not be read")
)

func refusal(msg string) error {
	return seckill.Invalid(seckill.FieldError{Field: "image", Message: msg})
}

// Image is a processed image: a JPEG of Width × Height, named by its ETag
// (a digest of its bytes).
type Image struct {
	Bytes         []byte
	Width, Height int
	ETag          string
}

// decoder is one accepted format: its magic bytes and its decoders.
type decoder struct {
	magic  func([]byte) bool
	config func(io.Reader) (image.Config, error)
	decode func(io.Reader) (image.Image, error)
}

var decoders = []decoder{
	{func(b []byte) bool { return bytes.HasPrefix(b, []byte{0xFF, 0xD8, 0xFF}) }, jpeg.DecodeConfig, jpeg.Decode},
	{func(b []byte) bool { return bytes.HasPrefix(b, []byte("\x89PNG\r\n\x1a\n")) }, png.DecodeConfig, png.Decode},
	{func(b []byte) bool { return len(b) >= 12 && string(b[:4]) == "RIFF" && string(b[8:12]) == "WEBP" }, webp.DecodeConfig, webp.Decode},
}

// Process checks raw and returns it as the image to store, or the
// refusal.
func Process(raw []byte) (Image, error) {
	var d *decoder
	for i := range decoders {
		if decoders[i].magic(raw) {
			d = &decoders[i]
			break
		}
	}
	if d == nil {
		return Image{}, ErrType
	}
	cfg, err := d.config(bytes.NewReader(raw))
	if err != nil {
		return Image{}, ErrCorrupt
	}
	if cfg.Width < 1 || cfg.Height < 1 || cfg.Width > MaxDimension || cfg.Height > MaxDimension ||
		int64(cfg.Width)*int64(cfg.Height) > MaxPixels {
		return Image{}, ErrPixels
	}
	src, err := d.decode(bytes.NewReader(raw))
	if err != nil {
		return Image{}, ErrCorrupt
	}
	w, h := fit(src.Bounds().Dx(), src.Bounds().Dy())
	// Drawn onto white: a transparent PNG keeps its look as a JPEG.
	dst := image.NewRGBA(image.Rect(0, 0, w, h))
	draw.Draw(dst, dst.Bounds(), image.NewUniform(color.White), image.Point{}, draw.Src)
	draw.CatmullRom.Scale(dst, dst.Bounds(), src, src.Bounds(), draw.Over, nil)
	var out bytes.Buffer
	if err := jpeg.Encode(&out, dst, &jpeg.Options{Quality: Quality}); err != nil {
		return Image{}, err
	}
	sum := sha256.Sum256(out.Bytes())
	return Image{Bytes: out.Bytes(), Width: w, Height: h, ETag: hex.EncodeToString(sum[:16])}, nil
}

// fit scales w × h down to fit MaxSide (never up), keeping the ratio.
func fit(w, h int) (int, int) {
	if w <= MaxSide && h <= MaxSide {
		return w, h
	}
	if w >= h {
		return MaxSide, max(1, h*MaxSide/w)
	}
	return max(1, w*MaxSide/h), MaxSide
}
