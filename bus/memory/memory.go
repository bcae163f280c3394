// Package memory is an in-process message bus for the embedded mode: the
// queues of package bus held in memory, with the same at-least-once rules
// as RabbitMQ (prefetch, acknowledgements, redelivery of what a closed
// subscription held, explicit dead-lettering, delayed publishing). It is
// not durable: what it holds is gone with the process, which is why the
// embedded mode drains it at shutdown and re-arms payment timeouts from the
// ledger at start.
package memory

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/seckill/seckill/bus"
)

// ErrClosed is returned once the bus is closed.
var ErrClosed = errors.New("memory bus: closed")

// Bus is an in-process bus.Bus.
type Bus struct {
	mu     sync.Mutex
	wake   *sync.Cond // queues gained messages, acks freed prefetch, or something closed
	queues map[string][]*entry
	timers map[*time.Timer]bool
	subs   map[*subscription]bool
	closed bool
}

var _ bus.Bus = (*Bus)(nil)

// entry is a message in a queue or in a consumer's hands.
type entry struct {
	msg         bus.Message
	redelivered bool
}

// New returns an empty bus.
func New() *Bus {
	b := &Bus{
		queues: map[string][]*entry{bus.Orders: nil, bus.Timeouts: nil, bus.Funds: nil, bus.Dead: nil},
		timers: map[*time.Timer]bool{},
		subs:   map[*subscription]bool{},
	}
	b.wake = sync.NewCond(&b.mu)
	return b
}

func (b *Bus) check(queue string) error {
	if b.closed {
		return ErrClosed
	}
	if _, ok := b.queues[queue]; !ok {
		return fmt.Errorf("%w: %q", bus.ErrUnknownQueue, queue)
	}
	return nil
}

// Publish appends msgs to queue.
func (b *Bus) Publish(_ context.Context, queue string, msgs ...bus.Message) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.check(queue); err != nil {
		return 0, err
	}
	for _, m := range msgs {
		b.queues[queue] = append(b.queues[queue], &entry{msg: m})
	}
	b.wake.Broadcast()
	return len(msgs), nil
}

// PublishDelayed appends msg to queue once delay has passed (unless the
// bus is closed first).
func (b *Bus) PublishDelayed(_ context.Context, queue string, msg bus.Message, delay time.Duration) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.check(queue); err != nil {
		return err
	}
	var t *time.Timer
	t = time.AfterFunc(delay, func() {
		b.mu.Lock()
		delete(b.timers, t)
		b.mu.Unlock()
		_, _ = b.Publish(context.Background(), queue, msg)
	})
	b.timers[t] = true
	return nil
}

// Depth counts the messages of queue that wait for a consumer.
func (b *Bus) Depth(_ context.Context, queue string) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.check(queue); err != nil {
		return 0, err
	}
	return len(b.queues[queue]), nil
}

// DeadLetters lists up to max dead letters.
func (b *Bus) DeadLetters(_ context.Context, max int) ([]bus.Message, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, ErrClosed
	}
	dead := b.queues[bus.Dead]
	out := make([]bus.Message, 0, min(max, len(dead)))
	for _, e := range dead[:min(max, len(dead))] {
		out = append(out, e.msg)
	}
	return out, nil
}

// Replay moves the dead letters keep accepts back to their queues.
func (b *Bus) Replay(_ context.Context, keep func(bus.Message) bool) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return 0, ErrClosed
	}
	var stay []*entry
	n := 0
	for _, e := range b.queues[bus.Dead] {
		q := e.msg.Headers[bus.HeaderQueue]
		if _, known := b.queues[q]; !known || q == bus.Dead || !keep(e.msg) {
			stay = append(stay, e)
			continue
		}
		b.queues[q] = append(b.queues[q], &entry{msg: bus.Revived(e.msg)})
		n++
	}
	b.queues[bus.Dead] = stay
	b.wake.Broadcast()
	return n, nil
}

// Ping answers while the bus is open.
func (b *Bus) Ping(context.Context) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return ErrClosed
	}
	return nil
}

// Close stops the delayed messages and ends every subscription.
func (b *Bus) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	for t := range b.timers {
		t.Stop()
	}
	clear(b.timers)
	for s := range b.subs {
		if !s.closed {
			s.closed = true
			close(s.done)
		}
	}
	b.wake.Broadcast()
	return nil
}

// Subscribe consumes queue.
func (b *Bus) Subscribe(_ context.Context, queue string, prefetch int) (bus.Subscription, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.check(queue); err != nil {
		return nil, err
	}
	s := &subscription{b: b, queue: queue, prefetch: max(1, prefetch), out: make(chan bus.Delivery),
		done: make(chan struct{}), held: map[*entry]bool{}}
	b.subs[s] = true
	go s.run()
	return s, nil
}

type subscription struct {
	b        *Bus
	queue    string
	prefetch int
	out      chan bus.Delivery
	done     chan struct{} // closed by Close

	// Guarded by b.mu.
	held   map[*entry]bool // handed out, not settled
	closed bool
}

func (s *subscription) Deliveries() <-chan bus.Delivery { return s.out }

// run hands out messages while fewer than prefetch are held.
func (s *subscription) run() {
	b := s.b
	defer close(s.out)
	for {
		b.mu.Lock()
		for !s.closed && !b.closed && (len(b.queues[s.queue]) == 0 || len(s.held) >= s.prefetch) {
			b.wake.Wait()
		}
		if s.closed || b.closed {
			b.mu.Unlock()
			return
		}
		e := b.queues[s.queue][0]
		b.queues[s.queue] = b.queues[s.queue][1:]
		s.held[e] = true // before the hand-over: the consumer may settle it at once
		d := bus.Delivery{Message: e.msg, Redelivered: e.redelivered, Acker: &acker{s: s, e: e}}
		b.mu.Unlock()

		select {
		case s.out <- d:
		case <-s.done:
			return // Close gave back what was held, e too
		}
	}
}

// Close ends the subscription; the messages it held go back to the front
// of the queue, marked redelivered.
func (s *subscription) Close() error {
	b := s.b
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.subs, s)
	if s.closed {
		return nil
	}
	s.closed = true
	close(s.done)
	var back []*entry
	for e := range s.held {
		e.redelivered = true
		back = append(back, e)
	}
	clear(s.held)
	b.queues[s.queue] = append(back, b.queues[s.queue]...)
	b.wake.Broadcast()
	return nil
}

// acker settles one delivery.
type acker struct {
	s *subscription
	e *entry
}

// take removes the delivery from the held set; false if it was settled
// already or its subscription closed (the message went back then).
func (a *acker) take() (bool, error) {
	if !a.s.held[a.e] {
		if a.s.closed {
			return false, fmt.Errorf("memory bus: subscription closed; the message was requeued")
		}
		return false, errors.New("memory bus: delivery settled twice")
	}
	delete(a.s.held, a.e)
	a.s.b.wake.Broadcast()
	return true, nil
}

func (a *acker) Ack() error {
	a.s.b.mu.Lock()
	defer a.s.b.mu.Unlock()
	_, err := a.take()
	return err
}

func (a *acker) Requeue() error {
	b := a.s.b
	b.mu.Lock()
	defer b.mu.Unlock()
	ok, err := a.take()
	if ok {
		a.e.redelivered = true
		b.queues[a.s.queue] = append([]*entry{a.e}, b.queues[a.s.queue]...)
	}
	return err
}

func (a *acker) DeadLetter(reason string) error {
	b := a.s.b
	b.mu.Lock()
	defer b.mu.Unlock()
	ok, err := a.take()
	if ok {
		m := a.e.msg
		m.Headers = bus.DeadHeaders(m, a.s.queue, reason)
		b.queues[bus.Dead] = append(b.queues[bus.Dead], &entry{msg: m})
	}
	return err
}
