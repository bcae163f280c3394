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
// merchant; what changes of a merchant is written back; a TOTP step is
// used once; a merchant's sales and the audit rows it owns are its own;
// the history counts the orders not cancelled.
func TestMerchantsInTheLedger(t *testing.T) {
	servertest.EachLedger(t, func(t *testing.T, db *sqlx.DB) {
		st := orders.NewStore(db)
		ctx := context.Background()
		now := time.Now().UTC().Truncate(time.Millisecond)
		id, err := st.InsertMerchant(ctx, seckill.Merchant{Email: "m@shop.example", Name: "M", PasswordHash: "h", CreatedAt: now})
		if err != nil || id == 0 {
			t.Fatalf("create: %d %v", id, err)
		}
		if _, err := st.InsertMerchant(ctx, seckill.Merchant{Email: "m@shop.example", Name: "Again", PasswordHash: "h", CreatedAt: now}); !errors.Is(err, seckill.ErrEmailTaken) {
			t.Errorf("an email twice: %v", err)
		}
		m, err := st.MerchantByEmail(ctx, "m@shop.example")
		if err != nil || m.ID != id || m.Name != "M" || !m.CreatedAt.Equal(now) {
			t.Fatalf("by email: %+v %v", m, err)
		}
		err = st.InTx(ctx, func(ctx context.Context) error {
			locked, err := st.MerchantForUpdate(ctx, id)
			if err != nil {
				return err
			}
			locked.Disabled, locked.SessionsAfter, locked.TOTPSecret, locked.TOTPConfirmed = true, now.UnixMilli(), "S", true
			return st.UpdateMerchant(ctx, locked)
		})
		if got, _ := st.Merchant(ctx, id); err != nil || !got.Disabled || got.SessionsAfter != now.UnixMilli() ||
			got.TOTPSecret != "S" || !got.TOTPConfirmed || got.Name != "M" {
			t.Errorf("update: %+v %v", got, err)
		}
		if _, err := st.Merchant(ctx, id+1000); !errors.Is(err, seckill.ErrNoMerchant) {
			t.Errorf("unknown merchant: %v", err)
		}
		for i, want := range []bool{true, false, false, true} {
			step := []int64{100, 100, 99, 101}[i]
			if fresh, err := st.UseTOTPStep(ctx, m.ID, step); err != nil || fresh != want {
				t.Errorf("step %d: fresh %v (%v), want %v", step, fresh, err, want)
			}
		}
		mine := insertSale(t, st, seckill.Sale{Name: "n", Item: "i", PriceCents: 100, Total: 5, PerUserLimit: 1,
			StartsAt: now.Add(-time.Hour), EndsAt: now.Add(time.Hour), Status: seckill.StatusActive, MerchantID: m.ID}, now)
		for _, e := range []seckill.AuditEntry{{Action: seckill.AuditMerchantNew, Owner: m.ID}, {Action: seckill.AuditSaleCreate, SaleID: mine.ID, Owner: m.ID}} {
			e.At, e.Actor, e.Role = now, m.Email, seckill.RoleMerchant
			if err := st.AppendAudit(ctx, e); err != nil {
				t.Fatal(err)
			}
		}
		other := ledgerSale(t, st)
		sales, err := st.MerchantSales(ctx, m.ID, 10)
		if err != nil || len(sales) != 1 || sales[0].ID != mine.ID {
			t.Errorf("the merchant's sales: %+v %v (not %d)", sales, err, other.ID)
		}
		rows, err := st.AuditLog(ctx, seckill.AuditFilter{Owner: m.ID, Limit: 100})
		if err != nil || len(rows) != 2 {
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
