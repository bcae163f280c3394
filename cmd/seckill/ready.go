package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/seckill/seckill/configs"
)

// runReady asks a process's /readyz, for a container's healthcheck (the
// image has no curl): exit 0 when it answers 200.
func runReady(ctx context.Context, cfg configs.Config, args []string) error {
	fs := command("ready")
	addr := fs.String("addr", cfg.HTTP.Addr, "the listener to ask (a serve's HTTP address, a worker's SECKILL_WORKER_METRICS_ADDR)")
	if err := parse(fs, args); err != nil {
		return err
	}
	host, port, err := net.SplitHostPort(*addr)
	if err != nil {
		return fmt.Errorf("%w: --addr %q: %v", errUsage, *addr, err)
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1" // listening everywhere: ask loopback
	}
	rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(rctx, "GET", "http://"+net.JoinHostPort(host, port)+"/readyz", nil)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("not ready: %s", res.Status)
	}
	return nil
}
