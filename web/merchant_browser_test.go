package web_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/seckill/seckill/system/servertest"
)

// TestMerchantInBrowser: the operator creates a merchant in the panel;
// the merchant logs in with its email, creates a sale and edits its
// price; the sale's history of changes shows both, in its name; an empty
// form flags every required field; a taken email is refused beside its
// field; the audit log shows no raw value and filters; the pages at phone
// width.
func TestMerchantInBrowser(t *testing.T) {
	env := servertest.New(t)
	srv := env.Server(t, nil)
	site := servertest.HTTP(t, srv.Handler())
	dir := artifacts(t)
	b := browser(t)

	op := newTab(t, b, "operator", site.URL)
	op.logIn("#new-sale")
	op.do("merchants", chromedp.Navigate(site.URL+"/admin#/merchants"), chromedp.WaitVisible(chromedp.CSS("#merchant-form")),
		chromedp.SendKeys(chromedp.CSS("#m-email"), "shop@merchant.example"),
		chromedp.SendKeys(chromedp.CSS("#m-name"), "Corner Shop"),
		chromedp.SendKeys(chromedp.CSS("#m-password"), "a good long password"),
		chromedp.Click(chromedp.CSS("#m-create")), chromedp.WaitVisible(chromedp.CSS("[data-merchant]")))
	op.screenshot(dir, "admin-merchants.png")
	// The same email again: the refusal sits beside the email in the
	// operator's words, and no "created" word is left showing.
	op.allowed = append(op.allowed, "status of 409 (Conflict)")
	op.do("taken email", chromedp.SendKeys(chromedp.CSS("#m-email"), "shop@merchant.example"),
		chromedp.SendKeys(chromedp.CSS("#m-name"), "Copy Shop"),
		chromedp.SendKeys(chromedp.CSS("#m-password"), "another long password"),
		chromedp.Click(chromedp.CSS("#m-create")))
	op.waitJS("taken", `document.querySelector("#err-m-email").textContent.includes("already uses this email") &&
		!document.querySelector("#m-error").textContent && !document.querySelector(".toast")?.textContent.includes("created")`, 10*time.Second)
	if text := op.eval(`document.querySelector("#app").innerText`); strings.Contains(text, "sign in instead") {
		t.Errorf("the operator is told to sign in instead:\n%s", text)
	}
	op.screenshot(dir, "admin-merchant-taken.png")

	m := newTab(t, b, "merchant", site.URL)
	m.do("log in by email", chromedp.Navigate(site.URL+"/admin"), chromedp.WaitVisible(chromedp.CSS("#email")),
		chromedp.SendKeys(chromedp.CSS("#email"), "shop@merchant.example"),
		chromedp.SendKeys(chromedp.CSS("#password"), "a good long password"),
		chromedp.Click(chromedp.CSS("#login")), chromedp.WaitVisible(chromedp.CSS("#new-sale")))
	if got := m.text("#app h1"); got != "My sales" {
		t.Errorf("a merchant's list is titled %q", got)
	}
	m.do("empty form", chromedp.Click(chromedp.CSS("#new-sale")), chromedp.WaitVisible(chromedp.CSS("#sale-form")),
		chromedp.Click(chromedp.CSS("#save")))
	for _, f := range []string{"name", "item", "price_cents", "total"} {
		m.waitJS("flag "+f, fmt.Sprintf(`document.querySelector("#err-%s").textContent !== ""`, f), 5*time.Second)
	}
	m.screenshot(dir, "admin-form-empty.png")
	m.do("fill", chromedp.SendKeys(chromedp.CSS("#f-name"), "Demo drop"), chromedp.SendKeys(chromedp.CSS("#f-item"), "Keyboard K2"),
		chromedp.SendKeys(chromedp.CSS("#f-price_cents"), "49.99"), chromedp.SendKeys(chromedp.CSS("#f-total"), "50"))
	m.setWindow(-time.Minute)
	m.do("create", chromedp.Click(chromedp.CSS("#save")))
	id := m.dashboardSale()
	sale, err := env.Ledger.Sale(context.Background(), id)
	if err != nil || sale.MerchantID == 0 {
		t.Fatalf("the merchant's sale: %+v %v", sale, err)
	}
	m.do("edit the price", chromedp.Navigate(fmt.Sprintf("%s/admin#/sales/%d/edit", site.URL, id)), chromedp.WaitVisible(chromedp.CSS("#f-price_cents")),
		chromedp.SetValue(chromedp.CSS("#f-price_cents"), "0.49"), chromedp.Click(chromedp.CSS("#save")))
	m.waitJS("timeline", `document.querySelectorAll("#timeline [data-audit]").length === 2`, 10*time.Second)
	timeline := m.text("#timeline tbody")
	// Before → after of what changed, in the panel's words.
	for _, want := range []string{"Edited the sale", "Price: $49.99 → $0.49", "Created the sale", "shop@merchant.example"} {
		if !strings.Contains(timeline, want) {
			t.Errorf("the timeline lacks %q:\n%s", want, timeline)
		}
	}
	m.screenshot(dir, "admin-timeline.png")

	// The operator's form names the sale's merchant (and could hand it over).
	op.do("the operator's form", chromedp.Navigate(fmt.Sprintf("%s/admin#/sales/%d/edit", site.URL, id)), chromedp.WaitVisible(chromedp.CSS("#f-merchant_id")))
	op.waitJS("the merchant chosen", fmt.Sprintf(`document.querySelector("#f-merchant_id").value === "%d"`, sale.MerchantID), 5*time.Second)
	op.screenshot(dir, "admin-form-operator.png")

	// The operator sees the merchant's sale and its changes in the log.
	op.do("audit log", chromedp.Navigate(site.URL+"/admin#/audit"), chromedp.WaitVisible(chromedp.CSS("[data-audit]")))
	if text := op.eval(`document.querySelector("#app").innerText`); strings.Contains(text, "null") || strings.Contains(text, "merchant_id") {
		t.Errorf("the audit log shows a raw value:\n%s", text)
	}
	op.screenshot(dir, "admin-audit.png")
	// Filtered to the edits: only the price change is left.
	op.do("filter", chromedp.SetValue(chromedp.CSS("#audit-action"), "sale.patch"), chromedp.Click(chromedp.CSS("#audit-apply")))
	op.waitJS("filtered", `location.hash === "#/audit?action=sale.patch" && document.querySelectorAll("[data-audit]").length === 1`, 10*time.Second)
	op.screenshot(dir, "admin-audit-filtered.png")
	op.phone(func() { op.screenshot(dir, "admin-audit-phone.png") })

	// At phone width.
	m.do("phone", chromedp.EmulateViewport(390, 844), chromedp.Navigate(site.URL+"/admin#/"), chromedp.WaitVisible(chromedp.CSS("#sales")))
	m.waitJS("names whole", `(() => { const a = document.querySelector("#sales td a strong"); return a && a.getClientRects().length <= 2 })()`, 5*time.Second)
	m.waitJS("actions in view", inView(`#sales [data-sale] a[href$="/edit"]`)+" && "+inView(`#sales [data-sale] a.button`), 5*time.Second)
	m.screenshot(dir, "admin-phone-sales.png")
	m.do("phone dashboard", chromedp.Navigate(fmt.Sprintf("%s/admin#/sales/%d", site.URL, id)), chromedp.WaitVisible(chromedp.CSS("#timeline [data-audit]")))
	m.screenshot(dir, "admin-phone-dashboard.png")
	for _, tb := range []*tab{op, m} {
		tb.checkConsole()
	}
}
