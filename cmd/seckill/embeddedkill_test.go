package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckill/seckill/orders"
	"github.com/seckill/seckill/system/servertest"
)

// TestEmbeddedKillLosesNothingAnswered: `seckill all --embedded` killed
// with SIGKILL in the middle of a burst of buys, payments and instant
// checkouts, then started again on the same data directory. Every
// request it answered 200 (or 201) before it died is in the SQLite ledger
// after the restart: the order, its payment, the credit; the sales' stock
// is what the ledger sold, and every wallet holds its credits less its
// charges in the ledger, to the cent.
func TestEmbeddedKillLosesNothingAnswered(t *testing.T) {
	dir := t.TempDir()
	c, _ := startEmbedded(t, dir)
	now := time.Now().UTC()
	const price, total, users, credit = 100, 100_000, 40, 1_000_000
	newSale := func(name string, instant bool) int64 {
		status, sale := c.do(t, "POST", "/admin/api/sales", servertest.AdminToken, map[string]any{
			"name": name, "item": "Thing", "price_cents": price, "total": total, "per_user_limit": total,
			"instant_checkout": instant, "starts_at": now.Add(-time.Minute), "ends_at": now.Add(time.Hour)})
		if status != 201 {
			t.Fatalf("create sale: %d %v", status, sale)
		}
		return int64(sale["id"].(float64))
	}
	plain, instant := newSale("Plain", false), newSale("Instant", true)
	user := func(i int) string { return fmt.Sprintf("u_kill%02d", i) }
	for i := range users {
		if status, ans := c.do(t, "POST", "/admin/api/wallets/"+user(i)+"/credit", servertest.AdminToken,
			map[string]any{"amount_cents": credit, "reason": "to spend", "request_id": "kill-credit"}); status != 201 {
			t.Fatalf("credit: %d %v\n%s", status, ans, c.out.String())
		}
	}

	// The burst: each client buys on both sales and pays half its plain
	// orders, noting every answer 200, until the process is gone.
	type answered struct {
		order, user string
		paid        bool
	}
	var (
		mu       sync.Mutex
		accepted []answered
		n        atomic.Int64
		wg       sync.WaitGroup
	)
	client := &http.Client{Timeout: 5 * time.Second}
	post := func(path, token string, body any) (int, map[string]any, error) {
		b, _ := json.Marshal(body)
		req, _ := http.NewRequest("POST", c.base+path, bytes.NewReader(b))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+token)
		res, err := client.Do(req)
		if err != nil {
			return 0, nil, err
		}
		defer res.Body.Close()
		var m map[string]any
		if err := json.NewDecoder(res.Body).Decode(&m); err != nil {
			return 0, nil, err // cut off mid-answer: not answered
		}
		return res.StatusCode, m, nil
	}
	for w := range 16 {
		wg.Go(func() {
			u := user(w % users)
			tok := servertest.Token(t, u)
			for k := 0; ; k++ {
				sale := plain
				if k%3 == 2 {
					sale = instant
				}
				status, ans, err := post(fmt.Sprintf("/api/sales/%d/buy", sale), tok, map[string]any{"qty": 1, "request_id": fmt.Sprintf("kill-%d-%d", w, k)})
				if err != nil {
					return
				}
				if status != 200 {
					continue
				}
				a := answered{order: ans["order_id"].(string), user: u, paid: sale == instant}
				if sale == plain && k%2 == 0 {
					status, _, err = post("/api/orders/"+a.order+"/pay", tok, nil)
					a.paid = err == nil && status == 200
				}
				mu.Lock()
				accepted = append(accepted, a)
				mu.Unlock()
				n.Add(1)
				if err != nil {
					return
				}
			}
		})
	}
	servertest.WaitFor(t, 30*time.Second, "answered buys mid-burst", func() (bool, string) {
		return n.Load() >= 1500, fmt.Sprint(n.Load())
	})
	if err := c.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = c.cmd.Wait()
	wg.Wait()

	c, _ = startEmbedded(t, dir)
	db, err := orders.OpenSQLite(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	lost, unpaid := 0, 0
	for _, a := range accepted {
		status, o := c.do(t, "GET", "/api/orders/"+a.order, servertest.Token(t, a.user), nil)
		switch {
		case status != 200 || o["persisted"] != true:
			lost++
			if lost <= 5 {
				t.Errorf("order %s, answered 200, after the restart: %d %v", a.order, status, o)
			}
		case a.paid && o["status"] != "paid":
			unpaid++
			if unpaid <= 5 {
				t.Errorf("order %s, its payment answered 200, after the restart: %v", a.order, o)
			}
		}
	}
	for _, sale := range []int64{plain, instant} {
		var sold int64
		if err := db.Get(&sold, `SELECT COALESCE(SUM(qty), 0) FROM orders WHERE sale_id = ? AND status <> 'cancelled'`, sale); err != nil {
			t.Fatal(err)
		}
		_, got := c.do(t, "GET", fmt.Sprintf("/api/sales/%d", sale), "", nil)
		if got["sold"] != float64(sold) || got["remaining"] != float64(total-sold) {
			t.Errorf("sale %d after the restart: %v, the ledger sold %d", sale, got, sold)
		}
	}
	for i := range users {
		var charged int64
		if err := db.Get(&charged, `SELECT COALESCE(SUM(amount_cents), 0) FROM transfers WHERE kind = 'charge' AND debit = ?`, "wallet:"+user(i)); err != nil {
			t.Fatal(err)
		}
		_, w := c.do(t, "GET", "/api/wallet", servertest.Token(t, user(i)), nil)
		if w["balance_cents"] != float64(credit-charged) {
			t.Errorf("%s after the restart: %v, want %d credited less %d charged", user(i), w, credit, charged)
		}
	}
	t.Logf("%d buys answered 200 before the kill: %d lost, %d paid but not in the ledger", len(accepted), lost, unpaid)
}
