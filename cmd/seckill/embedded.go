package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/seckill/seckill/bus"
	"github.com/seckill/seckill/bus/memory"
	"github.com/seckill/seckill/configs"
	"github.com/seckill/seckill/inventory"
	"github.com/seckill/seckill/orders"
	"github.com/seckill/seckill/worker"
)

// openEmbedded runs the services inside this process: miniredis on a
// loopback port (the same go-redis client and Lua scripts as ever), the
// SQLite ledger in data_dir, the in-process bus. Nothing is shared with
// another process, so embedded mode is `seckill all` only.
func openEmbedded(ctx context.Context, cfg configs.Config) (*system, error) {
	registry := prometheus.NewRegistry()
	registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	sys := &system{cfg: cfg, registry: registry, metrics: worker.NewMetrics(registry), embedded: true}

	mr := miniredis.NewMiniRedis()
	if err := mr.StartAddr("127.0.0.1:0"); err != nil {
		return nil, fmt.Errorf("embedded redis: %w", err)
	}
	mr.ClockTTL(true) // keys expire with the wall clock, as on redis-server
	sys.closers = append(sys.closers, func() error { mr.Close(); return nil })
	rcfg := cfg
	rcfg.RedisAddr, rcfg.RedisSentinels, rcfg.RedisDB = mr.Addr(), "", 0
	rdb, err := inventory.Open(ctx, rcfg)
	if err != nil {
		sys.close()
		return nil, err
	}
	sys.closers = append(sys.closers, rdb.Close)
	db, err := orders.OpenSQLite(ctx, cfg.DataDir)
	if err != nil {
		sys.close()
		return nil, fmt.Errorf("ledger (SECKILL_DATA_DIR): %w", err)
	}
	sys.closers = append(sys.closers, db.Close)
	b := memory.New()
	sys.closers = append(sys.closers, b.Close)
	sys.rdb, sys.db, sys.bus = rdb, db, b
	sys.inv = inventory.New(rdb, inventory.NewKeys(cfg.RedisPrefix)).WithDurability(cfg.RedisWaitReplicas, cfg.RedisWaitTimeout)
	sys.ledger = orders.NewStore(db)
	sys.checks = map[string]func(context.Context) error{
		"redis":  func(ctx context.Context) error { return rdb.Ping(ctx).Err() },
		"sqlite": db.PingContext,
		"schema": func(ctx context.Context) error { return orders.CheckSchema(ctx, db) },
		"bus":    b.Ping,
	}
	slog.Info("embedded services", "redis", mr.Addr(), "ledger", cfg.DataDir, "bus", "in-process")
	return sys, nil
}

// restore brings an embedded system back after a start: the in-process
// Redis and bus begin empty, the SQLite ledger holds what was accepted.
// Each live sale's Redis state is rebuilt from the ledger (the repair
// path), and the pending orders get their payment timeouts again.
func (s *system) restore(ctx context.Context) error {
	ids, err := s.ledger.SaleIDs(ctx, time.Now().Add(-(s.cfg.PaymentWindow + s.cfg.SaleRetention)))
	if err != nil {
		return err
	}
	rc := s.reconciler()
	for _, id := range ids {
		if err := rc.Repair(ctx, id, 0); err != nil {
			return fmt.Errorf("restore sale %d: %w", id, err)
		}
	}
	n, err := worker.RearmTimeouts(ctx, s.bus, s.ledger, time.Now())
	if err != nil {
		return err
	}
	if len(ids) > 0 || n > 0 {
		slog.Info("restored from the ledger", "sales", len(ids), "pending orders re-armed", n)
	}
	return nil
}

// drain waits until the in-process bus has handed every order event to the
// worker, before the worker stops: what the bus still held would be gone
// with the process.
func (s *system) drain(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.ShutdownTimeout)
	defer cancel()
	for {
		n, err := s.bus.Depth(ctx, bus.Orders)
		if err != nil || n == 0 {
			return
		}
		select {
		case <-ctx.Done():
			slog.Warn("stopping with order events not yet written to the ledger", "events", n)
			return
		case <-time.After(20 * time.Millisecond):
		}
	}
}
