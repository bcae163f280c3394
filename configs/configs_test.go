package configs_test

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/seckill/seckill/configs"
)

func TestDefaults(t *testing.T) {
	c, err := configs.Load(nil)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"http_addr": c.HTTP.Addr == "127.0.0.1:8080", "redis_addr": c.Redis.Addr == "127.0.0.1:6379",
		"amqp_url":       c.AMQP.URL == "amqp://guest:guest@127.0.0.1:5672/",
		"mysql_dsn":      c.MySQL.DSN == "root@tcp(127.0.0.1:3306)/seckill?parseTime=true",
		"payment_window": c.Orders.PaymentWindow == 15*time.Minute,
		"jwt_secret":     len(c.Sessions.JWTSecret) == 64, "admin_password": c.Sessions.GeneratedAdminPassword,
	}
	for k, ok := range want {
		if ok != true {
			t.Errorf("default %s wrong: %+v", k, c)
		}
	}
}

func TestEnvironmentOverrides(t *testing.T) {
	c, err := configs.Load([]string{
		"SECKILL_HTTP_ADDR=0.0.0.0:9000", "SECKILL_REDIS_DB=3", "SECKILL_PAYMENT_WINDOW=90s",
		"SECKILL_RATE_PER_IP=0", "SECKILL_RATE_GLOBAL=12.5", "SECKILL_BATCH_ENABLED=false",
		"SECKILL_JWT_SECRET=s3cret", "OTHER=ignored",
	})
	if err != nil {
		t.Fatal(err)
	}
	if c.HTTP.Addr != "0.0.0.0:9000" || c.Redis.DB != 3 || c.Orders.PaymentWindow != 90*time.Second ||
		c.Buy.RatePerIP != 0 || c.Buy.RateGlobal != 12.5 || c.Buy.BatchEnabled || c.Sessions.JWTSecret != "s3cret" {
		t.Errorf("overrides not applied: %+v", c)
	}
}

func TestConfigFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "seckill.yaml")
	if err := os.WriteFile(path, []byte("http_addr: 127.0.0.1:7000\nbatch_max: 64\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := configs.Load([]string{"SECKILL_CONFIG=" + path, "SECKILL_BATCH_MAX=32"})
	if err != nil {
		t.Fatal(err)
	}
	if c.HTTP.Addr != "127.0.0.1:7000" || c.Buy.BatchMax != 32 {
		t.Errorf("file then environment: %+v", c)
	}
}

func TestInvalidConfigNamesTheSetting(t *testing.T) {
	tests := []struct{ env, want string }{
		{"SECKILL_REDIS_DB=abc", "redis_db"},
		{"SECKILL_REDIS_DB=16", "SECKILL_REDIS_DB"},
		{"SECKILL_PAYMENT_WINDOW=soon", "payment_window"},
		{"SECKILL_PAYMENT_WINDOW=0s", "SECKILL_PAYMENT_WINDOW"},
		{"SECKILL_HTTP_ADDR=nowhere", "SECKILL_HTTP_ADDR"},
		{"SECKILL_RATE_PER_USER=-1", "SECKILL_RATE_PER_USER"},
		{"SECKILL_ENV=staging", "SECKILL_ENV"},
		{"SECKILL_LOG_LEVEL=loud", "SECKILL_LOG_LEVEL"},
		{"SECKILL_TRUSTED_PROXIES=not-an-ip", "SECKILL_TRUSTED_PROXIES"},
		{"SECKILL_AMQP_URL=http://x", "SECKILL_AMQP_URL"},
		{"SECKILL_REDIS_PREFIX=a:b", "SECKILL_REDIS_PREFIX"},
		{"SECKILL_HTTP_ADRR=127.0.0.1:1", "SECKILL_HTTP_ADRR"},
		{"SECKILL_ENV=production", "SECKILL_JWT_SECRET"},
		{"SECKILL_ENV=production", "SECKILL_IDENTITY"},
		{"SECKILL_IDENTITY=guest,facebook", "SECKILL_IDENTITY"},
		{"SECKILL_IDENTITY=oidc", "SECKILL_OIDC_ISSUER"},
		{"SECKILL_IDENTITY=oidc", "SECKILL_OIDC_CLIENT_ID"},
		{"SECKILL_PUBLIC_URL=ftp://x", "SECKILL_PUBLIC_URL"},
		{"SECKILL_SMTP_ADDR=nowhere", "SECKILL_SMTP_ADDR"},
		{"SECKILL_RATE_SIGNUP_PER_IP=-1", "SECKILL_RATE_SIGNUP_PER_IP"},
		{"SECKILL_WORKER_PREFETCH=0", "SECKILL_WORKER_PREFETCH"},
		{"SECKILL_RELAY_PACK=1", "SECKILL_WORKER_PREFETCH"}, // 64 messages of 1 event < worker_batch 500
		{"SECKILL_RELAY_PACK=9223372036854775807", "SECKILL_RELAY_PACK"},
	}
	for _, tc := range tests {
		_, err := configs.Load([]string{tc.env})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one naming %s", tc.env, err, tc.want)
		}
	}
}

// TestIdentityDefaults: guest in development; production needs its
// sources named (or allow_guest), and mail for accounts; the public URL
// follows the HTTP address, with localhost for a loopback IP (a passkey's
// relying party cannot be an IP).
func TestIdentityDefaults(t *testing.T) {
	c, err := configs.Load(nil)
	if err != nil || c.Identity.Sources != "guest" || c.Identity.PublicURL != "http://localhost:8080" {
		t.Fatalf("defaults: %q %q %v", c.Identity.Sources, c.Identity.PublicURL, err)
	}
	prod := []string{"SECKILL_ENV=production", "SECKILL_JWT_SECRET=" + strings.Repeat("s", 32), "SECKILL_ADMIN_PASSWORD=x",
		"SECKILL_STRIPE_SECRET_KEY=sk_test_x", "SECKILL_STRIPE_WEBHOOK_SECRET=whsec_x"}
	if _, err := configs.Load(append(prod, "SECKILL_ALLOW_GUEST=true")); err != nil {
		t.Errorf("production with allow_guest: %v", err)
	}
	if _, err := configs.Load(append(prod, "SECKILL_IDENTITY=accounts")); err == nil || !strings.Contains(err.Error(), "SECKILL_SMTP_ADDR") {
		t.Errorf("production accounts without SMTP: %v", err)
	}
	named := append(prod, "SECKILL_IDENTITY=accounts,oidc", "SECKILL_SMTP_ADDR=mail:25",
		"SECKILL_OIDC_ISSUER=https://id.example", "SECKILL_OIDC_CLIENT_ID=seckill")
	if _, err := configs.Load(named); err == nil || !strings.Contains(err.Error(), "SECKILL_PUBLIC_URL") {
		t.Errorf("production accounts and oidc without a public URL: %v", err)
	}
	c, err = configs.Load(append(named, "SECKILL_PUBLIC_URL=https://shop.example"))
	if err != nil || fmt.Sprint(c.Identity.List()) != "[oidc accounts]" {
		t.Errorf("production accounts and oidc: %v %v", err, c.Identity.List())
	}
	c, err = configs.Load([]string{"SECKILL_HTTP_ADDR=0.0.0.0:9000"})
	if err != nil || c.Identity.PublicURL != "http://localhost:9000" {
		t.Errorf("development public URL: %v %q", err, c.Identity.PublicURL)
	}
}

func TestLogValueMasksSecrets(t *testing.T) {
	c, err := configs.Load([]string{
		"SECKILL_JWT_SECRET=jwt-secret-value", "SECKILL_ADMIN_TOKEN=admin-token-value",
		"SECKILL_ADMIN_PASSWORD=admin-password-value", "SECKILL_REDIS_PASSWORD=redis-password-value",
		"SECKILL_AMQP_URL=amqp://user:amqp-password-value@host:5672/",
		"SECKILL_MYSQL_DSN=root:mysql-password-value@tcp(db:3306)/seckill?parseTime=true",
		"SECKILL_OIDC_CLIENT_SECRET=oidc-secret-value",
	})
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	slog.New(slog.NewTextHandler(&b, nil)).Info("start", "config", c)
	out := b.String()
	for _, secret := range []string{"jwt-secret-value", "admin-token-value", "admin-password-value",
		"redis-password-value", "amqp-password-value", "mysql-password-value", "oidc-secret-value"} {
		if strings.Contains(out, secret) {
			t.Errorf("log line shows %s: %s", secret, out)
		}
	}
	// Each from its section, under its key as in seckill.yaml.
	for _, shown := range []string{"amqp_url=amqp://user:***@host:5672/", "mysql_dsn=\"root:***@tcp(db:3306)",
		"redis_password=***", "oidc_client_secret=***", "jwt_secret=***", "redis_prefix=sk", "worker_batch=500"} {
		if !strings.Contains(out, shown) {
			t.Errorf("log line lacks %s: %s", shown, out)
		}
	}
}

// TestSettingsDocumented: docs/api.md names the variable of every setting.
func TestSettingsDocumented(t *testing.T) {
	doc, err := os.ReadFile("../docs/api.md")
	if err != nil {
		t.Fatal(err)
	}
	keys := regexp.MustCompile(`(?m)^([a-z_]+):`).FindAllStringSubmatch(string(defaultsYAML(t)), -1)
	if len(keys) < 10 {
		t.Fatalf("read %d settings from the defaults", len(keys))
	}
	for _, k := range keys {
		if v := "`SECKILL_" + strings.ToUpper(k[1]) + "`"; !strings.Contains(string(doc), v) {
			t.Errorf("docs/api.md does not name %s", v)
		}
	}
}

func defaultsYAML(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile("seckill.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return b
}
