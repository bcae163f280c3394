package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/seckill/seckill/cmd/seckill/loadtest"
)

// roomCase measures the waiting room against a `seckill all` child: what
// checking an admission pass costs a buy (wrk, server CPU per buy on a
// sale with a room and a pass vs one without), and a crowd (o.Crowd
// shoppers joining at random moments in a pre-queue, let in at 500 a
// second, each buying with its pass): the rate measured, the queue
// frames' gap at the watchers, the waits and the fairness figures.
func roomCase(ctx context.Context, e *Env, o Options) (Table, error) {
	w, err := startWrkChild(ctx, e, o, nil)
	if err != nil {
		return Table{}, err
	}
	defer w.close()
	cfg, base, child := w.cfg, w.base, w.Child

	// Each without a room and with one that lets everyone in at once, so
	// that every buy of the latter carries a pass: stock left, sold out.
	roomFields := map[string]any{"waiting_room": true, "queue_opens_at": time.Now().UTC().Add(-2 * time.Minute), "admit_per_second": 100_000}
	var sales [4]int64
	for i, spec := range []struct {
		total int64
		extra map[string]any
	}{{100_000_000, nil}, {100_000_000, roomFields}, {1, nil}, {1, roomFields}} {
		if sales[i], err = createSale(ctx, base, cfg.Sessions.AdminToken, spec.total, spec.extra); err != nil {
			return Table{}, err
		}
	}
	const users = 2000
	tokens := make([]string, len(sales))
	for i, sale := range sales {
		tokens[i] = w.file(fmt.Sprintf("tokens-%d.txt", i))
		if err := loadtest.WriteTokens(ctx, loadtest.Options{URL: base, Users: users, JWTSecret: cfg.Sessions.JWTSecret, SaleID: sale}, tokens[i]); err != nil {
			return Table{}, err
		}
	}
	// Sell the sold-out sales' one unit each.
	for _, i := range []int{2, 3} {
		if _, err := w.run(ctx, tokens[i], sales[i], "buy", o.Clients, time.Second); err != nil {
			return Table{}, err
		}
	}
	names := []string{"buy, stock left, no waiting room", "buy, stock left, with an admission pass",
		"buy, sold out, no waiting room", "buy, sold out, with an admission pass"}
	const rounds = 3
	runs := make([][]wrkRun, len(sales))
	accepted := map[int64]int64{}
	for round := range rounds {
		for k := range sales {
			i := (k + round) % len(sales)
			cpu0 := child.CPU()
			r, err := w.run(ctx, tokens[i], sales[i], "buy", o.Clients, o.Duration/rounds)
			if err != nil {
				return Table{}, fmt.Errorf("%s: %w", names[i], err)
			}
			if i < 2 { // the pipeline's catching up counts here, not in the next route
				accepted[sales[i]] += r.statuses["200"]
				if _, err := ledgerLag(ctx, base, cfg.Sessions.AdminToken, sales[i], accepted[sales[i]]); err != nil {
					return Table{}, err
				}
			}
			r.cpu = child.CPU() - cpu0
			runs[i] = append(runs[i], r)
		}
	}
	var rows [][]string
	cpu := make([]float64, len(sales))
	for i, name := range names {
		m := mergeWrk(runs[i])
		cpu[i] = ratio(float64(m.cpu.Microseconds()), float64(m.requests))
		rows = append(rows, []string{name, f0(m.rps), fmt.Sprintf("%.2f", m.p50), fmt.Sprintf("%.2f", m.p99),
			f2(cpu[i]), f2(ratio(cpu[i], cpu[i&^1])), m.answers})
	}

	cpu0 := child.CPU()
	crowd, err := loadtest.Crowd(ctx, loadtest.CrowdOptions{
		URL: base, AdminToken: cfg.Sessions.AdminToken, JWTSecret: cfg.Sessions.JWTSecret,
		Shoppers: o.Crowd, Late: o.Crowd / 20, Lead: crowdLead(o.Crowd), AdmitPerSecond: 500, Watchers: 20,
	})
	if err != nil {
		return Table{}, fmt.Errorf("crowd: %w\n%s", err, crowd)
	}
	crowdCPU := child.CPU() - cpu0
	rows = append(rows, []string{
		fmt.Sprintf("crowd: %d + %d shoppers, let in at %d/s", crowd.Shoppers, crowd.Late, crowd.AdmitPerSecond),
		fmt.Sprintf("%.1f let in/s", crowd.MeasuredRate),
		fmt.Sprintf("wait %.1f s", crowd.Wait.P50), fmt.Sprintf("wait %.1f s", crowd.Wait.P99),
		f2(ratio(float64(crowdCPU.Microseconds()), float64(crowd.Joined))), "",
		fmt.Sprintf("%d bought; frames gap p50 %.0f ms, p99 %.0f ms; ρ pre-queue %+.3f, after the start %+.3f; late-vs-early ahead %.1f%%",
			crowd.Bought, crowd.FrameGap.P50, crowd.FrameGap.P99, crowd.EarlyRho, crowd.LateRho, 100*crowd.LateAhead),
	})
	return Table{
		Title: fmt.Sprintf("Waiting room: a buy with an admission pass vs without (wrk, 1 thread, %d connections, %s per route, %d interleaved rounds), and a crowd of %d",
			o.Clients, o.Duration, rounds, crowd.Shoppers+crowd.Late),
		Header: []string{"route", "req/s", "p50 ms", "p99 ms", "server CPU µs/req", "CPU × no room", "answers"},
		Rows:   rows,
		Goals: []Goal{
			{What: "server CPU per buy with stock, with a pass ≤ 1.10× without a room (headroom)", Got: 1.10 - ratio(cpu[1], cpu[0]), Want: 0},
			{What: "server CPU per sold-out buy, with a pass ≤ 1.10× without a room (headroom)", Got: 1.10 - ratio(cpu[3], cpu[2]), Want: 0},
			{What: "admission within ±10% of 500/s (headroom)", Got: 0.10 - absf(crowd.MeasuredRate/float64(crowd.AdmitPerSecond)-1), Want: 0},
			{What: "queue frames' gap p99 ≤ 250 ms at the watchers", Got: 250 - crowd.FrameGap.P99, Want: 0},
			{What: "the crowd's fairness audit passes (ρ, pairs, rate)", Got: boolf(crowd.Audit.Passed), Want: 1},
		},
		Notes: []string{
			fmt.Sprintf("%d shoppers a sale; the passes minted offline with the deployment's key (as if each had been let in), checked by the child on every buy (HMAC-SHA256, no round trip); a stock route's CPU includes the pipeline's catching up (the route ends when MySQL holds its orders)", users),
			fmt.Sprintf("the crowd joins at random moments over %s before the start, follows 20 WebSocket watchers' queue frames, reads its final place when the estimate of it nears the places let in (as the shopper page does), and asks for its pass when its turn comes; its wait is from the start (from the join after it); its CPU cell is the child's per shopper over the whole crowd (join, reads, pass, buy, frames)", crowdLead(o.Crowd).Round(time.Second)),
		},
	}, nil
}

// crowdLead is how long a crowd of n takes to join before the start.
func crowdLead(n int) time.Duration { return max(3*time.Second, time.Duration(n)*time.Second/1500) }

func absf(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}

func boolf(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
