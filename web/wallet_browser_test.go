package web_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/seckill/seckill/system/servertest"
)

// TestWalletInBrowser is money moving through the pages, with the funds
// pipeline running: a shopper tops up at the test provider's page and
// comes back to the wallet; buys on a merchant's priced sale and is told,
// paying, how much the wallet lacks, with a top-up of exactly that; tops
// up, pays from the orders page, and reads the statement. The merchant
// sees the charge on its balance, refunds the order (a second refund is
// refused beside the form); the shopper's order reads refunded; the
// operator credits the shopper's wallet from the platform's account.
// Every view at desktop and phone width.
func TestWalletInBrowser(t *testing.T) {
	// The test provider's checkout is a page of the server at its public
	// address: the server is told its port before it serves.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	base := fmt.Sprintf("http://localhost:%d", ln.Addr().(*net.TCPAddr).Port)
	env := servertest.New(t, "SECKILL_PUBLIC_URL="+base, "SECKILL_PUBLIC_ORIGINS="+base,
		"SECKILL_PLATFORM_FEE_BPS=1000") // the platform keeps 10%
	env.StartPipeline(t)
	srv := env.Server(t, nil)
	site := httptest.NewUnstartedServer(srv.Handler())
	site.Listener.Close()
	site.Listener = ln
	site.Start()
	t.Cleanup(site.Close)
	site.URL = base
	dir := artifacts(t)
	b := browser(t)

	// The operator opens a merchant account and a sale of the merchant's,
	// by the admin API, as a script would.
	const email, password = "till@merchant.example", "a good long password"
	m := adminCall(t, site.URL, "POST", "/admin/api/merchants", map[string]any{"email": email, "name": "Till's Tills", "password": password})
	now := time.Now().UTC()
	sale := adminCall(t, site.URL, "POST", "/admin/api/sales", map[string]any{
		"name": "Lunch drop", "item": "Espresso machine", "price_cents": 2500, "total": 10, "per_user_limit": 2,
		"starts_at": now.Add(-time.Minute).Format(time.RFC3339), "ends_at": now.Add(time.Hour).Format(time.RFC3339),
		"merchant_id": m["id"],
	})
	saleID := int64(sale["id"].(float64))

	// Dana signs in and finds her wallet, empty, from the header.
	dana := newTab(t, b, "dana", site.URL)
	dana.allowed = append(dana.allowed,
		"status of 402 (Payment Required)", // the payment refused on purpose
		"status of 404 (Not Found)")        // the test provider's page names no icon: Chromium asks for /favicon.ico
	dana.signIn("Dana", fmt.Sprintf(`[data-sale="%d"]`, saleID))
	dana.do("wallet", chromedp.Click(chromedp.CSS(`a[data-nav="wallet"]`)), chromedp.WaitVisible(chromedp.CSS("#topup-form")))
	dana.waitJS("empty wallet", `document.querySelector("#wallet-balance").textContent === `+moneyJS(0)+
		` && !document.querySelector("#statement-empty").hidden`, 10*time.Second)
	danaID := dana.text("#wallet-user")
	dana.do("amount", chromedp.SendKeys(chromedp.CSS("#topup-amount"), "10"))
	dana.screenshot(dir, "wallet-topup.png")

	// The top-up is paid at the provider's page, which comes back to the wallet.
	dana.topUp("10.00")
	dana.waitJS("balance 10", `document.querySelector("#wallet-balance").textContent === `+moneyJS(1000), 10*time.Second)
	dana.screenshot(dir, "wallet-after-topup.png")

	// She buys two at 25.00: 50.00, more than she holds. Paying says so,
	// with what is missing and a top-up of it.
	dana.do("sale", chromedp.Navigate(fmt.Sprintf("%s/#/sales/%d", site.URL, saleID)), chromedp.WaitVisible(chromedp.CSS("#buy")))
	dana.waitJS("buy enabled", `!document.querySelector("#buy").disabled`, 10*time.Second)
	dana.do("buy two", chromedp.Click(chromedp.CSS(`[data-step="more"]`)), chromedp.Click(chromedp.CSS("#buy")))
	dana.waitJS("bought", `document.querySelector("#result-title")?.textContent === "You got it!"`, 10*time.Second)
	dana.waitJS("wallet beside pay", `document.querySelector("#pay-wallet .purse")?.textContent === `+moneyJS(1000), 10*time.Second)
	orderID := dana.eval(`document.querySelector("#order-id").dataset.orderId`)
	dana.do("pay", chromedp.Click(chromedp.CSS("#pay")))
	dana.waitJS("too low", `document.querySelector("#insufficient #missing")?.textContent === `+moneyJS(4000)+
		` && document.querySelector("#topup-missing").textContent.endsWith(`+moneyJS(4000)+`) && !document.querySelector("#pay").disabled`, 10*time.Second)
	dana.screenshot(dir, "sale-insufficient-funds.png")
	dana.phone(func() { dana.screenshot(dir, "sale-insufficient-funds-phone.png") })

	// The button fills the wallet's form with what is missing; once paid
	// at the provider the wallet offers to go and pay the order.
	dana.do("top up what is missing", chromedp.Click(chromedp.CSS("#topup-missing")), chromedp.WaitVisible(chromedp.CSS("#topup-for")))
	dana.waitJS("amount filled", `document.querySelector("#topup-amount").value === "40.00"`, 5*time.Second)
	dana.screenshot(dir, "wallet-topup-for-order.png")
	dana.topUp("40.00")
	dana.waitJS("balance 50", `document.querySelector("#wallet-balance").textContent === `+moneyJS(5000), 10*time.Second)
	dana.do("to the order", chromedp.Click(chromedp.CSS("#pay-order")), chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`[data-pay="%s"]`, orderID))))
	dana.do("pay it", chromedp.Click(chromedp.CSS(fmt.Sprintf(`[data-pay="%s"]`, orderID))))
	dana.waitJS("paid", fmt.Sprintf(`document.querySelector('[data-order="%s"] .badge').textContent === "paid" &&
		document.querySelector("#pay-wallet .purse").textContent === %s && !document.querySelector("#insufficient")`, orderID, moneyJS(0)), 10*time.Second)

	// The statement, from the ledger once the pipeline has followed: the
	// charge, then the two top-ups, each with the balance after it.
	dana.do("statement", chromedp.Click(chromedp.CSS(`a[data-nav="wallet"]`)), chromedp.WaitVisible(chromedp.CSS("#topup-form")))
	dana.waitJS("statement lines", `[...document.querySelectorAll("table.statement tr[data-kind]")].map((r) => r.dataset.kind).join() === "charge,topup,topup" &&
		document.querySelector("#statement-note").hidden`, 30*time.Second)
	if got, want := dana.text(`table.statement tr[data-kind="charge"] td.amount.out`), dana.eval(`new Intl.NumberFormat(undefined, {style: "currency", currency: "USD", signDisplay: "exceptZero"}).format(-50)`); got != want {
		t.Errorf("the charge reads %q, want %q", got, want)
	}
	dana.screenshot(dir, "wallet-statement.png")
	dana.phone(func() { dana.screenshot(dir, "wallet-statement-phone.png") })

	// The merchant sees the charge less the platform's 10% and refunds the
	// order from its statement's line.
	merchant := newTab(t, b, "merchant", site.URL)
	merchant.allowed = append(merchant.allowed, "status of 409 (Conflict)", // the second refund, refused on purpose
		"status of 402 (Payment Required)") // the payout of too much
	merchant.do("log in", chromedp.Navigate(site.URL+"/admin"), chromedp.WaitVisible(chromedp.CSS("#email")),
		chromedp.SendKeys(chromedp.CSS("#email"), email), chromedp.SendKeys(chromedp.CSS("#password"), password),
		chromedp.Click(chromedp.CSS("#login")), chromedp.WaitVisible(chromedp.CSS("#new-sale")))
	merchant.do("balance", chromedp.Click(chromedp.CSS(`a[data-nav="balance"]`)), chromedp.WaitVisible(chromedp.CSS("#refund-form")))
	merchant.waitJS("the charge", `document.querySelector("#balance").textContent === `+moneyJS(4500)+
		fmt.Sprintf(` && document.querySelector('[data-refund="%s"]') && document.querySelector("#statement-note").hidden`, orderID), 30*time.Second)
	merchant.screenshot(dir, "admin-balance-merchant.png")
	merchant.phone(func() { merchant.screenshot(dir, "admin-balance-merchant-phone.png") })
	// A payout of more than the account holds is refused in words and
	// moves nothing (the refund below needs all of it).
	merchant.do("pay out too much", chromedp.SendKeys(chromedp.CSS("#payout-amount"), "46"), chromedp.Click(chromedp.CSS("#payout-submit")))
	merchant.waitJS("payout refused", `document.querySelector("#payout-error").textContent.startsWith("Your account holds less than that") &&
		document.querySelector("#balance").textContent === `+moneyJS(4500), 10*time.Second)
	merchant.screenshot(dir, "admin-payout-refused.png")
	merchant.do("refund", chromedp.Click(chromedp.CSS(fmt.Sprintf(`[data-refund="%s"]`, orderID))),
		chromedp.SendKeys(chromedp.CSS("#refund-reason"), "arrived broken"))
	if got := merchant.value("#refund-order"); got != orderID {
		t.Errorf("the refund form holds order %q, want %q", got, orderID)
	}
	merchant.do("refund it", chromedp.Click(chromedp.CSS("#refund-submit")))
	merchant.waitJS("refunded", `document.querySelector("#refund-result .result.good") && document.querySelector("#balance").textContent === `+moneyJS(0)+
		` && document.querySelector('tr[data-kind="refund"]') && document.querySelector("#statement-note").hidden`, 30*time.Second)
	merchant.screenshot(dir, "admin-refund.png")

	// A second refund of the order is refused, in the server's words.
	merchant.do("refund again", chromedp.SendKeys(chromedp.CSS("#refund-order"), orderID),
		chromedp.SendKeys(chromedp.CSS("#refund-reason"), "again"), chromedp.Click(chromedp.CSS("#refund-submit")))
	merchant.waitJS("refused", `document.querySelector("#refund-error").textContent === "The order was refunded."`, 10*time.Second)
	merchant.screenshot(dir, "admin-refund-refused.png")
	merchant.phone(func() { merchant.screenshot(dir, "admin-refund-refused-phone.png") })

	// Dana's order reads refunded; the money is back.
	dana.do("orders", chromedp.Navigate(site.URL+"/#/orders"), chromedp.WaitVisible(chromedp.CSS("[data-order]")))
	dana.waitJS("refunded badge", `document.querySelector("[data-order] .badge.refunded")?.textContent === "refunded" &&
		document.querySelector("#pay-wallet .purse").textContent === `+moneyJS(5000), 10*time.Second)
	dana.screenshot(dir, "shopper-orders-refunded.png")
	dana.phone(func() { dana.screenshot(dir, "shopper-orders-refunded-phone.png") })

	// The operator credits her wallet from the platform's account (its fee
	// came back with the refund: it goes below zero).
	op := newTab(t, b, "operator", site.URL)
	op.logIn("#new-sale")
	op.do("balance", chromedp.Click(chromedp.CSS(`a[data-nav="balance"]`)), chromedp.WaitVisible(chromedp.CSS("#credit-form")))
	op.waitJS("platform", `document.querySelector("#balance").textContent === `+moneyJS(0)+` && document.querySelector("#statement-note").hidden`, 30*time.Second)
	op.do("credit", chromedp.SendKeys(chromedp.CSS("#credit-user"), danaID), chromedp.SendKeys(chromedp.CSS("#credit-amount"), "5.25"),
		chromedp.SendKeys(chromedp.CSS("#credit-reason"), "sorry for the broken machine"), chromedp.Click(chromedp.CSS("#credit-submit")))
	op.waitJS("credited", `document.querySelector("#credit-result .result.good") && document.querySelector("#balance").textContent === `+moneyJS(-525)+
		` && document.querySelector('tr[data-kind="credit"]') && document.querySelector("#statement-note").hidden`, 30*time.Second)
	op.screenshot(dir, "admin-balance-operator-credit.png")
	op.phone(func() { op.screenshot(dir, "admin-balance-operator-credit-phone.png") })

	// The operator reads the merchant's account too.
	op.do("the merchant's", chromedp.SetValue(chromedp.CSS("#balance-of"), fmt.Sprint(m["id"])),
		chromedp.Evaluate[chromedp.Void](`document.querySelector("#balance-of").dispatchEvent(new Event("change"))`))
	op.waitJS("merchant's account", fmt.Sprintf(`location.hash === "#/balance/%v" && document.querySelector("#balance-account")?.textContent === "merchant:%v"`, m["id"], m["id"]), 10*time.Second)

	dana.do("wallet again", chromedp.Click(chromedp.CSS(`a[data-nav="wallet"]`)), chromedp.WaitVisible(chromedp.CSS("#topup-form")))
	dana.waitJS("credit arrived", `document.querySelector("#wallet-balance").textContent === `+moneyJS(5525)+
		` && [...document.querySelectorAll("table.statement tr[data-kind]")].map((r) => r.dataset.kind).sort().join() === "charge,credit,fee,refund,topup,topup"`+
		` && document.querySelector("table.statement tr[data-kind]").dataset.kind === "credit"`, 30*time.Second)
	dana.screenshot(dir, "wallet-statement-refund-credit.png")

	for _, tb := range []*tab{dana, merchant, op} {
		tb.checkConsole()
	}
}

// topUp submits the wallet's top-up form, pays amount (as the test
// provider's page writes it) there and waits to be back on the wallet,
// the top-up arrived.
func (tb *tab) topUp(amount string) {
	tb.t.Helper()
	tb.do("to the provider", chromedp.Click(chromedp.CSS("#topup-submit")))
	tb.waitThroughNavigation("the provider's page", `location.pathname.startsWith("/pay/test/") && document.querySelector(".amount")?.textContent === `+
		fmt.Sprintf("%q", amount+" USD"), 10*time.Second)
	if amount == "10.00" {
		tb.screenshot(artifacts(tb.t), "pay-test-page.png")
	}
	tb.do("pay", chromedp.Click(chromedp.CSS("button.pay")))
	tb.waitThroughNavigation("back in the wallet", `location.pathname === "/" && location.hash === "#/wallet" &&
		document.querySelector('#topup-status [data-topup="succeeded"]')`, 10*time.Second)
}

// phone runs fn at a phone's width (390 px), then goes back to the desktop's.
func (tb *tab) phone(fn func()) {
	tb.t.Helper()
	tb.do("phone width", chromedp.EmulateViewport(390, 844))
	fn()
	tb.do("desktop width", chromedp.EmulateViewport(1280, 900))
}

// eval runs a JavaScript expression in the page and returns its string.
func (tb *tab) eval(expr string) string {
	tb.t.Helper()
	s, err := chromedp.Run(tb.ctx, chromedp.Evaluate[string](expr))
	if err != nil {
		tb.t.Fatalf("%s: %s: %v", tb.name, expr, err)
	}
	return s
}

// value is an input's value.
func (tb *tab) value(sel string) string {
	tb.t.Helper()
	return tb.eval(fmt.Sprintf(`document.querySelector(%q).value`, sel))
}

// moneyJS is a JavaScript expression: cents of USD as the browser's
// locale writes them, as the pages show money.
func moneyJS(cents int64) string {
	return fmt.Sprintf(`new Intl.NumberFormat(undefined, {style: "currency", currency: "USD"}).format(%d / 100)`, cents)
}

// adminCall sends an admin API request with the operator's token and
// returns the decoded answer, failing the test on anything but a 2xx.
func adminCall(t *testing.T, base, method, path string, body any) map[string]any {
	t.Helper()
	b, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(method, base+path, bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+servertest.AdminToken)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	var out map[string]any
	if err := json.NewDecoder(res.Body).Decode(&out); err != nil || res.StatusCode/100 != 2 {
		t.Fatalf("%s %s: %s %v (%v)", method, path, res.Status, out, err)
	}
	return out
}
