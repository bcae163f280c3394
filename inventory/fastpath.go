package inventory

import (
	"context"
	"strconv"
	"sync"
	"time"
)

// FastPath answers buys of a sale this process knows to be sold out (or
// ended) without running buy.lua: one HMGET over the request ids of the
// whole batch returns the stored answers of requests seen before (so a
// retry of an accepted request still gets its order), and every new
// request gets sold_out (or ended).
//
// The process learns the state from the buy calls themselves (buy.lua
// reports the sale's availability after each batch). A mark is dropped
// when a stock-changed message arrives over pub/sub (restock, release,
// status change, warm) and in any case after Recheck, so a sale whose
// stock came back is buyable again within a second even if a message was
// lost.
type FastPath struct {
	store   *Store
	recheck time.Duration
	now     func() time.Time

	mu    sync.Mutex
	marks map[int64]mark
	gens  map[int64]uint64 // bumped by every stock-changed message

	// OnHit, if set, counts requests answered without the script.
	OnHit func(n int)
}

type mark struct {
	err   error // ErrSoldOut or ErrEnded
	until time.Time
}

// NewFastPath returns a fast path over store whose marks live for recheck.
func NewFastPath(store *Store, recheck time.Duration) *FastPath {
	return &FastPath{store: store, recheck: recheck, now: time.Now, marks: map[int64]mark{}, gens: map[int64]uint64{}}
}

// Lane is the store's lane of a user's request (see Laner).
func (f *FastPath) Lane(ctx context.Context, sale int64, user string) int {
	return f.store.Lane(ctx, sale, user)
}

// Gather says whether a batcher should gather a sale's requests before
// asking: for a marked sale, one lookup for many requests costs the
// process and Redis far less than several (a refusal loses nothing by
// waiting for its neighbours).
func (f *FastPath) Gather(sale int64) bool {
	f.mu.Lock()
	m, marked := f.marks[sale]
	f.mu.Unlock()
	return marked && f.now().Before(m.until)
}

// Reserve decides a batch for one sale, through buy.lua unless the sale is
// marked sold out or ended.
func (f *FastPath) Reserve(ctx context.Context, sale int64, reqs []Request) ([]Result, error) {
	f.mu.Lock()
	m, marked := f.marks[sale]
	if marked && f.now().After(m.until) {
		delete(f.marks, sale)
		marked = false
	}
	gen := f.gens[sale]
	f.mu.Unlock()

	if marked {
		res, found, err := f.store.Lookup(ctx, sale, reqs)
		if err != nil {
			return nil, err
		}
		for i := range res {
			if !found[i] {
				res[i] = Result{Err: m.err, Qty: reqs[i].Qty}
			}
		}
		if f.OnHit != nil {
			f.OnHit(len(reqs))
		}
		return res, nil
	}

	res, st, err := f.store.reserve(ctx, sale, reqs)
	if err != nil {
		return nil, err
	}
	var e error
	switch {
	case st.closed == "ended":
		e = ErrEnded
	case st.closed == "" && st.available <= 0:
		e = ErrSoldOut
	}
	f.mu.Lock()
	// A stock change announced while the script ran may postdate what it
	// saw: then the state is not trusted.
	if e != nil && f.gens[sale] == gen {
		f.marks[sale] = mark{err: e, until: f.now().Add(f.recheck)}
	}
	f.mu.Unlock()
	return res, nil
}

// forget drops a sale's mark, as a stock-changed message asks.
func (f *FastPath) forget(sale int64) {
	f.mu.Lock()
	delete(f.marks, sale)
	f.gens[sale]++
	f.mu.Unlock()
}

// Run listens for stock-changed messages until ctx ends, resubscribing
// after a connection loss (marks expire meanwhile).
func (f *FastPath) Run(ctx context.Context) {
	Follow(ctx, f.store.rdb, f.store.keys.StockChanged(), func(context.Context) error {
		// Anything may have changed while nobody listened.
		f.mu.Lock()
		for sale := range f.marks {
			delete(f.marks, sale)
			f.gens[sale]++
		}
		f.mu.Unlock()
		return nil
	}, func(payload string) {
		if sale, err := strconv.ParseInt(payload, 10, 64); err == nil {
			f.forget(sale)
		}
	})
}
