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
	// TimeoutWorkers is how many payment timeouts are handled at once.
	TimeoutWorkers int
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
	return &Worker{broker: broker, ledger: ledger, stock: stock, cfg: cfg, metrics: m, now: time.Now}
}

// Run consumes until ctx is cancelled; then it stops taking messages,
// finishes and acknowledges the batch in hand, and returns.
func (w *Worker) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	wg.Go(func() { w.loop(ctx, "orders", w.consumeOrders) })
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
	batch := make([]amqp.Delivery, 0, w.cfg.Batch)
	for {
		batch = batch[:0]
		// Wait for the first message, then take what is already there and
		// what arrives within Flush, up to Batch.
		select {
		case <-ctx.Done():
			return ch.Cancel(tag, false)
		case d, ok := <-deliveries:
			if !ok {
				return errChannelClosed
			}
			batch = append(batch, d)
		}
		timer := time.NewTimer(w.cfg.Flush)
	fill:
		for len(batch) < w.cfg.Batch {
			select {
			case d, ok := <-deliveries:
				if !ok {
					timer.Stop()
					return errChannelClosed
				}
				batch = append(batch, d)
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

// processOrders writes a batch: poison messages are dead-lettered, the rest
// committed in one transaction, their payment timeouts scheduled, and only
// then acknowledged.
func (w *Worker) processOrders(ctx context.Context, ch *amqp.Channel, batch []amqp.Delivery) error {
	now := w.now()
	good := make([]amqp.Delivery, 0, len(batch))
	os := make([]orders.Order, 0, len(batch))
	for _, d := range batch {
		ev, err := decodeEvent(d.Body)
		if err != nil {
			w.deadLetter(d, "orders", err)
			continue
		}
		good = append(good, d)
		os = append(os, ev.Order(w.cfg.Window, now))
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
		return w.processOneByOne(ctx, ch, good, os)
	}
	w.metrics.commit.Observe(time.Since(start).Seconds())
	w.metrics.batchSize.Observe(float64(len(os)))
	w.metrics.persisted.Add(float64(len(os)))
	if err := w.scheduleTimeouts(ctx, ch, os); err != nil {
		return err
	}
	return ch.Ack(good[len(good)-1].DeliveryTag, true)
}

func (w *Worker) processOneByOne(ctx context.Context, ch *amqp.Channel, ds []amqp.Delivery, os []orders.Order) error {
	for i, d := range ds {
		err := w.retry(ctx, func() error {
			return w.ledger.InTx(ctx, func(tx *orders.Store) error { return tx.InsertOrders(ctx, os[i:i+1]) })
		})
		if err != nil {
			// Requeued: the queue's delivery limit dead-letters it after a
			// bounded number of tries.
			slog.Error("worker: order refused by MySQL; requeued", "order", os[i].ID, "sale", os[i].SaleID,
				"redelivered", d.Redelivered, "err", err)
			if err := d.Nack(false, true); err != nil {
				return err
			}
			continue
		}
		w.metrics.persisted.Inc()
		if err := w.scheduleTimeouts(ctx, ch, os[i:i+1]); err != nil {
			return err
		}
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

// decodeEvent reads a message body strictly; an error makes it poison.
func decodeEvent(body []byte) (orders.Event, error) {
	var ev orders.Event
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&ev); err != nil {
		return ev, fmt.Errorf("malformed event: %w", err)
	}
	return ev, ev.Validate()
}

func (w *Worker) deadLetter(d amqp.Delivery, queue string, why error) {
	slog.Error("worker: dead-lettering message", "queue", queue, "message_id", d.MessageId, "err", why)
	w.metrics.deadLettered.WithLabelValues(queue).Inc()
	if err := d.Reject(false); err != nil {
		slog.Warn("worker: reject failed; the message will be redelivered", "err", err)
	}
}

// timeoutMessage is the body of an order's payment timeout.
type timeoutMessage struct {
	OrderID string `json:"order_id"`
	SaleID  int64  `json:"sale_id"`
}

// scheduleTimeouts puts each order's timeout into the delay queue, with
// publisher confirms; the orders' messages are acknowledged only after.
func (w *Worker) scheduleTimeouts(ctx context.Context, ch *amqp.Channel, os []orders.Order) error {
	pending := make([]*amqp.DeferredConfirmation, len(os))
	for i, o := range os {
		body, _ := json.Marshal(timeoutMessage{OrderID: o.ID, SaleID: o.SaleID})
		dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, "", w.broker.Names().Delay(), true, false, amqp.Publishing{
			ContentType: "application/json", DeliveryMode: amqp.Persistent, MessageId: o.ID, Body: body,
		})
		if err != nil {
			return fmt.Errorf("worker: schedule timeout: %w", err)
		}
		pending[i] = dc
	}
	wctx, cancel := context.WithTimeout(ctx, confirmTimeout)
	defer cancel()
	for _, dc := range pending {
		ok, err := dc.WaitContext(wctx)
		if err != nil || !ok {
			return fmt.Errorf("worker: timeout not confirmed: %v", err)
		}
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

// expire cancels one order if it is still pending and returns its units
// exactly once. A paid order is left alone.
func (w *Worker) expire(ctx context.Context, d amqp.Delivery) error {
	var m timeoutMessage
	if err := json.Unmarshal(d.Body, &m); err != nil || m.OrderID == "" {
		w.deadLetter(d, "timeouts", fmt.Errorf("malformed timeout: %v", err))
		return nil
	}
	var o orders.Order
	err := w.retry(ctx, func() error {
		var err error
		o, err = w.ledger.Cancel(ctx, m.OrderID, w.now())
		return err
	})
	switch {
	case errors.Is(err, orders.ErrPaid):
		return d.Ack(false)
	case errors.Is(err, orders.ErrNotFound):
		slog.Warn("worker: timeout for an unknown order", "order", m.OrderID)
		return d.Ack(false)
	case err != nil:
		slog.Error("worker: cancelling order failed; requeued", "order", m.OrderID, "err", err)
		return d.Nack(false, true)
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
			return d.Ack(false)
		}
		slog.Warn("worker: releasing stock failed, retrying", "order", o.ID, "err", err, "in", bo.peek())
		if err := bo.wait(ctx); err != nil {
			return err
		}
	}
}
