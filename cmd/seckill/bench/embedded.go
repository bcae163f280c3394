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
	contenders := []struct {
		name string
		env  []string
		args []string
	}{
		{"seckill all on Redis, RabbitMQ, MySQL", nil, []string{"all"}},
		{"seckill all --embedded", []string{"SECKILL_DATA_DIR=" + dir}, []string{"all", "--embedded"}},
	}
	const persistLimit = 10 * time.Second
	var rows [][]string
	var reps []loadtest.Report
	var ready []time.Duration
	for _, c := range contenders {
		child, err := Start(ctx, o.Binary, cfg, c.env, c.args...)
		if err != nil {
			return Table{}, err
		}
		rep, err := loadtest.Run(ctx, loadtest.Options{
			URL: "http://" + child.Addr, CreateSale: "total=100000000,limit=1000,price=100,start=0s,duration=1h",
			AdminToken: cfg.Sessions.AdminToken, JWTSecret: cfg.Sessions.JWTSecret, Users: 20_000, Qty: 1,
			Concurrency: o.Clients, Duration: o.Duration, WaitPersist: persistLimit,
		})
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
		})
	}
	emb := reps[1]
	caughtUp := persistLimit.Seconds() - emb.PersistSeconds
	if !emb.Audit.Passed {
		caughtUp = -1 // an order missing (or oversold): the goal fails whatever the time
	}
	return Table{
		Title:  fmt.Sprintf("Embedded mode: the whole system in one process vs on the services, %d connections, %s each", o.Clients, o.Duration),
		Header: []string{"system", "start to ready ms", "buys/s", "p50 ms", "p99 ms", "orders accepted", "ledger complete after s", "× services"},
		Rows:   rows,
		Goals: []Goal{
			{What: "embedded: the ledger holds every accepted order within 10 s of the end (seconds to spare)", Got: caughtUp, Want: 0},
			{What: "embedded: start to ready within 2 s (seconds to spare)", Got: 2 - ready[1].Seconds(), Want: 0},
		},
		Notes: []string{
			"each system is a child process (`seckill all`) on this machine, limits off, one load generator (closed loop); the embedded one starts on an empty data directory",
			"\"ledger complete after\" is the time from the last answer until the admin stats count every accepted order in the ledger (MySQL, or SQLite embedded); the load tool's audit (no oversell, caps, idempotency, ledger within 10 s) passed unless a row says WRONG",
		},
	}, nil
}
