package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/seckill/seckill"
	"github.com/seckill/seckill/cmd/seckill/loadtest"
	"github.com/seckill/seckill/configs"
	"github.com/seckill/seckill/sales"
)

// Demo sale: opens demoOpensIn after start, sells demoUnits to a crowd of
// simulated shoppers buying at demoRate a second, so the shopper page's
// stock falls and the dashboard moves for a minute or so.
const (
	demoName    = "Demo drop"
	demoItem    = "Mechanical keyboard K2"
	demoOpensIn = 8 * time.Second
	demoUnits   = 400
	demoRate    = 6
	demoUsers   = 300
)

// runDemo ends the demo sales an earlier demo left on sale, creates a new
// one, prints where to look, and runs the crowd (the load tool at a gentle
// rate) until the sale ends or ctx does.
func runDemo(ctx context.Context, cfg configs.Config, svc *sales.Service, addr string) error {
	if err := endDemos(ctx, svc); err != nil {
		return err
	}
	now := time.Now().UTC().Truncate(time.Second)
	v, err := svc.Create(ctx, seckill.Sale{
		Name: demoName, Item: demoItem, PriceCents: 4999, Total: demoUnits, PerUserLimit: 2,
		StartsAt: now.Add(demoOpensIn), EndsAt: now.Add(30 * time.Minute),
	})
	if err != nil {
		return fmt.Errorf("demo sale: %w", err)
	}
	sale := v.Sale
	base := "http://" + addr
	fmt.Printf("  demo: a sale of %d keyboards opens in %s; %d simulated shoppers then buy about %d a second.\n"+
		"    watch it: %s/#/sales/%d\n    dashboard: %s/admin#/sales/%d\n\n",
		demoUnits, demoOpensIn, demoUsers, demoRate, base, sale.ID, base, sale.ID)
	select {
	case <-ctx.Done():
		return nil
	case <-time.After(time.Until(sale.StartsAt)):
	}
	_, err = loadtest.Run(ctx, loadtest.Options{
		URL: base, SaleID: sale.ID, Users: demoUsers, JWTSecret: cfg.JWTSecret, Qty: 1, Retries: 0.05,
		Rate: demoRate, MaxInFlight: 50, Duration: time.Until(sale.EndsAt), NoAudit: true,
	})
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// endDemos ends the demo sales still on from an earlier run (in the same
// data directory), so a second demo does not stand beside the first.
func endDemos(ctx context.Context, svc *sales.Service) error {
	vs, err := svc.All(ctx)
	if err != nil {
		return fmt.Errorf("demo: listing sales: %w", err)
	}
	now := time.Now()
	for _, v := range vs {
		if v.Sale.Name != demoName || v.Sale.Item != demoItem || v.Phase(now) == seckill.PhaseEnded {
			continue
		}
		if _, err := svc.Act(ctx, v.Sale.ID, seckill.ActionEnd); err != nil {
			return fmt.Errorf("demo: ending the earlier demo sale %d: %w", v.Sale.ID, err)
		}
		slog.Info("demo: ended the demo sale an earlier demo left on sale", "sale", v.Sale.ID)
	}
	return nil
}
