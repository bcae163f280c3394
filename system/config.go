package system

import (
	"strings"

	"github.com/seckill/seckill/bus"
	"github.com/seckill/seckill/configs"
	"github.com/seckill/seckill/identity"
	"github.com/seckill/seckill/internal/rdb"
	"github.com/seckill/seckill/inventory"
	"github.com/seckill/seckill/server"
	"github.com/seckill/seckill/sessions"
	"github.com/seckill/seckill/worker"
)

// The small config of each part, taken from the configuration.

// RedisOptions say where Redis is.
func RedisOptions(c configs.Config) rdb.Options {
	return rdb.Options{
		Addrs: configs.SplitList(c.RedisAddr), Sentinels: configs.SplitList(c.RedisSentinels), Master: c.RedisMaster,
		DB: c.RedisDB, Password: c.RedisPassword, PoolSize: c.RedisPoolSize,
	}
}

// InventoryConfig is the stock store's.
func InventoryConfig(c configs.Config) inventory.Config {
	return inventory.Config{Prefix: c.RedisPrefix, Keep: keep(c), WaitReplicas: c.RedisWaitReplicas, WaitTimeout: c.RedisWaitTimeout}
}

// SessionsConfig is the shopper and admin sessions'.
func SessionsConfig(c configs.Config) sessions.Config {
	return sessions.Config{
		Prefix: c.RedisPrefix, Secret: []byte(c.JWTSecret), TTL: c.SessionTTL,
		AdminPassword: c.AdminPassword, AdminToken: c.AdminToken,
	}
}

// ServerConfig is the HTTP server's.
func ServerConfig(c configs.Config) server.Config {
	return server.Config{
		Addr: c.HTTPAddr, ReadTimeout: c.HTTPReadTimeout, WriteTimeout: c.HTTPWriteTimeout, ShutdownTimeout: c.ShutdownTimeout,
		TrustedProxies: c.TrustedProxiesList(), BodyLimit: c.BodyLimit, CookieSecure: c.CookieSecure,
		PublicOrigins: c.PublicOriginsList(), AllowedOrigins: c.AllowedOriginsList(),
		WSMaxPerIP: c.WSMaxPerIP, WSMaxTotal: c.WSMaxTotal, WSPoll: c.WSPoll,
		RateGlobal: c.RateGlobal, RatePerUser: c.RatePerUser, RatePerIP: c.RatePerIP,
		RateSignupPerIP: c.RateSignupPerIP, RateSigninPerIP: c.RateSigninPerIP,
	}
}

// OIDCConfig names the shop's OpenID Connect provider.
func OIDCConfig(c configs.Config) identity.OIDCConfig {
	return identity.OIDCConfig{
		Issuer: c.OIDCIssuer, ClientID: c.OIDCClientID, ClientSecret: c.OIDCClientSecret, Audience: c.OIDCAudience,
		RedirectURL: strings.TrimRight(c.PublicURL, "/") + "/auth/oidc/callback",
	}
}

// Mailer sends the accounts' mail: over SMTP when smtp_addr is set, and
// into the log as well in development and embedded mode.
func Mailer(c configs.Config, embedded bool) identity.Mailer {
	var m identity.Mailer
	if c.SMTPAddr != "" {
		m = identity.SMTP{Addr: c.SMTPAddr, From: c.SMTPFrom}
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
		Batch: c.WorkerBatch, Flush: c.WorkerFlush, Prefetch: c.WorkerPrefetch, Window: c.PaymentWindow,
		Consumers: c.WorkerConsumers, Grace: c.ShutdownTimeout,
	}
}

// TimeoutConsumerConfig is the payment timeout consumer's.
func TimeoutConsumerConfig(c configs.Config) worker.TimeoutConfig {
	return worker.TimeoutConfig{Grace: c.ShutdownTimeout}
}

// RelayConfig is the outbox relay's.
func RelayConfig(c configs.Config) worker.RelayConfig {
	return worker.RelayConfig{Batch: c.RelayBatch, Pack: c.RelayPack, ClaimIdle: c.RelayClaimIdle, Linger: c.RelayLinger, Lookback: keep(c)}
}

// ReconcilerConfig is the reconciler's, asking b where missing orders are.
func ReconcilerConfig(c configs.Config, b bus.Bus) worker.ReconcilerConfig {
	return worker.ReconcilerConfig{Grace: c.ReconcileGrace, Window: c.PaymentWindow, Bus: b}
}
