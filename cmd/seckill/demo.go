package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
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
	// Enough shoppers that few pick a third unit past the limit of two
	// (cap refusals would read as a bot farm on the dashboard); each
	// holds demoWallet and pays demoPay of its orders at once.
	demoUsers  = 3000
	demoWallet = 200_00
	demoPay    = 0.9
)

// demoFunds fills the demo shoppers' wallets (funds.Store).
type demoFunds interface {
	Move(ctx context.Context, m seckill.Movement) (int64, bool, error)
}

// demoSales are the sales a demo creates, reads and ends (sales.Service,
// as the server holds it).
type demoSales interface {
	Create(ctx context.Context, in seckill.SaleInput) (sales.View, error)
	Get(ctx context.Context, id int64) (sales.View, error)
	Act(ctx context.Context, id int64, a seckill.Action) (sales.View, error)
}

// runDemo ends the demo sale an earlier demo left on sale, creates a new
// one, prints where to look, and runs the crowd (the load tool at a gentle
// rate; shoppers with money in their wallets who pay most of what they
// buy) until the sale ends or ctx does.
func runDemo(ctx context.Context, cfg configs.Config, svc demoSales, wallets demoFunds, addr string) error {
	if err := endDemo(ctx, svc, cfg.Process.DataDir); err != nil {
		return err
	}
	now := time.Now().UTC().Truncate(time.Second)
	v, err := svc.Create(ctx, seckill.Sale{
		Name: demoName, Item: demoItem, PriceCents: 4999, Total: demoUnits, PerUserLimit: 2,
		StartsAt: now.Add(demoOpensIn), EndsAt: now.Add(30 * time.Minute),
	}.Input())
	if err != nil {
		return fmt.Errorf("demo sale: %w", err)
	}
	sale := v.Sale
	if err := noteDemo(cfg.Process.DataDir, sale.ID); err != nil {
		slog.Warn("demo: could not note the demo sale; the next demo will not end it", "err", err)
	}
	base := "http://" + addr
	fmt.Printf("  demo: a sale of %d keyboards opens in %s; %d simulated shoppers then buy about %d a second and pay most orders.\n"+
		"    watch it: %s/#/sales/%d\n    dashboard: %s/admin#/sales/%d\n\n",
		demoUnits, demoOpensIn, demoUsers, demoRate, base, sale.ID, base, sale.ID)
	select {
	case <-ctx.Done():
		return nil
	case <-time.After(time.Until(sale.StartsAt)):
	}
	_, err = loadtest.Run(ctx, loadtest.Options{
		URL: base, SaleID: sale.ID, Users: demoUsers, JWTSecret: cfg.Sessions.JWTSecret, Qty: 1, Retries: 0.05,
		Rate: demoRate, MaxInFlight: 50, Duration: time.Until(sale.EndsAt), NoAudit: true,
		Pay: demoPay, Fund: func(ctx context.Context, user string) error {
			// The shopper's balance, as if topped up before the sale.
			_, _, err := wallets.Move(ctx, seckill.TopupMovement("demo-"+user, user, demoWallet, time.Now()))
			return err
		},
	})
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// demoFile, in the data directory, holds the id of the last demo's sale.
const demoFile = "demo-sale"

// noteDemo keeps the id of this demo's sale for the next demo.
func noteDemo(dir string, id int64) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, demoFile), []byte(strconv.FormatInt(id, 10)+"\n"), 0o644)
}

// endDemo ends the sale the last demo in this data directory created, if
// it is still on and still the demo's (a ledger made anew may give its id
// to another sale), so a second demo does not stand beside the first.
func endDemo(ctx context.Context, svc demoSales, dir string) error {
	b, err := os.ReadFile(filepath.Join(dir, demoFile))
	if err != nil {
		return nil // no demo ran here before
	}
	id, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return nil
	}
	v, err := svc.Get(ctx, id)
	switch {
	case errors.Is(err, seckill.ErrSaleNotFound):
		return nil
	case err != nil:
		return fmt.Errorf("demo: reading the last demo sale %d: %w", id, err)
	case v.Sale.Name != demoName || v.Sale.Item != demoItem || v.Phase(time.Now()) == seckill.PhaseEnded:
		return nil
	}
	if _, err := svc.Act(ctx, id, seckill.ActionEnd); err != nil {
		return fmt.Errorf("demo: ending the last demo sale %d: %w", id, err)
	}
	slog.Info("demo: ended the sale the last demo left on sale", "sale", id)
	return nil
}
