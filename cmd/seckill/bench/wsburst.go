package bench

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/seckill/seckill/cmd/seckill/loadtest"
	"github.com/seckill/seckill/configs"
)

// wsBurstCase measures live stock while a sale sells out: watchers (this
// process) on a `seckill all` child while a closed-loop burst of buys
// sells the sale, a small crowd and then o.WSClients, each on a sale of
// its own. Per watcher, the gaps between the frames it read during the
// burst; for every watcher, when it read 0 after the last unit was sold;
// the child's memory and CPU for the watchers.
func wsBurstCase(ctx context.Context, e *Env, o Options) (Table, error) {
	raiseFileLimit()
	cfg := e.Config
	cfg.Buy.RateGlobal, cfg.Buy.RatePerUser, cfg.Buy.RatePerIP = 0, 0, 0
	cfg.HTTP.WSMaxPerIP, cfg.HTTP.WSMaxTotal = 0, 0
	if cfg.Sessions.AdminToken == "" {
		cfg.Sessions.AdminToken = "bench-admin-" + cfg.Redis.Prefix
	}
	child, err := Start(ctx, o.Binary, cfg, nil, "all")
	if err != nil {
		return Table{}, err
	}
	defer child.Stop()
	srv, err := e.server(cfg, nil)
	if err != nil {
		return Table{}, err
	}
	const units, requests = 20_000, 30_000
	var rows [][]string
	var results []burst
	for _, n := range []int{min(100, o.WSClients), o.WSClients} {
		sale, err := e.sale(ctx, srv, units, units, 100)
		if err != nil {
			return Table{}, err
		}
		r, err := measureBurst(ctx, e, child, cfg, sale.ID, n, requests, o.Clients)
		if err != nil {
			return Table{}, fmt.Errorf("%d watchers: %w", n, err)
		}
		results = append(results, r)
		rows = append(rows, []string{
			fmt.Sprint(n), fmt.Sprint(r.frames), ms(r.gapP50), ms(r.gapP99), ms(r.gapMax), ms(r.allZero),
			fmt.Sprintf("%.1f", r.rssPer1000/1024/1024), fmt.Sprintf("%.2f", r.burstCPU.Seconds()), f0(r.buysPerSecond),
		})
	}
	small, big := results[0], results[len(results)-1]
	cpuPer1000 := (big.burstCPU - small.burstCPU).Seconds() / (float64(o.WSClients-min(100, o.WSClients)) / 1000)
	return Table{
		Title: fmt.Sprintf("Live stock during a sell-out: watchers on a `seckill all` child while %d buys sell %d units", requests, units),
		Header: []string{"watchers", "frames read", "gap p50 ms", "gap p99 ms", "gap max ms", "every page at 0 after ms",
			"server MiB / 1000 watchers", "server CPU s in the burst", "buys/s"},
		Rows: rows,
		Goals: []Goal{
			{What: fmt.Sprintf("%d watchers: frame gap p99 ≤ 150 ms (ms to spare)", o.WSClients), Got: 150 - msf(big.gapP99), Want: 0},
			{What: fmt.Sprintf("%d watchers: every page at 0 within 250 ms of the last unit (ms to spare)", o.WSClients), Got: 250 - msf(big.allZero), Want: 0},
		},
		Notes: []string{
			fmt.Sprintf("the watchers run in this process, the server is a `seckill all` child (relays and worker included) on the services; the burst is the load tool's closed loop of %d clients in this process too", o.Clients),
			fmt.Sprintf("gap = time between two frames a watcher read while the sale sold (the hub polls every %s and sends a frame when the stock changed: at most ten a second)", cfg.HTTP.WSPoll),
			"every page at 0 = from the moment Redis held 0 units (read every 2 ms here) until the last watcher read a frame with remaining 0",
			fmt.Sprintf("server memory = growth of the child's resident set while the watchers connected, per 1,000; its CPU over the burst: %.2f s more per 1,000 watchers than with the small crowd", cpuPer1000),
		},
	}, nil
}

func msf(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

type burst struct {
	frames                 int
	gapP50, gapP99, gapMax time.Duration
	allZero                time.Duration
	rssPer1000             float64
	burstCPU               time.Duration
	buysPerSecond          float64
}

// measureBurst connects n watchers to sale on child, sells the sale with
// a burst of requests, and reads what the watchers saw.
func measureBurst(ctx context.Context, e *Env, child *Child, cfg configs.Config, sale int64, n, requests, clients int) (burst, error) {
	rss0 := child.RSS()
	type watcher struct {
		mu     sync.Mutex
		at     []time.Time // when each stock frame was read
		zeroAt time.Time   // when a frame with remaining 0 was first read
	}
	ws := make([]*watcher, n)
	for i := range ws {
		ws[i] = &watcher{}
	}
	crowd, err := watch(ctx, child.Addr, sale, n, func(i int, at time.Time, remaining int64) {
		w := ws[i]
		w.mu.Lock()
		w.at = append(w.at, at)
		if remaining == 0 && w.zeroAt.IsZero() {
			w.zeroAt = at
		}
		w.mu.Unlock()
	})
	if err != nil {
		return burst{}, err
	}
	defer crowd.close()
	frames := func(i int) int {
		ws[i].mu.Lock()
		defer ws[i].mu.Unlock()
		return len(ws[i].at)
	}
	if err := waitAll(ctx, n, func(i int) bool { return frames(i) > 0 }, 60*time.Second); err != nil {
		return burst{}, fmt.Errorf("initial frame: %w", err)
	}
	rss1 := child.RSS()

	// Watch Redis for the moment the last unit goes.
	soldOut := make(chan time.Time, 1)
	wctx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	go func() {
		for wctx.Err() == nil {
			if st, err := e.Inv.Stock(wctx, sale); err == nil && st.Available <= 0 {
				soldOut <- time.Now()
				return
			}
			time.Sleep(2 * time.Millisecond)
		}
	}()
	start := time.Now()
	cpu0 := child.CPU()
	rep, err := loadtest.Run(ctx, loadtest.Options{
		URL: "http://" + child.Addr, SaleID: sale, AdminToken: cfg.Sessions.AdminToken, JWTSecret: cfg.Sessions.JWTSecret,
		Users: 30_000, Qty: 1, Concurrency: clients, Requests: requests, NoAudit: true,
	})
	cpu := child.CPU() - cpu0
	if err != nil {
		return burst{}, err
	}
	var zero time.Time
	select {
	case zero = <-soldOut:
	case <-time.After(10 * time.Second):
		return burst{}, fmt.Errorf("the sale did not sell out (%v)", rep.Outcomes)
	}
	if err := waitAll(ctx, n, func(i int) bool {
		ws[i].mu.Lock()
		defer ws[i].mu.Unlock()
		return !ws[i].zeroAt.IsZero()
	}, 30*time.Second); err != nil {
		return burst{}, fmt.Errorf("pages at 0: %w", err)
	}
	var gaps []time.Duration
	var last time.Time
	total := 0
	for _, w := range ws {
		w.mu.Lock()
		total += len(w.at)
		prev := start
		for _, at := range w.at {
			if at.Before(start) {
				continue
			}
			if at.After(w.zeroAt) {
				break
			}
			gaps = append(gaps, at.Sub(prev))
			prev = at
		}
		if w.zeroAt.After(last) {
			last = w.zeroAt
		}
		w.mu.Unlock()
	}
	crowd.close()
	slices.Sort(gaps)
	pct := func(p float64) time.Duration {
		if len(gaps) == 0 {
			return 0
		}
		return gaps[min(len(gaps)-1, int(p*float64(len(gaps))))]
	}
	return burst{
		frames: total, gapP50: pct(0.5), gapP99: pct(0.99), gapMax: pct(1), allZero: last.Sub(zero),
		rssPer1000: float64(rss1-rss0) / float64(n) * 1000, burstCPU: cpu, buysPerSecond: rep.RPS,
	}, nil
}
