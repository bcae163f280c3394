package inventory

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/seckill/seckill"
	"github.com/seckill/seckill/internal/rdb"
)

// FastPath answers buys of a sale this process knows to be sold out (or
// ended) without running buy.lua: one HMGET over the request ids of the
// whole batch returns the stored answers of buys seen before (so a retry
// of an accepted buy still gets its order), and every new buy gets
// sold_out (or ended).
//
// The process learns the state from the decisions of the Reserver behind
// it (buy.lua reports the sale's availability after each batch). A mark is
// dropped when a stock-changed message arrives over pub/sub (restock,
// release, status change, warm) and in any case after recheck, so a sale
// whose stock came back is buyable again within a second even if a
// message was lost.
type FastPath struct {
	next    Reserver
	stored  Stored
	recheck time.Duration
	now     func() time.Time

	mu    sync.Mutex
	marks map[int64]mark
	gens  map[int64]uint64 // bumped by every stock-changed message

	// OnHit, if set, counts buys answered without the script.
	OnHit func(n int)
}

// Stored is where the fast path finds the answers of buys seen before and
// hears of changes to a sale's stock: the Store.
type Stored interface {
	Lookup(ctx context.Context, sale int64, buys []seckill.Buy) ([]seckill.Answer, []bool, error)
	FollowChanges(ctx context.Context, caughtUp func(), changed func(sale int64))
}

type mark struct {
	code  seckill.Code // CodeSoldOut or CodeEnded
	until time.Time
}

// NewFastPath returns a fast path in front of next, answering marked sales
// from stored; a mark lives for recheck.
func NewFastPath(next Reserver, stored Stored, recheck time.Duration) *FastPath {
	return &FastPath{next: next, stored: stored, recheck: recheck, now: time.Now, marks: map[int64]mark{}, gens: map[int64]uint64{}}
}

// Gather says whether a batcher should gather a sale's buys before asking
// (BatcherConfig.Gather): for a marked sale, one lookup for many buys
// costs the process and Redis far less than several (a refusal loses
// nothing by waiting for its neighbours).
func (f *FastPath) Gather(sale int64) bool {
	f.mu.Lock()
	m, marked := f.marks[sale]
	f.mu.Unlock()
	return marked && f.now().Before(m.until)
}

// Reserve decides a batch for one sale, through the next Reserver unless
// the sale is marked sold out or ended.
func (f *FastPath) Reserve(ctx context.Context, sale int64, buys []seckill.Buy) (seckill.Decision, error) {
	f.mu.Lock()
	m, marked := f.marks[sale]
	if marked && f.now().After(m.until) {
		delete(f.marks, sale)
		marked = false
	}
	gen := f.gens[sale]
	f.mu.Unlock()

	if marked {
		answers, found, err := f.stored.Lookup(ctx, sale, buys)
		if err != nil {
			return seckill.Decision{}, err
		}
		for i := range answers {
			if !found[i] {
				answers[i] = seckill.Answer{Code: m.code, Qty: buys[i].Qty}
			}
		}
		if f.OnHit != nil {
			f.OnHit(len(buys))
		}
		d := seckill.Decision{Answers: answers}
		if m.code == seckill.CodeEnded {
			d.Closed = seckill.CodeEnded
		}
		return d, nil
	}

	d, err := f.next.Reserve(ctx, sale, buys)
	if err != nil {
		return d, err
	}
	if code := d.SoldOut(); code != "" {
		f.mu.Lock()
		// A stock change announced while the script ran may postdate what
		// it saw: then the state is not trusted.
		if f.gens[sale] == gen {
			f.marks[sale] = mark{code: code, until: f.now().Add(f.recheck)}
		}
		f.mu.Unlock()
	}
	return d, nil
}

// forget drops a sale's mark, as a stock-changed message asks.
func (f *FastPath) forget(sale int64) {
	f.mu.Lock()
	delete(f.marks, sale)
	f.gens[sale]++
	f.mu.Unlock()
}

// Run listens for stock changes until ctx ends (marks expire meanwhile
// when the messages do not come through).
func (f *FastPath) Run(ctx context.Context) {
	f.stored.FollowChanges(ctx, func() {
		// Anything may have changed while nobody listened.
		f.mu.Lock()
		for sale := range f.marks {
			delete(f.marks, sale)
			f.gens[sale]++
		}
		f.mu.Unlock()
	}, f.forget)
}

// FollowChanges calls changed with the id of each sale whose stock or
// status changes (announced by any process) until ctx ends; caughtUp runs
// whenever the subscription is (re)made, for what was missed meanwhile.
func (s *Store) FollowChanges(ctx context.Context, caughtUp func(), changed func(sale int64)) {
	rdb.Follow(ctx, s.rdb, s.keys.StockChanged(), func(context.Context) error { caughtUp(); return nil }, func(payload string) {
		if sale, err := strconv.ParseInt(payload, 10, 64); err == nil {
			changed(sale)
		}
	})
}
