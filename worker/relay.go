package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/seckill/seckill"
	"github.com/seckill/seckill/bus"
	"github.com/seckill/seckill/internal/rdb"
	"github.com/seckill/seckill/internal/tracing"
	"github.com/seckill/seckill/inventory"
)

// Outbox is the store of the sales' outbox streams (inventory.Store): a
// sale's stock parts, each with an outbox of its own, read, claimed and
// acknowledged through one consumer group, and when what a part holds is
// on its replicas.
type Outbox interface {
	Parts(ctx context.Context, sale int64) ([]inventory.Part, error)
	Durable(ctx context.Context, p inventory.Part) error
	OutboxOldest(ctx context.Context, p inventory.Part) (time.Time, bool, error)
	ReadOutbox(ctx context.Context, p inventory.Part, consumer string, what rdb.OutboxRead, n int, block time.Duration) ([]inventory.OutboxEntry, error)
	ClaimOutbox(ctx context.Context, p inventory.Part, consumer string, minIdle time.Duration, n int) ([]inventory.OutboxEntry, error)
	AckOutbox(ctx context.Context, p inventory.Part, ids []string) error
	Beater
}

// SaleLister lists the sales that end after endedAfter: those whose
// outbox may still hold events, or whose Redis state is still kept
// (orders.Store).
type SaleLister interface {
	SaleIDs(ctx context.Context, endedAfter time.Time) ([]int64, error)
}

// Publisher is the bus as the relay needs it: publishing with confirms.
type Publisher interface {
	Publish(ctx context.Context, queue string, msgs ...bus.Message) (n int, err error)
}

// RelayConfig tunes a Relay.
type RelayConfig struct {
	// Batch is the most outbox entries (one per buy call, holding its
	// orders) read and published before waiting for confirms.
	Batch int
	// Pack is how many events of one sale a message holds: whole entries
	// are added until it has Pack or more. Packing cuts the broker's
	// per-message work (routing, quorum log, confirm, ack) by this factor;
	// a poison entry always travels alone.
	Pack int
	// ClaimIdle is how long an entry may sit unconfirmed with another relay
	// before this one takes it over (that relay is presumed dead).
	ClaimIdle time.Duration
	// Linger is how long a read smaller than Batch waits for more entries
	// before it is published: fewer, fuller messages; 0: none.
	Linger time.Duration
	// Lookback is how long after its end a sale's outbox is still read.
	Lookback time.Duration
	// Poll is how often the list of live sales is refreshed.
	Poll time.Duration
}

// Relay publishes the order events of every live sale's outbox stream to
// the bus and deletes an event from the stream only after the broker
// confirmed it. Events are read through a consumer group, so several
// relays (one per serve process) share the work; an event left pending by
// a relay that died is claimed by a live one after ClaimIdle. Delivery is
// at least once; the order consumer absorbs duplicates.
type Relay struct {
	outbox   Outbox
	sales    SaleLister // the sales whose outbox may still hold events
	bus      Publisher
	cfg      RelayConfig
	metrics  *RelayMetrics
	consumer string
}

// NewRelay returns a Relay; Run starts it.
func NewRelay(outbox Outbox, sales SaleLister, b Publisher, m *RelayMetrics, cfg RelayConfig) *Relay {
	host, _ := os.Hostname()
	if cfg.Poll <= 0 {
		cfg.Poll = time.Second
	}
	if cfg.Pack <= 0 {
		cfg.Pack = 1
	}
	return &Relay{
		outbox: outbox, sales: sales, bus: b, cfg: cfg, metrics: m,
		consumer: fmt.Sprintf("relay-%s-%d-%s", host, os.Getpid(), strconv.FormatUint(rand.Uint64()&0xffffffff, 36)),
	}
}

// Run relays until ctx is cancelled, then publishes what the outboxes
// still hold (within a few seconds) and returns.
func (r *Relay) Run(ctx context.Context) error {
	defer beat(ctx, r.outbox, r.consumer)()
	var wg sync.WaitGroup
	running := map[inventory.Part]context.CancelFunc{}
	defer func() {
		for _, stop := range running {
			stop()
		}
		wg.Wait()
	}()
	tick := time.NewTicker(r.cfg.Poll)
	defer tick.Stop()
	var measured time.Time
	for {
		live, err := r.liveParts(ctx)
		if err != nil && ctx.Err() == nil {
			slog.Warn("relay: listing live sales failed", "err", err)
		}
		if err == nil && time.Since(measured) >= outboxAgeEvery {
			measured = time.Now()
			r.measureOutbox(ctx, live)
		}
		for p := range live {
			if _, ok := running[p]; !ok {
				sctx, stop := context.WithCancel(ctx)
				running[p] = stop
				wg.Go(func() { r.relayPart(sctx, p) })
			}
		}
		for p, stop := range running {
			if !live[p] && err == nil {
				stop()
				delete(running, p)
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// outboxAgeEvery is how often the relay reads the age of the oldest
// unrelayed event (an XRANGE of one entry per live part).
const outboxAgeEvery = 5 * time.Second

// measureOutbox sets the age of the oldest event waiting in the live
// parts' outboxes: an entry leaves its outbox only once RabbitMQ confirmed
// it, and its id is the time it was appended.
func (r *Relay) measureOutbox(ctx context.Context, live map[inventory.Part]bool) {
	var oldest time.Time
	for p := range live {
		at, ok, err := r.outbox.OutboxOldest(ctx, p)
		if err == nil && ok && (oldest.IsZero() || at.Before(oldest)) {
			oldest = at
		}
	}
	age := 0.0
	if !oldest.IsZero() {
		age = max(0, time.Since(oldest).Seconds())
	}
	r.metrics.outboxAge.Set(age)
}

// liveParts lists the parts of every sale whose outbox may hold events.
func (r *Relay) liveParts(ctx context.Context) (map[inventory.Part]bool, error) {
	ids, err := r.sales.SaleIDs(ctx, time.Now().Add(-r.cfg.Lookback))
	live := map[inventory.Part]bool{}
	for _, id := range ids {
		parts, perr := r.outbox.Parts(ctx, id)
		if errors.Is(perr, seckill.ErrSaleNotFound) {
			parts, perr = []inventory.Part{inventory.First(id)}, nil
		}
		if perr != nil {
			err = errors.Join(err, perr)
			continue
		}
		for _, p := range parts {
			live[p] = true
		}
	}
	return live, err
}

// relayPart moves one part's outbox to the broker until ctx ends, then
// drains what is left.
func (r *Relay) relayPart(ctx context.Context, p inventory.Part) {
	s := &saleRelay{Relay: r, part: p, sale: p.Sale, ownPending: true}
	bo := newBackoff()
	for ctx.Err() == nil {
		if err := s.step(ctx, true); err != nil {
			if ctx.Err() != nil {
				break
			}
			slog.Warn("relay: retrying", "sale", p.Sale, "part", p.Tag, "err", err, "in", bo.peek())
			s.ownPending = true
			_ = bo.wait(ctx)
			continue
		}
		bo.reset()
	}
	// Shutdown: the HTTP server has stopped taking buys; publish what the
	// outbox still holds, with a deadline of its own.
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	s.ownPending = true
	for dctx.Err() == nil {
		n, err := s.drainStep(dctx, false)
		if err != nil {
			slog.Warn("relay: final drain incomplete; another relay will claim the rest", "sale", p.Sale, "err", err)
			return
		}
		if n == 0 {
			return
		}
	}
}

type saleRelay struct {
	*Relay
	part       inventory.Part
	sale       int64
	ownPending bool
	lastClaim  time.Time
}

// linger adds to a read the entries that arrive within Linger, until it
// has Batch.
func (s *saleRelay) linger(ctx context.Context, entries []inventory.OutboxEntry) []inventory.OutboxEntry {
	deadline := time.Now().Add(s.cfg.Linger)
	for len(entries) < s.cfg.Batch && ctx.Err() == nil {
		left := time.Until(deadline)
		if left <= 0 {
			break
		}
		sleep(ctx, min(left, time.Millisecond))
		more, err := s.outbox.ReadOutbox(ctx, s.part, s.consumer, rdb.OutboxNew, s.cfg.Batch, -1)
		if err != nil {
			// A reply lost may hold entries now pending here: the next
			// read takes this relay's pending ones first.
			s.ownPending = true
			break
		}
		entries = append(entries, more...)
	}
	return entries
}

// step reads one batch (blocking up to a second when block is set) and
// publishes it.
func (s *saleRelay) step(ctx context.Context, block bool) error {
	_, err := s.drainStep(ctx, block)
	return err
}

// drainStep reads one batch and, once the replicas have it (Durable: an
// entry a failover could take back must not reach the ledger), publishes
// it and returns how many entries it had.
func (s *saleRelay) drainStep(ctx context.Context, block bool) (int, error) {
	entries, err := s.read(ctx, block)
	if err != nil || len(entries) == 0 {
		return 0, err
	}
	if block && s.cfg.Linger > 0 {
		entries = s.linger(ctx, entries)
	}
	if err := s.outbox.Durable(ctx, s.part); err != nil {
		return 0, err
	}
	return len(entries), s.publish(ctx, entries)
}

// read returns the next events to publish: first this relay's own
// unconfirmed ones (after a failure), then events of dead relays, then new
// ones.
func (s *saleRelay) read(ctx context.Context, block bool) ([]inventory.OutboxEntry, error) {
	if s.ownPending {
		msgs, err := s.outbox.ReadOutbox(ctx, s.part, s.consumer, rdb.OutboxPending, s.cfg.Batch, 0)
		if err != nil || len(msgs) > 0 {
			return msgs, err
		}
		s.ownPending = false
	}
	if time.Since(s.lastClaim) >= min(s.cfg.ClaimIdle/2, relayBeat) {
		s.lastClaim = time.Now()
		msgs, err := s.outbox.ClaimOutbox(ctx, s.part, s.consumer, s.cfg.ClaimIdle, s.cfg.Batch)
		if err != nil {
			return nil, err
		}
		if len(msgs) > 0 {
			s.metrics.claimed.Add(float64(len(msgs)))
			return msgs, nil
		}
	}
	wait := time.Duration(-1)
	if block {
		wait = time.Second
	}
	return s.outbox.ReadOutbox(ctx, s.part, s.consumer, rdb.OutboxNew, s.cfg.Batch, wait)
}

// publish sends the events with publisher confirms, many in flight, and
// removes from the stream those the broker confirmed.
func (s *saleRelay) publish(ctx context.Context, entries []inventory.OutboxEntry) error {
	start := time.Now()
	packed := pack(entries, s.cfg.Pack)
	msgs := make([]bus.Message, len(packed))
	for i, m := range packed {
		msgs[i] = bus.Message{ID: m.ids[0], Body: m.body}
		if len(m.traces) > 0 && tracing.Enabled() {
			// One span a message, continuing its buy calls' traces; the
			// worker continues it from the message's header.
			sctx, span := tracing.StartFrom(ctx, "relay publish", trace.SpanKindProducer, m.traces,
				attribute.Int("seckill.events", m.events))
			msgs[i].Headers = map[string]string{tracing.HeaderTraceparent: tracing.Traceparent(sctx)}
			defer span.End()
		}
	}
	n, failed := s.bus.Publish(ctx, bus.Orders, msgs...)
	var confirmed []string
	events := 0
	for _, m := range packed[:n] {
		confirmed = append(confirmed, m.ids...)
		events += m.events
	}
	if len(confirmed) > 0 {
		if err := s.outbox.AckOutbox(context.WithoutCancel(ctx), s.part, confirmed); err != nil {
			return err
		}
		s.metrics.published.Add(float64(events))
		s.metrics.messages.Add(float64(n))
		s.metrics.batch.Observe(time.Since(start).Seconds())
	}
	return failed
}

// RelayMetrics are the relay's Prometheus series.
type RelayMetrics struct {
	published prometheus.Counter
	claimed   prometheus.Counter
	batch     prometheus.Histogram
	messages  prometheus.Counter // of the orders queue
	// What the alerts watch (configs/prometheus/alerts.yml).
	outboxAge prometheus.Gauge
}

// NewRelayMetrics registers the relay's series on reg.
func NewRelayMetrics(reg prometheus.Registerer) *RelayMetrics {
	m := &RelayMetrics{
		published: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "seckill_relay_published_total", Help: "Order events confirmed by RabbitMQ and removed from the outbox.",
		}),
		claimed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "seckill_relay_claimed_total", Help: "Outbox events taken over from a relay that stopped confirming them.",
		}),
		batch: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "seckill_relay_batch_seconds", Help: "Time to publish one outbox batch and get its confirms.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14),
		}),
		messages: messagesPublished(bus.Orders),
		outboxAge: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "seckill_outbox_oldest_age_seconds", Help: "Age of the oldest order event not yet relayed to RabbitMQ, over the live sales' outboxes (0: none waits); read by each relay every few seconds.",
		}),
	}
	reg.MustRegister(m.published, m.claimed, m.batch, m.messages, m.outboxAge)
	return m
}

// message is one publication: the bodies of consecutive outbox entries
// and their stream ids (the first one doubles as the message id).
type message struct {
	body   []byte
	ids    []string
	events int
	// traces are the traceparents of the buy calls whose orders it holds.
	traces []string
}

// pack turns outbox entries into messages of about size events each, as
// a JSON array: a message holds whole entries (an entry is one buy call's
// orders) and is closed once it has size events or more. An entry that
// does not parse is sent alone, as it is, so the worker dead-letters it
// without holding up its neighbours.
func pack(entries []inventory.OutboxEntry, size int) []message {
	var out []message
	var evs []seckill.Event
	var ids, traces []string
	flush := func() {
		if len(evs) > 0 {
			body, _ := json.Marshal(evs)
			out = append(out, message{body: body, ids: ids, events: len(evs), traces: traces})
			evs, ids, traces = nil, nil, nil
		}
	}
	for _, e := range entries {
		es, err := e.Events()
		if err != nil {
			flush()
			body, err := json.Marshal(e.Values)
			if err != nil {
				body = []byte(`{}`)
			}
			out = append(out, message{body: body, ids: []string{e.ID}, events: 1})
			continue
		}
		evs = append(evs, es...)
		ids = append(ids, e.ID)
		if tp := e.Trace(); tp != "" {
			traces = append(traces, tp)
		}
		if len(evs) >= size {
			flush()
		}
	}
	flush()
	return out
}
