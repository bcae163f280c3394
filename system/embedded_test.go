package system_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill"
	"github.com/seckill/seckill/audit"
	"github.com/seckill/seckill/orders"
	"github.com/seckill/seckill/payments"
	"github.com/seckill/seckill/system"
	"github.com/seckill/seckill/system/servertest"
)

// TestEmbeddedFundsSurviveRestart: an embedded system makes movements of
// money and is stopped at once, in serve's order (the relays drain the
// outboxes to the in-process bus, Drain waits for the bus, the worker
// finishes); started again on the same data directory, its new
// in-process Redis holds every account's balance as the old one did, by
// the SQLite ledger, which holds each movement, and the record of each
// movement made, so a retry moves nothing.
func TestEmbeddedFundsSurviveRestart(t *testing.T) {
	ctx := context.Background()
	cfg := servertest.Config(t, "SECKILL_EMBEDDED=true", "SECKILL_DATA_DIR="+t.TempDir())
	open := func() *system.System {
		t.Helper()
		sys, err := system.Open(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := sys.Prepare(ctx, true); err != nil {
			sys.Close()
			t.Fatal(err)
		}
		return sys
	}
	start := func(fn func(context.Context) error) (stop func()) {
		ctx, cancel := context.WithCancel(ctx)
		var wg sync.WaitGroup
		wg.Go(func() { _ = fn(ctx) })
		return func() { cancel(); wg.Wait() }
	}

	sys := open()
	stopRelays, stopWorker := start(sys.RunRelays), start(sys.RunConsumers)
	var made []seckill.Movement
	for u := range 20 {
		user := fmt.Sprint("emb-", u)
		made = append(made, seckill.CreditMovement(user, "r", 1_000, time.Now()))
		o := seckill.Order{ID: fmt.Sprint("emb-o-", u), UserID: user, Qty: 1, AmountCents: 400, UnitPriceCents: 400}
		c, _ := seckill.ChargeMovement(o, 1+int64(u%2), 250, time.Now())
		made = append(made, c)
	}
	for _, m := range made {
		if _, ok, err := sys.Funds.Move(ctx, m); err != nil || !ok {
			t.Fatalf("move %s: made %v, %v", m.ID, ok, err)
		}
	}
	// A charge made and cancelled: its void moves the money back, once.
	voided, _ := seckill.ChargeMovement(seckill.Order{ID: "emb-void", UserID: "emb-0", Qty: 1, AmountCents: 100, UnitPriceCents: 100},
		1, 250, time.Now())
	if _, ok, err := sys.Funds.Move(ctx, voided); err != nil || !ok {
		t.Fatalf("move %s: made %v, %v", voided.ID, ok, err)
	}
	if ok, err := sys.Funds.Cancel(ctx, voided.Side, voided.ID, time.Now()); err != nil || !ok {
		t.Fatalf("cancel %s: made %v, %v", voided.ID, ok, err)
	}
	made = append(made, voided, seckill.Reverse(voided, time.Now()))
	stopRelays()
	sys.Drain(ctx)
	stopWorker()
	before, err := sys.Funds.Balances(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sys.Close()

	sys = open()
	defer sys.Close()
	after, err := sys.Funds.Balances(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ledger, err := sys.Ledger.FundsBalances(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var n int
	if err := sys.DB.Get(&n, "SELECT COUNT(*) FROM transfers"); err != nil {
		t.Fatal(err)
	}
	transfers := 0
	for _, m := range made {
		transfers += len(m.Transfers)
	}
	if n != transfers {
		t.Errorf("the ledger holds %d transfers, %d were made", n, transfers)
	}
	var sum int64
	for a, b := range before {
		sum += b
		if after[a] != b || ledger[a] != b {
			t.Errorf("%s: %d before the restart, %d after, %d by the ledger", a, b, after[a], ledger[a])
		}
	}
	if sum != 0 || len(after) != len(before) || before[seckill.WalletOf("emb-0")] != 600 {
		t.Errorf("balances before %v, after %v", before, after)
	}
	// Their records came back with them: each movement retried is found
	// made and moves nothing (a payment paid before the restart is not
	// charged again).
	for _, m := range made[:len(made)-1] {
		if _, ok, err := sys.Funds.Move(ctx, m); err != nil || ok {
			t.Errorf("%s retried after the restart: made again %v, %v", m.ID, ok, err)
		}
	}
	if ok, err := sys.Funds.Cancel(ctx, voided.Side, voided.ID, time.Now()); err != nil || ok {
		t.Errorf("the cancel of %s retried after the restart: made again %v, %v", voided.ID, ok, err)
	}
	if again, err := sys.Funds.Balances(ctx); err != nil || again[seckill.WalletOf("emb-0")] != 600 {
		t.Errorf("balances after the retries: %v %v", again, err)
	}
}

// TestEmbeddedAnswersOnceInTheLedger: with no relay and no consumer
// running, an embedded system's movement of money is in the SQLite
// ledger when Move returns (the write-through, its durability fence). A
// movement made inside a ledger transaction (an audit row and its
// movement) is written in that transaction: rolled back, the ledger does
// not hold it, and the next movement of its group writes it after all,
// for it was made in Redis.
func TestEmbeddedAnswersOnceInTheLedger(t *testing.T) {
	ctx := context.Background()
	sys := openEmbedded(t)
	transfers := func() int {
		t.Helper()
		var n int
		if err := sys.DB.Get(&n, "SELECT COUNT(*) FROM transfers"); err != nil {
			t.Fatal(err)
		}
		return n
	}
	var wg sync.WaitGroup
	for u := range 50 { // at once: they share transactions
		wg.Go(func() {
			if _, ok, err := sys.Funds.Move(ctx, seckill.CreditMovement(fmt.Sprint("wt-", u), "first", 500, time.Now())); err != nil || !ok {
				t.Errorf("credit %d: made %v, %v", u, ok, err)
			}
		})
	}
	wg.Wait()
	if n := transfers(); n != 50 {
		t.Fatalf("the ledger holds %d transfers once 50 credits were answered", n)
	}

	rolledBack := errors.New("rolled back")
	err := sys.Ledger.InTx(ctx, func(ctx context.Context) error {
		if _, ok, err := sys.Funds.Move(ctx, seckill.CreditMovement("wt-0", "in-tx", 100, time.Now())); err != nil || !ok {
			t.Errorf("credit in a transaction: made %v, %v", ok, err)
		}
		return rolledBack
	})
	if !errors.Is(err, rolledBack) {
		t.Fatal(err)
	}
	if n := transfers(); n != 50 {
		t.Fatalf("the ledger holds %d transfers after a rolled back one, want 50", n)
	}
	if _, ok, err := sys.Funds.Move(ctx, seckill.CreditMovement("wt-0", "after", 100, time.Now())); err != nil || !ok {
		t.Fatalf("credit after: made %v, %v", ok, err)
	}
	if n := transfers(); n != 52 {
		t.Errorf("the ledger holds %d transfers, want 52: the one made in the rolled back transaction too", n)
	}
}

// TestEmbeddedCreditRetryKept: an operator's credit made in Redis whose
// ledger transaction rolled back (a commit that failed, a client gone) is
// in the ledger once its retry is answered, though the retry finds it
// made and writes no audit row of its own.
func TestEmbeddedCreditRetryKept(t *testing.T) {
	ctx := context.Background()
	sys := openEmbedded(t)
	svc := payments.New(payments.Deps{Wallets: sys.Funds, Ledger: sys.Ledger, Audit: audit.New(sys.Ledger, time.Now)},
		payments.Config{WalletMax: 1 << 40, Currency: "EUR"}, time.Now)
	op := seckill.WithActor(ctx, seckill.Actor{ID: "op", Role: seckill.RoleOperator})
	m := seckill.CreditMovement("u_retry", "retry-12345678", 500, time.Now())
	failed := errors.New("the commit failed")
	err := sys.Ledger.InTx(op, func(ctx context.Context) error {
		if _, _, err := sys.Funds.Move(ctx, m); err != nil {
			t.Fatal(err)
		}
		return failed
	})
	if !errors.Is(err, failed) {
		t.Fatal(err)
	}
	if _, err := svc.Credit(op, "u_retry", "retry-12345678", "retried", 500); err != nil {
		t.Fatalf("the retry: %v", err)
	}
	var n int
	if err := sys.DB.Get(&n, "SELECT COUNT(*) FROM transfers WHERE movement_id = ?", m.ID); err != nil || n != 1 {
		t.Errorf("the retry was answered; the ledger holds %d transfers of %s (%v)", n, m.ID, err)
	}
}

// TestEmbeddedRefusedBuyNotAnswered: a buy of a sale that Redis holds and
// the SQLite ledger does not (its creation's commit failed after the
// warm-up, say) is decided in Redis, but the ledger refuses its order: it
// is never answered 200, the retry neither, and the order consumer is
// told the refusal (and dead-letters the message) rather than follow it
// silently; the other buys of the round are kept.
func TestEmbeddedRefusedBuyNotAnswered(t *testing.T) {
	ctx := context.Background()
	sys := openEmbedded(t)
	now := time.Now()
	ghost := seckill.Sale{ID: 4242, Name: "ghost", Item: "x", Total: 10, PerUserLimit: 10, PriceCents: 100,
		StartsAt: now.Add(-time.Minute), EndsAt: now.Add(time.Hour), Status: seckill.StatusActive, Buckets: 1}
	if _, err := sys.Stock.Warm(ctx, ghost); err != nil {
		t.Fatal(err)
	}
	chain := sys.Stock.Keeping(sys.Stock)
	buy := []seckill.Buy{{UserID: "u_ghost", Qty: 1, RequestID: "ghost-req-1"}}
	for attempt := range 2 {
		if d, err := chain.Reserve(ctx, ghost.ID, buy); err == nil {
			t.Fatalf("attempt %d: answered %+v for an order the ledger refuses", attempt+1, d.Answers)
		}
	}
	var n int
	if err := sys.DB.Get(&n, "SELECT COUNT(*) FROM orders WHERE sale_id = ?", ghost.ID); err != nil || n != 0 {
		t.Errorf("%d orders of the ghost sale in the ledger (%v)", n, err)
	}
	parts, err := sys.Stock.Parts(ctx, ghost.ID)
	if err != nil {
		t.Fatal(err)
	}
	es, err := sys.Stock.OutboxAfter(ctx, parts[0], "", 10)
	if err != nil || len(es) != 1 {
		t.Fatalf("outbox: %d entries, %v", len(es), err)
	}
	evs, err := es[0].Events()
	if err != nil {
		t.Fatal(err)
	}
	o := evs[0].Order(time.Minute, now)
	if err := system.ConsumerLedger(sys).InsertOrders(ctx, []seckill.Order{o}); !orders.Refused(err) {
		t.Errorf("the consumer's write of the refused order: %v, want the ledger's refusal", err)
	}
}

// TestEmbeddedRebuiltOutboxWritten: a sale's keys rebuilt (the repair
// path deletes its outbox) start an outbox whose entry ids may be below
// the last one written (a clock stepped back): the write-through begins
// that outbox again and writes them.
func TestEmbeddedRebuiltOutboxWritten(t *testing.T) {
	ctx := context.Background()
	sys := openEmbedded(t)
	srv, err := sys.Server(prometheus.NewRegistry(), nil)
	if err != nil {
		t.Fatal(err)
	}
	sale := servertest.MustSale(t, srv, servertest.SaleSpec{Total: 10, Limit: 10, PriceCents: 100})
	d, err := sys.Stock.Keeping(sys.Stock).Reserve(ctx, sale.ID, []seckill.Buy{{UserID: "u_first", Qty: 1, RequestID: "first-req-1"}})
	if err != nil || d.Answers[0].Code != seckill.CodeOK {
		t.Fatalf("buy: %+v %v", d, err)
	}
	first, err := sys.Ledger.Order(ctx, d.Answers[0].OrderID)
	if err != nil {
		t.Fatal(err)
	}
	if err := sys.Stock.Rebuild(ctx, sale, 1, []seckill.Event{first.Event()}, nil); err != nil {
		t.Fatal(err)
	}
	parts, err := sys.Stock.Parts(ctx, sale.ID)
	if err != nil {
		t.Fatal(err)
	}
	// An entry older than the last written, as a clock stepped back
	// would make it.
	late := seckill.NewOrderID(sale.ID)
	line := fmt.Sprintf("%s|%d|u_late|1|100|late-req-1|%d", late, sale.ID, time.Now().UnixMilli())
	if err := sys.Redis.XAdd(ctx, &redis.XAddArgs{Stream: sys.Stock.Keys().Part(parts[0].Tag).Outbox(), ID: "1-1",
		Values: map[string]any{"e": line}}).Err(); err != nil {
		t.Fatal(err)
	}
	if err := sys.Stock.Durable(ctx, parts[0]); err != nil {
		t.Fatal(err)
	}
	if _, err := sys.Ledger.Order(ctx, late); err != nil {
		t.Errorf("the rebuilt outbox's entry once Durable returned: %v", err)
	}
}

// openEmbedded opens and prepares an embedded system on a data directory
// of the test's own, closed when the test ends.
func openEmbedded(t *testing.T) *system.System {
	t.Helper()
	ctx := context.Background()
	cfg := servertest.Config(t, "SECKILL_EMBEDDED=true", "SECKILL_DATA_DIR="+t.TempDir())
	sys, err := system.Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sys.Close)
	if err := sys.Prepare(ctx, true); err != nil {
		t.Fatal(err)
	}
	return sys
}
