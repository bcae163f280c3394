package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/seckill/seckill/bus/rabbitmq"
	"github.com/seckill/seckill/configs"
	"github.com/seckill/seckill/orders"
	"github.com/seckill/seckill/system"
)

// errServicesMissing makes check exit non-zero.
var errServicesMissing = errors.New("some services do not answer")

// runCheck says whether the configured Redis, RabbitMQ and MySQL answer,
// changing nothing (make run uses it to choose between them and the
// embedded mode).
func runCheck(ctx context.Context, cfg configs.Config, args []string) error {
	if err := parse(command("check"), args); err != nil {
		return err
	}
	return check(ctx, os.Stdout, cfg)
}

func check(ctx context.Context, out io.Writer, cfg configs.Config) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	probes := []struct {
		name, where string
		probe       func(context.Context) error
	}{
		{"redis", cfg.Redis.Addr + cfg.Redis.Sentinels, func(ctx context.Context) error {
			rdb, err := system.OpenRedis(ctx, cfg)
			if err == nil {
				rdb.Close()
			}
			return err
		}},
		{"rabbitmq", configs.MaskCredentials(cfg.AMQP.URL), func(ctx context.Context) error {
			b := rabbitmq.New(cfg.AMQP.URL, cfg.AMQP.Prefix, cfg.AMQP.QueueType)
			defer b.Close()
			if err := b.Ping(ctx); err != nil {
				return fmt.Errorf("%s (SECKILL_AMQP_URL): %w", configs.MaskCredentials(cfg.AMQP.URL), err)
			}
			return nil
		}},
		{"mysql", configs.MaskCredentials(cfg.MySQL.DSN), func(ctx context.Context) error {
			if err := orders.Ping(ctx, cfg.MySQL.DSN); err != nil {
				return fmt.Errorf("%s (SECKILL_MYSQL_DSN): %w", configs.MaskCredentials(cfg.MySQL.DSN), err)
			}
			return nil
		}},
	}
	missing := 0
	for _, p := range probes {
		if err := p.probe(ctx); err != nil {
			missing++
			fmt.Fprintf(out, "  %-8s DOWN  %v\n", p.name, err)
			continue
		}
		fmt.Fprintf(out, "  %-8s ok    %s\n", p.name, p.where)
	}
	if missing > 0 {
		return errServicesMissing
	}
	return nil
}
