package system

import (
	"strings"

	"github.com/seckill/seckill/bus"
	"github.com/seckill/seckill/configs"
	"github.com/seckill/seckill/funds"
	"github.com/seckill/seckill/identity"
	"github.com/seckill/seckill/internal/rdb"
	"github.com/seckill/seckill/inventory"
	"github.com/seckill/seckill/payments"
	"github.com/seckill/seckill/provider"
	"github.com/seckill/seckill/server"
	"github.com/seckill/seckill/sessions"
	"github.com/seckill/seckill/worker"
)

// The small config of each part, taken from the configuration.

// RedisOptions say where Redis is.
func RedisOptions(c configs.Config) rdb.Options {
	return rdb.Options{
		Addrs: configs.SplitList(c.Redis.Addr), Sentinels: configs.SplitList(c.Redis.Sentinels), Master: c.Redis.Master,
		DB: c.Redis.DB, Password: c.Redis.Password, PoolSize: c.Redis.PoolSize,
	}
}

// InventoryConfig is the stock store's.
func InventoryConfig(c configs.Config) inventory.Config {
	return inventory.Config{Prefix: c.Redis.Prefix, Keep: c.Orders.Keep(), WaitReplicas: c.Redis.WaitReplicas, WaitTimeout: c.Redis.WaitTimeout}
}

// FundsConfig is the balances' store's.
func FundsConfig(c configs.Config) funds.Config {
	return funds.Config{Prefix: c.Redis.Prefix, Groups: c.Funds.Groups, WalletMax: c.Funds.WalletMax,
		Replicas: rdb.Replicas{N: c.Redis.WaitReplicas, Timeout: c.Redis.WaitTimeout}}
}

// PaymentsConfig is the payments service's.
func PaymentsConfig(c configs.Config) payments.Config {
	return payments.Config{Currency: c.Funds.Currency, WalletMax: c.Funds.WalletMax, TopupMax: c.Funds.TopupMax,
		ReturnURL: strings.TrimRight(c.Identity.PublicURL, "/") + "/#/wallet", PayoutAccountRequired: c.Funds.Provider == configs.ProviderStripe}
}

// Provider is the configured payment provider: Stripe, or the test
// provider's pages on this server (signing with the first webhook secret).
func Provider(c configs.Config) payments.Provider {
	if c.Funds.Provider == configs.ProviderStripe {
		return provider.NewStripe(c.Funds.StripeSecretKey, c.Funds.StripeAPIBase)
	}
	return provider.Test{Secret: c.Funds.WebhookSecrets()[0], Base: c.Identity.PublicURL}
}

// SessionsConfig is the shopper and admin sessions'.
func SessionsConfig(c configs.Config) sessions.Config {
	return sessions.Config{
		Prefix: c.Redis.Prefix, Secret: []byte(c.Sessions.JWTSecret), TTL: c.Sessions.TTL,
		AdminPassword: c.Sessions.AdminPassword, AdminToken: c.Sessions.AdminToken,
	}
}

// ServerConfig is the HTTP server's.
func ServerConfig(c configs.Config) server.Config {
	return server.Config{
		Addr: c.HTTP.Addr, ReadTimeout: c.HTTP.ReadTimeout, WriteTimeout: c.HTTP.WriteTimeout, ShutdownTimeout: c.Process.ShutdownTimeout,
		TrustedProxies: c.HTTP.TrustedProxiesList(), BodyLimit: c.HTTP.BodyLimit, ImageMaxBytes: c.HTTP.ImageMaxBytes, Currency: c.Funds.Currency, CookieSecure: c.HTTP.CookieSecure,
		PublicOrigins: c.HTTP.PublicOriginsList(), AllowedOrigins: c.HTTP.AllowedOriginsList(),
		WSMaxPerIP: c.HTTP.WSMaxPerIP, WSMaxTotal: c.HTTP.WSMaxTotal, WSPoll: c.HTTP.WSPoll,
		RateGlobal: c.Buy.RateGlobal, RatePerUser: c.Buy.RatePerUser, RatePerIP: c.Buy.RatePerIP,
		RateSignupPerIP: c.Identity.RateSignupPerIP, RateSigninPerIP: c.Identity.RateSigninPerIP,
	}
}

// OIDCConfig names the shop's OpenID Connect provider.
func OIDCConfig(c configs.Config) identity.OIDCConfig {
	return identity.OIDCConfig{
		Issuer: c.Identity.OIDCIssuer, ClientID: c.Identity.OIDCClientID, ClientSecret: c.Identity.OIDCClientSecret, Audience: c.Identity.OIDCAudience,
		RedirectURL: strings.TrimRight(c.Identity.PublicURL, "/") + "/auth/oidc/callback",
	}
}

// Mailer sends the accounts' mail: over SMTP when smtp_addr is set, and
// into the log as well in development and embedded mode.
func Mailer(c configs.Config, embedded bool) identity.Mailer {
	var m identity.Mailer
	if c.Identity.SMTPAddr != "" {
		m = identity.SMTP{Addr: c.Identity.SMTPAddr, From: c.Identity.SMTPFrom}
	}
	if embedded || !c.Production() {
		m = identity.LogMail{Next: m}
	}
	if m == nil {
		m = identity.LogMail{}
	}
	return m
}

// OrderConsumerConfig is the order consumer's.
func OrderConsumerConfig(c configs.Config) worker.OrderConfig {
	return worker.OrderConfig{
		Batch: c.Orders.WorkerBatch, Flush: c.Orders.WorkerFlush, Prefetch: c.Orders.WorkerPrefetch, Window: c.Orders.PaymentWindow,
		Consumers: c.Orders.WorkerConsumers, Grace: c.Process.ShutdownTimeout,
	}
}

// TimeoutConsumerConfig is the payment timeout consumer's.
func TimeoutConsumerConfig(c configs.Config) worker.TimeoutConfig {
	return worker.TimeoutConfig{Grace: c.Process.ShutdownTimeout}
}

// RelayConfig is the outbox relay's.
func RelayConfig(c configs.Config) worker.RelayConfig {
	return worker.RelayConfig{Batch: c.Orders.RelayBatch, Pack: c.Orders.RelayPack, ClaimIdle: c.Orders.RelayClaimIdle, Linger: c.Orders.RelayLinger, Lookback: c.Orders.Keep()}
}

// FundsRelayConfig is the funds relay's: the outbox relay's settings.
func FundsRelayConfig(c configs.Config) worker.FundsRelayConfig {
	return worker.FundsRelayConfig{Batch: c.Orders.RelayBatch, Pack: c.Orders.RelayPack, ClaimIdle: c.Orders.RelayClaimIdle, Linger: c.Orders.RelayLinger}
}

// FundsConsumerConfig is the funds consumer's: the order consumer's
// settings.
func FundsConsumerConfig(c configs.Config) worker.FundsConfig {
	return worker.FundsConfig{
		Batch: c.Orders.WorkerBatch, Flush: c.Orders.WorkerFlush, Prefetch: c.Orders.WorkerPrefetch,
		Consumers: c.Orders.WorkerConsumers, Grace: c.Process.ShutdownTimeout,
	}
}

// ReconcilerConfig is the reconciler's, asking b where missing orders are.
func ReconcilerConfig(c configs.Config, b bus.Bus) worker.ReconcilerConfig {
	return worker.ReconcilerConfig{Grace: c.Orders.ReconcileGrace, Window: c.Orders.PaymentWindow, Bus: b}
}
