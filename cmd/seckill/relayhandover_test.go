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

	"github.com/prometheus/client_golang/prometheus"

	"github.com/seckill/seckill/cmd/seckill/bench"
	"github.com/seckill/seckill/system"
	"github.com/seckill/seckill/system/servertest"
)

// TestDeadRelayHandsOver: two `seckill serve` processes, each with its
// outbox relay, and the consumers here. A burst of buys goes to the
// first, which is killed with SIGKILL in the middle of it: the entries
// its relay had read and not yet confirmed are handed to the second
// relay, and every order the first answered 200 reaches the ledger, once.
// It logs the worst time from an answer to its order in the ledger, and
// from the kill until the ledger held them all (issue 33: ≤ 5 s; the
// relay_claim_idle of 30 s alone took 41 s).
func TestDeadRelayHandsOver(t *testing.T) {
	bin := servertest.Binary(t)
	env := servertest.New(t)
	broker := servertest.Broker(t, env.Config)
	sys := system.New(env.Config, system.Conns{Redis: env.Redis, DB: env.DB, Bus: broker}, prometheus.NewRegistry())
	ctx, stop := context.WithCancel(context.Background())
	var consumers sync.WaitGroup
	consumers.Go(func() { _ = sys.RunConsumers(ctx) })
	t.Cleanup(func() { stop(); consumers.Wait() })
	sale := servertest.MustSale(t, env.Server(t, nil), servertest.SaleSpec{Total: 1_000_000, Limit: 1_000_000})

	var serves []*bench.Child
	for range 2 {
		c, err := bench.StartServe(context.Background(), bin, env.Config)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Stop)
		serves = append(serves, c)
	}
	doomed := "http://" + serves[0].Addr

	var (
		mu       sync.Mutex
		answered = map[string]time.Time{} // order → when it was answered 200
		n        atomic.Int64
		wg       sync.WaitGroup
	)
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 32}}
	for w := range 32 {
		wg.Go(func() {
			tok := servertest.Token(t, fmt.Sprint("handover-", w))
			for k := 0; ; k++ {
				body, _ := json.Marshal(map[string]any{"qty": 1, "request_id": fmt.Sprintf("handover-%d-%d", w, k)})
				req, _ := http.NewRequest("POST", fmt.Sprintf("%s/api/sales/%d/buy", doomed, sale.ID), bytes.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Authorization", "Bearer "+tok)
				res, err := client.Do(req)
				if err != nil {
					return // killed
				}
				var ok struct {
					OrderID string `json:"order_id"`
				}
				err = json.NewDecoder(res.Body).Decode(&ok)
				res.Body.Close()
				if err != nil || res.StatusCode != 200 {
					continue
				}
				mu.Lock()
				answered[ok.OrderID] = time.Now()
				mu.Unlock()
				n.Add(1)
			}
		})
	}
	servertest.WaitFor(t, 30*time.Second, "buys answered before the kill", func() (bool, string) {
		return n.Load() >= 3000, fmt.Sprint(n.Load())
	})
	serves[0].Kill()
	killed := time.Now()
	wg.Wait()

	seen := map[string]time.Time{} // order → when first seen in the ledger
	var worst time.Duration
	servertest.WaitFor(t, 90*time.Second, "every order answered 200 in the ledger", func() (bool, string) {
		var ids []string
		if err := env.DB.Select(&ids, `SELECT id FROM orders WHERE sale_id = ?`, sale.ID); err != nil {
			return false, err.Error()
		}
		now := time.Now()
		for _, id := range ids {
			if _, ok := seen[id]; !ok {
				seen[id] = now
			}
		}
		missing := 0
		for o := range answered {
			if _, ok := seen[o]; !ok {
				missing++
			}
		}
		return missing == 0, fmt.Sprintf("%d of %d answered orders not in the ledger", missing, len(answered))
	})
	for o, at := range answered {
		worst = max(worst, seen[o].Sub(at))
	}
	var all time.Time
	for o := range answered {
		if seen[o].After(all) {
			all = seen[o]
		}
	}
	var rows int
	if err := env.DB.Get(&rows, `SELECT COUNT(*) FROM orders WHERE sale_id = ?`, sale.ID); err != nil {
		t.Fatal(err)
	}
	if rows < len(answered) {
		t.Errorf("%d orders in the ledger, %d answered", rows, len(answered))
	}
	t.Logf("%d orders answered before the kill: the worst reached the ledger %s after its answer; all of them %s after the kill",
		len(answered), worst.Round(time.Millisecond), all.Sub(killed).Round(time.Millisecond))
}
