package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/seckill/seckill"
	"github.com/seckill/seckill/bus"
	"github.com/seckill/seckill/internal/tracing"
)

// TimeoutLedger is the ledger as the timeout consumer needs it: cancelling
// an order still pending, a compare-and-set of its status that a paid
// order refuses (orders.Store).
type TimeoutLedger interface {
	Order(ctx context.Context, id string) (seckill.Order, error)
	Cancel(ctx context.Context, id string, now time.Time) (seckill.Order, error)
	PaidByCharge(ctx context.Context, id string) error
}

// Voider closes an order's payment in Redis before the timeout cancels
// it: a charge made means the order is paid (its status follows with the
// charge), none means none can be made from then on (Close); and it undoes
// the charge of an order cancelled before, if one was made (Cancel)
// (funds.Store).
type Voider interface {
	Close(ctx context.Context, side seckill.FundsAccount, target string, at time.Time) (bool, error)
	Cancel(ctx context.Context, side seckill.FundsAccount, target string, at time.Time) (bool, error)
}

// Releaser returns a cancelled order's units to its sale, exactly once
// (inventory.Store).
type Releaser interface {
	Release(ctx context.Context, sale int64, orderID, userID string, qty int64) (int64, bool, error)
}

// TimeoutConfig tunes a TimeoutConsumer.
type TimeoutConfig struct {
	// Workers is how many timeout messages are handled at once.
	Workers int
	// Grace is how long, after Run's context ends, the messages in hand
	// may still take; past it they are left unacknowledged and go back to
	// the queue.
	Grace time.Duration
}

// TimeoutConsumer cancels the orders whose payment window has closed: the
// order consumer schedules one timeout message per committed batch, the
// bus delivers it when the window ends, and every order of it still
// pending is cancelled in the ledger and its units returned to Redis,
// exactly once. Paid orders are left alone; a redelivered message is
// harmless.
type TimeoutConsumer struct {
	consumer
	ledger  TimeoutLedger
	stock   Releaser
	wallets Voider
	cfg     TimeoutConfig
	metrics *TimeoutMetrics
	now     func() time.Time
}

// NewTimeoutConsumer returns a TimeoutConsumer of b's timeouts queue, its
// series in m and those it shares with the other consumers in shared;
// Run starts it.
func NewTimeoutConsumer(b Subscriber, ledger TimeoutLedger, stock Releaser, wallets Voider, m *TimeoutMetrics, shared *ConsumerMetrics,
	cfg TimeoutConfig) *TimeoutConsumer {
	if cfg.Workers <= 0 {
		cfg.Workers = 4
	}
	return &TimeoutConsumer{
		consumer: newConsumer(b, bus.Timeouts, 4*cfg.Workers, cfg.Grace, m.deadLettered, shared),
		ledger:   ledger, stock: stock, wallets: wallets, cfg: cfg, metrics: m, now: time.Now,
	}
}

// Run consumes until ctx is cancelled; then it stops taking messages,
// finishes the ones in hand (within Grace), and returns.
func (tc *TimeoutConsumer) Run(ctx context.Context) error {
	tc.run(ctx, 1, each(tc.cfg.Workers, tc.expire))
	return nil
}

// expire cancels the orders of one timeout message that are still
// pending and returns their units exactly once. Paid orders are left
// alone. A redelivered message is harmless: both steps are idempotent.
func (tc *TimeoutConsumer) expire(ctx context.Context, d bus.Delivery) error {
	if tracing.Enabled() {
		var span trace.Span
		ctx, span = tracing.StartFrom(ctx, "payment timeout", trace.SpanKindConsumer, []string{d.Headers[tracing.HeaderTraceparent]})
		defer span.End()
	}
	m, err := DecodeTimeout(d.Body)
	if err != nil {
		return tc.deadLetter(d, err)
	}
	for _, t := range m.Orders {
		if err := tc.expireOne(ctx, t.OrderID); err != nil {
			return err // unacknowledged: it comes back
		}
	}
	return d.Ack()
}

func (tc *TimeoutConsumer) expireOne(ctx context.Context, id string) error {
	var o seckill.Order
	// A payment is decided in Redis: close it there first. A charge made
	// means paid (the funds consumer sets the status); otherwise none can
	// be made from now on, and the order is cancelled below.
	err := tc.retry(ctx, "closing an order's payment", func() error {
		var err error
		o, err = tc.ledger.Order(ctx, id)
		if errors.Is(err, seckill.ErrOrderNotFound) {
			o, err = seckill.Order{}, nil
		}
		if err != nil || o.Status != seckill.OrderPending || o.AmountCents <= 0 {
			return err
		}
		paid, err := tc.wallets.Close(ctx, seckill.WalletOf(o.UserID), seckill.ChargeID(o.ID), tc.now())
		if err != nil || !paid {
			return err
		}
		o.Status = seckill.OrderPaid
		// Paid: its status comes with its charge. A charge the ledger holds
		// already (carried before payments set their orders paid) sets it
		// now.
		return tc.ledger.PaidByCharge(ctx, o.ID)
	})
	if err != nil || o.Status == seckill.OrderPaid {
		return err
	}
	err = tc.retry(ctx, "cancelling an order", func() error {
		var err error
		o, err = tc.ledger.Cancel(ctx, id, tc.now())
		if errors.Is(err, seckill.ErrOrderPaid) || errors.Is(err, seckill.ErrOrderRefunded) || errors.Is(err, seckill.ErrOrderNotFound) {
			return nil
		}
		return err
	})
	switch {
	case err != nil:
		return err
	case o.ID == "":
		slog.Warn("worker: timeout for an unknown order", "order", id)
		return nil
	case o.Status != seckill.OrderCancelled:
		return nil // paid (or refunded): its charge stands
	}
	// Cancelled, now or by an earlier delivery: the void and the release
	// are idempotent, so a crash between the ledger commit and here loses
	// nothing. The void first: after the close above it finds nothing to
	// undo; it undoes a charge of an order cancelled before payments were
	// decided in Redis (funds.Store.Cancel).
	bo := newBackoff()
	for o.AmountCents > 0 {
		voided, err := tc.wallets.Cancel(ctx, seckill.WalletOf(o.UserID), seckill.ChargeID(o.ID), tc.now())
		if err == nil {
			if voided {
				tc.metrics.voided.Inc()
			}
			break
		}
		slog.Warn("worker: voiding a charge failed, retrying", "order", o.ID, "err", err, "in", bo.peek())
		if err := bo.wait(ctx); err != nil {
			return err
		}
	}
	bo.reset()
	for {
		_, released, err := tc.stock.Release(ctx, o.SaleID, o.ID, o.UserID, o.Qty)
		if err == nil || errors.Is(err, seckill.ErrSaleNotFound) {
			if released {
				tc.metrics.cancelled.Inc()
			}
			return nil
		}
		slog.Warn("worker: releasing stock failed, retrying", "order", o.ID, "err", err, "in", bo.peek())
		if err := bo.wait(ctx); err != nil {
			return err
		}
	}
}

// TimeoutMetrics are the timeout consumer's Prometheus series.
type TimeoutMetrics struct {
	cancelled    prometheus.Counter
	voided       prometheus.Counter
	deadLettered prometheus.Counter // of the timeouts queue
}

// NewTimeoutMetrics registers the timeout consumer's series on reg.
func NewTimeoutMetrics(reg prometheus.Registerer) *TimeoutMetrics {
	m := &TimeoutMetrics{
		cancelled: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "seckill_worker_orders_cancelled_total", Help: "Unpaid orders cancelled at the end of their payment window.",
		}),
		voided: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "seckill_funds_charges_voided_total", Help: "Charges of orders cancelled unpaid that were undone (orders cancelled before payments were decided by their charge in Redis).",
		}),
		deadLettered: deadLettered(bus.Timeouts),
	}
	reg.MustRegister(m.cancelled, m.voided, m.deadLettered)
	return m
}

// TimeoutMessage is the body of a payment timeout: the orders of one
// committed batch, whose windows end together.
type TimeoutMessage struct {
	Orders []TimeoutOrder `json:"orders"`
}

// TimeoutOrder names one order of a TimeoutMessage.
type TimeoutOrder struct {
	OrderID string `json:"order_id"`
	SaleID  int64  `json:"sale_id"`
}

// DecodeTimeout reads a timeout message strictly.
func DecodeTimeout(body []byte) (TimeoutMessage, error) {
	var m TimeoutMessage
	if err := strictJSON(body, &m); err != nil {
		return m, fmt.Errorf("malformed timeout: %w", err)
	}
	if len(m.Orders) == 0 {
		return m, errors.New("malformed timeout: no orders")
	}
	return m, nil
}

// DelayedPublisher is the bus as the payment timeouts need it: a message
// delivered once its delay has passed.
type DelayedPublisher interface {
	PublishDelayed(ctx context.Context, queue string, msg bus.Message, delay time.Duration) error
}

// ScheduleTimeouts sends the timeout message of orders, delivered after
// delay. New orders wait out the payment window (one delay, so RabbitMQ
// keeps one delay queue); orders re-armed after a restart wait what is
// left of theirs.
func ScheduleTimeouts(ctx context.Context, b DelayedPublisher, os []seckill.Order, delay time.Duration) error {
	if len(os) == 0 {
		return nil
	}
	m := TimeoutMessage{Orders: make([]TimeoutOrder, len(os))}
	for i, o := range os {
		m.Orders[i] = TimeoutOrder{OrderID: o.ID, SaleID: o.SaleID}
	}
	body, err := json.Marshal(m)
	if err != nil {
		return err
	}
	msg := bus.Message{ID: os[0].ID, Body: body}
	if tp := tracing.Traceparent(ctx); tp != "" { // the timeout continues the commit's trace
		msg.Headers = map[string]string{tracing.HeaderTraceparent: tp}
	}
	if err := b.PublishDelayed(ctx, bus.Timeouts, msg, delay); err != nil {
		return fmt.Errorf("worker: schedule timeouts: %w", err)
	}
	return nil
}

// PendingLister lists the orders of the ledger awaiting payment, the
// first to expire first (orders.Store).
type PendingLister interface {
	PendingOrders(ctx context.Context) ([]seckill.Order, error)
}

// RearmTimeouts schedules again the payment timeouts of every pending
// order in the ledger, each batch delivered when its last window ends:
// for a bus that lost what it held (the in-process one, after a restart).
// Timeouts that are also still queued are harmless: cancelling is
// idempotent. It returns how many orders it re-armed.
func RearmTimeouts(ctx context.Context, b DelayedPublisher, ledger PendingLister, now time.Time) (int, error) {
	os, err := ledger.PendingOrders(ctx)
	if err != nil {
		return 0, err
	}
	const chunk = 500
	for start := 0; start < len(os); start += chunk {
		part := os[start:min(start+chunk, len(os))]
		last := part[len(part)-1].ExpiresAt // sorted by expiry
		if err := ScheduleTimeouts(ctx, b, part, max(0, last.Sub(now))); err != nil {
			return start, err
		}
	}
	return len(os), nil
}
