package worker

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/seckill/seckill/inventory"
	"github.com/seckill/seckill/orders"
)

// Reconciler proves that Redis and the MySQL ledger agree about a sale,
// and rebuilds Redis from the ledger when they do not (or when Redis lost
// its data).
type Reconciler struct {
	inv    *inventory.Store
	ledger *orders.Store
	// Stock turns a ledger sale into its Redis form (expiry included).
	stock func(orders.Sale) inventory.Sale
}

// NewReconciler returns a Reconciler.
func NewReconciler(inv *inventory.Store, ledger *orders.Store, stock func(orders.Sale) inventory.Sale) *Reconciler {
	return &Reconciler{inv: inv, ledger: ledger, stock: stock}
}

// Report is the comparison of one sale.
type Report struct {
	SaleID int64
	// Redis side, from one atomic snapshot.
	RedisPresent                          bool
	RedisTotal, RedisAvailable, RedisSold int64
	// Ledger side: total, units of orders not cancelled, sum of movements.
	LedgerTotal, LedgerSold, LedgerAvailable int64
	// InFlight counts orders accepted in Redis and not yet in MySQL, and
	// their units; Outbox the outbox entries (buy calls that accepted
	// orders) the relay has yet to publish.
	InFlight, InFlightUnits, Outbox int64
	// Unreleased counts orders cancelled in MySQL whose units Redis has
	// not taken back yet.
	Unreleased int64
	// Drift lists every disagreement; empty means the sale reconciles.
	Drift []string
}

// Settled reports whether nothing is on its way between Redis and MySQL.
func (r Report) Settled() bool { return r.InFlight == 0 && r.Unreleased == 0 && r.Outbox == 0 }

// Check compares a sale's Redis state with the ledger. Orders on their way
// (accepted but not yet persisted, cancelled but not yet released) are
// accounted for, not reported as drift.
func (rc *Reconciler) Check(ctx context.Context, sale int64) (Report, error) {
	rep := Report{SaleID: sale}
	snap, err := rc.inv.Snapshot(ctx, sale)
	if err != nil {
		return rep, err
	}
	var (
		led orders.Ledger
		os  []orders.Order
	)
	// One transaction: a consistent MySQL snapshot, taken after Redis's.
	err = rc.ledger.InTx(ctx, func(tx *orders.Store) error {
		var err error
		if led, err = tx.Ledger(ctx, sale); err != nil {
			return err
		}
		os, err = tx.SaleOrders(ctx, sale)
		return err
	})
	if err != nil {
		return rep, err
	}
	rep.LedgerTotal, rep.LedgerSold, rep.LedgerAvailable = led.Total, led.Sold(), led.Available()
	rep.RedisPresent, rep.Outbox = snap.Present, snap.Outbox
	drift := func(format string, args ...any) { rep.Drift = append(rep.Drift, fmt.Sprintf(format, args...)) }

	// The ledger against itself.
	var allUnits, cancelledUnits int64
	for _, o := range os {
		allUnits += o.Qty
		if o.Status == orders.StatusCancelled {
			cancelledUnits += o.Qty
		}
	}
	if led.Available() != led.Total-led.Sold() {
		drift("ledger: movements sum to %d, total - sold is %d", led.Available(), led.Total-led.Sold())
	}
	if -led.Movements[orders.ReasonSale] != allUnits || led.Movements[orders.ReasonCancel] != cancelledUnits {
		drift("ledger: sale movements %d / cancel movements %d, orders hold %d / cancelled %d units",
			-led.Movements[orders.ReasonSale], led.Movements[orders.ReasonCancel], allUnits, cancelledUnits)
	}

	if !snap.Present {
		drift("redis: no stock for this sale (Redis lost its data? run reconcile --repair)")
		return rep, nil
	}
	st := snap.Stock
	rep.RedisTotal, rep.RedisAvailable, rep.RedisSold = st.Total, st.Available, st.Sold

	// Redis against itself: its counters against its accepted orders.
	if st.Available+st.Sold != st.Total || st.Available < 0 {
		drift("redis: available %d + sold %d != total %d", st.Available, st.Sold, st.Total)
	}
	var heldUnits int64
	held := map[string]int64{}
	for id, a := range snap.Accepted {
		if !snap.Released[id] {
			heldUnits += a.Qty
			held[a.UserID] += a.Qty
		}
	}
	if st.Sold != heldUnits {
		drift("redis: sold is %d, its accepted and unreleased orders hold %d", st.Sold, heldUnits)
	}
	for _, u := range unionKeys(held, snap.Buyers) {
		if held[u] != snap.Buyers[u] {
			drift("redis: user %s holds %d units by its counter, %d by its orders", u, snap.Buyers[u], held[u])
		}
	}

	// Redis against the ledger, order by order.
	if st.Total != led.Total {
		drift("total: redis %d, ledger %d", st.Total, led.Total)
	}
	persisted := make(map[string]orders.Order, len(os))
	for _, o := range os {
		persisted[o.ID] = o
		a, ok := snap.Accepted[o.ID]
		switch {
		case !ok && o.CreatedAt.Before(snap.At):
			drift("order %s is in the ledger but unknown to redis", o.ID)
		case !ok:
			// Accepted after the Redis snapshot.
		case a.UserID != o.UserID || a.Qty != o.Qty:
			drift("order %s: redis says %s x%d, ledger %s x%d", o.ID, a.UserID, a.Qty, o.UserID, o.Qty)
		case snap.Released[o.ID] && o.Status != orders.StatusCancelled:
			drift("order %s: released in redis but %s in the ledger", o.ID, o.Status)
		case !snap.Released[o.ID] && o.Status == orders.StatusCancelled:
			rep.Unreleased++
		}
	}
	for id, a := range snap.Accepted {
		if _, ok := persisted[id]; !ok {
			rep.InFlight++
			rep.InFlightUnits += a.Qty
			if snap.Released[id] {
				drift("order %s: released in redis but not in the ledger", id)
			}
		}
	}
	if rep.Settled() && (st.Sold != led.Sold() || st.Available != led.Available()) {
		drift("settled, yet redis sold/available %d/%d, ledger %d/%d", st.Sold, st.Available, led.Sold(), led.Available())
	}
	return rep, nil
}

// Wait checks a sale until nothing is in flight or d has passed, and
// returns the last report.
func (rc *Reconciler) Wait(ctx context.Context, sale int64, d time.Duration) (Report, error) {
	deadline := time.Now().Add(d)
	for {
		rep, err := rc.Check(ctx, sale)
		if err != nil || rep.Settled() && len(rep.Drift) == 0 || !time.Now().Before(deadline) || !rep.RedisPresent {
			return rep, err
		}
		sleep(ctx, 100*time.Millisecond)
		if ctx.Err() != nil {
			return rep, ctx.Err()
		}
	}
}

// ErrInFlight means a repair was refused because orders accepted in Redis
// have not reached the ledger yet; rebuilding now would forget them.
var ErrInFlight = errors.New("worker: orders still in flight")

// Repair rebuilds a sale's Redis state from the ledger. A sale still in
// Redis is paused first and must drain (wait up to d for the relay and
// worker) before it is rebuilt; its merchant status is restored after.
func (rc *Reconciler) Repair(ctx context.Context, sale int64, d time.Duration) error {
	snap, err := rc.inv.Snapshot(ctx, sale)
	if err != nil {
		return err
	}
	if snap.Present {
		if _, err := rc.inv.SetStatus(ctx, sale, "pause"); err != nil && !errors.Is(err, inventory.ErrEnded) {
			return err
		}
		rep, err := rc.Wait(ctx, sale, d)
		if err != nil {
			return err
		}
		if rep.InFlight > 0 || rep.Outbox > 0 {
			return fmt.Errorf("%w: %d orders, %d outbox entries (is the relay and worker running?)", ErrInFlight, rep.InFlight, rep.Outbox)
		}
	}
	sl, err := rc.ledger.Sale(ctx, sale)
	if err != nil {
		return err
	}
	led, err := rc.ledger.Ledger(ctx, sale)
	if err != nil {
		return err
	}
	os, err := rc.ledger.SaleOrders(ctx, sale)
	if err != nil {
		return err
	}
	accepted := make([]inventory.AcceptedOrder, len(os))
	cancelled := map[string]bool{}
	for i, o := range os {
		accepted[i] = inventory.AcceptedOrder{OrderID: o.ID, SaleID: sale, UserID: o.UserID, Qty: o.Qty, RequestID: o.RequestID, At: o.CreatedAt}
		if o.Status == orders.StatusCancelled {
			cancelled[o.ID] = true
		}
	}
	st := rc.stock(sl)
	st.Total, st.Sold = led.Total, led.Sold()
	return rc.inv.Rebuild(ctx, st, accepted, cancelled)
}

func unionKeys(a, b map[string]int64) []string {
	seen := map[string]bool{}
	var out []string
	for _, m := range []map[string]int64{a, b} {
		for k := range m {
			if !seen[k] {
				seen[k] = true
				out = append(out, k)
			}
		}
	}
	sort.Strings(out)
	return out
}
