// Package worker moves accepted orders and movements of money from Redis
// to the ledger and keeps the two in agreement. It holds six jobs, each a
// type of its own, with the small interfaces it needs declared beside it
// and Prometheus series of its own (RelayMetrics, OrderMetrics,
// TimeoutMetrics, FundsRelayMetrics, FundsMetrics, ReconcilerMetrics):
//
//   - Relay (relay.go) publishes the events of the sales' outbox streams
//     in Redis to the bus with publisher confirms, and removes an event
//     from its stream only once the broker confirmed it.
//   - OrderConsumer (orders.go) writes the orders of the bus's orders
//     queue into the ledger, one transaction per batch, and schedules
//     their payment timeouts.
//   - TimeoutConsumer (timeouts.go) cancels the orders still unpaid when
//     their payment timeout arrives, and returns their units to Redis
//     once.
//   - FundsRelay (fundsrelay.go) publishes the movements of money of the
//     funds groups' outbox streams to the bus's funds queue with publisher
//     confirms, removing an entry only once the broker confirmed it. It
//     reads a group when this process appended to it, and sweeps every
//     group each second (one pipelined XLEN) for the rest: no blocking
//     read per group.
//   - FundsConsumer (funds.go) writes the transfers of the funds queue's
//     movements into the ledger, one transaction per batch, then has
//     their other accounts follow in Redis (exactly once each), and only
//     then acknowledges.
//   - Reconciler (reconcile.go) checks Redis against the ledger, sale by
//     sale, and repairs what drifted.
//
// The consumers share what every bus consumer needs (consumer.go):
// subscribing with a prefetch, subscribing again with backoff after a
// failure, collecting batches, a grace period for the work in hand at
// shutdown, ledger retries, and dead-lettering a message judged
// unprocessable, never one whose consumer died; their shared series
// (ConsumerMetrics) count the retries and watch the dead-letter queue.
// The package speaks to the message broker through package bus: RabbitMQ
// in production, an in-process bus when embedded.
package worker
