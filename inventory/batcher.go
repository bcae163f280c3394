package inventory

import (
	"context"
	"sync"
	"time"
)

// Reserver decides a batch of buy requests for one sale.
type Reserver interface {
	Reserve(ctx context.Context, sale int64, reqs []Request) ([]Result, error)
}

// Batcher coalesces concurrent buys of one sale: while a call for the sale
// is in flight, arriving requests queue; when it returns, the next call
// takes everything queued, up to max. An idle sale's first request goes
// out at once (no timer), and under load batches grow by themselves. One
// call per sale is in flight per process at a time.
type Batcher struct {
	next    Reserver
	max     int
	timeout time.Duration

	mu    sync.Mutex
	sales map[int64]*saleQueue

	// OnBatch, if set, observes each call's size.
	OnBatch func(n int)
}

type saleQueue struct {
	queue   []*waiter
	running bool
}

type waiter struct {
	req  Request
	done chan outcome // buffered: the runner never blocks on a caller
}

type outcome struct {
	res Result
	err error
}

// NewBatcher returns a batcher in front of next taking up to max requests
// per call.
func NewBatcher(next Reserver, max int) *Batcher {
	return &Batcher{next: next, max: max, timeout: 10 * time.Second, sales: map[int64]*saleQueue{}}
}

// Reserve queues the requests and waits for their results. If ctx ends
// first the caller gets ctx's error, but requests already queued are still
// decided and recorded: their request ids make a retry return the result.
func (b *Batcher) Reserve(ctx context.Context, sale int64, reqs []Request) ([]Result, error) {
	ws := make([]*waiter, len(reqs))
	b.mu.Lock()
	q := b.sales[sale]
	if q == nil {
		q = &saleQueue{}
		b.sales[sale] = q
	}
	for i, r := range reqs {
		ws[i] = &waiter{req: r, done: make(chan outcome, 1)}
		q.queue = append(q.queue, ws[i])
	}
	if !q.running {
		q.running = true
		go b.run(sale, q)
	}
	b.mu.Unlock()

	out := make([]Result, len(reqs))
	for i, w := range ws {
		select {
		case o := <-w.done:
			if o.err != nil {
				return nil, o.err
			}
			out[i] = o.res
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return out, nil
}

// run makes calls for one sale until its queue is empty.
func (b *Batcher) run(sale int64, q *saleQueue) {
	for {
		b.mu.Lock()
		n := min(len(q.queue), b.max)
		if n == 0 {
			q.running = false
			delete(b.sales, sale)
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
		res, err := b.next.Reserve(ctx, sale, reqs)
		cancel()
		for i, w := range batch {
			if err != nil {
				w.done <- outcome{err: err}
			} else {
				w.done <- outcome{res: res[i]}
			}
		}
	}
}

// Queued is how many requests of a sale wait for the next call.
func (b *Batcher) Queued(sale int64) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	if q := b.sales[sale]; q != nil {
		return len(q.queue)
	}
	return 0
}
