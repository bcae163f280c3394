package inventory

import (
	"context"
	"runtime"
	"sync"
	"time"
)

// Reserver decides a batch of buy requests for one sale.
type Reserver interface {
	Reserve(ctx context.Context, sale int64, reqs []Request) ([]Result, error)
}

// Laner is a Reserver that decides some sales in independent lanes (the
// buckets of a sale): requests of different lanes may be decided by
// concurrent calls.
type Laner interface {
	Lane(ctx context.Context, sale int64, user string) int
}

// Batcher coalesces concurrent buys of one sale: while a call for the sale
// is in flight, arriving requests queue; when it returns, the next call
// takes everything queued, up to max. An idle sale's first request goes
// out at once (no timer), and under load batches grow by themselves; for
// a Gatherer (the fast path, for a sold-out sale) the runner also lets
// requests on their way join first. One call per sale is in flight per
// process at a time, or one per lane of a sale whose Reserver is a Laner
// (a bucketed sale: one per bucket).
type Batcher struct {
	next    Reserver
	max     int
	timeout time.Duration

	mu    sync.Mutex
	sales map[lane]*saleQueue

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
	req  Request
	i    int          // the request's index in its call
	lane lane         // the queue it joins
	done chan outcome // buffered for the whole call: the runner never blocks on a caller
}

type outcome struct {
	i   int
	res Result
	err error
}

// singles recycles the channels of one-request calls (every HTTP buy): a
// channel goes back only once its one outcome was received.
var singles = sync.Pool{New: func() any { return make(chan outcome, 1) }}

// NewBatcher returns a batcher in front of next taking up to max requests
// per call.
func NewBatcher(next Reserver, max int) *Batcher {
	return &Batcher{next: next, max: max, timeout: 10 * time.Second, sales: map[lane]*saleQueue{}}
}

// Reserve queues the requests and waits for their results. If ctx ends
// first the caller gets ctx's error, but requests already queued are still
// decided and recorded: their request ids make a retry return the result.
func (b *Batcher) Reserve(ctx context.Context, sale int64, reqs []Request) ([]Result, error) {
	var done chan outcome
	if len(reqs) == 1 {
		done = singles.Get().(chan outcome)
	} else {
		done = make(chan outcome, len(reqs))
	}
	laner, _ := b.next.(Laner)
	ws := make([]waiter, len(reqs))
	for i, r := range reqs {
		ws[i] = waiter{req: r, i: i, lane: lane{sale: sale}, done: done}
		if laner != nil {
			ws[i].lane.n = laner.Lane(ctx, sale, r.UserID)
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

	out := make([]Result, len(reqs))
	for range reqs {
		select {
		case o := <-done:
			if o.err != nil {
				return nil, o.err
			}
			out[o.i] = o.res
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if len(reqs) == 1 {
		singles.Put(done)
	}
	return out, nil
}

// Gatherer is a Reserver that wants a sale's requests gathered before a
// call while Gather says so.
type Gatherer interface {
	Gather(sale int64) bool
}

// maxYields bounds how often a runner yields while gathering.
const maxYields = 8

// run makes calls for one lane of a sale until its queue is empty.
func (b *Batcher) run(l lane, q *saleQueue) {
	gatherer, _ := b.next.(Gatherer)
	for {
		if gatherer != nil && gatherer.Gather(l.sale) {
			b.gather(q)
		}
		b.mu.Lock()
		n := min(len(q.queue), b.max)
		if n == 0 {
			q.running = false
			delete(b.sales, l)
			b.mu.Unlock()
			return
		}
		batch := q.queue[:n:n]
		q.queue = q.queue[n:]
		b.mu.Unlock()

		reqs := make([]Request, n)
		for i, w := range batch {
			reqs[i] = w.req
		}
		if b.OnBatch != nil {
			b.OnBatch(n)
		}
		// The call is not the callers': one leaving must not cancel the
		// others' decisions.
		ctx, cancel := context.WithTimeout(context.Background(), b.timeout)
		res, err := b.next.Reserve(ctx, l.sale, reqs)
		cancel()
		for i, w := range batch {
			if err != nil {
				w.done <- outcome{i: w.i, err: err}
			} else {
				w.done <- outcome{i: w.i, res: res[i]}
			}
		}
	}
}

// gather lets requests already on their way join the next call: while the
// queue keeps growing (and is not full), the runner yields the processor
// to the goroutines about to queue. Nothing waits on a timer, so an idle
// process calls at once.
func (b *Batcher) gather(q *saleQueue) {
	for range maxYields {
		b.mu.Lock()
		n := len(q.queue)
		b.mu.Unlock()
		if n >= b.max {
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

// Queued is how many requests of a sale wait for the next call.
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
