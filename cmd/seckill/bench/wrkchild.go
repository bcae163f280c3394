package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/seckill/seckill/configs"
	"github.com/seckill/seckill/scripts/wrk"
)

// childConfig is a case's configuration for a child loaded from outside:
// limiters off, and an admin token to create its sales with.
func childConfig(e *Env) configs.Config {
	cfg := e.Config
	cfg.Buy.RateGlobal, cfg.Buy.RatePerUser, cfg.Buy.RatePerIP = 0, 0, 0
	if cfg.Sessions.AdminToken == "" {
		cfg.Sessions.AdminToken = "bench-admin-" + cfg.Redis.Prefix
	}
	return cfg
}

// wrkChild is a `seckill all` child that wrk loads with scripts/wrk/buy.lua,
// and a directory for the script and the cases' token files.
type wrkChild struct {
	*Child
	cfg              configs.Config
	base             string
	wrk, script, dir string
}

// startWrkChild starts the child (env on top of childConfig) and writes
// the wrk script; close stops it and removes the directory.
func startWrkChild(ctx context.Context, e *Env, o Options, env []string) (*wrkChild, error) {
	wrkPath, err := exec.LookPath("wrk")
	if err != nil {
		return nil, fmt.Errorf("wrk not found: apt-get install wrk (scripts/services.sh does): %w", err)
	}
	cfg := childConfig(e)
	dir, err := os.MkdirTemp("", "seckill-bench-wrk")
	if err != nil {
		return nil, err
	}
	script := filepath.Join(dir, "buy.lua")
	if err := os.WriteFile(script, wrk.Script, 0o644); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	child, err := Start(ctx, o.Binary, cfg, env, "all")
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return &wrkChild{Child: child, cfg: cfg, base: "http://" + child.Addr, wrk: wrkPath, script: script, dir: dir}, nil
}

func (w *wrkChild) close() {
	w.Stop()
	os.RemoveAll(w.dir)
}

// file is a path in the child's directory.
func (w *wrkChild) file(name string) string { return filepath.Join(w.dir, name) }

// run loads route of sale with the tokens file over conns connections for d.
func (w *wrkChild) run(ctx context.Context, tokens string, sale int64, route string, conns int, d time.Duration) (wrkRun, error) {
	return runWrk(ctx, w.wrk, w.script, w.base, tokens, sale, route, conns, d)
}
