package main

import (
	"context"
	"fmt"
	"time"

	"github.com/seckill/seckill/cmd/seckill/loadtest"
	"github.com/seckill/seckill/configs"
	"github.com/seckill/seckill/orders"
	"github.com/seckill/seckill/server"
)

// Demo sale: opens demoOpensIn after start, sells demoUnits to a crowd of
// simulated shoppers buying at demoRate a second, so the shopper page's
// stock falls and the dashboard moves for a minute or so.
const (
	demoOpensIn = 8 * time.Second
	demoUnits   = 400
	demoRate    = 6
	demoUsers   = 300
)

// runDemo creates the demo sale, prints where to look, and runs the crowd
// (the load tool at a gentle rate) until the sale ends or ctx does.
func runDemo(ctx context.Context, cfg configs.Config, srv *server.Server, addr string) error {
	now := time.Now().UTC().Truncate(time.Second)
	sale, err := srv.CreateSale(ctx, orders.Sale{
		Name: "Demo drop", Item: "Mechanical keyboard K2", PriceCents: 4999, Total: demoUnits, PerUserLimit: 2,
		StartsAt: now.Add(demoOpensIn), EndsAt: now.Add(30 * time.Minute),
	})
	if err != nil {
		return fmt.Errorf("demo sale: %w", err)
	}
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
