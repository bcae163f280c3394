// Package rabbitmq is the production message bus: the queues of package bus
// on RabbitMQ, with durable exchanges and queues (classic, or quorum for a
// cluster), persistent messages, asynchronous publisher confirms, manual
// acknowledgements with prefetch, and a reconnect with backoff when the
// connection is lost (amqp091-go does not reconnect by itself).
//
// The queues have no delivery limit: a message returns to its queue each
// time a consumer dies holding it, however often. Only a consumer's
// DeadLetter moves it to the dead-letter queue, by publishing it there (with
// the reason in a header) and then acknowledging it.
package rabbitmq

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/seckill/seckill/bus"
)

// Queue types a Bus may declare.
const (
	Classic = "classic"
	Quorum  = "quorum"
)

// confirmTimeout bounds the wait for the broker's confirms of one publish;
// a broker that has gone silent is treated as gone.
const confirmTimeout = 10 * time.Second

// Bus is a bus.Bus on one RabbitMQ connection, opened on first use and
// reopened after a failure.
type Bus struct {
	urls      []string
	prefix    string
	queueType string

	mu      sync.Mutex
	conn    *amqp.Connection
	next    int                    // the url to try first
	idle    []*publisher           // confirm-mode channels ready for a Publish
	delays  map[time.Duration]bool // delay queues declared on conn
	known   map[time.Duration]bool // delay queues ever declared (for DeleteAll)
	closing bool
}

var _ bus.Bus = (*Bus)(nil)

// New returns a Bus whose exchanges and queues are named prefix.<queue>,
// declared as queueType (Classic or Quorum). url may list the nodes of a
// cluster, comma-separated: a connection goes to the first that answers,
// starting with the one that answered last. It connects on first use.
func New(url, prefix, queueType string) *Bus {
	var urls []string
	for _, u := range strings.Split(url, ",") {
		if u = strings.TrimSpace(u); u != "" {
			urls = append(urls, u)
		}
	}
	return &Bus{urls: urls, prefix: prefix, queueType: queueType}
}

// name is the exchange and queue of a bus queue.
func (b *Bus) name(queue string) (string, error) {
	switch queue {
	case bus.Orders, bus.Timeouts, bus.Funds, bus.Dead:
		return b.prefix + "." + queue, nil
	}
	return "", fmt.Errorf("%w: %q", bus.ErrUnknownQueue, queue)
}

// delayName is the queue where messages wait out a delay: a per-queue TTL
// (so no message blocks another), which fixes the delay in the name.
func (b *Bus) delayName(queue string, d time.Duration) string {
	return b.prefix + "." + queue + ".delay." + d.String()
}

// connection returns the live connection, dialling (and declaring the
// topology) if there is none.
func (b *Bus) connection() (*amqp.Connection, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closing {
		return nil, errors.New("rabbitmq: bus closed")
	}
	if b.conn != nil && !b.conn.IsClosed() {
		return b.conn, nil
	}
	b.idle, b.delays = nil, map[time.Duration]bool{}
	var conn *amqp.Connection
	var errs []error
	for i := range b.urls {
		u := b.urls[(b.next+i)%len(b.urls)]
		c, err := amqp.DialConfig(u, amqp.Config{Heartbeat: 5 * time.Second, Locale: "en_US", Dial: amqp.DefaultDial(3 * time.Second)})
		if err == nil {
			conn, b.next = c, (b.next+i)%len(b.urls)
			break
		}
		errs = append(errs, err)
	}
	if conn == nil {
		return nil, fmt.Errorf("rabbitmq: dial: %w", errors.Join(errs...))
	}
	if err := b.declare(conn); err != nil {
		conn.Close()
		return nil, err
	}
	b.conn = conn
	return conn, nil
}

// channel opens a channel, connecting first if needed.
func (b *Bus) channel() (*amqp.Channel, error) {
	conn, err := b.connection()
	if err != nil {
		return nil, err
	}
	ch, err := conn.Channel()
	if err != nil {
		conn.Close() // a connection that cannot open channels is of no use
		return nil, fmt.Errorf("rabbitmq: open channel: %w", err)
	}
	return ch, nil
}

func (b *Bus) queueArgs() amqp.Table {
	return amqp.Table{"x-queue-type": b.queueType}
}

// declare creates the exchanges and queues (idempotent). A queue declared
// before with other arguments (an older version's delivery limit, another
// queue type) makes RabbitMQ refuse: the error says so.
func (b *Bus) declare(conn *amqp.Connection) error {
	ch, err := conn.Channel()
	if err != nil {
		return fmt.Errorf("rabbitmq: declare: %w", err)
	}
	defer ch.Close()
	for _, q := range []string{bus.Orders, bus.Timeouts, bus.Funds, bus.Dead} {
		name, _ := b.name(q)
		if err := ch.ExchangeDeclare(name, amqp.ExchangeDirect, true, false, false, false, nil); err != nil {
			return fmt.Errorf("rabbitmq: declare exchange %s: %w", name, err)
		}
		if _, err := ch.QueueDeclare(name, true, false, false, false, b.queueArgs()); err != nil {
			return fmt.Errorf("rabbitmq: declare queue %s (declared before with other arguments? "+
				"drain and delete it, or use a new amqp_prefix): %w", name, err)
		}
		if err := ch.QueueBind(name, q, name, false, nil); err != nil {
			return fmt.Errorf("rabbitmq: bind queue %s: %w", name, err)
		}
	}
	return nil
}

// declareDelay declares the queue where messages for queue wait out d, then
// dead-letter into queue's exchange.
func (b *Bus) declareDelay(queue string, d time.Duration) error {
	b.mu.Lock()
	done := b.delays[d]
	conn := b.conn
	b.mu.Unlock()
	if done {
		return nil
	}
	if conn == nil {
		var err error
		if conn, err = b.connection(); err != nil {
			return err
		}
	}
	ch, err := conn.Channel()
	if err != nil {
		return fmt.Errorf("rabbitmq: declare delay: %w", err)
	}
	defer ch.Close()
	target, _ := b.name(queue)
	args := b.queueArgs()
	args["x-message-ttl"] = d.Milliseconds()
	args["x-dead-letter-exchange"] = target
	args["x-dead-letter-routing-key"] = queue
	if b.queueType == Quorum {
		// Dead-letter with confirms, so a message is not lost on its way
		// out of the delay queue (RabbitMQ 3.10+).
		args["x-dead-letter-strategy"] = "at-least-once"
		args["x-overflow"] = "reject-publish"
	}
	name := b.delayName(queue, d)
	if _, err := ch.QueueDeclare(name, true, false, false, false, args); err != nil {
		return fmt.Errorf("rabbitmq: declare delay queue %s: %w", name, err)
	}
	b.mu.Lock()
	if b.conn == conn {
		b.delays[d] = true
	}
	if b.known == nil {
		b.known = map[time.Duration]bool{}
	}
	b.known[d] = true
	b.mu.Unlock()
	return nil
}

// publisher is a confirm-mode channel and the returns it has seen.
type publisher struct {
	ch      *amqp.Channel
	returns chan amqp.Return
}

// takePublisher returns an idle publishing channel or opens one.
func (b *Bus) takePublisher() (*publisher, error) {
	b.mu.Lock()
	if n := len(b.idle); n > 0 && !b.idle[n-1].ch.IsClosed() {
		p := b.idle[n-1]
		b.idle = b.idle[:n-1]
		b.mu.Unlock()
		return p, nil
	}
	b.idle = nil
	b.mu.Unlock()
	ch, err := b.channel()
	if err != nil {
		return nil, err
	}
	if err := ch.Confirm(false); err != nil {
		ch.Close()
		return nil, fmt.Errorf("rabbitmq: confirm mode: %w", err)
	}
	// Returns arrive before the confirm of the same message, so once all
	// confirms of a publish are in, its returns are in this buffer.
	return &publisher{ch: ch, returns: ch.NotifyReturn(make(chan amqp.Return, 1024))}, nil
}

func (b *Bus) putPublisher(p *publisher, healthy bool) {
	if !healthy {
		p.ch.Close()
		return
	}
	b.mu.Lock()
	b.idle = append(b.idle, p)
	b.mu.Unlock()
}

// Publish sends msgs with confirms, all in flight before waiting.
func (b *Bus) Publish(ctx context.Context, queue string, msgs ...bus.Message) (int, error) {
	name, err := b.name(queue)
	if err != nil {
		return 0, err
	}
	return b.publish(ctx, name, queue, msgs)
}

// publish sends msgs to exchange with routing key key.
func (b *Bus) publish(ctx context.Context, exchange, key string, msgs []bus.Message) (int, error) {
	p, err := b.takePublisher()
	if err != nil {
		return 0, err
	}
	n, err := p.publish(ctx, exchange, key, msgs)
	b.putPublisher(p, err == nil)
	if errors.Is(err, errUnroutable) {
		b.redeclare()
	}
	return n, err
}

var errUnroutable = errors.New("rabbitmq: message unroutable (queue missing?)")

func (p *publisher) publish(ctx context.Context, exchange, key string, msgs []bus.Message) (int, error) {
	pending := make([]*amqp.DeferredConfirmation, 0, len(msgs))
	now := time.Now()
	for i, m := range msgs {
		dc, err := p.ch.PublishWithDeferredConfirmWithContext(ctx, exchange, key, true, false, amqp.Publishing{
			ContentType: "application/json", DeliveryMode: amqp.Persistent, MessageId: m.ID, Timestamp: now,
			Headers: table(m.Headers), Body: m.Body, CorrelationId: strconv.Itoa(i),
		})
		if err != nil {
			return 0, fmt.Errorf("rabbitmq: publish: %w", err)
		}
		pending = append(pending, dc)
	}
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), confirmTimeout)
	defer cancel()
	acked := 0
	var failed error
	for _, dc := range pending {
		ok, err := dc.WaitContext(wctx)
		if err != nil {
			failed = fmt.Errorf("rabbitmq: no confirm within %s: %w", confirmTimeout, err)
			break
		}
		if !ok {
			failed = errors.New("rabbitmq: broker refused (nack) a message")
			break
		}
		acked++
	}
	first := acked
	for drained := false; !drained; {
		select {
		case ret, ok := <-p.returns:
			if !ok { // the channel closed: no more returns will come
				drained = true
				break
			}
			if i, err := strconv.Atoi(ret.CorrelationId); err == nil && i < first {
				first = i
			}
		default:
			drained = true
		}
	}
	if first < acked {
		return first, errUnroutable
	}
	return acked, failed
}

// redeclare declares the topology again, for when a queue went missing
// under a live connection.
func (b *Bus) redeclare() {
	b.mu.Lock()
	conn := b.conn
	b.delays = map[time.Duration]bool{}
	b.mu.Unlock()
	if conn != nil && !conn.IsClosed() {
		if err := b.declare(conn); err != nil {
			slog.Warn("rabbitmq: redeclaring topology failed", "err", err)
		}
	}
}

// PublishDelayed sends msg through the delay queue of d.
func (b *Bus) PublishDelayed(ctx context.Context, queue string, msg bus.Message, d time.Duration) error {
	if _, err := b.name(queue); err != nil {
		return err
	}
	if err := b.declareDelay(queue, d); err != nil {
		return err
	}
	_, err := b.publish(ctx, "", b.delayName(queue, d), []bus.Message{msg})
	return err
}

// Subscribe consumes queue on a channel of its own.
func (b *Bus) Subscribe(ctx context.Context, queue string, prefetch int) (bus.Subscription, error) {
	name, err := b.name(queue)
	if err != nil {
		return nil, err
	}
	ch, err := b.channel()
	if err != nil {
		return nil, err
	}
	if err := ch.Qos(prefetch, 0, false); err != nil {
		ch.Close()
		return nil, fmt.Errorf("rabbitmq: qos: %w", err)
	}
	tag := queue + "-" + strconv.FormatUint(rand.Uint64()&0xffffffff, 36)
	ds, err := ch.ConsumeWithContext(ctx, name, tag, false, false, false, false, nil)
	if err != nil {
		ch.Close()
		return nil, fmt.Errorf("rabbitmq: consume %s: %w", name, err)
	}
	s := &subscription{b: b, queue: queue, ch: ch, tag: tag, out: make(chan bus.Delivery)}
	go s.run(ds)
	return s, nil
}

type subscription struct {
	b     *Bus
	queue string
	ch    *amqp.Channel
	tag   string
	out   chan bus.Delivery
	once  sync.Once
}

func (s *subscription) Deliveries() <-chan bus.Delivery { return s.out }

func (s *subscription) run(ds <-chan amqp.Delivery) {
	defer close(s.out)
	for d := range ds {
		s.out <- bus.Delivery{
			Message:     bus.Message{ID: d.MessageId, Body: d.Body, Headers: headers(d.Headers)},
			Redelivered: d.Redelivered,
			Acker:       &acker{s: s, d: d},
		}
	}
}

// Close cancels the consumer and closes the channel: the broker requeues
// what it held.
func (s *subscription) Close() error {
	var err error
	s.once.Do(func() {
		_ = s.ch.Cancel(s.tag, false)
		err = s.ch.Close()
		// Let run finish: it may be blocked handing out a delivery.
		go func() {
			for range s.out {
			}
		}()
	})
	if errors.Is(err, amqp.ErrClosed) {
		err = nil
	}
	return err
}

type acker struct {
	s *subscription
	d amqp.Delivery
}

func (a *acker) Ack() error     { return a.d.Ack(false) }
func (a *acker) Requeue() error { return a.d.Nack(false, true) }

// DeadLetter publishes the message to the dead-letter queue, then
// acknowledges it. If either step fails the message stays unacknowledged
// and comes back when the subscription ends, to be judged again.
func (a *acker) DeadLetter(reason string) error {
	m := bus.Message{ID: a.d.MessageId, Body: a.d.Body, Headers: headers(a.d.Headers)}
	m.Headers = bus.DeadHeaders(m, a.s.queue, reason)
	if _, err := a.s.b.Publish(context.Background(), bus.Dead, m); err != nil {
		return fmt.Errorf("rabbitmq: dead-letter %s: %w", m.ID, err)
	}
	return a.d.Ack(false)
}

// Depth counts the ready messages of queue.
func (b *Bus) Depth(ctx context.Context, queue string) (int, error) {
	name, err := b.name(queue)
	if err != nil {
		return 0, err
	}
	ch, err := b.channel()
	if err != nil {
		return 0, err
	}
	defer ch.Close()
	q, err := ch.QueueDeclarePassive(name, true, false, false, false, b.queueArgs())
	if err != nil {
		return 0, fmt.Errorf("rabbitmq: queue %s: %w", name, err)
	}
	return q.Messages, nil
}

// DeadLetters gets up to max dead letters without acknowledging them and
// closes the channel, which puts them back.
func (b *Bus) DeadLetters(ctx context.Context, max int) ([]bus.Message, error) {
	var out []bus.Message
	err := b.eachDead(ctx, max, func(d amqp.Delivery, m bus.Message) error {
		out = append(out, m)
		return nil
	})
	return out, err
}

// Replay republishes the dead letters keep accepts to their queues and
// acknowledges them; the others go back to the dead-letter queue.
func (b *Bus) Replay(ctx context.Context, keep func(bus.Message) bool) (int, error) {
	n := 0
	err := b.eachDead(ctx, -1, func(d amqp.Delivery, m bus.Message) error {
		q := m.Headers[bus.HeaderQueue]
		if _, err := b.name(q); err != nil || q == bus.Dead || !keep(m) {
			return nil
		}
		if _, err := b.Publish(ctx, q, bus.Revived(m)); err != nil {
			return err
		}
		n++
		return d.Ack(false)
	})
	return n, err
}

// eachDead gets dead letters one by one (up to max, or all for -1) on a
// channel of its own, holding them unacknowledged until it closes.
func (b *Bus) eachDead(ctx context.Context, max int, fn func(amqp.Delivery, bus.Message) error) error {
	name, _ := b.name(bus.Dead)
	ch, err := b.channel()
	if err != nil {
		return err
	}
	defer ch.Close()
	for i := 0; max < 0 || i < max; i++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		d, ok, err := ch.Get(name, false)
		if err != nil {
			return fmt.Errorf("rabbitmq: get from %s: %w", name, err)
		}
		if !ok {
			return nil
		}
		if err := fn(d, bus.Message{ID: d.MessageId, Body: d.Body, Headers: headers(d.Headers)}); err != nil {
			return err
		}
	}
	return nil
}

// Ping reports whether the broker answers, connecting if needed.
func (b *Bus) Ping(ctx context.Context) error {
	ch, err := b.channel()
	if err != nil {
		return err
	}
	return ch.Close()
}

// DeleteAll removes the bus's exchanges and queues, the timeouts' delay
// queues of the given delays included (tests and teardown).
func (b *Bus) DeleteAll(delays ...time.Duration) error {
	ch, err := b.channel()
	if err != nil {
		return err
	}
	defer ch.Close()
	b.mu.Lock()
	for d := range b.known {
		delays = append(delays, d)
	}
	b.mu.Unlock()
	var errs []error
	for _, q := range []string{bus.Orders, bus.Timeouts, bus.Funds, bus.Dead} {
		name, _ := b.name(q)
		if _, err := ch.QueueDelete(name, false, false, false); err != nil {
			errs = append(errs, err)
		}
		if err := ch.ExchangeDelete(name, false, false); err != nil {
			errs = append(errs, err)
		}
	}
	for _, d := range delays {
		if _, err := ch.QueueDelete(b.delayName(bus.Timeouts, d), false, false, false); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Close closes the connection; subscriptions end.
func (b *Bus) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closing = true
	if b.conn == nil {
		return nil
	}
	err := b.conn.Close()
	b.conn, b.idle = nil, nil
	if errors.Is(err, amqp.ErrClosed) {
		err = nil
	}
	return err
}

func table(h map[string]string) amqp.Table {
	if len(h) == 0 {
		return nil
	}
	t := make(amqp.Table, len(h))
	for k, v := range h {
		t[k] = v
	}
	return t
}

func headers(t amqp.Table) map[string]string {
	if len(t) == 0 {
		return nil
	}
	h := make(map[string]string, len(t))
	for k, v := range t {
		if s, ok := v.(string); ok {
			h[k] = s
		}
	}
	return h
}
