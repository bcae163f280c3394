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

// An order is its sale's stock movement (migration 00008): the sums come
// out the same across the upgrade, whatever sale rows an earlier release
// wrote before it or during it.
func TestOrderIsItsSaleMovementAcrossTheUpgrade(t *testing.T) {
	servertest.EachLedger(t, testOrderIsItsSaleMovement)
}

func testOrderIsItsSaleMovement(t *testing.T, db *sqlx.DB) {
	ctx := context.Background()
	ledger := orders.NewStore(db)
	sl := ledgerSale(t, ledger) // 50 units
	order := func(qty int64, rid string) seckill.Order {
		e := seckill.Event{OrderID: seckill.NewOrderID(sl.ID), SaleID: sl.ID, UserID: "u", Qty: qty, PriceCents: 100,
			RequestID: rid, At: time.Now().UnixMilli()}
		return e.Order(time.Minute, time.Now())
	}
	insert := func(os ...seckill.Order) {
		t.Helper()
		if err := ledger.InsertOrders(ctx, os); err != nil {
			t.Fatal(err)
		}
	}
	// An earlier release wrote a sale row beside each order (and no
	// charges: its orders are written as they are).
	oldStyle := func(o seckill.Order) {
		t.Helper()
		_, err := db.Exec(db.Rebind(`INSERT INTO orders (id, sale_id, user_id, request_id, qty, unit_price_cents, amount_cents,
			status, created_at, expires_at, persisted_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`),
			o.ID, o.SaleID, o.UserID, o.RequestID, o.Qty, o.UnitPriceCents, o.AmountCents, o.Status,
			o.CreatedAt.UTC(), o.ExpiresAt.UTC(), o.PersistedAt.UTC())
		if err != nil {
			t.Fatal(err)
		}
		_, err = db.Exec(db.Rebind(`INSERT INTO stock_movements (sale_id, order_id, delta, reason, created_at) VALUES (?, ?, ?, 'sale', ?)`),
			o.SaleID, o.ID, -o.Qty, o.CreatedAt.UTC())
		if err != nil {
			t.Fatal(err)
		}
	}
	// check compares the ledger's sums with sold and available, and counts
	// the sale rows; at a schema before 00008, the sum of every movement
	// (what an earlier release's Totals reads) must be available too.
	check := func(when string, sold, available, saleRows int64, before00008 bool) {
		t.Helper()
		led, err := ledger.Totals(ctx, sl.ID)
		if err != nil {
			t.Fatal(err)
		}
		var rows, sum int64
		if err := db.Get(&rows, db.Rebind(`SELECT COUNT(*) FROM stock_movements WHERE sale_id = ? AND reason = 'sale'`), sl.ID); err != nil {
			t.Fatal(err)
		}
		if err := db.Get(&sum, db.Rebind(`SELECT SUM(delta) FROM stock_movements WHERE sale_id = ?`), sl.ID); err != nil {
			t.Fatal(err)
		}
		if led.Sold() != sold || led.Available() != available || led.Available() != led.Total-led.Sold() || rows != saleRows {
			t.Errorf("%s: sold %d, available %d (total %d), %d sale rows; want %d, %d, %d rows",
				when, led.Sold(), led.Available(), led.Total, rows, sold, available, saleRows)
		}
		if before00008 && sum != available {
			t.Errorf("%s: the movements sum to %d, an earlier release would read that as available (%d)", when, sum, available)
		}
	}

	a, b, c := order(1, "r-a"), order(2, "r-b"), order(3, "r-c")
	insert(a, b, c)
	if _, err := ledger.Cancel(ctx, b.ID, time.Now()); err != nil {
		t.Fatal(err)
	}
	check("written as one row per order", 4, 46, 0, false)

	down := func() {
		t.Helper()
		if err := orders.MigrateDownTo(ctx, db, 7); err != nil {
			t.Fatal(err)
		}
	}
	down()
	check("schema back before 00008 (a sale row per order again)", 4, 46, 3, true)
	d := order(4, "r-d")
	oldStyle(d)
	check("an earlier release's worker at that schema", 8, 42, 4, true)

	if _, err := orders.Migrate(ctx, db); err != nil {
		t.Fatal(err)
	}
	check("migrated (the earlier sale rows kept, left out of the sums)", 8, 42, 4, false)
	e := order(5, "r-e")
	oldStyle(e) // an earlier release's worker still running
	insert(e)   // and its redelivery to a new one
	g := order(1, "r-g")
	insert(g)
	check("an earlier release's worker and this one's", 14, 36, 5, false)

	down() // with sale rows of its own to keep: it adds only the missing one
	check("back before 00008 again", 14, 36, 6, true)
	if _, err := orders.Migrate(ctx, db); err != nil {
		t.Fatal(err)
	}
	check("migrated again", 14, 36, 6, false)
}
