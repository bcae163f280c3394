package bench

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/seckill/seckill/inventory"
	"github.com/seckill/seckill/orders"
)

// coalesceCase measures buy decisions per second on one hot sale, Redis
// side, with the same client concurrency: every client sends one request
// at a time, either as its own EVALSHA or through the batcher, which
// gathers what arrives while a call is in flight. It runs twice: while
// stock is left (every decision accepts and writes an order) and after the
// sale sold out (every decision refuses), which is where a flash sale's
// traffic mostly lands. Both run buy.lua: the sold-out fast path is not in
// front of the batcher here.
func coalesceCase(ctx context.Context, e *Env, o Options) (Table, error) {
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
	scenarios := []struct {
		name    string
		stock   int64 // units on sale
		soldOut bool  // sell the one unit before the run
	}{
		{"stock left", 100_000_000, false},
		{"sold out", 1, true},
	}
	var rows [][]string
	var goals []Goal
	var notes []string
	for _, sc := range scenarios {
		var rates []float64
		calls, decided = 0, 0
		for _, c := range contenders {
			sale, err := e.sale(ctx, srv, sc.stock, 1, 100)
			if err != nil {
				return Table{}, err
			}
			var sold int64
			if sc.soldOut {
				if _, err := e.Inv.Reserve(ctx, sale.ID, []inventory.Request{{
					UserID: "first", Qty: 1, RequestID: "bench-sold-out", OrderID: orders.NewID(sale.ID),
				}}); err != nil {
					return Table{}, err
				}
				sold = 1
			}
			t := &tally{}
			cpu0, err := redisCPU(ctx, e)
			if err != nil {
				return Table{}, err
			}
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
				return Table{}, fmt.Errorf("%s, %s: %w", sc.name, c.name, err)
			}
			cpu1, err := redisCPU(ctx, e)
			if err != nil {
				return Table{}, err
			}
			st, err := e.Inv.Stock(ctx, sale.ID)
			if err != nil {
				return Table{}, err
			}
			sold += t.ok.Load()
			verdict := "exact"
			if st.Sold != sold || st.Available != sc.stock-sold {
				verdict = fmt.Sprintf("WRONG: sold %d for %d successes", st.Sold, sold)
			}
			rate := float64(t.attempts.Load()) / d.Seconds()
			rates = append(rates, rate)
			perDecision := ratio(float64(cpu1-cpu0), float64(t.attempts.Load()))
			rows = append(rows, []string{sc.name, c.name, f0(rate), f0(float64(t.ok.Load()) / d.Seconds()), f2(perDecision), verdict, f2(ratio(rate, rates[0]))})
		}
		goals = append(goals, Goal{What: fmt.Sprintf("%s: coalesced ≥ 5× one EVALSHA per request", sc.name), Got: ratio(rates[1], rates[0]), Want: 5})
		notes = append(notes, fmt.Sprintf("%s: the batcher made %d calls, %.1f requests per call on average", sc.name, calls, ratio(float64(decided), float64(calls))))
	}
	return Table{
		Title:  fmt.Sprintf("Coalescing: one hot sale, %d clients each sending one buy at a time, %s each", o.Clients, o.Duration),
		Header: []string{"sale", "path", "decisions/s", "accepted/s", "Redis CPU µs/decision", "final stock", "× one per request"},
		Rows:   rows,
		Goals:  goals,
		Notes: append(notes,
			"Redis CPU is its user+system time (INFO cpu) over the decisions made; one EVALSHA per request keeps Redis busy, so coalescing cannot beat that contender by more than the ratio of Redis CPU per decision",
			"every decision runs buy.lua (the sold-out fast path is not in this case): stock left means each one records the request, the user's units, the order and its outbox event; sold out means each one records the refused request"),
	}, nil
}

// redisCPU is the Redis server's user+system CPU time so far, in
// microseconds.
func redisCPU(ctx context.Context, e *Env) (int64, error) {
	info, err := e.Redis.Info(ctx, "cpu").Result()
	if err != nil {
		return 0, err
	}
	var secs float64
	for _, line := range strings.Split(info, "\n") {
		name, v, _ := strings.Cut(strings.TrimSpace(line), ":")
		if name == "used_cpu_sys" || name == "used_cpu_user" {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return 0, fmt.Errorf("INFO cpu: %s: %w", line, err)
			}
			secs += f
		}
	}
	return int64(secs * 1e6), nil
}
