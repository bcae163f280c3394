package checkout

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/seckill/seckill"
	"github.com/seckill/seckill/funds"
	"github.com/seckill/seckill/internal/wait"
)

// Holds are the pending holds past their deadline (funds.Store).
type Holds interface {
	Wallets
	DueHolds(ctx context.Context, before time.Time, n int) ([]funds.DueHold, error)
}

// Settler tells how the stock decided a held buy, and bars it from being
// decided after (inventory.Store.Settle).
type Settler interface {
	Settle(ctx context.Context, sale int64, user, request string, qty int64) (seckill.Answer, bool, error)
}

// Sweeper settles the holds whose buy's process died or never heard back:
// each hold past its deadline (and Margin more, for the clocks of
// different machines) is posted if its attempt's order was accepted, and
// voided otherwise, its request first barred on the sale's side so that no
// stock step can accept it afterwards.
type Sweeper struct {
	holds Holds
	stock Settler
	// Margin is how long past its deadline a hold is left to its own
	// process (the deadline is that process's clock; the stock step reads
	// its Redis master's).
	Margin time.Duration
	// Orphaned is how long past its deadline a hold whose sale Redis no
	// longer holds is kept before it is voided: no request can be barred
	// then, and an order accepted before the keys went may still be on
	// its way to the order consumer, which posts its hold.
	Orphaned time.Duration
	// OnSettled, if set, counts the holds settled ("posted", "voided").
	OnSettled func(outcome string)
	now       func() time.Time
}

// NewSweeper returns a Sweeper of holds, asking stock.
func NewSweeper(holds Holds, stock Settler) *Sweeper {
	return &Sweeper{holds: holds, stock: stock, Margin: 2 * time.Second, Orphaned: time.Minute, now: time.Now}
}

// sweepBatch bounds the holds one sweep reads per group.
const sweepBatch = 500

// Sweep settles every hold due now; it returns how many it settled. A
// hold it cannot settle is left for the next sweep, and the others are
// settled all the same; the error tells how many were left, and why the
// first was.
func (sw *Sweeper) Sweep(ctx context.Context) (int, error) {
	n, left := 0, 0
	var first error
	for {
		due, err := sw.holds.DueHolds(ctx, sw.now().Add(-sw.Margin), sweepBatch)
		if err != nil {
			return n, err
		}
		settled := 0
		for _, h := range due {
			done, err := sw.settle(ctx, h)
			switch {
			case err != nil && ctx.Err() != nil:
				return n + settled, err
			case err != nil:
				left++
				if first == nil {
					first = err
				}
			case done:
				settled++
			}
		}
		n += settled
		if settled == 0 { // none due, or only those left: until the next sweep
			if first != nil {
				return n, fmt.Errorf("checkout: %d due holds not settled, the first: %w", left, first)
			}
			return n, nil
		}
	}
}

// settle posts or voids one due hold; done is false when it leaves it
// for later (its sale's keys gone, not for Orphaned yet).
func (sw *Sweeper) settle(ctx context.Context, h funds.DueHold) (done bool, err error) {
	order, wallet := h.Order(), h.Charge.Side
	sale := seckill.SaleOfOrder(order)
	a, ok, err := sw.stock.Settle(ctx, sale, wallet.User(), h.Request, 0)
	if err != nil {
		return false, err
	}
	if !ok && sw.now().Before(h.Deadline.Add(sw.Orphaned)) {
		return false, nil
	}
	if ok && a.Code == seckill.CodeOK && a.OrderID == order {
		_, err := sw.holds.Post(ctx, wallet, h.ID, h.Charge.ID)
		if err != nil {
			return false, fmt.Errorf("checkout: post hold %s: %w", h.ID, err)
		}
		sw.settled("posted")
		return true, nil
	}
	_, err = sw.holds.Void(ctx, wallet, h.ID)
	if errors.Is(err, seckill.ErrOrderPaid) {
		return true, nil // posted meanwhile (the order consumer)
	}
	if err != nil {
		return false, fmt.Errorf("checkout: void hold %s: %w", h.ID, err)
	}
	sw.settled("voided")
	return true, nil
}

func (sw *Sweeper) settled(outcome string) {
	if sw.OnSettled != nil {
		sw.OnSettled(outcome)
	}
}

// Run sweeps every interval until ctx ends.
func (sw *Sweeper) Run(ctx context.Context, interval time.Duration) {
	wait.Every(ctx, interval, func() {
		if _, err := sw.Sweep(ctx); err != nil && ctx.Err() == nil {
			slog.Warn("checkout: sweeping the due holds failed", "err", err)
		}
	})
}
