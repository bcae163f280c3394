package web_test

import (
	"fmt"
	"regexp"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/seckill/seckill/system/servertest"
)

// english finds a word of the pages' English in a page's text: shown in
// Chinese, a page has none (the user's own text, ids, codes and the
// brand aside, which the test's data keep free of these words).
var english = regexp.MustCompile(`\b(Sales?|Buy|Sign|Quantity|Starts|Ends|left|Wallet|orders?|Balance|Statement|Audit|Merchants?|Pause|Resume|Restock|Limit|Price|Log in|Password|Email|Top up|Paid|Loading)\b`)

// TestPagesInChinese: a shopper who picks 简体中文 in the header gets every
// page in Chinese (and keeps it on the next visit), the server's refusals
// in Chinese too, numbers and money written the Chinese way; the admin
// panel likewise. Screenshots of each page, desktop and phone.
func TestPagesInChinese(t *testing.T) {
	env := servertest.New(t)
	env.StartPipeline(t)
	srv := env.Server(t, nil)
	site := servertest.HTTP(t, srv.Handler())
	sale := servertest.MustSale(t, srv, servertest.SaleSpec{Total: 3, Limit: 2, PriceCents: 129900})
	endedSale(t, srv) // listed under Past
	dir := artifacts(t)
	src := axeSource(t)
	b := browser(t)

	shopper := newTab(t, b, "zh-shopper", site.URL)
	shopper.do("open", chromedp.Navigate(site.URL+"/"), chromedp.WaitVisible(chromedp.CSS("#lang")))
	shopper.chooseLanguage("zh-CN", "#name")
	shopper.signIn("小明", fmt.Sprintf(`[data-sale="%d"]`, sale.ID))
	shopper.noEnglish("the sale list")
	shopper.screenshot(dir, "zh-shop-sales.png")
	env.Fund(t, shopperID(t, shopper), 1_000_000)

	shopper.do("sale", chromedp.Navigate(fmt.Sprintf("%s/#/sales/%d", site.URL, sale.ID)), chromedp.WaitVisible(chromedp.CSS("#buy")))
	shopper.waitJS("in Chinese", `document.querySelector("#buy").textContent === "立即抢购" && document.documentElement.lang === "zh-CN"`, 10*time.Second)
	shopper.noEnglish("the sale page")
	shopper.screenshot(dir, "zh-shop-sale.png")
	shopper.do("buy", chromedp.Click(chromedp.CSS("#buy")))
	shopper.waitJS("bought", `document.querySelector("#result-title")?.textContent === "抢到了！"`, 10*time.Second)
	shopper.do("pay", chromedp.Click(chromedp.CSS("#pay")))
	shopper.waitJS("paid", `document.querySelector("#result-title")?.textContent === "已支付，谢谢！"`, 10*time.Second)
	// Money the Chinese way: the price of 1,299.00 dollars as zh-CN writes it.
	if got, want := shopper.eval(`document.querySelector(".hero .price").textContent`),
		shopper.eval(`new Intl.NumberFormat("zh-CN", {style: "currency", currency: "USD"}).format(1299)`); got != want {
		t.Errorf("the price reads %q, want %q", got, want)
	}
	shopper.noEnglish("the sale page after paying")
	shopper.screenshot(dir, "zh-shop-sale-paid.png")
	// The page's own API calls ask for Chinese: a refusal comes back in it.
	shopper.allowed = append(shopper.allowed, "status of 404 (Not Found)")
	if msg := shopper.evalAwait(`import("/static/common.js").then((m) => m.api("GET", "/api/sales/987654321")).then(() => "", (e) => e.message)`); msg != "没有这个活动。" {
		t.Errorf("a refusal to the Chinese page reads %q", msg)
	}
	// Each page in Chinese: no English, axe-core clean, on a desktop and a
	// phone.
	inChinese := func(tb *tab, prefix string) func(p sitePage, width int64) {
		return func(p sitePage, width int64) {
			name := fmt.Sprintf("zh-%s-%s-%d", prefix, p.name, width)
			tb.noEnglish(name)
			tb.axe(src, dir, name)
			tb.screenshot(dir, name+".png")
		}
	}
	shopper.visit([]sitePage{
		{"sale", fmt.Sprintf("/#/sales/%d", sale.ID), "#buy"},
		{"orders", "/#/orders", "[data-order]"},
		{"wallet", "/#/wallet", "[data-transfer]"},
	}, widths, inChinese(shopper, "shop"))

	// The admin panel, chosen on its login page.
	admin := newTab(t, b, "zh-admin", site.URL)
	admin.do("open", chromedp.Navigate(site.URL+"/admin"), chromedp.WaitVisible(chromedp.CSS("#lang")))
	admin.chooseLanguage("zh-CN", "#password")
	admin.noEnglish("the login page")
	admin.screenshot(dir, "zh-admin-login.png")
	admin.logIn("#new-sale")
	admin.visit([]sitePage{
		{"sales", "/admin#/", "#sales"},
		{"new", "/admin#/new", "#sale-form"},
		{"dashboard", fmt.Sprintf("/admin#/sales/%d", sale.ID), "#controls"},
		{"audit", "/admin#/audit", "[data-audit]"},
		{"merchants", "/admin#/merchants", "#merchant-form"},
		{"balance", "/admin#/balance", "#balance-account"},
	}, widths, inChinese(admin, "admin"))
	// A refusal of the form, in Chinese beside its field.
	admin.allowed = append(admin.allowed, "status of 400 (Bad Request)")
	admin.do("new sale", chromedp.Navigate(site.URL+"/admin#/new"), chromedp.WaitVisible(chromedp.CSS("#sale-form")),
		chromedp.SendKeys(chromedp.CSS("#f-name"), "夜场秒杀"), chromedp.SendKeys(chromedp.CSS("#f-item"), "机械键盘"),
		chromedp.SendKeys(chromedp.CSS("#f-price_cents"), "99"), chromedp.SendKeys(chromedp.CSS("#f-total"), "3"),
		chromedp.SetValue(chromedp.CSS("#f-per_user_limit"), "5"), chromedp.Click(chromedp.CSS("#save")))
	admin.waitJS("refused in Chinese", `document.querySelector("#err-per_user_limit").textContent === "必须在 1 到总量之间"`, 10*time.Second)
	admin.screenshot(dir, "zh-admin-form-refused.png")
	for _, tb := range []*tab{shopper, admin} {
		tb.checkConsole()
	}
}

// chooseLanguage picks lang in the header's switch; the page reloads in
// it, until ready is visible.
func (tb *tab) chooseLanguage(lang, ready string) {
	tb.t.Helper()
	tb.do("choose "+lang, chromedp.WaitVisible(chromedp.CSS("#lang")), chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`(() => {
		const s = document.querySelector("#lang");
		s.value = %q;
		s.dispatchEvent(new Event("change"));
	})()`, lang)))
	// The page reloads: a poll's context goes with the old page, so each
	// look is a fresh evaluation, retried until the deadline.
	expr := fmt.Sprintf(`document.documentElement.lang === %q && !!document.querySelector(%q)`, lang, ready)
	for deadline := time.Now().Add(10 * time.Second); ; {
		ok, err := chromedp.Run(tb.ctx, chromedp.Evaluate[bool](expr))
		if err == nil && ok {
			return
		}
		if time.Now().After(deadline) {
			tb.t.Fatalf("%s: not reloaded in %s (%v)\n%s", tb.name, lang, err, tb.describe())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// noEnglish fails the test when the page's text holds a word of the
// pages' English.
func (tb *tab) noEnglish(where string) {
	tb.t.Helper()
	text := tb.eval(`document.body.innerText`)
	if m := english.FindAllString(text, 5); m != nil {
		tb.t.Errorf("%s: %s shows English %q:\n%s", tb.name, where, m, text)
	}
}

// evalAwait runs a JavaScript expression that answers a promise of a
// string.
func (tb *tab) evalAwait(expr string) string {
	tb.t.Helper()
	s, err := chromedp.Run(tb.ctx, chromedp.Evaluate[string](expr, chromedp.EvalAwaitPromise))
	if err != nil {
		tb.t.Fatalf("%s: %s: %v", tb.name, expr, err)
	}
	return s
}
