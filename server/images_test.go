package server_test

import (
	"bytes"
	"fmt"
	"image"
	"image/jpeg"
	"strings"
	"testing"
	"time"

	"github.com/seckill/seckill/images/imagestest"
)

// TestSaleImages: a merchant's product image is stored re-encoded (a
// JPEG of at most 1200 px a side), shown in the sale as a versioned URL,
// served with an ETag and a year's caching by that URL; a bomb, a
// polyglot's payload, a wrong type, a truncated file and an oversize body
// are refused with a clear error and change nothing; removing it leaves a
// 404.
func TestSaleImages(t *testing.T) {
	st := newStack(t, "SECKILL_IMAGE_MAX_BYTES=200000")
	now := time.Now().UTC()
	r := call(t, st.h, "POST", "/admin/api/sales", map[string]any{"name": "Pictured", "item": "Lamp", "price_cents": 1500,
		"total": 5, "per_user_limit": 1, "starts_at": now.Add(-time.Minute), "ends_at": now.Add(time.Hour),
		"description": "Brass.\nWarm light."}, admin())
	if r.Status != 201 || r.Body["description"] != "Brass.\nWarm light." || r.Body["image_url"] != nil {
		t.Fatal(r)
	}
	id := num(r.Body, "id")
	path := fmt.Sprintf("/admin/api/sales/%d/image", id)
	put := func(body []byte, contentType string) response {
		return call(t, st.h, "PUT", path, string(body), admin(), "Content-Type: "+contentType)
	}
	auditRowsOf := func() int { return len(auditRows(t, st, fmt.Sprintf("?sale_id=%d&action=sale.image", id))) }

	up := put(imagestest.PNG(2400, 1600), "image/png")
	url, _ := up.Body["image_url"].(string)
	if up.Status != 200 || !strings.HasPrefix(url, fmt.Sprintf("/api/sales/%d/image?v=", id)) {
		t.Fatalf("upload: %v", up)
	}
	got := call(t, st.h, "GET", url, nil)
	cfg, format, err := image.DecodeConfig(strings.NewReader(got.Raw))
	if got.Status != 200 || got.Header.Get("Content-Type") != "image/jpeg" || err != nil || format != "jpeg" ||
		cfg.Width != 1200 || cfg.Height != 800 {
		t.Fatalf("the image: %d %v %s %d × %d (%v)", got.Status, got.Header, format, cfg.Width, cfg.Height, err)
	}
	etag := got.Header.Get("ETag")
	if !strings.Contains(got.Header.Get("Cache-Control"), "immutable") || etag == "" {
		t.Errorf("by its versioned URL: %v", got.Header)
	}
	if r := call(t, st.h, "GET", url, nil, "If-None-Match: "+etag); r.Status != 304 {
		t.Errorf("If-None-Match: %d", r.Status)
	}
	if r := call(t, st.h, "GET", fmt.Sprintf("/api/sales/%d/image", id), nil); r.Header.Get("Cache-Control") != "public, max-age=60" {
		t.Errorf("without the version: %v", r.Header)
	}
	if shop := call(t, st.h, "GET", fmt.Sprintf("/api/sales/%d", id), nil); shop.Body["image_url"] != url {
		t.Errorf("the shop's sale names %v, want %s", shop.Body["image_url"], url)
	}
	if n := auditRowsOf(); n != 1 {
		t.Errorf("%d sale.image rows after the upload", n)
	}

	// A polyglot: a JPEG with a script and a ZIP after its end. Stored,
	// the payload is gone.
	var jpg bytes.Buffer
	if err := jpeg.Encode(&jpg, image.NewGray(image.Rect(0, 0, 50, 50)), nil); err != nil {
		t.Fatal(err)
	}
	poly := put(append(jpg.Bytes(), "<script>alert(1)</script>PK\x03\x04"...), "image/jpeg")
	polyURL, _ := poly.Body["image_url"].(string)
	if stored := call(t, st.h, "GET", polyURL, nil); poly.Status != 200 || strings.Contains(stored.Raw, "<script>") ||
		strings.Contains(stored.Raw, "PK\x03\x04") {
		t.Errorf("polyglot: %v; stored %d bytes, the payload kept: %v", poly, len(stored.Raw), strings.Contains(stored.Raw, "<script>"))
	}

	// Refusals change nothing: the polyglot's clean image stays.
	full := imagestest.PNG(100, 100)
	for _, tc := range []struct {
		name, contentType string
		body              []byte
		status            int
		code              string
	}{
		{"a bomb", "image/png", imagestest.PNGClaiming(60_000, 60_000), 400, "invalid_request"},
		{"GIF", "image/gif", []byte("GIF89a\x01\x00\x01\x00\x00\x00\x00;"), 400, "invalid_request"},
		{"HTML claiming PNG", "image/png", []byte("<html><script>alert(1)</script></html>"), 400, "invalid_request"},
		{"truncated", "image/png", full[:len(full)/2], 400, "invalid_request"},
		{"oversize", "image/png", bytes.Repeat([]byte{0x89}, 300_000), 413, "body_too_large"},
		{"empty", "image/png", nil, 400, "invalid_request"},
	} {
		r := put(tc.body, tc.contentType)
		if r.Status != tc.status || r.code() != tc.code {
			t.Errorf("%s: %v", tc.name, r)
		}
		if tc.status == 400 && !strings.Contains(r.Raw, `"field":"image"`) {
			t.Errorf("%s: the refusal names no field: %s", tc.name, r.Raw)
		}
	}
	if sale := call(t, st.h, "GET", fmt.Sprintf("/admin/api/sales/%d", id), nil, admin()); sale.Body["image_url"] != polyURL {
		t.Errorf("after the refusals the sale names %v, want %s", sale.Body["image_url"], polyURL)
	}
	if n := auditRowsOf(); n != 2 {
		t.Errorf("%d sale.image rows after two uploads and six refusals", n)
	}
	if r := call(t, st.h, "PUT", path, string(full)); r.Status != 401 {
		t.Errorf("without a session: %v", r)
	}

	// Removed: the sale has none, the URL answers 404.
	if r := call(t, st.h, "DELETE", path, nil, admin()); r.Status != 200 || r.Body["image_url"] != nil {
		t.Errorf("remove: %v", r)
	}
	if r := call(t, st.h, "GET", polyURL, nil); r.Status != 404 || r.code() != "not_found" {
		t.Errorf("a removed image: %v", r)
	}
}
