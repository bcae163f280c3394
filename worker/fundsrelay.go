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

	"github.com/seckill/seckill/bus"
	"github.com/seckill/seckill/funds"
	"github.com/seckill/seckill/internal/rdb"
)

// FundsOutbox is the funds store's outboxes as the funds relay needs them
// (funds.Store): a stream per group of accounts, read, claimed and
// acknowledged through one consumer group; which groups this process
// appended to, as it happens; which groups hold entries at all; and when
// what a group holds is on its replicas.
type FundsOutbox interface {
	Appended() <-chan int
	Pending(ctx context.Context) ([]int, error)
	Durable(ctx context.Context, g int) error
	OutboxOldest(ctx context.Context, g int) (time.Time, bool, error)
	ReadOutbox(ctx context.Context, g int, consumer string, what rdb.OutboxRead, n int, block time.Duration) ([]funds.Entry, error)
	ClaimOutbox(ctx context.Context, g int, consumer string, minIdle time.Duration, n int) ([]funds.Entry, error)
	AckOutbox(ctx context.Context, g int, ids []string) error
	Beater
}

// FundsRelayConfig tunes a FundsRelay.
type FundsRelayConfig struct {
	// Batch is about the most movements read, over all groups, before
	// they are published and their confirms awaited.
	Batch int
	// Pack is how many movements a message holds (a poison entry always
	// travels alone).
	Pack int
	// ClaimIdle is how long an entry may sit unconfirmed with another
	// relay before this one takes it over (that relay is presumed dead).
	ClaimIdle time.Duration
	// Linger is how long the relay collects the notices of appends after
	// the first one before it reads their groups: several movements in one
	// message. 0: none.
	Linger time.Duration
	// Sweep is how often every group's outbox is looked at, for entries no
	// notice announced: another process's, or left by a relay that died.
	Sweep time.Duration
}

// fundsReaders is how many groups a relay reads at once.
const fundsReaders = 8

// FundsRelay publishes the movements of money in the funds groups'
// outbox streams to the bus's funds queue, and deletes an entry from its
// stream only after the broker confirmed it. There are many groups, so it
// holds no blocking read on any: it reads a group as soon as this
// process's store says it appended to it (coalescing the notices that
// arrive within Linger), and every Sweep it looks at the length of every
// group's outbox (one pipelined round trip) for entries no notice
// announced, taking over those a dead relay left unconfirmed for
// ClaimIdle. Entries are read through a consumer group, so several relays
// share the work. Delivery is at least once; the funds consumer absorbs
// duplicates.
type FundsRelay struct {
	outbox   FundsOutbox
	bus      Publisher
	cfg      FundsRelayConfig
	metrics  *FundsRelayMetrics
	consumer string

	// Only Run's goroutine changes these.
	due   map[int]bool // groups to read in the next round
	own   map[int]bool // groups of which this relay may hold entries read and not yet confirmed
	claim map[int]bool // groups to look in for entries of dead relays
}

// NewFundsRelay returns a FundsRelay; Run starts it.
func NewFundsRelay(outbox FundsOutbox, b Publisher, m *FundsRelayMetrics, cfg FundsRelayConfig) *FundsRelay {
	host, _ := os.Hostname()
	if cfg.Batch <= 0 {
		cfg.Batch = 500
	}
	if cfg.Pack <= 0 {
		cfg.Pack = 1
	}
	if cfg.Sweep <= 0 {
		cfg.Sweep = time.Second
	}
	return &FundsRelay{
		outbox: outbox, bus: b, cfg: cfg, metrics: m,
		consumer: fmt.Sprintf("funds-relay-%s-%d-%s", host, os.Getpid(), strconv.FormatUint(rand.Uint64()&0xffffffff, 36)),
		due:      map[int]bool{}, own: map[int]bool{}, claim: map[int]bool{},
	}
}

// Run relays until ctx is cancelled, then publishes what the outboxes
// still hold (within a few seconds) and returns.
func (r *FundsRelay) Run(ctx context.Context) error {
	defer beat(ctx, r.outbox, r.consumer)()
	sweep := time.NewTicker(r.cfg.Sweep)
	defer sweep.Stop()
	bo := newBackoff()
	var measured time.Time
	for {
		if len(r.due) == 0 {
			select {
			case <-ctx.Done():
				r.drain(ctx)
				return nil
			case g := <-r.outbox.Appended():
				r.due[g] = true
				r.linger(ctx)
			case <-sweep.C:
				r.sweep(ctx, &measured)
			}
		} else {
			// Groups carried over from the last round: read them now, with
			// the notices and the sweep that came meanwhile.
			select {
			case <-ctx.Done():
				r.drain(ctx)
				return nil
			case <-sweep.C:
				r.sweep(ctx, &measured)
			default:
			}
			r.take()
		}
		if _, err := r.round(ctx); err != nil {
			if ctx.Err() != nil {
				continue
			}
			slog.Warn("funds relay: retrying", "groups", len(r.due), "err", err, "in", bo.peek())
			_ = bo.wait(ctx)
			continue
		}
		bo.reset()
	}
}

// take adds the groups of the notices already there, without waiting.
func (r *FundsRelay) take() {
	for {
		select {
		case g := <-r.outbox.Appended():
			r.due[g] = true
		default:
			return
		}
	}
}

// linger adds the groups of the notices that arrive within Linger of the
// first, until as many notices as Batch came.
func (r *FundsRelay) linger(ctx context.Context) {
	if r.cfg.Linger <= 0 {
		r.take()
		return
	}
	t := time.NewTimer(r.cfg.Linger)
	defer t.Stop()
	for n := 1; n < r.cfg.Batch; n++ {
		select {
		case g := <-r.outbox.Appended():
			r.due[g] = true
		case <-t.C:
			return
		case <-ctx.Done():
			return
		}
	}
}

// fundsAgeEvery is how often the sweep reads the age of the oldest
// unrelayed movement (one XRANGE per group that holds entries).
const fundsAgeEvery = 5 * time.Second

// sweep makes every group whose outbox holds entries due, and looks in
// each for entries a dead relay left.
func (r *FundsRelay) sweep(ctx context.Context, measured *time.Time) {
	gs, err := r.outbox.Pending(ctx)
	if err != nil {
		if ctx.Err() == nil {
			slog.Warn("funds relay: sweep failed", "err", err)
		}
		return
	}
	for _, g := range gs {
		r.due[g], r.claim[g] = true, true
	}
	if time.Since(*measured) >= fundsAgeEvery {
		*measured = time.Now()
		r.measureOutbox(ctx, gs)
	}
}

// measureOutbox sets the age of the oldest movement waiting in the
// outboxes of groups gs (those that hold entries): an entry leaves its
// outbox only once the broker confirmed it, and its id is the time it was
// appended.
func (r *FundsRelay) measureOutbox(ctx context.Context, gs []int) {
	var oldest time.Time
	for _, g := range gs {
		at, ok, err := r.outbox.OutboxOldest(ctx, g)
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

// drain publishes, at shutdown, what the outboxes still hold for this
// relay, with a deadline of its own: the HTTP server has stopped making
// movements. What is left is claimed by another relay, or this one's
// next start.
func (r *FundsRelay) drain(ctx context.Context) {
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	for dctx.Err() == nil {
		r.take()
		gs, err := r.outbox.Pending(dctx)
		if err != nil {
			slog.Warn("funds relay: final drain incomplete; another relay will claim the rest", "err", err)
			return
		}
		for _, g := range gs {
			r.due[g] = true
		}
		if len(r.due) == 0 {
			return
		}
		n, err := r.round(dctx)
		if err != nil {
			slog.Warn("funds relay: final drain incomplete; another relay will claim the rest", "err", err)
			return
		}
		if n == 0 && len(r.due) == 0 {
			return // what is left is another relay's, in flight
		}
	}
}

// groupRead is what a round read of one group.
type groupRead struct {
	group   int
	entries []funds.Entry
	claimed int
	ownDone bool // this relay holds no entry of the group unconfirmed
	full    bool // it may hold more: read it again next round
	err     error
}

// round reads the due groups, a few at a time, until about Batch entries
// are in hand (the rest stay due), and publishes what it read, once the
// groups' replicas have it (Durable: an entry a failover could take back
// must not reach the ledger). It returns how many entries it published.
// A group whose read, fence, publication or acknowledgement failed stays
// due, and its own pending entries are read again first.
func (r *FundsRelay) round(ctx context.Context) (int, error) {
	reads := r.read(ctx)
	var entries []funds.Entry
	var errs []error
	for _, rd := range reads {
		if rd.err != nil {
			// A reply lost may hold entries now pending here.
			r.own[rd.group] = true
			errs = append(errs, rd.err)
			continue
		}
		delete(r.claim, rd.group)
		if rd.ownDone {
			delete(r.own, rd.group)
		}
		if !rd.full {
			delete(r.due, rd.group)
		}
		r.metrics.claimed.Add(float64(rd.claimed))
		entries = append(entries, rd.entries...)
	}
	if len(entries) > 0 {
		n, err := r.publish(ctx, entries)
		if err != nil {
			errs = append(errs, err)
		}
		return n, errors.Join(errs...)
	}
	return 0, errors.Join(errs...)
}

// read reads the due groups, fundsReaders at a time, until about Batch
// entries are in hand, each group fenced once read.
func (r *FundsRelay) read(ctx context.Context) []groupRead {
	var (
		mu    sync.Mutex
		wg    sync.WaitGroup
		total int
		out   []groupRead
		sem   = make(chan struct{}, fundsReaders)
	)
	for g := range r.due {
		mu.Lock()
		enough := total >= r.cfg.Batch
		mu.Unlock()
		if enough {
			break
		}
		sem <- struct{}{}
		own, claim := r.own[g], r.claim[g]
		wg.Go(func() {
			defer func() { <-sem }()
			rd := r.readGroup(ctx, g, own, claim)
			if rd.err == nil && len(rd.entries) > 0 {
				rd.err = r.outbox.Durable(ctx, g)
			}
			mu.Lock()
			defer mu.Unlock()
			out = append(out, rd)
			total += len(rd.entries)
		})
	}
	wg.Wait()
	return out
}

// readGroup reads up to Batch entries of group g: first this relay's own
// unconfirmed ones (after a failure), then those of dead relays (claim),
// then new ones.
func (r *FundsRelay) readGroup(ctx context.Context, g int, own, claim bool) groupRead {
	rd := groupRead{group: g}
	seen := map[string]bool{}
	add := func(es []funds.Entry) int {
		n := 0
		for _, e := range es {
			if !seen[e.ID] {
				seen[e.ID] = true
				rd.entries = append(rd.entries, e)
				n++
			}
		}
		return n
	}
	if own {
		es, err := r.outbox.ReadOutbox(ctx, g, r.consumer, rdb.OutboxPending, r.cfg.Batch, 0)
		if err != nil {
			return groupRead{group: g, err: err}
		}
		add(es)
		rd.ownDone = len(es) == 0
	}
	if claim && len(rd.entries) < r.cfg.Batch {
		es, err := r.outbox.ClaimOutbox(ctx, g, r.consumer, r.cfg.ClaimIdle, r.cfg.Batch-len(rd.entries))
		if err != nil {
			return groupRead{group: g, err: err}
		}
		rd.claimed = add(es)
	}
	if len(rd.entries) < r.cfg.Batch {
		n := r.cfg.Batch - len(rd.entries)
		es, err := r.outbox.ReadOutbox(ctx, g, r.consumer, rdb.OutboxNew, n, -1)
		if err != nil {
			return groupRead{group: g, err: err}
		}
		add(es)
		rd.full = len(es) == n
	}
	return rd
}

// publish sends the entries with publisher confirms, many in flight, and
// removes from their streams those the broker confirmed. It returns how
// many entries it removed.
func (r *FundsRelay) publish(ctx context.Context, entries []funds.Entry) (int, error) {
	start := time.Now()
	packed := packMovements(entries, r.cfg.Pack)
	msgs := make([]bus.Message, len(packed))
	for i, m := range packed {
		msgs[i] = bus.Message{ID: fmt.Sprintf("funds-%d-%s", m.refs[0].group, m.refs[0].id), Body: m.body}
	}
	n, failed := r.bus.Publish(ctx, bus.Funds, msgs...)
	for _, m := range packed[n:] {
		for _, ref := range m.refs {
			r.own[ref.group], r.due[ref.group] = true, true
		}
	}
	confirmed := map[int][]string{}
	movements := 0
	for _, m := range packed[:n] {
		for _, ref := range m.refs {
			confirmed[ref.group] = append(confirmed[ref.group], ref.id)
		}
		movements += len(m.refs)
	}
	if n == 0 {
		return 0, failed
	}
	r.metrics.messages.Add(float64(n))
	acked, err := r.ack(context.WithoutCancel(ctx), confirmed)
	r.metrics.published.Add(float64(acked))
	r.metrics.batch.Observe(time.Since(start).Seconds())
	return acked, errors.Join(failed, err)
}

// ack acknowledges and deletes the confirmed entries, group by group, a
// few groups at a time, and returns how many it removed. A group whose
// acknowledgement failed keeps its entries pending here: they are
// published again (the consumer absorbs the duplicates).
func (r *FundsRelay) ack(ctx context.Context, confirmed map[int][]string) (int, error) {
	var (
		mu     sync.Mutex
		wg     sync.WaitGroup
		acked  int
		failed = map[int]error{}
		sem    = make(chan struct{}, fundsReaders)
	)
	for g, ids := range confirmed {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			err := r.outbox.AckOutbox(ctx, g, ids)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				failed[g] = err
				return
			}
			acked += len(ids)
		})
	}
	wg.Wait()
	var errs []error
	for g, err := range failed {
		r.own[g], r.due[g] = true, true
		errs = append(errs, err)
	}
	return acked, errors.Join(errs...)
}

// fundsMessage is one publication: encoded movements of outbox entries,
// perhaps of several groups, and those entries.
type fundsMessage struct {
	body []byte
	refs []entryRef
}

// entryRef names an outbox entry: its group and its stream id.
type entryRef struct {
	group int
	id    string
}

// packMovements turns outbox entries into messages of up to size
// movements each, as a JSON array of the movements' encoded strings
// (funds.EncodeMovement; DecodeMovements reads it). An entry that does not
// decode is sent alone, its fields as they are, so the consumer
// dead-letters it without holding up its neighbours.
func packMovements(entries []funds.Entry, size int) []fundsMessage {
	var out []fundsMessage
	var encoded []string
	var refs []entryRef
	flush := func() {
		if len(encoded) > 0 {
			body, _ := json.Marshal(encoded)
			out = append(out, fundsMessage{body: body, refs: refs})
			encoded, refs = nil, nil
		}
	}
	for _, e := range entries {
		ref := entryRef{group: e.Group, id: e.ID}
		m, err := e.Movement()
		var s string
		if err == nil {
			s, err = funds.EncodeMovement(m)
		}
		if err != nil {
			flush()
			body, err := json.Marshal(e.Values)
			if err != nil {
				body = []byte(`{}`)
			}
			out = append(out, fundsMessage{body: body, refs: []entryRef{ref}})
			continue
		}
		encoded = append(encoded, s)
		refs = append(refs, ref)
		if len(encoded) >= size {
			flush()
		}
	}
	flush()
	return out
}

// FundsRelayMetrics are the funds relay's Prometheus series.
type FundsRelayMetrics struct {
	published prometheus.Counter
	claimed   prometheus.Counter
	batch     prometheus.Histogram
	messages  prometheus.Counter // of the funds queue
	outboxAge prometheus.Gauge
}

// NewFundsRelayMetrics registers the funds relay's series on reg.
func NewFundsRelayMetrics(reg prometheus.Registerer) *FundsRelayMetrics {
	m := &FundsRelayMetrics{
		published: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "seckill_funds_relay_published_total", Help: "Movements of money confirmed by the broker and removed from the funds outboxes.",
		}),
		claimed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "seckill_funds_relay_claimed_total", Help: "Funds outbox entries taken over from a relay that stopped confirming them.",
		}),
		batch: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "seckill_funds_relay_batch_seconds", Help: "Time to publish one round of funds outbox entries and get its confirms.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14),
		}),
		messages: messagesPublished(bus.Funds),
		outboxAge: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "seckill_funds_outbox_oldest_age_seconds", Help: "Age of the oldest movement of money not yet relayed to the broker, over the funds outboxes (0: none waits); read by each funds relay every few seconds.",
		}),
	}
	reg.MustRegister(m.published, m.claimed, m.batch, m.messages, m.outboxAge)
	return m
}
