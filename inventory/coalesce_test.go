package inventory_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckill/seckill"
	"github.com/seckill/seckill/inventory"
	"github.com/seckill/seckill/system/servertest"
)

// gate holds the first call until opened, so later requests queue.
type gate struct {
	next   inventory.Reserver
	once   sync.Once
	inside chan struct{}
	open   chan struct{}
}

func (g *gate) Reserve(ctx context.Context, sale int64, reqs []seckill.Buy) (seckill.Decision, error) {
	first := false
	g.once.Do(func() { first = true })
	if first {
		close(g.inside)
		<-g.open
	}
	return g.next.Reserve(ctx, sale, reqs)
}

// TestBatcherCoalescesAndKeepsAbandonedResults: requests arriving while a
// call is in flight go out together in the next call (up to the cap); a
// caller that gives up still has its request decided and recorded.
func TestBatcherCoalescesAndKeepsAbandonedResults(t *testing.T) {
	e := newEnv(t)
	sale := e.mustSale(t, 100, 1, -time.Minute, time.Hour)
	g := &gate{next: e.inv, inside: make(chan struct{}), open: make(chan struct{})}
	var mu sync.Mutex
	var sizes []int
	b := inventory.NewBatcher(g, inventory.BatcherConfig{Max: 8, OnBatch: func(n int) { mu.Lock(); sizes = append(sizes, n); mu.Unlock() }})

	ctx := context.Background()
	var wg sync.WaitGroup
	wg.Go(func() {
		if _, err := b.Reserve(ctx, sale, []seckill.Buy{req("u-first", 1, "first-req")}); err != nil {
			t.Error(err)
		}
	})
	<-g.inside // the first call is in flight; everything else queues
	results := make([]seckill.Answer, 20)
	for i := range 20 {
		wg.Go(func() {
			d, err := b.Reserve(ctx, sale, []seckill.Buy{req(fmt.Sprint("u-", i), 1, fmt.Sprintf("queued-%03d", i))})
			if err != nil {
				t.Error(err)
				return
			}
			results[i] = d.Answers[0]
		})
	}
	gone, cancel := context.WithCancel(ctx)
	abandoned := make(chan error, 1)
	go func() {
		_, err := b.Reserve(gone, sale, []seckill.Buy{req("u-gone", 1, "abandoned-req")})
		abandoned <- err
	}()
	servertest.WaitFor(t, 5*time.Second, "21 requests queued", func() (bool, string) {
		return b.Queued(sale) == 21, fmt.Sprint(b.Queued(sale))
	})
	cancel()
	if err := <-abandoned; !errors.Is(err, context.Canceled) {
		t.Fatalf("abandoned caller got %v", err)
	}
	close(g.open)
	wg.Wait()

	for i, r := range results {
		if r.Code != ok || r.OrderID == "" {
			t.Errorf("queued request %d: %+v", i, r)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if fmt.Sprint(sizes) != "[1 8 8 5]" {
		t.Errorf("batch sizes %v, want [1 8 8 5]: the first alone, the 21 queued in calls of up to 8", sizes)
	}
	// The abandoned request was decided: its retry returns the same order.
	res := e.reserve(t, sale, req("u-gone", 1, "abandoned-req"))
	if res[0].Code != ok || res[0].OrderID != "order-u-gone-abandoned-req" {
		t.Errorf("retry of the abandoned request: %+v", res[0])
	}
	if st := e.stock(t, sale); st.Sold != 22 {
		t.Errorf("sold %d, want 22", st.Sold)
	}
}

// TestFastPathMarkExpires: with nobody listening for stock changes (a lost
// message), a sold-out mark still lapses after its recheck time and stock
// that came back is sold.
func TestFastPathMarkExpires(t *testing.T) {
	e := newEnv(t)
	sale := e.mustSale(t, 1, 1, -time.Minute, time.Hour)
	const recheck = time.Second
	f := inventory.NewFastPath(e.inv, e.inv, recheck)
	clock := time.Now() // read by Reserve, on this goroutine
	f.SetClock(func() time.Time { return clock })
	var hits int
	f.OnHit = func(n int) { hits += n }
	ctx := context.Background()
	buy := func(user string) seckill.Code {
		d, err := f.Reserve(ctx, sale, []seckill.Buy{req(user, 1, "rid-"+user)})
		if err != nil {
			t.Fatal(err)
		}
		return d.Answers[0].Code
	}
	if c := buy("a"); c != ok {
		t.Fatal(c)
	}
	// The script reported nothing left: the next buy takes the fast path.
	if c := buy("b"); c != seckill.CodeSoldOut || hits != 1 {
		t.Fatalf("after the last unit: %v, %d hits", c, hits)
	}
	if _, err := e.inv.Restock(ctx, sale, 1); err != nil {
		t.Fatal(err)
	}
	clock = clock.Add(recheck - time.Millisecond)
	if c := buy("c"); c != seckill.CodeSoldOut || hits != 2 {
		t.Fatalf("while the mark holds: %v, %d hits", c, hits)
	}
	clock = clock.Add(2 * time.Millisecond)
	if c := buy("d"); c != ok || hits != 2 {
		t.Fatalf("after the recheck time: %v, %d hits", c, hits)
	}
	if st := e.stock(t, sale); st.Sold != 2 || st.Available != 0 {
		t.Errorf("stock %+v", st)
	}
}

// TestFastPathGathersSoldOutRequests: once a sale is marked sold out, the
// batcher's runner lets requests already on their way queue before it
// calls, so they share one lookup. On one processor this is exact: the
// first late request starts the runner, which runs next; without
// gathering it would take that request alone.
func TestFastPathGathersSoldOutRequests(t *testing.T) {
	e := newEnv(t)
	sale := e.mustSale(t, 1, 1, -time.Minute, time.Hour)
	f := inventory.NewFastPath(e.inv, e.inv, time.Hour)
	var hits atomic.Int64
	f.OnHit = func(n int) { hits.Add(int64(n)) }
	var mu sync.Mutex
	var sizes []int
	b := inventory.NewBatcher(f, inventory.BatcherConfig{Max: 256, Lane: e.inv.Lane, Gather: f.Gather,
		OnBatch: func(n int) { mu.Lock(); sizes = append(sizes, n); mu.Unlock() }})
	ctx := context.Background()
	if d, err := b.Reserve(ctx, sale, []seckill.Buy{req("winner", 1, "gather-first")}); err != nil || d.Answers[0].Code != ok {
		t.Fatalf("first buy: %v %+v", err, d)
	}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() {
			d, err := b.Reserve(ctx, sale, []seckill.Buy{req(fmt.Sprint("late-", i), 1, fmt.Sprintf("gather-%03d", i))})
			if err != nil || d.Answers[0].Code != seckill.CodeSoldOut {
				t.Errorf("late buy %d: %v %+v", i, err, d)
			}
		})
	}
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	if fmt.Sprint(sizes) != "[1 20]" || hits.Load() != 20 {
		t.Errorf("batch sizes %v and %d fast-path answers, want [1 20] and 20", sizes, hits.Load())
	}
}
