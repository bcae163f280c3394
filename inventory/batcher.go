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

// Laner is a Reserver that decides some sales in independent lanes (the
// buckets of a sale): requests of different lanes may be decided by
// concurrent calls.
type Laner interface {
	Lane(ctx context.Context, sale int64, user string) int
}

// Batcher coalesces concurrent buys of one sale: while a call for the sale
// is in flight, arriving requests queue; when it returns, the next call
// takes everything queued, up to max. An idle sale's first request goes
// out at once (no timer), and under load batches grow by themselves. One
// call per sale is in flight per process at a time, or one per lane of a
// sale whose Reserver is a Laner (a bucketed sale: one per bucket).
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
	done chan outcome // buffered: the runner never blocks on a caller
}

type outcome struct {
	res Result
	err error
}

// NewBatcher returns a batcher in front of next taking up to max requests
// per call.
func NewBatcher(next Reserver, max int) *Batcher {
	return &Batcher{next: next, max: max, timeout: 10 * time.Second, sales: map[lane]*saleQueue{}}
}

// Reserve queues the requests and waits for their results. If ctx ends
// first the caller gets ctx's error, but requests already queued are still
// decided and recorded: their request ids make a retry return the result.
func (b *Batcher) Reserve(ctx context.Context, sale int64, reqs []Request) ([]Result, error) {
	laner, _ := b.next.(Laner)
	ws := make([]*waiter, len(reqs))
	lanes := make([]lane, len(reqs))
	for i, r := range reqs {
		lanes[i] = lane{sale: sale}
		if laner != nil {
			lanes[i].n = laner.Lane(ctx, sale, r.UserID)
		}
	}
	b.mu.Lock()
	for i, r := range reqs {
		q := b.sales[lanes[i]]
		if q == nil {
			q = &saleQueue{}
			b.sales[lanes[i]] = q
		}
		ws[i] = &waiter{req: r, done: make(chan outcome, 1)}
		q.queue = append(q.queue, ws[i])
		if !q.running {
			q.running = true
			go b.run(lanes[i], q)
		}
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

// run makes calls for one lane of a sale until its queue is empty.
func (b *Batcher) run(l lane, q *saleQueue) {
	for {
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
	n := 0
	for l, q := range b.sales {
		if l.sale == sale {
			n += len(q.queue)
		}
	}
	return n
}
