package orders_test

import (
	"context"
	"testing"
	"time"

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
