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
	"golang.org/x/image/riff"
	"golang.org/x/image/vp8"
	"golang.org/x/image/vp8l"
	"golang.org/x/image/webp"

	"github.com/seckill/seckill"
)

const (
	// MaxPixels bounds what an upload may decode to (width × height);
	// MaxDimension bounds either side; MaxScans a JPEG's scans (a
	// progressive one has about ten; each costs a pass over every block).
	// A decoding holds up to ~16 bytes a pixel (a progressive CMYK
	// JPEG's coefficients and image): 16 MP is ~256 MB, and Process runs
	// at most Concurrent at once.
	MaxPixels    = 16_000_000
	MaxDimension = 8_000
	MaxScans     = 64
	Concurrent   = 2
	// MaxSide is the longest side of a stored image, in pixels.
	MaxSide = 1200
	// Quality is the stored JPEG's.
	Quality = 85
)

// The refusals of an upload (invalid_request, field "image").
var (
	ErrType    = refusal("must be a JPEG, PNG or WebP image")
	ErrPixels  = refusal("is too large: at most 16 megapixels and 8000 pixels a side")
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

// decoder is one accepted format: its magic bytes, its decoders, and
// what else must hold before its pixels are decoded.
type decoder struct {
	magic  func([]byte) bool
	config func(io.Reader) (image.Config, error)
	decode func(io.Reader) (image.Image, error)
	check  func(raw []byte, cfg image.Config) error
}

var decoders = []decoder{
	{func(b []byte) bool { return bytes.HasPrefix(b, []byte{0xFF, 0xD8, 0xFF}) }, jpeg.DecodeConfig, jpeg.Decode, jpegScans},
	{func(b []byte) bool { return bytes.HasPrefix(b, []byte("\x89PNG\r\n\x1a\n")) }, png.DecodeConfig, png.Decode, nil},
	{func(b []byte) bool { return len(b) >= 12 && string(b[:4]) == "RIFF" && string(b[8:12]) == "WEBP" }, webp.DecodeConfig, webp.Decode, webpFrames},
}

// jpegScans refuses a JPEG of more than MaxScans scans (a start-of-scan
// marker, FF DA, cannot occur inside coded data, where FF is followed by
// 00 or a restart marker).
func jpegScans(raw []byte, _ image.Config) error {
	if bytes.Count(raw, []byte{0xFF, 0xDA}) > MaxScans {
		return ErrPixels
	}
	return nil
}

// webpFrames holds every frame of a WebP to the canvas its header
// declares: an extended WebP's canvas (VP8X) is what DecodeConfig
// reports, while the decoder allocates for its frame's own size, which
// may be far larger.
func webpFrames(raw []byte, cfg image.Config) error {
	form, r, err := riff.NewReader(bytes.NewReader(raw))
	if err != nil || form != fccWEBP {
		return ErrCorrupt
	}
	for {
		id, n, data, err := r.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return ErrCorrupt
		}
		var w, h int
		switch id {
		case fccVP8L:
			c, err := vp8l.DecodeConfig(data)
			if err != nil {
				return ErrCorrupt
			}
			w, h = c.Width, c.Height
		case fccVP8:
			d := vp8.NewDecoder()
			d.Init(data, int(n))
			fh, err := d.DecodeFrameHeader()
			if err != nil {
				return ErrCorrupt
			}
			w, h = fh.Width, fh.Height
		default:
			continue
		}
		if w != cfg.Width || h != cfg.Height {
			return ErrPixels
		}
	}
}

var (
	fccWEBP = riff.FourCC{'W', 'E', 'B', 'P'}
	fccVP8  = riff.FourCC{'V', 'P', '8', ' '}
	fccVP8L = riff.FourCC{'V', 'P', '8', 'L'}
)

// slots bound the decodings at once (each may hold hundreds of MB).
var slots = make(chan struct{}, Concurrent)

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
	if d.check != nil {
		if err := d.check(raw, cfg); err != nil {
			return Image{}, err
		}
	}
	slots <- struct{}{}
	defer func() { <-slots }()
	src, err := d.decode(bytes.NewReader(raw))
	if err != nil {
		return Image{}, ErrCorrupt
	}
	if src.Bounds().Dx() != cfg.Width || src.Bounds().Dy() != cfg.Height {
		return Image{}, ErrCorrupt // what was decoded is not what was checked
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
