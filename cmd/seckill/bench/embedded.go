package bench

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/seckill/seckill/cmd/seckill/loadtest"
)

// embeddedCase runs the whole system as `seckill all` twice, on the local
// services (the baseline) and embedded (in-process Redis, SQLite ledger,
// in-process bus), each a child process under the same closed-loop load:
// time to ready, buys per second, latency, and how long after the last
// answer the ledger holds every accepted order.
func embeddedCase(ctx context.Context, e *Env, o Options) (Table, error) {
	cfg := e.Config
	cfg.Buy.RateGlobal, cfg.Buy.RatePerUser, cfg.Buy.RatePerIP = 0, 0, 0
	if cfg.Sessions.AdminToken == "" {
		cfg.Sessions.AdminToken = "bench-admin-" + cfg.Redis.Prefix
	}
	dir, err := os.MkdirTemp("", "seckill-bench-embedded")
	if err != nil {
		return Table{}, err
	}
	defer os.RemoveAll(dir)
	type contender struct {
		name   string
		binary string
		env    []string
		args   []string
	}
	contenders := []contender{
		{"seckill all on Redis, RabbitMQ, MySQL", o.Binary, nil, []string{"all"}},
		{"seckill all --embedded", o.Binary, []string{"SECKILL_DATA_DIR=" + dir}, []string{"all", "--embedded"}},
	}
	if o.Baseline != "" {
		base, err := os.MkdirTemp("", "seckill-bench-embedded-baseline")
		if err != nil {
			return Table{}, err
		}
		defer os.RemoveAll(base)
		contenders = append(contenders, contender{"seckill all --embedded, the baseline binary", o.Baseline,
			[]string{"SECKILL_DATA_DIR=" + base}, []string{"all", "--embedded"}})
	}
	const persistLimit = 10 * time.Second
	var rows [][]string
	var reps []loadtest.Report
	var ready []time.Duration
	for _, c := range contenders {
		child, err := Start(ctx, c.binary, cfg, c.env, c.args...)
		if err != nil {
			return Table{}, err
		}
		cpu := child.CPU()
		rep, err := loadtest.Run(ctx, loadtest.Options{
			URL: "http://" + child.Addr, CreateSale: "total=100000000,limit=1000,price=100,start=0s,duration=1h",
			AdminToken: cfg.Sessions.AdminToken, JWTSecret: cfg.Sessions.JWTSecret, Users: 20_000, Qty: 1,
			Concurrency: o.Clients, Duration: o.Duration, WaitPersist: persistLimit,
		})
		cpu = child.CPU() - cpu
		child.Stop()
		if err != nil {
			return Table{}, fmt.Errorf("%s: %w", c.name, err)
		}
		reps, ready = append(reps, rep), append(ready, child.Ready)
		accepted := fmt.Sprint(rep.Accepted)
		if !rep.Audit.Passed {
			accepted = fmt.Sprintf("WRONG: audit failed: %v", rep.Audit.Failures)
		}
		rows = append(rows, []string{
			c.name, ms(child.Ready), f0(rep.RPS), fmt.Sprintf("%.2f", rep.Latency.P50), fmt.Sprintf("%.2f", rep.Latency.P99),
			accepted, fmt.Sprintf("%.2f", rep.PersistSeconds), f2(ratio(rep.RPS, reps[0].RPS)),
			f0(float64(cpu.Microseconds()) / float64(max(1, rep.Requests))),
		})
	}
	emb := reps[1]
	caughtUp := persistLimit.Seconds() - emb.PersistSeconds
	if !emb.Audit.Passed {
		caughtUp = -1 // an order missing (or oversold): the goal fails whatever the time
	}
	goals := []Goal{
		{What: "embedded: the ledger holds every accepted order within 10 s of the end (seconds to spare)", Got: caughtUp, Want: 0},
		{What: "embedded: start to ready within 2 s (seconds to spare)", Got: 2 - ready[1].Seconds(), Want: 0},
	}
	if len(reps) > 2 {
		goals = append(goals, Goal{What: "embedded: buys/s ≥ 0.8× the baseline binary's", Got: ratio(emb.RPS, reps[2].RPS), Want: 0.8})
	}
	return Table{
		Title: fmt.Sprintf("Embedded mode: the whole system in one process vs on the services, %d connections, %s each", o.Clients, o.Duration),
		Header: []string{"system", "start to ready ms", "buys/s", "p50 ms", "p99 ms", "orders accepted", "ledger complete after s", "× services",
			"seckill CPU µs/buy"},
		Rows:  rows,
		Goals: goals,
		Notes: []string{
			"each system is a child process (`seckill all`) on this machine, limits off, one load generator (closed loop); the embedded one starts on an empty data directory",
			"seckill CPU is the child process's over the run per request answered: embedded, the whole system; on the services, without Redis, RabbitMQ and MySQL",
			"embedded, a buy is answered once its order is in SQLite (worker.WriteThrough: one transaction per batch of buy calls); --baseline runs an earlier binary embedded too",
			"\"ledger complete after\" is the time from the last answer until the admin stats count every accepted order in the ledger (MySQL, or SQLite embedded); the load tool's audit (no oversell, caps, idempotency, ledger within 10 s) passed unless a row says WRONG",
		},
	}, nil
}
