package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"testing"

	"github.com/seckill/seckill/cmd/seckill/bench"
	"github.com/seckill/seckill/system/servertest"
)

// TestTwoServeProcesses: two `seckill serve` processes on one Redis,
// hammered together, with the same users on both: no oversell, no user
// above the per-user cap, and every 200 is a real, distinct order.
func TestTwoServeProcesses(t *testing.T) {
	bin := servertest.Binary(t)
	env := servertest.New(t)
	servertest.Broker(t, env.Config) // removes the queues the processes' relays publish to
	sale := servertest.MustSale(t, env.Server(t, nil), servertest.SaleSpec{Total: 500, Limit: 2})
	var urls []string
	for range 2 {
		c, err := bench.StartServe(context.Background(), bin, env.Config)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Stop)
		urls = append(urls, "http://"+c.Addr)
	}

	const n, users = 4000, 700
	tokens := make([]string, users)
	for i := range tokens {
		tokens[i] = servertest.Token(t, fmt.Sprint("mp-user-", i))
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	var (
		mu     sync.Mutex
		byUser = map[int]int64{}
		orders = map[string]bool{}
		codes  = map[int]int{}
		units  int64
		wg     sync.WaitGroup
		sem    = make(chan struct{}, 64)
	)
	for i := range n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			u, qty := i%users, int64(1+rand.IntN(2))
			body, _ := json.Marshal(map[string]any{"qty": qty, "request_id": fmt.Sprintf("mp-req-%06d", i)})
			req, _ := http.NewRequest("POST", fmt.Sprintf("%s/api/sales/%d/buy", urls[i%2], sale.ID), bytes.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", "Bearer "+tokens[u])
			res, err := client.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			defer res.Body.Close()
			var ok struct {
				OrderID string `json:"order_id"`
				Qty     int64  `json:"qty"`
			}
			_ = json.NewDecoder(res.Body).Decode(&ok)
			mu.Lock()
			defer mu.Unlock()
			codes[res.StatusCode]++
			if res.StatusCode == http.StatusOK {
				if orders[ok.OrderID] {
					t.Errorf("order %s answered twice", ok.OrderID)
				}
				orders[ok.OrderID] = true
				byUser[u] += ok.Qty
				units += ok.Qty
			}
		})
	}
	wg.Wait()
	if units != 500 {
		t.Errorf("200 answers bought %d units of 500 (statuses %v)", units, codes)
	}
	for u, q := range byUser {
		if q > 2 {
			t.Errorf("user %d bought %d, limit 2", u, q)
		}
	}
	st, err := env.Inventory.Stock(context.Background(), sale.ID)
	if err != nil {
		t.Fatal(err)
	}
	if st.Sold != 500 || st.Available != 0 {
		t.Errorf("stock %+v", st)
	}
	buyers, _ := env.Inventory.Buyers(context.Background(), sale.ID)
	for u, q := range buyers {
		if q > 2 {
			t.Errorf("Redis says %s holds %d", u, q)
		}
	}
	if codes[200]+codes[409] != n {
		t.Errorf("statuses %v", codes)
	}
	t.Logf("statuses %v", codes)
}
