package sales_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/seckill/seckill"
	"github.com/seckill/seckill/system/servertest"
)

// TestChangesCommitTogether: a change to a sale is made in the ledger and
// in Redis together, or in neither: when Redis refuses (it lost the
// sale), the ledger keeps the sale as it was; a change the rules refuse
// touches neither.
func TestChangesCommitTogether(t *testing.T) {
	env := servertest.New(t)
	svc := env.Server(t, nil).Sales
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Second)
	v, err := svc.Create(ctx, seckill.Sale{Name: "n", Item: "i", PriceCents: 100, Total: 10, PerUserLimit: 2,
		StartsAt: now.Add(-time.Minute), EndsAt: now.Add(time.Hour)}.Input())
	if err != nil {
		t.Fatal(err)
	}
	id := v.Sale.ID
	if v, err = svc.Restock(ctx, id, 5); err != nil || v.Sale.Total != 15 || v.Stock.Total != 15 || v.Stock.Available != 15 {
		t.Fatalf("restock: %+v, %v", v, err)
	}
	check := func(what string, total int64, status seckill.Status) {
		t.Helper()
		sl, err := env.Ledger.Sale(ctx, id)
		if err != nil || sl.Total != total || sl.Status != status {
			t.Errorf("%s: the ledger holds %+v (%v), want total %d, %s", what, sl, err, total, status)
		}
		tot, err := env.Ledger.Totals(ctx, id)
		if err != nil || tot.Available() != total {
			t.Errorf("%s: the movements sum to %d (%v), want %d", what, tot.Available(), err, total)
		}
	}
	check("after the restock", 15, seckill.StatusActive)

	// The rules refuse: nothing changes anywhere.
	if _, err := svc.Restock(ctx, id, seckill.MaxTotal); seckill.CodeOf(err) != seckill.CodeInvalid {
		t.Errorf("restock over the bound: %v", err)
	}
	if _, err := svc.Update(ctx, id, seckill.SaleInput{SalePatch: seckill.SalePatch{PerUserLimit: ptr(int64(16))}}); seckill.CodeOf(err) != seckill.CodeInvalid {
		t.Errorf("a limit over the total: %v", err)
	}
	check("after refused changes", 15, seckill.StatusActive)

	// Redis lost the sale: a change that needs its stock there is refused,
	// and the ledger's half is rolled back.
	servertest.DeleteKeys(t, env.Redis, env.Config.Redis.Prefix+":*")
	if _, err := svc.Restock(ctx, id, 5); !errors.Is(err, seckill.ErrSaleNotFound) {
		t.Errorf("restock of a sale Redis lost: %v", err)
	}
	if _, err := svc.Act(ctx, id, seckill.ActionPause); !errors.Is(err, seckill.ErrSaleNotFound) {
		t.Errorf("pause of a sale Redis lost: %v", err)
	}
	check("after changes Redis refused", 15, seckill.StatusActive)

	// The audit log holds the changes made, in the name of the actor, and
	// none of the refused ones.
	rows, err := env.Ledger.AuditLog(ctx, seckill.AuditFilter{SaleID: id, Limit: 10})
	if err != nil || len(rows) != 2 || rows[0].Action != seckill.AuditSaleRestock || rows[1].Action != seckill.AuditSaleCreate ||
		rows[0].Actor != seckill.RoleSystem || string(rows[0].Before) != `{"total":10}` || string(rows[0].After) != `{"total":15}` {
		t.Errorf("audit rows: %+v %v", rows, err)
	}
}

// TestEndedIsFinal: an ended sale can be neither paused nor resumed, in
// the ledger as in Redis.
func TestEndedIsFinal(t *testing.T) {
	env := servertest.New(t)
	svc := env.Server(t, nil).Sales
	ctx := context.Background()
	sale := servertest.MustSale(t, env.Server(t, nil), servertest.SaleSpec{Total: 5})
	for _, step := range []struct {
		a    seckill.Action
		want seckill.Status
		err  error
	}{
		{seckill.ActionPause, seckill.StatusPaused, nil}, {seckill.ActionResume, seckill.StatusActive, nil},
		{seckill.ActionEnd, seckill.StatusEnded, nil}, {seckill.ActionPause, seckill.StatusEnded, seckill.ErrEnded},
		{seckill.ActionResume, seckill.StatusEnded, seckill.ErrEnded}, {seckill.ActionEnd, seckill.StatusEnded, nil},
	} {
		if _, err := svc.Act(ctx, sale.ID, step.a); !errors.Is(err, step.err) {
			t.Errorf("%s: %v, want %v", step.a, err, step.err)
		}
		sl, _ := env.Ledger.Sale(ctx, sale.ID)
		st, _ := env.Inventory.Stock(ctx, sale.ID)
		if sl.Status != step.want || st.Status != step.want {
			t.Errorf("after %s: ledger %s, Redis %s, want %s", step.a, sl.Status, st.Status, step.want)
		}
	}
}

func ptr[T any](v T) *T { return &v }
