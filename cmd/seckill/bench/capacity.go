package bench

import (
	"context"
	"fmt"
	"image/color"
	"path/filepath"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"

	"github.com/seckill/seckill"
	"github.com/seckill/seckill/cmd/seckill/loadtest"
)

// capacityGoal is the p99 a rate must keep to count as taken.
const capacityGoal = 50 * time.Millisecond

// capacityRates is the open-loop ramp, in requests a second.
var capacityRates = []float64{500, 1000, 2000, 3000, 4000, 5000, 6000, 7000, 8000, 9000, 10000, 12000, 15000, 18000}

// rampStep is one arrival rate's run.
type rampStep struct {
	rate, achieved float64
	p50, p99       float64 // ms
	errors         int64
	accepted       int64
	requests       int64
	cpu            map[string]time.Duration // by process: server, Redis, RabbitMQ, MariaDB
}

func (s rampStep) ok() bool {
	return s.errors == 0 && s.p99 < float64(capacityGoal.Milliseconds()) && s.achieved >= 0.95*s.rate
}

// capacityCase finds the capacity of a `seckill all` child: an open loop
// at fixed arrival rates (not a closed loop, whose rate follows the
// server's), stepping up until a rate's p99 passes 50 ms or an error
// comes back; for buys with stock and buys after the sale sold out, in
// this design (coalescing batcher, sold-out fast path) and peer-style (one
// EVALSHA per request, no fast path). Each rate's CPU per accepted order
// (per request when sold out) is read from /proc for the child and the
// three services; a stock rate ends when MySQL holds its orders, so the
// pipeline's work counts in it. The latencies go into a PNG chart.
func capacityCase(ctx context.Context, e *Env, o Options) (Table, error) {
	step := max(time.Second, o.Duration/4)
	rates := o.Rates
	if len(rates) == 0 {
		rates = capacityRates
	}
	modes := []struct {
		name string
		env  []string
	}{
		{"this design (coalescing, sold-out fast path)", nil},
		{"peer-style: one EVALSHA per request", []string{"SECKILL_BATCH_ENABLED=false", "SECKILL_SOLD_OUT_RECHECK=0"}},
	}
	cfg := childConfig(e)
	var curves []curve
	var rows [][]string
	var capacity [2][2]float64 // [mode][stock, sold out]
	for mi, m := range modes {
		child, err := Start(ctx, o.Binary, cfg, m.env, "all")
		if err != nil {
			return Table{}, err
		}
		base := "http://" + child.Addr
		open, err := createSale(ctx, base, cfg.Sessions.AdminToken, seckill.MaxTotal, nil)
		if err == nil {
			var soldOut int64
			if soldOut, err = createSale(ctx, base, cfg.Sessions.AdminToken, 1, nil); err == nil {
				for ki, kind := range []struct {
					name string
					sale int64
				}{{"buy with stock", open}, {"buy, sold out", soldOut}} {
					var steps []rampStep
					var accepted int64
					for _, rate := range rates {
						s, err := rampAt(ctx, base, cfg.Sessions.AdminToken, cfg.Sessions.JWTSecret, kind.sale, rate, step, child)
						if err != nil {
							child.Stop()
							return Table{}, fmt.Errorf("%s, %s at %.0f/s: %w", m.name, kind.name, rate, err)
						}
						if kind.sale == open && s.accepted > 0 {
							accepted += s.accepted
							cpu0, svc0 := child.CPU(), serviceCPU()
							if _, err := ledgerLag(ctx, base, cfg.Sessions.AdminToken, open, accepted); err != nil {
								child.Stop()
								return Table{}, err
							}
							s.cpu["server"] += child.CPU() - cpu0
							for name, t := range serviceCPU() {
								s.cpu[name] += t - svc0[name]
							}
						}
						steps = append(steps, s)
						if !s.ok() {
							break
						}
					}
					curves = append(curves, curve{name: m.name + ", " + kind.name, steps: steps})
					best := -1
					for i, s := range steps {
						if s.ok() {
							best = i
						}
					}
					row := []string{m.name, kind.name, "none", "", "", "", "", "", ""}
					if best >= 0 {
						s := steps[best]
						capacity[mi][ki] = s.rate
						per := float64(max(s.accepted, 1))
						unit := "order"
						if kind.sale != open {
							per, unit = float64(s.requests), "request"
						}
						us := func(name string) float64 { return float64(s.cpu[name].Microseconds()) / per }
						total := us("server") + us("redis-server") + us("beam.smp") + us("mariadbd")
						row = []string{m.name, kind.name, f0(s.rate), fmt.Sprintf("%.1f / %.1f", s.p50, s.p99),
							fmt.Sprintf("%.1f", us("server")), fmt.Sprintf("%.1f", us("redis-server")),
							fmt.Sprintf("%.1f", us("beam.smp")), fmt.Sprintf("%.1f", us("mariadbd")),
							fmt.Sprintf("%.1f µs per %s", total, unit)}
					}
					rows = append(rows, row)
				}
			}
		}
		child.Stop()
		if err != nil {
			return Table{}, err
		}
	}
	chart := o.Chart
	if chart == "" {
		chart = filepath.Join(".", "capacity.png")
	}
	if err := plotCapacity(chart, curves); err != nil {
		return Table{}, err
	}
	return Table{
		Title: fmt.Sprintf("Capacity: open-loop ramp against a `seckill all` child, %s per rate, until p99 ≥ %s or an error", step, capacityGoal),
		Header: []string{"mode", "route", "capacity (req/s)", "p50 / p99 ms at it", "server µs", "Redis µs", "RabbitMQ µs", "MariaDB µs",
			"CPU per accepted order (per request sold out)"},
		Rows: rows,
		Goals: []Goal{
			{What: "capacity with stock, this design ≥ peer-style (ratio)", Got: ratio(capacity[0][0], capacity[1][0]), Want: 1},
			{What: "capacity sold out, this design ≥ peer-style (ratio)", Got: ratio(capacity[0][1], capacity[1][1]), Want: 1},
		},
		Notes: []string{
			fmt.Sprintf("rates %v/s; a rate counts when its p99 (from each request's due time, so without coordinated omission) stays under %s, no request fails and ≥ 95%% of it was sent", rates, capacityGoal),
			"the load generator is `seckill loadtest`'s open loop in the bench process, on the same two cores as the child and the services: the capacity is this machine's, with its load generator",
			"CPU per order: /proc user+system time of the child, every redis-server, beam.smp (RabbitMQ) and mariadbd over the rate's run and the ledger's catching up, over the orders accepted",
			fmt.Sprintf("the chart of p99 against the arrival rate: %s", chart),
		},
	}, nil
}

// curve is one mode's and route's ramp.
type curve struct {
	name  string
	steps []rampStep
}

// rampAt runs one arrival rate for d and reads what it cost.
func rampAt(ctx context.Context, base, adminToken, secret string, sale int64, rate float64, d time.Duration, child *Child) (rampStep, error) {
	cpu0, svc0 := child.CPU(), serviceCPU()
	rep, err := loadtest.Run(ctx, loadtest.Options{URL: base, SaleID: sale, AdminToken: adminToken, JWTSecret: secret,
		Users: 20_000, Qty: 1, Rate: rate, Duration: d, MaxInFlight: 20_000, NoAudit: true})
	if err != nil && rep.Requests == 0 {
		return rampStep{}, err
	}
	s := rampStep{rate: rate, achieved: rep.RPS, p50: rep.Latency.P50, p99: rep.Latency.P99, accepted: rep.Accepted,
		requests: rep.Requests, cpu: map[string]time.Duration{"server": child.CPU() - cpu0}}
	for name, t := range serviceCPU() {
		s.cpu[name] = t - svc0[name]
	}
	s.errors = rep.Transport
	for code, n := range rep.Outcomes {
		switch seckill.Code(code) {
		case seckill.CodeOK, seckill.CodeSoldOut, seckill.CodeLimitExceeded:
		default:
			s.errors += n
		}
	}
	return s, nil
}

// plotCapacity draws p99 against the arrival rate, a line per curve, and
// the goal.
func plotCapacity(path string, curves []curve) error {
	p := plot.New()
	p.Title.Text = "Seckill capacity: p99 latency vs arrival rate"
	p.X.Label.Text = "arrival rate (requests/s, open loop)"
	p.Y.Label.Text = "p99 latency (ms, log scale)"
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	p.Add(plotter.NewGrid())
	for i, c := range curves {
		pts := make(plotter.XYs, len(c.steps))
		for j, s := range c.steps {
			pts[j] = plotter.XY{X: s.rate, Y: max(s.p99, 0.1)}
		}
		line, points, err := plotter.NewLinePoints(pts)
		if err != nil {
			return err
		}
		line.Color, points.Color = plotutil.Color(i), plotutil.Color(i)
		points.Shape = plotutil.Shape(i)
		p.Add(line, points)
		p.Legend.Add(c.name, line, points)
	}
	goal := plotter.NewFunction(func(float64) float64 { return float64(capacityGoal.Milliseconds()) })
	goal.Color = color.RGBA{R: 200, A: 255}
	goal.Dashes = []vg.Length{vg.Points(4), vg.Points(4)}
	p.Add(goal)
	p.Legend.Add(fmt.Sprintf("goal: p99 < %s", capacityGoal), goal)
	p.Legend.Top = true
	p.Legend.Left = true
	p.Y.Min = 0.1
	return p.Save(10*vg.Inch, 6*vg.Inch, path)
}
