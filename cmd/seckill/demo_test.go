package main

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/seckill/seckill"
	"github.com/seckill/seckill/system/servertest"
)

// TestDemoEndsTheLastDemo: a second demo ends the sale the first left on
// sale instead of standing beside it; a sale that only looks like the
// demo's, and a noted id that is no longer the demo's, are left alone.
func TestDemoEndsTheLastDemo(t *testing.T) {
	env := servertest.New(t)
	srv := env.Server(t, nil)
	ctx := context.Background()
	dir := t.TempDir()
	now := time.Now().UTC().Truncate(time.Second)
	sale := func(name string) int64 {
		v, err := srv.Sales.Create(ctx, seckill.Sale{Name: name, Item: demoItem, PriceCents: 4999, Total: 10, PerUserLimit: 2,
			StartsAt: now.Add(-time.Minute), EndsAt: now.Add(time.Hour)}.Input())
		if err != nil {
			t.Fatal(err)
		}
		return v.Sale.ID
	}
	note := func(id int64) {
		if err := os.WriteFile(filepath.Join(dir, demoFile), []byte(strconv.FormatInt(id, 10)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	phase := func(id int64) seckill.Phase {
		v, err := srv.Sales.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return v.Phase(time.Now())
	}
	if err := endDemo(ctx, srv.Sales, dir); err != nil {
		t.Fatalf("the first demo: %v", err)
	}
	last, lookalike, other := sale(demoName), sale(demoName), sale("Another drop")
	note(last)
	if err := endDemo(ctx, srv.Sales, dir); err != nil {
		t.Fatal(err)
	}
	if phase(last) != seckill.PhaseEnded || phase(lookalike) != seckill.PhaseActive {
		t.Errorf("after a new demo: the last demo's sale %s, a look-alike %s", phase(last), phase(lookalike))
	}
	note(other) // the id now names another sale
	if err := endDemo(ctx, srv.Sales, dir); err != nil || phase(other) != seckill.PhaseActive {
		t.Errorf("a noted id that is not the demo's: %v, %s", err, phase(other))
	}
}
