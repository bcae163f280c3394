package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"text/tabwriter"
	"time"

	"github.com/seckill/seckill/configs"
	"github.com/seckill/seckill/system"
	"github.com/seckill/seckill/worker"
)

// errDrift makes reconcile exit non-zero.
var errDrift = errors.New("redis and the ledger disagree")

func runReconcile(ctx context.Context, cfg configs.Config, args []string) error {
	fs := command("reconcile")
	sale := fs.Int64("sale", 0, "reconcile this sale only (default: every sale whose Redis keys should exist)")
	repair := fs.Bool("repair", false, "write orders missing from the ledger beyond reconcile_grace into it, then rebuild Redis from the ledger (pauses a live sale while it drains)")
	wait := fs.Duration("wait", 0, "wait up to this long for orders in flight to reach the ledger")
	funds := fs.Bool("funds", false, "reconcile money instead: every account's Redis balance against its ledger entries, their sums, the orders' charges; with --repair, write the ledger's sums into Redis once nothing is on its way")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: seckill reconcile [--sale N | --funds] [--repair] [--wait D]")
		fs.PrintDefaults()
	}
	if err := parse(fs, args); err != nil {
		return err
	}
	if err := notEmbedded(cfg, "reconcile"); err != nil {
		return err
	}
	sys, err := system.Open(ctx, cfg)
	if err != nil {
		return err
	}
	defer sys.Close()
	if *funds {
		return reconcileFunds(ctx, os.Stdout, sys.FundsReconciler(), *repair, *wait)
	}
	keep := cfg.Orders.Keep()
	rc := sys.Reconciler()
	ids := []int64{*sale}
	if *sale == 0 {
		if ids, err = sys.Ledger.SaleIDs(ctx, time.Now().Add(-keep)); err != nil {
			return err
		}
	}
	return reconcile(ctx, os.Stdout, rc, ids, *repair, *wait)
}

// reconcile checks (and with repair, rebuilds) each sale and prints a table.
func reconcile(ctx context.Context, out io.Writer, rc *worker.Reconciler, ids []int64, repair bool, wait time.Duration) error {
	var reports []worker.Report
	for _, id := range ids {
		if repair {
			if err := rc.Repair(ctx, id, wait); err != nil {
				return fmt.Errorf("repair sale %d: %w", id, err)
			}
			fmt.Fprintf(out, "sale %d: rebuilt Redis from the ledger\n", id)
		}
		rep, err := rc.Wait(ctx, id, wait)
		if err != nil {
			return fmt.Errorf("sale %d: %w", id, err)
		}
		reports = append(reports, rep)
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "sale\tredis total\tavailable\tsold\tledger total\tavailable\tsold\tin flight\tmissing\tunreleased\toutbox\tverdict\t")
	drifted := 0
	for _, r := range reports {
		verdict := "ok"
		if len(r.Drift) > 0 {
			verdict = "DRIFT"
			drifted++
		}
		fmt.Fprintf(tw, "%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t\n", r.SaleID, r.RedisTotal, r.RedisAvailable, r.RedisSold,
			r.LedgerTotal, r.LedgerAvailable, r.LedgerSold, r.InFlight, len(r.Missing), r.Unreleased, r.Outbox, verdict)
	}
	tw.Flush()
	for _, r := range reports {
		for _, d := range r.Drift {
			fmt.Fprintf(out, "sale %d: %s\n", r.SaleID, d)
		}
	}
	if drifted > 0 {
		return fmt.Errorf("%w in %d of %d sales", errDrift, drifted, len(reports))
	}
	fmt.Fprintf(out, "%d sales reconciled\n", len(reports))
	return nil
}

// reconcileFunds checks (and with repair, rebuilds from the ledger) every
// account's balance and prints the verdict.
func reconcileFunds(ctx context.Context, out io.Writer, fr *worker.FundsReconciler, repair bool, wait time.Duration) error {
	if repair {
		if err := fr.Repair(ctx, max(wait, 10*time.Second)); err != nil {
			return err
		}
		fmt.Fprintln(out, "funds: wrote the ledger's sums into Redis")
	}
	rep, err := fr.Wait(ctx, wait)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "funds: %d accounts, Redis adds up to %d, the ledger to %d, in flight %v\n", rep.Accounts, rep.RedisSum,
		rep.LedgerSum, rep.InFlight)
	for _, d := range rep.Drift {
		fmt.Fprintln(out, "funds:", d)
	}
	if len(rep.Drift) > 0 {
		return fmt.Errorf("%w: %d disagreements in the funds", errDrift, len(rep.Drift))
	}
	fmt.Fprintln(out, "funds reconciled")
	return nil
}
