package bench

import (
	"context"
	"fmt"
	"net"
	"sync"

	"github.com/seckill/seckill"
	"github.com/seckill/seckill/cmd/seckill/loadtest"
)

// httpCase measures the buy endpoint over real HTTP on one server (in this
// process, on loopback) with one load generator: a baseline route with the
// same middleware and validation that does no work, buy with stock left,
// and buy after the sale sold out. Limiters are off: this measures the
// path, not the limits.
func httpCase(ctx context.Context, e *Env, o Options) (Table, error) {
	cfg := e.Config
	cfg.Buy.RateGlobal, cfg.Buy.RatePerUser, cfg.Buy.RatePerIP = 0, 0, 0
	srv, err := e.server(cfg, nil)
	if err != nil {
		return Table{}, err
	}
	srv.AddBaselineRoute()
	open, err := e.sale(ctx, srv, seckill.MaxTotal, seckill.MaxTotal, 100)
	if err != nil {
		return Table{}, err
	}
	soldOut, err := e.soldOutSale(ctx, srv)
	if err != nil {
		return Table{}, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return Table{}, err
	}
	sctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { _ = srv.Run(sctx, ln) })
	defer func() { stop(); wg.Wait() }()

	type contender struct {
		name, path string
		sale       int64
		audit      bool
	}
	contenders := []contender{
		{"baseline: same middleware and validation, no work", "/api/sales/%d/baseline", open.ID, false},
		{"buy, stock available", "", open.ID, true},
		{"buy, sold out", "", soldOut.ID, true},
	}
	// The contenders take turns, in rounds, so that a change in the
	// machine's load in the middle of the case weighs on all of them.
	const rounds = 3
	runs := make([][]loadtest.Report, len(contenders))
	redisUS := make([]int64, len(contenders)) // Redis CPU spent during each contender's runs
	for range rounds {
		for i, c := range contenders {
			cpu0, err := redisCPU(ctx, e.Redis)
			if err != nil {
				return Table{}, err
			}
			rep, err := loadtest.Run(ctx, loadtest.Options{
				URL: "http://" + ln.Addr().String(), SaleID: c.sale, Path: c.path, NoAudit: !c.audit,
				JWTSecret: cfg.Sessions.JWTSecret, Users: 10_000, Qty: 1, Concurrency: o.Clients, Duration: o.Duration / rounds,
			})
			if err != nil {
				return Table{}, fmt.Errorf("%s: %w", c.name, err)
			}
			cpu1, err := redisCPU(ctx, e.Redis)
			if err != nil {
				return Table{}, err
			}
			redisUS[i] += cpu1 - cpu0
			runs[i] = append(runs[i], rep)
		}
	}
	var reps []loadtest.Report
	var rows [][]string
	for i, c := range contenders {
		rep := loadtest.Merge(runs[i])
		reps = append(reps, rep)
		rows = append(rows, []string{
			c.name, f0(rep.RPS), fmt.Sprintf("%.2f", rep.Latency.P50), fmt.Sprintf("%.2f", rep.Latency.P99),
			outcomeSummary(rep), f2(ratio(float64(redisUS[i]), float64(rep.Requests))), f2(ratio(rep.RPS, reps[0].RPS)),
		})
	}
	return Table{
		Title:  fmt.Sprintf("HTTP buy path: one server, one load generator, %d connections, %s each (%d interleaved rounds)", o.Clients, o.Duration, rounds),
		Header: []string{"route", "req/s", "p50 ms", "p99 ms", "answers", "Redis CPU µs/req", "× baseline"},
		Rows:   rows,
		Goals: []Goal{
			{What: "buy ≥ 0.7 of the baseline", Got: ratio(reps[1].RPS, reps[0].RPS), Want: 0.7},
			{What: "sold-out buy ≥ 0.9 of the baseline", Got: ratio(reps[2].RPS, reps[0].RPS), Want: 0.9},
		},
		Notes: []string{
			"server and load generator share this machine's CPUs (and Redis's); limiters off; JWT auth on; coalescing and the sold-out fast path as configured",
			"Redis CPU is its user+system time (INFO cpu) while the route ran, over the route's requests; it includes Redis's own background work (the baseline's row is nothing else), and Redis runs on the same two cores, so what the buy path spends there is taken from the server",
		},
	}, nil
}

func outcomeSummary(rep loadtest.Report) string {
	s := rep.OutcomeLine()
	if rep.Transport > 0 {
		s += fmt.Sprintf(", transport errors %d", rep.Transport)
	}
	return s
}
