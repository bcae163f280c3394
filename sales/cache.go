package sales

import (
	"context"
	"sync"
	"time"
)

// cache keeps things read per sale (ledger rows, the stock's settings) for
// a second, so a sale page or a buy under load does not turn into a query
// per request. Errors are kept only when missing says so.
type cache[V any] struct {
	load    func(context.Context, int64) (V, error)
	missing func(error) bool
	now     func() time.Time

	mu sync.Mutex
	m  map[int64]cached[V]
}

type cached[V any] struct {
	v   V
	err error
	at  time.Time
}

const (
	cacheTTL  = time.Second
	cacheSize = 10_000
)

func newCache[V any](load func(context.Context, int64) (V, error), missing func(error) bool, now func() time.Time) *cache[V] {
	return &cache[V]{load: load, missing: missing, now: now, m: map[int64]cached[V]{}}
}

func (c *cache[V]) get(ctx context.Context, id int64) (V, error) {
	now := c.now()
	c.mu.Lock()
	e, ok := c.m[id]
	c.mu.Unlock()
	if ok && now.Sub(e.at) < cacheTTL {
		return e.v, e.err
	}
	v, err := c.load(ctx, id)
	if err != nil && !c.missing(err) {
		return v, err
	}
	c.mu.Lock()
	if len(c.m) >= cacheSize {
		clear(c.m)
	}
	c.m[id] = cached[V]{v: v, err: err, at: now}
	c.mu.Unlock()
	return v, err
}

func (c *cache[V]) forget(id int64) {
	c.mu.Lock()
	delete(c.m, id)
	c.mu.Unlock()
}
