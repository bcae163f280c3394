package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/seckill/seckill"
	"github.com/seckill/seckill/internal/rdb"
	"github.com/seckill/seckill/inventory"
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
	var calls, decided int64
	batcher := inventory.NewBatcher(e.Inv, inventory.BatcherConfig{Max: e.Config.Buy.BatchMax, Lane: e.Inv.Lane,
		OnBatch: func(n int) { calls++; decided += int64(n) }}) // one runner per sale: no race
	contenders := []struct {
		name string
		via  inventory.Reserver
	}{
		{"one EVALSHA per request", e.Inv},
		{fmt.Sprintf("coalesced by the batcher (cap %d)", e.Config.Buy.BatchMax), batcher},
	}
	scenarios := []struct {
		name string
		sale func() (seckill.Sale, error)
	}{
		{"stock left", func() (seckill.Sale, error) { return e.sale(ctx, srv, 100_000_000, 1, 100) }},
		{"sold out", func() (seckill.Sale, error) { return e.soldOutSale(ctx, srv) }},
	}
	var rows [][]string
	var goals []Goal
	var notes []string
	for _, sc := range scenarios {
		var rates []float64
		calls, decided = 0, 0
		for _, c := range contenders {
			sale, err := sc.sale()
			if err != nil {
				return Table{}, err
			}
			m, err := decide(ctx, o, c.via, e.Inv, e.Redis, sale.ID)
			if err != nil {
				return Table{}, fmt.Errorf("%s, %s: %w", sc.name, c.name, err)
			}
			rate := float64(m.decisions) / m.took.Seconds()
			rates = append(rates, rate)
			rows = append(rows, []string{
				sc.name, c.name, f0(rate), f0(float64(m.accepted) / m.took.Seconds()),
				f2(ratio(float64(m.redisUS), float64(m.decisions))), m.verdict, f2(ratio(rate, rates[0])),
			})
		}
		goals = append(goals, Goal{What: sc.name + ": coalesced ≥ 5× one EVALSHA per request", Got: ratio(rates[1], rates[0]), Want: 5})
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

// decisions is what one contender of the coalescing case did.
type decisions struct {
	decisions, accepted int64
	took                time.Duration
	redisUS             int64  // Redis CPU spent meanwhile
	verdict             string // "exact" when the stock hash agrees with the answers
}

// decide runs o.Clients clients for o.Duration, each buying one unit of
// sale at a time through via, as a new user each time; inv and redis read
// the stock and Redis's CPU before and after.
func decide(ctx context.Context, o Options, via inventory.Reserver, inv *inventory.Store, redis rdb.Client, sale int64) (decisions, error) {
	before, err := inv.Stock(ctx, sale)
	if err != nil {
		return decisions{}, err
	}
	cpu0, err := redisCPU(ctx, redis)
	if err != nil {
		return decisions{}, err
	}
	t := &tally{}
	took, err := runClients(ctx, o.Clients, o.Duration, t, func(ctx context.Context, client int, stop func() bool, t *tally) error {
		for seq := 0; !stop(); seq++ {
			u := fmt.Sprintf("c%d-%d", client, seq)
			d, err := via.Reserve(ctx, sale, []seckill.Buy{{UserID: u, Qty: 1, RequestID: "bench-" + u, OrderID: seckill.NewOrderID(sale)}})
			if err != nil {
				return err
			}
			t.attempts.Add(1)
			if d.Answers[0].Code == seckill.CodeOK {
				t.ok.Add(1)
			}
		}
		return nil
	})
	if err != nil {
		return decisions{}, err
	}
	cpu1, err := redisCPU(ctx, redis)
	if err != nil {
		return decisions{}, err
	}
	after, err := inv.Stock(ctx, sale)
	if err != nil {
		return decisions{}, err
	}
	m := decisions{decisions: t.attempts.Load(), accepted: t.ok.Load(), took: took, redisUS: cpu1 - cpu0, verdict: "exact"}
	if sold := after.Sold - before.Sold; sold != m.accepted || after.Available != before.Available-m.accepted {
		m.verdict = fmt.Sprintf("WRONG: sold %d for %d successes", sold, m.accepted)
	}
	return m, nil
}

// redisCPU is the user+system CPU time of every Redis master so far, in
// microseconds.
func redisCPU(ctx context.Context, c rdb.Client) (int64, error) {
	cpu, err := rdb.CPUSeconds(ctx, c)
	var total float64
	for _, secs := range cpu {
		total += secs
	}
	return int64(total * 1e6), err
}
