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

	"github.com/prometheus/client_golang/prometheus"

	"github.com/seckill/seckill/bus"
	"github.com/seckill/seckill/orders"
)

// Subscriber is the bus as a consumer needs it: a subscription to one
// queue, with at most prefetch deliveries unacknowledged.
type Subscriber interface {
	Subscribe(ctx context.Context, queue string, prefetch int) (bus.Subscription, error)
}

// consumer is what every bus consumer shares, so that a consumer is its
// handling and little else. It subscribes to its queue with its prefetch,
// runs the consumer's handling on the deliveries, and subscribes again
// with backoff after a failure; at shutdown the work in hand may finish
// within grace. It dead-letters a message when the consumer judges it
// unprocessable, and only then: a delivery a consumer leaves unsettled,
// because it failed or died, goes back to the queue when its subscription
// ends.
type consumer struct {
	sub          Subscriber
	queue        string
	prefetch     int
	grace        time.Duration
	deadLettered prometheus.Counter // this queue's
	shared       *ConsumerMetrics
}

// defaultGrace is how long the work in hand may take after shutdown
// began, unless configured.
const defaultGrace = 10 * time.Second

// newConsumer returns the common part of a consumer of queue; it counts
// the messages it dead-letters in deadLettered (the consumer's own
// series) and its ledger retries in shared.
func newConsumer(b Subscriber, queue string, prefetch int, grace time.Duration,
	deadLettered prometheus.Counter, shared *ConsumerMetrics) consumer {
	if grace <= 0 {
		grace = defaultGrace
	}
	return consumer{sub: b, queue: queue, prefetch: prefetch, grace: grace, deadLettered: deadLettered, shared: shared}
}

// consumeFunc consumes one subscription until ctx ends (nil) or it
// fails. The work in hand runs under work, which outlives ctx by the
// grace period.
type consumeFunc func(ctx, work context.Context, s bus.Subscription) error

// run consumes on n subscriptions at once until ctx is cancelled; then it
// stops taking messages, lets the work in hand finish (within grace) and
// returns.
func (c *consumer) run(ctx context.Context, n int, consume consumeFunc) {
	// Work in hand outlives ctx by grace at most.
	work, stop := context.WithCancel(context.WithoutCancel(ctx))
	defer stop()
	context.AfterFunc(ctx, func() { time.AfterFunc(c.grace, stop) })
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() { c.loop(ctx, work, consume) })
	}
	wg.Wait()
}

// loop runs consume on a fresh subscription after every failure, with
// backoff, until ctx ends.
func (c *consumer) loop(ctx, work context.Context, consume consumeFunc) {
	bo := newBackoff()
	for ctx.Err() == nil {
		s, err := c.sub.Subscribe(ctx, c.queue, c.prefetch)
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
		slog.Warn("worker: consumer stopped, restarting", "queue", c.queue, "err", err, "in", bo.peek())
		_ = bo.wait(ctx)
	}
}

var errSubscriptionEnded = errors.New("worker: subscription ended")

// batches consumes in batches: it waits for a first delivery, then takes
// what is already there and what arrives within flush, until the batch
// weighs size or more (weigh tells what a message body counts for), and
// hands the batch to handle. The batch in hand is handled even when
// shutdown has begun. An error of handle ends the subscription, so the
// batch's unsettled deliveries come back.
func batches(size int, flush time.Duration, weigh func(body []byte) int,
	handle func(ctx context.Context, batch []bus.Delivery) error) consumeFunc {
	return func(ctx, work context.Context, s bus.Subscription) error {
		deliveries := s.Deliveries()
		var batch []bus.Delivery
		for {
			batch = batch[:0]
			select {
			case <-ctx.Done():
				return nil
			case d, ok := <-deliveries:
				if !ok {
					return errSubscriptionEnded
				}
				batch = append(batch, d)
			}
			n := weigh(batch[0].Body)
			timer := time.NewTimer(flush)
		fill:
			for n < size {
				select {
				case d, ok := <-deliveries:
					if !ok {
						timer.Stop()
						return errSubscriptionEnded
					}
					batch = append(batch, d)
					n += weigh(d.Body)
				case <-timer.C:
					break fill
				}
			}
			timer.Stop()
			if err := handle(work, batch); err != nil {
				return err
			}
		}
	}
}

// each consumes one delivery at a time on n goroutines, each handed to
// handle. An error of handle stops its goroutine; the subscription ends
// once all have stopped.
func each(n int, handle func(ctx context.Context, d bus.Delivery) error) consumeFunc {
	return func(ctx, work context.Context, s bus.Subscription) error {
		var wg sync.WaitGroup
		errc := make(chan error, n)
		for range n {
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
						if err := handle(work, d); err != nil {
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
}

// deadLetter gives a message up, with why in its headers: for a message
// the consumer judged unprocessable, never for a failure of its own.
func (c *consumer) deadLetter(d bus.Delivery, why error) error {
	slog.Error("worker: dead-lettering message", "queue", c.queue, "message_id", d.ID, "reason", why)
	if err := d.DeadLetter(why.Error()); err != nil {
		return fmt.Errorf("worker: dead-letter %s: %w", d.ID, err)
	}
	c.deadLettered.Inc()
	return nil
}

// retry runs fn until it succeeds, the ledger refuses the data for good
// (orders.Refused), or ctx ends. Anything else is waited out with backoff
// (a database that is down, a schema not yet migrated, an error nobody
// foresaw): a valid message is never given up.
func (c *consumer) retry(ctx context.Context, what string, fn func() error) error {
	bo := newBackoff()
	for {
		err := fn()
		if err == nil || orders.Refused(err) {
			return err
		}
		c.shared.dbRetries.Inc()
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

func ackAll(ds []bus.Delivery) error {
	for _, d := range ds {
		if err := d.Ack(); err != nil {
			return err
		}
	}
	return nil
}

// strictJSON decodes one JSON value that is all of body, refusing fields
// v does not have: a message that does not say exactly what it should is
// malformed.
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

// ConsumerMetrics are the series the consumers of a process share: the
// ledger writes they retried, and the depth of the dead-letter queue they
// feed. Each consumer's own series are in its own metrics.
type ConsumerMetrics struct {
	dbRetries   prometheus.Counter
	deadLetters prometheus.Gauge
}

// NewConsumerMetrics registers the consumers' shared series on reg.
func NewConsumerMetrics(reg prometheus.Registerer) *ConsumerMetrics {
	m := &ConsumerMetrics{
		dbRetries: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "seckill_worker_db_retries_total", Help: "Ledger writes retried because the ledger was unavailable or failed.",
		}),
		deadLetters: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "seckill_dead_letters", Help: "Messages in the dead-letter queue (read every 10 s); see seckill deadletters.",
		}),
	}
	reg.MustRegister(m.dbRetries, m.deadLetters)
	return m
}

// Depther counts the messages waiting in a queue (bus.Bus).
type Depther interface {
	Depth(ctx context.Context, queue string) (int, error)
}

// WatchDeadLetters keeps the dead-letter gauge current, reading the
// queue's depth every 10 s, until ctx ends. One per process that runs
// consumers.
func WatchDeadLetters(ctx context.Context, b Depther, m *ConsumerMetrics) {
	for ctx.Err() == nil {
		if n, err := b.Depth(ctx, bus.Dead); err == nil {
			m.deadLetters.Set(float64(n))
		}
		sleep(ctx, 10*time.Second)
	}
}

// oneByOne writes each message's items alone, after the ledger refused a
// batch of them for good: ds[i] carries items[ends[i-1]:ends[i]]. A
// message the ledger refuses is dead-lettered, the rest flow on; it
// returns the items written and their deliveries, for the consumer to
// finish and acknowledge.
func oneByOne[T any](c *consumer, ctx context.Context, ds []bus.Delivery, items []T, ends []int,
	write func(context.Context, []T) error) (written []T, done []bus.Delivery, err error) {
	for i, d := range ds {
		first := 0
		if i > 0 {
			first = ends[i-1]
		}
		mine := items[first:ends[i]]
		err := write(ctx, mine)
		if orders.Refused(err) {
			if err := c.deadLetter(d, fmt.Errorf("refused by the ledger: %w", err)); err != nil {
				return nil, nil, err
			}
			continue
		}
		if err != nil {
			return nil, nil, err
		}
		written = append(written, mine...)
		done = append(done, d)
	}
	return written, done, nil
}
