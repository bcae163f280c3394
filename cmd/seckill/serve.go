package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/bus/rabbitmq"
	"github.com/seckill/seckill/configs"
	"github.com/seckill/seckill/inventory"
	"github.com/seckill/seckill/orders"
	"github.com/seckill/seckill/server"
	"github.com/seckill/seckill/worker"
)

func runAll(ctx context.Context, cfg configs.Config, args []string) error {
	if len(args) > 0 {
		return fmt.Errorf("%w: all takes no arguments", errUsage)
	}
	if err := migrate(ctx, cfg); err != nil {
		return err
	}
	return serve(ctx, cfg, true)
}

func runServe(ctx context.Context, cfg configs.Config, args []string) error {
	if len(args) > 0 {
		return fmt.Errorf("%w: serve takes no arguments", errUsage)
	}
	return serve(ctx, cfg, false)
}

func runMigrate(ctx context.Context, cfg configs.Config, args []string) error {
	if len(args) > 0 {
		return fmt.Errorf("%w: migrate takes no arguments", errUsage)
	}
	return migrate(ctx, cfg)
}

func migrate(ctx context.Context, cfg configs.Config) error {
	db, err := openMySQL(ctx, cfg)
	if err != nil {
		return err
	}
	defer db.Close()
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

// system holds the connections and shared parts a command runs on.
type system struct {
	cfg      configs.Config
	rdb      *redis.Client
	db       *sqlx.DB
	inv      *inventory.Store
	ledger   *orders.Store
	bus      *rabbitmq.Bus
	registry *prometheus.Registry
	metrics  *worker.Metrics
}

// open connects to Redis and MySQL and prepares the broker (which connects
// on first use and reconnects by itself).
func open(ctx context.Context, cfg configs.Config) (*system, error) {
	rdb, err := openRedis(ctx, cfg)
	if err != nil {
		return nil, err
	}
	db, err := openMySQL(ctx, cfg)
	if err != nil {
		rdb.Close()
		return nil, err
	}
	registry := prometheus.NewRegistry()
	registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return &system{
		cfg: cfg, rdb: rdb, db: db, registry: registry,
		inv:     inventory.New(rdb, inventory.NewKeys(cfg.RedisPrefix)),
		ledger:  orders.NewStore(db),
		bus:     rabbitmq.New(cfg.AMQPURL, cfg.AMQPPrefix, cfg.AMQPQueueType),
		metrics: worker.NewMetrics(registry),
	}, nil
}

func (s *system) close() {
	if err := s.bus.Close(); err != nil {
		slog.Warn("closing rabbitmq connection", "err", err)
	}
	s.db.Close()
	s.rdb.Close()
}

// ready are the readiness checks of the services.
func (s *system) ready() map[string]func(context.Context) error {
	return map[string]func(context.Context) error{
		"redis":    func(ctx context.Context) error { return s.rdb.Ping(ctx).Err() },
		"mysql":    s.db.PingContext,
		"rabbitmq": s.bus.Ping,
	}
}

func (s *system) relay() *worker.Relay {
	return worker.NewRelay(s.rdb, s.inv.Keys(), s.ledger, s.bus, s.metrics, worker.RelayConfigOf(s.cfg))
}

func (s *system) worker() *worker.Worker {
	return worker.New(s.bus, s.ledger, s.inv, s.metrics, worker.ConfigOf(s.cfg))
}

// serve runs the HTTP server and the outbox relay (and, for `all`, the
// worker) until ctx is cancelled, then shuts them down in order: stop
// taking requests and drain them, flush the relay, let the worker finish
// its batch, close connections.
func serve(ctx context.Context, cfg configs.Config, withWorker bool) error {
	slog.Info("starting", "config", cfg)
	if cfg.GeneratedAdminPassword {
		// Development only: production requires SECKILL_ADMIN_PASSWORD.
		fmt.Printf("\n  admin password (development default, set SECKILL_ADMIN_PASSWORD to choose one): %s\n\n", cfg.AdminPassword)
	}
	sys, err := open(ctx, cfg)
	if err != nil {
		return err
	}
	defer sys.close()

	srv, err := server.New(cfg, server.Deps{
		Redis:     sys.rdb,
		Inventory: sys.inv,
		Ledger:    sys.ledger,
		Registry:  sys.registry,
		Ready:     sys.ready(),
	})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", cfg.HTTPAddr)
	if err != nil {
		return fmt.Errorf("listen on %s (SECKILL_HTTP_ADDR): %w", cfg.HTTPAddr, err)
	}

	if cfg.OpsAddr != "" {
		stop, err := serveOps(ctx, cfg.OpsAddr, "SECKILL_OPS_ADDR", sys)
		if err != nil {
			return err
		}
		defer stop()
	}
	background := context.WithoutCancel(ctx)
	stopRelay := start(background, "relay", sys.relay().Run)
	stopWorker := func() {}
	if withWorker {
		stopWorker = start(background, "worker", sys.worker().Run)
	}
	err = srv.Run(ctx, ln)
	slog.Info("http server stopped; flushing the relay")
	stopRelay()
	slog.Info("relay stopped; stopping the worker")
	stopWorker()
	slog.Info("stopped")
	return err
}

// start runs fn in the background and returns a function that cancels it
// and waits for it to return.
func start(ctx context.Context, name string, fn func(context.Context) error) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := fn(ctx); err != nil && !errors.Is(err, context.Canceled) {
			slog.Error(name+" stopped", "err", err)
		}
	}()
	return func() {
		cancel()
		<-done
	}
}

func runWorker(ctx context.Context, cfg configs.Config, args []string) error {
	if len(args) > 0 {
		return fmt.Errorf("%w: worker takes no arguments", errUsage)
	}
	slog.Info("starting worker", "config", cfg)
	sys, err := open(ctx, cfg)
	if err != nil {
		return err
	}
	defer sys.close()
	if cfg.WorkerMetricsAddr != "" {
		stop, err := serveOps(ctx, cfg.WorkerMetricsAddr, "SECKILL_WORKER_METRICS_ADDR", sys)
		if err != nil {
			return err
		}
		defer stop()
	}
	return sys.worker().Run(ctx)
}

// serveOps serves the operations listener (/metrics, /healthz, /readyz,
// /debug/pprof/) on addr, the value of the setting named.
func serveOps(ctx context.Context, addr, setting string, sys *system) (stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s (%s): %w", addr, setting, err)
	}
	srv := &http.Server{Handler: server.OpsHandler(sys.registry, sys.ready()), ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	slog.Info("ops listener (metrics, health, pprof)", "addr", ln.Addr().String())
	return func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		srv.Shutdown(sctx)
	}, nil
}

// openRedis connects to Redis and checks that it answers.
func openRedis(ctx context.Context, cfg configs.Config) (*redis.Client, error) {
	rdb := redis.NewClient(&redis.Options{
		Addr: cfg.RedisAddr, DB: cfg.RedisDB, Password: cfg.RedisPassword, PoolSize: cfg.RedisPoolSize,
	})
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := rdb.Ping(pctx).Err(); err != nil {
		rdb.Close()
		return nil, fmt.Errorf("redis at %s (SECKILL_REDIS_ADDR) does not answer: %w", cfg.RedisAddr, err)
	}
	return rdb, nil
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
