// Package bench is the benchmark suite behind `seckill bench` (make bench).
// Each case runs its contenders side by side in one run, against the real
// local Redis, RabbitMQ and MySQL, and reports ratios to a baseline measured
// in the same run, because the machine is shared and noisy. Every case works
// in names of its own (Redis prefix, MySQL database, queue prefix) and
// removes them afterwards.
package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"sort"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill"
	"github.com/seckill/seckill/bus/rabbitmq"
	"github.com/seckill/seckill/configs"
	"github.com/seckill/seckill/funds"
	"github.com/seckill/seckill/internal/wait"
	"github.com/seckill/seckill/inventory"
	"github.com/seckill/seckill/orders"
	"github.com/seckill/seckill/server"
	"github.com/seckill/seckill/system"
)

// Options tune a run.
type Options struct {
	// Duration is how long each timed contender runs.
	Duration time.Duration
	// Orders is the size of the pipeline case.
	Orders int
	// Clients is the number of concurrent clients where a case has them.
	Clients int
	// WSClients is the number of WebSocket clients of the fan-out case.
	WSClients int
	// Crowd is the number of shoppers in the waiting room case's pre-queue.
	Crowd int
	// Chart is where the capacity case writes its PNG (default
	// ./capacity.png); Rates its ramp (nil: 500 to 18,000 a second).
	Chart string
	Rates []float64
	// Binary is the seckill binary that cases start as a child process;
	// empty means this executable.
	Binary string
	// Baseline is an earlier seckill binary the embedded case runs too
	// (empty: none).
	Baseline string
}

// Table is one case's result.
type Table struct {
	Title  string
	Header []string
	Rows   [][]string
	Goals  []Goal
	Notes  []string
}

// Goal is a target a case checks, such as "Lua ≥ 10× FOR UPDATE".
type Goal struct {
	What      string
	Got, Want float64
}

// Met reports whether the goal was reached.
func (g Goal) Met() bool { return g.Got >= g.Want }

// Case is one benchmark.
type Case struct {
	Name string
	Doc  string
	Run  func(ctx context.Context, e *Env, o Options) (Table, error)
}

// Cases lists the suite in the order it runs.
var Cases = []Case{
	{"article", "one hot item: SELECT … FOR UPDATE vs WATCH/MULTI/EXEC vs Lua, deductions/s and correctness", articleCase},
	{"coalesce", "decisions/s on one hot sale: coalesced by the batcher vs one EVALSHA per request", coalesceCase},
	{"http", "the buy endpoint over HTTP vs a no-work baseline route, with stock and after sold out", httpCase},
	{"outside", "wrk against a seckill all child: GET /healthz vs buy with stock and sold out (without and with buy tickets), CPU per request", outsideCase},
	{"pipeline", "orders/s from outbox to committed MySQL rows vs a naive consumer and raw INSERTs", pipelineCase},
	{"ws", "WebSocket fan-out: time until every watcher has a stock change, server memory per connection", wsCase},
	{"wsburst", "live stock while a sale sells out: frame gaps and time to 0 for 100 and --ws-clients watchers, server memory and CPU", wsBurstCase},
	{"embedded", "the whole system embedded in one process vs on the services: start-up, buys/s, p99, ledger lag", embeddedCase},
	{"identity", "what identities cost: buys with the provider's bearer tokens vs session tokens (server CPU per request), password sign-ins (CPU each, unknown email vs wrong password)", identityCase},
	{"room", "the waiting room: server CPU per buy with an admission pass vs without a room, and a crowd in the pre-queue let in at 500/s (rate, queue frames' gap, fairness)", roomCase},
	{"capacity", "open-loop ramp against a seckill all child: the highest arrival rate with p99 < 50 ms and no error, with stock and sold out, this design vs one EVALSHA per request, CPU per order per process, and a chart", capacityCase},
	{"money", "wallets: server CPU per pay vs per buy against a `seckill all` child, Redis CPU per funds decision, the whole system's CPU per paid order vs per order", moneyCase},
	{"instant", "instant checkout: server and Redis CPU per instant-checkout buy vs a plain buy on one Redis and on a 3-master Cluster, the whole system's CPU per paid order vs buy-then-pay", instantCase},
	{"scaleout", "one hot sale on a 3-master Redis Cluster: one shard vs 3 buckets, with and without WAIT 1", scaleoutCase},
}

// Run runs the named cases (all when names is empty) and returns their
// tables.
func Run(ctx context.Context, cfg configs.Config, names []string, o Options, progress io.Writer) ([]Table, error) {
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	all := len(want) == 0
	var out []Table
	for _, c := range Cases {
		if !all && !want[c.Name] {
			continue
		}
		delete(want, c.Name)
		fmt.Fprintf(progress, "bench: %s: %s\n", c.Name, c.Doc)
		e, err := newEnv(ctx, cfg)
		if err != nil {
			return out, err
		}
		t, err := c.Run(ctx, e, o)
		e.close()
		if err != nil {
			return out, fmt.Errorf("bench %s: %w", c.Name, err)
		}
		out = append(out, t)
	}
	if len(want) > 0 {
		var unknown []string
		for n := range want {
			unknown = append(unknown, n)
		}
		sort.Strings(unknown)
		return out, fmt.Errorf("unknown bench case %s", strings.Join(unknown, ", "))
	}
	return out, nil
}

// Markdown renders tables as a markdown document section.
func Markdown(w io.Writer, tables []Table) {
	for _, t := range tables {
		fmt.Fprintf(w, "### %s\n\n", t.Title)
		fmt.Fprintf(w, "| %s |\n|%s\n", strings.Join(t.Header, " | "), strings.Repeat("---|", len(t.Header)))
		for _, r := range t.Rows {
			fmt.Fprintf(w, "| %s |\n", strings.Join(r, " | "))
		}
		fmt.Fprintln(w)
		for _, g := range t.Goals {
			mark := "met"
			if !g.Met() {
				mark = "NOT met"
			}
			fmt.Fprintf(w, "- Goal %s: measured %.2f, target %.2f: **%s**\n", g.What, g.Got, g.Want, mark)
		}
		for _, n := range t.Notes {
			fmt.Fprintf(w, "- %s\n", n)
		}
		fmt.Fprintln(w)
	}
}

// Machine describes where the run happened.
func Machine() string {
	return fmt.Sprintf("%s/%s, %d CPUs, %s", runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), runtime.Version())
}

// Env is one case's slice of the services.
type Env struct {
	Config configs.Config
	Redis  *redis.Client
	DB     *sqlx.DB
	Inv    *inventory.Store
	Funds  *funds.Store
	Ledger *orders.Store
	Broker *rabbitmq.Bus
	dbName string
}

func newEnv(ctx context.Context, base configs.Config) (*Env, error) {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	id := hex.EncodeToString(b)
	cfg := base
	cfg.Redis.Prefix = "bench" + id
	cfg.AMQP.Prefix = "bench" + id
	dsn, err := mysql.ParseDSN(cfg.MySQL.DSN)
	if err != nil {
		return nil, fmt.Errorf("SECKILL_MYSQL_DSN: %w", err)
	}
	dsn.DBName = "seckill_bench_" + id
	cfg.MySQL.DSN = dsn.FormatDSN()

	e := &Env{Config: cfg, dbName: dsn.DBName}
	e.Redis = redis.NewClient(&redis.Options{Addr: cfg.Redis.Addr, DB: cfg.Redis.DB, Password: cfg.Redis.Password, PoolSize: 256})
	if err := e.Redis.Ping(ctx).Err(); err != nil {
		e.Redis.Close()
		return nil, fmt.Errorf("redis at %s: %w", cfg.Redis.Addr, err)
	}
	if e.DB, err = orders.Open(ctx, cfg.MySQL.DSN); err != nil {
		e.Redis.Close()
		return nil, err
	}
	e.DB.SetMaxOpenConns(128)
	e.DB.SetMaxIdleConns(128)
	if _, err := orders.Migrate(ctx, e.DB); err != nil {
		e.close()
		return nil, err
	}
	e.Broker = rabbitmq.New(cfg.AMQP.URL, cfg.AMQP.Prefix, cfg.AMQP.QueueType)
	if err := e.Broker.Ping(ctx); err != nil {
		e.close()
		return nil, fmt.Errorf("rabbitmq: %w", err)
	}
	sys := system.New(cfg, e.conns(), nil)
	e.Inv, e.Funds, e.Ledger = sys.Stock, sys.Funds, sys.Ledger
	return e, nil
}

func (e *Env) close() {
	if e.Broker != nil {
		if err := e.Broker.DeleteAll(e.Config.Orders.PaymentWindow); err != nil {
			slog.Warn("bench: deleting queues", "err", err)
		}
		e.Broker.Close()
	}
	if e.DB != nil {
		if _, err := e.DB.Exec("DROP DATABASE IF EXISTS `" + e.dbName + "`"); err != nil {
			slog.Warn("bench: dropping database", "err", err)
		}
		e.DB.Close()
	}
	ctx := context.Background()
	iter := e.Redis.Scan(ctx, 0, e.Config.Redis.Prefix+":*", 1000).Iterator()
	for iter.Next(ctx) {
		e.Redis.Unlink(ctx, iter.Val())
	}
	// Redis frees unlinked keys in a background thread: a case's millions
	// of hash fields take it about a second of CPU, which must not land on
	// the next case's first contender.
	if err := e.lazyFreed(ctx, 30*time.Second); err != nil {
		slog.Warn("bench: waiting for Redis to free the case's keys", "err", err)
	}
	e.Redis.Close()
}

// info returns the fields of one INFO section.
func (e *Env) info(ctx context.Context, section string) (map[string]string, error) {
	return info(ctx, e.Redis, section)
}

// info reads one section of a Redis server's INFO.
func info(ctx context.Context, c *redis.Client, section string) (map[string]string, error) {
	text, err := c.Info(ctx, section).Result()
	if err != nil {
		return nil, err
	}
	fields := map[string]string{}
	for _, line := range strings.Split(text, "\n") {
		if name, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			fields[name] = v
		}
	}
	return fields, nil
}

// lazyFreed waits until Redis has no unlinked objects left to free.
func (e *Env) lazyFreed(ctx context.Context, limit time.Duration) error {
	return wait.Until(ctx, limit, 20*time.Millisecond, func() (bool, string, error) {
		info, err := e.info(ctx, "memory")
		pending := info["lazyfree_pending_objects"]
		// "": a Redis that does not report it.
		return pending == "0" || pending == "", pending + " objects pending", err
	})
}

func (e *Env) conns() system.Conns { return system.Conns{Redis: e.Redis, DB: e.DB, Bus: e.Broker} }

// server builds an HTTP server on the env with configuration cfg (not
// listening); reserver nil is the configured buy chain.
func (e *Env) server(cfg configs.Config, reserver server.Reserver) (*server.Server, error) {
	return system.New(cfg, e.conns(), nil).Server(prometheus.NewRegistry(), reserver)
}

// sale creates a sale that runs for an hour.
func (e *Env) sale(ctx context.Context, srv *server.Server, total, limit, price int64) (seckill.Sale, error) {
	now := time.Now()
	v, err := srv.Sales.Create(ctx, seckill.Sale{
		Name: "bench", Item: "bench item", PriceCents: price, Total: total, PerUserLimit: limit,
		StartsAt: now.Add(-time.Second), EndsAt: now.Add(time.Hour),
	}.Input())
	return v.Sale, err
}

// soldOutSale creates a one-unit sale, as sale does, and buys the unit.
func (e *Env) soldOutSale(ctx context.Context, srv *server.Server) (seckill.Sale, error) {
	sale, err := e.sale(ctx, srv, 1, 1, 100)
	if err != nil {
		return sale, err
	}
	_, err = e.Inv.Reserve(ctx, sale.ID, []seckill.Buy{{
		UserID: "first", Qty: 1, RequestID: "bench-sold-out", OrderID: seckill.NewOrderID(sale.ID),
	}})
	return sale, err
}

func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

func f0(v float64) string { return fmt.Sprintf("%.0f", v) }
func f2(v float64) string { return fmt.Sprintf("%.2f", v) }
