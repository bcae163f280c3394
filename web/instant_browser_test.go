package web_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/seckill/seckill/system/servertest"
)

// TestInstantCheckoutInBrowser: on an instant-checkout sale the shopper
// sees what she holds before she buys. With an empty wallet the button
// says the balance is too low and offers a top-up of what is missing;
// funded, it reads "Buy now — pay from balance ($15.00)", and one press
// buys and pays: the answer says paid, the balance shows what is left.
// The merchant's dashboard counts the charge. Screenshots at desktop and
// phone width, in English and in Chinese.
func TestInstantCheckoutInBrowser(t *testing.T) {
	env := servertest.New(t)
	env.StartPipeline(t)
	srv := env.Server(t, nil)
	site := servertest.HTTP(t, srv.Handler())
	dir := artifacts(t)
	b := browser(t)

	now := time.Now().UTC()
	sale := adminCall(t, site.URL, "POST", "/admin/api/sales", map[string]any{
		"name": "Prepaid drop", "item": "Game credits pack", "price_cents": 1500, "total": 5, "per_user_limit": 2,
		"starts_at": now.Add(-time.Minute).Format(time.RFC3339), "ends_at": now.Add(time.Hour).Format(time.RFC3339),
		"instant_checkout": true,
	})
	if sale["instant_checkout"] != true {
		t.Fatalf("the sale: %v", sale)
	}
	saleID := int64(sale["id"].(float64))

	eve := newTab(t, b, "eve", site.URL)
	eve.signIn("Eve", fmt.Sprintf(`[data-sale="%d"]`, saleID))
	eve.do("sale", chromedp.Navigate(fmt.Sprintf("%s/#/sales/%d", site.URL, saleID)), chromedp.WaitVisible(chromedp.CSS("#buy")))
	eve.waitJS("too low", `document.querySelector("#buy").disabled && document.querySelector("#buy").textContent === "Balance too low" &&
		document.querySelector("#instant-topup")?.textContent.endsWith(`+moneyJS(1500)+`)`, 10*time.Second)
	eve.screenshot(dir, "instant-short.png")
	eve.phone(func() { eve.screenshot(dir, "instant-short-phone.png") })

	// Funded (a top-up paid in another tab), the page reads the wallet
	// again when she comes back to it.
	env.Fund(t, shopperID(t, eve), 2000)
	eve.do("back to the tab", chromedp.Evaluate[chromedp.Void](`window.dispatchEvent(new Event("focus"))`))
	eve.waitJS("buy offered", `!document.querySelector("#buy").disabled &&
		document.querySelector("#buy").textContent === "Buy now — pay from balance (" + `+moneyJS(1500)+` + ")" &&
		document.querySelector("#instant-wallet .purse").textContent === `+moneyJS(2000), 10*time.Second)
	eve.screenshot(dir, "instant-ready.png")
	eve.do("buy", chromedp.Click(chromedp.CSS("#buy")))
	eve.waitJS("bought and paid", `document.querySelector("#result-title")?.textContent === "Bought and paid — thank you!" &&
		!document.querySelector("#pay") && document.querySelector("#instant-wallet .purse")?.textContent === `+moneyJS(500), 10*time.Second)
	eve.screenshot(dir, "instant-paid.png")
	eve.phone(func() { eve.screenshot(dir, "instant-paid-phone.png") })

	// Her orders say paid; the wallet shows the charge.
	eve.do("orders", chromedp.Click(chromedp.CSS(`a[data-nav="orders"]`)))
	eve.waitJS("paid order", `[...document.querySelectorAll("[data-order] .badge")].some((b) => b.textContent === "paid")`, 10*time.Second)

	// In Chinese, the same page.
	eve.do("sale again", chromedp.Navigate(fmt.Sprintf("%s/#/sales/%d", site.URL, saleID)), chromedp.WaitVisible(chromedp.CSS("#buy")))
	eve.chooseLanguage("zh-CN", "#buy")
	eve.waitJS("zh button", `document.querySelector("#buy").textContent === "余额不足"`, 10*time.Second)
	eve.noEnglish("the instant sale page in Chinese")
	eve.screenshot(dir, "zh-instant-short.png")
	eve.phone(func() { eve.screenshot(dir, "zh-instant-short-phone.png") })

	// The merchant's dashboard: the sale is an instant checkout, one charge.
	servertest.FlushOutcomes(t, srv)
	admin := newTab(t, b, "admin", site.URL)
	admin.logIn("#new-sale")
	admin.do("dashboard", chromedp.Navigate(fmt.Sprintf("%s/admin#/sales/%d", site.URL, saleID)), chromedp.WaitVisible(chromedp.CSS("#instant-stats")))
	admin.waitJS("charged 1", `document.querySelector("#stat-charged")?.textContent === "1"`, 15*time.Second)
	admin.screenshot(dir, "admin-instant-dashboard.png")
	for _, tb := range []*tab{eve, admin} {
		tb.checkConsole()
	}
}
