package main

import (
	"context"
	"testing"
	"time"

	"github.com/seckill/seckill"
	"github.com/seckill/seckill/system/servertest"
)

// TestDemoEndsTheLastDemo: a second demo ends the demo sale the first left
// on sale instead of standing beside it; other sales are left alone.
func TestDemoEndsTheLastDemo(t *testing.T) {
	env := servertest.New(t)
	srv := env.Server(t, nil)
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Second)
	sale := func(name, item string) int64 {
		v, err := srv.Sales.Create(ctx, seckill.Sale{Name: name, Item: item, PriceCents: 4999, Total: 10, PerUserLimit: 2,
			StartsAt: now.Add(-time.Minute), EndsAt: now.Add(time.Hour)})
		if err != nil {
			t.Fatal(err)
		}
		return v.Sale.ID
	}
	earlier, other := sale(demoName, demoItem), sale("Another drop", demoItem)
	if err := endDemos(ctx, srv.Sales); err != nil {
		t.Fatal(err)
	}
	for id, want := range map[int64]seckill.Phase{earlier: seckill.PhaseEnded, other: seckill.PhaseActive} {
		v, err := srv.Sales.Get(ctx, id)
		if err != nil || v.Phase(time.Now()) != want {
			t.Errorf("sale %d after a new demo: %v, %v; want %s", id, v.Phase(time.Now()), err, want)
		}
	}
	// Again, with the earlier demo ended already: nothing to do.
	if err := endDemos(ctx, srv.Sales); err != nil {
		t.Errorf("a third demo: %v", err)
	}
}
