package worker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/seckill/seckill"
	"github.com/seckill/seckill/bus"
	"github.com/seckill/seckill/internal/tracing"
	"github.com/seckill/seckill/orders"
)

// OrderLedger is the ledger as the order consumer writes it: a batch of
// orders in one transaction, an order already there kept once
// (orders.Store).
type OrderLedger interface {
	InsertOrders(ctx context.Context, os []seckill.Order) error
}

// HoldPoster posts the wallet holds of instant-checkout orders accepted
// across Cluster slots (funds.Store): once an order exists, its hold is
// its charge.
type HoldPoster interface {
	Post(ctx context.Context, wallet seckill.FundsAccount, id, charge string) (bool, error)
}

// OrderBus is the bus as the order consumer needs it: the orders queue to
// consume, and the payment timeouts of the orders it commits to schedule.
type OrderBus interface {
	Subscriber
	DelayedPublisher
}

// OrderConfig tunes an OrderConsumer.
type OrderConfig struct {
	// Batch is the most orders written in one transaction.
	Batch int
	// Flush is how long a partial batch waits for more messages.
	Flush time.Duration
	// Prefetch is how many unacknowledged messages the broker sends ahead.
	Prefetch int
	// Window is the payment window of a new order.
	Window time.Duration
	// Consumers is how many batches are written to the ledger at once.
	Consumers int
	// Grace is how long, after Run's context ends, the batch in hand may
	// still take to be written (the ledger may be down); past it the batch
	// is left unacknowledged and goes back to the queue.
	Grace time.Duration
}

// OrderConsumer writes the accepted orders the relay publishes into the
// ledger, one transaction per batch, schedules their payment timeouts,
// and only then acknowledges their messages. Redelivered orders are kept
// once by the ledger; a message that cannot be decoded, or that the
// ledger refuses for good, is dead-lettered, and the rest flow on.
type OrderConsumer struct {
	consumer
	timeouts DelayedPublisher
	ledger   OrderLedger
	holds    HoldPoster
	cfg      OrderConfig
	metrics  *OrderMetrics
	now      func() time.Time
}

// NewOrderConsumer returns an OrderConsumer of b's orders queue, posting
// the holds of held orders with holds, its series in m and those it
// shares with the other consumers in shared; Run starts it.
func NewOrderConsumer(b OrderBus, ledger OrderLedger, holds HoldPoster, m *OrderMetrics, shared *ConsumerMetrics, cfg OrderConfig) *OrderConsumer {
	if cfg.Consumers <= 0 {
		cfg.Consumers = 1
	}
	return &OrderConsumer{
		consumer: newConsumer(b, bus.Orders, cfg.Prefetch, cfg.Grace, m.deadLettered, shared),
		timeouts: b, ledger: ledger, holds: holds, cfg: cfg, metrics: m, now: time.Now,
	}
}

// Run consumes until ctx is cancelled; then it stops taking messages,
// finishes and acknowledges the batches in hand (within Grace), and
// returns.
func (oc *OrderConsumer) Run(ctx context.Context) error {
	// A batch holds about Batch orders; a message may carry several (see
	// RelayConfig.Pack).
	oc.run(ctx, oc.cfg.Consumers, batches(oc.cfg.Batch, oc.cfg.Flush, approxEvents, oc.process))
	return nil
}

// approxEvents guesses how many events a message carries without decoding
// it: the number of order ids in it, at least one.
func approxEvents(body []byte) int {
	return max(1, bytes.Count(body, []byte(`"order_id"`)))
}

// process writes a batch: malformed messages are dead-lettered, the rest
// committed in one transaction, their payment timeouts scheduled, and
// only then acknowledged. An error leaves the batch unacknowledged: it
// comes back when the subscription ends.
func (oc *OrderConsumer) process(ctx context.Context, batch []bus.Delivery) error {
	now := oc.now()
	good := make([]bus.Delivery, 0, len(batch))
	var os []seckill.Order
	ends := make([]int, 0, len(batch)) // good[i] carries os[ends[i-1]:ends[i]]
	for _, d := range batch {
		evs, err := DecodeEvents(d.Body)
		if err != nil {
			if err := oc.deadLetter(d, err); err != nil {
				return err
			}
			continue
		}
		for _, ev := range evs {
			os = append(os, ev.Order(oc.cfg.Window, now))
		}
		good = append(good, d)
		ends = append(ends, len(os))
	}
	if len(os) == 0 {
		return nil
	}
	if tracing.Enabled() {
		traces := make([]string, len(good))
		for i, d := range good {
			traces[i] = d.Headers[tracing.HeaderTraceparent]
		}
		var span trace.Span
		ctx, span = tracing.StartFrom(ctx, "worker commit", trace.SpanKindConsumer, traces, attribute.Int("seckill.orders", len(os)))
		defer span.End()
	}
	// An instant checkout's held orders are posted first: each comes to
	// the ledger paid, its charge already on its way.
	if err := oc.postHolds(ctx, os); err != nil {
		return err
	}
	start := time.Now()
	err := oc.write(ctx, os)
	if orders.Refused(err) {
		// Some row is refused for good (an unknown sale, say): write the
		// messages one by one, so the rest flow on.
		return oc.processOneByOne(ctx, good, os, ends)
	}
	if err != nil {
		return err
	}
	oc.metrics.commit.Observe(time.Since(start).Seconds())
	oc.metrics.batchSize.Observe(float64(len(os)))
	oc.persisted(os)
	if err := oc.scheduleTimeouts(ctx, os); err != nil {
		return err
	}
	return ackAll(good)
}

// persisted counts orders committed, and how long each took from its
// acceptance (per order: an old one replayed among many does not make the
// p99).
func (oc *OrderConsumer) persisted(os []seckill.Order) {
	oc.metrics.persisted.Add(float64(len(os)))
	now := time.Now()
	for _, o := range os {
		oc.metrics.ledgerLag.Observe(max(0, now.Sub(o.CreatedAt).Seconds()))
	}
}

func (oc *OrderConsumer) processOneByOne(ctx context.Context, ds []bus.Delivery, os []seckill.Order, ends []int) error {
	written, done, err := oneByOne(&oc.consumer, ctx, ds, os, ends, oc.write)
	if err != nil || len(written) == 0 {
		return err
	}
	oc.persisted(written)
	if err := oc.scheduleTimeouts(ctx, written); err != nil {
		return err
	}
	return ackAll(done)
}

// write inserts orders in one transaction, waiting out any failure that
// is not the ledger refusing the data: the messages are held meanwhile.
func (oc *OrderConsumer) write(ctx context.Context, os []seckill.Order) error {
	return oc.retry(ctx, "writing orders", func() error {
		return oc.ledger.InsertOrders(ctx, os)
	})
}

// postHolds posts the wallet hold of each order accepted against one
// (seckill.PayHeld) before the orders are written (they come paid): the
// checkout posts it as soon as the stock step answers, this when that
// process died first. Posting again changes nothing. A hold found voided
// cannot be: a void comes only after the buy's request was decided
// otherwise; it is logged and left, for the reconciler shows the order
// paid without its charge.
func (oc *OrderConsumer) postHolds(ctx context.Context, os []seckill.Order) error {
	for _, o := range os {
		if o.Pay != seckill.PayHeld {
			continue
		}
		id := seckill.HoldID(o.SaleID, o.UserID, o.RequestID)
		err := oc.retry(ctx, "posting a hold", func() error {
			_, err := oc.holds.Post(ctx, seckill.WalletOf(o.UserID), id, seckill.ChargeID(o.ID))
			if errors.Is(err, seckill.ErrOrderCancelled) {
				slog.Error("worker: the hold of an accepted order was voided", "order", o.ID, "hold", id)
				return nil
			}
			return err
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// scheduleTimeouts sends one timeout message for the orders awaiting
// payment (not those of an instant checkout: paid), to arrive when their
// payment window has passed, and waits for the broker's confirm; the
// orders' messages are acknowledged only after.
func (oc *OrderConsumer) scheduleTimeouts(ctx context.Context, os []seckill.Order) error {
	waiting := make([]seckill.Order, 0, len(os))
	for _, o := range os {
		if o.Pay == "" { // an instant checkout's is paid: no timeout
			waiting = append(waiting, o)
		}
	}
	if len(waiting) == 0 {
		return nil
	}
	if err := ScheduleTimeouts(ctx, oc.timeouts, waiting, oc.cfg.Window); err != nil {
		return err
	}
	oc.metrics.timeouts.Inc()
	return nil
}

// OrderMetrics are the order consumer's Prometheus series.
type OrderMetrics struct {
	persisted    prometheus.Counter
	batchSize    prometheus.Histogram
	commit       prometheus.Histogram
	timeouts     prometheus.Counter // messages of the timeouts queue published
	deadLettered prometheus.Counter // of the orders queue
	// What the alerts watch (configs/prometheus/alerts.yml).
	ledgerLag prometheus.Histogram
}

// NewOrderMetrics registers the order consumer's series on reg.
func NewOrderMetrics(reg prometheus.Registerer) *OrderMetrics {
	m := &OrderMetrics{
		persisted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "seckill_worker_orders_persisted_total", Help: "Order events committed to the ledger (duplicates included).",
		}),
		batchSize: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "seckill_worker_batch_size", Help: "Orders written per MySQL transaction.",
			Buckets: prometheus.ExponentialBuckets(1, 2, 11),
		}),
		commit: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "seckill_worker_commit_seconds", Help: "Time to write and commit one batch.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14),
		}),
		timeouts:     messagesPublished(bus.Timeouts),
		deadLettered: deadLettered(bus.Orders),
		ledgerLag: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "seckill_ledger_lag_seconds", Help: "Time from an order's acceptance in Redis to its commit in the ledger.",
			Buckets: prometheus.ExponentialBuckets(0.01, 2, 15),
		}),
	}
	reg.MustRegister(m.persisted, m.batchSize, m.commit, m.timeouts, m.deadLettered, m.ledgerLag)
	return m
}

// Persisted is how many order events the consumer has committed so far,
// duplicates included: a cheap progress reading for benchmarks.
func (m *OrderMetrics) Persisted() int {
	var d dto.Metric
	_ = m.persisted.Write(&d)
	return int(d.GetCounter().GetValue())
}

// DecodeEvents reads a message body strictly: one event, or a JSON array
// of them as the relay packs them. Any error makes the whole message
// malformed.
func DecodeEvents(body []byte) ([]seckill.Event, error) {
	var evs []seckill.Event
	var err error
	if b := bytes.TrimLeft(body, " \t\r\n"); len(b) > 0 && b[0] == '[' {
		err = strictJSON(body, &evs)
	} else {
		evs = make([]seckill.Event, 1)
		err = strictJSON(body, &evs[0])
	}
	if err != nil {
		return nil, fmt.Errorf("malformed event: %w", err)
	}
	if len(evs) == 0 {
		return nil, errors.New("malformed event: empty array")
	}
	for _, ev := range evs {
		if err := ev.Validate(); err != nil {
			return nil, err
		}
	}
	return evs, nil
}
