package system

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/seckill/seckill/audit"
	"github.com/seckill/seckill/checkout"
	"github.com/seckill/seckill/configs"
	"github.com/seckill/seckill/identity"
	"github.com/seckill/seckill/inventory"
	"github.com/seckill/seckill/merchants"
	"github.com/seckill/seckill/payments"
	"github.com/seckill/seckill/provider"
	"github.com/seckill/seckill/room"
	"github.com/seckill/seckill/sales"
	"github.com/seckill/seckill/server"
	"github.com/seckill/seckill/sessions"
	"github.com/seckill/seckill/tickets"
	"github.com/seckill/seckill/worker"
)

// Server builds an HTTP server on the system, as one process would have
// it: its own services (with their caches, counters and the sign-outs it
// follows) and its metrics on registry. Its buys go through the ticket
// gate to buys, or with buys nil to the configured chain: the batcher
// (batch_enabled), the sold-out fast path (sold_out_recheck > 0) and the
// stock, each built over the next.
func (s *System) Server(registry *prometheus.Registry, buys server.Reserver) (*server.Server, error) {
	d, err := s.ServerDeps(registry, buys)
	if err != nil {
		return nil, err
	}
	return server.New(ServerConfig(s.Config), d)
}

// ServerDeps are the services Server builds, for a caller that changes
// some before it calls server.New itself.
func (s *System) ServerDeps(registry *prometheus.Registry, buys server.Reserver) (server.Deps, error) {
	cfg := s.Config
	now := time.Now
	sc := SessionsConfig(cfg)
	if s.Embedded {
		sc.Keeper = s.Ledger // Redis dies with the process: sessions outlive it in SQLite
	}
	log := audit.New(s.Ledger, now)
	svc := sales.New(s.Ledger, s.Stock, s.Funds, log, sales.Config{PaymentWindow: cfg.Orders.PaymentWindow, FeeBps: cfg.Funds.FeeBps}, now)
	tix := tickets.New(svc, s.Stock, tickets.Tickets.Key(cfg.Sessions.JWTSecret), room.Passes.Key(cfg.Sessions.JWTSecret), cfg.Buy.TicketTTL, now)
	shoppers := sessions.NewShoppers(s.Redis, sc, now)
	id, accounts, err := s.identity(shoppers, now)
	if err != nil {
		return server.Deps{}, err
	}
	admins := sessions.NewAdmins(s.Redis, sc, now)
	ms := merchants.New(s.Ledger, log, admins, now)
	pay := s.payments(log, ms, now)
	d := server.Deps{
		Sales: svc, Outcomes: sales.NewOutcomes(s.Stock), Tickets: tix,
		Room:     room.New(s.Stock, svc, room.Passes.Key(cfg.Sessions.JWTSecret), cfg.Buy.PassTTL, now),
		Shoppers: shoppers, Admins: admins, Audit: log,
		Payments: pay, Topups: pay, Refunds: pay, Payouts: pay,
		Identity: id, Merchants: ms, Ready: s.Ready(), Registry: registry, Now: now,
	}
	if s.Bus != nil {
		d.DeadLetters = s.DeadLetters
	}
	if buys == nil {
		buys, d.Chores = s.buyChain(registry, svc)
	}
	d.Buys = tickets.NewGate(buys, tix, accounts)
	return d, nil
}

// identity builds the shoppers' sign-ins the configuration names: the
// provider is discovered now (a start fails if it cannot be reached), and
// its tokens are made good with shoppers. A source that is off stays nil,
// as do the accounts the buy gate asks whether a buyer has been verified
// since signing in.
func (s *System) identity(shoppers *sessions.Shoppers, now func() time.Time) (server.Identity, tickets.Accounts, error) {
	cfg := s.Config
	pending := identity.NewPending(sessions.NewSignIns(s.Redis, SessionsConfig(cfg)))
	id := server.Identity{Pending: pending}
	var accounts tickets.Accounts
	if cfg.Identity.Has(configs.SourceGuest) {
		id.Guest = identity.Guests{}
	}
	if cfg.Identity.Has(configs.SourceOIDC) {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		o, err := identity.NewOIDC(ctx, OIDCConfig(cfg), now)
		if err != nil {
			return server.Identity{}, nil, fmt.Errorf("%w (SECKILL_OIDC_ISSUER)", err)
		}
		shoppers.Accept(o)
		id.OIDC = o
	}
	if cfg.Identity.Has(configs.SourceAccounts) {
		acc := identity.NewAccounts(s.Ledger, Mailer(cfg, s.Embedded), identity.AccountsConfig{PublicURL: cfg.Identity.PublicURL}, now)
		id.Accounts, accounts = acc, acc
		pk, err := identity.NewPasskeys(cfg.Identity.PublicURL, s.Ledger, pending, now)
		if err != nil {
			return server.Identity{}, nil, fmt.Errorf("%w (SECKILL_PUBLIC_URL)", err)
		}
		id.Passkeys = pk
	}
	return id, accounts, nil
}

// buyChain composes the configured buy chain behind the ticket gate, front
// first, and the chores it needs run: on a Redis Cluster the instant
// checkout's holds (checkout, with rules the sales' settings), the
// batcher (batch_enabled), the sold-out fast path (sold_out_recheck > 0)
// and the stock, each built over the next.
func (s *System) buyChain(registry *prometheus.Registry, rules checkout.Rules) (server.Reserver, []func(context.Context)) {
	cfg := s.Config
	m := newChainMetrics(registry)
	var chain inventory.Reserver = s.Stock
	var chores []func(context.Context)
	bc := inventory.BatcherConfig{Max: cfg.Buy.BatchMax, Lane: s.Stock.Lane, OnBatch: m.batch}
	cc := checkout.Config{HoldFor: cfg.Funds.HoldFor, FeeBps: cfg.Funds.FeeBps, OnOutcome: s.Metrics.Process.Held}
	if cfg.Buy.SoldOutRecheck > 0 {
		fast := inventory.NewFastPath(chain, s.Stock, cfg.Buy.SoldOutRecheck)
		fast.OnHit = m.hit
		chain, bc.Gather, cc.SoldOut = fast, fast.Gather, fast.Gather
		chores = append(chores, fast.Run)
	}
	if cfg.Buy.BatchEnabled {
		chain = inventory.NewBatcher(chain, bc)
	}
	chain = s.Stock.Keeping(chain) // embedded: answered once in SQLite
	if s.Stock.Cluster() {
		chain = checkout.New(chain, s.Funds, s.Stock, rules, cc)
	}
	return chain, chores
}

// chainMetrics are the buy chain's Prometheus series.
type chainMetrics struct {
	batchSize prometheus.Histogram
	fastPath  prometheus.Counter
}

func newChainMetrics(reg prometheus.Registerer) *chainMetrics {
	m := &chainMetrics{
		batchSize: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "seckill_buy_batch_size",
			Help:    "Buy requests decided together by the coalescing batcher (one Lua call, or one lookup on the sold-out fast path).",
			Buckets: prometheus.ExponentialBuckets(1, 2, 13),
		}),
		fastPath: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "seckill_buy_fast_path_total",
			Help: "Buy requests answered without the Lua script because the sale is sold out or ended.",
		}),
	}
	reg.MustRegister(m.batchSize, m.fastPath)
	return m
}

func (m *chainMetrics) batch(n int) { m.batchSize.Observe(float64(n)) }
func (m *chainMetrics) hit(n int)   { m.fastPath.Add(float64(n)) }

// Relay builds the outbox relay.
func (s *System) Relay() *worker.Relay {
	return worker.NewRelay(s.Stock, s.Ledger, s.Bus, s.Metrics.Relay, RelayConfig(s.Config))
}

// OrderConsumer builds the consumer that writes the orders queue into
// the ledger.
func (s *System) OrderConsumer() *worker.OrderConsumer {
	return worker.NewOrderConsumer(s.Bus, s.consumerLedger(), s.Funds, s.Metrics.Orders, s.Metrics.Consumers, OrderConsumerConfig(s.Config))
}

// TimeoutConsumer builds the consumer that cancels orders unpaid at the
// end of their payment window.
func (s *System) TimeoutConsumer() *worker.TimeoutConsumer {
	return worker.NewTimeoutConsumer(s.Bus, s.Ledger, s.Stock, s.Funds, s.Metrics.Timeouts, s.Metrics.Consumers, TimeoutConsumerConfig(s.Config))
}

// FundsRelay builds the relay of the funds outboxes. It hears of the
// movements this system's funds store makes as they are made.
func (s *System) FundsRelay() *worker.FundsRelay {
	return worker.NewFundsRelay(s.Funds, s.Bus, s.Metrics.FundsRelay, FundsRelayConfig(s.Config))
}

// FundsConsumer builds the consumer that writes the funds queue's
// movements into the ledger and has their other accounts follow.
func (s *System) FundsConsumer() *worker.FundsConsumer {
	return worker.NewFundsConsumer(s.Bus, s.consumerLedger(), s.Funds, s.Metrics.Funds, s.Metrics.Consumers, FundsConsumerConfig(s.Config))
}

// consumerLedger is the ledger the consumers write: the ledger, or,
// behind embedded mode's write-through, one that holds every order and
// movement they are handed already.
func (s *System) consumerLedger() interface {
	worker.OrderLedger
	worker.FundsLedger
} {
	if s.written != nil {
		return s.written
	}
	return s.Ledger
}

// RunRelays runs the outbox relay of the sales and the funds relay until
// ctx ends; both publish what their outboxes still hold before it
// returns.
func (s *System) RunRelays(ctx context.Context) error {
	var wg sync.WaitGroup
	wg.Go(func() { _ = s.Relay().Run(ctx) })
	wg.Go(func() { _ = s.FundsRelay().Run(ctx) })
	wg.Wait()
	return nil
}

// RunConsumers runs the order consumer, the timeout consumer, the funds
// consumer and the watch of the dead-letter queue until ctx ends; the
// consumers finish the work in hand before it returns.
func (s *System) RunConsumers(ctx context.Context) error {
	var wg sync.WaitGroup
	wg.Go(func() { _ = s.OrderConsumer().Run(ctx) })
	wg.Go(func() { _ = s.TimeoutConsumer().Run(ctx) })
	wg.Go(func() { _ = s.FundsConsumer().Run(ctx) })
	wg.Go(func() { worker.WatchDeadLetters(ctx, s.Bus, s.Metrics.Consumers) })
	wg.Wait()
	return nil
}

// Reconciler builds the reconciler, which checks Redis against the ledger
// and repairs it.
func (s *System) Reconciler() *worker.Reconciler {
	return worker.NewReconciler(s.Stock, s.Ledger, s.Metrics.Reconciler, ReconcilerConfig(s.Config, s.Bus))
}

// RunRebalancer evens out the buckets of every live sale every second
// until ctx ends.
func (s *System) RunRebalancer(ctx context.Context) error {
	s.Stock.RunRebalancer(ctx, s.Ledger, s.Config.Orders.Keep(), time.Second)
	return nil
}

// RunWorkers runs the consumers (RunConsumers) and, every
// reconcile_interval, the reconciler's watch, and the watch of Redis's
// persistence, until ctx ends.
func (s *System) RunWorkers(ctx context.Context) error {
	dur, stopDur := context.WithCancel(ctx)
	durDone := make(chan struct{})
	go func() { defer close(durDone); s.WatchDurability(dur) }()
	defer func() { stopDur(); <-durDone }()
	if s.Config.Orders.ReconcileInterval > 0 {
		watch, stop := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			s.Reconciler().Watch(watch, s.Ledger, s.Config.Orders.Keep(), s.Config.Orders.ReconcileInterval)
		}()
		defer func() { stop(); <-done }()
		fwatch, fstop := context.WithCancel(ctx)
		fdone := make(chan struct{})
		go func() { defer close(fdone); s.FundsReconciler().Watch(fwatch, s.Config.Orders.ReconcileInterval) }()
		defer func() { fstop(); <-fdone }()
	}
	sweep, stopSweep := context.WithCancel(ctx)
	sweepDone := make(chan struct{}, 2)
	go func() { defer func() { sweepDone <- struct{}{} }(); s.sweepPayouts(sweep) }()
	go func() { defer func() { sweepDone <- struct{}{} }(); s.HoldSweeper().Run(sweep, HoldSweep) }()
	defer func() { stopSweep(); <-sweepDone; <-sweepDone }()
	return s.RunConsumers(ctx)
}

// HoldSweep is how often the worker settles the instant checkout's holds
// past their deadline (a Cluster's; elsewhere there are none).
const HoldSweep = time.Second

// HoldSweeper builds the sweep of the holds whose buy's process died.
func (s *System) HoldSweeper() *checkout.Sweeper {
	sw := checkout.NewSweeper(s.Funds, s.Stock)
	sw.OnSettled = s.Metrics.Process.HoldSettled
	return sw
}

// payments builds the payments service (ms: the merchants, for payouts'
// second factor; nil where no payout is asked for).
func (s *System) payments(log *audit.Service, ms payments.Merchants, now func() time.Time) *payments.Service {
	return payments.New(payments.Deps{Wallets: s.Funds, Ledger: s.Ledger, Topups: s.Ledger, Orders: s.Ledger, Stock: s.Stock, Audit: log,
		Provider: Provider(s.Config), Webhooks: provider.Verifier{Secrets: s.Config.Funds.WebhookSecrets()}, Payouts: s.Ledger,
		Merchants: ms}, PaymentsConfig(s.Config), now)
}

// PayoutSweep is how often the worker finishes the payouts left behind:
// those pending for longer are sent to the provider again.
const PayoutSweep = time.Minute

// SettlePayouts finishes the payouts left behind: pending since before,
// failed without their money back (payments.Service.SettlePayouts).
func (s *System) SettlePayouts(ctx context.Context, before time.Time) (int, error) {
	return s.payments(audit.New(s.Ledger, time.Now), nil, time.Now).SettlePayouts(ctx, before)
}

// sweepPayouts settles the payouts left behind every PayoutSweep until
// ctx ends.
func (s *System) sweepPayouts(ctx context.Context) {
	t := time.NewTicker(PayoutSweep)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if _, err := s.SettlePayouts(ctx, time.Now().Add(-PayoutSweep)); err != nil && ctx.Err() == nil {
				slog.Warn("payouts sweep", "err", err)
			}
		}
	}
}

// FundsReconciler builds the reconciler of money: every account's Redis
// balance against its ledger entries.
func (s *System) FundsReconciler() *worker.FundsReconciler {
	var queue interface {
		Depth(ctx context.Context, queue string) (int, error)
	}
	if s.Bus != nil {
		queue = s.Bus
	}
	return worker.NewFundsReconciler(s.Funds, s.Ledger, queue, s.Metrics.Reconciler)
}
