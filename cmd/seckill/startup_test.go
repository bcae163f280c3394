package main

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/seckill/seckill/orders"
	"github.com/seckill/seckill/system/servertest"
)

// startup runs a seckill command for up to 15 s and returns what it
// printed and whether it was still running (then it is stopped).
func startup(t *testing.T, env []string, args ...string) (out string, running bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, servertest.Binary(t), args...)
	cmd.Env = append(os.Environ(), env...)
	var buf servertest.Output
	cmd.Stdout, cmd.Stderr = &buf, &buf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	for {
		select {
		case <-done:
			return buf.String(), false
		case <-time.After(50 * time.Millisecond):
			if strings.Contains(buf.String(), "http server listening") || strings.Contains(buf.String(), "worker started") {
				_ = cmd.Process.Signal(os.Interrupt)
				<-done
				return buf.String(), true
			}
		}
	}
}

// baseEnv points a child at the test's own slice of the services.
func baseEnv(t *testing.T, dsn string) []string {
	cfg := servertest.Config(t)
	return []string{
		"SECKILL_MYSQL_DSN=" + dsn, "SECKILL_REDIS_PREFIX=" + cfg.Redis.Prefix, "SECKILL_AMQP_PREFIX=" + cfg.AMQP.Prefix,
		"SECKILL_HTTP_ADDR=127.0.0.1:0", "SECKILL_OPS_ADDR=", "SECKILL_WORKER_METRICS_ADDR=",
		"SECKILL_JWT_SECRET=" + servertest.JWTSecret, "SECKILL_ADMIN_PASSWORD=" + servertest.AdminPassword,
	}
}

// emptyDatabase returns the DSN of a database that exists but was never
// migrated, dropped when the test ends.
func emptyDatabase(t *testing.T) string {
	t.Helper()
	c, err := mysql.ParseDSN(servertest.Config(t).MySQL.DSN)
	if err != nil {
		t.Fatal(err)
	}
	db, err := orders.Open(context.Background(), c.FormatDSN()) // creates it, migrates nothing
	if err != nil {
		t.Fatalf("MySQL: %v", err)
	}
	t.Cleanup(func() {
		db.Exec("DROP DATABASE IF EXISTS `" + c.DBName + "`")
		db.Close()
	})
	return c.FormatDSN()
}

// TestStartRefusesAnUnmigratedSchema: serve and worker on a database
// never migrated stop at once, saying to run seckill migrate, rather than
// report ready and fail every request; with auto_migrate they migrate.
func TestStartRefusesAnUnmigratedSchema(t *testing.T) {
	dsn := emptyDatabase(t)
	for _, cmd := range []string{"serve", "worker"} {
		out, running := startup(t, baseEnv(t, dsn), cmd)
		if running || !strings.Contains(out, "run `seckill migrate`") {
			t.Errorf("%s on an unmigrated schema: running=%v\n%s", cmd, running, out)
		}
	}
	out, running := startup(t, append(baseEnv(t, dsn), "SECKILL_AUTO_MIGRATE=1"), "serve")
	if !running || !strings.Contains(out, "schema up to date") {
		t.Errorf("serve with auto_migrate: running=%v\n%s", running, out)
	}
}

// TestProductionRefusesGuests: a production start with guest sign-ins
// (the default source) stops at once and says why and what to set.
func TestProductionRefusesGuests(t *testing.T) {
	env := append(baseEnv(t, emptyDatabase(t)), "SECKILL_AUTO_MIGRATE=1", "SECKILL_ENV=production", "SECKILL_REDIS_ALLOW_VOLATILE=1")
	out, running := startup(t, env, "serve")
	if running || !strings.Contains(out, "SECKILL_IDENTITY") || !strings.Contains(out, "SECKILL_ALLOW_GUEST") {
		t.Errorf("production with guest: running=%v\n%s", running, out)
	}
}

// TestStartChecksRedisPersistence: on a Redis without AOF (the test
// Redis) a production process refuses to start unless told it may; a
// development one warns.
func TestStartChecksRedisPersistence(t *testing.T) {
	dsn := emptyDatabase(t)
	env := append(baseEnv(t, dsn), "SECKILL_AUTO_MIGRATE=1")
	prod := append(env, "SECKILL_ENV=production", "SECKILL_ALLOW_GUEST=true",
		"SECKILL_STRIPE_SECRET_KEY=sk_test_x", "SECKILL_STRIPE_WEBHOOK_SECRET=whsec_x")
	out, running := startup(t, prod, "serve")
	if running || !strings.Contains(out, "appendonly") {
		t.Errorf("production on a volatile Redis: running=%v\n%s", running, out)
	}
	if out, running := startup(t, append(prod, "SECKILL_REDIS_ALLOW_VOLATILE=1"), "serve"); !running {
		t.Errorf("production allowed a volatile Redis: not running\n%s", out)
	}
	if out, running := startup(t, env, "serve"); !running || !strings.Contains(out, "only in memory") {
		t.Errorf("development on a volatile Redis: running=%v\n%s", running, out)
	}
}
