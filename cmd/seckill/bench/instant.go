package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/seckill/seckill"
	"github.com/seckill/seckill/configs"
	"github.com/seckill/seckill/funds"
	"github.com/seckill/seckill/internal/rdb"
	"github.com/seckill/seckill/system"
	"github.com/seckill/seckill/system/servertest/topology"
)

// instantPrice is what each unit of the instant case costs, in cents.
const instantPrice = 100

// instantCase measures what deciding the payment in the buy costs, on
// one Redis and on a 3-master Redis Cluster, each against a `seckill all`
// child: the same shoppers (funded wallets) buy one unit of a plain sale,
// then one unit of an instant-checkout sale, then pay their plain orders
// (after a round on a sale of its own that warms the child up). Each
// phase ends when the ledger holds all of it. It reports the server's
// and Redis's CPU per instant buy against a plain buy (the goal: ≤ 1.25×
// on one Redis, ≤ 1.6× on the Cluster, where a buy is a hold, the stock
// step and a post), and the whole system's CPU per paid order, instant
// against buy-then-pay.
func instantCase(ctx context.Context, e *Env, o Options) (Table, error) {
	n := min(o.Orders, 5_000)
	t := Table{
		Title: fmt.Sprintf("Instant checkout: %d shoppers buy one unit of a plain sale, then of an instant-checkout sale, then pay the plain orders, against a `seckill all` child (%d clients)", n, o.Clients),
		Header: []string{"Redis", "step", "per s", "server CPU µs/req", "Redis CPU µs/req", "server + Redis µs/req",
			"all processes CPU µs/order"},
	}
	for _, topo := range []string{"one Redis", "a 3-master Cluster"} {
		cfg := childConfig(e)
		var redisOf rdb.Client = e.Redis
		fundsOf := e.Funds
		var env []string // the child's Redis: the bench's, or the cluster
		if topo != "one Redis" {
			cluster, err := topology.StartRedisCluster(3)
			if err != nil {
				return Table{}, err
			}
			defer cluster.Stop()
			cfg.Redis.Addr, cfg.Redis.DB = cluster.Addrs(), 0
			env = []string{"SECKILL_REDIS_ADDR=" + cfg.Redis.Addr, "SECKILL_REDIS_DB=0"}
			c, err := system.OpenRedis(ctx, cfg)
			if err != nil {
				return Table{}, err
			}
			defer c.Close()
			redisOf, fundsOf = c, funds.New(c, system.FundsConfig(cfg))
		}
		r, err := instantRun(ctx, cfg, env, redisOf, fundsOf, len(t.Goals), n, o)
		if err != nil {
			return Table{}, fmt.Errorf("%s: %w", topo, err)
		}
		per := func(p phase, d time.Duration) string { return f2(ratio(float64(d.Microseconds()), float64(p.ok))) }
		row := func(step string, p phase) []string {
			return []string{topo, step, f0(ratio(float64(p.ok), p.took.Seconds())), per(p, p.server), per(p, p.redis),
				per(p, p.server+p.redis), per(p, p.all())}
		}
		both := func(p phase) float64 { return float64(p.server + p.redis) }
		costRatio := ratio(both(r.instant), both(r.buy))
		whole := ratio(float64(r.instant.all()), float64(r.buy.all()+r.pay.all()))
		t.Rows = append(t.Rows, row("plain buy (the order to the ledger)", r.buy), row("instant-checkout buy (order and charge to the ledger)", r.instant),
			row("pay of the plain orders (the charge to the ledger)", r.pay),
			[]string{topo, "instant buy against a plain buy", "", f2(ratio(float64(r.instant.server), float64(r.buy.server))) + "×",
				f2(ratio(float64(r.instant.redis), float64(r.buy.redis))) + "×", f2(costRatio) + "×",
				fmt.Sprintf("%.2f× buy-then-pay's", whole)},
			[]string{topo, "verdict", r.verdict, "", "", "", ""})
		want := 1.25
		if topo != "one Redis" {
			want = 1.6
		}
		t.Goals = append(t.Goals, Goal{What: fmt.Sprintf("%s: server + Redis CPU per instant buy ≤ %.2f× a plain buy's (headroom)", topo, want),
			Got: want - costRatio, Want: 0})
	}
	t.Notes = []string{
		fmt.Sprintf("each shopper (a minted bearer token) has a wallet of %d cents; the sales are the operator's, so a charge's share follows to the platform's account; a phase ends when the ledger holds all of it (the instant buys: every order paid, and the platform's account in Redis holding every charge)", 10*instantPrice),
		"server CPU is the child's (it runs the relays and the worker too, so each step pays for its way to MySQL); Redis CPU is INFO cpu of every master over the phase; all processes is the child, Redis, RabbitMQ and MariaDB",
		"on one Redis an instant buy is buy.lua deciding stock and wallet in one call; on the Cluster it is a hold (hold.lua on the wallet's slot), the stock step (buy.lua, coalesced) and a post (hold.lua)",
	}
	return t, nil
}

// instantResult is one topology's phases.
type instantResult struct {
	buy, instant, pay phase
	verdict           string
}

// instantRun runs the phases against a child on cfg's Redis (env its
// settings), its shoppers and top-ups named after run.
func instantRun(ctx context.Context, cfg configs.Config, env []string, redisOf rdb.Client, wallets *funds.Store, run, n int, o Options) (instantResult, error) {
	var r instantResult
	child, err := Start(ctx, o.Binary, cfg, env, "all")
	if err != nil {
		return r, err
	}
	defer child.Stop()
	base := "http://" + child.Addr
	plain, err := createSale(ctx, base, cfg.Sessions.AdminToken, int64(n), nil)
	if err != nil {
		return r, err
	}
	instant, err := createSale(ctx, base, cfg.Sessions.AdminToken, int64(n), map[string]any{"instant_checkout": true})
	if err != nil {
		return r, err
	}
	tokens, err := fundShoppers(ctx, cfg, wallets, n, fmt.Sprintf("instant-%d", run), 10*instantPrice)
	if err != nil {
		return r, err
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: o.Clients}}
	buys := func(sale int64, orders []string) (int64, error) {
		return drive(ctx, client, n, o.Clients, func(i int) (string, string, any) {
			return fmt.Sprintf("%s/api/sales/%d/buy", base, sale), tokens[i], map[string]any{"qty": 1, "request_id": fmt.Sprintf("b%d-%06d", sale, i)}
		}, func(i int, body []byte) {
			if orders != nil {
				var ans struct {
					OrderID string `json:"order_id"`
				}
				_ = json.Unmarshal(body, &ans)
				orders[i] = ans.OrderID
			}
		})
	}
	// A first round on a sale of its own warms the child (connections,
	// the shoppers' first requests), so neither measured phase pays for it.
	warm, err := createSale(ctx, base, cfg.Sessions.AdminToken, int64(n), nil)
	if err != nil {
		return r, err
	}
	if _, err := buys(warm, nil); err != nil {
		return r, fmt.Errorf("warm-up buys: %w", err)
	}
	if _, err := ledgerLag(ctx, base, cfg.Sessions.AdminToken, warm, int64(n)); err != nil {
		return r, err
	}
	orders := make([]string, n)
	r.buy = measureOn(ctx, redisOf, child, func() (int64, error) {
		ok, err := buys(plain, orders)
		if err == nil {
			_, err = ledgerLag(ctx, base, cfg.Sessions.AdminToken, plain, ok)
		}
		return ok, err
	})
	if r.buy.err != nil {
		return r, fmt.Errorf("plain buys: %w", r.buy.err)
	}
	platform := func(want int64) error { // every charge in the ledger and followed to the platform's account
		return waitBalance(ctx, wallets, seckill.PlatformAccount, want)
	}
	r.instant = measureOn(ctx, redisOf, child, func() (int64, error) {
		ok, err := buys(instant, nil)
		if err == nil {
			_, err = statReaches(ctx, base, cfg.Sessions.AdminToken, instant, "orders_paid", ok)
		}
		if err == nil {
			err = platform(ok * instantPrice)
		}
		return ok, err
	})
	if r.instant.err != nil {
		return r, fmt.Errorf("instant buys: %w", r.instant.err)
	}
	r.pay = measureOn(ctx, redisOf, child, func() (int64, error) {
		ok, err := drive(ctx, client, n, o.Clients, func(i int) (string, string, any) {
			return base + "/api/orders/" + orders[i] + "/pay", tokens[i], nil
		}, nil)
		if err == nil {
			err = platform((r.instant.ok + ok) * instantPrice)
		}
		return ok, err
	})
	if r.pay.err != nil {
		return r, fmt.Errorf("pay: %w", r.pay.err)
	}
	r.verdict = "exact"
	if r.buy.ok != int64(n) || r.instant.ok != int64(n) || r.pay.ok != int64(n) {
		r.verdict = fmt.Sprintf("WRONG: %d plain, %d instant of %d bought, %d paid", r.buy.ok, r.instant.ok, n, r.pay.ok)
	}
	return r, nil
}
