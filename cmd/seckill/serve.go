package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/seckill/seckill/configs"
	"github.com/seckill/seckill/server"
	"github.com/seckill/seckill/system"
)

func runAll(ctx context.Context, cfg configs.Config, args []string) error {
	fs := command("all")
	embedded := fs.Bool("embedded", cfg.Process.Embedded, "run with no external service: in-process Redis, SQLite ledger in data_dir, in-process bus (default SECKILL_EMBEDDED)")
	demo := fs.Bool("demo", false, "create a sample sale opening a few seconds after start, with simulated shoppers buying from it")
	if err := parse(fs, args); err != nil {
		return err
	}
	cfg.Process.Embedded = *embedded
	return serve(ctx, cfg, true, *demo)
}

func runServe(ctx context.Context, cfg configs.Config, args []string) error {
	if err := parse(command("serve"), args); err != nil {
		return err
	}
	if err := notEmbedded(cfg, "serve"); err != nil {
		return err
	}
	return serve(ctx, cfg, false, false)
}

func runMigrate(ctx context.Context, cfg configs.Config, args []string) error {
	if err := parse(command("migrate"), args); err != nil {
		return err
	}
	if err := notEmbedded(cfg, "migrate"); err != nil {
		return err
	}
	return migrate(ctx, cfg)
}

func migrate(ctx context.Context, cfg configs.Config) error {
	db, err := system.OpenMySQL(ctx, cfg)
	if err != nil {
		return err
	}
	defer db.Close()
	return system.Migrate(ctx, db)
}

// serve runs the HTTP server and the outbox relays, of the sales and of
// the funds (and, for `all`, the worker) until ctx is cancelled, then shuts them down in order: stop
// taking requests and drain them, flush the relay, let the worker finish
// its batch, close connections.
func serve(ctx context.Context, cfg configs.Config, withWorker, demo bool) error {
	// The whole configuration (secrets redacted) only at debug level: at
	// info, one short line.
	slog.Info("starting", "addr", cfg.HTTP.Addr, "embedded", cfg.Process.Embedded)
	slog.Debug("configuration", "config", cfg)
	sys, err := system.Open(ctx, cfg)
	if err != nil {
		return err
	}
	defer sys.Close()
	// `all` is the whole system in one process: it migrates first.
	if err := sys.Prepare(ctx, withWorker); err != nil {
		return err
	}
	srv, err := sys.Server(sys.Registry, nil)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", cfg.HTTP.Addr)
	if err != nil {
		return fmt.Errorf("listen on %s (SECKILL_HTTP_ADDR): %w", cfg.HTTP.Addr, err)
	}
	banner(sys, ln.Addr().String())

	if cfg.HTTP.OpsAddr != "" {
		stop, err := serveOps(ctx, cfg.HTTP.OpsAddr, "SECKILL_OPS_ADDR", sys)
		if err != nil {
			return err
		}
		defer stop()
	}
	background := context.WithoutCancel(ctx)
	stopRelay := start(background, "relays", sys.RunRelays) // the sales' outboxes and the funds groups'
	stopRebalancer := start(background, "rebalancer", sys.RunRebalancer)
	defer stopRebalancer()
	stopWorker := func() {}
	if withWorker {
		stopWorker = start(background, "worker", sys.RunWorkers) // it watches Redis's persistence too
	} else {
		stopWatch := start(background, "persistence watch", func(ctx context.Context) error { sys.WatchDurability(ctx); return nil })
		defer stopWatch()
	}
	if demo {
		stopDemo := start(background, "demo", func(dctx context.Context) error { return runDemo(dctx, cfg, srv.Sales, sys.Funds, ln.Addr().String()) })
		defer stopDemo()
	}
	err = srv.Run(ctx, ln)
	slog.Info("http server stopped; flushing the relays")
	stopRelay()
	sys.Drain(background)
	slog.Info("relays stopped; stopping the worker")
	stopWorker()
	slog.Info("stopped")
	return err
}

// banner tells the person who started the server where to look.
func banner(sys *system.System, addr string) {
	cfg := sys.Config
	how := "on the configured Redis, RabbitMQ and MySQL"
	if sys.Embedded {
		how = fmt.Sprintf("embedded: Redis, the message bus and the SQLite ledger (%s) run in this process", cfg.Process.DataDir)
	}
	fmt.Printf("\n  Seckill is running, %s.\n    shop:  http://%s/\n    admin: http://%s/admin\n", how, addr, addr)
	switch {
	case cfg.Sessions.GeneratedAdminPassword && sys.Embedded:
		fmt.Printf("    admin password: %s (made up for this data directory and kept in %s; set SECKILL_ADMIN_PASSWORD to choose one)\n",
			cfg.Sessions.AdminPassword, system.PasswordFile(cfg))
	case cfg.Sessions.GeneratedAdminPassword:
		// Development only: production requires SECKILL_ADMIN_PASSWORD.
		fmt.Printf("    admin password: %s (made up at this start: the next one makes up another; set SECKILL_ADMIN_PASSWORD to keep one)\n", cfg.Sessions.AdminPassword)
	}
	fmt.Println()
}

// notEmbedded refuses a command that cannot run embedded: the embedded
// services live inside one `seckill all` process.
func notEmbedded(cfg configs.Config, cmd string) error {
	if cfg.Process.Embedded {
		return fmt.Errorf("seckill %s runs on the configured services; embedded mode (SECKILL_EMBEDDED) is `seckill all --embedded` only", cmd)
	}
	return nil
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
	if err := parse(command("worker"), args); err != nil {
		return err
	}
	if err := notEmbedded(cfg, "worker"); err != nil {
		return err
	}
	slog.Info("starting worker")
	slog.Debug("configuration", "config", cfg)
	sys, err := system.Open(ctx, cfg)
	if err != nil {
		return err
	}
	defer sys.Close()
	if err := sys.Prepare(ctx, false); err != nil {
		return err
	}
	if cfg.Orders.WorkerMetricsAddr != "" {
		stop, err := serveOps(ctx, cfg.Orders.WorkerMetricsAddr, "SECKILL_WORKER_METRICS_ADDR", sys)
		if err != nil {
			return err
		}
		defer stop()
	}
	slog.Info("worker started")
	return sys.RunWorkers(ctx)
}

// serveOps serves the operations listener (/metrics, /healthz, /readyz,
// /debug/pprof/) on addr, the value of the setting named.
func serveOps(ctx context.Context, addr, setting string, sys *system.System) (stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s (%s): %w", addr, setting, err)
	}
	srv := &http.Server{Handler: server.OpsHandler(sys.Registry, sys.Ready()), ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	slog.Info("ops listener (metrics, health, pprof)", "addr", ln.Addr().String())
	return func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		srv.Shutdown(sctx)
	}, nil
}
