package orders_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/seckill/seckill"
	"github.com/seckill/seckill/orders"
	"github.com/seckill/seckill/system/servertest"
)

// TestMerchantsInTheLedger: on MySQL and SQLite alike, an email has one
// merchant; disabling moves the sessions' cut-off; a TOTP step is used
// once; a merchant's sales and the audit rows it owns are its own; the
// history counts the orders not cancelled.
func TestMerchantsInTheLedger(t *testing.T) {
	servertest.EachLedger(t, func(t *testing.T, db *sqlx.DB) {
		st := orders.NewStore(db)
		ctx := context.Background()
		now := time.Now().UTC().Truncate(time.Millisecond)
		m, err := st.CreateMerchant(ctx, seckill.Merchant{Email: "m@shop.example", Name: "M", PasswordHash: "h"}, now)
		if err != nil || m.ID == 0 {
			t.Fatalf("create: %+v %v", m, err)
		}
		if _, err := st.CreateMerchant(ctx, seckill.Merchant{Email: "m@shop.example", Name: "Again", PasswordHash: "h"}, now); !errors.Is(err, seckill.ErrEmailTaken) {
			t.Errorf("an email twice: %v", err)
		}
		off, err := st.SetMerchantDisabled(ctx, m.ID, true, now)
		if err != nil || !off.Disabled || off.SessionsAfter != now.UnixMilli() {
			t.Errorf("disable: %+v %v", off, err)
		}
		on, err := st.SetMerchantDisabled(ctx, m.ID, false, now.Add(time.Second))
		if got, _ := st.Merchant(ctx, m.ID); err != nil || on.Disabled || got.Disabled || got.SessionsAfter != now.UnixMilli() {
			t.Errorf("enable: %+v %+v %v (the cut-off stays)", on, got, err)
		}
		for i, want := range []bool{true, false, false, true} {
			step := []int64{100, 100, 99, 101}[i]
			if fresh, err := st.UseTOTPStep(ctx, m.ID, step); err != nil || fresh != want {
				t.Errorf("step %d: fresh %v (%v), want %v", step, fresh, err, want)
			}
		}
		actor := seckill.WithActor(ctx, seckill.Actor{ID: m.Email, Role: seckill.RoleMerchant, MerchantID: m.ID})
		mine, err := st.CreateSale(actor, seckill.Sale{Name: "n", Item: "i", PriceCents: 100, Total: 5, PerUserLimit: 1,
			StartsAt: now.Add(-time.Hour), EndsAt: now.Add(time.Hour), Status: seckill.StatusActive, MerchantID: m.ID}, now, noLoad)
		if err != nil {
			t.Fatal(err)
		}
		other := ledgerSale(t, st)
		sales, err := st.MerchantSales(ctx, m.ID, 10)
		if err != nil || len(sales) != 1 || sales[0].ID != mine.ID {
			t.Errorf("the merchant's sales: %+v %v (not %d)", sales, err, other.ID)
		}
		rows, err := st.AuditLog(ctx, seckill.AuditFilter{Owner: m.ID, Limit: 100})
		if err != nil || len(rows) != 4 { // create, disable, enable, the sale
			t.Errorf("the merchant's audit rows: %d %v", len(rows), err)
		}
		for _, r := range rows {
			if r.SaleID == other.ID {
				t.Errorf("another sale's row: %+v", r)
			}
		}
		// History: two orders, one cancelled.
		for i, status := range []string{"pending", "cancelled"} {
			_, err := db.Exec(`INSERT INTO orders (id, sale_id, user_id, request_id, qty, unit_price_cents, amount_cents, status, created_at, expires_at, persisted_at)
				VALUES (?, ?, 'u', ?, 2, 100, 200, ?, ?, ?, ?)`, "o"+status, mine.ID, "r"+status, status,
				now.Add(-30*time.Minute+time.Duration(i)*time.Minute), now.Add(time.Hour), now)
			if err != nil {
				t.Fatal(err)
			}
		}
		h, err := st.SoldHistory(ctx, mine.ID, now.Add(-time.Hour), now, 4)
		if err != nil || len(h) != 4 || h[0] != 0 || h[1] != 0 || h[2] != 2 || h[3] != 2 {
			t.Errorf("history %v %v, want [0 0 2 2]", h, err)
		}
	})
}
