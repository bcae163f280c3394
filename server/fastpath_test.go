package server_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seckill/seckill/server"
	"github.com/seckill/seckill/system/servertest"
)

// serve runs srv (and so its background chores: the stock-changed
// subscription among them) until the test ends.
func serve(t *testing.T, srv *server.Server) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = srv.Run(ctx, ln) })
	t.Cleanup(func() { cancel(); wg.Wait() })
}

// metric reads one unlabelled series off a handler's /metrics.
func metric(t *testing.T, h http.Handler, name string) float64 {
	t.Helper()
	r := call(t, h, "GET", "/metrics", nil, admin())
	for _, line := range strings.Split(r.Raw, "\n") {
		var v float64
		if _, err := fmt.Sscanf(line, name+" %g", &v); err == nil {
			return v
		}
	}
	return 0
}

// TestSoldOutFastPath: after the sale sells out, fresh request ids get
// sold_out without the Lua script; retries of accepted request ids still
// get their original orders, and of refused ones their refusal.
func TestSoldOutFastPath(t *testing.T) {
	for name, env := range coalescing {
		t.Run(name, func(t *testing.T) {
			st := newStack(t, env...)
			sale := servertest.MustSale(t, st.srv, servertest.SaleSpec{Total: 5, Limit: 1})
			orders := map[string]string{} // request id → order id
			for i := range 5 {
				rid := fmt.Sprintf("fast-ok-%03d", i)
				r := call(t, st.h, "POST", buyPath(sale.ID), buyBody(1, rid), bearer(servertest.Token(t, fmt.Sprint("winner-", i))))
				if r.Status != 200 {
					t.Fatalf("buy %d: %v", i, r)
				}
				orders[rid] = r.Body["order_id"].(string)
			}
			loser := servertest.Token(t, "loser")
			if r := call(t, st.h, "POST", buyPath(sale.ID), buyBody(1, "fast-refused-0"), bearer(loser)); r.code() != "sold_out" {
				t.Fatalf("first buy after sell-out: %v", r)
			}
			var wg sync.WaitGroup
			for i := range 200 {
				wg.Go(func() {
					r := call(t, st.h, "POST", buyPath(sale.ID), buyBody(1, fmt.Sprintf("fast-new-%04d", i)), bearer(servertest.Token(t, fmt.Sprint("late-", i))))
					if r.Status != 409 || r.code() != "sold_out" {
						t.Errorf("fresh request after sell-out: %v", r)
					}
				})
			}
			wg.Wait()
			if hits := metric(t, st.h, "seckill_buy_fast_path_total"); hits < 150 {
				t.Errorf("only %v of 200 requests after sell-out took the fast path", hits)
			}
			for i := range 5 {
				rid := fmt.Sprintf("fast-ok-%03d", i)
				r := call(t, st.h, "POST", buyPath(sale.ID), buyBody(1, rid), bearer(servertest.Token(t, fmt.Sprint("winner-", i))))
				if r.Status != 200 || r.Body["order_id"] != orders[rid] {
					t.Errorf("retry of accepted %s: %v, want 200 with %s", rid, r, orders[rid])
				}
			}
			if r := call(t, st.h, "POST", buyPath(sale.ID), buyBody(1, "fast-refused-0"), bearer(loser)); r.code() != "sold_out" {
				t.Errorf("retry of a refused request: %v", r)
			}
			stock, _ := st.Inventory.Stock(context.Background(), sale.ID)
			if stock.Sold != 5 || stock.Available != 0 {
				t.Errorf("stock %+v", stock)
			}
		})
	}
}

// TestStockReturnReachesEveryProcess: two server processes on one Redis
// both know the sale is sold out; a cancellation releases 3 units; both
// learn it over pub/sub (the recheck is set to an hour, so nothing else
// could tell them), those 3 units are bought through both, and no more.
func TestStockReturnReachesEveryProcess(t *testing.T) {
	st := newStack(t, "SECKILL_SOLD_OUT_RECHECK=1h")
	other := st.Server(t, nil)
	serve(t, st.srv)
	serve(t, other)
	procs := []http.Handler{st.h, other.Handler()}
	ctx := context.Background()
	servertest.WaitFor(t, 10*time.Second, "both processes subscribed", func() (bool, string) {
		n, err := st.Redis.PubSubNumSub(ctx, st.Keys.StockChanged()).Result()
		return err == nil && n[st.Keys.StockChanged()] >= 2, fmt.Sprint(n, err)
	})

	sale := servertest.MustSale(t, st.srv, servertest.SaleSpec{Total: 6, Limit: 1})
	type won struct{ user, order string }
	var wins []won
	for i := range 6 {
		user := fmt.Sprint("first-", i)
		r := call(t, procs[i%2], "POST", buyPath(sale.ID), buyBody(1, fmt.Sprintf("first-%04d", i)), bearer(servertest.Token(t, user)))
		if r.Status != 200 {
			t.Fatalf("buy %d: %v", i, r)
		}
		wins = append(wins, won{user, r.Body["order_id"].(string)})
	}
	fresh := 0
	buy := func(p int) response {
		fresh++
		user := fmt.Sprint("second-", fresh)
		return call(t, procs[p], "POST", buyPath(sale.ID), buyBody(1, fmt.Sprintf("second-%04d", fresh)), bearer(servertest.Token(t, user)))
	}
	for p := range procs {
		for range 3 {
			if r := buy(p); r.code() != "sold_out" {
				t.Fatalf("process %d after sell-out: %v", p, r)
			}
		}
		if metric(t, procs[p], "seckill_buy_fast_path_total") == 0 {
			t.Fatalf("process %d never took the fast path", p)
		}
	}

	for _, w := range wins[:3] {
		if _, ok, err := st.Inventory.Release(ctx, sale.ID, w.order, w.user, 1); err != nil || !ok {
			t.Fatalf("release %s: %v %v", w.order, ok, err)
		}
	}
	start := time.Now()
	bought := 0
	for p := range procs {
		servertest.WaitFor(t, 5*time.Second, fmt.Sprintf("process %d sells a returned unit", p), func() (bool, string) {
			r := buy(p)
			return r.Status == 200, r.String()
		})
		bought++
	}
	t.Logf("both processes sold returned units %s after the release", time.Since(start).Round(time.Millisecond))
	if r := buy(0); r.Status != 200 {
		t.Fatalf("third returned unit: %v", r)
	}
	bought++
	for p := range procs {
		for range 5 {
			if r := buy(p); r.code() != "sold_out" {
				t.Errorf("process %d sold more than was returned: %v", p, r)
			}
		}
	}
	stock, _ := st.Inventory.Stock(ctx, sale.ID)
	if stock.Sold != 6 || stock.Available != 0 || bought != 3 {
		t.Errorf("stock %+v after %d rebuys", stock, bought)
	}
}
