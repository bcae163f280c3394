package server_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/seckill/seckill"
	"github.com/seckill/seckill/system/servertest"
	"github.com/seckill/seckill/worker"
)

// TestWalletCreditAndPay: the operator credits a wallet once per request
// id (a retry answers the same, another amount is refused, a merchant may
// not); paying charges the order's amount once, a wallet short of it is
// refused with 402 and the order stays pending; paying again charges
// nothing more.
func TestWalletCreditAndPay(t *testing.T) {
	st := newStack(t, "SECKILL_PLATFORM_FEE_BPS=250")
	st.StartPipeline(t)
	alice, bob := "u_walletalice", "u_walletbob"
	wallet := func(user string) int64 {
		t.Helper()
		r := call(t, st.h, "GET", "/api/wallet", nil, bearer(servertest.Token(t, user)))
		if r.Status != 200 || r.Body["currency"] != "USD" {
			t.Fatalf("wallet of %s: %v", user, r)
		}
		return num(r.Body, "balance_cents")
	}
	credit := func(user string, cents int64, rid string, who ...string) response {
		return call(t, st.h, "POST", "/admin/api/wallets/"+user+"/credit",
			map[string]any{"amount_cents": cents, "reason": "welcome", "request_id": rid}, who...)
	}
	if w := wallet(alice); w != 0 {
		t.Fatalf("a new wallet holds %d", w)
	}
	for range 2 {
		if r := credit(alice, 1000, "credit-alice-1", admin()); r.Status != 201 || num(r.Body, "amount_cents") != 1000 ||
			r.Body["kind"] != "credit" || r.Body["debit"] != "platform" || r.Body["credit"] != "wallet:"+alice {
			t.Fatalf("credit: %v", r)
		}
	}
	if r := credit(alice, 999, "credit-alice-1", admin()); r.Status != 400 {
		t.Errorf("the same request id for another amount: %v", r)
	}
	if r := credit(alice, 0, "credit-alice-2", admin()); r.Status != 400 {
		t.Errorf("a credit of 0: %v", r)
	}
	if r := credit(alice, 10_000_000, "credit-alice-3", admin()); r.Status != 409 || r.code() != "balance_limit" {
		t.Errorf("a credit past the wallet's bound: %v", r)
	}
	_, merchant := merchantLogin(t, st, "credit@shop.example")
	if r := credit(alice, 5, "credit-alice-4", merchant); r.Status != 403 {
		t.Errorf("a merchant's credit: %v", r)
	}
	if w := wallet(alice); w != 1000 {
		t.Fatalf("alice holds %d after her credit, want 1000", w)
	}
	rows := auditRows(t, st, "?actor=operator")
	credits := 0
	for _, r := range rows {
		if r["action"] == "wallet.credit" {
			credits++
		}
	}
	if credits != 1 {
		t.Errorf("%d credit rows in the audit log, want 1", credits)
	}

	sale := servertest.MustSale(t, st.srv, servertest.SaleSpec{Total: 10, Limit: 2, PriceCents: 400})
	buy := func(user, rid string) string {
		t.Helper()
		r := call(t, st.h, "POST", buyPath(sale.ID), buyBody(2, rid), bearer(servertest.Token(t, user)))
		if r.Status != 200 {
			t.Fatalf("buy: %v", r)
		}
		return r.Body["order_id"].(string)
	}
	pay := func(user, order string) response {
		return call(t, st.h, "POST", fmt.Sprintf("/api/orders/%s/pay", order), nil, bearer(servertest.Token(t, user)))
	}
	o := buy(alice, "wallet-buy-1")
	for range 2 {
		if r := pay(alice, o); r.Status != 200 || r.Body["status"] != "paid" || r.Body["charge_id"] != "ch."+o {
			t.Fatalf("pay: %v", r)
		}
	}
	if w := wallet(alice); w != 200 {
		t.Errorf("alice holds %d after paying 800 (twice asked), want 200", w)
	}
	ob := buy(bob, "wallet-buy-2")
	if r := pay(bob, ob); r.Status != 402 || r.code() != "insufficient_funds" {
		t.Fatalf("paying from an empty wallet: %v", r)
	}
	if r := call(t, st.h, "GET", "/api/orders/"+ob, nil, bearer(servertest.Token(t, bob))); r.Body["status"] != "pending" {
		t.Errorf("the refused order: %v", r)
	}
	if r := credit(bob, 800, "credit-bob-1", admin()); r.Status != 201 {
		t.Fatal(r)
	}
	if r := pay(bob, ob); r.Status != 200 || wallet(bob) != 0 {
		t.Errorf("paying once funded: %v, wallet %d", r, wallet(bob))
	}
	// Each answer is counted by its code (alice's second payment too).
	m := call(t, st.h, "GET", "/metrics", nil, admin()).Raw
	for _, want := range []string{`seckill_payments_total{outcome="ok"} 3`, `seckill_payments_total{outcome="insufficient_funds"} 1`} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %s:\n%s", want, grep(m, "seckill_payments_total"))
		}
	}
}

// TestRefund: the sale's merchant refunds a paid order once: the wallet
// gets the amount back, from the merchant what it kept and from the
// platform its fee; the units go back on sale; another merchant cannot;
// a second refund is refused; a merchant that paid its money out cannot
// refund more than it holds.
func TestRefund(t *testing.T) {
	st := newStack(t, "SECKILL_PLATFORM_FEE_BPS=250")
	st.StartPipeline(t)
	mid, merchant := merchantLogin(t, st, "refunds@shop.example")
	_, other := merchantLogin(t, st, "other@shop.example")
	user := "u_refunded"
	sale, order := paidOrderOf(t, st, merchant, user, 2)
	balance := func(hdr ...string) int64 {
		t.Helper()
		r := call(t, st.h, "GET", "/admin/api/balance", nil, hdr...)
		if r.Status != 200 {
			t.Fatalf("balance: %v", r)
		}
		return num(r.Body, "balance_cents")
	}
	// The charge reaches the ledger and the merchant's account follows;
	// the order gets there too (maybe after its charge: a payment does not
	// wait for it).
	servertest.WaitFor(t, 20*time.Second, "the merchant credited and the order paid in the ledger", func() (bool, string) {
		b := balance(merchant)
		o, err := st.Ledger.Order(t.Context(), order)
		return b == 1950 && err == nil && o.Status == seckill.OrderPaid, fmt.Sprint(b, o.Status, err)
	})
	refund := func(hdr ...string) response {
		return call(t, st.h, "POST", "/admin/api/orders/"+order+"/refund", map[string]any{"reason": "changed my mind"}, hdr...)
	}
	if r := refund(other); r.Status != 404 || r.code() != "order_not_found" {
		t.Errorf("another merchant's refund: %v", r)
	}
	if r := refund(merchant); r.Status != 200 || r.Body["status"] != "refunded" {
		t.Fatalf("refund: %v", r)
	}
	if r := refund(merchant); r.Status != 409 || r.code() != "order_refunded" {
		t.Errorf("a second refund: %v", r)
	}
	if s := call(t, st.h, "GET", fmt.Sprintf("/api/sales/%d", sale), nil); num(s.Body, "remaining") != 5 {
		t.Errorf("the units did not come back: %v", s)
	}
	// The wallet's share follows once the ledger has the refund.
	servertest.WaitFor(t, 20*time.Second, "the wallet, the merchant and the platform as before", func() (bool, string) {
		w, m, p := walletOf(t, st, user), balance(merchant), balance(admin())
		return w == 2000 && m == 0 && p == 0, fmt.Sprint(w, " ", m, " ", p)
	})
	_ = mid
}

// TestPaymentIsItsCharge: a payment is decided by its charge in Redis. A
// charge made and never answered (a server that died right after it)
// pays the order: the shopper sees it paid at once, paying again answers
// 200 and charges nothing more, and the ledger shows it paid, charged
// once, when the funds pipeline has carried the charge.
func TestPaymentIsItsCharge(t *testing.T) {
	st := newStack(t)
	st.StartPipeline(t)
	sale := servertest.MustSale(t, st.srv, servertest.SaleSpec{Total: 5, Limit: 1, PriceCents: 700})
	user := "u_charged"
	st.Fund(t, user, 1000)
	tok := bearer(servertest.Token(t, user))
	buy := call(t, st.h, "POST", buyPath(sale.ID), buyBody(1, "charged-buy-1"), tok)
	id, _ := buy.Body["order_id"].(string)
	var o seckill.Order
	servertest.WaitFor(t, 20*time.Second, "the order in the ledger", func() (bool, string) {
		var err error
		o, err = st.Ledger.Order(t.Context(), id)
		return err == nil, fmt.Sprint(buy, err)
	})
	charge, _ := seckill.ChargeMovement(o, 0, 0, time.Now())
	if _, _, err := st.Funds.Move(t.Context(), charge); err != nil {
		t.Fatal(err)
	}
	if r := call(t, st.h, "GET", "/api/orders/"+id, nil, tok); r.Status != 200 || r.Body["status"] != "paid" {
		t.Errorf("the order read right after its charge: %v", r)
	}
	if r := call(t, st.h, "POST", "/api/orders/"+id+"/pay", nil, tok); r.Status != 200 || r.Body["status"] != "paid" {
		t.Errorf("paying it again: %v", r)
	}
	servertest.WaitFor(t, 20*time.Second, "the ledger shows it paid", func() (bool, string) {
		o, err := st.Ledger.Order(t.Context(), id)
		return err == nil && o.Status == seckill.OrderPaid && o.ChargeID == charge.ID && o.PaidAt != nil, fmt.Sprintf("%+v %v", o, err)
	})
	if w := walletOf(t, st, user); w != 300 {
		t.Errorf("the wallet holds %d, want 300: charged once", w)
	}
}

// TestPayBeforeTheLedger: a first payment reads nothing from MySQL: with
// no worker running, an order accepted a moment ago is paid at once (200,
// the wallet charged), to the merchant whose sale it is now (the operator
// handed it to another merchant after the buy), and reads paid. Once the
// pipeline runs, the ledger holds the order paid, charged once to that
// merchant, whichever of the order and its charge got there first.
func TestPayBeforeTheLedger(t *testing.T) {
	st := newStack(t)
	sale := servertest.MustSale(t, st.srv, servertest.SaleSpec{Total: 5, Limit: 1, PriceCents: 700})
	r := call(t, st.h, "POST", "/admin/api/merchants", map[string]any{"email": "later@shop.example", "name": "Later", "password": "merchant password"}, admin())
	if r.Status != 201 {
		t.Fatal(r)
	}
	merchant := num(r.Body, "id")
	user := "u_early"
	st.Fund(t, user, 1000)
	tok := bearer(servertest.Token(t, user))
	buy := call(t, st.h, "POST", buyPath(sale.ID), buyBody(1, "early-buy-1"), tok)
	id, _ := buy.Body["order_id"].(string)
	if buy.Status != 200 || id == "" {
		t.Fatal(buy)
	}
	if r := call(t, st.h, "PATCH", fmt.Sprintf("/admin/api/sales/%d", sale.ID), map[string]any{"merchant_id": merchant}, admin()); r.Status != 200 {
		t.Fatal(r)
	}
	if _, err := st.Ledger.Order(t.Context(), id); !errors.Is(err, seckill.ErrOrderNotFound) {
		t.Fatalf("the order is in the ledger already (%v): the test needs it not to be", err)
	}
	if r := call(t, st.h, "POST", "/api/orders/"+id+"/pay", nil, tok); r.Status != 200 || r.Body["status"] != "paid" {
		t.Fatalf("paying an order the ledger does not hold yet: %v", r)
	}
	if w := walletOf(t, st, user); w != 300 {
		t.Errorf("the wallet holds %d, want 300", w)
	}
	if r := call(t, st.h, "GET", "/api/orders/"+id, nil, tok); r.Status != 200 || r.Body["status"] != "paid" {
		t.Errorf("the order read before the ledger has it: %v", r)
	}

	st.StartPipeline(t)
	servertest.WaitFor(t, 20*time.Second, "the ledger shows it paid", func() (bool, string) {
		o, err := st.Ledger.Order(t.Context(), id)
		return err == nil && o.Status == seckill.OrderPaid && o.ChargeID == seckill.ChargeID(id), fmt.Sprintf("%+v %v", o, err)
	})
	ts, err := st.Ledger.OrderTransfers(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	var charges int
	for _, tr := range ts {
		if tr.Kind == seckill.TransferCharge {
			charges++
			if tr.Credit != seckill.MerchantAccountOf(merchant) || tr.Amount != 700 {
				t.Errorf("the charge: %+v, want 700 to merchant %d", tr, merchant)
			}
		}
	}
	if charges != 1 {
		t.Errorf("%d charges in the ledger, want 1: %+v", charges, ts)
	}
	if anomalies, err := st.Ledger.ChargeAnomalies(t.Context()); err != nil || len(anomalies) > 0 {
		t.Errorf("charge anomalies: %+v %v", anomalies, err)
	}
	if w := walletOf(t, st, user); w != 300 {
		t.Errorf("the wallet holds %d after the pipeline, want 300", w)
	}
}

// TestRefundBeforeTheOrderIsInTheLedger: a charge may reach the ledger a
// moment before its order. Refunding it then answers 503 (retry) to the
// merchant it paid and to the operator, and 404 to another merchant, as
// for an order it cannot see; nothing changes.
func TestRefundBeforeTheOrderIsInTheLedger(t *testing.T) {
	st := newStack(t)
	mid, merchant := merchantLogin(t, st, "early-refund@shop.example")
	_, other := merchantLogin(t, st, "someone-else@shop.example")
	id := seckill.NewOrderID(999)
	charge, _ := seckill.ChargeMovement(seckill.Order{ID: id, UserID: "u_limbo", AmountCents: 500}, mid, 0, time.Now())
	if err := st.Ledger.InsertMovements(t.Context(), []seckill.Movement{charge}, time.Now()); err != nil {
		t.Fatal(err)
	}
	refund := func(hdr string) response {
		return call(t, st.h, "POST", "/admin/api/orders/"+id+"/refund", map[string]any{"reason": "too soon"}, hdr)
	}
	for _, who := range []struct {
		name, hdr, code string
		status          int
	}{{"the merchant it paid", merchant, "unavailable", 503}, {"the operator", admin(), "unavailable", 503},
		{"another merchant", other, "order_not_found", 404}} {
		if r := refund(who.hdr); r.Status != who.status || r.code() != who.code {
			t.Errorf("%s: %v, want %d %s", who.name, r, who.status, who.code)
		}
	}
	if ts, err := st.Ledger.OrderTransfers(t.Context(), id); err != nil || len(ts) != len(charge.Transfers) {
		t.Errorf("the order's transfers after the refusals: %+v %v", ts, err)
	}
}

// TestRefundAfterTheSaleChangedHands: an order paid to one merchant,
// then the sale handed to another: the first merchant's refund is 404
// (not its sale any more), not a 503 to retry for ever.
func TestRefundAfterTheSaleChangedHands(t *testing.T) {
	st := newStack(t)
	st.StartPipeline(t)
	_, first := merchantLogin(t, st, "first-owner@shop.example")
	second, _ := merchantLogin(t, st, "second-owner@shop.example")
	sale, order := paidOrderOf(t, st, first, "u_handed", 1)
	servertest.WaitFor(t, 20*time.Second, "the order paid in the ledger", func() (bool, string) {
		o, err := st.Ledger.Order(t.Context(), order)
		return err == nil && o.Status == seckill.OrderPaid, fmt.Sprint(o.Status, err)
	})
	if r := call(t, st.h, "PATCH", fmt.Sprintf("/admin/api/sales/%d", sale), map[string]any{"merchant_id": second}, admin()); r.Status != 200 {
		t.Fatal(r)
	}
	if r := call(t, st.h, "POST", "/admin/api/orders/"+order+"/refund", map[string]any{"reason": "not mine now"}, first); r.Status != 404 || r.code() != "order_not_found" {
		t.Errorf("the first owner's refund: %v, want 404 order_not_found", r)
	}
}

// TestPayAgainAfterRedisLostItsMoney: Redis loses every balance and
// every record of money moved; the funds repair rebuilds them from the
// ledger. Paying a paid order again then answers 200 and charges nothing:
// the repair wrote its charge's record back, so Redis finds it made.
func TestPayAgainAfterRedisLostItsMoney(t *testing.T) {
	st := newStack(t)
	st.StartPipeline(t)
	user := "u_lost"
	_, id := paidOrderOf(t, st, admin(), user, 1)
	tok := bearer(servertest.Token(t, user))
	servertest.WaitFor(t, 20*time.Second, "the order paid in the ledger", func() (bool, string) {
		o, err := st.Ledger.Order(t.Context(), id)
		return err == nil && o.Status == seckill.OrderPaid, fmt.Sprint(o.Status, err)
	})
	fr := worker.NewFundsReconciler(st.Funds, st.Ledger, nil, nil)
	if _, err := fr.Wait(t.Context(), 20*time.Second); err != nil {
		t.Fatal(err)
	}
	pattern := st.Config.Redis.Prefix + ":funds:*"
	if keys := servertest.Keys(t, st.Redis, pattern); len(keys) == 0 {
		t.Fatalf("no funds keys under %s", pattern)
	}
	servertest.DeleteKeys(t, st.Redis, pattern) // on every master
	if keys := servertest.Keys(t, st.Redis, pattern); len(keys) > 0 {
		t.Fatalf("funds keys left after the loss: %v", keys)
	}
	if err := fr.Repair(t.Context(), 20*time.Second); err != nil {
		t.Fatal(err)
	}
	if w := walletOf(t, st, user); w != 1000 {
		t.Fatalf("the wallet after the repair holds %d, want 1000", w)
	}
	if r := call(t, st.h, "POST", "/api/orders/"+id+"/pay", nil, tok); r.Status != 200 || r.Body["status"] != "paid" {
		t.Errorf("paying again: %v", r)
	}
	if w := walletOf(t, st, user); w != 1000 {
		t.Errorf("the wallet holds %d after paying again, want 1000: charged twice", w)
	}
}

// paidOrderOf has the merchant (its session header) create a sale of 5 at
// 10.00, and user, funded with 20.00, buy qty of it and pay; it returns
// the sale and the order.
func paidOrderOf(t *testing.T, st *stack, merchant, user string, qty int64) (sale int64, order string) {
	t.Helper()
	r := call(t, st.h, "POST", "/admin/api/sales", map[string]any{"name": "Refundable", "item": "Thing", "price_cents": 1000,
		"total": 5, "per_user_limit": 2, "starts_at": time.Now().Add(-time.Minute), "ends_at": time.Now().Add(time.Hour)}, merchant)
	if r.Status != 201 {
		t.Fatal(r)
	}
	sale = num(r.Body, "id")
	st.Fund(t, user, 2000)
	tok := bearer(servertest.Token(t, user))
	buy := call(t, st.h, "POST", buyPath(sale), buyBody(qty, user+"-buy-1"), tok)
	order, _ = buy.Body["order_id"].(string)
	if p := call(t, st.h, "POST", "/api/orders/"+order+"/pay", nil, tok); p.Status != 200 {
		t.Fatalf("pay: %v (buy %v)", p, buy)
	}
	return sale, order
}
