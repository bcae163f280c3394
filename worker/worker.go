package worker

import (
	"bytes"
	"context"
	"database/sql/driver"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"syscall"
	"time"

	"github.com/go-sql-driver/mysql"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/seckill/seckill/configs"
	"github.com/seckill/seckill/inventory"
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
	// Consumers is how many batches are written to MySQL at once.
	Consumers int
}

// ConfigOf takes a worker's settings from the configuration.
func ConfigOf(c configs.Config) Config {
	return Config{
		Batch: c.WorkerBatch, Flush: c.WorkerFlush, Prefetch: c.WorkerPrefetch, Window: c.PaymentWindow,
		Consumers: c.WorkerConsumers,
	}
}

// Releaser returns a cancelled order's units to its sale, exactly once.
type Releaser interface {
	Release(ctx context.Context, sale int64, orderID, userID string, qty int64) (int64, bool, error)
}

// Worker consumes order events into the ledger and cancels unpaid orders.
type Worker struct {
	broker  *Broker
	ledger  *orders.Store
	stock   Releaser
	cfg     Config
	metrics *Metrics
	now     func() time.Time
}

// New returns a Worker; Run starts it.
func New(broker *Broker, ledger *orders.Store, stock Releaser, m *Metrics, cfg Config) *Worker {
	if cfg.TimeoutWorkers <= 0 {
		cfg.TimeoutWorkers = 4
	}
	if cfg.Consumers <= 0 {
		cfg.Consumers = 1
	}
	return &Worker{broker: broker, ledger: ledger, stock: stock, cfg: cfg, metrics: m, now: time.Now}
}

// Run consumes until ctx is cancelled; then it stops taking messages,
// finishes and acknowledges the batch in hand, and returns.
func (w *Worker) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	for range w.cfg.Consumers {
		wg.Go(func() { w.loop(ctx, "orders", w.consumeOrders) })
	}
	wg.Go(func() { w.loop(ctx, "timeouts", w.consumeTimeouts) })
	wg.Wait()
	return nil
}

// loop runs one consumer on a fresh channel after every failure, with
// backoff, until ctx ends.
func (w *Worker) loop(ctx context.Context, name string, consume func(context.Context, *amqp.Channel) error) {
	bo := newBackoff()
	for ctx.Err() == nil {
		ch, err := w.broker.Channel(ctx)
		if err != nil {
			return
		}
		start := time.Now()
		err = consume(ctx, ch)
		ch.Close()
		if ctx.Err() != nil {
			return
		}
		if time.Since(start) > 10*time.Second {
			bo.reset()
		}
		slog.Warn("worker: consumer stopped, restarting", "consumer", name, "err", err, "in", bo.peek())
		_ = bo.wait(ctx)
	}
}

var errChannelClosed = errors.New("worker: channel closed")

// consumeOrders collects deliveries into batches and writes each batch in
// one transaction.
func (w *Worker) consumeOrders(ctx context.Context, ch *amqp.Channel) error {
	if err := ch.Qos(w.cfg.Prefetch, 0, false); err != nil {
		return fmt.Errorf("worker: qos: %w", err)
	}
	// The channel also publishes the orders' timeouts, with confirms.
	if err := ch.Confirm(false); err != nil {
		return fmt.Errorf("worker: confirm mode: %w", err)
	}
	tag := consumerTag("orders")
	deliveries, err := ch.Consume(w.broker.Names().Orders(), tag, false, false, false, false, nil)
	if err != nil {
		return fmt.Errorf("worker: consume: %w", err)
	}
	var batch []amqp.Delivery
	for {
		batch = batch[:0]
		// Wait for the first message, then take what is already there and
		// what arrives within Flush, until the batch holds about Batch
		// orders (a message may carry several; see RelayConfig.Pack).
		select {
		case <-ctx.Done():
			return ch.Cancel(tag, false)
		case d, ok := <-deliveries:
			if !ok {
				return errChannelClosed
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
					return errChannelClosed
				}
				batch = append(batch, d)
				n += approxEvents(d.Body)
			case <-timer.C:
				break fill
			}
		}
		timer.Stop()
		// The batch in hand is finished even when shutdown has begun.
		if err := w.processOrders(context.WithoutCancel(ctx), ch, batch); err != nil {
			return err
		}
	}
}

// approxEvents guesses how many events a message carries without decoding
// it: the number of order ids in it, at least one.
func approxEvents(body []byte) int {
	return max(1, bytes.Count(body, []byte(`"order_id"`)))
}

// processOrders writes a batch: poison messages are dead-lettered, the rest
// committed in one transaction, their payment timeouts scheduled, and only
// then acknowledged.
func (w *Worker) processOrders(ctx context.Context, ch *amqp.Channel, batch []amqp.Delivery) error {
	now := w.now()
	good := make([]amqp.Delivery, 0, len(batch))
	var os []orders.Order
	ends := make([]int, 0, len(batch)) // good[i] carries os[ends[i-1]:ends[i]]
	for _, d := range batch {
		evs, err := decodeEvents(d.Body)
		if err != nil {
			w.deadLetter(d, "orders", err)
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
	start := time.Now()
	err := w.retry(ctx, func() error {
		return w.ledger.InTx(ctx, func(tx *orders.Store) error { return tx.InsertOrders(ctx, os) })
	})
	if err != nil {
		// Not a passing fault: some row is refused (an unknown sale, say).
		// Write the messages one by one so the rest flow on.
		return w.processOneByOne(ctx, ch, good, os, ends)
	}
	w.metrics.commit.Observe(time.Since(start).Seconds())
	w.metrics.batchSize.Observe(float64(len(os)))
	w.metrics.persisted.Add(float64(len(os)))
	if err := w.scheduleTimeouts(ctx, ch, os); err != nil {
		return err
	}
	return ch.Ack(good[len(good)-1].DeliveryTag, true)
}

func (w *Worker) processOneByOne(ctx context.Context, ch *amqp.Channel, ds []amqp.Delivery, os []orders.Order, ends []int) error {
	var written []orders.Order
	var tags []amqp.Delivery
	for i, d := range ds {
		first := 0
		if i > 0 {
			first = ends[i-1]
		}
		mine := os[first:ends[i]]
		err := w.retry(ctx, func() error {
			return w.ledger.InTx(ctx, func(tx *orders.Store) error { return tx.InsertOrders(ctx, mine) })
		})
		if err != nil {
			// Requeued: the queue's delivery limit dead-letters it after a
			// bounded number of tries.
			slog.Error("worker: orders refused by MySQL; requeued", "message_id", d.MessageId, "sale", mine[0].SaleID,
				"redelivered", d.Redelivered, "err", err)
			if err := d.Nack(false, true); err != nil {
				return err
			}
			continue
		}
		written = append(written, mine...)
		tags = append(tags, d)
	}
	if len(written) == 0 {
		return nil
	}
	w.metrics.persisted.Add(float64(len(written)))
	if err := w.scheduleTimeouts(ctx, ch, written); err != nil {
		return err
	}
	for _, d := range tags {
		if err := d.Ack(false); err != nil {
			return err
		}
	}
	return nil
}

// retry runs fn until it succeeds, fails for good, or ctx ends; MySQL
// being unreachable is waited out with backoff, holding the messages
// unacknowledged.
func (w *Worker) retry(ctx context.Context, fn func() error) error {
	bo := newBackoff()
	for {
		err := fn()
		if err == nil || !transient(err) {
			return err
		}
		w.metrics.dbRetries.Inc()
		slog.Warn("worker: mysql unavailable, retrying batch", "err", err, "in", bo.peek())
		if werr := bo.wait(ctx); werr != nil {
			return err
		}
	}
}

// transient reports whether an error may pass if retried: connection
// failures, lock waits, deadlocks, a server going away. Anything MySQL
// answered about the data itself is not.
func transient(err error) bool {
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		switch me.Number {
		case 1205, 1213, 1040, 1053, 1927, 2006, 2013:
			return true
		}
		return false
	}
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, driver.ErrBadConn) || errors.Is(err, mysql.ErrInvalidConn) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, context.DeadlineExceeded)
}

// decodeEvents reads a message body strictly: one event, or a JSON array
// of them as the relay packs them. Any error makes the whole message
// poison.
func decodeEvents(body []byte) ([]orders.Event, error) {
	var evs []orders.Event
	var err error
	if b := bytes.TrimLeft(body, " \t\r\n"); len(b) > 0 && b[0] == '[' {
		err = strictJSON(body, &evs)
	} else {
		evs = make([]orders.Event, 1)
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

func (w *Worker) deadLetter(d amqp.Delivery, queue string, why error) {
	slog.Error("worker: dead-lettering message", "queue", queue, "message_id", d.MessageId, "err", why)
	w.metrics.deadLettered.WithLabelValues(queue).Inc()
	if err := d.Reject(false); err != nil {
		slog.Warn("worker: reject failed; the message will be redelivered", "err", err)
	}
}

// timeoutMessage is the body of a payment timeout: the orders of one
// committed batch, whose windows end together.
type timeoutMessage struct {
	Orders []timeoutOrder `json:"orders"`
}

type timeoutOrder struct {
	OrderID string `json:"order_id"`
	SaleID  int64  `json:"sale_id"`
}

// scheduleTimeouts puts one timeout message for the batch into the delay
// queue and waits for the broker's confirm; the orders' messages are
// acknowledged only after.
func (w *Worker) scheduleTimeouts(ctx context.Context, ch *amqp.Channel, os []orders.Order) error {
	m := timeoutMessage{Orders: make([]timeoutOrder, len(os))}
	for i, o := range os {
		m.Orders[i] = timeoutOrder{OrderID: o.ID, SaleID: o.SaleID}
	}
	body, err := json.Marshal(m)
	if err != nil {
		return err
	}
	dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, "", w.broker.Names().Delay(), true, false, amqp.Publishing{
		ContentType: "application/json", DeliveryMode: amqp.Persistent, MessageId: os[0].ID, Body: body,
	})
	if err != nil {
		return fmt.Errorf("worker: schedule timeouts: %w", err)
	}
	wctx, cancel := context.WithTimeout(ctx, confirmTimeout)
	defer cancel()
	if ok, err := dc.WaitContext(wctx); err != nil || !ok {
		return fmt.Errorf("worker: timeouts not confirmed (%v)", err)
	}
	return nil
}

// consumeTimeouts cancels orders whose payment window has closed.
func (w *Worker) consumeTimeouts(ctx context.Context, ch *amqp.Channel) error {
	if err := ch.Qos(4*w.cfg.TimeoutWorkers, 0, false); err != nil {
		return fmt.Errorf("worker: qos: %w", err)
	}
	tag := consumerTag("timeouts")
	deliveries, err := ch.Consume(w.broker.Names().Timeouts(), tag, false, false, false, false, nil)
	if err != nil {
		return fmt.Errorf("worker: consume timeouts: %w", err)
	}
	var wg sync.WaitGroup
	errc := make(chan error, w.cfg.TimeoutWorkers)
	for range w.cfg.TimeoutWorkers {
		wg.Go(func() {
			for {
				select {
				case <-ctx.Done():
					return
				case d, ok := <-deliveries:
					if !ok {
						errc <- errChannelClosed
						return
					}
					if err := w.expire(context.WithoutCancel(ctx), d); err != nil {
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
		_ = ch.Cancel(tag, false)
		return nil
	}
	return <-errc
}

// expire cancels the orders of one timeout message that are still
// pending and returns their units exactly once. Paid orders are left
// alone. A redelivered message is harmless: both steps are idempotent.
func (w *Worker) expire(ctx context.Context, d amqp.Delivery) error {
	var m timeoutMessage
	if err := json.Unmarshal(d.Body, &m); err != nil || len(m.Orders) == 0 {
		w.deadLetter(d, "timeouts", fmt.Errorf("malformed timeout: %v", err))
		return nil
	}
	for _, t := range m.Orders {
		if err := w.expireOne(ctx, t.OrderID); err != nil {
			slog.Error("worker: cancelling order failed; requeued", "order", t.OrderID, "err", err)
			return d.Nack(false, true)
		}
	}
	return d.Ack(false)
}

func (w *Worker) expireOne(ctx context.Context, id string) error {
	var o orders.Order
	err := w.retry(ctx, func() error {
		var err error
		o, err = w.ledger.Cancel(ctx, id, w.now())
		return err
	})
	switch {
	case errors.Is(err, orders.ErrPaid):
		return nil
	case errors.Is(err, orders.ErrNotFound):
		slog.Warn("worker: timeout for an unknown order", "order", id)
		return nil
	case err != nil:
		return err
	}
	// Cancelled, now or by an earlier delivery: release is idempotent, so a
	// crash between the MySQL commit and here loses nothing.
	bo := newBackoff()
	for {
		_, released, err := w.stock.Release(ctx, o.SaleID, o.ID, o.UserID, o.Qty)
		if err == nil || errors.Is(err, inventory.ErrSaleNotFound) {
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
