package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seckill/seckill"
	"github.com/seckill/seckill/configs"
	"github.com/seckill/seckill/funds"
	"github.com/seckill/seckill/internal/rdb"
	"github.com/seckill/seckill/internal/wait"
	"github.com/seckill/seckill/sessions"
)

// moneyPrice is what each order of the money case costs, in cents.
const moneyPrice = 100

// moneyCase measures what paying costs against a `seckill all` child:
// shoppers with funded wallets each buy one unit (the order reaches the
// ledger), then each pays its order (the charge decided in Redis, carried
// to the ledger, the merchant's share followed); each phase ends when the
// ledger holds all of it. The server's CPU per pay against per buy, the
// Redis CPU of one funds decision alone (funds.lua from this process),
// and the whole system's CPU (the child and the three services) per paid
// order against per order bought and not paid, as before wallets.
func moneyCase(ctx context.Context, e *Env, o Options) (Table, error) {
	cfg := childConfig(e)
	child, err := Start(ctx, o.Binary, cfg, nil, "all")
	if err != nil {
		return Table{}, err
	}
	defer child.Stop()
	base := "http://" + child.Addr
	n := min(o.Orders, 10_000)
	sale, err := createSale(ctx, base, cfg.Sessions.AdminToken, int64(n), nil)
	if err != nil {
		return Table{}, err
	}
	tokens, err := fundShoppers(ctx, cfg, e.Funds, n, "money", 10*moneyPrice)
	if err != nil {
		return Table{}, err
	}

	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: o.Clients}}
	orders := make([]string, n)
	buy := measure(ctx, e, child, func() (int64, error) {
		ok, err := drive(ctx, client, n, o.Clients, func(i int) (string, string, any) {
			return fmt.Sprintf("%s/api/sales/%d/buy", base, sale), tokens[i], map[string]any{"qty": 1, "request_id": fmt.Sprintf("money-buy-%06d", i)}
		}, func(i int, body []byte) {
			var ans struct {
				OrderID string `json:"order_id"`
			}
			_ = json.Unmarshal(body, &ans)
			orders[i] = ans.OrderID
		})
		if err == nil {
			_, err = ledgerLag(ctx, base, cfg.Sessions.AdminToken, sale, ok)
		}
		return ok, err
	})
	if buy.err != nil {
		return Table{}, fmt.Errorf("buy: %w", buy.err)
	}
	pay := measure(ctx, e, child, func() (int64, error) {
		ok, err := drive(ctx, client, n, o.Clients, func(i int) (string, string, any) {
			return base + "/api/orders/" + orders[i] + "/pay", tokens[i], nil
		}, nil)
		if err == nil { // the charges in the ledger, and the merchant's share followed in Redis
			err = waitBalance(ctx, e.Funds, seckill.PlatformAccount, ok*moneyPrice)
		}
		return ok, err
	})
	if pay.err != nil {
		return Table{}, fmt.Errorf("pay: %w", pay.err)
	}
	verdict := "exact"
	if buy.ok != int64(n) || pay.ok != int64(n) {
		verdict = fmt.Sprintf("WRONG: %d of %d bought, %d paid", buy.ok, n, pay.ok)
	}

	// One funds decision alone: a cent charged from each wallet, 16 at
	// once, from this process.
	r0, err := redisCPU(ctx, e.Redis)
	if err != nil {
		return Table{}, err
	}
	start := time.Now()
	err = each(ctx, n, 16, func(i int) error {
		o := seckill.Order{ID: fmt.Sprintf("money-direct-%06d", i), UserID: fmt.Sprintf("money-%06d", i), AmountCents: 1, Qty: 1, UnitPriceCents: 1}
		m, _ := seckill.ChargeMovement(o, 0, 0, time.Now())
		_, _, err := e.Funds.Move(ctx, m)
		return err
	})
	if err != nil {
		return Table{}, fmt.Errorf("funds decisions: %w", err)
	}
	took := time.Since(start)
	r1, err := redisCPU(ctx, e.Redis)
	if err != nil {
		return Table{}, err
	}
	decisionUS := ratio(float64(r1-r0), float64(n))

	per := func(p phase, t time.Duration) string { return f2(ratio(float64(t.Microseconds()), float64(p.ok))) }
	row := func(name string, p phase) []string {
		return []string{name, fmt.Sprint(p.ok), f0(ratio(float64(p.ok), p.took.Seconds())), per(p, p.server), per(p, p.redis),
			per(p, p.services["beam.smp"]) + " / " + per(p, p.services["mariadbd"]), per(p, p.all())}
	}
	serverRatio := ratio(float64(pay.server), float64(buy.server))
	whole := ratio(float64(buy.all()+pay.all()), float64(buy.all()))
	return Table{
		Title: fmt.Sprintf("Money: %d shoppers buy one unit, then pay it from their wallets, against a `seckill all` child (%d clients)", n, o.Clients),
		Header: []string{"step", "requests", "per s", "server CPU µs/req", "Redis CPU µs/req", "RabbitMQ / MariaDB CPU µs/req",
			"all processes CPU µs/req"},
		Rows: [][]string{
			row("buy (the order to the ledger)", buy),
			row("pay (the charge to the ledger, the merchant's share followed)", pay),
			{"one funds decision alone (funds.lua, 16 at once from the bench)", fmt.Sprint(n), f0(ratio(float64(n), took.Seconds())), "", f2(decisionUS), "", ""},
			{"a paid order (buy + pay) against an order bought, not paid", fmt.Sprint(n), "", f2(ratio(float64((buy.server + pay.server).Microseconds()), float64(n))),
				"", "", fmt.Sprintf("%s (%.2f× an unpaid order's %s)", f2(ratio(float64((buy.all()+pay.all()).Microseconds()), float64(n))), whole,
					per(buy, buy.all()))},
			{"verdict", verdict, "", f2(serverRatio) + "× a buy's", "", "", ""},
		},
		Goals: []Goal{
			{What: "server CPU per pay ≤ 1.2× per buy (headroom: 1.2 − pay/buy)", Got: 1.2 - serverRatio, Want: 0},
		},
		Notes: []string{
			fmt.Sprintf("each shopper (a minted bearer token) has a wallet of %d cents; the sale is the operator's, so a charge's share follows to the platform's account and no fee moves; a phase ends when the ledger holds all of it (the pay phase: when the platform's account in Redis holds every charge, after the ledger and the follow)", 10*moneyPrice),
			"server CPU is the child's user+system time (/proc); it runs the relays and the worker, so each step pays for its way to MySQL; Redis CPU is INFO cpu over the phase; RabbitMQ and MariaDB are every beam.smp and mariadbd process's; all processes is the child plus the three services",
			"a funds decision alone: a charge of one cent from each wallet through funds.Store.Move (one EVALSHA of funds.lua that checks, moves, records the id and appends to the outbox), Redis's CPU over the decisions",
		},
	}, nil
}

// fundShoppers mints n shoppers named after prefix, a bearer token each,
// and tops their wallets up by cents each (in Redis; the funds pipeline
// carries it to the ledger).
func fundShoppers(ctx context.Context, cfg configs.Config, wallets *funds.Store, n int, prefix string, cents int64) ([]string, error) {
	tokens := make([]string, n)
	now := time.Now()
	err := each(ctx, n, 16, func(i int) error {
		user := fmt.Sprintf("%s-%06d", prefix, i)
		tok, _, err := sessions.MintToken([]byte(cfg.Sessions.JWTSecret), user, user, time.Hour, now)
		if err != nil {
			return err
		}
		tokens[i] = tok
		_, _, err = wallets.Move(ctx, seckill.TopupMovement(fmt.Sprintf("bench-%s-%d", prefix, i), user, cents, now))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("fund the wallets: %w", err)
	}
	return tokens, nil
}

// waitBalance waits until account a holds want cents in Redis.
func waitBalance(ctx context.Context, wallets *funds.Store, a seckill.FundsAccount, want int64) error {
	return wait.Until(ctx, 60*time.Second, 10*time.Millisecond, func() (bool, string, error) {
		held, err := wallets.Balance(ctx, a)
		return held == want, fmt.Sprintf("%s holds %d of %d", a, held, want), err
	})
}

// phase is one timed step of the money case: its successes and the CPU
// each process spent on it.
type phase struct {
	ok       int64
	took     time.Duration
	server   time.Duration
	redis    time.Duration
	services map[string]time.Duration
	err      error
}

// all is the CPU of every process: the child and the three services.
func (p phase) all() time.Duration {
	return p.server + p.services["redis-server"] + p.services["beam.smp"] + p.services["mariadbd"]
}

// measure runs step and what the child and the services spent on it.
func measure(ctx context.Context, e *Env, child *Child, step func() (int64, error)) phase {
	return measureOn(ctx, e.Redis, child, step)
}

// measureOn is measure with Redis's CPU read from c's masters.
func measureOn(ctx context.Context, c rdb.Client, child *Child, step func() (int64, error)) phase {
	cpu0, svc0, start := child.CPU(), serviceCPU(), time.Now()
	r0, _ := redisCPU(ctx, c)
	ok, err := step()
	r1, _ := redisCPU(ctx, c)
	p := phase{ok: ok, took: time.Since(start), server: child.CPU() - cpu0, redis: time.Duration(r1-r0) * time.Microsecond,
		services: map[string]time.Duration{}, err: err}
	for name, t := range serviceCPU() {
		p.services[name] = t - svc0[name]
	}
	return p
}

// drive sends n POST requests, clients at a time (request i: its URL,
// bearer token and JSON body), and answers how many were 200; got reads
// each 200's body.
func drive(ctx context.Context, client *http.Client, n, clients int, request func(i int) (url, token string, body any),
	got func(i int, body []byte)) (int64, error) {
	var ok atomic.Int64
	err := each(ctx, n, clients, func(i int) error {
		url, token, body := request(i)
		b, _ := json.Marshal(body)
		if body == nil {
			b = nil
		}
		req, _ := http.NewRequestWithContext(ctx, "POST", url, bytes.NewReader(b))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+token)
		res, err := client.Do(req)
		if err != nil {
			return err
		}
		defer res.Body.Close()
		var buf bytes.Buffer
		_, _ = buf.ReadFrom(res.Body)
		if res.StatusCode == http.StatusOK {
			ok.Add(1)
			if got != nil {
				got(i, buf.Bytes())
			}
		}
		return nil
	})
	return ok.Load(), err
}

// each runs do(0) … do(n-1), workers at a time, and returns the first
// error.
func each(ctx context.Context, n, workers int, do func(i int) error) error {
	var (
		next     atomic.Int64
		wg       sync.WaitGroup
		errOnce  sync.Once
		firstErr error
	)
	for range workers {
		wg.Go(func() {
			for ctx.Err() == nil {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				if err := do(i); err != nil {
					errOnce.Do(func() { firstErr = err })
					return
				}
			}
		})
	}
	wg.Wait()
	if firstErr == nil {
		firstErr = ctx.Err()
	}
	return firstErr
}
