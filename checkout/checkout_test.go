package checkout_test

import (
	"context"
	"errors"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckill/seckill"
	"github.com/seckill/seckill/checkout"
	"github.com/seckill/seckill/funds"
	"github.com/seckill/seckill/inventory"
	"github.com/seckill/seckill/system/servertest"
)

func TestMain(m *testing.M) { os.Exit(servertest.Main(m)) }

// env is a sale's stock and the wallets on a Redis Cluster of 3 masters,
// the instant checkout in front of the stock, and the sweep.
type env struct {
	inv   *inventory.Store
	fw    *funds.Store
	chk   *checkout.Checkout
	sweep *checkout.Sweeper
	sale  int64
}

// rules reads a sale's settings from its stock, as sales.Service.Rules
// does (without its second-long cache).
type rules struct{ inv *inventory.Store }

func (r rules) Rules(ctx context.Context, sale int64) (seckill.Stock, error) {
	return r.inv.Stock(ctx, sale)
}

const price = 500

var nextSale atomic.Int64

// newEnv warms an instant-checkout sale of total units, limit a buyer.
func newEnv(t *testing.T, total, limit int64) *env {
	t.Helper()
	cfg := servertest.Config(t, "SECKILL_REDIS_ADDR="+servertest.SharedRedisCluster(t).Addrs(), "SECKILL_REDIS_DB=0")
	c := servertest.Redis(t, cfg)
	e := &env{
		inv: inventory.New(c, inventory.Config{Prefix: cfg.Redis.Prefix, Keep: time.Hour}),
		fw:  funds.New(c, funds.Config{Prefix: cfg.Redis.Prefix, Groups: 16, WalletMax: 1_000_000_000}),
	}
	e.chk = checkout.New(e.inv, e.fw, e.inv, rules{e.inv}, checkout.Config{HoldFor: time.Minute, FeeBps: 300})
	e.sweep = checkout.NewSweeper(e.fw, e.inv)
	e.sale = nextSale.Add(1)
	now := time.Now()
	_, err := e.inv.Warm(context.Background(), seckill.Sale{ID: e.sale, Total: total, PerUserLimit: limit, PriceCents: price, Buckets: 1,
		StartsAt: now.Add(-time.Minute), EndsAt: now.Add(time.Hour), Status: seckill.StatusActive, MerchantID: 7, InstantCheckout: true})
	if err != nil {
		t.Fatal(err)
	}
	if !e.inv.Cluster() {
		t.Fatal("the checkout's tests need a Redis Cluster")
	}
	return e
}

func (e *env) fund(t *testing.T, user string, cents int64) {
	t.Helper()
	if _, _, err := e.fw.Move(context.Background(), seckill.TopupMovement("t"+servertest.Unique(), user, cents, time.Now())); err != nil {
		t.Fatal(err)
	}
}

// money is a wallet's balance and what its holds set aside.
func (e *env) money(t *testing.T, user string) (balance, held int64) {
	t.Helper()
	ctx := context.Background()
	b, err := e.fw.Balance(ctx, seckill.WalletOf(user))
	if err != nil {
		t.Fatal(err)
	}
	h, err := e.fw.Held(ctx, seckill.WalletOf(user))
	if err != nil {
		t.Fatal(err)
	}
	return b, h
}

func (e *env) buy(t *testing.T, user, request string, qty int64) seckill.Answer {
	t.Helper()
	d, err := e.chk.Reserve(context.Background(), e.sale, []seckill.Buy{{UserID: user, Qty: qty, RequestID: request}})
	if err != nil {
		t.Fatal(err)
	}
	return d.Answers[0]
}

func (e *env) sold(t *testing.T) int64 {
	t.Helper()
	st, err := e.inv.Stock(context.Background(), e.sale)
	if err != nil {
		t.Fatal(err)
	}
	return st.Sold
}

// charges counts the charge movements of a wallet's group outbox.
func (e *env) charges(t *testing.T, user string) int {
	t.Helper()
	es, err := e.fw.Outbox(context.Background(), e.fw.Group(seckill.WalletOf(user)))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, en := range es {
		m, err := en.Movement()
		if err != nil {
			t.Fatal(err)
		}
		if m.Side == seckill.WalletOf(user) && m.Transfers[0].Kind == seckill.TransferCharge {
			n++
		}
	}
	return n
}

// hold makes the hold a buy's first step makes, as if its process died
// right after: deadline is the hold's.
func (e *env) hold(t *testing.T, user, request, order string, deadline time.Time) {
	t.Helper()
	m, _ := seckill.ChargeMovement(seckill.Order{ID: order, UserID: user, AmountCents: price}, 7, 300, time.Now())
	got, _, err := e.fw.Hold(context.Background(), seckill.HoldID(e.sale, user, request), m, deadline, request)
	if err != nil || got != order {
		t.Fatalf("hold: %q %v", got, err)
	}
}

// stockStep is a buy's second step carrying its hold, alone.
func (e *env) stockStep(t *testing.T, user, request, order string, deadline time.Time) seckill.Answer {
	t.Helper()
	d, err := e.inv.Reserve(context.Background(), e.sale, []seckill.Buy{{UserID: user, Qty: 1, RequestID: request, OrderID: order,
		Hold: &seckill.Hold{Amount: price, Deadline: deadline}}})
	if err != nil {
		t.Fatal(err)
	}
	return d.Answers[0]
}

// later moves the sweep past every deadline of the test.
func (e *env) later() { e.sweep.SetClock(func() time.Time { return time.Now().Add(time.Hour) }) }

// Held, then accepted: posted. The wallet pays once, nothing stays held,
// the charge (to the merchant, the fee to the platform) is in the
// wallet group's outbox once, and a retry answers the same order.
func TestHeldThenPosted(t *testing.T) {
	e := newEnv(t, 10, 2)
	e.fund(t, "u1", 2_000)
	a := e.buy(t, "u1", "req-posted", 1)
	if a.Code != seckill.CodeOK || a.ChargeID != seckill.ChargeID(a.OrderID) {
		t.Fatalf("buy: %+v", a)
	}
	if b, h := e.money(t, "u1"); b != 1_500 || h != 0 {
		t.Errorf("wallet %d, held %d; want 1500 and 0", b, h)
	}
	if made, err := e.fw.Made(context.Background(), seckill.WalletOf("u1"), a.ChargeID); err != nil || !made {
		t.Errorf("the charge is not made: %v %v", made, err)
	}
	again := e.buy(t, "u1", "req-posted", 1)
	if again.OrderID != a.OrderID || again.Code != seckill.CodeOK {
		t.Errorf("retry: %+v, want order %s", again, a.OrderID)
	}
	if b, _ := e.money(t, "u1"); b != 1_500 || e.charges(t, "u1") != 1 || e.sold(t) != 1 {
		t.Errorf("after the retry: wallet %d, %d charges, %d sold; want 1500, 1, 1", b, e.charges(t, "u1"), e.sold(t))
	}
}

// Held, then refused for good (sold out): voided. The money comes back,
// the request's hold can never be made again, and a retry answers the
// stored refusal, charging nothing.
func TestHeldThenVoided(t *testing.T) {
	e := newEnv(t, 1, 1)
	e.fund(t, "u1", price)
	e.fund(t, "u2", price)
	if a := e.buy(t, "u1", "req-first", 1); a.Code != seckill.CodeOK {
		t.Fatalf("first buy: %+v", a)
	}
	if a := e.buy(t, "u2", "req-late", 1); a.Code != seckill.CodeSoldOut {
		t.Fatalf("second buy: %+v", a)
	}
	if b, h := e.money(t, "u2"); b != price || h != 0 {
		t.Errorf("the refused buyer holds %d, %d held; want %d and 0", b, h, price)
	}
	m, _ := seckill.ChargeMovement(seckill.Order{ID: seckill.NewOrderID(e.sale), UserID: "u2", AmountCents: price}, 7, 300, time.Now())
	if _, _, err := e.fw.Hold(context.Background(), seckill.HoldID(e.sale, "u2", "req-late"), m, time.Now().Add(time.Minute), "req-late"); !errors.Is(err, seckill.ErrHoldExpired) {
		t.Errorf("holding a voided request again: %v, want hold_expired", err)
	}
	if a := e.buy(t, "u2", "req-late", 1); a.Code != seckill.CodeSoldOut {
		t.Errorf("retry: %+v", a)
	}
	if b, _ := e.money(t, "u2"); b != price || e.charges(t, "u2") != 0 {
		t.Errorf("after the retry the refused buyer holds %d with %d charges", b, e.charges(t, "u2"))
	}
}

// A wallet short of the price takes no stock and keeps nothing held; the
// refusal is not kept, so the same request succeeds after a top-up.
func TestShortWalletTakesNoStock(t *testing.T) {
	e := newEnv(t, 5, 1)
	e.fund(t, "u1", price-1)
	if a := e.buy(t, "u1", "req-short", 1); a.Code != seckill.CodeInsufficientFunds {
		t.Fatalf("buy: %+v", a)
	}
	if b, h := e.money(t, "u1"); b != price-1 || h != 0 || e.sold(t) != 0 {
		t.Errorf("wallet %d, held %d, sold %d", b, h, e.sold(t))
	}
	e.fund(t, "u1", 1)
	if a := e.buy(t, "u1", "req-short", 1); a.Code != seckill.CodeOK {
		t.Errorf("after a top-up: %+v", a)
	}
}

// A crash between the hold and the stock step: the sweep finds the hold
// past its deadline, bars its request on the sale's side and voids it.
// A stock step arriving late (hanging) answers the barred request's
// refusal and takes nothing.
func TestCrashBeforeStockStep(t *testing.T) {
	e := newEnv(t, 5, 1)
	e.fund(t, "u1", price)
	order, deadline := seckill.NewOrderID(e.sale), time.Now().Add(time.Minute)
	e.hold(t, "u1", "req-crash", order, deadline)
	if b, h := e.money(t, "u1"); b != 0 || h != price {
		t.Fatalf("while held: wallet %d, held %d", b, h)
	}
	if n, err := e.sweep.Sweep(context.Background()); err != nil || n != 0 {
		t.Fatalf("a sweep before the deadline settled %d (%v)", n, err)
	}
	e.later()
	if n, err := e.sweep.Sweep(context.Background()); err != nil || n != 1 {
		t.Fatalf("sweep: %d %v", n, err)
	}
	if b, h := e.money(t, "u1"); b != price || h != 0 {
		t.Errorf("after the sweep: wallet %d, held %d", b, h)
	}
	if a := e.stockStep(t, "u1", "req-crash", order, deadline); a.Code != seckill.CodeHoldExpired || e.sold(t) != 0 {
		t.Errorf("the late stock step answered %+v, %d sold", a, e.sold(t))
	}
	if a := e.buy(t, "u1", "req-crash", 1); a.Code != seckill.CodeHoldExpired {
		t.Errorf("retry: %+v", a)
	}
	if b, _ := e.money(t, "u1"); b != price || e.charges(t, "u1") != 0 {
		t.Errorf("the buyer holds %d with %d charges", b, e.charges(t, "u1"))
	}
}

// A crash between the stock step and the post: the order exists, so the
// sweep (or the order consumer, from the order's event) posts the hold,
// once, however often both ask.
func TestCrashBeforePost(t *testing.T) {
	e := newEnv(t, 5, 1)
	e.fund(t, "u1", 2*price)
	order, deadline := seckill.NewOrderID(e.sale), time.Now().Add(time.Minute)
	e.hold(t, "u1", "req-post", order, deadline)
	if a := e.stockStep(t, "u1", "req-post", order, deadline); a.Code != seckill.CodeOK || a.OrderID != order {
		t.Fatalf("stock step: %+v", a)
	}
	e.later()
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			if _, err := e.sweep.Sweep(context.Background()); err != nil {
				t.Error(err)
			}
		})
		wg.Go(func() {
			if _, err := e.fw.Post(context.Background(), seckill.WalletOf("u1"), seckill.HoldID(e.sale, "u1", "req-post"), seckill.ChargeID(order)); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if b, h := e.money(t, "u1"); b != price || h != 0 || e.charges(t, "u1") != 1 {
		t.Errorf("wallet %d, held %d, %d charges; want %d, 0, 1", b, h, e.charges(t, "u1"), price)
	}
	if _, err := e.fw.Void(context.Background(), seckill.WalletOf("u1"), seckill.HoldID(e.sale, "u1", "req-post")); !errors.Is(err, seckill.ErrOrderPaid) {
		t.Errorf("voiding a posted hold: %v, want order_paid", err)
	}
}

// A stock step after its hold's deadline refuses it, for good (every
// attempt shares the hold and its deadline): a retry answers the same
// refusal, and the checkout gives the money back at once.
func TestStockStepPastDeadline(t *testing.T) {
	e := newEnv(t, 5, 1)
	e.fund(t, "u1", price)
	order, deadline := seckill.NewOrderID(e.sale), time.Now().Add(-time.Second)
	e.hold(t, "u1", "req-late", order, deadline)
	if a := e.stockStep(t, "u1", "req-late", order, deadline); a.Code != seckill.CodeHoldExpired || e.sold(t) != 0 {
		t.Fatalf("stock step past the deadline: %+v, %d sold", a, e.sold(t))
	}
	for range 2 {
		if a := e.buy(t, "u1", "req-late", 1); a.Code != seckill.CodeHoldExpired {
			t.Errorf("retry: %+v, want hold_expired", a)
		}
	}
	if b, h := e.money(t, "u1"); b != price || h != 0 || e.sold(t) != 0 {
		t.Errorf("wallet %d, held %d, sold %d", b, h, e.sold(t))
	}
}

// A void that finds no hold (null compensation) bars it: a hold arriving
// later is refused and nothing is posted.
func TestVoidBeforeHold(t *testing.T) {
	e := newEnv(t, 5, 1)
	e.fund(t, "u1", price)
	id := seckill.HoldID(e.sale, "u1", "req-null")
	if voided, err := e.fw.Void(context.Background(), seckill.WalletOf("u1"), id); err != nil || voided {
		t.Fatalf("void before any hold: %v %v", voided, err)
	}
	m, _ := seckill.ChargeMovement(seckill.Order{ID: seckill.NewOrderID(e.sale), UserID: "u1", AmountCents: price}, 7, 300, time.Now())
	if _, _, err := e.fw.Hold(context.Background(), id, m, time.Now().Add(time.Minute), "req-null"); !errors.Is(err, seckill.ErrHoldExpired) {
		t.Errorf("a hold after its void: %v, want hold_expired", err)
	}
	if _, err := e.fw.Post(context.Background(), seckill.WalletOf("u1"), id, m.ID); !errors.Is(err, seckill.ErrOrderCancelled) {
		t.Errorf("posting a void: %v, want order_cancelled", err)
	}
	if b, h := e.money(t, "u1"); b != price || h != 0 {
		t.Errorf("wallet %d, held %d", b, h)
	}
}

// Attempts at one request at once share its hold and its order: the
// wallet, funded for one unit, pays once and every attempt gets the order.
func TestAttemptsShareOneHold(t *testing.T) {
	e := newEnv(t, 5, 1)
	e.fund(t, "u1", price)
	answers := make([]seckill.Answer, 40)
	var wg sync.WaitGroup
	for i := range answers {
		wg.Go(func() { answers[i] = e.buy(t, "u1", "req-shared", 1) })
	}
	wg.Wait()
	for _, a := range answers {
		if a.Code != seckill.CodeOK || a.OrderID != answers[0].OrderID {
			t.Errorf("an attempt answered %+v, the first %+v", a, answers[0])
		}
	}
	if b, h := e.money(t, "u1"); b != 0 || h != 0 || e.charges(t, "u1") != 1 || e.sold(t) != 1 {
		t.Errorf("wallet %d, held %d, %d charges, %d sold", b, h, e.charges(t, "u1"), e.sold(t))
	}
}

// A buy refused by the sale's window (paused here) holds no money at all.
func TestPausedHoldsNothing(t *testing.T) {
	e := newEnv(t, 5, 1)
	e.fund(t, "u1", price)
	if _, err := e.inv.SetStatus(context.Background(), e.sale, seckill.ActionPause); err != nil {
		t.Fatal(err)
	}
	if a := e.buy(t, "u1", "req-paused", 1); a.Code != seckill.CodePaused {
		t.Fatalf("buy: %+v", a)
	}
	if b, h := e.money(t, "u1"); b != price || h != 0 {
		t.Errorf("wallet %d, held %d after a refusal by the window; want %d and 0", b, h, price)
	}
}

// stale are a sale's settings as read before a change: the rules' cache.
type stale struct{ st seckill.Stock }

func (s stale) Rules(context.Context, int64) (seckill.Stock, error) { return s.st, nil }

// A refusal for the moment that the checkout did not foresee (its rules a
// moment behind the pause) leaves the hold: another attempt sharing it
// may still be accepted. The sweep gives it back.
func TestPassingRefusalLeavesTheHoldToTheSweep(t *testing.T) {
	e := newEnv(t, 5, 1)
	e.fund(t, "u1", price)
	before, err := e.inv.Stock(context.Background(), e.sale)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.inv.SetStatus(context.Background(), e.sale, seckill.ActionPause); err != nil {
		t.Fatal(err)
	}
	chk := checkout.New(e.inv, e.fw, e.inv, stale{before}, checkout.Config{HoldFor: time.Minute, FeeBps: 300})
	d, err := chk.Reserve(context.Background(), e.sale, []seckill.Buy{{UserID: "u1", Qty: 1, RequestID: "req-paused"}})
	if err != nil || d.Answers[0].Code != seckill.CodePaused {
		t.Fatalf("buy: %+v %v", d.Answers, err)
	}
	if _, h := e.money(t, "u1"); h != price {
		t.Errorf("held %d after a passing refusal, want %d", h, price)
	}
	e.later()
	if n, err := e.sweep.Sweep(context.Background()); err != nil || n != 1 {
		t.Fatalf("sweep: %d %v", n, err)
	}
	if b, h := e.money(t, "u1"); b != price || h != 0 {
		t.Errorf("after the sweep: wallet %d, held %d", b, h)
	}
}

// A stock step without a hold (the checkout expected a refusal needing no
// wallet, and the stock had more) is never accepted and not kept: the
// retry, with its hold, buys.
func TestStockStepWithoutHold(t *testing.T) {
	e := newEnv(t, 5, 1)
	e.fund(t, "u1", price)
	d, err := e.inv.Reserve(context.Background(), e.sale, []seckill.Buy{{UserID: "u1", Qty: 1, RequestID: "req-bare"}})
	if err != nil || d.Answers[0].Code != seckill.CodeUnavailable || e.sold(t) != 0 {
		t.Fatalf("a stock step without its hold: %+v %v, %d sold", d.Answers, err, e.sold(t))
	}
	if a := e.buy(t, "u1", "req-bare", 1); a.Code != seckill.CodeOK {
		t.Errorf("retry with its hold: %+v", a)
	}
	if b, h := e.money(t, "u1"); b != 0 || h != 0 || e.sold(t) != 1 {
		t.Errorf("wallet %d, held %d, sold %d", b, h, e.sold(t))
	}
}

// An order paid by POST /api/orders/{id}/pay before its hold was posted
// (the order's charge made by funds.lua, as a payment makes it): posting
// the hold then gives it back, so the buyer pays once.
func TestPostAfterAPaymentChargesOnce(t *testing.T) {
	e := newEnv(t, 5, 1)
	e.fund(t, "u1", 3*price)
	order, deadline := seckill.NewOrderID(e.sale), time.Now().Add(time.Minute)
	e.hold(t, "u1", "req-paid", order, deadline)
	if a := e.stockStep(t, "u1", "req-paid", order, deadline); a.Code != seckill.CodeOK {
		t.Fatalf("stock step: %+v", a)
	}
	m, _ := seckill.ChargeMovement(seckill.Order{ID: order, UserID: "u1", AmountCents: price}, 7, 300, time.Now())
	if _, made, err := e.fw.Move(context.Background(), m); err != nil || !made {
		t.Fatalf("the payment's charge: %v %v", made, err)
	}
	if _, err := e.fw.Post(context.Background(), seckill.WalletOf("u1"), seckill.HoldID(e.sale, "u1", "req-paid"), seckill.ChargeID(order)); err != nil {
		t.Fatal(err)
	}
	if b, h := e.money(t, "u1"); b != 2*price || h != 0 || e.charges(t, "u1") != 1 {
		t.Errorf("wallet %d, held %d, %d charges; want %d, 0, 1", b, h, e.charges(t, "u1"), 2*price)
	}
}

// A hold whose sale Redis no longer holds waits Orphaned past its
// deadline (an order accepted before the keys went may be on its way to
// the order consumer, which posts it), then it is voided.
func TestOrphanedHoldWaits(t *testing.T) {
	e := newEnv(t, 5, 1)
	e.fund(t, "u1", price)
	gone := nextSale.Add(1) // never warmed
	deadline := time.Now()
	m, _ := seckill.ChargeMovement(seckill.Order{ID: seckill.NewOrderID(gone), UserID: "u1", AmountCents: price}, 7, 300, time.Now())
	if _, _, err := e.fw.Hold(context.Background(), seckill.HoldID(gone, "u1", "req-gone"), m, deadline, "req-gone"); err != nil {
		t.Fatal(err)
	}
	e.sweep.SetClock(func() time.Time { return deadline.Add(e.sweep.Orphaned / 2) })
	if n, err := e.sweep.Sweep(context.Background()); err != nil || n != 0 {
		t.Fatalf("a sweep before the hold is orphaned settled %d (%v)", n, err)
	}
	if _, h := e.money(t, "u1"); h != price {
		t.Errorf("held %d before the hold is orphaned, want %d", h, price)
	}
	e.later()
	if n, err := e.sweep.Sweep(context.Background()); err != nil || n != 1 {
		t.Fatalf("sweep: %d %v", n, err)
	}
	if b, h := e.money(t, "u1"); b != price || h != 0 {
		t.Errorf("after the sweep: wallet %d, held %d", b, h)
	}
}
