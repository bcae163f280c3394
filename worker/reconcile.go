package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/seckill/seckill"
	"github.com/seckill/seckill/bus"
	"github.com/seckill/seckill/internal/wait"
	"github.com/seckill/seckill/inventory"
)

// ReconcilerStock is the Redis side of the sales as the reconciler reads
// and rebuilds it (inventory.Store): a sale's state at one instant, its
// outbox, its merchant status, and a turn among processes.
type ReconcilerStock interface {
	Snapshot(ctx context.Context, sale int64) (inventory.Snapshot, error)
	Outbox(ctx context.Context, sale int64) ([]inventory.OutboxEntry, error)
	Stock(ctx context.Context, sale int64) (seckill.Stock, error)
	SetStatus(ctx context.Context, sale int64, action seckill.Action) (seckill.Status, error)
	Rebuild(ctx context.Context, sale seckill.Sale, sold int64, orders []seckill.Event, cancelled map[string]bool) error
	TakeTurn(ctx context.Context, chore string, sale int64, ttl time.Duration) (bool, error)
}

// ReconcilerLedger is the ledger as the reconciler reads it (in one
// transaction, for one snapshot) and writes the orders it re-drives
// (orders.Store).
type ReconcilerLedger interface {
	InTx(ctx context.Context, fn func(ctx context.Context) error) error
	Sale(ctx context.Context, id int64) (seckill.Sale, error)
	Totals(ctx context.Context, sale int64) (seckill.Totals, error)
	SaleOrders(ctx context.Context, sale int64) ([]seckill.Order, error)
	InsertOrders(ctx context.Context, os []seckill.Order) error
}

// ReconcilerBus is the bus as the reconciler asks it where a missing
// order is, and schedules the payment timeouts of the orders it
// re-drives.
type ReconcilerBus interface {
	DeadLetters(ctx context.Context, max int) ([]bus.Message, error)
	Depth(ctx context.Context, queue string) (int, error)
	DelayedPublisher
}

// Reconciler proves that Redis and the ledger agree about a sale, and
// repairs what does not: it writes orders lost on their way into the
// ledger, and rebuilds Redis from the ledger when Redis lost its data.
type Reconciler struct {
	inv     ReconcilerStock
	ledger  ReconcilerLedger
	cfg     ReconcilerConfig
	metrics *ReconcilerMetrics
	now     func() time.Time
}

// ReconcilerConfig tunes a Reconciler.
type ReconcilerConfig struct {
	// Grace is how long an order accepted in Redis may be missing from the
	// ledger (on its way through the outbox, the queue and the worker)
	// before it counts as drift.
	Grace time.Duration
	// Window is the payment window, for the timeouts of re-driven orders.
	Window time.Duration
	// Bus is asked where a missing order is, and carries the payment
	// timeouts of re-driven orders; nil when there is none to ask.
	Bus ReconcilerBus
}

// NewReconciler returns a Reconciler; m counts the checks and the drifts
// of its Watch (nil: a reconciler that only checks or repairs when asked
// needs none).
func NewReconciler(inv ReconcilerStock, ledger ReconcilerLedger, m *ReconcilerMetrics, cfg ReconcilerConfig) *Reconciler {
	return &Reconciler{inv: inv, ledger: ledger, cfg: cfg, metrics: m, now: time.Now}
}

// ReconcilerMetrics are the reconciler's Prometheus series.
type ReconcilerMetrics struct {
	// What the alerts watch (configs/prometheus/alerts.yml).
	drifts     prometheus.Counter
	reconciled prometheus.Counter
	// The funds reconciler's.
	fundsDrifted prometheus.Counter
	fundsChecked prometheus.Counter
}

// NewReconcilerMetrics registers the reconciler's series on reg.
func NewReconcilerMetrics(reg prometheus.Registerer) *ReconcilerMetrics {
	m := &ReconcilerMetrics{
		drifts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "seckill_reconcile_drifts_total", Help: "Sales the reconciler found disagreeing between Redis and the ledger (each then repaired from the ledger).",
		}),
		reconciled: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "seckill_reconcile_checks_total", Help: "Sales the reconciler checked.",
		}),
		fundsDrifted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "seckill_funds_reconcile_drifts_total", Help: "Funds checks that found Redis and the ledger disagreeing: an account, a sum, or an order's transfers.",
		}),
		fundsChecked: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "seckill_funds_reconcile_checks_total", Help: "Checks of every account's Redis balance against its ledger entries.",
		}),
	}
	reg.MustRegister(m.drifts, m.reconciled, m.fundsDrifted, m.fundsChecked)
	return m
}

// Report is the comparison of one sale.
type Report struct {
	SaleID int64
	// Redis side, from one atomic snapshot.
	RedisPresent                          bool
	RedisTotal, RedisAvailable, RedisSold int64
	// Ledger side: total, units of orders not cancelled, sum of movements.
	LedgerTotal, LedgerSold, LedgerAvailable int64
	// InFlight counts orders accepted in Redis and not yet in the ledger,
	// and their units; Outbox the outbox entries (buy calls that accepted
	// orders) the relay has yet to publish.
	InFlight, InFlightUnits, Outbox int64
	// Missing are the in-flight orders older than the grace period: lost
	// or stuck on their way, and drift.
	Missing []Missing
	// Unreleased counts orders cancelled in the ledger whose units Redis
	// has not taken back yet.
	Unreleased int64
	// Drift lists every disagreement; empty means the sale reconciles.
	Drift []string
}

// Missing is an order accepted in Redis that has not reached the ledger
// within the grace period.
type Missing struct {
	Order seckill.Event
	// Where it is: "outbox" (the relay has not published it), "dead-letter
	// queue", "queue" (not found in either, while the orders queue holds
	// messages), "nowhere" (lost), or "unknown" (no bus to ask).
	Where string
}

// Settled reports whether nothing is on its way between Redis and MySQL.
func (r Report) Settled() bool { return r.InFlight == 0 && r.Unreleased == 0 && r.Outbox == 0 }

// Check compares a sale's Redis state with the ledger. Orders on their way
// (accepted but not yet persisted, cancelled but not yet released) and
// units on their way between a sale's buckets are accounted for, not
// reported as drift. The buckets of a sale are read one after the other,
// so a move between them can make one reading disagree: a disagreement is
// read again (three times) before it is reported.
func (rc *Reconciler) Check(ctx context.Context, sale int64) (Report, error) {
	var rep Report
	var err error
	for range 3 {
		if rep, err = rc.check(ctx, sale); err != nil || len(rep.Drift) == 0 {
			break
		}
	}
	return rep, err
}

func (rc *Reconciler) check(ctx context.Context, sale int64) (Report, error) {
	rep := Report{SaleID: sale}
	snap, err := rc.inv.Snapshot(ctx, sale)
	if err != nil {
		return rep, err
	}
	var (
		led seckill.Totals
		os  []seckill.Order
	)
	// One transaction: a consistent MySQL snapshot, taken after Redis's.
	err = rc.ledger.InTx(ctx, func(ctx context.Context) error {
		var err error
		if led, err = rc.ledger.Totals(ctx, sale); err != nil {
			return err
		}
		os, err = rc.ledger.SaleOrders(ctx, sale)
		return err
	})
	if err != nil {
		return rep, err
	}
	rep.LedgerTotal, rep.LedgerSold, rep.LedgerAvailable = led.Total, led.Sold(), led.Available()
	rep.RedisPresent, rep.Outbox = snap.Present, snap.Outbox
	drift := func(format string, args ...any) { rep.Drift = append(rep.Drift, fmt.Sprintf(format, args...)) }

	// The ledger against itself.
	var cancelledUnits int64
	for _, o := range os {
		if o.Status.Returned() {
			cancelledUnits += o.Qty
		}
	}
	if led.Available() != led.Total-led.Sold() {
		drift("ledger: movements sum to %d, total - sold is %d", led.Available(), led.Total-led.Sold())
	}
	// The orders are the sale movements (Totals); each cancel is a row.
	if led.Movements[seckill.ReasonCancel] != cancelledUnits {
		drift("ledger: cancel movements %d, cancelled orders hold %d units", led.Movements[seckill.ReasonCancel], cancelledUnits)
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
	if st.Total+snap.InTransit != led.Total {
		drift("total: redis %d (%d of them between buckets), ledger %d", st.Total+snap.InTransit, snap.InTransit, led.Total)
	}
	persisted := make(map[string]seckill.Order, len(os))
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
		case snap.Released[o.ID] && !o.Status.Returned():
			drift("order %s: released in redis but %s in the ledger", o.ID, o.Status)
		case !snap.Released[o.ID] && o.Status.Returned():
			rep.Unreleased++
		}
	}
	var stale []seckill.Event
	for id, a := range snap.Accepted {
		if _, ok := persisted[id]; !ok {
			rep.InFlight++
			rep.InFlightUnits += a.Qty
			if snap.Released[id] {
				drift("order %s: released in redis but not in the ledger", id)
			}
			if snap.At.Sub(a.Time()) > rc.cfg.Grace {
				stale = append(stale, a)
			}
		}
	}
	if len(stale) > 0 {
		sort.Slice(stale, func(i, j int) bool { return stale[i].OrderID < stale[j].OrderID })
		if rep.Missing, err = rc.locate(ctx, sale, stale); err != nil {
			return rep, err
		}
		for _, m := range rep.Missing {
			drift("order %s accepted %s ago is not in the ledger; it is in: %s",
				m.Order.OrderID, snap.At.Sub(m.Order.Time()).Round(time.Second), m.Where)
		}
	}
	if rep.Settled() && (st.Sold != led.Sold() || st.Available+snap.InTransit != led.Available()) {
		drift("settled, yet redis sold/available %d/%d, ledger %d/%d", st.Sold, st.Available+snap.InTransit, led.Sold(), led.Available())
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

// locate says where each missing order is: in the sale's outbox (of any
// of its parts), in the dead-letter queue, or neither.
func (rc *Reconciler) locate(ctx context.Context, sale int64, missing []seckill.Event) ([]Missing, error) {
	where := map[string]string{}
	entries, err := rc.inv.Outbox(ctx, sale)
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		evs, _ := e.Events()
		for _, ev := range evs {
			where[ev.OrderID] = "outbox"
		}
	}
	rest := "unknown (no bus to ask)"
	if rc.cfg.Bus != nil {
		dead, err := rc.cfg.Bus.DeadLetters(ctx, maxDeadLetters)
		if err != nil {
			return nil, err
		}
		for _, m := range dead {
			evs, _ := DecodeEvents(m.Body)
			for _, ev := range evs {
				if where[ev.OrderID] == "" {
					where[ev.OrderID] = "dead-letter queue"
				}
			}
		}
		n, err := rc.cfg.Bus.Depth(ctx, bus.Orders)
		if err != nil {
			return nil, err
		}
		rest = "nowhere (not in the outbox or the dead-letter queue, and the orders queue is empty)"
		if n > 0 {
			rest = fmt.Sprintf("queue (not in the outbox or the dead-letter queue; the orders queue holds %d messages)", n)
		}
	}
	out := make([]Missing, len(missing))
	for i, a := range missing {
		out[i] = Missing{Order: a, Where: where[a.OrderID]}
		if out[i].Where == "" {
			out[i].Where = rest
		}
	}
	return out, nil
}

// maxDeadLetters bounds how many dead letters locate reads.
const maxDeadLetters = 100_000

// Redrive writes orders accepted in Redis but missing from the ledger into
// it (idempotently: an order that arrives meanwhile is kept once) and
// schedules their payment timeouts, so that what a lost message or a
// dead-lettered one would have written is written (an instant checkout's
// orders paid, with no timeout). It returns how many
// orders it wrote.
func (rc *Reconciler) Redrive(ctx context.Context, sale int64, missing []Missing) (int, error) {
	if len(missing) == 0 {
		return 0, nil
	}
	st, err := rc.inv.Stock(ctx, sale)
	if err != nil {
		return 0, err
	}
	now := rc.now()
	os := make([]seckill.Order, 0, len(missing))
	var pending []seckill.Order // those with a payment window
	var latest time.Time
	for _, m := range missing {
		ev := m.Order
		if ev.PriceCents < 0 { // an old record without its price: the sale's
			ev.PriceCents = st.PriceCents
		}
		if err := ev.Validate(); err != nil {
			return 0, fmt.Errorf("worker: redrive: %w", err)
		}
		o := ev.Order(rc.cfg.Window, now)
		os = append(os, o)
		if o.Pay == "" { // an instant checkout's is paid: no timeout
			pending = append(pending, o)
			if o.ExpiresAt.After(latest) {
				latest = o.ExpiresAt
			}
		}
	}
	if err := rc.ledger.InsertOrders(ctx, os); err != nil {
		return 0, err
	}
	if rc.cfg.Bus != nil && len(pending) > 0 {
		// One message for all of them, when the last window ends: none is
		// cancelled early, and RabbitMQ needs no delay queue per order.
		if err := ScheduleTimeouts(ctx, rc.cfg.Bus, pending, latest.Sub(now)); err != nil {
			return len(os), err
		}
	}
	return len(os), nil
}

// ErrInFlight means a repair was refused because orders accepted in Redis
// have not reached the ledger yet; rebuilding now would forget them.
var ErrInFlight = errors.New("worker: orders still in flight")

// Repair brings a sale back to agreement. Orders missing from the ledger
// beyond the grace period are written to it first (Redrive), so a repair
// never waits on what it is there to fix. Then a sale still in Redis is
// paused, must drain its young orders in flight (within d) and is rebuilt
// from the ledger, its merchant status restored; a sale Redis lost is
// rebuilt at once.
func (rc *Reconciler) Repair(ctx context.Context, sale int64, d time.Duration) error {
	rep, err := rc.Check(ctx, sale)
	if err != nil {
		return err
	}
	if _, err := rc.Redrive(ctx, sale, rep.Missing); err != nil {
		return err
	}
	snap, err := rc.inv.Snapshot(ctx, sale)
	if err != nil {
		return err
	}
	if snap.Present {
		if _, err := rc.inv.SetStatus(ctx, sale, seckill.ActionPause); err != nil && !errors.Is(err, seckill.ErrEnded) {
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
	led, err := rc.ledger.Totals(ctx, sale)
	if err != nil {
		return err
	}
	os, err := rc.ledger.SaleOrders(ctx, sale)
	if err != nil {
		return err
	}
	accepted := make([]seckill.Event, len(os))
	cancelled := map[string]bool{}
	for i, o := range os {
		accepted[i] = o.Event()
		if o.Status.Returned() {
			cancelled[o.ID] = true
		}
	}
	sl.Total = led.Total
	return rc.inv.Rebuild(ctx, sl, led.Sold(), accepted, cancelled)
}

// Watch reconciles every live sale every interval until ctx ends, and
// repairs what drifted: after a Redis failover that lost writes, or a
// message lost on its way, the system heals itself. Each sale is checked
// by one process per interval (TakeTurn), whichever asks first.
func (rc *Reconciler) Watch(ctx context.Context, sales SaleLister, lookback, interval time.Duration) {
	wait.Every(ctx, interval, func() {
		ids, err := sales.SaleIDs(ctx, time.Now().Add(-lookback))
		if err != nil {
			slog.Warn("reconciler: listing sales failed", "err", err)
			return
		}
		for _, id := range ids {
			if mine, err := rc.inv.TakeTurn(ctx, "reconcile", id, interval*9/10); err == nil && mine {
				rc.heal(ctx, id)
			}
		}
	})
}

// heal checks one sale and repairs it from the ledger if it drifted.
func (rc *Reconciler) heal(ctx context.Context, id int64) {
	rep, err := rc.Check(ctx, id)
	if err != nil {
		slog.Warn("reconciler: checking a sale failed", "sale", id, "err", err)
		return
	}
	if m := rc.metrics; m != nil {
		m.reconciled.Inc()
		if len(rep.Drift) > 0 {
			m.drifts.Inc()
		}
	}
	if len(rep.Drift) == 0 {
		return
	}
	slog.Error("reconciler: drift found; repairing from the ledger", "sale", id, "problems", len(rep.Drift),
		"first", rep.Drift[:min(len(rep.Drift), 5)])
	if err := rc.Repair(ctx, id, 10*time.Second); err != nil {
		slog.Error("reconciler: repair failed", "sale", id, "err", err)
		return
	}
	slog.Info("reconciler: sale repaired", "sale", id)
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
