package orders_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

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
		"abcdefg": false, strings.Repeat("x", 65): false, "abc defg": false, "abcd|efg": false, "abcdéfgh": false,
	} {
		if orders.ValidRequestID(id) != ok {
			t.Errorf("ValidRequestID(%q) = %v", id, !ok)
		}
	}
}

func TestSaleValidate(t *testing.T) {
	now := time.Now()
	good := orders.Sale{Name: "n", Item: "i", PriceCents: 0, Total: 10, PerUserLimit: 10, StartsAt: now, EndsAt: now.Add(time.Minute)}
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
	env := servertest.New(t)
	ctx := context.Background()
	sl := ledgerSale(t, env.Ledger)
	var os []orders.Order
	for i := range 5 {
		e := orders.Event{OrderID: orders.NewID(sl.ID), SaleID: sl.ID, UserID: "u", Qty: int64(i + 1), PriceCents: 100,
			RequestID: "request-" + string(rune('a'+i)), At: time.Now().UnixMilli()}
		os = append(os, e.Order(time.Minute, time.Now()))
	}
	for range 3 {
		if err := env.Ledger.InTx(ctx, func(tx *orders.Store) error { return tx.InsertOrders(ctx, os) }); err != nil {
			t.Fatal(err)
		}
	}
	led, err := env.Ledger.Ledger(ctx, sl.ID)
	if err != nil {
		t.Fatal(err)
	}
	if led.Orders[orders.StatusPending] != 5 || led.Sold() != 15 || led.Movements[orders.ReasonSale] != -15 || led.Available() != 35 {
		t.Errorf("after three inserts of the same batch: %+v", led)
	}
	if _, err := orders.Migrate(ctx, env.DB); err != nil {
		t.Errorf("migrating an up-to-date schema: %v", err)
	}
}

// TestPayCancelCompareAndSet races payment against cancellation on the same
// orders: each ends in exactly one state, and its loser gets its error.
func TestPayCancelCompareAndSet(t *testing.T) {
	env := servertest.New(t)
	ctx := context.Background()
	sl := ledgerSale(t, env.Ledger)
	now := time.Now()
	var os []orders.Order
	for i := range 40 {
		e := orders.Event{OrderID: orders.NewID(sl.ID), SaleID: sl.ID, UserID: "buyer", Qty: 1, PriceCents: 100,
			RequestID: "race-request-" + string(rune('A'+i)), At: now.UnixMilli()}
		os = append(os, e.Order(time.Hour, now))
	}
	if err := env.Ledger.InsertOrders(ctx, os); err != nil {
		t.Fatal(err)
	}
	for _, o := range os {
		var payErr, cancelErr error
		var wg sync.WaitGroup
		wg.Go(func() { _, payErr = env.Ledger.Pay(ctx, o.ID, "buyer", time.Now()) })
		wg.Go(func() { _, cancelErr = env.Ledger.Cancel(ctx, o.ID, time.Now()) })
		wg.Wait()
		final, err := env.Ledger.Order(ctx, o.ID)
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
	led, _ := env.Ledger.Ledger(ctx, sl.ID)
	if led.Movements[orders.ReasonCancel] != led.Units[orders.StatusCancelled] {
		t.Errorf("cancel movements %d for %d cancelled units", led.Movements[orders.ReasonCancel], led.Units[orders.StatusCancelled])
	}
	// Another user's order is unknown to them; an expired one is refused.
	if _, err := env.Ledger.Pay(ctx, os[0].ID, "someone-else", time.Now()); !errors.Is(err, orders.ErrNotFound) {
		t.Errorf("paying another user's order: %v", err)
	}
	late := orders.Event{OrderID: orders.NewID(sl.ID), SaleID: sl.ID, UserID: "buyer", Qty: 1, PriceCents: 1,
		RequestID: "late-request", At: now.Add(-2 * time.Hour).UnixMilli()}
	if err := env.Ledger.InsertOrders(ctx, []orders.Order{late.Order(time.Hour, now)}); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Ledger.Pay(ctx, late.OrderID, "buyer", time.Now()); !errors.Is(err, orders.ErrExpired) {
		t.Errorf("paying after the window: %v", err)
	}
}
