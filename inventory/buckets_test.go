package inventory_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill"
	"github.com/seckill/seckill/lua"
)

// bucketSale warms a sale of total units split into k buckets.
func (e *env) bucketSale(t testing.TB, total, limit int64, k int) int64 {
	t.Helper()
	e.next++
	now := time.Now()
	_, err := e.inv.Warm(context.Background(), seckill.Sale{
		ID: e.next, Total: total, PerUserLimit: limit, PriceCents: 100, Buckets: k,
		StartsAt: now.Add(-time.Minute), EndsAt: now.Add(time.Hour), Status: seckill.StatusActive,
	})
	if err != nil {
		t.Fatal(err)
	}
	return e.next
}

// TestBucketsSellExactlyTheirTotal: a sale split into 3 buckets, bought
// by many users at once while a rebalancer moves units between the
// buckets, sells exactly its total (sold_out only once every bucket is
// empty), no user over the cap, each accepted order once; on a cluster the
// buckets sit on different masters.
func TestBucketsSellExactlyTheirTotal(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	const total, limit, users = 600, 2, 500
	sale := e.bucketSale(t, total, limit, 3)
	parts, err := e.inv.Parts(ctx, sale)
	if err != nil || len(parts) != 3 {
		t.Fatalf("parts: %v, %v", parts, err)
	}
	if cc, ok := e.rdb.(*redis.ClusterClient); ok {
		masters := map[string]bool{}
		for _, p := range parts {
			m, err := cc.MasterForKey(ctx, e.keys.Part(p.Tag).Stock())
			if err != nil {
				t.Fatal(err)
			}
			masters[m.Options().Addr] = true
		}
		if len(masters) != 3 {
			t.Errorf("3 buckets on %d masters", len(masters))
		}
	}
	if st := e.stock(t, sale); st.Total != total || st.Available != total {
		t.Fatalf("stock of the new sale: %+v", st)
	}

	stop := make(chan struct{})
	var rebalanced sync.WaitGroup
	rebalanced.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			if err := e.inv.Rebalance(ctx, sale); err != nil {
				t.Error(err)
				return
			}
		}
	})
	var (
		mu       sync.Mutex
		byUser   = map[string]int64{}
		orderIDs = map[string]bool{}
		sold     atomic.Int64
		wg       sync.WaitGroup
	)
	for u := range users {
		wg.Go(func() {
			user := fmt.Sprint("bucket-user-", u)
			for i := range 3 { // one more than the limit allows
				d, err := e.inv.Reserve(ctx, sale, []seckill.Buy{req(user, 1, fmt.Sprintf("b-%d-%d", u, i))})
				if err != nil {
					t.Error(err)
					return
				}
				r := d.Answers[0]
				switch r.Code {
				case ok:
					sold.Add(r.Qty)
					mu.Lock()
					byUser[user] += r.Qty
					if orderIDs[r.OrderID] {
						t.Errorf("order %s accepted twice", r.OrderID)
					}
					orderIDs[r.OrderID] = true
					mu.Unlock()
				case seckill.CodeSoldOut, seckill.CodeLimitExceeded:
				default:
					t.Errorf("unexpected refusal %v", r.Code)
				}
			}
		})
	}
	wg.Wait()
	close(stop)
	rebalanced.Wait()
	if sold.Load() != total {
		t.Errorf("sold %d of %d units to %d users wanting %d", sold.Load(), total, users, users*limit)
	}
	for u, n := range byUser {
		if n > limit {
			t.Errorf("%s holds %d, limit %d", u, n, limit)
		}
	}
	st := e.stock(t, sale)
	snap, err := e.inv.Snapshot(ctx, sale)
	if err != nil {
		t.Fatal(err)
	}
	if st.Sold != total || st.Available != 0 || st.Total+snap.InTransit != total || len(snap.Accepted) != int(total) {
		t.Errorf("after the burst: stock %+v, %d in transit, %d accepted orders", st, snap.InTransit, len(snap.Accepted))
	}
	// A retry of an accepted request returns its order, from its bucket.
	for id := range orderIDs {
		var user string
		var u, i int
		if _, err := fmt.Sscanf(id, "order-bucket-user-%d-b-%d-%d", &u, &u, &i); err != nil {
			t.Fatalf("order id %q: %v", id, err)
		}
		user = fmt.Sprint("bucket-user-", u)
		res := e.reserve(t, sale, req(user, 1, fmt.Sprintf("b-%d-%d", u, i)))
		if res[0].Code != ok || res[0].OrderID != id {
			t.Errorf("retry of %s: %+v", id, res[0])
		}
		break
	}
}

// TestBucketMoveSurvivesACrash: units taken out of a bucket by a mover
// that died before delivering them are in transit (counted, not on sale),
// and the next rebalance delivers them exactly once: a move never creates
// units.
func TestBucketMoveSurvivesACrash(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	sale := e.bucketSale(t, 90, 90, 3)
	parts, err := e.inv.Parts(ctx, sale)
	if err != nil {
		t.Fatal(err)
	}
	from := e.keys.Part(parts[0].Tag)
	// The mover's first step, and then it dies.
	n, err := redis.NewScript(lua.Move).Run(ctx, e.rdb, []string{from.Stock(), from.Moves()}, "crashed-move", parts[1].Tag, 20).Int64()
	if err != nil || n != 20 {
		t.Fatalf("move: %d, %v", n, err)
	}
	snap, err := e.inv.Snapshot(ctx, sale)
	if err != nil || snap.InTransit != 20 || snap.Stock.Total != 70 || snap.Stock.Available != 70 {
		t.Fatalf("with a move in transit: %+v, %v", snap, err)
	}
	for range 2 { // the second finds nothing left to deliver
		if err := e.inv.Rebalance(ctx, sale); err != nil {
			t.Fatal(err)
		}
	}
	snap, err = e.inv.Snapshot(ctx, sale)
	if err != nil || snap.InTransit != 0 || snap.Stock.Total != 90 || snap.Stock.Available != 90 {
		t.Fatalf("after the rebalance: %+v, %v", snap, err)
	}
	// Delivering the same move again changes nothing.
	to := e.keys.Part(parts[1].Tag)
	if r, err := redis.NewScript(lua.Accept).Run(ctx, e.rdb, []string{to.Stock(), to.Arrived()}, "crashed-move", 20).Text(); err != nil || !strings.HasSuffix(r, "|0") {
		t.Errorf("a second delivery: %q, %v; want it refused as delivered before", r, err)
	}
	if st := e.stock(t, sale); st.Total != 90 || st.Available != 90 {
		t.Errorf("stock %+v", st)
	}
}

// TestBucketedSaleIsOneSale: restock, release, pause, resume and end act
// on the whole sale; a user's units return to the user's bucket.
func TestBucketedSaleIsOneSale(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	sale := e.bucketSale(t, 9, 3, 3)
	if _, err := e.inv.Restock(ctx, sale, 6); err != nil {
		t.Fatal(err)
	}
	if st := e.stock(t, sale); st.Total != 15 || st.Available != 15 {
		t.Fatalf("after restock: %+v", st)
	}
	res := e.reserve(t, sale, req("carol", 3, "carol-0001"))
	if res[0].Code != ok || res[0].Remaining != 12 {
		t.Fatalf("buy: %+v", res[0])
	}
	if _, released, err := e.inv.Release(ctx, sale, res[0].OrderID, "carol", 3); err != nil || !released {
		t.Fatalf("release: %v, %v", released, err)
	}
	if st := e.stock(t, sale); st.Available != 15 || st.Sold != 0 {
		t.Errorf("after release: %+v", st)
	}
	if b, _ := e.inv.Buyers(ctx, sale); b["carol"] != 0 {
		t.Errorf("carol still holds %d", b["carol"])
	}
	for _, step := range []struct {
		action seckill.Action
		want   seckill.Code
	}{{seckill.ActionPause, seckill.CodePaused}, {seckill.ActionResume, ok}, {seckill.ActionEnd, seckill.CodeEnded}} {
		if _, err := e.inv.SetStatus(ctx, sale, step.action); err != nil {
			t.Fatal(err)
		}
		// Every bucket follows: users of all three get the same answer.
		for u := range 6 {
			r := e.reserve(t, sale, req(fmt.Sprint("st-user-", u), 1, fmt.Sprintf("%s-%04d", step.action, u)))
			if r[0].Code != step.want {
				t.Errorf("after %s, user %d: %v, want %v", step.action, u, r[0].Code, step.want)
			}
		}
	}
	if r := e.reserve(t, sale, req("late", 1, "late-00001")); r[0].Code != seckill.CodeEnded {
		t.Errorf("after end: %v", r[0].Code)
	}
}
