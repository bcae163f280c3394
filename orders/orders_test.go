package orders_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/seckill/seckill/orders"
	"github.com/seckill/seckill/server/servertest"
)

func TestOrderIDs(t *testing.T) {
	seen := map[string]bool{}
	prev := ""
	for range 1000 {
		id := orders.NewID(42)
		if seen[id] || id <= prev {
			t.Fatalf("id %q repeated or not increasing after %q", id, prev)
		}
		seen[id], prev = true, id
		if got := orders.SaleOf(id); got != 42 {
			t.Fatalf("SaleOf(%q) = %d", id, got)
		}
	}
	for _, bad := range []string{"", "42", "-42", "01ARZ3NDEKTSV4RRFFQ69G5FAV-", "01ARZ3NDEKTSV4RRFFQ69G5FAV-0",
		"01ARZ3NDEKTSV4RRFFQ69G5FAV-x", "01ARZ3NDEKTSV4RRFFQ69G5FAV-007", "short-7", "../etc/passwd"} {
		if got := orders.SaleOf(bad); got != 0 {
			t.Errorf("SaleOf(%q) = %d, want 0", bad, got)
		}
	}
}

func TestValidRequestID(t *testing.T) {
	for id, ok := range map[string]bool{
		"abcdefgh": true, "A-b_C-9-": true, strings.Repeat("x", 64): true,
		"abcdefg": false, strings.Repeat("x", 65): false, "abcdefgh\n": false, "abcdefgh\x00": false, "abc defg": false, "abcd|efg": false, "abcdéfgh": false,
	} {
		if orders.ValidRequestID(id) != ok {
			t.Errorf("ValidRequestID(%q) = %v", id, !ok)
		}
	}
}

func TestSaleValidate(t *testing.T) {
	now := time.Now()
	good := orders.Sale{Name: "n", Item: "i", PriceCents: 0, Total: 10, PerUserLimit: 10, StartsAt: now, EndsAt: now.Add(time.Minute), Buckets: 1}
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		field string
		mod   func(*orders.Sale)
	}{
		{"name", func(s *orders.Sale) { s.Name = " " }},
		{"item", func(s *orders.Sale) { s.Item = strings.Repeat("é", 201) }},
		{"price_cents", func(s *orders.Sale) { s.PriceCents = -1 }},
		{"total", func(s *orders.Sale) { s.Total = orders.MaxTotal + 1 }},
		{"per_user_limit", func(s *orders.Sale) { s.PerUserLimit = 11 }},
		{"buckets", func(s *orders.Sale) { s.Buckets = 65 }},
		{"ends_at", func(s *orders.Sale) { s.EndsAt = s.StartsAt }},
	}
	for _, tc := range tests {
		s := good
		tc.mod(&s)
		var ve *orders.ValidationError
		if err := s.Validate(); !errors.As(err, &ve) || ve.Fields[0].Field != tc.field {
			t.Errorf("%s: %v", tc.field, err)
		}
	}
}

func TestEventValidate(t *testing.T) {
	good := orders.Event{OrderID: orders.NewID(3), SaleID: 3, UserID: "u1", Qty: 2, PriceCents: 5, RequestID: "request-1", At: 1}
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	for name, mod := range map[string]func(*orders.Event){
		"other sale":  func(e *orders.Event) { e.SaleID = 4 },
		"bad user":    func(e *orders.Event) { e.UserID = "a|b" },
		"bad request": func(e *orders.Event) { e.RequestID = "x" },
		"zero qty":    func(e *orders.Event) { e.Qty = 0 },
		"no time":     func(e *orders.Event) { e.At = 0 },
	} {
		e := good
		mod(&e)
		if e.Validate() == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	o := good.Order(time.Minute, time.Now())
	if o.AmountCents != 10 || o.Status != orders.StatusPending || o.ExpiresAt.Sub(o.CreatedAt) != time.Minute {
		t.Errorf("order from event: %+v", o)
	}
}

// ledgerSale creates a sale row directly in the ledger.
func ledgerSale(t *testing.T, st *orders.Store) orders.Sale {
	t.Helper()
	now := time.Now()
	sl, err := st.CreateSale(context.Background(), orders.Sale{Name: "n", Item: "i", PriceCents: 100, Total: 50,
		PerUserLimit: 5, StartsAt: now, EndsAt: now.Add(time.Hour)}, now)
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
	var os []orders.Order
	for i := range 5 {
		e := orders.Event{OrderID: orders.NewID(sl.ID), SaleID: sl.ID, UserID: "u", Qty: int64(i + 1), PriceCents: 100,
			RequestID: "request-" + string(rune('a'+i)), At: time.Now().UnixMilli()}
		os = append(os, e.Order(time.Minute, time.Now()))
	}
	// Three times in a row, and then concurrently, as redeliveries come.
	for range 3 {
		if err := ledger.InTx(ctx, func(tx *orders.Store) error { return tx.InsertOrders(ctx, os) }); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if err := ledger.InTx(ctx, func(tx *orders.Store) error { return tx.InsertOrders(ctx, os) }); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	led, err := ledger.Ledger(ctx, sl.ID)
	if err != nil {
		t.Fatal(err)
	}
	if led.Orders[orders.StatusPending] != 5 || led.Sold() != 15 || led.Movements[orders.ReasonSale] != -15 || led.Available() != 35 {
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
	bad := orders.Event{OrderID: orders.NewID(999999), SaleID: 999999, UserID: "u", Qty: 1, PriceCents: 1,
		RequestID: "unknown-sale", At: time.Now().UnixMilli()}
	err = ledger.InsertOrders(ctx, []orders.Order{bad.Order(time.Minute, time.Now())})
	if !orders.Refused(err) || orders.Transient(err) {
		t.Errorf("an order of an unknown sale: %v (refused %v, transient %v)", err, orders.Refused(err), orders.Transient(err))
	}
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
	var os []orders.Order
	for i := range 40 {
		e := orders.Event{OrderID: orders.NewID(sl.ID), SaleID: sl.ID, UserID: "buyer", Qty: 1, PriceCents: 100,
			RequestID: "race-request-" + string(rune('A'+i)), At: now.UnixMilli()}
		os = append(os, e.Order(time.Hour, now))
	}
	if err := ledger.InsertOrders(ctx, os); err != nil {
		t.Fatal(err)
	}
	for _, o := range os {
		var payErr, cancelErr error
		var wg sync.WaitGroup
		wg.Go(func() { _, payErr = ledger.Pay(ctx, o.ID, "buyer", time.Now()) })
		wg.Go(func() { _, cancelErr = ledger.Cancel(ctx, o.ID, time.Now()) })
		wg.Wait()
		final, err := ledger.Order(ctx, o.ID)
		if err != nil {
			t.Fatal(err)
		}
		switch final.Status {
		case orders.StatusPaid:
			if payErr != nil || !errors.Is(cancelErr, orders.ErrPaid) {
				t.Errorf("%s paid; pay %v, cancel %v", o.ID, payErr, cancelErr)
			}
		case orders.StatusCancelled:
			if cancelErr != nil || !errors.Is(payErr, orders.ErrCancelled) {
				t.Errorf("%s cancelled; pay %v, cancel %v", o.ID, payErr, cancelErr)
			}
		default:
			t.Errorf("%s ended %s", o.ID, final.Status)
		}
	}
	led, _ := ledger.Ledger(ctx, sl.ID)
	if led.Movements[orders.ReasonCancel] != led.Units[orders.StatusCancelled] {
		t.Errorf("cancel movements %d for %d cancelled units", led.Movements[orders.ReasonCancel], led.Units[orders.StatusCancelled])
	}
	// Another user's order is unknown to them; an expired one is refused.
	if _, err := ledger.Pay(ctx, os[0].ID, "someone-else", time.Now()); !errors.Is(err, orders.ErrNotFound) {
		t.Errorf("paying another user's order: %v", err)
	}
	late := orders.Event{OrderID: orders.NewID(sl.ID), SaleID: sl.ID, UserID: "buyer", Qty: 1, PriceCents: 1,
		RequestID: "late-request", At: now.Add(-2 * time.Hour).UnixMilli()}
	if err := ledger.InsertOrders(ctx, []orders.Order{late.Order(time.Hour, now)}); err != nil {
		t.Fatal(err)
	}
	if _, err := ledger.Pay(ctx, late.OrderID, "buyer", time.Now()); !errors.Is(err, orders.ErrExpired) {
		t.Errorf("paying after the window: %v", err)
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
			sl, err := ledger.CreateSale(ctx, orders.Sale{Name: "n", Item: "i", PriceCents: 1, Total: 10, PerUserLimit: 1,
				StartsAt: base.Add(-time.Hour), EndsAt: base.Add(end)}, base)
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, sl.ID)
		}
		sales, err := ledger.Sales(ctx, base.Add(100*time.Millisecond), 10)
		if err != nil || len(sales) != 2 || sales[0].ID != ids[2] || sales[1].ID != ids[1] {
			t.Errorf("sales ending after 12:00:00.1: %+v, %v", sales, err)
		}
		if got, err := ledger.SaleIDs(ctx, base.Add(600*time.Millisecond)); err != nil || len(got) != 1 || got[0] != ids[2] {
			t.Errorf("sale ids ending after 12:00:00.6: %v, %v", got, err)
		}
		err = ledger.InTx(ctx, func(tx *orders.Store) error {
			sl, err := tx.SaleForUpdate(ctx, ids[0])
			if err != nil {
				return err
			}
			sl.Name, sl.PriceCents = "renamed", 250
			if err := tx.UpdateSale(ctx, sl, base); err != nil {
				return err
			}
			if err := tx.Restock(ctx, sl.ID, 5, base); err != nil {
				return err
			}
			return tx.SetSaleStatus(ctx, sl.ID, "paused", base)
		})
		if err != nil {
			t.Fatal(err)
		}
		sl, err := ledger.Sale(ctx, ids[0])
		if err != nil || sl.Name != "renamed" || sl.PriceCents != 250 || sl.Total != 15 || sl.Status != "paused" ||
			!sl.EndsAt.Equal(base) {
			t.Errorf("sale after edits: %+v, %v", sl, err)
		}
		if _, err := ledger.Sale(ctx, 987654); !errors.Is(err, orders.ErrSaleNotFound) {
			t.Errorf("unknown sale: %v", err)
		}
		var os []orders.Order
		for i := range 3 {
			e := orders.Event{OrderID: orders.NewID(ids[0]), SaleID: ids[0], UserID: "reader", Qty: 1, PriceCents: 250,
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
		led, err := ledger.Ledger(ctx, ids[0])
		if err != nil || led.Total != 15 || led.Sold() != 3 || led.Available() != 12 || led.Movements[orders.ReasonRestock] != 5 {
			t.Errorf("ledger sums: %+v, %v", led, err)
		}
	})
}
