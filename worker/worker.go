// Package worker moves accepted orders from Redis to the ledger and keeps
// the two in agreement: the outbox relay (Redis stream → bus, publisher
// confirms), the order consumer (bus → one ledger transaction per batch),
// the payment timeout consumer (cancel unpaid orders, return their stock
// once) and the reconciler. It speaks to the message broker through
// bus.Bus: RabbitMQ in production, an in-process bus when embedded.
package worker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/seckill/seckill"
	"github.com/seckill/seckill/bus"
	"github.com/seckill/seckill/internal/tracing"
	"github.com/seckill/seckill/orders"
)

// Config tunes a Worker.
type Config struct {
	// Batch is the most orders written in one transaction.
	Batch int
	// Flush is how long a partial batch waits for more messages.
	Flush time.Duration
	// Prefetch is how many unacknowledged messages the broker sends ahead.
	Prefetch int
	// Window is the payment window of a new order.
	Window time.Duration
	// TimeoutWorkers is how many timeout messages are handled at once.
	TimeoutWorkers int
	// Consumers is how many batches are written to the ledger at once.
	Consumers int
	// Grace is how long, after Run's context ends, the batch in hand may
	// still take to be written (the ledger may be down); past it the batch
	// is left unacknowledged and goes back to the queue.
	Grace time.Duration
}

// Releaser returns a cancelled order's units to its sale, exactly once.
type Releaser interface {
	Release(ctx context.Context, sale int64, orderID, userID string, qty int64) (int64, bool, error)
}

// Worker consumes order events into the ledger and cancels unpaid orders.
type Worker struct {
	bus     bus.Bus
	ledger  *orders.Store
	stock   Releaser
	cfg     Config
	metrics *Metrics
	now     func() time.Time
}

// New returns a Worker; Run starts it.
func New(b bus.Bus, ledger *orders.Store, stock Releaser, m *Metrics, cfg Config) *Worker {
	if cfg.TimeoutWorkers <= 0 {
		cfg.TimeoutWorkers = 4
	}
	if cfg.Consumers <= 0 {
		cfg.Consumers = 1
	}
	if cfg.Grace <= 0 {
		cfg.Grace = 10 * time.Second
	}
	return &Worker{bus: b, ledger: ledger, stock: stock, cfg: cfg, metrics: m, now: time.Now}
}

// Run consumes until ctx is cancelled; then it stops taking messages,
// finishes and acknowledges the batch in hand (within Grace), and returns.
func (w *Worker) Run(ctx context.Context) error {
	// Work in hand outlives ctx by Grace at most.
	work, stop := context.WithCancel(context.WithoutCancel(ctx))
	defer stop()
	context.AfterFunc(ctx, func() { time.AfterFunc(w.cfg.Grace, stop) })

	var wg sync.WaitGroup
	for range w.cfg.Consumers {
		wg.Go(func() { w.loop(ctx, work, bus.Orders, w.cfg.Prefetch, w.consumeOrders) })
	}
	wg.Go(func() { w.loop(ctx, work, bus.Timeouts, 4*w.cfg.TimeoutWorkers, w.consumeTimeouts) })
	wg.Go(func() { w.watchDeadLetters(ctx) })
	wg.Wait()
	return nil
}

// loop runs one consumer on a fresh subscription after every failure,
// with backoff, until ctx ends.
func (w *Worker) loop(ctx, work context.Context, queue string, prefetch int,
	consume func(ctx, work context.Context, s bus.Subscription) error) {
	bo := newBackoff()
	for ctx.Err() == nil {
		s, err := w.bus.Subscribe(ctx, queue, prefetch)
		if err == nil {
			start := time.Now()
			err = consume(ctx, work, s)
			s.Close()
			if time.Since(start) > 10*time.Second {
				bo.reset()
			}
		}
		if ctx.Err() != nil {
			return
		}
		slog.Warn("worker: consumer stopped, restarting", "queue", queue, "err", err, "in", bo.peek())
		_ = bo.wait(ctx)
	}
}

var errSubscriptionEnded = errors.New("worker: subscription ended")

// consumeOrders collects deliveries into batches and writes each batch in
// one transaction.
func (w *Worker) consumeOrders(ctx, work context.Context, s bus.Subscription) error {
	deliveries := s.Deliveries()
	var batch []bus.Delivery
	for {
		batch = batch[:0]
		// Wait for the first message, then take what is already there and
		// what arrives within Flush, until the batch holds about Batch
		// orders (a message may carry several; see RelayConfig.Pack).
		select {
		case <-ctx.Done():
			return nil
		case d, ok := <-deliveries:
			if !ok {
				return errSubscriptionEnded
			}
			batch = append(batch, d)
		}
		n := approxEvents(batch[0].Body)
		timer := time.NewTimer(w.cfg.Flush)
	fill:
		for n < w.cfg.Batch {
			select {
			case d, ok := <-deliveries:
				if !ok {
					timer.Stop()
					return errSubscriptionEnded
				}
				batch = append(batch, d)
				n += approxEvents(d.Body)
			case <-timer.C:
				break fill
			}
		}
		timer.Stop()
		// The batch in hand is finished even when shutdown has begun.
		if err := w.processOrders(work, batch); err != nil {
			return err
		}
	}
}

// approxEvents guesses how many events a message carries without decoding
// it: the number of order ids in it, at least one.
func approxEvents(body []byte) int {
	return max(1, bytes.Count(body, []byte(`"order_id"`)))
}

// processOrders writes a batch: malformed messages are dead-lettered, the
// rest committed in one transaction, their payment timeouts scheduled, and
// only then acknowledged. An error leaves the batch unacknowledged: it
// comes back when the subscription ends.
func (w *Worker) processOrders(ctx context.Context, batch []bus.Delivery) error {
	now := w.now()
	good := make([]bus.Delivery, 0, len(batch))
	var os []seckill.Order
	ends := make([]int, 0, len(batch)) // good[i] carries os[ends[i-1]:ends[i]]
	for _, d := range batch {
		evs, err := DecodeEvents(d.Body)
		if err != nil {
			if err := w.deadLetter(d, bus.Orders, err); err != nil {
				return err
			}
			continue
		}
		for _, ev := range evs {
			os = append(os, ev.Order(w.cfg.Window, now))
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
	start := time.Now()
	err := w.write(ctx, os)
	if orders.Refused(err) {
		// Some row is refused for good (an unknown sale, say): write the
		// messages one by one, so the rest flow on.
		return w.processOneByOne(ctx, good, os, ends)
	}
	if err != nil {
		return err
	}
	w.metrics.commit.Observe(time.Since(start).Seconds())
	w.metrics.batchSize.Observe(float64(len(os)))
	w.persisted(os)
	if err := w.scheduleTimeouts(ctx, os); err != nil {
		return err
	}
	return ackAll(good)
}

// persisted counts orders committed, and how long each took from its
// acceptance (per order: an old one replayed among many does not make the
// p99).
func (w *Worker) persisted(os []seckill.Order) {
	w.metrics.persisted.Add(float64(len(os)))
	now := time.Now()
	for _, o := range os {
		w.metrics.ledgerLag.Observe(max(0, now.Sub(o.CreatedAt).Seconds()))
	}
}

func (w *Worker) processOneByOne(ctx context.Context, ds []bus.Delivery, os []seckill.Order, ends []int) error {
	var written []seckill.Order
	var done []bus.Delivery
	for i, d := range ds {
		first := 0
		if i > 0 {
			first = ends[i-1]
		}
		mine := os[first:ends[i]]
		err := w.write(ctx, mine)
		if orders.Refused(err) {
			if err := w.deadLetter(d, bus.Orders, fmt.Errorf("refused by the ledger: %w", err)); err != nil {
				return err
			}
			continue
		}
		if err != nil {
			return err
		}
		written = append(written, mine...)
		done = append(done, d)
	}
	if len(written) == 0 {
		return nil
	}
	w.persisted(written)
	if err := w.scheduleTimeouts(ctx, written); err != nil {
		return err
	}
	return ackAll(done)
}

func ackAll(ds []bus.Delivery) error {
	for _, d := range ds {
		if err := d.Ack(); err != nil {
			return err
		}
	}
	return nil
}

// write inserts orders in one transaction, waiting out any failure that
// is not the ledger refusing the data: the messages are held meanwhile.
func (w *Worker) write(ctx context.Context, os []seckill.Order) error {
	return w.retry(ctx, "writing orders", func() error {
		return w.ledger.InsertOrders(ctx, os)
	})
}

// retry runs fn until it succeeds, the ledger refuses the data for good
// (orders.Refused), or ctx ends. Anything else is waited out with backoff
// (a database that is down, a schema not yet migrated, an error nobody
// foresaw): a valid order is never given up.
func (w *Worker) retry(ctx context.Context, what string, fn func() error) error {
	bo := newBackoff()
	for {
		err := fn()
		if err == nil || orders.Refused(err) {
			return err
		}
		w.metrics.dbRetries.Inc()
		if orders.Transient(err) {
			slog.Warn("worker: ledger unavailable, retrying", "while", what, "err", err, "in", bo.peek())
		} else {
			slog.Error("worker: unexpected ledger error, retrying", "while", what, "err", err, "in", bo.peek())
		}
		if werr := bo.wait(ctx); werr != nil {
			return err
		}
	}
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

func strictJSON(body []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("trailing data after the event")
	}
	return nil
}

// deadLetter gives a message up, with why in its headers.
func (w *Worker) deadLetter(d bus.Delivery, queue string, why error) error {
	slog.Error("worker: dead-lettering message", "queue", queue, "message_id", d.ID, "reason", why)
	if err := d.DeadLetter(why.Error()); err != nil {
		return fmt.Errorf("worker: dead-letter %s: %w", d.ID, err)
	}
	w.metrics.deadLettered.WithLabelValues(queue).Inc()
	return nil
}

// watchDeadLetters keeps the dead-letter gauge current.
func (w *Worker) watchDeadLetters(ctx context.Context) {
	for ctx.Err() == nil {
		if n, err := w.bus.Depth(ctx, bus.Dead); err == nil {
			w.metrics.deadLetters.Set(float64(n))
		}
		sleep(ctx, 10*time.Second)
	}
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

// scheduleTimeouts sends one timeout message for the orders, to arrive
// when their payment window has passed, and waits for the broker's
// confirm; the orders' messages are acknowledged only after.
func (w *Worker) scheduleTimeouts(ctx context.Context, os []seckill.Order) error {
	if err := ScheduleTimeouts(ctx, w.bus, os, w.cfg.Window); err != nil {
		return err
	}
	w.metrics.messages.WithLabelValues(bus.Timeouts).Inc()
	return nil
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

// consumeTimeouts cancels orders whose payment window has closed.
func (w *Worker) consumeTimeouts(ctx, work context.Context, s bus.Subscription) error {
	var wg sync.WaitGroup
	errc := make(chan error, w.cfg.TimeoutWorkers)
	for range w.cfg.TimeoutWorkers {
		wg.Go(func() {
			for {
				select {
				case <-ctx.Done():
					return
				case d, ok := <-s.Deliveries():
					if !ok {
						errc <- errSubscriptionEnded
						return
					}
					if err := w.expire(work, d); err != nil {
						errc <- err
						return
					}
				}
			}
		})
	}
	wg.Wait()
	close(errc)
	if ctx.Err() != nil {
		return nil
	}
	return <-errc
}

// expire cancels the orders of one timeout message that are still
// pending and returns their units exactly once. Paid orders are left
// alone. A redelivered message is harmless: both steps are idempotent.
func (w *Worker) expire(ctx context.Context, d bus.Delivery) error {
	if tracing.Enabled() {
		var span trace.Span
		ctx, span = tracing.StartFrom(ctx, "payment timeout", trace.SpanKindConsumer, []string{d.Headers[tracing.HeaderTraceparent]})
		defer span.End()
	}
	m, err := DecodeTimeout(d.Body)
	if err != nil {
		return w.deadLetter(d, bus.Timeouts, err)
	}
	for _, t := range m.Orders {
		if err := w.expireOne(ctx, t.OrderID); err != nil {
			return err // unacknowledged: it comes back
		}
	}
	return d.Ack()
}

func (w *Worker) expireOne(ctx context.Context, id string) error {
	var o seckill.Order
	err := w.retry(ctx, "cancelling an order", func() error {
		var err error
		o, err = w.ledger.Cancel(ctx, id, w.now())
		if errors.Is(err, seckill.ErrOrderPaid) || errors.Is(err, seckill.ErrOrderNotFound) {
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
	case o.Status == seckill.OrderPaid:
		return nil
	}
	// Cancelled, now or by an earlier delivery: release is idempotent, so a
	// crash between the ledger commit and here loses nothing.
	bo := newBackoff()
	for {
		_, released, err := w.stock.Release(ctx, o.SaleID, o.ID, o.UserID, o.Qty)
		if err == nil || errors.Is(err, seckill.ErrSaleNotFound) {
			if released {
				w.metrics.cancelled.Inc()
			}
			return nil
		}
		slog.Warn("worker: releasing stock failed, retrying", "order", o.ID, "err", err, "in", bo.peek())
		if err := bo.wait(ctx); err != nil {
			return err
		}
	}
}
