package web_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/seckill/seckill/system/servertest"
)

// axeSource is axe-core's script: SECKILL_AXE, or where
// scripts/services.sh (run by make test and .ci/run) installs it.
func axeSource(t *testing.T) string {
	t.Helper()
	path := os.Getenv("SECKILL_AXE")
	if path == "" {
		path = filepath.Join("..", ".cache", "npm", "node_modules", "axe-core", "axe.min.js")
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("axe-core not found (%v): run scripts/services.sh (make test does), or "+
			"`npm install --prefix .cache/npm axe-core`, or set SECKILL_AXE to axe.min.js", err)
	}
	return string(b)
}

// axeViolation is one rule a page breaks, as axe-core reports it.
type axeViolation struct {
	ID     string   `json:"id"`
	Impact string   `json:"impact"`
	Help   string   `json:"help"`
	Nodes  []string `json:"nodes"`
}

// axe runs axe-core in the tab's page (WCAG 2.1 A and AA, and axe's best
// practices), writes the report to the artifacts as axe-<name>.json, and
// fails the test on every serious or critical violation.
func (tb *tab) axe(src, dir, name string) {
	tb.t.Helper()
	if _, err := chromedp.Run(tb.ctx, chromedp.Evaluate[chromedp.Void](src+"\n;0")); err != nil {
		tb.t.Fatalf("%s: injecting axe-core: %v", tb.name, err)
	}
	raw, err := chromedp.Run(tb.ctx, chromedp.Evaluate[string](`axe.run(document, {
			runOnly: {type: "tag", values: ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "best-practice"]},
		}).then((r) => JSON.stringify(r.violations.map((v) => ({id: v.id, impact: v.impact, help: v.help,
			nodes: v.nodes.map((n) => n.target.join(" ") + ": " + n.failureSummary).slice(0, 6)}))))`, chromedp.EvalAwaitPromise))
	if err != nil {
		tb.t.Fatalf("%s: axe on %s: %v", tb.name, name, err)
	}
	var vs []axeViolation
	if err := json.Unmarshal([]byte(raw), &vs); err != nil {
		tb.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "axe-"+name+".json"), []byte(raw), 0o644); err != nil {
		tb.t.Fatal(err)
	}
	for _, v := range vs {
		if v.Impact == "serious" || v.Impact == "critical" {
			tb.t.Errorf("%s: %s: %s (%s): %s\n\t%s", tb.name, name, v.ID, v.Impact, v.Help, strings.Join(v.Nodes, "\n\t"))
		}
	}
}

// TestPagesAccessible: every page of the shop and the admin panel, at
// desktop and phone width, has no serious or critical axe-core violation;
// a shopper buys and a merchant logs in and pauses a sale with the
// keyboard alone.
func TestPagesAccessible(t *testing.T) {
	env := servertest.New(t)
	env.StartPipeline(t)
	srv := env.Server(t, nil)
	site := servertest.HTTP(t, srv.Handler())
	sale := servertest.MustSale(t, srv, servertest.SaleSpec{Total: 5, Limit: 2, PriceCents: 1500})
	room := servertest.MustSale(t, srv, servertest.SaleSpec{Total: 5, Limit: 1, WaitingRoom: true,
		Start: time.Now().Add(10 * time.Minute)})
	src := axeSource(t)
	dir := artifacts(t)
	b := browser(t)

	shopper := newTab(t, b, "axe-shopper", site.URL)
	shopper.do("sign-in page", chromedp.Navigate(site.URL+"/"), chromedp.WaitVisible(chromedp.CSS("#name")))
	shopper.axe(src, dir, "shop-sign-in")
	shopper.signIn("Faye", fmt.Sprintf(`[data-sale="%d"]`, sale.ID))
	env.Fund(t, shopperID(t, shopper), 10_000)

	// The buy, by keyboard: Tab to the button, Enter.
	shopper.do("sale page", chromedp.Navigate(fmt.Sprintf("%s/#/sales/%d", site.URL, sale.ID)), chromedp.WaitVisible(chromedp.CSS("#buy")))
	shopper.waitJS("buy enabled", `!document.querySelector("#buy").disabled`, 10*time.Second)
	shopper.tabTo("#buy", 40)
	shopper.do("Enter", chromedp.KeyEvent(kb.Enter))
	shopper.waitJS("bought by keyboard", `document.querySelector("#result-title")?.textContent === "You got it!"`, 10*time.Second)
	shopper.tabTo("#pay", 40)
	shopper.do("Enter", chromedp.KeyEvent(kb.Enter))
	shopper.waitJS("paid by keyboard", `document.querySelector("#result-title")?.textContent.startsWith("Paid")`, 10*time.Second)

	shopper.visit([]sitePage{
		{"shop-sales", "/#/", "[data-sale]"},
		{"shop-sale", fmt.Sprintf("/#/sales/%d", sale.ID), "#buy"},
		{"shop-sale-room", fmt.Sprintf("/#/sales/%d", room.ID), "#room"},
		{"shop-orders", "/#/orders", "[data-order]"},
		{"shop-wallet", "/#/wallet", "#statement-empty, [data-transfer]"},
	}, widths, func(p sitePage, width int64) { shopper.axe(src, dir, fmt.Sprintf("%s-%d", p.name, width)) })

	// The admin panel: log in by keyboard, then every page.
	admin := newTab(t, b, "axe-admin", site.URL)
	admin.do("login page", chromedp.Navigate(site.URL+"/admin"), chromedp.WaitVisible(chromedp.CSS("#password")))
	admin.axe(src, dir, "admin-login")
	admin.tabTo("#password", 10)
	admin.do("log in by keyboard", chromedp.KeyEvent(servertest.AdminPassword), chromedp.KeyEvent(kb.Enter),
		chromedp.WaitVisible(chromedp.CSS("#new-sale")))
	admin.do("dashboard", chromedp.Navigate(fmt.Sprintf("%s/admin#/sales/%d", site.URL, sale.ID)),
		chromedp.WaitVisible(chromedp.CSS(`[data-action="pause"]`)))
	admin.tabTo(`[data-action="pause"]`, 60)
	admin.do("pause by keyboard", chromedp.KeyEvent(kb.Enter))
	admin.waitJS("paused by keyboard", controlsJS("paused", "resume", "end", "restock"), 10*time.Second)
	admin.visit([]sitePage{
		{"admin-sales", "/admin#/", "#sales"},
		{"admin-new", "/admin#/new", "#sale-form"},
		{"admin-dashboard", fmt.Sprintf("/admin#/sales/%d", sale.ID), "#controls"},
		{"admin-audit", "/admin#/audit", "[data-audit]"},
		{"admin-merchants", "/admin#/merchants", "#merchant-form"},
		{"admin-balance", "/admin#/balance", "#balance-account"},
	}, widths, func(p sitePage, width int64) { admin.axe(src, dir, fmt.Sprintf("%s-%d", p.name, width)) })
	for _, tb := range []*tab{shopper, admin} {
		tb.checkConsole()
	}
}

// tabTo presses Tab until the element sel has the focus, at most n times.
func (tb *tab) tabTo(sel string, n int) {
	tb.t.Helper()
	for range n {
		if tb.eval(fmt.Sprintf(`String(document.activeElement === document.querySelector(%q))`, sel)) == "true" {
			return
		}
		tb.do("Tab", chromedp.KeyEvent(kb.Tab))
	}
	tb.t.Fatalf("%s: %d presses of Tab never reached %s (focus on %s)", tb.name, n, sel,
		tb.eval(`document.activeElement.outerHTML.slice(0, 120)`))
}

// shopperID is the signed-in shopper's user id.
func shopperID(t *testing.T, tb *tab) string {
	t.Helper()
	id, err := chromedp.Run(tb.ctx, chromedp.Evaluate[string](`fetch("/api/session").then(r => r.json()).then(j => j.user_id)`,
		chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatal(err)
	}
	return id
}
