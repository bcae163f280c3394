package server_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/seckill/seckill"
	"github.com/seckill/seckill/system"
	"github.com/seckill/seckill/system/servertest"
	"github.com/seckill/seckill/worker"
)

// TestInstantCheckoutInvariants: 3,000 buyers with random balances (some
// short of the price) rush 1,000 units of an instant-checkout sale, each
// buy sent twice at once with the same request id. A buy is accepted and
// charged in one decision or neither: every 200 answers a paid order with
// its charge, a retry answers the same order, 402 only for a wallet short
// of price × qty, and units sold = charges made. Once the pipeline
// drains, every accepted order is paid in the ledger with exactly one
// charge (paying it again at once charges nothing), its fee 2.5%, no charge exists without its order, no wallet is below 0,
// every wallet holds its funding less its charges, Redis equals the
// ledger to the cent and every account adds up to 0. On a Redis Cluster
// (SECKILL_TEST_REDIS=cluster) the same buys go through the two-phase
// hold.
func TestInstantCheckoutInvariants(t *testing.T) {
	st := newStack(t, "SECKILL_PLATFORM_FEE_BPS=250")
	broker := st.StartPipeline(t)
	const buyers, units, price, limit = 3000, 1000, 1_000, 2
	_, merchant := merchantLogin(t, st, "instant@shop.example") // its charges pay the platform a fee
	r := call(t, st.h, "POST", "/admin/api/sales", map[string]any{"name": "Instant", "item": "Thing", "price_cents": price,
		"total": units, "per_user_limit": limit, "instant_checkout": true,
		"starts_at": time.Now().Add(-time.Minute), "ends_at": time.Now().Add(time.Hour)}, merchant)
	if r.Status != 201 {
		t.Fatal(r)
	}
	sale := struct{ ID int64 }{num(r.Body, "id")}

	type buyer struct {
		id      string
		funded  int64
		qty     int64
		answers [2]response
	}
	rng := rand.New(rand.NewPCG(7, 32))
	bs := make([]*buyer, buyers)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 32)
	for i := range bs {
		b := &buyer{id: fmt.Sprintf("u_inst%04d", i), funded: rng.Int64N(3 * price), qty: 1 + rng.Int64N(limit)}
		bs[i] = b
		if b.funded == 0 {
			continue
		}
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			st.Fund(t, b.id, b.funded)
		})
	}
	wg.Wait()

	for _, b := range bs {
		for k := range 2 { // the same buy, sent twice at once
			wg.Go(func() {
				sem <- struct{}{}
				defer func() { <-sem }()
				b.answers[k] = call(t, st.h, "POST", buyPath(sale.ID), buyBody(b.qty, "inst-"+b.id), bearer(servertest.Token(t, b.id)))
			})
		}
	}
	wg.Wait()

	var sold int64
	charged := map[string]int64{} // order → amount charged, by the answers
	owner := map[string]string{}  // order → its buyer
	for _, b := range bs {
		a, r := b.answers[0], b.answers[1]
		if r.Status == 200 {
			a, r = r, a
		}
		// An accepted buy's retry answers the same order. A refusal for
		// funds is not kept (a top-up may follow), so its retry is decided
		// again: refused for funds again, or sold out by then.
		if (a.Status == 200 || r.Status == 200) && (a.Status != r.Status || a.Body["order_id"] != r.Body["order_id"]) {
			t.Errorf("%s: one buy answered twice differently: %v and %v", b.id, a, r)
			continue
		}
		if a.Status != 200 && a.code() != r.code() && (a.code() != "insufficient_funds" && r.code() != "insufficient_funds") {
			t.Errorf("%s: one buy refused twice differently: %v and %v", b.id, a, r)
		}
		switch {
		case a.Status == 200:
			o, _ := a.Body["order_id"].(string)
			if a.Body["status"] != "paid" || a.Body["charge_id"] != seckill.ChargeID(o) {
				t.Errorf("%s: accepted but not born paid: %v", b.id, a)
			}
			if b.funded < b.qty*price {
				t.Errorf("%s: accepted a buy of %d cents with %d in the wallet", b.id, b.qty*price, b.funded)
			}
			sold += b.qty
			charged[o], owner[o] = b.qty*price, b.id
		case a.Status == 402 && a.code() == "insufficient_funds":
			if b.funded >= b.qty*price {
				t.Errorf("%s: refused for funds holding %d for %d", b.id, b.funded, b.qty*price)
			}
		case a.Status == 409 && a.code() == "sold_out":
		default:
			t.Errorf("%s: %v", b.id, a)
		}
	}
	if sold > units || sold < units-limit {
		t.Errorf("%d units sold of %d: the rush should sell them all, and never more", sold, units)
	}

	// Paying an order born paid, at once (before its hold is posted or
	// it reaches the ledger, often), charges nothing more and answers it
	// paid with its charge.
	for o := range charged {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			r := call(t, st.h, "POST", "/api/orders/"+o+"/pay", nil, bearer(servertest.Token(t, owner[o])))
			if r.Status != 200 || r.Body["status"] != "paid" || r.Body["charge_id"] != seckill.ChargeID(o) {
				t.Errorf("paying instant order %s: %v", o, r)
			}
		})
	}
	wg.Wait()

	ctx := context.Background()
	sys := system.New(st.Config, system.Conns{Redis: st.Redis, DB: st.DB, Bus: broker}, nil)
	fr := worker.NewFundsReconciler(sys.Funds, st.Ledger, broker, nil)
	servertest.WaitFor(t, 60*time.Second, "every order paid in the ledger and the funds reconciled", func() (bool, string) {
		rep, err := fr.Check(ctx)
		if err != nil || rep.InFlight || len(rep.Drift) > 0 {
			return false, fmt.Sprintf("%+v %v", rep, err)
		}
		totals, err := st.Ledger.Totals(ctx, sale.ID)
		if err != nil {
			return false, err.Error()
		}
		return totals.Units[seckill.OrderPaid] == sold && totals.Orders[seckill.OrderPending] == 0, fmt.Sprintf("%+v", totals)
	})
	anomalies, err := st.Ledger.ChargeAnomalies(ctx)
	if err != nil || len(anomalies) > 0 {
		t.Errorf("orders whose charges disagree with their status: %+v %v", anomalies, err)
	}
	var charges, fees int64
	for _, b := range bs {
		spent := int64(0)
		if b.answers[0].Status == 200 {
			o := b.answers[0].Body["order_id"].(string)
			ts, err := st.Ledger.OrderTransfers(ctx, o)
			if err != nil {
				t.Fatal(err)
			}
			for _, tr := range ts {
				switch tr.Kind {
				case seckill.TransferCharge:
					charges++
					spent += tr.Amount
					if tr.Amount != charged[o] {
						t.Errorf("order %s charged %d, want %d", o, tr.Amount, charged[o])
					}
				case seckill.TransferFee:
					fees++
					if want := seckill.Fee(charged[o], 250); tr.Amount != want {
						t.Errorf("order %s: fee %d, want %d", o, tr.Amount, want)
					}
				}
			}
		}
		if got := walletOf(t, st, b.id); got != b.funded-spent || got < 0 {
			t.Errorf("%s holds %d: funded %d, charged %d", b.id, got, b.funded, spent)
		}
	}
	if charges != int64(len(charged)) || fees != charges {
		t.Errorf("%d charges and %d fees in the ledger for %d accepted orders", charges, fees, len(charged))
	}
	var all int64 // charges of this sale's orders, whatever their order
	if err := st.DB.GetContext(ctx, &all, `SELECT COUNT(*) FROM transfers WHERE kind = 'charge' AND order_id LIKE ?`,
		fmt.Sprintf("%%-%d", sale.ID)); err != nil {
		t.Fatal(err)
	}
	if all != int64(len(charged)) {
		t.Errorf("the ledger holds %d charges of this sale's orders, %d orders were accepted", all, len(charged))
	}
	rep, _ := fr.Check(ctx)
	if rep.RedisSum != 0 || rep.LedgerSum != 0 {
		t.Errorf("the accounts add up to %d in Redis, %d in the ledger", rep.RedisSum, rep.LedgerSum)
	}
	t.Logf("%d buyers, %d orders (%d units) sold and charged; %d accounts reconciled", buyers, len(charged), sold, rep.Accounts)
}
