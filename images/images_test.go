package images_test

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"image"
	"image/jpeg"
	"testing"

	"github.com/seckill/seckill/images"
	"github.com/seckill/seckill/images/imagestest"
)

func jpegOf(t *testing.T, img image.Image) []byte {
	var b bytes.Buffer
	if err := jpeg.Encode(&b, img, nil); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// withExif puts an APP1 (Exif) segment holding secret right after the
// JPEG's start-of-image marker.
func withExif(jpg []byte, secret string) []byte {
	payload := append([]byte("Exif\x00\x00"), secret...)
	seg := []byte{0xFF, 0xE1, 0, 0}
	binary.BigEndian.PutUint16(seg[2:], uint16(len(payload)+2))
	out := append([]byte{}, jpg[:2]...)
	out = append(out, seg...)
	out = append(out, payload...)
	return append(out, jpg[2:]...)
}

// tinyWebP is a 1 × 1 lossless WebP.
var tinyWebP, _ = base64.StdEncoding.DecodeString("UklGRhoAAABXRUJQVlA4TA0AAAAvAAAAEAcQERGIiP4HAA==")

// TestProcess: JPEG, PNG and WebP come out as a JPEG scaled to fit
// MaxSide, with no byte of metadata or of anything appended to the file;
// a wrong type, a decompression bomb, a truncated file and garbage are
// refused.
func TestProcess(t *testing.T) {
	for _, tc := range []struct {
		name string
		raw  []byte
		w, h int
	}{
		{"png", imagestest.PNG(2400, 1200), images.MaxSide, 600},
		{"small jpeg", jpegOf(t, imagestest.Picture(300, 200)), 300, 200},
		{"portrait png", imagestest.PNG(500, 3000), 200, images.MaxSide},
		{"webp", tinyWebP, 1, 1},
	} {
		img, err := images.Process(tc.raw)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if img.Width != tc.w || img.Height != tc.h || len(img.ETag) != 32 {
			t.Errorf("%s: %d × %d, etag %q; want %d × %d", tc.name, img.Width, img.Height, img.ETag, tc.w, tc.h)
		}
		cfg, format, err := image.DecodeConfig(bytes.NewReader(img.Bytes))
		if err != nil || format != "jpeg" || cfg.Width != tc.w || cfg.Height != tc.h {
			t.Errorf("%s: stored as %s %d × %d (%v)", tc.name, format, cfg.Width, cfg.Height, err)
		}
	}

	// Metadata and a polyglot's payload do not survive.
	const secret = "GPS 48.8584 N 2.2945 E"
	script := "<script>alert(document.cookie)</script>PK\x03\x04"
	raw := append(withExif(jpegOf(t, imagestest.Picture(64, 64)), secret), script...)
	img, err := images.Process(raw)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(img.Bytes, []byte(secret)) || bytes.Contains(img.Bytes, []byte("<script>")) ||
		bytes.Contains(img.Bytes, []byte("Exif")) || bytes.Contains(img.Bytes, []byte("PK\x03\x04")) {
		t.Error("metadata or the appended payload survived the re-encoding")
	}

	full := jpegOf(t, imagestest.Picture(200, 200))
	for _, tc := range []struct {
		name string
		raw  []byte
		want error
	}{
		{"gif", []byte("GIF89a\x01\x00\x01\x00\x80\x00\x00\xff\xff\xff\x00\x00\x00!\xf9\x04"), images.ErrType},
		{"html claiming nothing", []byte("<html><script>alert(1)</script></html>"), images.ErrType},
		{"svg", []byte(`<svg xmlns="http://www.w3.org/2000/svg" onload="alert(1)"/>`), images.ErrType},
		{"empty", nil, images.ErrType},
		{"bomb 50000 × 50000", imagestest.PNGClaiming(50_000, 50_000), images.ErrPixels},
		{"bomb 100000 × 1", imagestest.PNGClaiming(100_000, 1), images.ErrPixels},
		{"truncated jpeg", full[:len(full)/2], images.ErrCorrupt},
		{"jpeg header only", full[:20], images.ErrCorrupt},
		{"png with a broken body", imagestest.PNGClaiming(10, 10), images.ErrCorrupt},
		{"webp: a 1 × 1 canvas, a 8000 × 8000 frame", imagestest.WebPClaiming(1, 1, 8000, 8000), images.ErrPixels},
		{"webp: a 16384 × 16384 frame", imagestest.WebPClaiming(16384, 16384, 16384, 16384), images.ErrPixels},
		{"jpeg of a thousand scans", append(full[:len(full)-2], append(bytes.Repeat([]byte{0xFF, 0xDA, 0, 2}, 1000), 0xFF, 0xD9)...), images.ErrPixels},
	} {
		if _, err := images.Process(tc.raw); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
}
