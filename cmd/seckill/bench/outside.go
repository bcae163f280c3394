package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"time"

	"github.com/seckill/seckill"
	"github.com/seckill/seckill/cmd/seckill/loadtest"
	"github.com/seckill/seckill/internal/wait"
)

// outsideCase loads a real `seckill all` child process from outside, with
// wrk (one thread, o.Clients connections, a low-overhead C load generator)
// and one script for every route: GET /healthz (the baseline: the same
// middleware, no work), buy while stock is left, and buy after the sale
// sold out, without and with buy tickets. The routes take turns in three
// interleaved rounds, each starting one route later. The
// server's CPU per request comes from the child's /proc stat, so the cost
// of the path shows beyond the machine's noise.
func outsideCase(ctx context.Context, e *Env, o Options) (Table, error) {
	w, err := startWrkChild(ctx, e, o, nil)
	if err != nil {
		return Table{}, err
	}
	defer w.close()
	cfg, base, child := w.cfg, w.base, w.Child
	open, err := createSale(ctx, base, cfg.Sessions.AdminToken, seckill.MaxTotal, nil)
	if err != nil {
		return Table{}, err
	}
	soldOut, err := createSale(ctx, base, cfg.Sessions.AdminToken, 1, nil)
	if err != nil {
		return Table{}, err
	}
	ticketed, err := createSale(ctx, base, cfg.Sessions.AdminToken, 1, map[string]any{"require_ticket": true})
	if err != nil {
		return Table{}, err
	}
	tokens, withTickets := w.file("tokens.txt"), w.file("tickets.txt")
	for _, f := range []struct {
		path string
		sale int64
	}{{tokens, 0}, {withTickets, ticketed}} {
		err = loadtest.WriteTokens(ctx, loadtest.Options{URL: base, Users: 10_000, JWTSecret: cfg.Sessions.JWTSecret, SaleID: f.sale}, f.path)
		if err != nil {
			return Table{}, err
		}
	}
	// Sell the one unit of each, so the sales are sold out for the whole run.
	for _, f := range []struct {
		path string
		sale int64
	}{{tokens, soldOut}, {withTickets, ticketed}} {
		if _, err := w.run(ctx, f.path, f.sale, "buy", o.Clients, time.Second); err != nil {
			return Table{}, err
		}
	}

	contenders := []struct {
		name, route, tokens string
		sale                int64
	}{
		{"GET /healthz (baseline)", "healthz", tokens, open},
		{"buy, stock left", "buy", tokens, open},
		{"buy, sold out", "buy", tokens, soldOut},
		{"buy, sold out, with buy tickets", "buy", withTickets, ticketed},
	}
	const rounds = 3
	runs := make([][]wrkRun, len(contenders))
	var accepted int64   // orders the open sale accepted so far
	var worstLag float64 // seconds from a stock round's last answer until the ledger held every order
	for round := range rounds {
		// Each round starts one route later, so no route always follows
		// the same one.
		for k := range contenders {
			i := (k + round) % len(contenders)
			c := contenders[i]
			cpu0, services0 := child.CPU(), serviceCPU()
			r, err := w.run(ctx, c.tokens, c.sale, c.route, o.Clients, o.Duration/rounds)
			if err != nil {
				return Table{}, fmt.Errorf("%s: %w", c.name, err)
			}
			if c.sale == open && c.route == "buy" {
				// The round ends when MySQL holds its orders, so the
				// pipeline's catching up counts here, not in the next route.
				accepted += r.statuses["200"]
				lag, err := ledgerLag(ctx, base, cfg.Sessions.AdminToken, open, accepted)
				if err != nil {
					return Table{}, err
				}
				worstLag = max(worstLag, lag.Seconds())
			}
			r.cpu = child.CPU() - cpu0
			r.services = map[string]time.Duration{}
			for name, t := range serviceCPU() {
				r.services[name] = t - services0[name]
			}
			runs[i] = append(runs[i], r)
		}
	}
	var rows [][]string
	var rates, cpu []float64
	for i, c := range contenders {
		m := mergeWrk(runs[i])
		rates = append(rates, m.rps)
		cpu = append(cpu, ratio(float64(m.cpu.Microseconds()), float64(m.requests)))
		perReq := func(t time.Duration) string { return f2(ratio(float64(t.Microseconds()), float64(m.requests))) }
		services := perReq(m.services["redis-server"]) + " / " + perReq(m.services["beam.smp"]) + " / " + perReq(m.services["mariadbd"])
		rows = append(rows, []string{c.name, f0(m.rps), fmt.Sprintf("%.2f", m.p50), fmt.Sprintf("%.2f", m.p99),
			perReq(m.cpu), services, m.answers, f2(ratio(m.rps, rates[0]))})
	}
	return Table{
		Title: fmt.Sprintf("From outside: wrk (1 thread, %d connections) against a `seckill all` child, %s per route (%d interleaved rounds)",
			o.Clients, o.Duration, rounds),
		Header: []string{"route", "req/s", "p50 ms", "p99 ms", "server CPU µs/req", "Redis / RabbitMQ / MariaDB CPU µs/req", "answers", "× /healthz"},
		Rows:   rows,
		Goals: []Goal{
			{What: "buy with stock ≥ 0.45× GET /healthz", Got: ratio(rates[1], rates[0]), Want: 0.45},
			{What: "sold-out buy ≥ 0.75× GET /healthz", Got: ratio(rates[2], rates[0]), Want: 0.75},
			{What: "server CPU per sold-out buy with tickets ≤ 1.10× without (headroom: 1.10 − with/without)", Got: 1.10 - ratio(cpu[3], cpu[2]), Want: 0},
			{What: "orders persisted as fast as accepted: MySQL holds every order within 1 s of a stock round's last answer (seconds to spare)", Got: 1 - worstLag, Want: 0},
		},
		Notes: []string{
			"every route is driven by scripts/wrk/buy.lua with the same headers (a token picked from 10,000, fresh request ids); limiters off; the child runs the relay and the worker too, so a buy with stock pays for its order reaching MySQL",
			fmt.Sprintf("a stock round ends when MySQL holds every order accepted so far (the admin stats): at most %.2f s after its last answer; its CPU figures include the pipeline's catching up", worstLag),
			"server CPU is the child's user+system time (/proc) over the route's requests; the services' CPU is that of every redis-server, beam.smp and mariadbd process on the machine; p50 and p99 are the medians of the rounds' figures",
			"with buy tickets: the sale requires them and every buy carries a valid one (minted offline with the signing secret, as `seckill loadtest --tokens-out` writes them), so each request pays the ticket check on top of the sold-out answer",
			"the machine's two cores are shared by wrk, the child and the three services: a route is as fast as the CPU all of them spend on it allows",
		},
	}, nil
}

// ledgerLag waits until the ledger holds want orders of the sale (the
// admin stats' orders_persisted) and returns how long that took.
func ledgerLag(ctx context.Context, base, adminToken string, sale, want int64) (time.Duration, error) {
	return statReaches(ctx, base, adminToken, sale, "orders_persisted", want)
}

// statReaches waits until a sale's stats (GET …/stats) show field at
// want or more, and returns how long that took.
func statReaches(ctx context.Context, base, adminToken string, sale int64, field string, want int64) (time.Duration, error) {
	start := time.Now()
	err := wait.Until(ctx, 60*time.Second, 10*time.Millisecond, func() (bool, string, error) {
		req, _ := http.NewRequestWithContext(ctx, "GET", fmt.Sprintf("%s/admin/api/sales/%d/stats", base, sale), nil)
		req.Header.Set("Authorization", "Bearer "+adminToken)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			return false, "", err
		}
		defer res.Body.Close()
		var st map[string]any
		if err := json.NewDecoder(res.Body).Decode(&st); err != nil || res.StatusCode != http.StatusOK {
			return false, "", fmt.Errorf("sale stats: %s %v", res.Status, err)
		}
		got, _ := st[field].(float64)
		return int64(got) >= want, fmt.Sprintf("%s %d of %d", field, int64(got), want), nil
	})
	return time.Since(start), err
}

// createSale creates a sale of total units (limit: all of them), needing
// buy tickets or not, through the admin API and returns its id.
func createSale(ctx context.Context, base, adminToken string, total int64, extra map[string]any) (int64, error) {
	now := time.Now().UTC()
	fields := map[string]any{"name": "Bench", "item": "Thing", "price_cents": 100, "total": total,
		"per_user_limit": total, "starts_at": now.Add(-time.Minute), "ends_at": now.Add(time.Hour)}
	for k, v := range extra {
		fields[k] = v
	}
	body, _ := json.Marshal(fields)
	req, _ := http.NewRequestWithContext(ctx, "POST", base+"/admin/api/sales", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+adminToken)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer res.Body.Close()
	var sale struct {
		ID int64 `json:"id"`
	}
	if err := json.NewDecoder(res.Body).Decode(&sale); err != nil || res.StatusCode != http.StatusCreated {
		return 0, fmt.Errorf("create sale: %s %v", res.Status, err)
	}
	return sale.ID, nil
}

// wrkRun is what one wrk run reported.
type wrkRun struct {
	requests int64
	seconds  float64
	p50, p99 float64
	statuses map[string]int64
	cpu      time.Duration
	services map[string]time.Duration
}

var (
	wrkRequests = regexp.MustCompile(`(\d+) requests in ([\d.]+)(m?s)`)
	wrkPercent  = regexp.MustCompile(`p(50|99) ([\d.]+) ms`)
	wrkStatus   = regexp.MustCompile(`(\d{3}): (\d+)`)
)

func runWrk(ctx context.Context, wrkPath, script, base, tokens string, sale int64, route string, conns int, d time.Duration) (wrkRun, error) {
	secs := max(1, int(d.Round(time.Second).Seconds()))
	cmd := exec.CommandContext(ctx, wrkPath, "-t1", "-c"+strconv.Itoa(conns), fmt.Sprintf("-d%ds", secs), "-s", script, base,
		"--", tokens, strconv.FormatInt(sale, 10), route)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return wrkRun{}, fmt.Errorf("wrk: %v\n%s", err, out)
	}
	r := wrkRun{statuses: map[string]int64{}}
	m := wrkRequests.FindSubmatch(out)
	if m == nil {
		return wrkRun{}, fmt.Errorf("wrk: no request count in\n%s", out)
	}
	r.requests, _ = strconv.ParseInt(string(m[1]), 10, 64)
	r.seconds, _ = strconv.ParseFloat(string(m[2]), 64)
	if string(m[3]) == "ms" {
		r.seconds /= 1000
	}
	for _, p := range wrkPercent.FindAllSubmatch(out, -1) {
		v, _ := strconv.ParseFloat(string(p[2]), 64)
		if string(p[1]) == "50" {
			r.p50 = v
		} else {
			r.p99 = v
		}
	}
	for _, s := range wrkStatus.FindAllSubmatch(out, -1) {
		n, _ := strconv.ParseInt(string(s[2]), 10, 64)
		r.statuses[string(s[1])] += n
	}
	return r, nil
}

// merged adds up a route's rounds.
type merged struct {
	requests int64
	rps      float64
	p50, p99 float64
	cpu      time.Duration
	services map[string]time.Duration
	answers  string
}

func mergeWrk(runs []wrkRun) merged {
	m := merged{services: map[string]time.Duration{}}
	var secs float64
	var p50s, p99s []float64
	statuses := map[string]int64{}
	for _, r := range runs {
		m.requests += r.requests
		secs += r.seconds
		m.cpu += r.cpu
		for name, t := range r.services {
			m.services[name] += t
		}
		p50s, p99s = append(p50s, r.p50), append(p99s, r.p99)
		for s, n := range r.statuses {
			statuses[s] += n
		}
	}
	m.rps = ratio(float64(m.requests), secs)
	slices.Sort(p50s)
	slices.Sort(p99s)
	m.p50, m.p99 = p50s[len(p50s)/2], p99s[len(p99s)/2]
	codes := make([]string, 0, len(statuses))
	for s := range statuses {
		codes = append(codes, s)
	}
	slices.Sort(codes)
	for i, s := range codes {
		if i > 0 {
			m.answers += ", "
		}
		m.answers += fmt.Sprintf("%s %d", s, statuses[s])
	}
	return m
}
