package inventory

import (
	"context"
	"runtime"
	"sync"
	"time"

	"github.com/seckill/seckill"
)

// Batcher coalesces concurrent buys of one sale: while a call for the sale
// is in flight, arriving buys queue; when it returns, the next call takes
// everything queued, up to Max. An idle sale's first buy goes out at once
// (no timer), and under load batches grow by themselves; while Gather says
// so (the fast path, for a sold-out sale) the runner also lets buys on
// their way join first. One call per sale is in flight per process at a
// time, or one per lane of a sale (Lane: one per bucket of a bucketed
// sale).
type Batcher struct {
	next    Reserver
	cfg     BatcherConfig
	timeout time.Duration

	mu    sync.Mutex
	sales map[lane]*saleQueue
}

// BatcherConfig tunes a Batcher.
type BatcherConfig struct {
	// Max is the most buys in one call.
	Max int
	// Lane, if set, is the lane of a sale a user's buys queue in: buys of
	// different lanes are decided by concurrent calls (Store.Lane: the
	// bucket the user is pinned to).
	Lane func(ctx context.Context, sale int64, user string) int
	// Gather, if set, says whether the runner should let buys on their way
	// join before it calls for a sale (FastPath.Gather).
	Gather func(sale int64) bool
	// OnBatch, if set, observes each call's size.
	OnBatch func(n int)
}

// lane names the queue of a sale's requests (lane 0 of a sale without
// lanes).
type lane struct {
	sale int64
	n    int
}

type saleQueue struct {
	queue   []*waiter
	running bool
}

type waiter struct {
	buy  seckill.Buy
	i    int          // the buy's index in its caller's
	lane lane         // the queue it joins
	done chan outcome // buffered for the whole call: the runner never blocks on a caller
}

type outcome struct {
	i         int
	answer    seckill.Answer
	available int64
	closed    seckill.Code
	err       error
}

// singles recycles the channels of one-buy calls (every HTTP buy): a
// channel goes back only once its one outcome was received.
var singles = sync.Pool{New: func() any { return make(chan outcome, 1) }}

// NewBatcher returns a batcher in front of next.
func NewBatcher(next Reserver, cfg BatcherConfig) *Batcher {
	return &Batcher{next: next, cfg: cfg, timeout: 10 * time.Second, sales: map[lane]*saleQueue{}}
}

// Reserve queues the buys and waits for their answers; the decision's
// Available and Closed are those of the call that decided the last of
// them. If ctx ends first the caller gets ctx's error, but buys already
// queued are still decided and recorded: their request ids make a retry
// return the answer.
func (b *Batcher) Reserve(ctx context.Context, sale int64, buys []seckill.Buy) (seckill.Decision, error) {
	var done chan outcome
	if len(buys) == 1 {
		done = singles.Get().(chan outcome)
	} else {
		done = make(chan outcome, len(buys))
	}
	ws := make([]waiter, len(buys))
	for i, r := range buys {
		ws[i] = waiter{buy: r, i: i, lane: lane{sale: sale}, done: done}
		if b.cfg.Lane != nil {
			ws[i].lane.n = b.cfg.Lane(ctx, sale, r.UserID)
		}
	}
	b.mu.Lock()
	for i := range ws {
		l := ws[i].lane
		q := b.sales[l]
		if q == nil {
			q = &saleQueue{}
			b.sales[l] = q
		}
		q.queue = append(q.queue, &ws[i])
		if !q.running {
			q.running = true
			go b.run(l, q)
		}
	}
	b.mu.Unlock()

	d := seckill.Decision{Answers: make([]seckill.Answer, len(buys))}
	for range buys {
		select {
		case o := <-done:
			if o.err != nil {
				return seckill.Decision{}, o.err
			}
			d.Answers[o.i], d.Available, d.Closed = o.answer, o.available, o.closed
		case <-ctx.Done():
			return seckill.Decision{}, ctx.Err()
		}
	}
	if len(buys) == 1 {
		singles.Put(done)
	}
	return d, nil
}

// maxYields bounds how often a runner yields while gathering.
const maxYields = 8

// run makes calls for one lane of a sale until its queue is empty.
func (b *Batcher) run(l lane, q *saleQueue) {
	for {
		if b.cfg.Gather != nil && b.cfg.Gather(l.sale) {
			b.gather(q)
		}
		b.mu.Lock()
		n := min(len(q.queue), b.cfg.Max)
		if n == 0 {
			q.running = false
			delete(b.sales, l)
			b.mu.Unlock()
			return
		}
		batch := q.queue[:n:n]
		q.queue = q.queue[n:]
		b.mu.Unlock()

		buys := make([]seckill.Buy, n)
		for i, w := range batch {
			buys[i] = w.buy
		}
		if b.cfg.OnBatch != nil {
			b.cfg.OnBatch(n)
		}
		// The call is not the callers': one leaving must not cancel the
		// others' decisions.
		ctx, cancel := context.WithTimeout(context.Background(), b.timeout)
		d, err := b.next.Reserve(ctx, l.sale, buys)
		cancel()
		for i, w := range batch {
			if err != nil {
				w.done <- outcome{i: w.i, err: err}
			} else {
				w.done <- outcome{i: w.i, answer: d.Answers[i], available: d.Available, closed: d.Closed}
			}
		}
	}
}

// gather lets buys already on their way join the next call: while the
// queue keeps growing (and is not full), the runner yields the processor
// to the goroutines about to queue. Nothing waits on a timer, so an idle
// process calls at once.
func (b *Batcher) gather(q *saleQueue) {
	for range maxYields {
		b.mu.Lock()
		n := len(q.queue)
		b.mu.Unlock()
		if n >= b.cfg.Max {
			return
		}
		runtime.Gosched()
		b.mu.Lock()
		grew := len(q.queue) > n
		b.mu.Unlock()
		if !grew {
			return
		}
	}
}

// Queued is how many buys of a sale wait for the next call.
func (b *Batcher) Queued(sale int64) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for l, q := range b.sales {
		if l.sale == sale {
			n += len(q.queue)
		}
	}
	return n
}
