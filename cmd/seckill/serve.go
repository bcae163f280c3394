package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/configs"
	"github.com/seckill/seckill/inventory"
	"github.com/seckill/seckill/orders"
	"github.com/seckill/seckill/server"
)

func runAll(ctx context.Context, cfg configs.Config, args []string) error {
	if len(args) > 0 {
		return fmt.Errorf("%w: all takes no arguments", errUsage)
	}
	if err := migrate(ctx, cfg); err != nil {
		return err
	}
	return serve(ctx, cfg)
}

func runServe(ctx context.Context, cfg configs.Config, args []string) error {
	if len(args) > 0 {
		return fmt.Errorf("%w: serve takes no arguments", errUsage)
	}
	return serve(ctx, cfg)
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

func notImplemented(name string) func(context.Context, configs.Config, []string) error {
	return func(context.Context, configs.Config, []string) error {
		return fmt.Errorf("%s: not implemented yet", name)
	}
}

var (
	runWorker    = notImplemented("worker")
	runLoadtest  = notImplemented("loadtest")
	runReconcile = notImplemented("reconcile")
	runBench     = notImplemented("bench")
)

// serve runs the HTTP server until ctx is cancelled.
func serve(ctx context.Context, cfg configs.Config) error {
	slog.Info("starting", "config", cfg)
	if cfg.GeneratedAdminPassword {
		// Development only: production requires SECKILL_ADMIN_PASSWORD.
		fmt.Printf("\n  admin password (development default, set SECKILL_ADMIN_PASSWORD to choose one): %s\n\n", cfg.AdminPassword)
	}

	rdb, err := openRedis(ctx, cfg)
	if err != nil {
		return err
	}
	defer rdb.Close()
	db, err := openMySQL(ctx, cfg)
	if err != nil {
		return err
	}
	defer db.Close()

	registry := prometheus.NewRegistry()
	registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	inv := inventory.New(rdb, inventory.NewKeys(cfg.RedisPrefix))
	srv, err := server.New(cfg, server.Deps{
		Redis:     rdb,
		Inventory: inv,
		Ledger:    orders.NewStore(db),
		Registry:  registry,
		Ready: map[string]func(context.Context) error{
			"redis": func(ctx context.Context) error { return rdb.Ping(ctx).Err() },
			"mysql": db.PingContext,
		},
	})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", cfg.HTTPAddr)
	if err != nil {
		return fmt.Errorf("listen on %s (SECKILL_HTTP_ADDR): %w", cfg.HTTPAddr, err)
	}
	return srv.Run(ctx, ln)
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
		return nil, fmt.Errorf("mysql (SECKILL_MYSQL_DSN): %w", errors.Unwrap(err))
	}
	return db, nil
}
