// Command seckill is Seckill's one binary: the HTTP server and outbox relay,
// the order worker, schema migrations, the load tester, the reconciler and
// the benchmark suite, chosen by the first argument.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/seckill/seckill/configs"
	"github.com/seckill/seckill/internal/rdb"
	"github.com/seckill/seckill/internal/tracing"
)

const usage = `usage: seckill <command> [flags]

commands:
  all        server + outbox relay + worker in one process (applies migrations first);
             --embedded: with no external service, --demo: a sample sale and shoppers
  serve      HTTP server and outbox relay
  worker     queue consumers
  migrate    create or upgrade the MySQL schema, then exit
  loadtest   hammer a running server's buy endpoint and audit the result
  reconcile  compare Redis with the MySQL ledger; non-zero exit on drift
  deadletters list|replay  show the dead-letter queue, or send its well-formed messages back
  check      say whether the configured Redis, RabbitMQ and MySQL answer (exit 1 if not)
  ready      ask a running process's /readyz (--addr; a container's healthcheck): exit 1 unless 200
  bench      the benchmark suite behind make bench

Configuration comes from configs/seckill.yaml, overridden by SECKILL_* variables.
`

// errUsage is returned for a bad command line; main prints the usage.
var errUsage = errors.New("bad usage")

// command is the flag set of a command.
func command(name string) *flag.FlagSet { return flag.NewFlagSet(name, flag.ContinueOnError) }

// parse reads a command's arguments into its flags: anything else on the
// command line, or a flag it does not know, is errUsage.
func parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: %s takes no arguments besides its flags, not %q", errUsage, fs.Name(), fs.Args())
	}
	return nil
}

func main() {
	if len(os.Args) < 2 || os.Args[1] == "-h" || os.Args[1] == "--help" || os.Args[1] == "help" {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	err := run(ctx, os.Args[1], os.Args[2:])
	stop()
	switch {
	case errors.Is(err, errUsage):
		fmt.Fprintf(os.Stderr, "seckill: %v\n\n%s", err, usage)
		os.Exit(2)
	case err != nil:
		fmt.Fprintln(os.Stderr, "seckill:", err)
		os.Exit(1)
	}
}

// run loads the configuration and runs one command until it finishes or ctx
// is cancelled (SIGINT, SIGTERM).
func run(ctx context.Context, cmd string, args []string) error {
	commands := map[string]func(context.Context, configs.Config, []string) error{
		"all":         runAll,
		"serve":       runServe,
		"worker":      runWorker,
		"migrate":     runMigrate,
		"loadtest":    runLoadtest,
		"reconcile":   runReconcile,
		"deadletters": runDeadLetters,
		"check":       runCheck,
		"ready":       runReady,
		"bench":       runBench,
	}
	fn, ok := commands[cmd]
	if !ok {
		return fmt.Errorf("%w: unknown command %q", errUsage, cmd)
	}
	cfg, err := configs.Load(os.Environ())
	if err != nil {
		return err
	}
	setupLogging(cfg)
	stop, err := tracing.Setup(ctx, cfg.Tracing.Endpoint, "seckill-"+cmd)
	if err != nil {
		return err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = stop(sctx)
	}()
	return fn(ctx, cfg, args)
}

func setupLogging(cfg configs.Config) {
	var lvl slog.Level
	_ = lvl.UnmarshalText([]byte(cfg.Process.LogLevel))
	opts := &slog.HandlerOptions{Level: lvl}
	var h slog.Handler = slog.NewTextHandler(os.Stderr, opts)
	if cfg.Production() {
		h = slog.NewJSONHandler(os.Stderr, opts)
	}
	slog.SetDefault(slog.New(tracing.LogHandler{Handler: h})) // lines carry their trace id
	rdb.QuietLogger()
}
