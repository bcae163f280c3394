package web_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/seckill/seckill"
	"github.com/seckill/seckill/server"
	"github.com/seckill/seckill/system/servertest"
)

// controlsJS is true when the dashboard's controls were drawn for status
// and offer exactly the actions listed (their data-action), in order.
func controlsJS(status string, actions ...string) string {
	return fmt.Sprintf(`(() => { const c = document.querySelector("#controls");
		return c && c.dataset.status === %q && document.querySelector("#status").textContent !== "" &&
			[...c.querySelectorAll("[data-action]")].map((b) => b.dataset.action).join(",") === %q; })()`,
		status, strings.Join(actions, ","))
}

// TestDashboardFollowsTheSale: the controls always match the sale's
// status, whoever changed it: pause here shows Resume here and in another
// tab without a reload; End asks first, and "Keep it running" changes
// nothing; once ended, both tabs offer nothing more and no countdown. A
// shopper's open page follows a restock (units and total).
func TestDashboardFollowsTheSale(t *testing.T) {
	env := servertest.New(t)
	srv := env.Server(t, nil)
	site := servertest.HTTP(t, srv.Handler())
	sale := servertest.MustSale(t, srv, servertest.SaleSpec{Total: 3, Limit: 2})
	dashboard := fmt.Sprintf("%s/admin#/sales/%d", site.URL, sale.ID)
	dir := artifacts(t)
	b := browser(t)

	here, there := newTab(t, b, "dash-here", site.URL), newTab(t, b, "dash-there", site.URL)
	for _, tb := range []*tab{here, there} {
		tb.logIn("#new-sale")
		tb.do("dashboard", chromedp.Navigate(dashboard), chromedp.WaitVisible(chromedp.CSS("#controls")))
		tb.waitJS("active controls", controlsJS("active", "pause", "end", "restock"), 10*time.Second)
	}
	shopper := newTab(t, b, "dash-shopper", site.URL)
	shopper.do("sale page", chromedp.Navigate(fmt.Sprintf("%s/#/sales/%d", site.URL, sale.ID)), chromedp.WaitVisible(chromedp.CSS("#remaining")))
	shopper.waitJS("live", `document.querySelector("#mode").classList.contains("live")`, 10*time.Second)

	here.do("pause", chromedp.Click(chromedp.CSS(`[data-action="pause"]`)))
	for _, tb := range []*tab{here, there} {
		tb.waitJS("paused controls", controlsJS("paused", "resume", "end", "restock"), 10*time.Second)
	}
	there.screenshot(dir, "admin-dashboard-paused-other-tab.png")
	there.do("resume", chromedp.Click(chromedp.CSS(`[data-action="resume"]`)))
	for _, tb := range []*tab{here, there} {
		tb.waitJS("active again", controlsJS("active", "pause", "end", "restock"), 10*time.Second)
	}

	// Restock: the shopper's open page shows the new units and total.
	here.do("restock", chromedp.SetValue(chromedp.CSS(fmt.Sprintf("#restock-qty-%d", sale.ID)), "9"),
		chromedp.Click(chromedp.CSS(`[data-action="restock"]`)))
	shopper.waitJS("restock seen", `document.querySelector("#remaining").textContent === "12" &&
		document.querySelector("#total").textContent === "of 12" &&
		document.querySelector(".buy-box .bar > div").getBoundingClientRect().width <= document.querySelector(".buy-box .bar").getBoundingClientRect().width`,
		10*time.Second)

	// End asks first; keeping it running changes nothing.
	here.do("end?", chromedp.Click(chromedp.CSS(`[data-action="end"]`)), chromedp.WaitVisible(chromedp.CSS("#confirm-end")))
	here.screenshot(dir, "admin-dashboard-confirm-end.png")
	here.do("keep it", chromedp.Click(chromedp.CSS(`[data-action="end-cancel"]`)))
	here.waitJS("controls back", controlsJS("active", "pause", "end", "restock"), 5*time.Second)
	if s, err := env.Ledger.Sale(context.Background(), sale.ID); err != nil || s.Status != seckill.StatusActive {
		t.Fatalf("after keeping it running the sale is %v (%v)", s.Status, err)
	}
	here.do("end", chromedp.Click(chromedp.CSS(`[data-action="end"]`)), chromedp.Click(chromedp.CSS(`[data-action="end-confirmed"]`)))
	for _, tb := range []*tab{here, there} {
		tb.waitJS("ended", controlsJS("ended")+` && document.querySelector("#status").textContent === "Ended" &&
			!document.querySelector("#when").textContent.includes("ends in")`, 10*time.Second)
	}
	here.screenshot(dir, "admin-dashboard-ended.png")
	shopper.waitJS("shopper sees the end", `document.querySelector("#status").textContent === "Ended" &&
		!document.querySelector("#buy").getClientRects().length`, 10*time.Second)
	for _, tb := range []*tab{here, there, shopper} {
		tb.checkConsole()
	}
}

// TestShopperLimitAndSoldOut: a shopper who bought up to the limit is told
// so and offered no more (the page says how many of the limit are hers,
// after a reload too); a sold-out page says "Sold out" once, with no
// quantity stepper or buy button; ended sales are listed under "Past",
// not with the live ones.
func TestShopperLimitAndSoldOut(t *testing.T) {
	env := servertest.New(t)
	env.StartPipeline(t)
	srv := env.Server(t, nil)
	site := servertest.HTTP(t, srv.Handler())
	sale := servertest.MustSale(t, srv, servertest.SaleSpec{Total: 3, Limit: 1, PriceCents: 1200})
	ended := endedSale(t, srv)
	salePage := fmt.Sprintf("%s/#/sales/%d", site.URL, sale.ID)
	dir := artifacts(t)
	b := browser(t)

	erin := newTab(t, b, "limit-erin", site.URL)
	erin.signIn("Erin", fmt.Sprintf(`#live-sales [data-sale="%d"]`, sale.ID))
	if n := erin.eval(fmt.Sprintf(`String(document.querySelectorAll('#live-sales [data-sale="%d"]').length + ":" +
		document.querySelectorAll('#past-sales [data-sale="%d"]').length)`, ended.ID, ended.ID)); n != "0:1" {
		t.Errorf("the ended sale is listed %s (live:past), want under Past only", n)
	}
	erin.do("open past", chromedp.Click(chromedp.CSS("#past-sales summary")))
	erin.screenshot(dir, "shopper-sales-past.png")

	erin.do("sale", chromedp.Navigate(salePage), chromedp.WaitVisible(chromedp.CSS("#buy")))
	erin.waitJS("buy enabled", `!document.querySelector("#buy").disabled`, 10*time.Second)
	erin.do("buy", chromedp.Click(chromedp.CSS("#buy")))
	erin.waitJS("bought", `document.querySelector("#result-title")?.textContent === "You got it!"`, 10*time.Second)
	atLimit := `document.querySelector("#buy").disabled && document.querySelector("#buy").textContent === "You have your limit" &&
		document.querySelector("#yours").textContent === "You bought 1 of your limit of 1."`
	erin.waitJS("at the limit", atLimit, 5*time.Second)
	if ref := erin.text("#order-id"); len(ref) != 9 || ref[0] != '#' {
		t.Errorf("the order's reference reads %q, want # and 8 characters", ref)
	}
	erin.screenshot(dir, "sale-at-limit.png")
	// After a reload the page still knows.
	erin.do("reload", chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS("#buy")))
	erin.waitJS("at the limit after a reload", atLimit, 10*time.Second)

	// Others take the rest: the page says sold out once and offers nothing.
	for i := range 2 {
		d, err := env.Inventory.Reserve(context.Background(), sale.ID, []seckill.Buy{{UserID: fmt.Sprintf("other-%d", i), Qty: 1,
			RequestID: fmt.Sprintf("other-request-%d", i), OrderID: seckill.NewOrderID(sale.ID)}})
		if err != nil || d.Answers[0].Code != seckill.CodeOK {
			t.Fatalf("other buy: %+v %v", d, err)
		}
	}
	erin.waitJS("sold out", `document.querySelector("#status").textContent === "Sold out" &&
		document.querySelector("#remaining").textContent === "0" && !document.querySelector("#buy").getClientRects().length &&
		!document.querySelector("#qty-row").getClientRects().length`, 10*time.Second)
	if n := erin.eval(`String(document.querySelector(".sale-page").innerText.match(/sold out/gi)?.length || 0)`); n != "1" {
		t.Errorf(`the sold-out page says "sold out" %s times, want once`, n)
	}
	erin.screenshot(dir, "sale-sold-out-once.png")
	// On a phone her orders show the Pay button and the time left whole.
	erin.do("orders on a phone", chromedp.EmulateViewport(390, 844), chromedp.Navigate(site.URL+"/#/orders"),
		chromedp.WaitVisible(chromedp.CSS("[data-pay]")))
	erin.waitJS("pay and time left in view", inView(`[data-pay]`)+` && `+inView(`[data-order] td:last-child .muted`)+
		` && /left$/.test(document.querySelector("[data-order] td:last-child .muted").textContent)`, 10*time.Second)
	erin.screenshot(dir, "shopper-orders-phone.png")
	erin.checkConsole()
}

// TestAdminLoggedOut: logged out, the panel shows its login page and no
// navigation; a form submitted after the session ended goes to the login
// page, which says so, and comes back to the form with what was typed.
func TestAdminLoggedOut(t *testing.T) {
	env := servertest.New(t)
	srv := env.Server(t, nil)
	site := servertest.HTTP(t, srv.Handler())
	dir := artifacts(t)
	b := browser(t)
	admin := newTab(t, b, "logged-out", site.URL)
	admin.do("open", chromedp.Navigate(site.URL+"/admin#/new"), chromedp.WaitVisible(chromedp.CSS("#password")))
	if nav := admin.eval(`String(document.querySelector("#admin-nav").getClientRects().length)`); nav != "0" {
		t.Errorf("logged out, the navigation shows")
	}
	admin.screenshot(dir, "admin-logged-out.png")
	admin.do("log in", chromedp.SendKeys(chromedp.CSS("#password"), servertest.AdminPassword), chromedp.Click(chromedp.CSS("#login")),
		chromedp.WaitVisible(chromedp.CSS("#sale-form")))
	admin.do("type", chromedp.SendKeys(chromedp.CSS("#f-name"), "Typed with care"), chromedp.SendKeys(chromedp.CSS("#f-item"), "Lamp"),
		chromedp.SendKeys(chromedp.CSS("#f-price_cents"), "12.50"), chromedp.SendKeys(chromedp.CSS("#f-total"), "7"))
	// The session ends (its cookie gone), then the merchant saves.
	admin.allowed = append(admin.allowed, "status of 401 (Unauthorized)")
	admin.do("session ends", chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := cdp.Call(ctx, t, network.ClearBrowserCookies, cdp.Empty{})
		return err
	}), chromedp.Click(chromedp.CSS("#save")),
		chromedp.WaitVisible(chromedp.CSS("#session-ended")))
	admin.screenshot(dir, "admin-session-ended.png")
	admin.do("log in again", chromedp.SendKeys(chromedp.CSS("#password"), servertest.AdminPassword), chromedp.Click(chromedp.CSS("#login")),
		chromedp.WaitVisible(chromedp.CSS("#draft-kept")))
	got := admin.eval(`["name", "item", "price_cents", "total"].map((k) => document.querySelector("#f-" + k).value).join("|")`)
	if got != "Typed with care|Lamp|12.50|7" {
		t.Errorf("the form after login holds %q", got)
	}
	admin.do("save", chromedp.Click(chromedp.CSS("#save")))
	id := admin.dashboardSale()
	if s, err := env.Ledger.Sale(context.Background(), id); err != nil || s.PriceCents != 1250 || s.Name != "Typed with care" {
		t.Errorf("the saved sale: %+v %v", s, err)
	}
	admin.checkConsole()
}

// inView is a JavaScript expression: the element sel is shown and lies
// whole within the window's width.
func inView(sel string) string {
	return fmt.Sprintf(`(() => { const e = document.querySelector(%q); if (!e) return false;
		const r = e.getBoundingClientRect(); return r.width > 0 && r.left >= 0 && r.right <= window.innerWidth; })()`, sel)
}

// endedSale is a sale of srv, ended by its merchant (the shop lists it
// under Past).
func endedSale(t *testing.T, srv *server.Server) seckill.Sale {
	t.Helper()
	sale := servertest.MustSale(t, srv, servertest.SaleSpec{Total: 3, Limit: 1})
	if _, err := srv.Sales.Act(context.Background(), sale.ID, seckill.ActionEnd); err != nil {
		t.Fatal(err)
	}
	return sale
}
