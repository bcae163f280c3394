package web_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/seckill/seckill"
	"github.com/seckill/seckill/system/servertest"
)

// artifacts is where screenshots go (git-ignored).
func artifacts(t *testing.T) string {
	dir := os.Getenv("SECKILL_TEST_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join("..", "test-artifacts")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// browser starts headless Chromium for the test.
func browser(t *testing.T) context.Context {
	t.Helper()
	path := os.Getenv("SECKILL_CHROMIUM")
	if path == "" {
		for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
			if p, err := exec.LookPath(name); err == nil {
				path = p
				break
			}
		}
	}
	if path == "" {
		t.Fatal("no Chromium found: install it with `apt-get install -y chromium` (.ci/run does), or set SECKILL_CHROMIUM")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.WindowSize(1280, 900))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("starting %s: %v", path, err)
	}
	return ctx
}

// tab is one page in a browser context of its own (own cookies), whose
// console errors fail the test.
type tab struct {
	t    *testing.T
	name string
	ctx  context.Context
	base string

	mu      sync.Mutex
	errors  []string
	allowed []string // console errors a step provokes on purpose
}

func newTab(t *testing.T, b context.Context, name, base string) *tab {
	ctx, cancel := chromedp.NewContext(b, chromedp.WithNewBrowserContext())
	t.Cleanup(cancel)
	tb := &tab{t: t, name: name, ctx: ctx, base: base}
	// Reduced motion: the pages drop their transitions, so a screenshot
	// shows the state, not an animation halfway.
	err := chromedp.Do(ctx, chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := cdp.Call(ctx, t, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
			Features: []*emulation.MediaFeature{{Name: "prefers-reduced-motion", Value: "reduce"}},
		})
		return err
	}))
	if err != nil {
		t.Fatal(err)
	}
	msgs := chromedp.Console(ctx)
	go func() {
		for m, err := range msgs {
			if err != nil {
				return
			}
			if m.Type == chromedp.ConsoleError || m.IsException() {
				tb.mu.Lock()
				tb.errors = append(tb.errors, m.String())
				tb.mu.Unlock()
			}
		}
	}()
	return tb
}

// logIn opens the admin panel and logs in, until shown is visible.
func (tb *tab) logIn(shown string) {
	tb.t.Helper()
	tb.do("log in",
		chromedp.Navigate(tb.base+"/admin"),
		chromedp.WaitVisible(chromedp.CSS("#password")),
		chromedp.SendKeys(chromedp.CSS("#password"), servertest.AdminPassword),
		chromedp.Click(chromedp.CSS("#login")),
		chromedp.WaitVisible(chromedp.CSS(shown)),
	)
}

// signIn opens the shopper page and signs in as name, until shown is
// visible.
func (tb *tab) signIn(name, shown string) {
	tb.t.Helper()
	tb.do("sign in",
		chromedp.Navigate(tb.base+"/"),
		chromedp.WaitVisible(chromedp.CSS("#name")),
		chromedp.SendKeys(chromedp.CSS("#name"), name),
		chromedp.Click(chromedp.CSS("#signin")),
		chromedp.WaitVisible(chromedp.CSS(shown)),
	)
}

func (tb *tab) do(what string, steps ...chromedp.Action[chromedp.Void]) {
	tb.t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, time.Minute)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		tb.t.Fatalf("%s: %s: %v\n%s", tb.name, what, err, tb.describe())
	}
}

// waitJS waits until the expression is truthy.
func (tb *tab) waitJS(what, expr string, limit time.Duration) {
	tb.t.Helper()
	tb.do(what, chromedp.Steps(chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := chromedp.Poll[bool]("!!("+expr+")", chromedp.WithPollingInterval(50*time.Millisecond),
			chromedp.WithPollingTimeout(limit))(ctx, t)
		return err
	})))
}

// setWindow fills the sale form's start (from now, by the browser's clock)
// and an end an hour later.
func (tb *tab) setWindow(in time.Duration) {
	tb.t.Helper()
	tb.setStart(time.Now().Add(in))
}

// setStart sets the open sale form's window: from start, for an hour.
func (tb *tab) setStart(start time.Time) {
	tb.t.Helper()
	_, err := chromedp.Run(tb.ctx, chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`(() => {
		const pad = (n) => String(n).padStart(2, "0");
		const local = (d) => d.getFullYear() + "-" + pad(d.getMonth() + 1) + "-" + pad(d.getDate()) + "T" +
			pad(d.getHours()) + ":" + pad(d.getMinutes()) + ":" + pad(d.getSeconds());
		const start = new Date(%d);
		document.querySelector("#f-starts_at").value = local(start);
		document.querySelector("#f-ends_at").value = local(new Date(start.getTime() + 3600000));
	})()`, start.UnixMilli())))
	if err != nil {
		tb.t.Fatalf("%s: set the sale window: %v", tb.name, err)
	}
}

// newSaleForm opens the admin panel's new-sale form and fills in its
// first fields.
func (tb *tab) newSaleForm(name, item, price, total string) {
	tb.t.Helper()
	tb.do("new sale",
		chromedp.Click(chromedp.CSS("#new-sale")),
		chromedp.WaitVisible(chromedp.CSS("#sale-form")),
		chromedp.SendKeys(chromedp.CSS("#f-name"), name),
		chromedp.SendKeys(chromedp.CSS("#f-item"), item),
		chromedp.SendKeys(chromedp.CSS("#f-price_cents"), price),
		chromedp.SendKeys(chromedp.CSS("#f-total"), total),
	)
}

// dashboardSale waits for a sale's dashboard (after saving the form) and
// returns the sale's id.
func (tb *tab) dashboardSale() int64 {
	tb.t.Helper()
	tb.waitJS("dashboard", `/^#\/sales\/\d+$/.test(location.hash) && document.querySelector("#stat-remaining")`, 10*time.Second)
	loc, err := chromedp.Run(tb.ctx, chromedp.Location())
	if err != nil {
		tb.t.Fatal(err)
	}
	var id int64
	if _, err := fmt.Sscanf(loc[strings.LastIndex(loc, "/")+1:], "%d", &id); err != nil {
		tb.t.Fatalf("dashboard location %q: %v", loc, err)
	}
	return id
}

// describe tells where the page is, what it shows and what it logged, and
// saves a screenshot, for a failure message.
func (tb *tab) describe() string {
	ctx, cancel := context.WithTimeout(tb.ctx, 10*time.Second)
	defer cancel()
	state, err := chromedp.Run(ctx, chromedp.Evaluate[string](`location.href + "\n" + document.body.innerText`))
	if err != nil {
		state = "page state unknown: " + err.Error()
	}
	if png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)); err == nil {
		_ = os.WriteFile(filepath.Join(artifacts(tb.t), "failure-"+tb.name+".png"), png, 0o644)
	}
	tb.mu.Lock()
	defer tb.mu.Unlock()
	return fmt.Sprintf("page: %s\nconsole errors: %q", state, tb.errors)
}

func (tb *tab) text(sel string) string {
	tb.t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, 10*time.Second)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.TextContent(chromedp.CSS(sel)))
	if err != nil {
		tb.t.Fatalf("%s: text of %s: %v", tb.name, sel, err)
	}
	return strings.TrimSpace(s)
}

func (tb *tab) screenshot(dir, file string) {
	tb.t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, 20*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		tb.t.Fatalf("%s: screenshot: %v", tb.name, err)
	}
	if err := os.WriteFile(filepath.Join(dir, file), png, 0o644); err != nil {
		tb.t.Fatal(err)
	}
}

// sitePage is a page to visit: its name (for reports and files), its
// path, and what shows once it is drawn.
type sitePage struct{ name, path, ready string }

// visit opens each page at each width in turn and runs check on it.
func (tb *tab) visit(pages []sitePage, widths []int64, check func(p sitePage, width int64)) {
	tb.t.Helper()
	for _, w := range widths {
		for _, p := range pages {
			tb.do(p.name, chromedp.EmulateViewport(w, 900), chromedp.Navigate(tb.base+p.path), chromedp.WaitVisible(chromedp.CSS(p.ready)))
			check(p, w)
		}
	}
}

// widths are the desktop's and a phone's.
var widths = []int64{1280, 390}

func (tb *tab) checkConsole() {
	tb.mu.Lock()
	defer tb.mu.Unlock()
next:
	for _, e := range tb.errors {
		for _, a := range tb.allowed {
			if strings.Contains(e, a) {
				continue next
			}
		}
		tb.t.Errorf("%s: console: %s", tb.name, e)
	}
}

// TestFlashSaleInBrowser is the story of a flash sale in real browsers:
// the merchant creates a sale that opens in a few seconds; a shopper
// watches the countdown, buys the moment the button enables; a second
// shopper sees the stock fall without reloading and buys the last unit;
// both pages show sold out; the dashboard shows the numbers.
func TestFlashSaleInBrowser(t *testing.T) {
	env := servertest.New(t)
	env.StartPipeline(t)
	srv := env.Server(t, nil)
	site := servertest.HTTP(t, srv.Handler())
	dir := artifacts(t)
	b := browser(t)

	// The merchant logs in and creates a sale opening in 8 seconds.
	admin := newTab(t, b, "admin", site.URL)
	admin.logIn("#new-sale")
	admin.newSaleForm("Midnight drop", "Keyboard K2", "49.99", "3")
	// Field-level validation: a limit above the total is refused by the API
	// and shown next to its field (the browser logs the 400 it answers).
	admin.allowed = append(admin.allowed, "status of 400 (Bad Request)")
	admin.do("bad limit",
		chromedp.SetValue(chromedp.CSS("#f-per_user_limit"), "5"),
		chromedp.Click(chromedp.CSS("#save")),
	)
	admin.waitJS("limit error shown", `document.querySelector("#err-per_user_limit").textContent.length > 0`, 10*time.Second)
	admin.screenshot(dir, "admin-form-validation.png")
	// The sale opens in an hour; once shoppers are watching, the merchant
	// moves the opening to a few seconds from now. It opens on a whole
	// minute, as its queue would (15 min before): the edit form must see
	// the untouched queue opening as untouched though the browser shows it
	// without its ":00".
	admin.setStart(time.Now().Add(time.Hour).Truncate(time.Minute))
	admin.do("create", chromedp.SetValue(chromedp.CSS("#f-per_user_limit"), "2"), chromedp.Click(chromedp.CSS("#save")))
	saleID := admin.dashboardSale()
	salePage := fmt.Sprintf("%s/#/sales/%d", site.URL, saleID)

	// Two shoppers sign in; the first sees the sale listed with its countdown.
	alice, bob := newTab(t, b, "alice", site.URL), newTab(t, b, "bob", site.URL)
	for _, s := range []*tab{alice, bob} {
		s.signIn(s.name, fmt.Sprintf(`[data-sale="%d"]`, saleID))
	}
	alice.screenshot(dir, "shopper-sales.png")
	for _, s := range []*tab{alice, bob} {
		s.do("open sale", chromedp.Navigate(salePage), chromedp.WaitVisible(chromedp.CSS("#buy")))
		s.waitJS("live stock", `document.querySelector("#mode").classList.contains("live")`, 10*time.Second)
	}
	if st := alice.text("#status"); st != "Starts soon" {
		t.Errorf("before the start the status reads %q", st)
	}
	alice.waitJS("countdown", `/^(\d\d:)?\d\d:\d\d$/.test(document.querySelector("#countdown").textContent)`, 5*time.Second)
	disabled, err := chromedp.Run(alice.ctx, chromedp.Evaluate[bool](`document.querySelector("#buy").disabled`))
	if err != nil || !disabled {
		t.Fatalf("buy button enabled before the start (%v)", err)
	}
	alice.screenshot(dir, "sale-countdown.png")

	// The merchant moves the opening to 3 seconds from now; the open pages
	// follow without a reload.
	admin.do("edit", chromedp.Navigate(fmt.Sprintf("%s/admin#/sales/%d/edit", site.URL, saleID)),
		chromedp.WaitVisible(chromedp.CSS("#sale-form")))
	admin.setWindow(3 * time.Second)
	admin.do("save", chromedp.Click(chromedp.CSS("#save")))
	admin.waitJS("dashboard again", `/^#\/sales\/\d+$/.test(location.hash) && document.querySelector("#stat-remaining")`, 10*time.Second)
	alice.waitJS("the new opening", `/^00:0\d$/.test(document.querySelector("#countdown").textContent) ||
		!document.querySelector("#buy").disabled`, 10*time.Second)

	// The button enables when the sale opens; alice buys two.
	alice.waitJS("buy enabled", `!document.querySelector("#buy").disabled`, 20*time.Second)
	alice.do("buy two",
		chromedp.Click(chromedp.CSS(`[data-step="more"]`)),
		chromedp.Click(chromedp.CSS("#buy")),
	)
	alice.waitJS("purchase result", `document.querySelector("#result-title")?.textContent === "You got it!"`, 10*time.Second)
	alice.screenshot(dir, "sale-after-purchase.png")

	// Bob's page follows without a reload, then he buys the last unit.
	bob.waitJS("stock fell to 1", `document.querySelector("#remaining").textContent === "1"`, 10*time.Second)
	bob.do("buy the last one", chromedp.Click(chromedp.CSS("#buy")))
	bob.waitJS("purchase result", `document.querySelector("#result-title")?.textContent === "You got it!"`, 10*time.Second)
	for _, s := range []*tab{alice, bob} {
		s.waitJS("sold out", `document.querySelector("#status").textContent === "Sold out" &&
			document.querySelector("#remaining").textContent === "0" && document.querySelector("#buy").disabled`, 10*time.Second)
	}
	bob.screenshot(dir, "sale-sold-out.png")

	// Alice pays from her wallet (funded for it); her orders page says so.
	aliceID, err := chromedp.Run(alice.ctx, chromedp.Evaluate[string](`fetch("/api/session").then(r => r.json()).then(j => j.user_id)`,
		chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatal(err)
	}
	env.Fund(t, aliceID, 2*4999)
	alice.do("pay", chromedp.Click(chromedp.CSS("#pay")))
	alice.waitJS("paid", `document.querySelector("#result-title")?.textContent.startsWith("Paid")`, 10*time.Second)
	alice.do("orders", chromedp.Navigate(site.URL+"/#/orders"), chromedp.WaitVisible(chromedp.CSS("[data-order]")))
	if st := alice.text("[data-order] .badge"); st != "paid" {
		t.Errorf("alice's order reads %q", st)
	}
	alice.screenshot(dir, "shopper-orders.png")

	// The dashboard shows the sale's numbers.
	admin.waitJS("dashboard numbers", `document.querySelector("#stat-sold").textContent === "3" &&
		document.querySelector("#stat-remaining").textContent === "0" &&
		document.querySelector("#stat-orders_persisted").textContent === "2" &&
		document.querySelector("#stat-orders_paid").textContent === "1"`, 20*time.Second)
	admin.screenshot(dir, "admin-dashboard.png")
	admin.do("sales list", chromedp.Navigate(site.URL+"/admin#/"), chromedp.WaitVisible(chromedp.CSS("#sales")))
	admin.screenshot(dir, "admin-sales.png")

	// Phone width.
	bob.do("phone", chromedp.EmulateViewport(390, 844), chromedp.Navigate(salePage), chromedp.WaitVisible(chromedp.CSS("#remaining")))
	bob.waitJS("stock shown", `document.querySelector("#remaining").textContent === "0"`, 10*time.Second)
	bob.screenshot(dir, "sale-phone.png")

	for _, s := range []*tab{admin, alice, bob} {
		s.checkConsole()
	}
}

// TestStockFallsBackToPolling: where WebSockets cannot be opened (a
// browser or network that refuses them), the sale page says so, polls the
// sale, and the stock still moves.
func TestStockFallsBackToPolling(t *testing.T) {
	env := servertest.New(t)
	srv := env.Server(t, nil)
	site := servertest.HTTP(t, srv.Handler())
	sale := servertest.MustSale(t, srv, servertest.SaleSpec{Total: 5, Limit: 5})
	b := browser(t)
	shopper := newTab(t, b, "shopper", site.URL)
	shopper.do("break WebSockets", chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{
			Source: `window.WebSocket = function () { throw new DOMException("WebSockets are blocked here", "SecurityError"); };`,
		})
		return err
	}))
	shopper.do("open sale", chromedp.Navigate(fmt.Sprintf("%s/#/sales/%d", site.URL, sale.ID)),
		chromedp.WaitVisible(chromedp.CSS("#remaining")))
	shopper.waitJS("polling mode", `document.querySelector("#mode").textContent.includes("every 2 s")`, 30*time.Second)

	d, err := env.Inventory.Reserve(context.Background(), sale.ID, []seckill.Buy{{
		UserID: "poll-buyer", Qty: 2, RequestID: "poll-request-1", OrderID: seckill.NewOrderID(sale.ID),
	}})
	if err != nil || d.Answers[0].Code != seckill.CodeOK || d.Answers[0].Remaining != 3 {
		t.Fatalf("buy: %+v, %v", d, err)
	}
	shopper.waitJS("stock fell by polling", `document.querySelector("#remaining").textContent === "3"`, 10*time.Second)
	shopper.checkConsole()
}

// TestHostileNamesRenderAsText: a sale named with markup and right-to-left
// text shows as text, isolated from what surrounds it, on the shopper
// pages and in the admin panel; an older row holding a bidi override (the
// API refuses them now) cannot disguise itself.
func TestHostileNamesRenderAsText(t *testing.T) {
	env := servertest.New(t)
	srv := env.Server(t, nil)
	site := servertest.HTTP(t, srv.Handler())
	ctx := context.Background()
	const (
		markup = `<img src=x onerror="document.title='pwned'"><b>Bold</b> & "quoted"`
		rtl    = `סמארטפון <script>document.title='pwned'</script> 🎧`
	)
	now := time.Now().UTC().Truncate(time.Second)
	v, err := srv.Sales.Create(ctx, seckill.Sale{Name: markup, Item: rtl, PriceCents: 4999, Total: 5,
		PerUserLimit: 1, StartsAt: now.Add(-time.Minute), EndsAt: now.Add(time.Hour)}.Input())
	if err != nil {
		t.Fatal(err)
	}
	created := v.Sale
	// An older row, written before the API refused direction overrides.
	legacy, err := env.Ledger.InsertSale(ctx, seckill.Sale{Name: "invoice \u202efdp.exe", Item: "old item",
		PriceCents: 100, Total: 5, PerUserLimit: 1, StartsAt: now.Add(-time.Minute), EndsAt: now.Add(time.Hour),
		Status: seckill.StatusActive, Buckets: 1}.WithDefaults(), now)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := env.Inventory.Warm(ctx, legacy); err != nil {
		t.Fatal(err)
	}

	b := browser(t)
	dir := artifacts(t)
	shopper := newTab(t, b, "hostile-shopper", site.URL)
	shopper.signIn("Mallory", fmt.Sprintf(`[data-sale="%d"]`, created.ID))
	shopper.screenshot(dir, "hostile-names-list.png")
	shopper.checkText("list", fmt.Sprintf(`[data-sale="%d"] .muted bdi`, created.ID), markup)
	shopper.checkText("list", fmt.Sprintf(`[data-sale="%d"] .item bdi`, created.ID), rtl)
	shopper.checkText("list", fmt.Sprintf(`[data-sale="%d"] .muted bdi`, legacy.ID), "invoice \ufffdfdp.exe")
	shopper.do("sale page", chromedp.Navigate(fmt.Sprintf("%s/#/sales/%d", site.URL, created.ID)),
		chromedp.WaitVisible(chromedp.CSS("#sale-name")))
	shopper.checkText("sale page", "#sale-name bdi", markup)
	shopper.checkText("sale page", "#item bdi", rtl)
	shopper.screenshot(dir, "hostile-names-sale.png")

	admin := newTab(t, b, "hostile-admin", site.URL)
	admin.logIn(fmt.Sprintf(`[data-sale="%d"]`, created.ID))
	admin.checkText("admin list", fmt.Sprintf(`[data-sale="%d"] strong bdi`, created.ID), markup)
	admin.do("dashboard", chromedp.Navigate(fmt.Sprintf("%s/admin#/sales/%d", site.URL, created.ID)),
		chromedp.WaitVisible(chromedp.CSS("#sale-name")))
	admin.checkText("dashboard", "#sale-name bdi", markup)
	admin.screenshot(dir, "hostile-names-dashboard.png")

	for _, tb := range []*tab{shopper, admin} {
		injected, err := chromedp.Run(tb.ctx, chromedp.Evaluate[bool](
			`document.title === "pwned" || !!document.querySelector("img[src=x], bdi b, bdi script")`))
		if err != nil || injected {
			t.Errorf("%s: markup in a name became part of the page (%v)", tb.name, err)
		}
		tb.checkConsole()
	}
}

// checkText requires the element's text to be want, shown isolated from
// its surroundings (bidi isolation).
func (tb *tab) checkText(where, sel, want string) {
	tb.t.Helper()
	if got := tb.text(sel); got != want {
		tb.t.Errorf("%s: %s shows %q, want %q", where, sel, got, want)
	}
	ctx, cancel := context.WithTimeout(tb.ctx, 10*time.Second)
	defer cancel()
	bidi, err := chromedp.Run(ctx, chromedp.Evaluate[string](
		fmt.Sprintf(`getComputedStyle(document.querySelector(%q)).unicodeBidi`, sel)))
	if err != nil || bidi != "isolate" {
		tb.t.Errorf("%s: %s has unicode-bidi %q (%v), want isolate", where, sel, bidi, err)
	}
}

// TestTicketsInBrowser: the merchant creates a sale that needs a ticket
// with a proof of work, from the admin panel (which shows what the work
// costs); a shopper buys: the page solves the challenge in a Web Worker,
// showing progress, gets a ticket and buys with it, with no console error.
// The proof of work's time and hash rate are logged (docs/guide.md, bot defence).
func TestTicketsInBrowser(t *testing.T) {
	env := servertest.New(t)
	srv := env.Server(t, nil)
	site := servertest.HTTP(t, srv.Handler())
	dir := artifacts(t)
	b := browser(t)
	const difficulty = 16

	admin := newTab(t, b, "tickets-admin", site.URL)
	admin.logIn("#new-sale")
	admin.newSaleForm("Bot-proof drop", "Console X", "499.00", "10")
	admin.do("bot defence",
		chromedp.Click(chromedp.CSS("#advanced summary")),
		chromedp.Click(chromedp.CSS("#f-require_ticket")),
		chromedp.SetValue(chromedp.CSS("#f-pow_difficulty"), fmt.Sprint(difficulty)),
	)
	admin.setWindow(-time.Minute)
	admin.do("cost shown", chromedp.Evaluate[chromedp.Void](`document.querySelector("#f-pow_difficulty").dispatchEvent(new Event("input"))`))
	admin.waitJS("cost", fmt.Sprintf(`document.querySelector("#pow-cost").textContent.includes(%q)`, "65,536 hashes"), 5*time.Second)
	admin.screenshot(dir, "admin-form-tickets.png")
	admin.do("create", chromedp.Click(chromedp.CSS("#save")))
	saleID := admin.dashboardSale()
	sale, err := env.Ledger.Sale(context.Background(), saleID)
	if err != nil || !sale.RequireTicket || sale.PowDifficulty != difficulty {
		t.Fatalf("sale from the form: %+v, %v; want require_ticket and difficulty %d", sale, err, difficulty)
	}

	shopper := newTab(t, b, "tickets-shopper", site.URL)
	shopper.signIn("Carol", fmt.Sprintf(`[data-sale="%d"]`, saleID))
	shopper.do("open sale", chromedp.Navigate(fmt.Sprintf("%s/#/sales/%d", site.URL, saleID)), chromedp.WaitVisible(chromedp.CSS("#buy")))
	shopper.waitJS("buy enabled", `!document.querySelector("#buy").disabled`, 10*time.Second)
	shopper.do("buy", chromedp.Click(chromedp.CSS("#buy")))
	shopper.waitJS("purchase result", `document.querySelector("#result-title")?.textContent === "You got it!"`, 60*time.Second)
	shopper.screenshot(dir, "sale-bought-with-ticket.png")
	pow, err := chromedp.Run(shopper.ctx, chromedp.Evaluate[map[string]float64](`window.seckillPow`))
	if err != nil || pow["difficulty"] != difficulty {
		t.Fatalf("proof of work record: %v, %v", pow, err)
	}
	t.Logf("proof of work in headless Chromium: difficulty %d, %.0f hashes in %.0f ms (%.0f hashes/s)",
		difficulty, pow["tried"], pow["ms"], 1000*pow["tried"]/max(1, pow["ms"]))

	// The dashboard counts the challenge and the ticket.
	servertest.FlushOutcomes(t, srv)
	admin.waitJS("challenge counted", `document.querySelector("#stat-challenges").textContent === "1 / 1"`, 10*time.Second)
	admin.screenshot(dir, "admin-dashboard-tickets.png")
	for _, tb := range []*tab{admin, shopper} {
		tb.checkConsole()
	}
}
