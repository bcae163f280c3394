// Package server is Seckill's HTTP front: the shopper API, the merchant
// admin API, the live-stock WebSocket route (package live's hub), the
// embedded web pages and the operational endpoints. It is an adapter: it decodes, authenticates,
// rate-limits and validates every request, calls the services (package
// sales, tickets, sessions and the buy chain) and encodes their answers;
// it issues no Redis or SQL of its own.
package server

import (
	"context"
	"crypto/rand"
	"encoding/base32"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/seckill/seckill"
	"github.com/seckill/seckill/internal/tracing"
	"github.com/seckill/seckill/internal/wait"
	"github.com/seckill/seckill/live"
)

// Reserver decides buys: the buy chain (package tickets' gate in front of
// package inventory's batcher, fast path and store), built by the caller.
type Reserver interface {
	Reserve(ctx context.Context, sale int64, buys []seckill.Buy) (seckill.Decision, error)
}

// Config is what the HTTP front needs to know.
type Config struct {
	// Addr is the address served (http_addr): its host is one the
	// WebSocket accepts when no public origin is configured.
	Addr string
	// ReadTimeout bounds reading a whole request, WriteTimeout writing an
	// answer, ShutdownTimeout draining requests at shutdown.
	ReadTimeout, WriteTimeout, ShutdownTimeout time.Duration
	// TrustedProxies are the proxies whose X-Forwarded-For is believed.
	TrustedProxies []string
	// BodyLimit caps shopper request bodies (admin bodies: 16 KiB);
	// ImageMaxBytes an uploaded product image (0: 5 MiB).
	BodyLimit     int64
	ImageMaxBytes int64
	// Currency is the ISO 4217 code of every price (funds' currency).
	Currency     string
	CookieSecure bool
	// PublicOrigins are the origins the site is served under;
	// AllowedOrigins further ones allowed for WebSockets and
	// cookie-authenticated state changes.
	PublicOrigins, AllowedOrigins []string
	// WSMaxPerIP and WSMaxTotal cap live connections (0: no cap); WSPoll is
	// how often a watched sale's stock is read.
	WSMaxPerIP, WSMaxTotal int
	WSPoll                 time.Duration
	// Buy requests per second allowed, in all, per user and per client IP;
	// 0 turns that limiter off.
	RateGlobal, RatePerUser, RatePerIP float64
	// Account sign-ups and password sign-ins per minute per client IP; 0
	// turns that limiter off.
	RateSignupPerIP, RateSigninPerIP float64
}

// Sales is the sales service (package sales) as the server calls it:
// each part is declared beside the handlers that use it, and the stock
// of a sale is what the live-stock hub reads.
type Sales interface {
	SaleCatalog // sales.go
	SaleChanges // sales.go
	SaleFigures // stats.go
	OrderBook   // orders.go
	live.Stocks
}

// Deps are the services a Server calls, as the small interfaces it
// declares; the caller passes the concrete services (system.Server).
type Deps struct {
	Buys     Reserver
	Sales    Sales
	Outcomes Outcomes
	Tickets  Tickets
	// Room runs the sales' waiting rooms.
	Room     Rooms
	Shoppers Shoppers
	Admins   Admins
	// Identity are the shoppers' sign-ins offered.
	Identity Identity
	// Merchants are the admin panel's merchants and its sign-in.
	Merchants Merchants
	// Audit reads the audit log.
	Audit AuditLog
	// Payments are the wallets, statements and credits; Topups the
	// top-ups through the provider and its webhooks (the same service).
	Payments Payments
	Topups   Topups
	Refunds  Refunds
	Payouts  Payouts
	// Ready are the readiness checks by service name (redis, mysql, rabbitmq).
	Ready map[string]func(context.Context) error
	// DeadLetters counts the dead-letter queue, shown on /readyz and the
	// dashboard; nil when there is no bus to ask.
	DeadLetters func(context.Context) (int, error)
	Registry    *prometheus.Registry
	// Chores run beside the server while it serves (the sold-out fast
	// path's listener, say), stopped after its requests drained.
	Chores []func(context.Context)
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Server serves the HTTP API: it decodes, authenticates, calls the
// services and encodes their answers.
type Server struct {
	cfg Config
	Deps

	engine  *gin.Engine
	metrics *metrics
	limits  *limits
	logins  *limiter
	// accountLogins limits admin logins per account, from every address.
	accountLogins *limiter
	signups       *limiter
	signins       *limiter
	csrf          *http.CrossOriginProtection
	live          *live.Hub
	api           *gin.RouterGroup
}

// New builds a Server. It opens nothing; Run serves.
func New(cfg Config, d Deps) (*Server, error) {
	s := &Server{
		cfg: cfg, Deps: d,
		limits:        newLimits(cfg.RateGlobal, cfg.RatePerUser, cfg.RatePerIP),
		logins:        newLimiter(loginsPerSecond, loginBurst),
		accountLogins: newLimiter(accountLogins/60.0, accountLogins),
		signups:       newLimiter(cfg.RateSignupPerIP/60, int(math.Ceil(cfg.RateSignupPerIP))),
		signins:       newLimiter(cfg.RateSigninPerIP/60, int(math.Ceil(cfg.RateSigninPerIP))),
		csrf:          http.NewCrossOriginProtection(),
	}
	if s.Now == nil {
		s.Now = time.Now
	}
	if s.cfg.ImageMaxBytes <= 0 {
		s.cfg.ImageMaxBytes = defaultImageMaxBytes
	}
	if s.Registry == nil {
		s.Registry = prometheus.NewRegistry()
	}
	s.metrics = newMetrics(s.Registry)
	s.limiterSizes()
	s.live = newLive(cfg, s.Deps)
	for _, o := range cfg.AllowedOrigins {
		if err := s.csrf.AddTrustedOrigin(o); err != nil {
			return nil, fmt.Errorf("server: allowed origin %q: %w", o, err)
		}
	}
	if err := s.routes(); err != nil {
		return nil, err
	}
	return s, nil
}

// Handler returns the server's HTTP handler.
func (s *Server) Handler() http.Handler { return s.engine }

func (s *Server) routes() error {
	gin.SetMode(gin.ReleaseMode)
	e := gin.New()
	e.ContextWithFallback = true
	if err := e.SetTrustedProxies(s.cfg.TrustedProxies); err != nil {
		return fmt.Errorf("server: trusted proxies: %w", err)
	}
	e.Use(s.recover, s.requestID, s.trace, s.metrics.observe, s.accessLog)
	e.NoRoute(noRoute)
	// A known path asked with a method it does not take is answered 405
	// with the JSON error body, Gin setting Allow to the methods it does
	// take. Gin routes HEAD and OPTIONS only where they are registered
	// (nowhere), so on a GET route they get 405 and "Allow: GET" too. A
	// stray trailing slash is an unknown route: the JSON 404, not a
	// redirect.
	e.NoMethod(noMethod)
	e.HandleMethodNotAllowed = true
	e.RedirectTrailingSlash = false

	e.GET("/healthz", healthz)
	e.GET("/readyz", readyz(s.Ready, s.DeadLetters))
	// Metrics are for operators: on the ops listener (OpsHandler), and here
	// only with the admin token.
	e.GET("/metrics", s.requireAdmin, s.requireOperator, gin.WrapH(promhttp.HandlerFor(s.Registry, promhttp.HandlerOpts{Registry: s.Registry})))

	api := e.Group("/api", s.limitBody(s.cfg.BodyLimit), s.sameOrigin)
	api.POST("/session", s.createSession)
	api.GET("/session", s.whoAmI)
	api.DELETE("/session", s.endSession)
	api.GET("/sales", s.listSales)
	api.GET("/sales/:id", s.getSale)
	api.GET("/sales/:id/image", s.saleImage)
	api.GET("/sales/:id/mine", s.requireUser, s.mine)
	api.POST("/sales/:id/buy", s.requireUser, s.rateLimit, s.buy)
	// Tickets and challenges take from the buy limiters' budgets.
	api.GET("/sales/:id/challenge", s.requireUser, s.rateLimit, s.challenge)
	api.POST("/sales/:id/ticket", s.requireUser, s.rateLimit, s.ticket)
	// The waiting room is read by every waiting page: the buy limiters
	// bound what one user or address may ask of it.
	api.POST("/sales/:id/queue", s.requireUser, s.rateLimit, s.joinQueue)
	api.GET("/sales/:id/queue", s.requireUser, s.rateLimit, s.readQueue)
	api.GET("/orders", s.requireUser, s.listOrders)
	api.GET("/orders/:id", s.requireUser, s.getOrder)
	api.POST("/orders/:id/pay", s.requireUser, s.payOrder)
	api.GET("/wallet", s.requireUser, s.wallet)
	api.GET("/wallet/transfers", s.requireUser, s.walletTransfers)
	api.POST("/wallet/topups", s.requireUser, s.rateLimit, s.startTopup)
	api.GET("/wallet/topups/:id", s.requireUser, s.getTopup)
	s.api = api
	s.identityRoutes(e, api)

	// Admin bodies are JSON of 16 KiB at most, but for a product image
	// (its own cap, image_max_bytes).
	admin := e.Group("/admin/api", s.sameOrigin)
	admin.PUT("/sales/:id/image", s.limitBody(s.cfg.ImageMaxBytes), s.requireAdmin, s.putSaleImage)
	admin = admin.Group("", s.limitBody(adminBodyLimit))
	admin.POST("/login", s.login)
	admin.POST("/logout", s.logout)
	admin.GET("/session", s.adminSession)
	authed := admin.Group("", s.requireAdmin)
	authed.POST("/sales", s.createSale)
	authed.GET("/sales", s.adminListSales)
	authed.GET("/sales/:id", s.adminGetSale)
	authed.PATCH("/sales/:id", s.updateSale)
	authed.POST("/sales/:id/restock", s.restock)
	authed.POST("/sales/:id/pause", s.act(seckill.ActionPause))
	authed.POST("/sales/:id/resume", s.act(seckill.ActionResume))
	authed.POST("/sales/:id/end", s.act(seckill.ActionEnd))
	authed.DELETE("/sales/:id/image", s.deleteSaleImage)
	authed.GET("/sales/:id/stats", s.saleStats)
	authed.GET("/sales/:id/history", s.saleHistory)
	authed.GET("/audit", s.auditLog)
	authed.GET("/balance", s.accountBalance)
	authed.GET("/transfers", s.accountTransfers)
	authed.POST("/wallets/:user_id/credit", s.creditWallet)
	authed.POST("/orders/:id/refund", s.refundOrder)
	authed.POST("/payouts", s.payout)
	authed.POST("/merchants", s.createMerchant)
	authed.GET("/merchants", s.listMerchants)
	authed.POST("/merchants/:id/disable", s.setMerchantDisabled(true))
	authed.POST("/merchants/:id/enable", s.setMerchantDisabled(false))
	authed.POST("/merchants/:id/totp/reset", s.resetTOTP)
	authed.POST("/merchants/:id/payout-account", s.setPayoutAccount)
	authed.POST("/me/totp", s.enrolTOTP)
	authed.POST("/me/totp/confirm", s.confirmTOTP)

	e.GET("/ws/sales/:id", s.serveWS)
	// The provider's webhook comes from its servers: no cookie, no CSRF
	// (its signature is the check), a body larger than a shopper's.
	e.POST("/api/payments/webhook", s.limitBody(webhookBodyLimit), s.paymentWebhook)
	s.testProviderRoutes(e)
	s.pages(e)

	s.engine = e
	return nil
}

// Run serves HTTP on ln until ctx is cancelled, then stops accepting,
// drains in-flight requests within the shutdown timeout and returns. The
// sign-outs of other processes, the outcome counts and the chores run
// meanwhile.
func (s *Server) Run(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{
		Handler: s.engine,
		// A slow client cannot hold a connection: headers within 5 s, the
		// whole request within the read timeout, the answer written within
		// the write timeout (WebSockets clear both when they upgrade).
		ReadHeaderTimeout: min(5*time.Second, s.cfg.ReadTimeout),
		ReadTimeout:       s.cfg.ReadTimeout,
		WriteTimeout:      s.cfg.WriteTimeout,
		IdleTimeout:       2 * time.Minute,
		BaseContext:       func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
	}
	// Shutdown neither closes nor waits for hijacked (WebSocket) connections.
	srv.RegisterOnShutdown(s.live.Close)
	// Tokens revoked by a sign-out stay refused across a restart.
	lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	if err := s.Shoppers.Load(lctx); err != nil {
		slog.Warn("sign-outs not loaded at start; retrying in the background", "err", err)
	}
	cancel()
	bg, stopBG := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	for _, chore := range append([]func(context.Context){s.Shoppers.Run, s.Outcomes.Run, s.evictLimits}, s.Chores...) {
		wg.Go(func() { chore(bg) })
	}

	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	slog.Info("http server listening", "addr", ln.Addr().String())

	var err error
	select {
	case err = <-errc:
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), s.cfg.ShutdownTimeout)
		err = srv.Shutdown(sctx)
		cancel()
	}
	// The outcome counts flush once more as their chore stops.
	stopBG()
	wg.Wait()
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

// evictLimits drops idle limiter buckets until ctx ends.
func (s *Server) evictLimits(ctx context.Context) {
	wait.Every(ctx, 30*time.Second, func() {
		now := s.Now()
		s.limits.evict(now)
		for _, l := range []*limiter{s.logins, s.accountLogins, s.signups, s.signins} {
			if l != nil {
				l.evict(now.Add(-time.Hour))
			}
		}
		s.limiterSizes()
	})
}

// limiterSizes sets the gauges of the per-user and per-IP limiters that
// are on (from the start: a dashboard reads 0, not "No data").
func (s *Server) limiterSizes() {
	if s.limits.user != nil {
		s.metrics.limiterKey.WithLabelValues("user").Set(float64(s.limits.user.size()))
	}
	if s.limits.perIP != nil {
		s.metrics.limiterKey.WithLabelValues("ip").Set(float64(s.limits.perIP.size()))
	}
}

// recover turns a panic into a 500 and a log line, never a dropped connection.
func (s *Server) recover(c *gin.Context) {
	defer func() {
		if r := recover(); r != nil {
			if r == http.ErrAbortHandler {
				panic(r)
			}
			abort(c, fmt.Errorf("panic: %v", r))
		}
	}()
	c.Next()
}

var (
	idPrefix  = newIDPrefix()
	idCounter atomic.Uint64
)

func newIDPrefix() string {
	b := make([]byte, 5)
	_, _ = rand.Read(b)
	return base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(b)
}

// requestID tags the request with an id, taken from a well-formed
// X-Request-ID header or made up, and echoes it in the response.
func (s *Server) requestID(c *gin.Context) {
	id := c.GetHeader("X-Request-ID")
	if len(id) == 0 || len(id) > 64 || !isToken(id) {
		id = idPrefix + "-" + strconv.FormatUint(idCounter.Add(1), 36)
	}
	c.Set(ctxRequestID, id)
	c.Header("X-Request-ID", id)
	c.Next()
}

// trace records a span of the request when tracing is on and the
// sampler takes it, named by its route template; off, it is one flag
// read, and an unsampled request costs the sampler's decision only. A
// caller's traceparent is not continued: the API is public, and a client
// that says "sampled" would have every buy of its traced.
func (s *Server) trace(c *gin.Context) {
	if !tracing.Enabled() {
		c.Next()
		return
	}
	ctx, span := tracing.Start(c.Request.Context(), "http", trace.SpanKindServer)
	defer span.End()
	if !span.IsRecording() {
		c.Next()
		return
	}
	span.SetName(c.Request.Method + " " + c.FullPath())
	span.SetAttributes(attribute.String("http.route", c.FullPath()), attribute.String("seckill.request_id", requestID(c)))
	c.Request = c.Request.WithContext(ctx)
	c.Next()
	span.SetAttributes(attribute.Int("http.status_code", c.Writer.Status()))
	if c.Writer.Status() >= 500 {
		span.SetStatus(codes.Error, http.StatusText(c.Writer.Status()))
	}
}

func isToken(s string) bool {
	for i := 0; i < len(s); i++ {
		b := s[i]
		if !(b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' || b == '-' || b == '_' || b == '.') {
			return false
		}
	}
	return true
}

const ctxRequestID = "request_id"

func requestID(c *gin.Context) string { return c.GetString(ctxRequestID) }

// accessLog logs each request at debug level; errors are logged where they
// happen. At flash-sale rates an info line per request would cost more than
// the request.
func (s *Server) accessLog(c *gin.Context) {
	if !slog.Default().Enabled(c.Request.Context(), slog.LevelDebug) {
		c.Next()
		return
	}
	start := time.Now()
	c.Next()
	slog.Debug("request", "method", c.Request.Method, "path", c.Request.URL.Path, "status", c.Writer.Status(),
		"duration", time.Since(start), "request_id", requestID(c), "ip", c.ClientIP())
}

// sameOrigin refuses state-changing requests that a browser sent from
// another site (CSRF); requests from scripts carry no browser headers and
// authenticate with bearer tokens.
func (s *Server) sameOrigin(c *gin.Context) {
	if err := s.csrf.Check(c.Request); err != nil {
		abort(c, seckill.Errorf(seckill.CodeForbidden, "Cross-site request refused."))
		return
	}
	c.Next()
}

// limitBody caps the request body; reading past the cap fails with a
// *http.MaxBytesError that decode turns into a 413.
func (s *Server) limitBody(n int64) gin.HandlerFunc {
	return func(c *gin.Context) {
		if c.Request.ContentLength > n {
			abort(c, bodyTooLarge(n))
			return
		}
		c.Request.Body = http.MaxBytesReader(c.Writer, c.Request.Body, n)
		c.Next()
	}
}

func bodyTooLarge(n int64) error {
	return seckill.Errorf(seckill.CodeBodyTooLarge, "Request body is larger than %d bytes.", n)
}

// errSaleID refuses a :id path parameter that is not a sale id.
var errSaleID = invalid("Sale id must be a positive integer.")

// saleID parses the :id path parameter.
func saleID(c *gin.Context) (int64, error) {
	id, err := strconv.ParseInt(c.Param("id"), 10, 64)
	if err != nil || id <= 0 {
		return 0, errSaleID
	}
	return id, nil
}
