package system

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/alicebob/miniredis/v2"

	"github.com/seckill/seckill/bus"
	"github.com/seckill/seckill/bus/memory"
	"github.com/seckill/seckill/configs"
	"github.com/seckill/seckill/internal/rdb"
	"github.com/seckill/seckill/orders"
	"github.com/seckill/seckill/sessions"
	"github.com/seckill/seckill/worker"
)

// openEmbedded runs the services inside this process: miniredis on a
// loopback port (the same go-redis client and Lua scripts as ever), the
// SQLite ledger in data_dir, the in-process bus. Nothing is shared with
// another process, so embedded mode is `seckill all` only. A buy or a
// movement of money is answered only once it is in SQLite
// (worker.WriteThrough), so a crash loses nothing answered.
func openEmbedded(ctx context.Context, cfg configs.Config) (*System, error) {
	if cfg.Sessions.GeneratedAdminPassword {
		pw, err := keptPassword(cfg.Process.DataDir, cfg.Sessions.AdminPassword)
		if err != nil {
			return nil, err
		}
		cfg.Sessions.AdminPassword = pw
	}
	var closers []func() error
	closeAll := func() {
		for i := len(closers) - 1; i >= 0; i-- {
			_ = closers[i]()
		}
	}
	mr := miniredis.NewMiniRedis()
	if err := mr.StartAddr("127.0.0.1:0"); err != nil {
		return nil, fmt.Errorf("embedded redis: %w", err)
	}
	mr.ClockTTL(true) // keys expire with the wall clock, as on redis-server
	closers = append(closers, func() error { mr.Close(); return nil })
	redis, err := rdb.Open(ctx, rdb.Options{Addrs: []string{mr.Addr()}, PoolSize: cfg.Redis.PoolSize})
	if err != nil {
		closeAll()
		return nil, err
	}
	closers = append(closers, redis.Close)
	db, err := orders.OpenSQLite(ctx, cfg.Process.DataDir)
	if err != nil {
		closeAll()
		return nil, fmt.Errorf("ledger (SECKILL_DATA_DIR): %w", err)
	}
	closers = append(closers, db.Close)
	b := memory.New()
	closers = append(closers, b.Close)
	s := New(cfg, Conns{Redis: redis, DB: db, Bus: b}, nil)
	s.Embedded, s.closers = true, closers
	// The durability fence: a decision is answered once its orders and
	// movements are in SQLite, not when the bus carried them there.
	wt := worker.NewWriteThrough(s.Stock, s.Funds, s.Ledger, cfg.Orders.PaymentWindow)
	s.Stock.SetPersist(wt)
	s.Funds.SetPersist(wt.Group)
	s.written = wt.Written()
	s.checks = map[string]func(context.Context) error{
		"redis":  func(ctx context.Context) error { return rdb.Ping(ctx, redis) },
		"sqlite": db.PingContext,
		"schema": func(ctx context.Context) error { return orders.CheckSchema(ctx, db) },
		"bus":    b.Ping,
	}
	slog.Info("embedded services", "redis", mr.Addr(), "ledger", cfg.Process.DataDir, "bus", "in-process")
	return s, nil
}

// restore brings an embedded system back after a start: the in-process
// Redis and bus begin empty, the SQLite ledger holds what was accepted.
// Each live sale's Redis state is rebuilt from the ledger (the repair
// path), every account's balance is the ledger's sum of its transfers
// with the records of the movements made (worker.RestoreFunds), the
// pending orders get their payment timeouts again, and the admin
// sessions and sign-outs come back (sessions.Restore).
func (s *System) restore(ctx context.Context) error {
	ids, err := s.Ledger.SaleIDs(ctx, time.Now().Add(-s.Config.Orders.Keep()))
	if err != nil {
		return err
	}
	accounts, err := worker.RestoreFunds(ctx, s.Funds, s.Ledger, time.Now())
	if err != nil {
		return fmt.Errorf("restore the balances: %w", err)
	}
	rc := s.Reconciler()
	for _, id := range ids {
		if err := rc.Repair(ctx, id, 0); err != nil {
			return fmt.Errorf("restore sale %d: %w", id, err)
		}
	}
	n, err := worker.RearmTimeouts(ctx, s.Bus, s.Ledger, time.Now())
	if err != nil {
		return err
	}
	kept, err := sessions.Restore(ctx, s.Redis, s.Config.Redis.Prefix, s.Ledger, time.Now())
	if err != nil {
		return err
	}
	if len(ids) > 0 || n > 0 || accounts > 0 || kept > 0 {
		slog.Info("restored from the ledger", "sales", len(ids), "accounts", accounts, "pending orders re-armed", n,
			"admin sessions and sign-outs", kept)
	}
	return nil
}

// Drain waits until the in-process bus has handed every order event and
// every movement of money to the worker, before the worker stops: what
// the bus still held would be gone with the process. Only an embedded
// system needs it.
func (s *System) Drain(ctx context.Context) {
	if !s.Embedded {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, s.Config.Process.ShutdownTimeout)
	defer cancel()
	for {
		orderMsgs, err := s.Bus.Depth(ctx, bus.Orders)
		if err != nil {
			return
		}
		fundsMsgs, err := s.Bus.Depth(ctx, bus.Funds)
		if err != nil || orderMsgs+fundsMsgs == 0 {
			return
		}
		select {
		case <-ctx.Done():
			slog.Warn("stopping with messages not yet written to the ledger", "order messages", orderMsgs, "funds messages", fundsMsgs)
			return
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// passwordFile keeps, in the data directory, the admin password an
// embedded system made up when none was configured.
const passwordFile = "admin-password"

// keptPassword returns the admin password kept in dir, keeping made (a
// password made up at this start) there if there is none yet: an embedded
// system's data and its development password go together, across
// restarts.
func keptPassword(dir, made string) (string, error) {
	path := filepath.Join(dir, passwordFile)
	if b, err := os.ReadFile(path); err == nil && len(strings.TrimSpace(string(b))) > 0 {
		return strings.TrimSpace(string(b)), nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("data directory (SECKILL_DATA_DIR): %w", err)
	}
	if err := os.WriteFile(path, []byte(made+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("keeping the admin password in %s: %w", path, err)
	}
	return made, nil
}

// PasswordFile is where an embedded system keeps its made-up admin
// password.
func PasswordFile(cfg configs.Config) string { return filepath.Join(cfg.Process.DataDir, passwordFile) }
