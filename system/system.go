// Package system assembles a Seckill process from its configuration: it
// opens the services (or starts them inside the process, embedded), builds
// the stores on them, and from those the buy chain, the services, the
// HTTP server, the outbox relay, the consumers and the reconciler, each with
// a small config of its own taken from package configs here. The command,
// the test helpers and the benchmark suite all build their parts through
// it, so a process is wired one way only.
package system

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/seckill/seckill/bus"
	"github.com/seckill/seckill/bus/rabbitmq"
	"github.com/seckill/seckill/configs"
	"github.com/seckill/seckill/funds"
	"github.com/seckill/seckill/internal/rdb"
	"github.com/seckill/seckill/internal/wait"
	"github.com/seckill/seckill/inventory"
	"github.com/seckill/seckill/orders"
	"github.com/seckill/seckill/worker"
)

// Conns are the connections a System runs on.
type Conns struct {
	Redis rdb.Client
	DB    *sqlx.DB
	// Bus is the message bus; nil where none is needed (a server alone).
	Bus bus.Bus
}

// System is the connections of a process and the stores on them.
type System struct {
	Config configs.Config
	Conns
	Stock    *inventory.Store
	Funds    *funds.Store
	Ledger   *orders.Store
	Registry *prometheus.Registry
	Metrics  Metrics
	// Embedded is set when the services run inside this process.
	Embedded bool

	checks  map[string]func(context.Context) error
	closers []func() error
	// written, set behind embedded mode's write-through, is the ledger
	// the consumers write: it holds what they are handed already.
	written *worker.WrittenLedger
}

// New builds the stores of a system on its connections; its metrics
// register with registry (nil: a registry of the system's own,
// with the Go runtime's and the process's).
func New(cfg configs.Config, c Conns, registry *prometheus.Registry) *System {
	if registry == nil {
		registry = prometheus.NewRegistry()
		registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	m := NewMetrics(registry)
	icfg := InventoryConfig(cfg)
	icfg.OnWaitTimeout = m.Process.WaitTimedOut
	fcfg := FundsConfig(cfg)
	fcfg.Replicas.OnTimeout = m.Process.WaitTimedOut
	wallets := funds.New(c.Redis, fcfg)
	icfg.Wallets, icfg.FeeBps = wallets, cfg.Funds.FeeBps
	s := &System{
		Config: cfg, Conns: c, Registry: registry, Metrics: m,
		Stock:  inventory.New(c.Redis, icfg),
		Funds:  wallets,
		Ledger: orders.NewStore(c.DB),
	}
	registry.MustRegister(newLiveCollector(s))
	s.checks = map[string]func(context.Context) error{
		"redis":  func(ctx context.Context) error { return rdb.Ping(ctx, c.Redis) },
		"mysql":  c.DB.PingContext,
		"schema": func(ctx context.Context) error { return orders.CheckSchema(ctx, c.DB) },
	}
	if c.Bus != nil {
		s.checks["rabbitmq"] = c.Bus.Ping
	}
	return s
}

// Open connects to Redis, the ledger and the bus (which connects on first
// use and reconnects by itself) as configured, or starts them in this
// process in embedded mode.
func Open(ctx context.Context, cfg configs.Config) (*System, error) {
	if cfg.Process.Embedded {
		return openEmbedded(ctx, cfg)
	}
	var closers []func() error
	closeAll := func() {
		for i := len(closers) - 1; i >= 0; i-- {
			_ = closers[i]()
		}
	}
	rdb, err := OpenRedis(ctx, cfg)
	if err != nil {
		return nil, err
	}
	closers = append(closers, rdb.Close)
	db, err := OpenMySQL(ctx, cfg)
	if err != nil {
		closeAll()
		return nil, err
	}
	closers = append(closers, db.Close)
	b := rabbitmq.New(cfg.AMQP.URL, cfg.AMQP.Prefix, cfg.AMQP.QueueType)
	closers = append(closers, b.Close)
	s := New(cfg, Conns{Redis: rdb, DB: db, Bus: b}, nil)
	s.closers = closers
	return s, nil
}

// OpenRedis connects to the configured Redis.
func OpenRedis(ctx context.Context, cfg configs.Config) (rdb.Client, error) {
	c, err := rdb.Open(ctx, RedisOptions(cfg))
	if err != nil {
		where := "SECKILL_REDIS_ADDR"
		if cfg.Redis.Sentinels != "" {
			where = "SECKILL_REDIS_SENTINELS, SECKILL_REDIS_MASTER"
		}
		return nil, fmt.Errorf("%w (%s)", err, where)
	}
	return c, nil
}

// OpenMySQL connects to MySQL, creating the database if it is missing.
func OpenMySQL(ctx context.Context, cfg configs.Config) (*sqlx.DB, error) {
	octx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	db, err := orders.Open(octx, cfg.MySQL.DSN)
	if err != nil {
		return nil, fmt.Errorf("mysql (SECKILL_MYSQL_DSN): %w", err)
	}
	return db, nil
}

// Close releases what Open opened, last first.
func (s *System) Close() {
	for i := len(s.closers) - 1; i >= 0; i-- {
		if err := s.closers[i](); err != nil {
			slog.Warn("closing", "err", err)
		}
	}
}

// Ready are the readiness checks of the services, by name.
func (s *System) Ready() map[string]func(context.Context) error { return s.checks }

// DeadLetters counts the dead-letter queue (for /readyz and the dashboard).
func (s *System) DeadLetters(ctx context.Context) (int, error) { return s.Bus.Depth(ctx, bus.Dead) }

// Prepare makes sure the services are fit to run on before a long-running
// command starts: the schema is current (migrated when migrate is set or
// auto_migrate is on, refused otherwise) and Redis keeps its data, as far
// as the environment demands. An embedded system is migrated and restored
// from its ledger instead.
func (s *System) Prepare(ctx context.Context, migrate bool) error {
	if s.Embedded {
		if err := Migrate(ctx, s.DB); err != nil {
			return err
		}
		return s.restore(ctx)
	}
	if migrate || s.Config.MySQL.AutoMigrate {
		if err := Migrate(ctx, s.DB); err != nil {
			return err
		}
	} else if err := orders.CheckSchema(ctx, s.DB); err != nil {
		return err
	}
	return s.checkDurability(ctx)
}

// checkDurability warns (development) or refuses to start (production,
// unless redis_allow_volatile) when Redis keeps its data only in memory.
func (s *System) checkDurability(ctx context.Context) error {
	dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	desc, err := rdb.Durability(dctx, s.Redis)
	if err == nil || errors.Is(err, rdb.ErrVolatile) { // a failed read says nothing
		s.Metrics.Process.Durability(err == nil, s.Config.Production())
	}
	switch {
	case err == nil:
		slog.Info("redis persistence", "masters", desc)
	case !errors.Is(err, rdb.ErrVolatile):
		slog.Warn("could not read Redis persistence", "err", err)
	case s.Config.Production() && !s.Config.Redis.AllowVolatile:
		return fmt.Errorf("%w: a Redis restart would lose accepted orders and the stock; "+
			"run it with appendonly yes (see configs/redis.conf) or set SECKILL_REDIS_ALLOW_VOLATILE=1", err)
	default:
		slog.Warn("redis keeps its data only in memory: a Redis restart loses the orders accepted but not yet "+
			"relayed, and the stock (`seckill reconcile --repair` rebuilds the stock from the ledger); "+
			"use appendonly yes in production (configs/redis.conf)", "err", err)
	}
	return nil
}

// WatchDurability reads every minute whether Redis persists its data, for
// the alert on a production Redis that stopped (CONFIG SET appendonly no),
// until ctx ends.
func (s *System) WatchDurability(ctx context.Context) {
	wait.Every(ctx, time.Minute, func() {
		dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		_, err := rdb.Durability(dctx, s.Redis)
		if err == nil || errors.Is(err, rdb.ErrVolatile) {
			s.Metrics.Process.Durability(err == nil, s.Config.Production())
		}
	})
}

// Migrate brings the ledger's schema up to date.
func Migrate(ctx context.Context, db *sqlx.DB) error {
	res, err := orders.Migrate(ctx, db)
	for _, r := range res {
		slog.Info("migration applied", "version", r.Source.Version, "file", r.Source.Path, "took", r.Duration)
	}
	if err != nil {
		return err
	}
	slog.Info("schema up to date")
	return nil
}
