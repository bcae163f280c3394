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
// crowd of ten joins before the start, and bob, whose page draws him a
// place among them; alice comes after the start, waits in the room,
// watches the people ahead of her count down, is let in and buys. Bob's
// page, ahead of her, reads his drawn place as his turn nears and lets
// him in; he sees "Sold out" the moment her buy took the unit. The
// dashboard shows the room's figures.
func TestWaitingRoomInBrowser(t *testing.T) {
	env := servertest.New(t)
	env.StartPipeline(t)
	srv := env.Server(t, nil)
	site := servertest.HTTP(t, srv.Handler())
	dir := artifacts(t)
	b := browser(t)

	admin := newTab(t, b, "room-admin", site.URL)
	admin.logIn("#new-sale")
	admin.newSaleForm("Queue drop", "Desk lamp", "19.99", "1")
	admin.do("waiting room",
		chromedp.Click(chromedp.CSS("#f-waiting_room")),
		chromedp.SetValue(chromedp.CSS("#f-admit_per_second"), "2"),
	)
	admin.setWindow(12 * time.Second)
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
	salePage := fmt.Sprintf("%s/#/sales/%d", site.URL, saleID)
	alice, bob := newTab(t, b, "room-alice", site.URL), newTab(t, b, "room-bob", site.URL)
	open := func(s *tab) {
		s.signIn(s.name, fmt.Sprintf(`[data-sale="%d"]`, saleID))
		s.do("open sale", chromedp.Navigate(salePage), chromedp.WaitVisible(chromedp.CSS("#room")))
		// Before the start no place is shown: it is drawn at the start.
		s.waitJS("a place", `/^(Place (about )?\d+ of \d+|Your place is drawn at the start)$/.test(document.querySelector("#room-place").textContent)`, 10*time.Second)
	}
	open(bob)
	early := time.Now().Before(sale.StartsAt)
	if !early {
		t.Fatalf("bob's page took its place after the start (%v): the estimate of a drawn place goes untested", sale.StartsAt)
	}
	bob.screenshot(dir, "room-pre-queue.png")
	servertest.WaitFor(t, 20*time.Second, "the start", func() (bool, string) {
		return time.Now().After(sale.StartsAt), "not yet"
	})
	open(alice)
	if p := alice.text("#room-place"); !strings.HasPrefix(p, "Place 12 of") {
		t.Fatalf("alice, after a crowd of ten and bob: %q", p)
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

	// Bob is ahead of her: his page reads his drawn place in time.
	bob.waitJS("his turn", `document.querySelector("#room-title").textContent === "It's your turn!" &&
		!document.querySelector("#buy").hidden`, 20*time.Second)
	t.Logf("bob drew his place before the start and was let in at %s", bob.text("#room-place"))
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
