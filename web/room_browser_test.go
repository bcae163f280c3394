package web_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/seckill/seckill/system/servertest"
)

// TestWaitingRoomInBrowser: the merchant sets up a sale with a waiting
// room in the admin panel (one unit, two shoppers let in a second); a
// crowd of ten joins before the start; a shopper who comes after it waits
// in the room, watches the people ahead of her count down, is let in and
// buys; a second shopper waiting behind her sees "Sold out" the moment
// the unit is gone; the dashboard shows the room's figures.
func TestWaitingRoomInBrowser(t *testing.T) {
	env := servertest.New(t)
	env.StartPipeline(t)
	srv := env.Server(t, nil)
	site := servertest.HTTP(t, srv.Handler())
	dir := artifacts(t)
	b := browser(t)

	admin := newTab(t, b, "room-admin", site.URL)
	admin.logIn("#new-sale")
	admin.newSaleForm("Queue drop", "Desk lamp", "1999", "1")
	admin.do("waiting room",
		chromedp.Click(chromedp.CSS("#f-waiting_room")),
		chromedp.SetValue(chromedp.CSS("#f-admit_per_second"), "2"),
	)
	admin.setWindow(4 * time.Second)
	admin.screenshot(dir, "admin-form-waiting-room.png")
	admin.do("create", chromedp.Click(chromedp.CSS("#save")))
	saleID := admin.dashboardSale()
	sale, err := env.Ledger.Sale(context.Background(), saleID)
	if err != nil || !sale.WaitingRoom || sale.AdmitPerSecond != 2 || !sale.QueueOpensAt.Equal(sale.StartsAt.Add(-15*time.Minute)) {
		t.Fatalf("sale from the form: %+v, %v", sale, err)
	}
	for i := range 10 {
		if _, err := env.Inventory.JoinQueue(context.Background(), saleID, fmt.Sprintf("crowd-%02d", i), time.Now(), false); err != nil {
			t.Fatal(err)
		}
	}
	servertest.WaitFor(t, 10*time.Second, "the start", func() (bool, string) {
		return time.Now().After(sale.StartsAt), "not yet"
	})

	salePage := fmt.Sprintf("%s/#/sales/%d", site.URL, saleID)
	alice, bob := newTab(t, b, "room-alice", site.URL), newTab(t, b, "room-bob", site.URL)
	for _, s := range []*tab{alice, bob} {
		s.signIn(s.name, fmt.Sprintf(`[data-sale="%d"]`, saleID))
		s.do("open sale", chromedp.Navigate(salePage), chromedp.WaitVisible(chromedp.CSS("#room")))
		s.waitJS("a place", `/^Place \d+ of \d+$/.test(document.querySelector("#room-place").textContent)`, 10*time.Second)
	}
	if p := alice.text("#room-place"); !strings.HasPrefix(p, "Place 11 of") {
		t.Fatalf("alice, after a crowd of ten: %q", p)
	}
	hidden, err := chromedp.Run(alice.ctx, chromedp.Evaluate[bool](`document.querySelector("#buy").hidden`))
	if err != nil || !hidden {
		t.Fatalf("the buy button shows while waiting (%v)", err)
	}
	alice.screenshot(dir, "room-waiting.png")

	// The people ahead count down, each value seen at most once.
	var seen []int
	for len(seen) < 3 {
		alice.waitJS("the queue moves", fmt.Sprintf(`(() => { const m = /^(\d+) /.exec(document.querySelector("#room-ahead").textContent);
			return m && (%d < 0 || Number(m[1]) < %d) || document.querySelector("#room-title").textContent === "It's your turn!"; })()`,
			last(seen), last(seen)), 10*time.Second)
		n, err := strconv.Atoi(strings.Fields(alice.text("#room-ahead") + " x")[0])
		if err != nil {
			break // her turn came
		}
		seen = append(seen, n)
	}
	t.Logf("people ahead of alice, as her page showed them: %v", seen)
	if len(seen) < 2 {
		t.Errorf("the place did not count down: %v", seen)
	}

	alice.waitJS("her turn", `document.querySelector("#room-title").textContent === "It's your turn!" &&
		!document.querySelector("#buy").hidden && !document.querySelector("#buy").disabled`, 20*time.Second)
	alice.screenshot(dir, "room-your-turn.png")
	alice.do("buy", chromedp.Click(chromedp.CSS("#buy")))
	alice.waitJS("purchase result", `document.querySelector("#result-title")?.textContent === "You got it!"`, 10*time.Second)
	alice.screenshot(dir, "room-bought.png")

	bob.waitJS("sold out", `document.querySelector("#room-title").textContent === "Sold out" && document.querySelector("#buy").hidden`, 10*time.Second)
	bob.screenshot(dir, "room-sold-out.png")

	admin.waitJS("room figures", `!document.querySelector("#room-stats").hidden &&
		document.querySelector("#stat-queue_size").textContent === "12" && document.querySelector("#stat-queue_passes").textContent === "1"`, 15*time.Second)
	admin.screenshot(dir, "admin-dashboard-waiting-room.png")
	for _, tb := range []*tab{admin, alice, bob} {
		tb.checkConsole()
	}
}

// last is the last of ns, or -1.
func last(ns []int) int {
	if len(ns) == 0 {
		return -1
	}
	return ns[len(ns)-1]
}
