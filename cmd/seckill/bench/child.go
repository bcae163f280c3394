package bench

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/seckill/seckill/configs"
	"github.com/seckill/seckill/internal/wait"
)

// Child is a seckill process serving HTTP.
type Child struct {
	cmd  *exec.Cmd
	Addr string // host:port it serves on
	// Ready is how long it took from start until /readyz answered 200.
	Ready time.Duration
}

// StartServe starts `binary serve` (empty: this executable) on a free
// loopback port with cfg's names (Redis prefix, MySQL DSN, queue prefix,
// secrets) and waits until it is ready.
func StartServe(ctx context.Context, binary string, cfg configs.Config) (*Child, error) {
	return Start(ctx, binary, cfg, nil, "serve")
}

// Start starts binary (empty: this executable) with args on a free
// loopback port, cfg's names and secrets and limits, and env on top, and
// waits until /readyz answers 200.
func Start(ctx context.Context, binary string, cfg configs.Config, env []string, args ...string) (*Child, error) {
	if binary == "" {
		var err error
		if binary, err = os.Executable(); err != nil {
			return nil, err
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := ln.Addr().String()
	ln.Close()
	cmd := exec.Command(binary, args...)
	cmd.Env = append(os.Environ(),
		"SECKILL_HTTP_ADDR="+addr, "SECKILL_REDIS_PREFIX="+cfg.Redis.Prefix, "SECKILL_AMQP_PREFIX="+cfg.AMQP.Prefix,
		"SECKILL_MYSQL_DSN="+cfg.MySQL.DSN, "SECKILL_JWT_SECRET="+cfg.Sessions.JWTSecret, "SECKILL_ADMIN_TOKEN="+cfg.Sessions.AdminToken,
		fmt.Sprintf("SECKILL_RATE_GLOBAL=%g", cfg.Buy.RateGlobal), fmt.Sprintf("SECKILL_RATE_PER_USER=%g", cfg.Buy.RatePerUser),
		fmt.Sprintf("SECKILL_RATE_PER_IP=%g", cfg.Buy.RatePerIP), "SECKILL_LOG_LEVEL=warn",
		// Every client of the bench comes from 127.0.0.1; no ops listener, so
		// several children can run at once.
		"SECKILL_WS_MAX_PER_IP=0", "SECKILL_WS_MAX_TOTAL=0", "SECKILL_OPS_ADDR=",
	)
	cmd.Env = append(cmd.Env, env...)
	cmd.Stderr = os.Stderr
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s %s: %w", binary, strings.Join(args, " "), err)
	}
	c := &Child{cmd: cmd, Addr: addr}
	err = wait.Until(ctx, 20*time.Second, 5*time.Millisecond, func() (bool, string, error) {
		res, err := http.Get("http://" + addr + "/readyz")
		if err != nil {
			return false, err.Error(), nil
		}
		res.Body.Close()
		return res.StatusCode == http.StatusOK, res.Status, nil
	})
	if err != nil {
		c.Stop()
		return nil, fmt.Errorf("seckill %s was not ready on %s: %w", strings.Join(args, " "), addr, err)
	}
	c.Ready = time.Since(start)
	return c, nil
}

// Stop ends the process (SIGTERM, then SIGKILL after 10s).
func (c *Child) Stop() {
	if c.cmd.ProcessState != nil {
		return // it has ended already
	}
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = c.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = c.cmd.Process.Kill()
		<-done
	}
}

// Kill ends the process at once (SIGKILL), as a crash would; Stop after
// it returns at once.
func (c *Child) Kill() {
	_ = c.cmd.Process.Kill()
	_ = c.cmd.Wait()
}

// CPU is the user+system CPU time the process has used so far.
func (c *Child) CPU() time.Duration { return procCPU(c.cmd.Process.Pid) }

// procCPU is a process's user+system CPU time so far (from
// /proc/<pid>/stat, in clock ticks of 10 ms); 0 once it is gone.
func procCPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The fields after the command name, which is in parentheses.
	fields := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	if len(fields) < 13 {
		return 0
	}
	utime, _ := strconv.ParseInt(fields[11], 10, 64)
	stime, _ := strconv.ParseInt(fields[12], 10, 64)
	return time.Duration(utime+stime) * 10 * time.Millisecond
}

// serviceCPU is the CPU time used so far by each backing service's
// processes on this machine (by command name: redis-server, beam.smp,
// mariadbd), so a run can tell where a request's CPU went outside seckill.
func serviceCPU() map[string]time.Duration {
	out := map[string]time.Duration{}
	dirs, _ := os.ReadDir("/proc")
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
		if err != nil {
			continue
		}
		switch name := strings.TrimSpace(string(comm)); name {
		case "redis-server", "beam.smp", "mariadbd":
			out[name] += procCPU(pid)
		}
	}
	return out
}

// RSS is the process's resident set size in bytes.
func (c *Child) RSS() int64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", c.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb * 1024
		}
	}
	return 0
}
