// Package bus is the seam between Seckill's order pipeline and its message
// broker: the interface the outbox relay and the worker need, the types it
// speaks, and (in bustest) the behaviour every implementation must show.
// RabbitMQ (package rabbitmq) is the production implementation; an
// in-process bus (package memory) serves the embedded mode.
//
// Delivery is at least once: a consumer that dies, or a subscription that
// ends, gives its unacknowledged messages back to the queue, however often
// that happens. Only a consumer's explicit DeadLetter moves a message to the
// dead-letter queue, so a crash loop never turns valid messages into dead
// letters.
package bus

import (
	"context"
	"errors"
	"time"
)

// The queues of the order and funds pipelines.
const (
	// Orders carries accepted order events from the relay to the worker.
	Orders = "orders"
	// Timeouts carries the payment windows that ended, after their delay.
	Timeouts = "timeouts"
	// Funds carries the movements of money from the funds relay to the
	// funds consumer.
	Funds = "funds"
	// Dead holds the messages a consumer judged unprocessable.
	Dead = "dead"
)

// Headers set on a dead letter.
const (
	// HeaderReason says why the consumer gave the message up.
	HeaderReason = "x-seckill-reason"
	// HeaderQueue names the queue the message came from (and goes back to
	// on replay).
	HeaderQueue = "x-seckill-queue"
)

// ErrUnknownQueue is returned for a queue name that is none of the above.
var ErrUnknownQueue = errors.New("bus: unknown queue")

// Message is one message: an id (for logs and the broker's views), a body
// and string headers.
type Message struct {
	ID      string
	Body    []byte
	Headers map[string]string
}

// Bus is a message broker as the pipeline uses it.
type Bus interface {
	// Publish sends msgs to queue and returns once the broker has taken
	// responsibility for them (publisher confirms, many in flight). The
	// first n are safe; after an error the rest may or may not have
	// arrived, and are published again by the caller (consumers absorb
	// duplicates).
	Publish(ctx context.Context, queue string, msgs ...Message) (n int, err error)
	// PublishDelayed sends msg to queue once delay has passed, with the
	// same guarantee as Publish once it returns nil.
	PublishDelayed(ctx context.Context, queue string, msg Message, delay time.Duration) error
	// Subscribe consumes queue, with at most prefetch deliveries
	// unacknowledged at a time.
	Subscribe(ctx context.Context, queue string, prefetch int) (Subscription, error)
	// Depth counts the messages of queue that wait for a consumer.
	Depth(ctx context.Context, queue string) (int, error)
	// DeadLetters lists up to max messages of the dead-letter queue, oldest
	// first, leaving them there.
	DeadLetters(ctx context.Context, max int) ([]Message, error)
	// Replay moves the dead letters that keep accepts back to the queue
	// they came from, and returns how many it moved.
	Replay(ctx context.Context, keep func(Message) bool) (int, error)
	// Ping reports whether the broker answers.
	Ping(ctx context.Context) error
	// Close releases the bus; subscriptions end.
	Close() error
}

// Subscription is a live consumer of one queue.
type Subscription interface {
	// Deliveries yields the queue's messages; it is closed when the
	// subscription ends (Close, or the broker went away: subscribe again).
	Deliveries() <-chan Delivery
	// Close stops the deliveries; every one not acknowledged goes back to
	// the queue.
	Close() error
}

// Delivery is a message handed to a consumer, to be settled exactly once
// with one of Acker's methods.
type Delivery struct {
	Message
	// Redelivered is set when the message was handed out before, to a
	// consumer that did not settle it.
	Redelivered bool
	Acker
}

// Acker settles a delivery.
type Acker interface {
	// Ack removes the message: it was processed.
	Ack() error
	// Requeue gives the message back to its queue, for a later delivery.
	Requeue() error
	// DeadLetter moves the message to the dead-letter queue with reason
	// in its HeaderReason header, and the queue it came from in HeaderQueue.
	DeadLetter(reason string) error
}

// DeadHeaders returns a dead letter's headers: the message's own, plus why
// and from where.
func DeadHeaders(m Message, queue, reason string) map[string]string {
	h := make(map[string]string, len(m.Headers)+2)
	for k, v := range m.Headers {
		h[k] = v
	}
	h[HeaderReason] = reason
	h[HeaderQueue] = queue
	return h
}

// Revived returns a dead letter as it was before it died: without the
// headers DeadHeaders added.
func Revived(m Message) Message {
	h := make(map[string]string, len(m.Headers))
	for k, v := range m.Headers {
		if k != HeaderReason && k != HeaderQueue {
			h[k] = v
		}
	}
	if len(h) == 0 {
		h = nil
	}
	return Message{ID: m.ID, Body: m.Body, Headers: h}
}
