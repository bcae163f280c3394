package inventory_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/seckill/seckill"
	"github.com/seckill/seckill/inventory"
)

// countingPersister records what Keeping asked it to keep.
type countingPersister struct{ asked [][]string }

func (p *countingPersister) Parts(_ context.Context, _ []inventory.Part, _ []int, ids []string) error {
	p.asked = append(p.asked, ids)
	return nil
}

func (p *countingPersister) Reset(inventory.Part) {}

// TestKeepingWaitsForAcceptsOnly: a decision that accepted a buy waits
// for its order to be kept, a retry of it too (the first attempt's may not
// have been); one that only refused asks nothing, so a sold-out crowd
// never waits for the ledger.
func TestKeepingWaitsForAcceptsOnly(t *testing.T) {
	e := newEnv(t)
	p := &countingPersister{}
	e.inv.SetPersist(p)
	chain := e.inv.Keeping(e.inv)
	sale := e.mustSale(t, 1, 1, -time.Minute, time.Hour)
	ctx := context.Background()
	buy := func(user, req string) seckill.Answer {
		t.Helper()
		d, err := chain.Reserve(ctx, sale, []seckill.Buy{{UserID: user, Qty: 1, RequestID: req}})
		if err != nil {
			t.Fatal(err)
		}
		return d.Answers[0]
	}
	first := buy("u_keep1", "keep-req-1")
	if first.Code != seckill.CodeOK || len(p.asked) != 1 || !slices.Equal(p.asked[0], []string{first.OrderID}) {
		t.Fatalf("accepted %+v; kept %v", first, p.asked)
	}
	if again := buy("u_keep1", "keep-req-1"); again.OrderID != first.OrderID || len(p.asked) != 2 {
		t.Fatalf("retry %+v; kept %v", again, p.asked)
	}
	if late := buy("u_keep2", "keep-req-2"); late.Code != seckill.CodeSoldOut || len(p.asked) != 2 {
		t.Errorf("sold out %+v; kept %v, want nothing more", late, p.asked)
	}
}
