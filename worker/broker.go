// Package worker moves accepted orders from Redis to the MySQL ledger and
// keeps the two in agreement: the outbox relay (Redis stream → RabbitMQ,
// publisher confirms), the order consumer (RabbitMQ → one MySQL transaction
// per batch), the payment timeout consumer (cancel unpaid orders, return
// their stock once) and the reconciler.
package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// Names are the exchanges and queues of one deployment, all starting with
// its prefix, so test runs and deployments never share a queue.
type Names struct {
	prefix string
	window time.Duration
}

// NewNames returns the names for a prefix and payment window.
func NewNames(prefix string, window time.Duration) Names {
	return Names{prefix: prefix, window: window}
}

// Orders is the exchange and the quorum queue of accepted-order events.
func (n Names) Orders() string { return n.prefix + ".orders" }

// Dead is the dead-letter exchange and queue for messages that cannot be
// processed.
func (n Names) Dead() string { return n.prefix + ".dead" }

// Delay is the queue where each order's timeout waits out the payment
// window (a per-queue TTL, so no message blocks another); its name carries
// the window because a queue's TTL cannot change.
func (n Names) Delay() string { return n.prefix + ".timeouts.delay." + n.window.String() }

// Timeouts is the exchange and queue of expired payment windows.
func (n Names) Timeouts() string { return n.prefix + ".timeouts" }

// Routing keys.
const (
	keyOrder   = "order"
	keyTimeout = "timeout"
)

// Broker holds one AMQP connection and reopens it, with backoff, when it is
// lost (amqp091-go does not reconnect by itself). Each user takes channels
// from it and asks again after a failure.
type Broker struct {
	url           string
	names         Names
	maxDeliveries int

	mu   sync.Mutex
	conn *amqp.Connection
}

// NewBroker returns a Broker for url; it connects on first use.
// maxDeliveries bounds how often a message is delivered before it is
// dead-lettered.
func NewBroker(url string, names Names, maxDeliveries int) *Broker {
	return &Broker{url: url, names: names, maxDeliveries: maxDeliveries}
}

// Names returns the broker's exchange and queue names.
func (b *Broker) Names() Names { return b.names }

// Channel returns a new channel, connecting first (and declaring the
// topology) if there is no live connection. It retries with backoff until
// ctx ends.
func (b *Broker) Channel(ctx context.Context) (*amqp.Channel, error) {
	bo := newBackoff()
	for {
		ch, err := b.channel()
		if err == nil {
			return ch, nil
		}
		slog.Warn("rabbitmq unavailable, retrying", "err", err, "in", bo.peek())
		if err := bo.wait(ctx); err != nil {
			return nil, err
		}
	}
}

func (b *Broker) channel() (*amqp.Channel, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.conn == nil || b.conn.IsClosed() {
		conn, err := amqp.DialConfig(b.url, amqp.Config{Heartbeat: 5 * time.Second, Locale: "en_US", Dial: amqp.DefaultDial(3 * time.Second)})
		if err != nil {
			return nil, fmt.Errorf("worker: dial rabbitmq: %w", err)
		}
		if err := b.declare(conn); err != nil {
			conn.Close()
			return nil, err
		}
		b.conn = conn
	}
	ch, err := b.conn.Channel()
	if err != nil {
		b.conn.Close()
		b.conn = nil
		return nil, fmt.Errorf("worker: open channel: %w", err)
	}
	return ch, nil
}

// declare creates the exchanges and queues (idempotent).
func (b *Broker) declare(conn *amqp.Connection) error {
	ch, err := conn.Channel()
	if err != nil {
		return fmt.Errorf("worker: declare: %w", err)
	}
	defer ch.Close()
	n := b.names
	quorum := func(dlKey string) amqp.Table {
		return amqp.Table{
			"x-queue-type":              "quorum",
			"x-delivery-limit":          int32(b.maxDeliveries),
			"x-dead-letter-exchange":    n.Dead(),
			"x-dead-letter-routing-key": dlKey,
		}
	}
	steps := []func() error{
		func() error {
			return ch.ExchangeDeclare(n.Orders(), amqp.ExchangeDirect, true, false, false, false, nil)
		},
		func() error { return ch.ExchangeDeclare(n.Dead(), amqp.ExchangeDirect, true, false, false, false, nil) },
		func() error {
			return ch.ExchangeDeclare(n.Timeouts(), amqp.ExchangeDirect, true, false, false, false, nil)
		},
		func() error {
			_, err := ch.QueueDeclare(n.Dead(), true, false, false, false, amqp.Table{"x-queue-type": "quorum"})
			return err
		},
		func() error { return ch.QueueBind(n.Dead(), keyOrder, n.Dead(), false, nil) },
		func() error { return ch.QueueBind(n.Dead(), keyTimeout, n.Dead(), false, nil) },
		func() error {
			_, err := ch.QueueDeclare(n.Orders(), true, false, false, false, quorum(keyOrder))
			return err
		},
		func() error { return ch.QueueBind(n.Orders(), keyOrder, n.Orders(), false, nil) },
		func() error {
			_, err := ch.QueueDeclare(n.Timeouts(), true, false, false, false, quorum(keyTimeout))
			return err
		},
		func() error { return ch.QueueBind(n.Timeouts(), keyTimeout, n.Timeouts(), false, nil) },
		func() error {
			_, err := ch.QueueDeclare(n.Delay(), true, false, false, false, amqp.Table{
				"x-queue-type":              "classic",
				"x-message-ttl":             n.window.Milliseconds(),
				"x-dead-letter-exchange":    n.Timeouts(),
				"x-dead-letter-routing-key": keyTimeout,
			})
			return err
		},
	}
	for _, step := range steps {
		if err := step(); err != nil {
			return fmt.Errorf("worker: declare topology: %w", err)
		}
	}
	return nil
}

// Redeclare declares the topology again on the live connection, for when
// a queue went missing under it.
func (b *Broker) Redeclare() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.conn != nil && !b.conn.IsClosed() {
		if err := b.declare(b.conn); err != nil {
			slog.Warn("rabbitmq: redeclaring topology failed", "err", err)
		}
	}
}

// Ping reports whether the broker answers, connecting if needed.
func (b *Broker) Ping(ctx context.Context) error {
	ch, err := b.channel()
	if err != nil {
		return err
	}
	return ch.Close()
}

// QueueDepth returns the ready and unacknowledged messages of a queue.
func (b *Broker) QueueDepth(ctx context.Context, queue string) (int, error) {
	ch, err := b.channel()
	if err != nil {
		return 0, err
	}
	defer ch.Close()
	q, err := ch.QueueDeclarePassive(queue, true, false, false, false, nil)
	if err != nil {
		return 0, fmt.Errorf("worker: queue %s: %w", queue, err)
	}
	return q.Messages, nil
}

// DeleteAll removes the deployment's exchanges and queues (tests and
// teardown scripts).
func (b *Broker) DeleteAll() error {
	ch, err := b.channel()
	if err != nil {
		return err
	}
	defer ch.Close()
	n := b.names
	var errs []error
	for _, q := range []string{n.Orders(), n.Timeouts(), n.Delay(), n.Dead()} {
		if _, err := ch.QueueDelete(q, false, false, false); err != nil {
			errs = append(errs, err)
		}
	}
	for _, x := range []string{n.Orders(), n.Timeouts(), n.Dead()} {
		if err := ch.ExchangeDelete(x, false, false); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Close closes the connection.
func (b *Broker) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.conn == nil {
		return nil
	}
	err := b.conn.Close()
	b.conn = nil
	if errors.Is(err, amqp.ErrClosed) {
		err = nil
	}
	return err
}

// backoff waits exponentially longer between retries, 50 ms up to 5 s,
// with jitter so that many processes do not retry in step.
type backoff struct{ next time.Duration }

func newBackoff() *backoff { return &backoff{next: 50 * time.Millisecond} }

func (b *backoff) peek() time.Duration { return b.next }

func (b *backoff) wait(ctx context.Context) error {
	d := b.next/2 + rand.N(b.next/2+1)
	b.next = min(2*b.next, 5*time.Second)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func (b *backoff) reset() { b.next = 50 * time.Millisecond }

// consumerTag names a consumer for the broker's management view.
func consumerTag(kind string) string {
	return kind + "-" + strconv.FormatUint(rand.Uint64()&0xffffffff, 36)
}
