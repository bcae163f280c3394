// Package configs holds Seckill's default configuration (seckill.yaml) and
// loads the effective configuration: defaults, then an optional file named by
// SECKILL_CONFIG, then SECKILL_* environment variables.
package configs

import (
	"crypto/rand"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"reflect"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/knadh/koanf/parsers/yaml"
	"github.com/knadh/koanf/providers/env/v2"
	"github.com/knadh/koanf/providers/rawbytes"
	"github.com/knadh/koanf/v2"
)

//go:embed seckill.yaml
var defaults []byte

// EnvPrefix starts every environment variable that overrides a setting.
const EnvPrefix = "SECKILL_"

// Config is the effective configuration of one Seckill process.
type Config struct {
	Env      string `koanf:"env"`
	LogLevel string `koanf:"log_level"`
	// Embedded runs the whole system in one process with no external
	// service (seckill all --embedded): in-process Redis, a SQLite ledger
	// in DataDir, an in-process bus.
	Embedded bool   `koanf:"embedded"`
	DataDir  string `koanf:"data_dir"`

	HTTPAddr         string        `koanf:"http_addr"`
	HTTPReadTimeout  time.Duration `koanf:"http_read_timeout"`
	HTTPWriteTimeout time.Duration `koanf:"http_write_timeout"`
	OpsAddr          string        `koanf:"ops_addr"`
	TrustedProxies   string        `koanf:"trusted_proxies"`
	BodyLimit        int64         `koanf:"body_limit"`
	CookieSecure     bool          `koanf:"cookie_secure"`
	PublicOrigins    string        `koanf:"public_origins"`
	AllowedOrigins   string        `koanf:"allowed_origins"`
	WSMaxPerIP       int           `koanf:"ws_max_per_ip"`
	WSMaxTotal       int           `koanf:"ws_max_total"`

	RedisAddr      string `koanf:"redis_addr"`
	RedisSentinels string `koanf:"redis_sentinels"`
	RedisMaster    string `koanf:"redis_master"`
	RedisDB        int    `koanf:"redis_db"`
	RedisPassword  string `koanf:"redis_password" secret:"true"`
	RedisPoolSize  int    `koanf:"redis_pool_size"`
	RedisPrefix    string `koanf:"redis_prefix"`
	// RedisAllowVolatile lets a production process run on a Redis that
	// keeps its data only in memory.
	RedisAllowVolatile bool `koanf:"redis_allow_volatile"`
	// RedisWaitReplicas replicas must have each buy call (WAIT) before it
	// is answered, within RedisWaitTimeout; 0: answer at once.
	RedisWaitReplicas int           `koanf:"redis_wait_replicas"`
	RedisWaitTimeout  time.Duration `koanf:"redis_wait_timeout"`

	AMQPURL       string `koanf:"amqp_url" secret:"url"`
	AMQPPrefix    string `koanf:"amqp_prefix"`
	AMQPQueueType string `koanf:"amqp_queue_type"`

	MySQLDSN string `koanf:"mysql_dsn" secret:"dsn"`
	// AutoMigrate lets serve and worker bring the schema up to date at
	// start instead of refusing to run on an old one.
	AutoMigrate bool `koanf:"auto_migrate"`

	JWTSecret  string        `koanf:"jwt_secret" secret:"true"`
	SessionTTL time.Duration `koanf:"session_ttl"`
	TicketTTL  time.Duration `koanf:"ticket_ttl"`
	// OtelEndpoint is the OTLP/HTTP endpoint traces go to; empty: off.
	OtelEndpoint string `koanf:"otel_endpoint"`
	// PassTTL is how long a waiting room's admission pass serves.
	PassTTL       time.Duration `koanf:"pass_ttl"`
	AdminToken    string        `koanf:"admin_token" secret:"true"`
	AdminPassword string        `koanf:"admin_password" secret:"true"`

	// Identity names the shoppers' sign-ins: oidc, accounts, guest
	// (IdentitySources); AllowGuest lets production offer guest.
	Identity   string `koanf:"identity"`
	AllowGuest bool   `koanf:"allow_guest"`
	// PublicURL is where shoppers reach the site: verification links,
	// the passkeys' relying party and the provider's callback.
	PublicURL        string `koanf:"public_url"`
	OIDCIssuer       string `koanf:"oidc_issuer"`
	OIDCClientID     string `koanf:"oidc_client_id"`
	OIDCClientSecret string `koanf:"oidc_client_secret" secret:"true"`
	OIDCAudience     string `koanf:"oidc_audience"`
	SMTPAddr         string `koanf:"smtp_addr"`
	SMTPFrom         string `koanf:"smtp_from"`
	// RateSignupPerIP and RateSigninPerIP are account sign-ups and
	// password sign-ins per minute per client IP (0: no limit).
	RateSignupPerIP float64 `koanf:"rate_signup_per_ip"`
	RateSigninPerIP float64 `koanf:"rate_signin_per_ip"`

	PaymentWindow time.Duration `koanf:"payment_window"`
	SaleRetention time.Duration `koanf:"sale_retention"`
	// ReconcileGrace is how long an accepted order may be on its way to the
	// ledger before the reconciler reports it missing.
	ReconcileGrace time.Duration `koanf:"reconcile_grace"`
	// ReconcileInterval is how often worker processes reconcile every live
	// sale and repair drift; 0 turns it off.
	ReconcileInterval time.Duration `koanf:"reconcile_interval"`

	RateGlobal  float64 `koanf:"rate_global"`
	RatePerUser float64 `koanf:"rate_per_user"`
	RatePerIP   float64 `koanf:"rate_per_ip"`

	BatchEnabled bool `koanf:"batch_enabled"`
	BatchMax     int  `koanf:"batch_max"`
	// SoldOutRecheck is how long a process trusts that a sale is sold out
	// (answering without Lua) when no stock-changed message says otherwise.
	SoldOutRecheck time.Duration `koanf:"sold_out_recheck"`

	RelayBatch     int           `koanf:"relay_batch"`
	RelayPack      int           `koanf:"relay_pack"`
	RelayClaimIdle time.Duration `koanf:"relay_claim_idle"`
	// RelayLinger is how long the relay waits for more of a sale's outbox
	// before it publishes a read smaller than relay_batch (fewer, fuller
	// messages and confirms: the broker's work is per message); 0: none.
	RelayLinger       time.Duration `koanf:"relay_linger"`
	WorkerBatch       int           `koanf:"worker_batch"`
	WorkerFlush       time.Duration `koanf:"worker_flush"`
	WorkerPrefetch    int           `koanf:"worker_prefetch"`
	WorkerConsumers   int           `koanf:"worker_consumers"`
	WorkerMetricsAddr string        `koanf:"worker_metrics_addr"`

	WSPoll time.Duration `koanf:"ws_poll"`

	ShutdownTimeout time.Duration `koanf:"shutdown_timeout"`

	// GeneratedAdminPassword is true when AdminPassword is the development
	// default made up at start, which the caller prints once.
	GeneratedAdminPassword bool `koanf:"-"`
}

// Production reports whether the process runs with production settings.
func (c Config) Production() bool { return c.Env == "production" }

// Load builds the effective configuration from the embedded defaults, the
// file named by SECKILL_CONFIG (if any) and the environment given as
// KEY=value pairs (os.Environ() in main, a fixed list in tests).
func Load(environ []string) (Config, error) {
	k := koanf.New(".")
	if err := k.Load(rawbytes.Provider(defaults), yaml.Parser()); err != nil {
		return Config{}, fmt.Errorf("config: embedded defaults: %w", err)
	}
	known := map[string]bool{}
	for _, key := range k.Keys() {
		known[key] = true
	}

	vars := map[string]string{}
	for _, kv := range environ {
		name, value, ok := strings.Cut(kv, "=")
		// SECKILL_TEST_* variables belong to the test suite, not to a setting.
		if ok && strings.HasPrefix(name, EnvPrefix) && !strings.HasPrefix(name, EnvPrefix+"TEST_") {
			vars[name] = value
		}
	}
	if path := vars[EnvPrefix+"CONFIG"]; path != "" {
		b, err := os.ReadFile(path)
		if err != nil {
			return Config{}, fmt.Errorf("config: SECKILL_CONFIG: %w", err)
		}
		if err := k.Load(rawbytes.Provider(b), yaml.Parser()); err != nil {
			return Config{}, fmt.Errorf("config: SECKILL_CONFIG %s: %w", path, err)
		}
		for _, key := range k.Keys() {
			if !known[key] {
				return Config{}, fmt.Errorf("config: %s: unknown setting %q", path, key)
			}
		}
	}

	var unknown []string
	err := k.Load(env.Provider(".", env.Opt{
		Prefix:      EnvPrefix,
		EnvironFunc: func() []string { return environ },
		TransformFunc: func(name, value string) (string, any) {
			key := strings.ToLower(strings.TrimPrefix(name, EnvPrefix))
			// SECKILL_TEST_* variables belong to the test suite, not to a setting.
			if key == "config" || strings.HasPrefix(key, "test_") {
				return "", nil
			}
			if !known[key] {
				unknown = append(unknown, name)
				return "", nil
			}
			return key, value
		},
	}), nil)
	if err != nil {
		return Config{}, fmt.Errorf("config: environment: %w", err)
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return Config{}, fmt.Errorf("config: unknown setting %s", strings.Join(unknown, ", "))
	}

	var c Config
	if err := k.UnmarshalWithConf("", &c, koanf.UnmarshalConf{Tag: "koanf"}); err != nil {
		return Config{}, fmt.Errorf("config: %w", err)
	}
	if err := c.complete(); err != nil {
		return Config{}, err
	}
	return c, nil
}

// complete validates the settings and fills the development defaults that
// are made up at start.
func (c *Config) complete() error {
	var errs []error
	bad := func(setting, format string, args ...any) {
		errs = append(errs, fmt.Errorf("config: SECKILL_%s: %s", strings.ToUpper(setting), fmt.Sprintf(format, args...)))
	}
	switch c.Env {
	case "development", "production":
	default:
		bad("env", "must be development or production, not %q", c.Env)
	}
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(c.LogLevel)); err != nil {
		bad("log_level", "must be debug, info, warn or error, not %q", c.LogLevel)
	}
	if _, _, err := net.SplitHostPort(c.HTTPAddr); err != nil {
		bad("http_addr", "not a host:port: %q", c.HTTPAddr)
	}
	for setting, list := range map[string]string{"redis_addr": c.RedisAddr, "redis_sentinels": c.RedisSentinels} {
		for _, addr := range SplitList(list) {
			if _, _, err := net.SplitHostPort(addr); err != nil {
				bad(setting, "not a host:port: %q", addr)
			}
		}
	}
	switch {
	case len(SplitList(c.RedisAddr)) == 0 && c.RedisSentinels == "":
		bad("redis_addr", "must name a Redis (or set redis_sentinels)")
	case c.RedisSentinels != "" && c.RedisMaster == "":
		bad("redis_master", "must name the master when redis_sentinels is set")
	case len(SplitList(c.RedisAddr)) > 1 && c.RedisDB != 0:
		bad("redis_db", "must be 0 for a Redis Cluster (several redis_addr)")
	}
	for setting, addr := range map[string]string{"ops_addr": c.OpsAddr, "worker_metrics_addr": c.WorkerMetricsAddr} {
		if _, _, err := net.SplitHostPort(addr); addr != "" && err != nil {
			bad(setting, "not a host:port: %q", addr)
		}
	}
	if c.HTTPReadTimeout <= 0 || c.HTTPWriteTimeout <= 0 {
		bad("http_read_timeout", "http_read_timeout and http_write_timeout must be positive")
	}
	for _, o := range append(c.PublicOriginsList(), c.AllowedOriginsList()...) {
		if u, err := url.Parse(o); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" ||
			u.Path != "" || u.RawQuery != "" || u.User != nil {
			bad("public_origins", "%q is not an origin like https://shop.example (public_origins, allowed_origins)", o)
		}
	}
	if c.WSMaxPerIP < 0 || c.WSMaxTotal < 0 {
		bad("ws_max_per_ip", "ws_max_per_ip and ws_max_total must be 0 (no cap) or positive")
	}
	for _, p := range c.TrustedProxiesList() {
		if net.ParseIP(p) == nil {
			if _, _, err := net.ParseCIDR(p); err != nil {
				bad("trusted_proxies", "%q is neither an IP nor a CIDR", p)
			}
		}
	}
	if c.BodyLimit < 256 {
		bad("body_limit", "must be at least 256 bytes")
	}
	if c.RedisDB < 0 || c.RedisDB > 15 {
		bad("redis_db", "must be 0..15")
	}
	if c.RedisWaitReplicas < 0 || c.RedisWaitReplicas > 16 {
		bad("redis_wait_replicas", "must be 0 (no wait) to 16")
	}
	if c.RedisWaitTimeout < time.Millisecond {
		bad("redis_wait_timeout", "must be at least 1ms (WAIT with 0 would wait forever)")
	}
	if c.RedisPoolSize < 1 {
		bad("redis_pool_size", "must be at least 1")
	}
	if c.RedisPrefix == "" || strings.ContainsAny(c.RedisPrefix, "{}: ") {
		bad("redis_prefix", "must be non-empty without braces, colons or spaces")
	}
	for _, u := range SplitList(c.AMQPURL) {
		if !strings.HasPrefix(u, "amqp://") && !strings.HasPrefix(u, "amqps://") {
			bad("amqp_url", "must be amqp:// or amqps:// URLs (comma-separated for a cluster)")
		}
	}
	if len(SplitList(c.AMQPURL)) == 0 {
		bad("amqp_url", "must not be empty")
	}
	if c.AMQPPrefix == "" {
		bad("amqp_prefix", "must not be empty")
	}
	if c.AMQPQueueType != "classic" && c.AMQPQueueType != "quorum" {
		bad("amqp_queue_type", "must be classic or quorum, not %q", c.AMQPQueueType)
	}
	if c.MySQLDSN == "" {
		bad("mysql_dsn", "must not be empty")
	}
	if c.DataDir == "" {
		bad("data_dir", "must not be empty")
	}
	if c.SessionTTL < time.Minute {
		bad("session_ttl", "must be at least 1m")
	}
	if c.TicketTTL < 10*time.Second || c.TicketTTL > time.Hour {
		bad("ticket_ttl", "must be between 10s and 1h")
	}
	if c.PassTTL < 10*time.Second || c.PassTTL > time.Hour {
		bad("pass_ttl", "must be between 10s and 1h")
	}
	if c.PaymentWindow < time.Second {
		bad("payment_window", "must be at least 1s")
	}
	if c.SaleRetention < 0 {
		bad("sale_retention", "must not be negative")
	}
	if c.ReconcileGrace < time.Second {
		bad("reconcile_grace", "must be at least 1s")
	}
	if c.ReconcileInterval != 0 && c.ReconcileInterval < time.Second {
		bad("reconcile_interval", "must be 0 (off) or at least 1s")
	}
	for setting, r := range map[string]float64{"rate_global": c.RateGlobal, "rate_per_user": c.RatePerUser, "rate_per_ip": c.RatePerIP} {
		if r < 0 {
			bad(setting, "must be 0 (off) or a positive rate")
		}
	}
	if c.BatchMax < 1 || c.BatchMax > 4096 {
		bad("batch_max", "must be 1..4096")
	}
	if c.SoldOutRecheck < 0 {
		bad("sold_out_recheck", "must be 0 (fast path off) or positive")
	}
	if c.RelayBatch < 1 || c.WorkerBatch < 1 {
		bad("worker_batch", "relay_batch and worker_batch must be positive")
	}
	if c.RelayLinger < 0 || c.RelayLinger > time.Second {
		bad("relay_linger", "must be 0 to 1s")
	}
	if c.RelayPack < 1 || c.RelayPack > 1000 {
		bad("relay_pack", "must be 1..1000")
	}
	// Messages, each of up to relay_pack events: a full batch can be in
	// flight. Both bounded first, so the product cannot overflow.
	if c.WorkerPrefetch < 1 || c.WorkerPrefetch > 65535 ||
		(c.RelayPack >= 1 && c.RelayPack <= 1000 && c.WorkerPrefetch*c.RelayPack < c.WorkerBatch) {
		bad("worker_prefetch", "must be 1..65535 messages, and worker_prefetch × relay_pack at least worker_batch")
	}
	if c.RelayClaimIdle < 100*time.Millisecond {
		bad("relay_claim_idle", "must be at least 100ms")
	}
	if c.WorkerConsumers < 1 || c.WorkerConsumers > 64 {
		bad("worker_consumers", "must be 1..64")
	}
	if c.WorkerFlush <= 0 || c.WSPoll <= 0 || c.ShutdownTimeout <= 0 {
		bad("worker_flush", "worker_flush, ws_poll and shutdown_timeout must be positive")
	}
	c.checkIdentity(bad)
	if c.Production() {
		if len(c.JWTSecret) < 32 {
			bad("jwt_secret", "required in production, at least 32 bytes")
		}
		if c.AdminPassword == "" {
			bad("admin_password", "required in production")
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if c.JWTSecret == "" {
		c.JWTSecret = randomHex(32)
	}
	if c.AdminPassword == "" {
		c.AdminPassword = randomHex(8)
		c.GeneratedAdminPassword = true
	}
	return nil
}

// The identity sources.
const (
	SourceOIDC     = "oidc"
	SourceAccounts = "accounts"
	SourceGuest    = "guest"
)

// IdentitySources lists the shoppers' sign-ins, in a fixed order.
func (c Config) IdentitySources() []string {
	var out []string
	for _, s := range []string{SourceOIDC, SourceAccounts, SourceGuest} {
		if c.HasIdentity(s) {
			out = append(out, s)
		}
	}
	return out
}

// HasIdentity reports whether shoppers may sign in with source.
func (c Config) HasIdentity(source string) bool {
	return slices.Contains(SplitList(c.Identity), source)
}

// checkIdentity checks the identity settings and fills their defaults:
// guest where none is named, the public URL from the HTTP address.
func (c *Config) checkIdentity(bad func(setting, format string, args ...any)) {
	if strings.TrimSpace(c.Identity) == "" {
		c.Identity = SourceGuest
	}
	for _, s := range SplitList(c.Identity) {
		if s != SourceOIDC && s != SourceAccounts && s != SourceGuest {
			bad("identity", "%q is none of oidc, accounts, guest", s)
		}
	}
	if c.Production() && c.HasIdentity(SourceGuest) && !c.AllowGuest {
		bad("identity", "production refuses guest sign-ins: each one is a new user, so the per-user cap binds nothing. "+
			"Name the shop's sign-in (oidc, accounts), or set SECKILL_ALLOW_GUEST=true to accept that")
	}
	if c.PublicURL == "" && c.Production() && (c.HasIdentity(SourceOIDC) || c.HasIdentity(SourceAccounts)) {
		bad("public_url", "required in production with oidc or accounts: the verification links, the passkeys and the provider's callback name it")
	}
	if c.PublicURL == "" {
		host, port, _ := net.SplitHostPort(c.HTTPAddr)
		if host == "" || host == "127.0.0.1" || host == "::1" || host == "0.0.0.0" || host == "::" {
			host = "localhost" // an IP address cannot be a passkey's relying party
		}
		c.PublicURL = "http://" + net.JoinHostPort(host, port)
	}
	if u, err := url.Parse(c.PublicURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.RawQuery != "" {
		bad("public_url", "%q is not a URL like https://shop.example", c.PublicURL)
	}
	if c.HasIdentity(SourceOIDC) {
		if u, err := url.Parse(c.OIDCIssuer); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			bad("oidc_issuer", "must be the provider's issuer URL when identity has oidc, not %q", c.OIDCIssuer)
		}
		if c.OIDCClientID == "" {
			bad("oidc_client_id", "must be set when identity has oidc")
		}
	}
	if c.HasIdentity(SourceAccounts) && c.Production() && c.SMTPAddr == "" {
		bad("smtp_addr", "required in production when identity has accounts (verification mail goes there)")
	}
	if _, _, err := net.SplitHostPort(c.SMTPAddr); c.SMTPAddr != "" && err != nil {
		bad("smtp_addr", "not a host:port: %q", c.SMTPAddr)
	}
	if c.RateSignupPerIP < 0 || c.RateSigninPerIP < 0 {
		bad("rate_signup_per_ip", "rate_signup_per_ip and rate_signin_per_ip must be 0 (off) or positive")
	}
}

// TrustedProxiesList returns the trusted proxies as a list.
func (c Config) TrustedProxiesList() []string { return SplitList(c.TrustedProxies) }

// PublicOriginsList returns the origins the site is served under.
func (c Config) PublicOriginsList() []string { return SplitList(c.PublicOrigins) }

// AllowedOriginsList returns the extra allowed origins as a list.
func (c Config) AllowedOriginsList() []string { return SplitList(c.AllowedOrigins) }

// SplitList splits a comma-separated setting, dropping blanks.
func SplitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// LogValue lets slog print the configuration with its secrets masked.
func (c Config) LogValue() slog.Value {
	var attrs []slog.Attr
	v := reflect.ValueOf(c)
	t := v.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		key := f.Tag.Get("koanf")
		if key == "" || key == "-" {
			continue
		}
		val := fmt.Sprint(v.Field(i).Interface())
		switch f.Tag.Get("secret") {
		case "true":
			if val != "" {
				val = "***"
			}
		case "url", "dsn":
			val = MaskCredentials(val)
		}
		attrs = append(attrs, slog.String(key, val))
	}
	return slog.GroupValue(attrs...)
}

// MaskCredentials hides the password in "scheme://user:pass@host" and
// "user:pass@tcp(host)" forms, and in each of a comma-separated list of
// URLs.
func MaskCredentials(s string) string {
	if strings.Contains(s, "://") && strings.Contains(s, ",") {
		parts := strings.Split(s, ",")
		for i, p := range parts {
			parts[i] = MaskCredentials(p)
		}
		return strings.Join(parts, ",")
	}
	at := strings.LastIndex(s, "@")
	if at < 0 {
		return s
	}
	start := strings.Index(s, "://")
	if start < 0 {
		start = 0
	} else {
		start += 3
	}
	user, _, hasPass := strings.Cut(s[start:at], ":")
	if !hasPass {
		return s
	}
	return s[:start] + user + ":***" + s[at:]
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
