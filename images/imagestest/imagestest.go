// Package imagestest makes the images the tests upload: a picture of a
// given size, and a decompression bomb's header.
package imagestest

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"image"
	"image/color"
	"image/png"
)

// Picture is a w × h gradient.
func Picture(w, h int) image.Image {
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			img.Set(x, y, color.NRGBA{uint8(255 * x / w), uint8(120 + 100*y/h), 180, 255})
		}
	}
	return img
}

// PNG is Picture(w, h) as a PNG file.
func PNG(w, h int) []byte {
	var b bytes.Buffer
	if err := png.Encode(&b, Picture(w, h)); err != nil {
		panic(err) // an in-memory buffer does not fail
	}
	return b.Bytes()
}

// PNGClaiming is a PNG of a few bytes whose header claims w × h pixels
// (8-bit RGBA) and whose body holds none: a decompression bomb as its
// header reads, or, small, a damaged file.
func PNGClaiming(w, h uint32) []byte {
	chunk := func(kind string, data []byte) []byte {
		var b bytes.Buffer
		_ = binary.Write(&b, binary.BigEndian, uint32(len(data)))
		b.WriteString(kind)
		b.Write(data)
		_ = binary.Write(&b, binary.BigEndian, crc32.ChecksumIEEE(append([]byte(kind), data...)))
		return b.Bytes()
	}
	ihdr := make([]byte, 13)
	binary.BigEndian.PutUint32(ihdr[0:], w)
	binary.BigEndian.PutUint32(ihdr[4:], h)
	ihdr[8], ihdr[9] = 8, 6
	out := []byte("\x89PNG\r\n\x1a\n")
	out = append(out, chunk("IHDR", ihdr)...)
	out = append(out, chunk("IDAT", []byte{0x78, 0x9c, 0x03, 0x00, 0x00, 0x00, 0x00, 0x01})...)
	return append(out, chunk("IEND", nil)...)
}

// WebPClaiming is an extended WebP whose canvas (VP8X) is cw × ch while
// its lossless frame (VP8L) claims fw × fh: a decoder that trusted the
// canvas would allocate for the frame.
func WebPClaiming(cw, ch, fw, fh int) []byte {
	chunk := func(kind string, data []byte) []byte {
		var b bytes.Buffer
		b.WriteString(kind)
		_ = binary.Write(&b, binary.LittleEndian, uint32(len(data)))
		b.Write(data)
		if len(data)%2 == 1 {
			b.WriteByte(0)
		}
		return b.Bytes()
	}
	le24 := func(n int) []byte { return []byte{byte(n), byte(n >> 8), byte(n >> 16)} }
	vp8x := append(append([]byte{0x10, 0, 0, 0}, le24(cw-1)...), le24(ch-1)...) // flags: alpha
	bits := uint32(fw-1) | uint32(fh-1)<<14
	vp8l := []byte{0x2f, byte(bits), byte(bits >> 8), byte(bits >> 16), byte(bits >> 24), 0, 0, 0, 0, 0, 0, 0}
	body := append([]byte("WEBP"), chunk("VP8X", vp8x)...)
	body = append(body, chunk("VP8L", vp8l)...)
	var b bytes.Buffer
	b.WriteString("RIFF")
	_ = binary.Write(&b, binary.LittleEndian, uint32(len(body)))
	b.Write(body)
	return b.Bytes()
}
