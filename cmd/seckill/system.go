package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/bus"
	"github.com/seckill/seckill/bus/rabbitmq"
	"github.com/seckill/seckill/configs"
	"github.com/seckill/seckill/inventory"
	"github.com/seckill/seckill/orders"
	"github.com/seckill/seckill/server"
	"github.com/seckill/seckill/worker"
)

// system holds the connections and shared parts a command runs on.
type system struct {
	cfg      configs.Config
	rdb      redis.UniversalClient
	db       *sqlx.DB
	inv      *inventory.Store
	ledger   *orders.Store
	bus      bus.Bus
	registry *prometheus.Registry
	metrics  *worker.Metrics
	// checks are the readiness checks by name.
	checks map[string]func(context.Context) error
	// closers release what open opened, last first.
	closers []func() error
	// embedded is set when the services run in this process.
	embedded bool
}

// open connects to Redis and the ledger and prepares the bus (which
// connects on first use and reconnects by itself), or starts them in this
// process in embedded mode.
func open(ctx context.Context, cfg configs.Config) (*system, error) {
	if cfg.Embedded {
		return openEmbedded(ctx, cfg)
	}
	registry := prometheus.NewRegistry()
	registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	sys := &system{cfg: cfg, registry: registry, metrics: worker.NewMetrics(registry)}
	rdb, err := inventory.Open(ctx, cfg)
	if err != nil {
		return nil, err
	}
	sys.closers = append(sys.closers, rdb.Close)
	db, err := openMySQL(ctx, cfg)
	if err != nil {
		sys.close()
		return nil, err
	}
	sys.closers = append(sys.closers, db.Close)
	b := rabbitmq.New(cfg.AMQPURL, cfg.AMQPPrefix, cfg.AMQPQueueType)
	sys.closers = append(sys.closers, b.Close)
	sys.rdb, sys.db, sys.bus = rdb, db, b
	sys.inv = inventory.New(rdb, inventory.NewKeys(cfg.RedisPrefix)).WithDurability(cfg.RedisWaitReplicas, cfg.RedisWaitTimeout)
	sys.ledger = orders.NewStore(db)
	sys.checks = map[string]func(context.Context) error{
		"redis":    func(ctx context.Context) error { return inventory.EachMaster(ctx, rdb, pingRedis) },
		"mysql":    db.PingContext,
		"schema":   func(ctx context.Context) error { return orders.CheckSchema(ctx, db) },
		"rabbitmq": b.Ping,
	}
	return sys, nil
}

func pingRedis(ctx context.Context, c *redis.Client) error { return c.Ping(ctx).Err() }

func (s *system) close() {
	for i := len(s.closers) - 1; i >= 0; i-- {
		if err := s.closers[i](); err != nil {
			slog.Warn("closing", "err", err)
		}
	}
}

// ready are the readiness checks of the services.
func (s *system) ready() map[string]func(context.Context) error { return s.checks }

// deadLetters counts the dead-letter queue (for /readyz and the dashboard).
func (s *system) deadLetters(ctx context.Context) (int, error) { return s.bus.Depth(ctx, bus.Dead) }

// prepare makes sure the services are fit to run on before a long-running
// command starts: the schema is current (migrated when migrate is set or
// auto_migrate is on, refused otherwise) and Redis keeps its data, as far
// as the environment demands. An embedded system is migrated and restored
// from its ledger instead.
func (s *system) prepare(ctx context.Context, migrate bool) error {
	if s.embedded {
		if err := applyMigrations(ctx, s.db); err != nil {
			return err
		}
		return s.restore(ctx)
	}
	if migrate || s.cfg.AutoMigrate {
		if err := applyMigrations(ctx, s.db); err != nil {
			return err
		}
	} else if err := orders.CheckSchema(ctx, s.db); err != nil {
		return err
	}
	return s.checkDurability(ctx)
}

// checkDurability warns (development) or refuses to start (production,
// unless redis_allow_volatile) when Redis keeps its data only in memory.
func (s *system) checkDurability(ctx context.Context) error {
	dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	desc, err := inventory.Durability(dctx, s.rdb)
	switch {
	case err == nil:
		slog.Info("redis persistence", "masters", desc)
	case !errors.Is(err, inventory.ErrVolatile):
		slog.Warn("could not read Redis persistence", "err", err)
	case s.cfg.Production() && !s.cfg.RedisAllowVolatile:
		return fmt.Errorf("%w: a Redis restart would lose accepted orders and the stock; "+
			"run it with appendonly yes (see configs/redis.conf) or set SECKILL_REDIS_ALLOW_VOLATILE=1", err)
	default:
		slog.Warn("redis keeps its data only in memory: a Redis restart loses the orders accepted but not yet "+
			"relayed, and the stock (`seckill reconcile --repair` rebuilds the stock from the ledger); "+
			"use appendonly yes in production (configs/redis.conf)", "err", err)
	}
	return nil
}

func (s *system) relay() *worker.Relay {
	return worker.NewRelay(s.rdb, s.inv.Keys(), s.inv, s.ledger, s.bus, s.metrics, worker.RelayConfigOf(s.cfg))
}

func (s *system) worker() *worker.Worker {
	return worker.New(s.bus, s.ledger, s.inv, s.metrics, worker.ConfigOf(s.cfg))
}

// reconciler checks Redis against the ledger and repairs it.
func (s *system) reconciler() *worker.Reconciler {
	keep := s.cfg.PaymentWindow + s.cfg.SaleRetention
	return worker.NewReconciler(s.inv, s.ledger, func(sl orders.Sale) inventory.Sale { return server.StockOf(sl, keep) },
		worker.ReconcilerConfigOf(s.cfg, s.bus))
}

// runWorkers runs the order worker and, every reconcile_interval, the
// reconciler's watch, until ctx ends.
func (s *system) runWorkers(ctx context.Context) error {
	if s.cfg.ReconcileInterval > 0 {
		stop := start(ctx, "reconciler", func(ctx context.Context) error {
			s.reconciler().Watch(ctx, s.ledger, s.cfg.PaymentWindow+s.cfg.SaleRetention, s.cfg.ReconcileInterval)
			return nil
		})
		defer stop()
	}
	return s.worker().Run(ctx)
}

// openMySQL connects to MySQL, creating the database if it is missing.
func openMySQL(ctx context.Context, cfg configs.Config) (*sqlx.DB, error) {
	octx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	db, err := orders.Open(octx, cfg.MySQLDSN)
	if err != nil {
		return nil, fmt.Errorf("mysql (SECKILL_MYSQL_DSN): %w", err)
	}
	return db, nil
}

// applyMigrations brings the ledger's schema up to date.
func applyMigrations(ctx context.Context, db *sqlx.DB) error {
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
