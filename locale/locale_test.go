package locale_test

import (
	"errors"
	"io/fs"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/text/language"

	"github.com/seckill/seckill"
	"github.com/seckill/seckill/images"
	"github.com/seckill/seckill/images/imagestest"
	"github.com/seckill/seckill/locale"
	"github.com/seckill/seckill/web"
)

var (
	placeholder = regexp.MustCompile(`\{(\w+)\}`)
	// t("key" or tx("key" in a page's script.
	used = regexp.MustCompile(`\bt[x]?\(\s*"([a-z0-9_.-]+)"`)
	// data-i18n="key" in a page.
	usedHTML = regexp.MustCompile(`data-i18n="([a-z0-9_.-]+)"`)
)

// TestCataloguesComplete: every language's catalogue holds the same keys,
// none empty, each with the same placeholders; every outcome code has
// its message in each; every key a page uses is in them.
func TestCataloguesComplete(t *testing.T) {
	cats := make([]locale.Catalogue, len(locale.Files))
	for i, f := range locale.Files {
		c, err := locale.Read(f)
		if err != nil {
			t.Fatal(err)
		}
		cats[i] = c
	}
	en := cats[0]
	for i, c := range cats {
		name := locale.Files[i]
		for k, v := range c {
			if strings.TrimSpace(v) == "" {
				t.Errorf("%s: %s is empty", name, k)
			}
			if _, ok := en[k]; !ok {
				t.Errorf("%s holds %s, which %s lacks", name, k, locale.Files[0])
			}
		}
		for k, v := range en {
			w, ok := c[k]
			if !ok {
				t.Errorf("%s lacks %s (%q)", name, k, v)
				continue
			}
			if a, b := holes(v), holes(w); !slices.Equal(a, b) {
				t.Errorf("%s: %s has the placeholders %v, the English %v", name, k, b, a)
			}
		}
		for _, code := range seckill.Codes() {
			if _, ok := c[locale.CodeKey(string(code))]; !ok {
				t.Errorf("%s lacks the message of the code %s", name, code)
			}
		}
	}
	// Every key the pages use.
	err := fs.WalkDir(web.Static, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !(strings.HasSuffix(path, ".js") || strings.HasSuffix(path, ".html")) {
			return err
		}
		src, err := fs.ReadFile(web.Static, path)
		if err != nil {
			return err
		}
		for _, re := range []*regexp.Regexp{used, usedHTML} {
			for _, m := range re.FindAllStringSubmatch(string(src), -1) {
				if !hasKey(en, m[1]) {
					t.Errorf("%s uses %s, which the catalogues lack", path, m[1])
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// hasKey: the key, or its plural forms (key.one, key.other).
func hasKey(c locale.Catalogue, k string) bool {
	_, ok := c[k]
	_, other := c[k+".other"]
	return ok || other
}

func holes(s string) []string {
	var out []string
	for _, m := range placeholder.FindAllStringSubmatch(s, -1) {
		out = append(out, m[1])
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// TestOf: Accept-Language picks the best language Seckill speaks (for
// Traditional Chinese, Simplified); a header naming none of them, or
// garbage, gets English.
func TestOf(t *testing.T) {
	for h, want := range map[string]language.Tag{
		"":                            language.English,
		"en-US,en;q=0.9":              language.English,
		"zh-CN,zh;q=0.9,en;q=0.8":     language.SimplifiedChinese,
		"zh":                          language.SimplifiedChinese,
		"zh-Hans-SG":                  language.SimplifiedChinese,
		"fr-FR,de;q=0.5":              language.English,
		"de;q=0.9,zh-CN;q=0.8":        language.SimplifiedChinese,
		"x;;;,=garbage":               language.English,
		strings.Repeat("zh-CN,", 500): language.English, // too long to parse
		"zh-CN":                       language.SimplifiedChinese,
		"zh-TW":                       language.SimplifiedChinese, // the closest it has
	} {
		if got := locale.Of(h); got != want {
			t.Errorf("Of(%.40q) = %v, want %v", h, got, want)
		}
	}
}

// TestFieldMessagesTranslated: every message a sale's rules, a text's and
// an image's checks give a field has its Chinese, its figures kept.
func TestFieldMessagesTranslated(t *testing.T) {
	var fields []seckill.FieldError
	collect := func(err error) {
		var e *seckill.Error
		if errors.As(err, &e) {
			fields = append(fields, e.Fields...)
		}
	}
	collect(seckill.Sale{}.Validate())
	_, err := seckill.SaleInput{}.NewSale()
	collect(err)
	bad := seckill.Sale{Name: " x", Item: "a\u202eb", Description: strings.Repeat("d", 3000), PriceCents: -1, Total: 5, PerUserLimit: 9,
		Buckets: 99, PowDifficulty: 99, AdmitPerSecond: -1, StartsAt: time.Now(), EndsAt: time.Now().Add(-time.Hour),
		QueueOpensAt: time.Now().Add(time.Hour)}
	collect(bad.Validate())
	instant := seckill.Sale{Name: "n", Item: "i", PriceCents: seckill.MaxPriceCents, Total: 1_000_000, PerUserLimit: 1_000_000, Buckets: 1,
		AdmitPerSecond: 1, StartsAt: time.Now(), EndsAt: time.Now().Add(time.Hour), QueueOpensAt: time.Now(), InstantCheckout: true}
	collect(instant.Validate())
	instant.PriceCents = 0
	collect(instant.Validate())
	_, err = seckill.SaleInput{InstantCheckout: new(bool)}.Change()
	collect(err)
	collect(seckill.ValidRestock(seckill.MaxTotal, 5))
	collect(seckill.ValidRestock(0, 0))
	for _, raw := range [][]byte{nil, imagestest.PNGClaiming(60_000, 60_000), imagestest.PNGClaiming(10, 10)} {
		_, err := images.Process(raw)
		collect(err)
	}
	if len(fields) < 15 {
		t.Fatalf("only %d field messages to try: %v", len(fields), fields)
	}
	for _, f := range fields {
		zh := locale.Field(language.SimplifiedChinese, f.Message)
		if zh == f.Message {
			t.Errorf("%s: %q has no Chinese (catalogue key field.%s)", f.Field, f.Message,
				regexp.MustCompile(`[0-9]+`).ReplaceAllString(f.Message, "{n}"))
		}
		for _, n := range regexp.MustCompile(`[0-9]+`).FindAllString(f.Message, -1) {
			if !strings.Contains(zh, n) {
				t.Errorf("%q in Chinese, %q, lost the figure %s", f.Message, zh, n)
			}
		}
		if en := locale.Field(language.English, f.Message); en != f.Message {
			t.Errorf("in English %q became %q", f.Message, en)
		}
	}
}
