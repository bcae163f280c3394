package system_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/seckill/seckill"
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
	cfg := servertest.Config(t, "SECKILL_EMBEDDED=true", "SECKILL_DATA_DIR="+t.TempDir())
	sys, err := system.Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer sys.Close()
	if err := sys.Prepare(ctx, true); err != nil {
		t.Fatal(err)
	}
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
	err = sys.Ledger.InTx(ctx, func(ctx context.Context) error {
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
