package inventory_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill"
	"github.com/seckill/seckill/internal/rdb"
	"github.com/seckill/seckill/inventory"
	"github.com/seckill/seckill/system/servertest"
)

// env is a test's Redis with a key prefix of its own.
type env struct {
	rdb  redis.UniversalClient
	keys rdb.Keys
	inv  *inventory.Store
	next int64
}

// keep is how long a test sale's keys live after its end.
const keep = 24 * time.Hour

func newEnv(t testing.TB) *env {
	t.Helper()
	cfg := servertest.Config(t)
	rdb := servertest.Redis(t, cfg)
	inv := inventory.New(rdb, inventory.Config{Prefix: cfg.Redis.Prefix, Keep: keep})
	return &env{rdb: rdb, keys: inv.Keys(), inv: inv}
}

// first is the keys of a sale's first part (its only one without buckets).
func (e *env) first(sale int64) rdb.PartKeys { return e.keys.Part(inventory.First(sale).Tag) }

// mustSale warms a sale with the given stock, limit and window offsets
// from now; status is active unless given.
func (e *env) mustSale(t testing.TB, total, limit int64, start, end time.Duration, status ...seckill.Status) int64 {
	t.Helper()
	e.next++
	st := seckill.StatusActive
	if len(status) > 0 {
		st = status[0]
	}
	now := time.Now()
	_, err := e.inv.Warm(context.Background(), seckill.Sale{
		ID: e.next, Total: total, PerUserLimit: limit, PriceCents: 250, Buckets: 1,
		StartsAt: now.Add(start), EndsAt: now.Add(end), Status: st,
	})
	if err != nil {
		t.Fatal(err)
	}
	return e.next
}

func (e *env) stock(t testing.TB, sale int64) seckill.Stock {
	t.Helper()
	st, err := e.inv.Stock(context.Background(), sale)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// outbox returns the order events in a sale's outbox streams.
func (e *env) outbox(t testing.TB, sale int64) []seckill.Event {
	t.Helper()
	entries, err := e.inv.Outbox(context.Background(), sale)
	if err != nil {
		t.Fatal(err)
	}
	var evs []seckill.Event
	for _, m := range entries {
		part, err := inventory.DecodeOutbox(m.Values)
		if err != nil {
			t.Fatal(err)
		}
		evs = append(evs, part...)
	}
	return evs
}

func req(user string, qty int64, rid string) seckill.Buy {
	return seckill.Buy{UserID: user, Qty: qty, RequestID: rid, OrderID: "order-" + user + "-" + rid}
}

func (e *env) reserve(t testing.TB, sale int64, reqs ...seckill.Buy) []seckill.Answer {
	t.Helper()
	d, err := e.inv.Reserve(context.Background(), sale, reqs)
	if err != nil {
		t.Fatal(err)
	}
	return d.Answers
}

// ok is the code of an accepted buy.
const ok = seckill.CodeOK

func TestReserveBranches(t *testing.T) {
	e := newEnv(t)
	const h = time.Hour
	tests := []struct {
		name string
		// sale setup
		total, limit int64
		start, end   time.Duration
		status       seckill.Status
		noSale       bool
		before       []seckill.Buy // decided first
		req          seckill.Buy
		want         seckill.Code // "": accepted
		wantRemain   int64
		wantSold     int64
	}{
		{name: "accepted", total: 10, limit: 2, start: -h, end: h, req: req("u1", 2, "r1"), wantRemain: 8, wantSold: 2},
		{name: "sale not found", noSale: true, req: req("u1", 1, "r1"), want: seckill.CodeSaleNotFound},
		{name: "not started", total: 10, limit: 2, start: h, end: 2 * h, req: req("u1", 1, "r1"), want: seckill.CodeNotStarted, wantRemain: 10},
		{name: "ended by time", total: 10, limit: 2, start: -2 * h, end: -h, req: req("u1", 1, "r1"), want: seckill.CodeEnded, wantRemain: 10},
		{name: "ended by merchant", total: 10, limit: 2, start: -h, end: h, status: seckill.StatusEnded, req: req("u1", 1, "r1"), want: seckill.CodeEnded, wantRemain: 10},
		{name: "paused", total: 10, limit: 2, start: -h, end: h, status: seckill.StatusPaused, req: req("u1", 1, "r1"), want: seckill.CodePaused, wantRemain: 10},
		{name: "qty above limit", total: 10, limit: 2, start: -h, end: h, req: req("u1", 3, "r1"), want: seckill.CodeLimitExceeded, wantRemain: 10},
		{name: "limit reached over requests", total: 10, limit: 2, start: -h, end: h,
			before: []seckill.Buy{req("u1", 1, "r0")}, req: req("u1", 2, "r1"), want: seckill.CodeLimitExceeded, wantRemain: 9, wantSold: 1},
		{name: "other users not limited", total: 10, limit: 2, start: -h, end: h,
			before: []seckill.Buy{req("u1", 2, "r0")}, req: req("u2", 2, "r1"), wantRemain: 6, wantSold: 4},
		{name: "sold out", total: 2, limit: 2, start: -h, end: h,
			before: []seckill.Buy{req("u1", 2, "r0")}, req: req("u2", 1, "r1"), want: seckill.CodeSoldOut, wantRemain: 0, wantSold: 2},
		{name: "not enough for qty", total: 3, limit: 2, start: -h, end: h,
			before: []seckill.Buy{req("u1", 2, "r0")}, req: req("u2", 2, "r1"), want: seckill.CodeSoldOut, wantRemain: 1, wantSold: 2},
		{name: "last units exactly", total: 3, limit: 2, start: -h, end: h,
			before: []seckill.Buy{req("u1", 1, "r0")}, req: req("u2", 2, "r1"), wantRemain: 0, wantSold: 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sale := int64(1_000_000) + e.next
			if !tc.noSale {
				st := []seckill.Status{}
				if tc.status != "" {
					st = append(st, tc.status)
				}
				sale = e.mustSale(t, tc.total, tc.limit, tc.start, tc.end, st...)
			}
			for _, b := range tc.before {
				if r := e.reserve(t, sale, b)[0]; r.Code != ok {
					t.Fatalf("setup request %v: %v", b, r.Code)
				}
			}
			want := tc.want
			if want == "" {
				want = ok
			}
			r := e.reserve(t, sale, tc.req)[0]
			if r.Code != want {
				t.Fatalf("code = %v, want %v", r.Code, want)
			}
			if tc.noSale {
				return
			}
			if r.Remaining != tc.wantRemain {
				t.Errorf("remaining = %d, want %d", r.Remaining, tc.wantRemain)
			}
			st := e.stock(t, sale)
			if st.Available != tc.wantRemain || st.Sold != tc.wantSold || st.Available+st.Sold != st.Total {
				t.Errorf("stock = %+v, want available %d sold %d", st, tc.wantRemain, tc.wantSold)
			}
			if want == ok && r.OrderID != tc.req.OrderID {
				t.Errorf("order id = %q, want %q", r.OrderID, tc.req.OrderID)
			}
			if want != ok && r.OrderID != "" {
				t.Errorf("refusal carries order id %q", r.OrderID)
			}
		})
	}
}

func TestReserveWritesOutboxEvent(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	sale := e.mustSale(t, 10, 3, -time.Hour, time.Hour)
	before := time.Now().Add(-time.Second).UnixMilli()
	r := e.reserve(t, sale, req("alice", 3, "req-0001"))[0]
	if r.Code != ok {
		t.Fatal(r.Code)
	}
	evs := e.outbox(t, sale)
	if len(evs) != 1 {
		t.Fatalf("outbox = %+v; want one event", evs)
	}
	ev := evs[0]
	want := seckill.Event{OrderID: r.OrderID, SaleID: sale, UserID: "alice", Qty: 3, PriceCents: 250, RequestID: "req-0001", At: ev.At}
	if ev != want {
		t.Errorf("event %+v, want %+v", ev, want)
	}
	if ev.At < before || ev.At > time.Now().UnixMilli()+1000 {
		t.Errorf("event ts = %d, want about now", ev.At)
	}
	acc, merchant, ok, err := e.inv.Charging(ctx, sale, r.OrderID, "alice")
	if err != nil || !ok || acc.UserID != "alice" || acc.Qty != 3 || acc.RequestID != "req-0001" || merchant != 0 {
		t.Errorf("accepted order = %+v of merchant %d, %v, %v", acc, merchant, ok, err)
	}
	buyers, _ := e.inv.Buyers(ctx, sale)
	if buyers["alice"] != 3 {
		t.Errorf("buyers = %v", buyers)
	}
	// Every key of a sale expires after it ends, so memory stays bounded.
	k := e.first(sale)
	for _, k := range []string{k.Stock(), k.Buyers(), k.Reqs(), k.Outbox(), k.Orders()} {
		if ttl := e.rdb.PTTL(ctx, k).Val(); ttl <= 0 {
			t.Errorf("%s has no TTL (%v)", k, ttl)
		}
	}
}

func TestReserveIdempotent(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	sale := e.mustSale(t, 5, 2, -time.Hour, time.Hour)

	first := e.reserve(t, sale, req("u1", 1, "again-01"))[0]
	retry := seckill.Buy{UserID: "u1", Qty: 1, RequestID: "again-01", OrderID: "another-order-id"}
	// The same request twice in one batch, and once more later.
	batch := e.reserve(t, sale, retry, retry)
	later := e.reserve(t, sale, retry)[0]
	for i, r := range []seckill.Answer{batch[0], batch[1], later} {
		if r != first {
			t.Errorf("repeat %d = %+v, want %+v", i, r, first)
		}
	}
	if st := e.stock(t, sale); st.Sold != 1 {
		t.Errorf("sold = %d after repeats, want 1", st.Sold)
	}
	if n := len(e.outbox(t, sale)); n != 1 {
		t.Errorf("outbox holds %d events, want 1", n)
	}

	// A refusal is remembered too: the same request id stays refused even
	// when the user's earlier units are released.
	e.reserve(t, sale, req("u1", 1, "fill-001"))
	refused := e.reserve(t, sale, req("u1", 1, "over-001"))[0]
	if refused.Code != seckill.CodeLimitExceeded {
		t.Fatalf("third unit: %v", refused.Code)
	}
	if _, _, err := e.inv.Release(ctx, sale, first.OrderID, "u1", 1); err != nil {
		t.Fatal(err)
	}
	if again := e.reserve(t, sale, req("u1", 1, "over-001"))[0]; again != refused {
		t.Errorf("retry of refusal = %+v, want %+v", again, refused)
	}
	if fresh := e.reserve(t, sale, req("u1", 1, "fresh-01"))[0]; fresh.Code != ok {
		t.Errorf("fresh request after release: %v", fresh.Code)
	}
}

func TestReserveAcceptedSurvivesEnd(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	sale := e.mustSale(t, 5, 2, -time.Hour, time.Hour)
	first := e.reserve(t, sale, req("u1", 1, "before-end"))[0]
	if _, err := e.inv.SetStatus(ctx, sale, seckill.ActionEnd); err != nil {
		t.Fatal(err)
	}
	if r := e.reserve(t, sale, req("u1", 1, "before-end"))[0]; r != first {
		t.Errorf("retry after end = %+v, want the original %+v", r, first)
	}
	if r := e.reserve(t, sale, req("u1", 1, "after-end"))[0]; r.Code != seckill.CodeEnded {
		t.Errorf("new request after end: %v, want ended", r.Code)
	}
}

func TestWindowRefusalsAreNotRemembered(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	now := time.Now()
	sale := e.mustSale(t, 5, 2, time.Hour, 2*time.Hour)
	if r := e.reserve(t, sale, req("u1", 1, "early-01"))[0]; r.Code != seckill.CodeNotStarted {
		t.Fatalf("early: %v", r.Code)
	}
	// The merchant moves the start into the past: the same request id buys.
	_, err := e.inv.Warm(ctx, seckill.Sale{ID: sale, Total: 5, PerUserLimit: 2, PriceCents: 250,
		StartsAt: now.Add(-time.Minute), EndsAt: now.Add(time.Hour), Status: seckill.StatusActive})
	if err != nil {
		t.Fatal(err)
	}
	if r := e.reserve(t, sale, req("u1", 1, "early-01"))[0]; r.Code != ok {
		t.Errorf("after start: %v", r.Code)
	}
}

func TestReserveBatchMixed(t *testing.T) {
	e := newEnv(t)
	sale := e.mustSale(t, 3, 2, -time.Hour, time.Hour)
	res := e.reserve(t, sale,
		req("a", 2, "batch-01"), // ok, 1 left
		req("a", 1, "batch-02"), // limit
		req("b", 2, "batch-03"), // only 1 left: sold out
		req("b", 1, "batch-04"), // ok, 0 left
		req("c", 1, "batch-05"), // sold out
	)
	want := []struct {
		code   seckill.Code
		remain int64
	}{{ok, 1}, {seckill.CodeLimitExceeded, 1}, {seckill.CodeSoldOut, 1}, {ok, 0}, {seckill.CodeSoldOut, 0}}
	for i, w := range want {
		if res[i].Code != w.code || res[i].Remaining != w.remain {
			t.Errorf("request %d = %+v, want %v remaining %d", i, res[i], w.code, w.remain)
		}
	}
}

// TestReserveBatchRepeats: a request id repeated within one batch gets the
// answer of its first occurrence, and a user's units add up across the
// batch (the script reads and writes the hashes once per batch).
func TestReserveBatchRepeats(t *testing.T) {
	e := newEnv(t)
	sale := e.mustSale(t, 10, 2, -time.Hour, time.Hour)
	res := e.reserve(t, sale,
		req("a", 1, "rep-0001"), // ok, 9 left
		req("a", 1, "rep-0001"), // the same request: the same order
		req("a", 1, "rep-0002"), // ok: a holds 2
		req("a", 1, "rep-0003"), // limit
		req("b", 2, "rep-0004"), // ok, 6 left
		req("a", 1, "rep-0003"), // the same refusal
	)
	if res[0].Code != ok || res[1] != res[0] || res[2].Code != ok || res[2].OrderID == res[0].OrderID {
		t.Errorf("repeats: %+v", res[:3])
	}
	if res[3].Code != seckill.CodeLimitExceeded || res[5] != res[3] || res[4].Code != ok || res[4].Remaining != 6 {
		t.Errorf("limit and repeat: %+v", res[3:])
	}
	buyers, err := e.inv.Buyers(context.Background(), sale)
	if err != nil || buyers["a"] != 2 || buyers["b"] != 2 {
		t.Errorf("buyers %v, %v", buyers, err)
	}
	if st := e.stock(t, sale); st.Sold != 4 || st.Available != 6 {
		t.Errorf("stock %+v", st)
	}
	// One entry for the call, holding the three orders it accepted.
	if n := e.rdb.XLen(context.Background(), e.first(sale).Outbox()).Val(); n != 1 {
		t.Errorf("outbox holds %d entries, want 1", n)
	}
	evs := e.outbox(t, sale)
	if len(evs) != 3 || evs[0].OrderID != res[0].OrderID || evs[1].OrderID != res[2].OrderID || evs[2].OrderID != res[4].OrderID {
		t.Errorf("outbox events %+v, want the orders of requests 0, 2 and 4", evs)
	}
}

// TestReserveLargeBatch: a batch larger than the script's chunk of
// arguments per command (1000) is decided and recorded whole.
func TestReserveLargeBatch(t *testing.T) {
	e := newEnv(t)
	sale := e.mustSale(t, 1200, 1, -time.Hour, time.Hour)
	reqs := make([]seckill.Buy, 1500)
	for i := range reqs {
		reqs[i] = req(fmt.Sprintf("user-%04d", i), 1, fmt.Sprintf("large-%04d", i))
	}
	res := e.reserve(t, sale, reqs...)
	for i, r := range res {
		if want := i < 1200; (r.Code == ok) != want || (!want && r.Code != seckill.CodeSoldOut) {
			t.Fatalf("request %d: %+v", i, r)
		}
	}
	if again := e.reserve(t, sale, reqs...); fmt.Sprint(again) != fmt.Sprint(res) {
		t.Error("the batch again did not get the same answers")
	}
	buyers, err := e.inv.Buyers(context.Background(), sale)
	if err != nil || len(buyers) != 1200 {
		t.Errorf("%d buyers, %v", len(buyers), err)
	}
	if n := len(e.outbox(t, sale)); n != 1200 {
		t.Errorf("outbox holds %d events, want 1200", n)
	}
	if st := e.stock(t, sale); st.Sold != 1200 || st.Available != 0 {
		t.Errorf("stock %+v", st)
	}
}

func TestWarm(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	sale := e.mustSale(t, 10, 5, -time.Hour, time.Hour)
	e.reserve(t, sale, req("u", 4, "warm-0001"))

	// Warming a running sale updates its settings and keeps its counters.
	now := time.Now()
	upd := seckill.Sale{ID: sale, Total: 10, PerUserLimit: 7, PriceCents: 999, StartsAt: now.Add(-time.Hour),
		EndsAt: now.Add(2 * time.Hour), Status: seckill.StatusPaused, Buckets: 1}
	if avail, err := e.inv.Warm(ctx, upd); err != nil || avail != 6 {
		t.Fatalf("warm = %d, %v; want 6", avail, err)
	}
	st := e.stock(t, sale)
	if st.Available != 6 || st.Sold != 4 || st.Limit != 7 || st.PriceCents != 999 || st.Status != seckill.StatusPaused {
		t.Errorf("after update: %+v", st)
	}
	// A rebuild sets the counters from the ledger's figures: its orders.
	order := seckill.Event{OrderID: "ledger-order", SaleID: sale, UserID: "u", Qty: 3, RequestID: "ledger-req", PriceCents: 999, At: now.UnixMilli()}
	if err := e.inv.Rebuild(ctx, upd, 3, []seckill.Event{order}, nil); err != nil {
		t.Fatal(err)
	}
	if st := e.stock(t, sale); st.Available != 7 || st.Sold != 3 || st.Total != 10 {
		t.Errorf("after a rebuild: %+v", st)
	}
	if ttl := e.rdb.PTTL(ctx, e.first(sale).Stock()).Val(); ttl < 2*time.Hour+keep-time.Minute || ttl > 2*time.Hour+keep {
		t.Errorf("stock TTL = %v, want about the end + %s", ttl, keep)
	}
}

func TestRestockAndRelease(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	sale := e.mustSale(t, 2, 2, -time.Hour, time.Hour)
	r := e.reserve(t, sale, req("u", 2, "rel-0001"))[0]
	if r.Code != ok {
		t.Fatal(r.Code)
	}
	if avail, err := e.inv.Restock(ctx, sale, 5); err != nil || avail != 5 {
		t.Fatalf("restock = %d, %v; want 5", avail, err)
	}
	if _, err := e.inv.Restock(ctx, 999_999, 5); !errors.Is(err, seckill.ErrSaleNotFound) {
		t.Errorf("restock of unknown sale: %v", err)
	}

	avail, released, err := e.inv.Release(ctx, sale, r.OrderID, "u", 2)
	if err != nil || !released || avail != 7 {
		t.Fatalf("release = %d, %v, %v; want 7, true", avail, released, err)
	}
	// Exactly once: a second release changes nothing.
	avail, released, err = e.inv.Release(ctx, sale, r.OrderID, "u", 2)
	if err != nil || released || avail != 7 {
		t.Fatalf("second release = %d, %v, %v; want nothing released, 7 available", avail, released, err)
	}
	st := e.stock(t, sale)
	if st.Total != 7 || st.Available != 7 || st.Sold != 0 {
		t.Errorf("stock after release = %+v", st)
	}
	if b, _ := e.inv.Buyers(ctx, sale); len(b) != 0 {
		t.Errorf("buyers after release = %v, want none", b)
	}
	if _, _, err := e.inv.Release(ctx, 999_999, "x", "u", 1); !errors.Is(err, seckill.ErrSaleNotFound) {
		t.Errorf("release in unknown sale: %v", err)
	}
}

func TestSetStatus(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	sale := e.mustSale(t, 2, 1, -time.Hour, time.Hour)
	steps := []struct {
		action seckill.Action
		want   seckill.Status
		err    error
	}{
		{seckill.ActionPause, seckill.StatusPaused, nil},
		{seckill.ActionResume, seckill.StatusActive, nil},
		{seckill.ActionEnd, seckill.StatusEnded, nil},
		{seckill.ActionResume, "", seckill.ErrEnded},
		{seckill.ActionPause, "", seckill.ErrEnded},
	}
	for _, s := range steps {
		got, err := e.inv.SetStatus(ctx, sale, s.action)
		if got != s.want || !errors.Is(err, s.err) {
			t.Errorf("%s = %q, %v; want %q, %v", s.action, got, err, s.want, s.err)
		}
	}
	if _, err := e.inv.SetStatus(ctx, 999_999, seckill.ActionPause); !errors.Is(err, seckill.ErrSaleNotFound) {
		t.Errorf("pause unknown sale: %v", err)
	}
}

// TestScriptFlushMidRun drops every script from Redis while buyers keep
// buying: Run falls back from EVALSHA to EVAL, and no request fails.
func TestScriptFlushMidRun(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	const buyers, each = 20, 50
	sale := e.mustSale(t, buyers*each, each, -time.Hour, time.Hour)
	stop := make(chan struct{})
	flushed := make(chan int)
	go func() {
		n := 0
		for {
			select {
			case <-stop:
				flushed <- n
				return
			default:
			}
			if err := e.rdb.ScriptFlush(ctx).Err(); err != nil {
				t.Error(err)
			}
			n++
		}
	}()
	var wg sync.WaitGroup
	for u := range buyers {
		wg.Go(func() {
			for i := range each {
				d, err := e.inv.Reserve(ctx, sale, []seckill.Buy{req(fmt.Sprint("u", u), 1, fmt.Sprintf("flush-%04d", i))})
				if err != nil {
					t.Errorf("reserve during SCRIPT FLUSH: %v", err)
					return
				}
				if d.Answers[0].Code != ok {
					t.Errorf("reserve refused: %v", d.Answers[0].Code)
				}
			}
		})
	}
	wg.Wait()
	close(stop)
	if n := <-flushed; n < 2 {
		t.Logf("only %d flushes happened during the run", n)
	}
	if st := e.stock(t, sale); st.Sold != buyers*each || st.Available != 0 {
		t.Errorf("stock = %+v, want all %d sold", st, buyers*each)
	}
}

// BenchmarkReserve measures the reserve path against the real Redis: one
// request per Lua call against 64 per call. ns/op is per request decided.
func BenchmarkReserve(b *testing.B) {
	for _, batch := range []int{1, 64} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			e := newEnv(b)
			ctx := context.Background()
			sale := e.mustSale(b, seckill.MaxTotal, seckill.MaxTotal, -time.Hour, time.Hour)
			reqs := make([]seckill.Buy, batch)
			b.ResetTimer()
			for i := 0; i < b.N; i += batch {
				n := min(batch, b.N-i)
				for j := range n {
					id := fmt.Sprintf("bench-%010d", i+j)
					reqs[j] = seckill.Buy{UserID: id, Qty: 1, RequestID: id, OrderID: id}
				}
				if _, err := e.inv.Reserve(ctx, sale, reqs[:n]); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "req/s")
			_ = e.rdb.Del(ctx, e.keys.Part(inventory.First(sale).Tag).All()...)
		})
	}
}
