package configs

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"slices"
	"strings"
	"time"
)

// Each section holds the settings one part of the system needs and checks
// them itself. Its fields keep the flat keys of seckill.yaml (the
// environment variables are named after them), so Config squashes the
// sections into one level of keys.

// problems gathers what a section finds wrong, each naming the environment
// variable the operator sets, the way they will look for it.
type problems []error

// add records that setting (its seckill.yaml key) is wrong.
func (p *problems) add(setting, format string, args ...any) {
	*p = append(*p, fmt.Errorf("config: %s%s: %s", EnvPrefix, strings.ToUpper(setting), fmt.Sprintf(format, args...)))
}

func (p problems) err() error { return errors.Join(p...) }

// checkHostPort records addr under setting unless it is a host:port, or
// empty where empty turns a listener off.
func (p *problems) checkHostPort(setting, addr string, emptyOK bool) {
	if addr == "" && emptyOK {
		return
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		p.add(setting, "not a host:port: %q", addr)
	}
}

// Process is how the process runs: its environment, logs, mode and
// shutdown deadline.
type Process struct {
	Env      string `koanf:"env"`
	LogLevel string `koanf:"log_level"`
	// Embedded runs the whole system in one process with no external
	// service (seckill all --embedded): in-process Redis, a SQLite ledger
	// in DataDir, an in-process bus.
	Embedded        bool          `koanf:"embedded"`
	DataDir         string        `koanf:"data_dir"`
	ShutdownTimeout time.Duration `koanf:"shutdown_timeout"`
}

// Production reports whether the process runs with production settings.
func (s Process) Production() bool { return s.Env == "production" }

func (s Process) check() error {
	var p problems
	switch s.Env {
	case "development", "production":
	default:
		p.add("env", "must be development or production, not %q", s.Env)
	}
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(s.LogLevel)); err != nil {
		p.add("log_level", "must be debug, info, warn or error, not %q", s.LogLevel)
	}
	if s.DataDir == "" {
		p.add("data_dir", "must not be empty")
	}
	if s.ShutdownTimeout <= 0 {
		p.add("shutdown_timeout", "must be positive")
	}
	return p.err()
}

// HTTP is the shoppers' and admins' listener, the operations listener and
// the live-stock WebSockets.
type HTTP struct {
	Addr           string        `koanf:"http_addr"`
	ReadTimeout    time.Duration `koanf:"http_read_timeout"`
	WriteTimeout   time.Duration `koanf:"http_write_timeout"`
	OpsAddr        string        `koanf:"ops_addr"`
	TrustedProxies string        `koanf:"trusted_proxies"`
	BodyLimit      int64         `koanf:"body_limit"`
	ImageMaxBytes  int64         `koanf:"image_max_bytes"`
	CookieSecure   bool          `koanf:"cookie_secure"`
	PublicOrigins  string        `koanf:"public_origins"`
	AllowedOrigins string        `koanf:"allowed_origins"`
	WSMaxPerIP     int           `koanf:"ws_max_per_ip"`
	WSMaxTotal     int           `koanf:"ws_max_total"`
	// WSPoll is how often a watched sale's stock is read from Redis.
	WSPoll time.Duration `koanf:"ws_poll"`
}

// TrustedProxiesList returns the trusted proxies as a list.
func (s HTTP) TrustedProxiesList() []string { return SplitList(s.TrustedProxies) }

// PublicOriginsList returns the origins the site is served under.
func (s HTTP) PublicOriginsList() []string { return SplitList(s.PublicOrigins) }

// AllowedOriginsList returns the extra allowed origins as a list.
func (s HTTP) AllowedOriginsList() []string { return SplitList(s.AllowedOrigins) }

func (s HTTP) check() error {
	var p problems
	p.checkHostPort("http_addr", s.Addr, false)
	p.checkHostPort("ops_addr", s.OpsAddr, true)
	if s.ReadTimeout <= 0 || s.WriteTimeout <= 0 {
		p.add("http_read_timeout", "http_read_timeout and http_write_timeout must be positive")
	}
	for _, o := range append(s.PublicOriginsList(), s.AllowedOriginsList()...) {
		if u, err := url.Parse(o); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" ||
			u.Path != "" || u.RawQuery != "" || u.User != nil {
			p.add("public_origins", "%q is not an origin like https://shop.example (public_origins, allowed_origins)", o)
		}
	}
	if s.WSMaxPerIP < 0 || s.WSMaxTotal < 0 {
		p.add("ws_max_per_ip", "ws_max_per_ip and ws_max_total must be 0 (no cap) or positive")
	}
	if s.WSPoll <= 0 {
		p.add("ws_poll", "must be positive")
	}
	for _, proxy := range s.TrustedProxiesList() {
		if net.ParseIP(proxy) == nil {
			if _, _, err := net.ParseCIDR(proxy); err != nil {
				p.add("trusted_proxies", "%q is neither an IP nor a CIDR", proxy)
			}
		}
	}
	if s.BodyLimit < 256 {
		p.add("body_limit", "must be at least 256 bytes")
	}
	if s.ImageMaxBytes < 1<<10 || s.ImageMaxBytes > 64<<20 {
		p.add("image_max_bytes", "must be between 1 KiB and 64 MiB")
	}
	return p.err()
}

// Redis is where the stock, the accepted orders' outbox and the sessions
// live, and how durable an accepted buy must be before it is answered.
type Redis struct {
	// Addr is one address (a single Redis) or several (a Cluster's seeds).
	Addr      string `koanf:"redis_addr"`
	Sentinels string `koanf:"redis_sentinels"`
	Master    string `koanf:"redis_master"`
	DB        int    `koanf:"redis_db"`
	Password  string `koanf:"redis_password" secret:"true"`
	PoolSize  int    `koanf:"redis_pool_size"`
	Prefix    string `koanf:"redis_prefix"`
	// AllowVolatile lets a production process run on a Redis that keeps
	// its data only in memory.
	AllowVolatile bool `koanf:"redis_allow_volatile"`
	// WaitReplicas replicas must have each buy call (WAIT) before it is
	// answered, within WaitTimeout; 0: answer at once.
	WaitReplicas int           `koanf:"redis_wait_replicas"`
	WaitTimeout  time.Duration `koanf:"redis_wait_timeout"`
}

func (s Redis) check() error {
	var p problems
	addrs := SplitList(s.Addr)
	for _, addr := range addrs {
		p.checkHostPort("redis_addr", addr, false)
	}
	for _, addr := range SplitList(s.Sentinels) {
		p.checkHostPort("redis_sentinels", addr, false)
	}
	switch {
	case len(addrs) == 0 && s.Sentinels == "":
		p.add("redis_addr", "must name a Redis (or set redis_sentinels)")
	case s.Sentinels != "" && s.Master == "":
		p.add("redis_master", "must name the master when redis_sentinels is set")
	case len(addrs) > 1 && s.DB != 0:
		p.add("redis_db", "must be 0 for a Redis Cluster (several redis_addr)")
	}
	if s.DB < 0 || s.DB > 15 {
		p.add("redis_db", "must be 0..15")
	}
	if s.WaitReplicas < 0 || s.WaitReplicas > 16 {
		p.add("redis_wait_replicas", "must be 0 (no wait) to 16")
	}
	if s.WaitTimeout < time.Millisecond {
		p.add("redis_wait_timeout", "must be at least 1ms (WAIT with 0 would wait forever)")
	}
	if s.PoolSize < 1 {
		p.add("redis_pool_size", "must be at least 1")
	}
	if s.Prefix == "" || strings.ContainsAny(s.Prefix, "{}: ") {
		p.add("redis_prefix", "must be non-empty without braces, colons or spaces")
	}
	return p.err()
}

// AMQP is the RabbitMQ the relay publishes accepted orders to.
type AMQP struct {
	// URL is one amqp:// or amqps:// URL, or several for a cluster.
	URL       string `koanf:"amqp_url" secret:"url"`
	Prefix    string `koanf:"amqp_prefix"`
	QueueType string `koanf:"amqp_queue_type"`
}

func (s AMQP) check() error {
	var p problems
	urls := SplitList(s.URL)
	for _, u := range urls {
		if !strings.HasPrefix(u, "amqp://") && !strings.HasPrefix(u, "amqps://") {
			p.add("amqp_url", "must be amqp:// or amqps:// URLs (comma-separated for a cluster)")
		}
	}
	if len(urls) == 0 {
		p.add("amqp_url", "must not be empty")
	}
	if s.Prefix == "" {
		p.add("amqp_prefix", "must not be empty")
	}
	if s.QueueType != "classic" && s.QueueType != "quorum" {
		p.add("amqp_queue_type", "must be classic or quorum, not %q", s.QueueType)
	}
	return p.err()
}

// MySQL is the ledger's database.
type MySQL struct {
	DSN string `koanf:"mysql_dsn" secret:"dsn"`
	// AutoMigrate lets serve and worker bring the schema up to date at
	// start instead of refusing to run on an old one.
	AutoMigrate bool `koanf:"auto_migrate"`
}

func (s MySQL) check() error {
	var p problems
	if s.DSN == "" {
		p.add("mysql_dsn", "must not be empty")
	}
	return p.err()
}

// Sessions are the shoppers' and admins' sign-in tokens; JWTSecret also
// keys the buy tickets and the waiting room's passes.
type Sessions struct {
	JWTSecret     string        `koanf:"jwt_secret" secret:"true"`
	TTL           time.Duration `koanf:"session_ttl"`
	AdminToken    string        `koanf:"admin_token" secret:"true"`
	AdminPassword string        `koanf:"admin_password" secret:"true"`

	// GeneratedAdminPassword is true when AdminPassword is the development
	// default made up at start, which the caller prints once.
	GeneratedAdminPassword bool `koanf:"-"`
}

// check refuses, in production, the secrets development makes up.
func (s Sessions) check(production bool) error {
	var p problems
	if s.TTL < time.Minute {
		p.add("session_ttl", "must be at least 1m")
	}
	if production {
		if len(s.JWTSecret) < 32 {
			p.add("jwt_secret", "required in production, at least 32 bytes")
		}
		if s.AdminPassword == "" {
			p.add("admin_password", "required in production")
		}
	}
	return p.err()
}

// The identity sources.
const (
	SourceOIDC     = "oidc"
	SourceAccounts = "accounts"
	SourceGuest    = "guest"
)

// Identity is how shoppers sign in: the sources offered, the site's public
// URL, the OpenID Connect provider, the accounts' mail and rate limits.
type Identity struct {
	// Sources names the shoppers' sign-ins, comma-separated: oidc,
	// accounts, guest (List); AllowGuest lets production offer guest.
	Sources    string `koanf:"identity"`
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
}

// List returns the shoppers' sign-ins, in a fixed order.
func (s Identity) List() []string {
	var out []string
	for _, src := range []string{SourceOIDC, SourceAccounts, SourceGuest} {
		if s.Has(src) {
			out = append(out, src)
		}
	}
	return out
}

// Has reports whether shoppers may sign in with source.
func (s Identity) Has(source string) bool {
	return slices.Contains(SplitList(s.Sources), source)
}

// check checks the identity settings and fills their defaults: guest where
// none is named, the public URL from httpAddr (the HTTP listener's).
func (s *Identity) check(production bool, httpAddr string) error {
	var p problems
	if strings.TrimSpace(s.Sources) == "" {
		s.Sources = SourceGuest
	}
	for _, src := range SplitList(s.Sources) {
		if src != SourceOIDC && src != SourceAccounts && src != SourceGuest {
			p.add("identity", "%q is none of oidc, accounts, guest", src)
		}
	}
	if production && s.Has(SourceGuest) && !s.AllowGuest {
		p.add("identity", "production refuses guest sign-ins: each one is a new user, so the per-user cap binds nothing. "+
			"Name the shop's sign-in (oidc, accounts), or set SECKILL_ALLOW_GUEST=true to accept that")
	}
	if s.PublicURL == "" && production && (s.Has(SourceOIDC) || s.Has(SourceAccounts)) {
		p.add("public_url", "required in production with oidc or accounts: the verification links, the passkeys and the provider's callback name it")
	}
	if s.PublicURL == "" {
		host, port, _ := net.SplitHostPort(httpAddr)
		if host == "" || host == "127.0.0.1" || host == "::1" || host == "0.0.0.0" || host == "::" {
			host = "localhost" // an IP address cannot be a passkey's relying party
		}
		s.PublicURL = "http://" + net.JoinHostPort(host, port)
	}
	if u, err := url.Parse(s.PublicURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.RawQuery != "" {
		p.add("public_url", "%q is not a URL like https://shop.example", s.PublicURL)
	}
	if s.Has(SourceOIDC) {
		if u, err := url.Parse(s.OIDCIssuer); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			p.add("oidc_issuer", "must be the provider's issuer URL when identity has oidc, not %q", s.OIDCIssuer)
		}
		if s.OIDCClientID == "" {
			p.add("oidc_client_id", "must be set when identity has oidc")
		}
	}
	if s.Has(SourceAccounts) && production && s.SMTPAddr == "" {
		p.add("smtp_addr", "required in production when identity has accounts (verification mail goes there)")
	}
	p.checkHostPort("smtp_addr", s.SMTPAddr, true)
	if s.RateSignupPerIP < 0 || s.RateSigninPerIP < 0 {
		p.add("rate_signup_per_ip", "rate_signup_per_ip and rate_signin_per_ip must be 0 (off) or positive")
	}
	return p.err()
}

// Buy is the buy path's: its rate limits, the coalescing of Lua calls, the
// sold-out fast path, and the tickets and passes some sales require.
type Buy struct {
	RateGlobal  float64 `koanf:"rate_global"`
	RatePerUser float64 `koanf:"rate_per_user"`
	RatePerIP   float64 `koanf:"rate_per_ip"`

	BatchEnabled bool `koanf:"batch_enabled"`
	BatchMax     int  `koanf:"batch_max"`
	// SoldOutRecheck is how long a process trusts that a sale is sold out
	// (answering without Lua) when no stock-changed message says otherwise.
	SoldOutRecheck time.Duration `koanf:"sold_out_recheck"`

	TicketTTL time.Duration `koanf:"ticket_ttl"`
	// PassTTL is how long a waiting room's admission pass serves.
	PassTTL time.Duration `koanf:"pass_ttl"`
}

func (s Buy) check() error {
	var p problems
	for _, r := range []struct {
		setting string
		rate    float64
	}{{"rate_global", s.RateGlobal}, {"rate_per_user", s.RatePerUser}, {"rate_per_ip", s.RatePerIP}} {
		if r.rate < 0 {
			p.add(r.setting, "must be 0 (off) or a positive rate")
		}
	}
	if s.BatchMax < 1 || s.BatchMax > 4096 {
		p.add("batch_max", "must be 1..4096")
	}
	if s.SoldOutRecheck < 0 {
		p.add("sold_out_recheck", "must be 0 (fast path off) or positive")
	}
	if s.TicketTTL < 10*time.Second || s.TicketTTL > time.Hour {
		p.add("ticket_ttl", "must be between 10s and 1h")
	}
	if s.PassTTL < 10*time.Second || s.PassTTL > time.Hour {
		p.add("pass_ttl", "must be between 10s and 1h")
	}
	return p.err()
}

// Orders is the accepted orders' way to the ledger (the outbox relay, the
// order worker, the reconciler) and how long they and their sales last.
type Orders struct {
	PaymentWindow time.Duration `koanf:"payment_window"`
	SaleRetention time.Duration `koanf:"sale_retention"`
	// ReconcileGrace is how long an accepted order may be on its way to the
	// ledger before the reconciler reports it missing.
	ReconcileGrace time.Duration `koanf:"reconcile_grace"`
	// ReconcileInterval is how often worker processes reconcile every live
	// sale and repair drift; 0 turns it off.
	ReconcileInterval time.Duration `koanf:"reconcile_interval"`

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
}

// Keep is how long a sale's Redis keys and outbox stay after its end: its
// payment window, then the retention.
func (s Orders) Keep() time.Duration { return s.PaymentWindow + s.SaleRetention }

func (s Orders) check() error {
	var p problems
	if s.PaymentWindow < time.Second || s.PaymentWindow > 24*time.Hour {
		// A payment's record in Redis (its charge, or the timeout's barrier)
		// lives a week: the window ends, and its timeout runs, well within it.
		p.add("payment_window", "must be between 1s and 24h")
	}
	if s.SaleRetention < 0 {
		p.add("sale_retention", "must not be negative")
	}
	if s.ReconcileGrace < time.Second {
		p.add("reconcile_grace", "must be at least 1s")
	}
	if s.ReconcileInterval != 0 && s.ReconcileInterval < time.Second {
		p.add("reconcile_interval", "must be 0 (off) or at least 1s")
	}
	if s.RelayBatch < 1 || s.WorkerBatch < 1 {
		p.add("worker_batch", "relay_batch and worker_batch must be positive")
	}
	if s.RelayLinger < 0 || s.RelayLinger > time.Second {
		p.add("relay_linger", "must be 0 to 1s")
	}
	if s.RelayPack < 1 || s.RelayPack > 1000 {
		p.add("relay_pack", "must be 1..1000")
	}
	// Messages, each of up to relay_pack events: a full batch can be in
	// flight. Both bounded first, so the product cannot overflow.
	if s.WorkerPrefetch < 1 || s.WorkerPrefetch > 65535 ||
		(s.RelayPack >= 1 && s.RelayPack <= 1000 && s.WorkerPrefetch*s.RelayPack < s.WorkerBatch) {
		p.add("worker_prefetch", "must be 1..65535 messages, and worker_prefetch × relay_pack at least worker_batch")
	}
	if s.RelayClaimIdle < 100*time.Millisecond {
		p.add("relay_claim_idle", "must be at least 100ms")
	}
	if s.WorkerConsumers < 1 || s.WorkerConsumers > 64 {
		p.add("worker_consumers", "must be 1..64")
	}
	if s.WorkerFlush <= 0 {
		p.add("worker_flush", "must be positive")
	}
	p.checkHostPort("worker_metrics_addr", s.WorkerMetricsAddr, true)
	return p.err()
}

// Tracing is where traces go.
type Tracing struct {
	// Endpoint is the OTLP/HTTP endpoint traces go to; empty: off.
	Endpoint string `koanf:"otel_endpoint"`
}

// The payment providers.
const (
	ProviderTest   = "test"
	ProviderStripe = "stripe"
)

// Funds is money: the currency, the platform's fee, the bounds of a
// wallet and a top-up, the wallets' hash groups in Redis, and the payment
// provider.
type Funds struct {
	// Currency is the ISO 4217 code every amount is in (minor units).
	Currency string `koanf:"currency"`
	// FeeBps is the platform's share of each charge, in basis points.
	FeeBps int64 `koanf:"platform_fee_bps"`
	// WalletMax bounds what a wallet holds; TopupMax one top-up.
	WalletMax int64 `koanf:"wallet_max_cents"`
	TopupMax  int64 `koanf:"topup_max_cents"`
	// Groups is how many hashes the accounts' balances are spread over in
	// Redis; fixed once money is held.
	Groups int `koanf:"funds_groups"`
	// HoldFor is how long an instant checkout's wallet hold waits for its
	// stock step on a Redis Cluster (its deadline); a hold its process
	// left behind is settled by the worker's sweep soon after.
	HoldFor time.Duration `koanf:"hold_ttl"`
	// Provider is where top-ups are paid and payouts sent: test (a page of
	// this server, development and embedded mode) or stripe. Empty: test,
	// stripe in production.
	Provider string `koanf:"payment_provider"`
	// StripeSecretKey, StripeWebhookSecret (comma-separated during a
	// rotation) and StripeAPIBase (empty: Stripe's) are Stripe's.
	StripeSecretKey     string `koanf:"stripe_secret_key" secret:"true"`
	StripeWebhookSecret string `koanf:"stripe_webhook_secret" secret:"true"`
	StripeAPIBase       string `koanf:"stripe_api_base"`
}

// WebhookSecrets lists the webhook signing secrets, the newest first.
func (s Funds) WebhookSecrets() []string { return SplitList(s.StripeWebhookSecret) }

// maxFundsGroups bounds the groups: each is read once per reconcile.
const maxFundsGroups = 65536

// check checks the money settings and fills the provider's default: test,
// or stripe in production.
func (s *Funds) check(production bool) error {
	var p problems
	if len(s.Currency) != 3 || strings.ToUpper(s.Currency) != s.Currency || strings.ContainsFunc(s.Currency, func(r rune) bool { return r < 'A' || r > 'Z' }) {
		p.add("currency", "must be an ISO 4217 code of three capital letters, like USD, not %q", s.Currency)
	}
	if s.FeeBps < 0 || s.FeeBps > 10_000 {
		p.add("platform_fee_bps", "must be 0..10000 (basis points)")
	}
	if s.WalletMax < 1 || s.WalletMax > 1_000_000_000_000_000 {
		p.add("wallet_max_cents", "must be 1..10^15")
	}
	if s.TopupMax < 1 || s.TopupMax > s.WalletMax {
		p.add("topup_max_cents", "must be 1 up to wallet_max_cents")
	}
	if s.Groups < 1 || s.Groups > maxFundsGroups {
		p.add("funds_groups", "must be 1..%d", maxFundsGroups)
	}
	if s.HoldFor < time.Second || s.HoldFor > time.Hour {
		p.add("hold_ttl", "must be 1s..1h")
	}
	if s.Provider == "" {
		s.Provider = ProviderTest
		if production {
			s.Provider = ProviderStripe
		}
	}
	switch s.Provider {
	case ProviderTest:
		if production {
			p.add("payment_provider", "production takes money through stripe; test is a page of this server that pays for anyone")
		}
	case ProviderStripe:
		if s.StripeSecretKey == "" {
			p.add("stripe_secret_key", "required with payment_provider stripe")
		}
		if len(s.WebhookSecrets()) == 0 {
			p.add("stripe_webhook_secret", "required with payment_provider stripe (its webhook's signing secret, whsec_…)")
		}
	default:
		p.add("payment_provider", "must be test or stripe, not %q", s.Provider)
	}
	if s.StripeAPIBase != "" {
		if u, err := url.Parse(s.StripeAPIBase); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			p.add("stripe_api_base", "%q is not a URL like https://api.stripe.com", s.StripeAPIBase)
		}
	}
	return p.err()
}
