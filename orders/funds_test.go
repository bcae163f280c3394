package orders_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"

	"github.com/seckill/seckill"
	"github.com/seckill/seckill/orders"
	"github.com/seckill/seckill/system/servertest"
)

// TestFundsLedger: on MySQL and SQLite alike, a movement's transfers are
// written once however often they come; every account sums its entries
// and all of them add up to zero; a statement lists an account's
// transfers newest first with its balance after each, page by page.
func TestFundsLedger(t *testing.T) {
	servertest.EachLedger(t, func(t *testing.T, db *sqlx.DB) {
		ledger := orders.NewStore(db)
		ctx := context.Background()
		at := time.Now().UTC().Truncate(time.Millisecond)
		o := seckill.Order{ID: "order-1", UserID: "erin", AmountCents: 1000}
		charge, _ := seckill.ChargeMovement(o, 4, 300, at)
		ms := []seckill.Movement{
			seckill.TopupMovement("t1", "erin", 5000, at),
			charge,
			seckill.CreditMovement("erin", "goodwill-1", 200, at),
			seckill.RefundOf(charge, at),
		}
		for range 2 {
			if err := ledger.InsertMovements(ctx, ms, at); err != nil {
				t.Fatal(err)
			}
		}
		all, err := ledger.FundsBalances(ctx)
		if err != nil {
			t.Fatal(err)
		}
		want := map[seckill.FundsAccount]int64{
			seckill.WalletOf("erin"): 5200, seckill.MerchantAccountOf(4): 0, seckill.PlatformAccount: -200,
			seckill.ProviderAccount: -5000,
		}
		var sum int64
		for a, n := range all {
			sum += n
			if n != want[a] {
				t.Errorf("%s sums to %d, want %d", a, n, want[a])
			}
		}
		if sum != 0 {
			t.Errorf("the accounts add up to %d", sum)
		}
		lines, err := ledger.Statement(ctx, seckill.WalletOf("erin"), "", 3)
		if err != nil || len(lines) != 3 {
			t.Fatalf("statement: %+v %v", lines, err)
		}
		// Newest first: the refund's fee back (+30), the refund (+970), the credit (+200).
		if lines[0].BalanceAfter != 5200 || lines[1].BalanceAfter != 5170 || lines[2].BalanceAfter != 4200 ||
			lines[0].Kind != seckill.TransferFee || lines[1].Kind != seckill.TransferRefund || lines[2].Kind != seckill.TransferCredit {
			t.Errorf("statement's first page: %+v", lines)
		}
		more, err := ledger.Statement(ctx, seckill.WalletOf("erin"), lines[2].ID, 10)
		if err != nil || len(more) != 2 || more[0].Kind != seckill.TransferCharge || more[0].BalanceAfter != 4000 ||
			more[1].Kind != seckill.TransferTopup || more[1].BalanceAfter != 5000 {
			t.Errorf("statement's second page: %+v %v", more, err)
		}
		ts, err := ledger.OrderTransfers(ctx, "order-1")
		if err != nil || len(ts) != 4 {
			t.Errorf("the order's transfers: %+v %v", ts, err)
		}
	})
}

// TestChargeBeforeItsOrder: a payment is decided in Redis and may be made
// before its order reaches the ledger, so its charge may get there first.
// On MySQL and SQLite alike the order is written paid then, at its
// charge's time, and an order without a charge stays pending; on MySQL a
// charge and its order written at the same moment, 200 times over under
// each of repeatable read and read committed, always end paid (one
// transaction or the other sees the other's row), with no charge anomaly
// left.
func TestChargeBeforeItsOrder(t *testing.T) {
	servertest.EachLedger(t, func(t *testing.T, db *sqlx.DB) {
		ledger := orders.NewStore(db)
		ctx := context.Background()
		sl := ledgerSale(t, ledger)
		at := time.Now().UTC().Truncate(time.Millisecond)
		order := func(user string) seckill.Order {
			e := seckill.Event{OrderID: seckill.NewOrderID(sl.ID), SaleID: sl.ID, UserID: user, Qty: 1, PriceCents: 100,
				RequestID: "r-" + user, At: at.UnixMilli()}
			return e.Order(time.Hour, at)
		}
		charge := func(o seckill.Order) seckill.Movement {
			m, _ := seckill.ChargeMovement(o, 4, 300, at.Add(time.Second))
			return m
		}
		// retry runs a write again while it fails for a passing reason
		// (a deadlock broken, a lock wait), as the worker does.
		retry := func(write func() error) error {
			for {
				err := write()
				if !errors.Is(err, seckill.ErrUnavailable) {
					return err
				}
			}
		}

		paid, unpaid := order("first"), order("second")
		if err := ledger.InsertMovements(ctx, []seckill.Movement{charge(paid)}, at); err != nil {
			t.Fatal(err)
		}
		if err := ledger.InsertOrders(ctx, []seckill.Order{paid, unpaid}); err != nil {
			t.Fatal(err)
		}
		got, err := ledger.Order(ctx, paid.ID)
		if err != nil || got.Status != seckill.OrderPaid || got.ChargeID != seckill.ChargeID(paid.ID) ||
			got.PaidAt == nil || !got.PaidAt.Equal(at.Add(time.Second)) {
			t.Errorf("an order whose charge came first: %+v %v", got, err)
		}
		if got, err := ledger.Order(ctx, unpaid.ID); err != nil || got.Status != seckill.OrderPending {
			t.Errorf("an order without a charge: %+v %v", got, err)
		}

		if db.DriverName() == "sqlite" {
			return // one writer at a time: no two transactions overlap
		}
		// The race, under MariaDB's default (repeatable read) and under read
		// committed, where no gap lock holds back an insert: there only the
		// share lock of payCharged makes one transaction see the other.
		var name string
		if err := db.Get(&name, `SELECT DATABASE()`); err != nil {
			t.Fatal(err)
		}
		c, err := mysql.ParseDSN(servertest.Config(t).MySQL.DSN)
		if err != nil {
			t.Fatal(err)
		}
		c.DBName, c.Params = name, map[string]string{"tx_isolation": "'READ-COMMITTED'"}
		rc, err := orders.Open(ctx, c.FormatDSN())
		if err != nil {
			t.Fatal(err)
		}
		defer rc.Close()
		for _, run := range []struct {
			name   string
			ledger *orders.Store
		}{{"repeatable-read", ledger}, {"read-committed", orders.NewStore(rc)}} {
			var wg sync.WaitGroup
			errs := make(chan error, 400)
			for i := range 200 {
				o := order(fmt.Sprintf("%s-%d", run.name, i))
				wg.Go(func() {
					errs <- retry(func() error { return run.ledger.InsertMovements(ctx, []seckill.Movement{charge(o)}, at) })
				})
				wg.Go(func() { errs <- retry(func() error { return run.ledger.InsertOrders(ctx, []seckill.Order{o}) }) })
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				if err != nil {
					t.Fatal(err)
				}
			}
			var pending int
			if err := db.Get(&pending, `SELECT COUNT(*) FROM orders WHERE sale_id = ? AND user_id LIKE ? AND status <> 'paid'`,
				sl.ID, run.name+"-%"); err != nil {
				t.Fatal(err)
			}
			if pending > 0 {
				t.Errorf("%s: %d of 200 orders raced by their charges are not paid", run.name, pending)
			}

			// The interleaving a race seldom hits: the charge's transaction
			// has written it and not committed when the order's is written.
			// The order's waits for it (or, if it did not, missed it).
			o := order(run.name + "-held")
			done := make(chan error, 1)
			err := run.ledger.InTx(ctx, func(ctx context.Context) error {
				if err := run.ledger.InsertMovements(ctx, []seckill.Movement{charge(o)}, at); err != nil {
					return err
				}
				go func() { done <- run.ledger.InsertOrders(context.Background(), []seckill.Order{o}) }()
				// Commit once the order's statement has waited in the
				// server for 100 ms (it takes well under a millisecond when
				// nothing holds it), or the order's transaction is done.
				// Not t.Fatal in here: it would leave this transaction open.
				for end := time.Now().Add(10 * time.Second); ; {
					select {
					case err := <-done:
						done <- err
						return nil
					default:
					}
					var running int
					err := db.Get(&running, `SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE DB = ? AND COMMAND = 'Query'
						AND TIME_MS >= 100 AND (INFO LIKE 'INSERT INTO orders%' OR INFO LIKE 'SELECT order_id, at FROM transfers%')`, name)
					if err != nil || running > 0 {
						return err
					}
					if time.Now().After(end) {
						return errors.New("the order's transaction neither waited nor finished in 10 s")
					}
					time.Sleep(2 * time.Millisecond) // the poll's interval
				}
			})
			if err != nil {
				t.Fatal(err)
			}
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			if got, err := run.ledger.Order(ctx, o.ID); err != nil || got.Status != seckill.OrderPaid {
				t.Errorf("%s: an order written while its charge's transaction was open: %s %v", run.name, got.Status, err)
			}
		}
		anomalies, err := ledger.ChargeAnomalies(ctx)
		if err != nil || len(anomalies) > 0 {
			t.Errorf("charge anomalies after the races: %+v %v", anomalies, err)
		}
	})
}
