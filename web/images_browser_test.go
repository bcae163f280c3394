package web_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/seckill/seckill/images/imagestest"
	"github.com/seckill/seckill/system/servertest"
)

// writePNG writes a w × h PNG to a file of dir and returns its path.
func writePNG(t *testing.T, dir string, w, h int) string {
	t.Helper()
	path := filepath.Join(dir, fmt.Sprintf("product-%dx%d.png", w, h))
	if err := os.WriteFile(path, imagestest.PNG(w, h), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestProductImageInBrowser: the merchant creates a sale with a
// description and a product image from the form; the shop's list and the
// sale page show both (the image as the server re-encoded it). A file
// that is no image is refused beside the image field after the sale is
// saved, and the form stays to choose another; removing the image leaves
// the sale without one.
func TestProductImageInBrowser(t *testing.T) {
	env := servertest.New(t)
	srv := env.Server(t, nil)
	site := servertest.HTTP(t, srv.Handler())
	dir := artifacts(t)
	files := t.TempDir()
	b := browser(t)

	admin := newTab(t, b, "image-admin", site.URL)
	admin.logIn("#new-sale")
	admin.newSaleForm("Desk drop", "Brass lamp", "39.00", "20")
	admin.setWindow(-time.Minute)
	admin.do("describe and picture", chromedp.SendKeys(chromedp.CSS("#f-description"), "Solid brass.\nWarm light, 2700 K."),
		chromedp.SetUploadFiles(chromedp.CSS("#f-image"), []string{writePNG(t, files, 1600, 1000)}))
	admin.screenshot(dir, "admin-form-image.png")
	admin.do("create", chromedp.Click(chromedp.CSS("#save")))
	id := admin.dashboardSale()
	sale, err := env.Ledger.Sale(context.Background(), id)
	if err != nil || sale.ImageETag == "" || sale.Description != "Solid brass.\nWarm light, 2700 K." {
		t.Fatalf("the sale from the form: %+v %v", sale, err)
	}

	shopper := newTab(t, b, "image-shopper", site.URL)
	shopper.signIn("Gwen", fmt.Sprintf(`[data-sale="%d"] img.thumb`, id))
	shopper.waitJS("thumbnail loaded", fmt.Sprintf(`document.querySelector('[data-sale="%d"] img.thumb').naturalWidth === 1200`, id), 10*time.Second)
	shopper.screenshot(dir, "shopper-sales-image.png")
	shopper.do("sale page", chromedp.Navigate(fmt.Sprintf("%s/#/sales/%d", site.URL, id)), chromedp.WaitVisible(chromedp.CSS("#product-image")))
	shopper.waitJS("image and description", `document.querySelector("#product-image").naturalWidth === 1200 &&
		document.querySelector("#product-image").naturalHeight === 750 &&
		document.querySelectorAll("#description p").length === 2 && document.querySelector("#product-image").alt === "Brass lamp"`, 10*time.Second)
	shopper.screenshot(dir, "sale-with-image.png")
	shopper.phone(func() { shopper.screenshot(dir, "sale-with-image-phone.png") })

	// Not an image: refused beside the field, the form stays.
	notImage := filepath.Join(files, "notes.png")
	if err := os.WriteFile(notImage, []byte("<html><script>alert(1)</script></html>"), 0o644); err != nil {
		t.Fatal(err)
	}
	admin.allowed = append(admin.allowed, "status of 400 (Bad Request)")
	admin.do("edit", chromedp.Navigate(fmt.Sprintf("%s/admin#/sales/%d/edit", site.URL, id)), chromedp.WaitVisible(chromedp.CSS("#image-remove")),
		chromedp.SetUploadFiles(chromedp.CSS("#f-image"), []string{notImage}), chromedp.Click(chromedp.CSS("#save")))
	admin.waitJS("refused", `document.querySelector("#err-image").textContent.includes("JPEG, PNG or WebP") &&
		location.hash.endsWith("/edit")`, 10*time.Second)
	admin.screenshot(dir, "admin-form-image-refused.png")
	if s, err := env.Ledger.Sale(context.Background(), id); err != nil || s.ImageETag != sale.ImageETag {
		t.Errorf("a refused file changed the image: %q → %q (%v)", sale.ImageETag, s.ImageETag, err)
	}
	admin.do("remove", chromedp.Click(chromedp.CSS("#image-remove")))
	admin.waitJS("removed", `!document.querySelector("#image-preview img")`, 10*time.Second)
	if s, err := env.Ledger.Sale(context.Background(), id); err != nil || s.ImageETag != "" {
		t.Errorf("after removing: %q (%v)", s.ImageETag, err)
	}
	for _, tb := range []*tab{admin, shopper} {
		tb.checkConsole()
	}
}
