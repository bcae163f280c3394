package server_test

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckill/seckill"
	"github.com/seckill/seckill/system"
	"github.com/seckill/seckill/system/servertest"
	"github.com/seckill/seckill/worker"
)

// TestMoneyUnderConcurrency: 200 shoppers top up through the provider's
// webhook (each delivered twice, at once) and pay their orders (each
// payment sent twice, at once), 2,000 requests 64 at a time, most
// wallets holding less than their orders cost. No wallet goes below 0,
// no order is charged twice, every paid order is charged once and every
// refused one not at all; once the pipeline drains, every account's
// Redis balance equals its ledger entries to the cent and all add up to 0.
func TestMoneyUnderConcurrency(t *testing.T) {
	st := newStack(t, "SECKILL_PLATFORM_FEE_BPS=300")
	broker := st.StartPipeline(t)
	const users, ordersEach, price = 200, 4, 1_000
	sale := servertest.MustSale(t, st.srv, servertest.SaleSpec{Total: users * ordersEach, Limit: ordersEach, PriceCents: price})
	type shopper struct {
		id     string
		topups []string
		orders []string
		paid   atomic.Int64
	}
	shoppers := make([]*shopper, users)
	for i := range shoppers {
		shoppers[i] = &shopper{id: fmt.Sprintf("u_money%03d", i)}
	}
	// Each shopper tops up between 0 and 4,000 (0, 1 or 2 top-ups), so
	// some orders are refused for want of money.
	for i, s := range shoppers {
		for k := range i % 3 {
			r := startTopup(t, st, s.id, int64(1_000+1_000*((i+k)%2)), fmt.Sprintf("money-topup-%03d-%d", i, k))
			if r.Status != 201 {
				t.Fatalf("start top-up: %v", r)
			}
			s.topups = append(s.topups, r.Body["topup_id"].(string))
		}
		for k := range ordersEach {
			r := call(t, st.h, "POST", buyPath(sale.ID), buyBody(1, fmt.Sprintf("money-buy-%03d-%d", i, k)), bearer(servertest.Token(t, s.id)))
			if r.Status != 200 {
				t.Fatalf("buy: %v", r)
			}
			s.orders = append(s.orders, r.Body["order_id"].(string))
		}
	}
	var (
		wg       sync.WaitGroup
		sem      = make(chan struct{}, 64)
		requests atomic.Int64
		unwanted sync.Map
	)
	send := func(fn func()) {
		wg.Add(1)
		go func() {
			sem <- struct{}{}
			defer func() { <-sem; wg.Done() }()
			requests.Add(1)
			fn()
		}()
	}
	for _, s := range shoppers {
		for _, id := range s.topups {
			for range 2 { // the provider's webhook, delivered twice at once
				send(func() {
					if r := call(t, st.h, "POST", "/pay/test/"+id+"/pay", nil); r.Status != http.StatusSeeOther {
						unwanted.Store("top-up "+id, r.String())
					}
				})
			}
		}
		for _, o := range s.orders {
			for range 2 { // the shopper's payment, retried at once
				send(func() {
					r := call(t, st.h, "POST", "/api/orders/"+o+"/pay", nil, bearer(servertest.Token(t, s.id)))
					switch {
					case r.Status == 200:
					case r.Status == 402 && r.code() == "insufficient_funds":
					default:
						unwanted.Store("pay "+o, r.String())
					}
				})
			}
		}
	}
	wg.Wait()
	unwanted.Range(func(k, v any) bool { t.Errorf("%s: %s", k, v); return true })
	t.Logf("%d requests", requests.Load())

	// A payment's status comes to the ledger with its charge: let the
	// funds pipeline drain first.
	ctx := context.Background()
	sys := system.New(st.Config, system.Conns{Redis: st.Redis, DB: st.DB, Bus: broker}, nil)
	fr := worker.NewFundsReconciler(sys.Funds, st.Ledger, broker, nil)
	servertest.WaitFor(t, 30*time.Second, "the funds reconciled", func() (bool, string) {
		rep, err := fr.Check(ctx)
		return err == nil && !rep.InFlight && len(rep.Drift) == 0, fmt.Sprintf("%+v %v", rep, err)
	})
	var charged int64
	for _, s := range shoppers {
		for _, o := range s.orders {
			got, err := st.Ledger.Order(ctx, o)
			if err != nil {
				t.Fatal(err)
			}
			if got.Status == seckill.OrderPaid {
				s.paid.Add(1)
				charged++
			}
		}
		topped := int64(0)
		for k := range len(s.topups) {
			topped += int64(1_000 + 1_000*((indexOf(shoppers, s)+k)%2))
		}
		want := topped - s.paid.Load()*price
		if b := walletOf(t, st, s.id); b != want || b < 0 {
			t.Errorf("%s holds %d: topped up %d, paid %d orders, want %d", s.id, b, topped, s.paid.Load(), want)
		}
	}
	if charged == 0 || charged == users*ordersEach {
		t.Errorf("%d of %d orders paid: the burst should pay some and refuse some", charged, users*ordersEach)
	}
	rep, _ := fr.Check(ctx)
	if rep.RedisSum != 0 || rep.LedgerSum != 0 {
		t.Errorf("the accounts add up to %d in Redis, %d in the ledger", rep.RedisSum, rep.LedgerSum)
	}
	t.Logf("%d orders paid of %d; %d accounts reconciled", charged, users*ordersEach, rep.Accounts)
}

func indexOf[T comparable](s []T, v T) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return -1
}
