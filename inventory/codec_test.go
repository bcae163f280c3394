package inventory_test

import (
	"context"
	"testing"
	"time"

	"github.com/seckill/seckill"
	"github.com/seckill/seckill/inventory"
)

// TestScriptsAgreeWithTheCodecs: what warm.lua writes (the stock hash) and
// what buy.lua stores (a request's answer, an accepted order's record, its
// outbox line) read back through the codecs as what was decided, and
// encoded again are the very strings the scripts wrote: Go and Lua hold
// each format the same way (Rebuild writes them from Go).
func TestScriptsAgreeWithTheCodecs(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	now := time.Now().Truncate(time.Millisecond)
	sl := seckill.Sale{ID: 424242, Total: 10, PerUserLimit: 3, PriceCents: 4999, StartsAt: now.Add(-time.Minute),
		EndsAt: now.Add(time.Hour), Status: seckill.StatusActive, Buckets: 1, RequireTicket: true, PowDifficulty: 12,
		WaitingRoom: true, QueueOpensAt: now.Add(-time.Hour), AdmitPerSecond: 250}
	if _, err := e.inv.Warm(ctx, sl); err != nil {
		t.Fatal(err)
	}
	k := e.first(sl.ID)
	raw, err := e.rdb.HMGet(ctx, k.Stock(), inventory.StockFields...).Result()
	if err != nil {
		t.Fatal(err)
	}
	st, ok := inventory.DecodeStock(raw)
	want := seckill.Stock{Total: 10, Available: 10, Limit: 3, PriceCents: 4999, Start: sl.StartsAt, End: sl.EndsAt,
		Status: seckill.StatusActive, RequireTicket: true, PowDifficulty: 12, WaitingRoom: true, AdmitPerSecond: 250,
		QueueOpensAt: sl.QueueOpensAt}
	if !ok || !st.Start.Equal(want.Start) || !st.End.Equal(want.End) || !st.QueueOpensAt.Equal(want.QueueOpensAt) {
		t.Fatalf("stock hash reads as %+v (present %v), want %+v", st, ok, want)
	}
	st.Start, st.End, st.QueueOpensAt = want.Start, want.End, want.QueueOpensAt
	if st != want {
		t.Errorf("stock hash reads as %+v, want %+v", st, want)
	}

	for _, b := range []seckill.Buy{req("alice", 2, "agree-0001"), req("alice", 2, "agree-0002")} { // accepted, then over the cap
		a := e.reserve(t, sl.ID, b)[0]
		stored, err := e.rdb.HGet(ctx, k.Reqs(), inventory.ReqField(b.UserID, b.RequestID)).Result()
		if err != nil {
			t.Fatal(err)
		}
		got, err := inventory.DecodeAnswer(stored)
		if err != nil || got != a || inventory.EncodeAnswer(got) != stored {
			t.Errorf("stored answer %q reads as %+v (%v), decided %+v, encodes as %q", stored, got, err, a, inventory.EncodeAnswer(got))
		}
		if a.Code != seckill.CodeOK {
			continue
		}
		rec, err := e.rdb.HGet(ctx, k.Orders(), a.OrderID).Result()
		if err != nil {
			t.Fatal(err)
		}
		ev, err := inventory.DecodeOrder(sl.ID, a.OrderID, rec)
		if err != nil || inventory.EncodeOrder(ev) != rec {
			t.Errorf("order record %q reads as %+v (%v), encodes as %q", rec, ev, err, inventory.EncodeOrder(ev))
		}
		out := e.outbox(t, sl.ID)
		if len(out) != 1 || out[0] != ev || ev.Qty != 2 || ev.PriceCents != 4999 || ev.UserID != "alice" {
			t.Errorf("outbox %+v, order record %+v", out, ev)
		}
	}
}
