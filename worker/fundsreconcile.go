package worker

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"time"

	"github.com/seckill/seckill"
	"github.com/seckill/seckill/bus"
	"github.com/seckill/seckill/internal/wait"
	"github.com/seckill/seckill/orders"
)

// FundsBalances are the accounts' balances in Redis (funds.Store): read,
// written back from the ledger after Redis lost them, and whether any
// group's outbox still holds movements on their way.
type FundsBalances interface {
	Balances(ctx context.Context) (map[seckill.FundsAccount]int64, error)
	SetBalances(ctx context.Context, balances map[seckill.FundsAccount]int64) error
	Remember(ctx context.Context, ms []seckill.Movement, now time.Time) error
	Retention() time.Duration
	Pending(ctx context.Context) ([]int, error)
}

// FundsBooks are the funds ledger as the reconciler reads it
// (orders.Store): every account's sum, the movements made lately, and
// the orders whose transfers disagree with their status.
type FundsBooks interface {
	FundsBalances(ctx context.Context) (map[seckill.FundsAccount]int64, error)
	MovementsSince(ctx context.Context, since time.Time) ([]seckill.Movement, error)
	ChargeAnomalies(ctx context.Context) ([]orders.ChargeAnomaly, error)
}

// queueDepth counts what waits in a queue (the bus).
type queueDepth interface {
	Depth(ctx context.Context, queue string) (int, error)
}

// FundsReconciler proves that Redis and the funds ledger agree to the
// cent: per account, Redis's balance equals the sum of its ledger entries
// once nothing is on its way; every account of each adds up to 0; no
// wallet or merchant is below 0; every order's transfers agree with its
// status (a paid order charged once, a refunded one refunded once, a
// cancelled one charged only if voided). It rebuilds the balances from
// the ledger when Redis lost them.
type FundsReconciler struct {
	redis   FundsBalances
	ledger  FundsBooks
	queue   queueDepth
	metrics *ReconcilerMetrics
}

// NewFundsReconciler returns a FundsReconciler; queue (nil: none to ask)
// says whether movements wait in the funds queue, m counts its checks and
// drifts (nil: none).
func NewFundsReconciler(redis FundsBalances, ledger FundsBooks, queue queueDepth, m *ReconcilerMetrics) *FundsReconciler {
	return &FundsReconciler{redis: redis, ledger: ledger, queue: queue, metrics: m}
}

// FundsReport is one comparison.
type FundsReport struct {
	// Accounts counts the accounts either side knows.
	Accounts int
	// RedisSum and LedgerSum add up every account of each side.
	RedisSum, LedgerSum int64
	// InFlight says movements are on their way (an outbox holds some, or
	// the funds queue): balances may differ until they land.
	InFlight bool
	// Drift lists every disagreement; empty means the books reconcile.
	Drift []string
}

// Check compares once. Balances that differ while movements are on their
// way are not drift; read again (Wait) until they land.
func (fr *FundsReconciler) Check(ctx context.Context) (FundsReport, error) {
	var rep FundsReport
	pending, err := fr.redis.Pending(ctx)
	if err != nil {
		return rep, err
	}
	queued := 0
	if fr.queue != nil {
		if queued, err = fr.queue.Depth(ctx, bus.Funds); err != nil {
			return rep, err
		}
	}
	rep.InFlight = len(pending) > 0 || queued > 0
	red, err := fr.redis.Balances(ctx)
	if err != nil {
		return rep, err
	}
	led, err := fr.ledger.FundsBalances(ctx)
	if err != nil {
		return rep, err
	}
	drift := func(format string, args ...any) { rep.Drift = append(rep.Drift, fmt.Sprintf(format, args...)) }
	accounts := map[seckill.FundsAccount]bool{}
	for a, n := range led {
		accounts[a] = true
		rep.LedgerSum += n
		if a.Floored() && n < 0 {
			drift("ledger: %s holds %d, below 0", a, n)
		}
	}
	for a, n := range red {
		accounts[a] = true
		rep.RedisSum += n
		if a.Floored() && n < 0 {
			drift("redis: %s holds %d, below 0", a, n)
		}
	}
	rep.Accounts = len(accounts)
	if rep.LedgerSum != 0 {
		drift("ledger: the accounts add up to %d, not 0", rep.LedgerSum)
	}
	if !rep.InFlight {
		if rep.RedisSum != 0 {
			drift("redis: the accounts add up to %d, not 0", rep.RedisSum)
		}
		names := make([]string, 0, len(accounts))
		for a := range accounts {
			names = append(names, string(a))
		}
		sort.Strings(names)
		for _, name := range names {
			a := seckill.FundsAccount(name)
			if red[a] != led[a] {
				drift("%s: redis %d, ledger %d", a, red[a], led[a])
			}
		}
	}
	bad, err := fr.ledger.ChargeAnomalies(ctx)
	if err != nil {
		return rep, err
	}
	for _, b := range bad {
		// A void may be on its way; so may the charge of an order paid in
		// its buy (an instant checkout's comes paid, its charge behind).
		onItsWay := b.Status == string(seckill.OrderCancelled) || b.Status == string(seckill.OrderPaid) && b.Charges == 0
		if !rep.InFlight || !onItsWay {
			drift("order %s is %s with %d charges, %d refunds, %d voids", b.OrderID, b.Status, b.Charges, b.Refunds, b.Voids)
		}
	}
	return rep, nil
}

// Wait checks until nothing is on its way or d has passed, and returns
// the last report.
func (fr *FundsReconciler) Wait(ctx context.Context, d time.Duration) (FundsReport, error) {
	deadline := time.Now().Add(d)
	for {
		rep, err := fr.Check(ctx)
		if err != nil || !rep.InFlight || time.Now().After(deadline) {
			return rep, err
		}
		sleep(ctx, 100*time.Millisecond)
	}
}

// Repair writes the ledger's sums into Redis for every account, once
// nothing is on its way (within d; else it refuses, as a movement made in
// Redis and not yet in the ledger would be undone): after Redis lost its
// data, every wallet holds what its ledger entries add up to, and a retry
// of a movement made finds it made (RestoreFunds).
func (fr *FundsReconciler) Repair(ctx context.Context, d time.Duration) error {
	rep, err := fr.Wait(ctx, d)
	if err != nil {
		return err
	}
	if rep.InFlight {
		return fmt.Errorf("worker: funds repair: movements still on their way after %s; try again", d)
	}
	_, err = RestoreFunds(ctx, fr.redis, fr.ledger, time.Now())
	return err
}

// RestoreFunds rebuilds Redis's money from the ledger, with nothing on its
// way: every account's balance is the sum of its ledger entries (an
// account only Redis holds, 0), and the records of the movements made
// within their retention before now are written again where Redis lost
// them, so that a retry of one (a payment paid already, a credit made)
// finds it made and moves nothing. It returns how many accounts it set.
func RestoreFunds(ctx context.Context, redis FundsBalances, ledger FundsBooks, now time.Time) (int, error) {
	led, err := ledger.FundsBalances(ctx)
	if err != nil {
		return 0, err
	}
	red, err := redis.Balances(ctx)
	if err != nil {
		return 0, err
	}
	for a := range red {
		if _, ok := led[a]; !ok {
			led[a] = 0 // Redis holds what the ledger never saw
		}
	}
	if err := redis.SetBalances(ctx, led); err != nil {
		return 0, err
	}
	ms, err := ledger.MovementsSince(ctx, now.Add(-redis.Retention()))
	if err != nil {
		return 0, err
	}
	return len(led), redis.Remember(ctx, ms, now)
}

// Watch checks every interval until ctx ends, counting checks and drifts;
// Redis lost its balances (none left, while the ledger has some) is
// repaired from the ledger at once, anything else is left to an operator
// (seckill reconcile --funds --repair), whom the alert on drift calls.
func (fr *FundsReconciler) Watch(ctx context.Context, interval time.Duration) {
	wait.Every(ctx, interval, func() {
		rep, err := fr.Check(ctx)
		if err != nil {
			slog.Warn("worker: funds reconcile failed", "err", err)
			return
		}
		if fr.metrics != nil {
			fr.metrics.fundsChecked.Inc()
		}
		if len(rep.Drift) == 0 {
			return
		}
		if fr.metrics != nil {
			fr.metrics.fundsDrifted.Inc()
		}
		slog.Error("worker: funds drift between Redis and the ledger", "drift", rep.Drift)
		if red, err := fr.redis.Balances(ctx); err == nil && len(red) == 0 && rep.Accounts > 0 {
			if err := fr.Repair(ctx, interval); err != nil {
				slog.Warn("worker: funds repair failed", "err", err)
			}
		}
	})
}
