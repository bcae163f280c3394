package bench

import (
	"context"
	"fmt"

	"github.com/seckill/seckill/inventory"
	"github.com/seckill/seckill/orders"
)

// coalesceCase measures buy decisions per second on one hot sale, Redis
// side, with the same client concurrency: every client sends one request
// at a time, either as its own EVALSHA or through the batcher, which
// gathers what arrives while a call is in flight.
func coalesceCase(ctx context.Context, e *Env, o Options) (Table, error) {
	const stock = 100_000_000
	srv, err := e.server(e.Config, nil)
	if err != nil {
		return Table{}, err
	}
	batcher := inventory.NewBatcher(e.Inv, e.Config.BatchMax)
	var calls, decided int64
	batcher.OnBatch = func(n int) { calls++; decided += int64(n) } // one runner per sale: no race
	contenders := []struct {
		name string
		via  inventory.Reserver
	}{
		{"one EVALSHA per request", e.Inv},
		{fmt.Sprintf("coalesced by the batcher (cap %d)", e.Config.BatchMax), batcher},
	}
	var rows [][]string
	var rates []float64
	for _, c := range contenders {
		sale, err := e.sale(ctx, srv, stock, 1, 100)
		if err != nil {
			return Table{}, err
		}
		t := &tally{}
		d, err := runClients(ctx, o.Clients, o.Duration, t, func(ctx context.Context, client int, stop func() bool, t *tally) error {
			for seq := 0; !stop(); seq++ {
				u := fmt.Sprintf("c%d-%d", client, seq)
				res, err := c.via.Reserve(ctx, sale.ID, []inventory.Request{{UserID: u, Qty: 1, RequestID: "bench-" + u, OrderID: orders.NewID(sale.ID)}})
				if err != nil {
					return err
				}
				t.attempts.Add(1)
				if res[0].Err == nil {
					t.ok.Add(1)
				}
			}
			return nil
		})
		if err != nil {
			return Table{}, fmt.Errorf("%s: %w", c.name, err)
		}
		st, err := e.Inv.Stock(ctx, sale.ID)
		if err != nil {
			return Table{}, err
		}
		verdict := "exact"
		if st.Sold != t.ok.Load() || st.Available != stock-t.ok.Load() {
			verdict = fmt.Sprintf("WRONG: sold %d for %d successes", st.Sold, t.ok.Load())
		}
		rate := float64(t.attempts.Load()) / d.Seconds()
		rates = append(rates, rate)
		rows = append(rows, []string{c.name, f0(rate), verdict, f2(ratio(rate, rates[0]))})
	}
	mean := ratio(float64(decided), float64(calls))
	return Table{
		Title:  fmt.Sprintf("Coalescing: one hot sale, %d clients each sending one buy at a time, %s each", o.Clients, o.Duration),
		Header: []string{"path", "decisions/s", "final stock", "× one per request"},
		Rows:   rows,
		Goals:  []Goal{{What: "coalesced ≥ 5× one EVALSHA per request", Got: ratio(rates[1], rates[0]), Want: 5}},
		Notes:  []string{fmt.Sprintf("the batcher made %d calls, %.1f requests per call on average", calls, mean)},
	}, nil
}
