package orders_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/seckill/seckill"
	"github.com/seckill/seckill/orders"
	"github.com/seckill/seckill/system/servertest"
)

// ledgerSale creates a sale row directly in the ledger.
func ledgerSale(t *testing.T, st *orders.Store) seckill.Sale {
	t.Helper()
	now := time.Now()
	return insertSale(t, st, seckill.Sale{Name: "n", Item: "i", PriceCents: 100, Total: 50,
		PerUserLimit: 5, StartsAt: now, EndsAt: now.Add(time.Hour), Status: seckill.StatusActive}, now)
}

// insertSale stores a sale with its initial movement, as package sales
// creates one.
func insertSale(t *testing.T, st *orders.Store, sl seckill.Sale, now time.Time) seckill.Sale {
	t.Helper()
	ctx := context.Background()
	err := st.InTx(ctx, func(ctx context.Context) error {
		var err error
		if sl, err = st.InsertSale(ctx, sl.WithDefaults(), now); err != nil {
			return err
		}
		return st.AddMovement(ctx, sl.ID, "", sl.Total, seckill.ReasonInitial, now)
	})
	if err != nil {
		t.Fatal(err)
	}
	return sl
}

func TestInsertOrdersIsIdempotent(t *testing.T) {
	servertest.EachLedger(t, testInsertOrdersIsIdempotent)
}

func testInsertOrdersIsIdempotent(t *testing.T, db *sqlx.DB) {
	ledger := orders.NewStore(db)
	ctx := context.Background()
	sl := ledgerSale(t, ledger)
	var os []seckill.Order
	for i := range 5 {
		e := seckill.Event{OrderID: seckill.NewOrderID(sl.ID), SaleID: sl.ID, UserID: "u", Qty: int64(i + 1), PriceCents: 100,
			RequestID: "request-" + string(rune('a'+i)), At: time.Now().UnixMilli()}
		os = append(os, e.Order(time.Minute, time.Now()))
	}
	// Three times in a row, and then concurrently, as redeliveries come.
	for range 3 {
		if err := ledger.InsertOrders(ctx, os); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if err := ledger.InsertOrders(ctx, os); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	led, err := ledger.Totals(ctx, sl.ID)
	if err != nil {
		t.Fatal(err)
	}
	if led.Orders[seckill.OrderPending] != 5 || led.Sold() != 15 || led.Movements[seckill.ReasonSale] != -15 || led.Available() != 35 {
		t.Errorf("after eleven inserts of the same batch: %+v", led)
	}
	got, err := ledger.Order(ctx, os[2].ID)
	if err != nil || got.Qty != 3 || got.AmountCents != 300 || !got.CreatedAt.Equal(os[2].CreatedAt.Truncate(time.Millisecond)) {
		t.Errorf("order read back: %+v, %v (want created %s)", got, err, os[2].CreatedAt)
	}
	if _, err := orders.Migrate(ctx, db); err != nil {
		t.Errorf("migrating an up-to-date schema: %v", err)
	}
	if err := orders.CheckSchema(ctx, db); err != nil {
		t.Errorf("schema check: %v", err)
	}
	// A row the ledger refuses for good (an unknown sale) is told apart from
	// a passing fault.
	bad := seckill.Event{OrderID: seckill.NewOrderID(999999), SaleID: 999999, UserID: "u", Qty: 1, PriceCents: 1,
		RequestID: "unknown-sale", At: time.Now().UnixMilli()}
	err = ledger.InsertOrders(ctx, []seckill.Order{bad.Order(time.Minute, time.Now())})
	if !orders.Refused(err) || orders.Transient(err) {
		t.Errorf("an order of an unknown sale: %v (refused %v, transient %v)", err, orders.Refused(err), orders.Transient(err))
	}
}

// payLocked pays an order as package sales does: its row locked, marked
// paid while pending.
func payLocked(ctx context.Context, ledger *orders.Store, id string) error {
	return ledger.InTx(ctx, func(ctx context.Context) error {
		o, err := ledger.OrderForUpdate(ctx, id)
		if err != nil {
			return err
		}
		if o.Status == seckill.OrderCancelled {
			return seckill.ErrOrderCancelled
		}
		_, err = ledger.SetPaid(ctx, id, "ch."+id, time.Now())
		return err
	})
}

// TestPayCancelCompareAndSet races payment against cancellation on the same
// orders: each ends in exactly one state, and its loser gets its error.
func TestPayCancelCompareAndSet(t *testing.T) {
	servertest.EachLedger(t, testPayCancelCompareAndSet)
}

func testPayCancelCompareAndSet(t *testing.T, db *sqlx.DB) {
	ledger := orders.NewStore(db)
	ctx := context.Background()
	sl := ledgerSale(t, ledger)
	now := time.Now()
	var os []seckill.Order
	for i := range 40 {
		e := seckill.Event{OrderID: seckill.NewOrderID(sl.ID), SaleID: sl.ID, UserID: "buyer", Qty: 1, PriceCents: 100,
			RequestID: "race-request-" + string(rune('A'+i)), At: now.UnixMilli()}
		os = append(os, e.Order(time.Hour, now))
	}
	if err := ledger.InsertOrders(ctx, os); err != nil {
		t.Fatal(err)
	}
	for _, o := range os {
		var payErr, cancelErr error
		var wg sync.WaitGroup
		wg.Go(func() { payErr = payLocked(ctx, ledger, o.ID) })
		wg.Go(func() { _, cancelErr = ledger.Cancel(ctx, o.ID, time.Now()) })
		wg.Wait()
		final, err := ledger.Order(ctx, o.ID)
		if err != nil {
			t.Fatal(err)
		}
		switch final.Status {
		case seckill.OrderPaid:
			if payErr != nil || !errors.Is(cancelErr, seckill.ErrOrderPaid) {
				t.Errorf("%s paid; pay %v, cancel %v", o.ID, payErr, cancelErr)
			}
		case seckill.OrderCancelled:
			if cancelErr != nil || !errors.Is(payErr, seckill.ErrOrderCancelled) {
				t.Errorf("%s cancelled; pay %v, cancel %v", o.ID, payErr, cancelErr)
			}
		default:
			t.Errorf("%s ended %s", o.ID, final.Status)
		}
	}
	led, _ := ledger.Totals(ctx, sl.ID)
	if led.Movements[seckill.ReasonCancel] != led.Units[seckill.OrderCancelled] {
		t.Errorf("cancel movements %d for %d cancelled units", led.Movements[seckill.ReasonCancel], led.Units[seckill.OrderCancelled])
	}
	// The status moves only forward: paid once, refunded once, never
	// back; the charge is kept.
	fresh := seckill.Event{OrderID: seckill.NewOrderID(sl.ID), SaleID: sl.ID, UserID: "buyer", Qty: 1, PriceCents: 100,
		RequestID: "paid-request", At: now.UnixMilli()}
	paid := fresh.Order(time.Hour, now)
	if err := ledger.InsertOrders(ctx, []seckill.Order{paid}); err != nil {
		t.Fatal(err)
	}
	if err := payLocked(ctx, ledger, paid.ID); err != nil {
		t.Fatal(err)
	}
	for i, want := range []bool{true, false} {
		if ok, err := ledger.SetRefunded(ctx, paid.ID, time.Now()); err != nil || ok != want {
			t.Errorf("refund %d of a paid order: %v %v", i, ok, err)
		}
	}
	if ok, err := ledger.SetPaid(ctx, paid.ID, "ch.again", time.Now()); err != nil || ok {
		t.Errorf("paying a refunded order: %v %v", ok, err)
	}
	if o, err := ledger.Order(ctx, paid.ID); err != nil || o.Status != seckill.OrderRefunded || o.RefundedAt == nil ||
		o.ChargeID != "ch."+paid.ID {
		t.Errorf("the refunded order: %+v %v", o, err)
	}
}

// TestLedgerQueries: listing by end time, a user's orders newest first,
// edits, restocks and status changes read back the same from both ledgers
// (SQLite keeps times as text: they must compare as times).
func TestLedgerQueries(t *testing.T) {
	servertest.EachLedger(t, func(t *testing.T, db *sqlx.DB) {
		ledger := orders.NewStore(db)
		ctx := context.Background()
		base := time.Date(2030, 5, 1, 12, 0, 0, 0, time.UTC)
		var ids []int64
		// Ends a second apart, one with milliseconds: 12:00:00.5 sorts
		// between 12:00:00 and 12:00:01.
		for _, end := range []time.Duration{0, 500 * time.Millisecond, time.Second} {
			sl := insertSale(t, ledger, seckill.Sale{Name: "n", Item: "i", PriceCents: 1, Total: 10, PerUserLimit: 1,
				StartsAt: base.Add(-time.Hour), EndsAt: base.Add(end), Status: seckill.StatusActive}, base)
			ids = append(ids, sl.ID)
		}
		sales, err := ledger.Sales(ctx, base.Add(100*time.Millisecond), 10)
		if err != nil || len(sales) != 2 || sales[0].ID != ids[2] || sales[1].ID != ids[1] {
			t.Errorf("sales ending after 12:00:00.1: %+v, %v", sales, err)
		}
		if got, err := ledger.SaleIDs(ctx, base.Add(600*time.Millisecond)); err != nil || len(got) != 1 || got[0] != ids[2] {
			t.Errorf("sale ids ending after 12:00:00.6: %v, %v", got, err)
		}
		// A change: the row locked, written, a restock movement; and one
		// that fails after its writes, which leaves the row as it was.
		change := func(edit func(*seckill.Sale), fail error) error {
			return ledger.InTx(ctx, func(ctx context.Context) error {
				sl, err := ledger.SaleForUpdate(ctx, ids[0])
				if err != nil {
					return err
				}
				before := sl.Total
				edit(&sl)
				if err := ledger.UpdateSale(ctx, sl, base); err != nil {
					return err
				}
				if err := ledger.AddMovement(ctx, sl.ID, "", sl.Total-before, seckill.ReasonRestock, base); err != nil {
					return err
				}
				return fail
			})
		}
		if err := change(func(sl *seckill.Sale) {
			sl.Name, sl.PriceCents, sl.Total, sl.Status = "renamed", 250, sl.Total+5, seckill.StatusPaused
		}, nil); err != nil {
			t.Fatalf("change: %v", err)
		}
		refused := errors.New("refused")
		if err := change(func(sl *seckill.Sale) { sl.Name, sl.Total = "x", sl.Total+1 }, refused); !errors.Is(err, refused) {
			t.Errorf("a refused change: %v", err)
		}
		sl, err := ledger.Sale(ctx, ids[0])
		if err != nil || sl.Name != "renamed" || sl.PriceCents != 250 || sl.Total != 15 || sl.Status != seckill.StatusPaused ||
			!sl.EndsAt.Equal(base) {
			t.Errorf("sale after edits: %+v, %v", sl, err)
		}
		if _, err := ledger.Sale(ctx, 987654); !errors.Is(err, seckill.ErrSaleNotFound) {
			t.Errorf("unknown sale: %v", err)
		}
		var os []seckill.Order
		for i := range 3 {
			e := seckill.Event{OrderID: seckill.NewOrderID(ids[0]), SaleID: ids[0], UserID: "reader", Qty: 1, PriceCents: 250,
				RequestID: fmt.Sprint("read-request-", i), At: base.Add(time.Duration(i) * time.Second).UnixMilli()}
			os = append(os, e.Order(time.Minute, base))
		}
		if err := ledger.InsertOrders(ctx, os); err != nil {
			t.Fatal(err)
		}
		mine, err := ledger.UserOrders(ctx, "reader", 10)
		if err != nil || len(mine) != 3 || mine[0].ID != os[2].ID || mine[2].ID != os[0].ID {
			t.Errorf("user's orders newest first: %+v, %v", mine, err)
		}
		led, err := ledger.Totals(ctx, ids[0])
		if err != nil || led.Total != 15 || led.Sold() != 3 || led.Available() != 12 || led.Movements[seckill.ReasonRestock] != 5 {
			t.Errorf("ledger sums: %+v, %v", led, err)
		}
	})
}

// TestTxRollsBack: what a transaction wrote is gone when it fails, on
// both ledgers (the application's change of a sale relies on it: Redis's
// step is its last, and a refusal there undoes the ledger's).
func TestTxRollsBack(t *testing.T) {
	servertest.EachLedger(t, func(t *testing.T, db *sqlx.DB) {
		ledger := orders.NewStore(db)
		ctx := context.Background()
		now := time.Now()
		var id int64
		err := ledger.InTx(ctx, func(ctx context.Context) error {
			sl, err := ledger.InsertSale(ctx, seckill.Sale{Name: "n", Item: "i", Total: 10, PerUserLimit: 1, StartsAt: now,
				EndsAt: now.Add(time.Hour), Status: seckill.StatusActive}.WithDefaults(), now)
			if err != nil {
				return err
			}
			id = sl.ID
			return errors.New("redis said no")
		})
		if err == nil || id == 0 {
			t.Fatalf("a failing transaction: %v (sale %d)", err, id)
		}
		if _, err := ledger.Sale(ctx, id); !errors.Is(err, seckill.ErrSaleNotFound) {
			t.Errorf("the sale is stored after all: %v", err)
		}
	})
}
