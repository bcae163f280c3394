package worker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/seckill/seckill"
	"github.com/seckill/seckill/bus"
	"github.com/seckill/seckill/funds"
	"github.com/seckill/seckill/orders"
)

// FundsLedger is the ledger as the funds consumer writes it: the
// transfers of a batch of movements in one transaction, a transfer
// already there kept once (orders.Store).
type FundsLedger interface {
	InsertMovements(ctx context.Context, ms []seckill.Movement, now time.Time) error
}

// Follower applies in Redis a movement's shares to its accounts other
// than its side, once the ledger holds it: exactly once per account,
// however often it is asked (funds.Store).
type Follower interface {
	Follow(ctx context.Context, ms ...seckill.Movement) error
}

// FundsConfig tunes a FundsConsumer.
type FundsConfig struct {
	// Batch is the most movements written in one transaction.
	Batch int
	// Flush is how long a partial batch waits for more messages.
	Flush time.Duration
	// Prefetch is how many unacknowledged messages the broker sends ahead.
	Prefetch int
	// Consumers is how many batches are written to the ledger at once.
	Consumers int
	// Grace is how long, after Run's context ends, the batch in hand may
	// still take; past it the batch is left unacknowledged and goes back
	// to the queue.
	Grace time.Duration
}

// FundsConsumer writes the movements of money the funds relay publishes
// into the ledger, one transaction per batch, then has their other
// accounts follow in Redis, and only then acknowledges their messages.
// Redelivered movements are kept once by the ledger and followed once by
// Redis; a message that cannot be decoded, or that the ledger refuses for
// good, is dead-lettered, and the rest flow on.
type FundsConsumer struct {
	consumer
	ledger   FundsLedger
	follower Follower
	cfg      FundsConfig
	metrics  *FundsMetrics
	now      func() time.Time
}

// NewFundsConsumer returns a FundsConsumer of b's funds queue writing to
// ledger and following with f, its series in m and those it shares with
// the other consumers in shared; Run starts it.
func NewFundsConsumer(b Subscriber, ledger FundsLedger, f Follower, m *FundsMetrics, shared *ConsumerMetrics, cfg FundsConfig) *FundsConsumer {
	if cfg.Consumers <= 0 {
		cfg.Consumers = 1
	}
	return &FundsConsumer{
		consumer: newConsumer(b, bus.Funds, cfg.Prefetch, cfg.Grace, m.deadLettered, shared),
		ledger:   ledger, follower: f, cfg: cfg, metrics: m, now: time.Now,
	}
}

// Run consumes until ctx is cancelled; then it stops taking messages,
// finishes and acknowledges the batches in hand (within Grace), and
// returns.
func (fc *FundsConsumer) Run(ctx context.Context) error {
	fc.run(ctx, fc.cfg.Consumers, batches(fc.cfg.Batch, fc.cfg.Flush, approxMovements, fc.process))
	return nil
}

// approxMovements guesses how many movements a message carries without
// decoding it: the strings of its JSON array, at least one.
func approxMovements(body []byte) int {
	return 1 + bytes.Count(body, []byte(`","`))
}

// process writes a batch: malformed messages are dead-lettered, the
// movements of the rest committed in one transaction, then followed, and
// only then acknowledged. An error leaves the batch unacknowledged: it
// comes back when the subscription ends.
func (fc *FundsConsumer) process(ctx context.Context, batch []bus.Delivery) error {
	good := make([]bus.Delivery, 0, len(batch))
	var ms []seckill.Movement
	ends := make([]int, 0, len(batch)) // good[i] carries ms[ends[i-1]:ends[i]]
	for _, d := range batch {
		mine, err := DecodeMovements(d.Body)
		if err != nil {
			if err := fc.deadLetter(d, err); err != nil {
				return err
			}
			continue
		}
		ms = append(ms, mine...)
		good = append(good, d)
		ends = append(ends, len(ms))
	}
	if len(ms) == 0 {
		return nil
	}
	start := time.Now()
	err := fc.write(ctx, ms)
	if orders.Refused(err) {
		// Some transfer is refused for good: write the messages one by
		// one, so the rest flow on.
		return fc.processOneByOne(ctx, good, ms, ends)
	}
	if err != nil {
		return err
	}
	committed := time.Now()
	fc.metrics.commit.Observe(committed.Sub(start).Seconds())
	return fc.settle(ctx, good, ms, committed)
}

func (fc *FundsConsumer) processOneByOne(ctx context.Context, ds []bus.Delivery, ms []seckill.Movement, ends []int) error {
	written, done, err := oneByOne(&fc.consumer, ctx, ds, ms, ends, fc.write)
	if err != nil || len(written) == 0 {
		return err
	}
	return fc.settle(ctx, done, written, time.Now())
}

// write inserts the movements' transfers in one transaction (each
// movement once: a batch may hold a duplicate), waiting out any failure
// that is not the ledger refusing the data: the messages are held
// meanwhile.
func (fc *FundsConsumer) write(ctx context.Context, ms []seckill.Movement) error {
	ms = distinct(ms)
	return fc.retry(ctx, "writing movements", func() error {
		return fc.ledger.InsertMovements(ctx, ms, fc.now())
	})
}

// settle has the other accounts of movements committed at committed
// follow, counts them, and acknowledges their messages. A follow that
// failed leaves the messages unacknowledged: redelivered, the ledger
// keeps each transfer once and each share is applied once.
func (fc *FundsConsumer) settle(ctx context.Context, ds []bus.Delivery, ms []seckill.Movement, committed time.Time) error {
	ms = distinct(ms)
	if err := fc.follower.Follow(ctx, ms...); err != nil {
		return err
	}
	fc.persisted(ms, committed)
	return ackAll(ds)
}

// persisted counts movements committed, and how long each took from its
// decision in Redis (its transfers' time) to its commit.
func (fc *FundsConsumer) persisted(ms []seckill.Movement, committed time.Time) {
	fc.metrics.persisted.Add(float64(len(ms)))
	for _, m := range ms {
		at := m.Transfers[0].At
		for _, t := range m.Transfers[1:] {
			if t.At.Before(at) {
				at = t.At
			}
		}
		fc.metrics.ledgerLag.Observe(max(0, committed.Sub(at).Seconds()))
	}
}

// distinct drops repeated movements (by id), keeping the first.
func distinct(ms []seckill.Movement) []seckill.Movement {
	seen := make(map[string]bool, len(ms))
	out := ms[:0:0]
	for _, m := range ms {
		if !seen[m.ID] {
			seen[m.ID] = true
			out = append(out, m)
		}
	}
	return out
}

// FundsMetrics are the funds consumer's Prometheus series.
type FundsMetrics struct {
	persisted    prometheus.Counter
	commit       prometheus.Histogram
	deadLettered prometheus.Counter // of the funds queue
	ledgerLag    prometheus.Histogram
}

// NewFundsMetrics registers the funds consumer's series on reg.
func NewFundsMetrics(reg prometheus.Registerer) *FundsMetrics {
	m := &FundsMetrics{
		persisted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "seckill_funds_movements_persisted_total", Help: "Movements of money committed to the ledger and followed in Redis (duplicates included).",
		}),
		commit: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "seckill_funds_commit_seconds", Help: "Time to write and commit one batch of movements of money.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14),
		}),
		deadLettered: deadLettered(bus.Funds),
		ledgerLag: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "seckill_funds_ledger_lag_seconds", Help: "Time from a movement of money's decision in Redis to its commit in the ledger.",
			Buckets: prometheus.ExponentialBuckets(0.01, 2, 15),
		}),
	}
	reg.MustRegister(m.persisted, m.commit, m.deadLettered, m.ledgerLag)
	return m
}

// DecodeMovements reads a message body of the funds queue strictly: a
// JSON array of movements, each as funds.EncodeMovement writes it. Any
// error makes the whole message malformed.
func DecodeMovements(body []byte) ([]seckill.Movement, error) {
	var encoded []string
	if err := strictJSON(body, &encoded); err != nil {
		return nil, fmt.Errorf("malformed movements: %w", err)
	}
	if len(encoded) == 0 {
		return nil, errors.New("malformed movements: empty array")
	}
	ms := make([]seckill.Movement, len(encoded))
	for i, s := range encoded {
		m, err := funds.DecodeMovement(s)
		if err != nil {
			return nil, err
		}
		ms[i] = m
	}
	return ms, nil
}
