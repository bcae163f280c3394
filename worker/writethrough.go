package worker

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/seckill/seckill"
	"github.com/seckill/seckill/funds"
	"github.com/seckill/seckill/inventory"
	"github.com/seckill/seckill/orders"
)

// StockOutboxes reads the sales' outboxes from a point on
// (inventory.Store).
type StockOutboxes interface {
	OutboxAfter(ctx context.Context, p inventory.Part, id string, n int) ([]inventory.OutboxEntry, error)
}

// FundsOutboxes reads the funds groups' outboxes from a point on
// (funds.Store).
type FundsOutboxes interface {
	OutboxAfter(ctx context.Context, g int, id string, n int) ([]funds.Entry, error)
}

// WriteLedger is the ledger as the write-through writes it: orders and
// movements in one transaction (orders.Store).
type WriteLedger interface {
	OrderLedger
	FundsLedger
	InTx(ctx context.Context, fn func(ctx context.Context) error) error
	InTxNow(ctx context.Context) bool
}

// WriteThrough is the embedded system's durability fence: where the
// services' fence waits for Redis replicas to hold a decision before it
// is answered, this writes what the decision appended to its outboxes —
// its orders, its movements of money — into the ledger (SQLite) first.
// Calls that wait at once share one transaction (a group commit), so the
// cost is per batch of calls, not per buy. The relay and the consumers
// still carry every entry, for what comes after the write (payment
// timeouts, the follows of money), but write nothing (Written).
//
// It remembers, per outbox, the last entry written; an outbox entry is
// deleted only after the relay's Durable, which waits here, so none is
// missed. A row the ledger refuses for good (an order of a sale it does
// not know) is remembered too: the call about to answer it gets the
// refusal, and so does the consumer, which dead-letters its message.
type WriteThrough struct {
	stock  StockOutboxes
	funds  FundsOutboxes
	ledger WriteLedger
	window time.Duration // a new order's payment window
	now    func() time.Time

	mu      sync.Mutex
	asked   map[outboxOf]bool // outboxes asked for since the last write began
	waiting []chan error
	first   time.Time // when the first of waiting asked
	writing bool
	last    map[outboxOf]string // the last entry of each outbox in the ledger
	gen     map[outboxOf]int    // how often each outbox began again (Reset)
	refused map[string]error    // orders and movements the ledger refused, by id
}

// outboxOf names an outbox: a sale's part, or a funds group.
type outboxOf struct {
	part  inventory.Part
	group int
	funds bool
}

// writeThroughPage is the most entries read from one outbox per read.
const writeThroughPage = 1000

// writeThroughLinger is how long a write waits, after its first ask, for
// more to join: SQLite writes a transaction's pages whatever it holds,
// so a write of many orders costs little more than one of a few (the
// answers of a batch of buys come within microseconds of each other).
const writeThroughLinger = 2 * time.Millisecond

// NewWriteThrough returns a WriteThrough writing the outboxes of stock
// and fnds into ledger, an order's payment window being window.
func NewWriteThrough(stock StockOutboxes, fnds FundsOutboxes, ledger WriteLedger, window time.Duration) *WriteThrough {
	return &WriteThrough{stock: stock, funds: fnds, ledger: ledger, window: window, now: time.Now,
		asked: map[outboxOf]bool{}, last: map[outboxOf]string{}, gen: map[outboxOf]int{}, refused: map[string]error{}}
}

// Parts returns once what the parts' outboxes hold, and the outboxes of
// the funds groups, are in the ledger, or the ledger refused one of ids
// (inventory.Persister).
func (w *WriteThrough) Parts(ctx context.Context, parts []inventory.Part, groups []int, ids []string) error {
	var of []outboxOf
	for _, p := range parts {
		of = append(of, outboxOf{part: p})
	}
	for _, g := range groups {
		of = append(of, outboxOf{group: g, funds: true})
	}
	if err := w.wait(ctx, of); err != nil {
		return err
	}
	return w.refusal(ids...)
}

// Reset forgets where part p's outbox was: it was deleted, and its ids
// begin again (inventory.Persister).
func (w *WriteThrough) Reset(p inventory.Part) {
	o := outboxOf{part: p}
	w.mu.Lock()
	delete(w.last, o)
	w.gen[o]++
	w.mu.Unlock()
}

// Group returns once what funds group g's outbox holds is in the ledger,
// or the ledger refused movement id (funds.Store.SetPersist).
func (w *WriteThrough) Group(ctx context.Context, g int, id string) error {
	if err := w.wait(ctx, []outboxOf{{group: g, funds: true}}); err != nil {
		return err
	}
	return w.refusal(id)
}

// refusal is the ledger's refusal of the first of ids it refused, or nil.
func (w *WriteThrough) refusal(ids ...string) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, id := range ids {
		if err := w.refused[id]; err != nil {
			return fmt.Errorf("the ledger refuses %s: %w", id, err)
		}
	}
	return nil
}

// wait asks for the outboxes and waits for a write that began after the
// ask: it reads them after their callers' appends.
//
// A caller in a ledger transaction of its own (an audit row and its
// movement, made in Redis last before the commit) has the outboxes
// written in that transaction instead: a write of ours would wait for its
// commit. They are not remembered as written (that transaction may still
// roll back): the next write takes them again, and the ledger keeps them
// once.
func (w *WriteThrough) wait(ctx context.Context, of []outboxOf) error {
	asked := map[outboxOf]bool{}
	for _, o := range of {
		asked[o] = true
	}
	if w.ledger.InTxNow(ctx) {
		_, err := w.write(ctx, asked)
		return err
	}
	done := make(chan error, 1)
	w.mu.Lock()
	for o := range asked {
		w.asked[o] = true
	}
	if len(w.waiting) == 0 {
		w.first = time.Now()
	}
	w.waiting = append(w.waiting, done)
	if !w.writing {
		w.writing = true
		go w.loop()
	}
	w.mu.Unlock()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// loop writes what was asked for, one transaction a round, until nobody
// waits.
func (w *WriteThrough) loop() {
	for {
		w.mu.Lock()
		if len(w.waiting) == 0 {
			w.writing = false
			w.mu.Unlock()
			return
		}
		if wait := writeThroughLinger - time.Since(w.first); wait > 0 {
			w.mu.Unlock()
			time.Sleep(wait)
			w.mu.Lock()
		}
		asked, waiting := w.asked, w.waiting
		w.asked, w.waiting = map[outboxOf]bool{}, nil
		w.mu.Unlock()
		last, err := w.write(context.Background(), asked)
		if err == nil {
			w.mu.Lock()
			for o, c := range last {
				if w.gen[o] == c.gen { // not begun again meanwhile
					w.last[o] = c.id
				}
			}
			w.mu.Unlock()
		}
		for _, done := range waiting {
			done <- err
		}
	}
}

// cursor is where an outbox was written up to, in which of its lives.
type cursor struct {
	id  string
	gen int
}

// write reads the outboxes from their last entry written on and writes
// their orders and movements in one transaction (ctx's, if it has one),
// returning each outbox's last entry written.
func (w *WriteThrough) write(ctx context.Context, asked map[outboxOf]bool) (map[outboxOf]cursor, error) {
	var os []seckill.Order
	var ms []seckill.Movement
	last := map[outboxOf]cursor{}
	w.mu.Lock()
	for o := range asked {
		last[o] = cursor{id: w.last[o], gen: w.gen[o]}
	}
	w.mu.Unlock()
	now := w.now()
	for o := range asked {
		id, err := w.read(ctx, o, last[o].id, func(e inventory.OutboxEntry) {
			evs, err := e.Events()
			if err != nil {
				slog.Error("write-through: an undecodable outbox entry (the consumer dead-letters it)", "part", o.part.Tag, "entry", e.ID, "err", err)
			}
			for _, ev := range evs {
				os = append(os, ev.Order(w.window, now))
			}
		}, func(e funds.Entry) {
			m, err := e.Movement()
			if err != nil {
				slog.Error("write-through: an undecodable outbox entry (the consumer dead-letters it)", "group", o.group, "entry", e.ID, "err", err)
				return
			}
			ms = append(ms, m)
		})
		if err != nil {
			return nil, err
		}
		last[o] = cursor{id: id, gen: last[o].gen}
	}
	if len(os)+len(ms) > 0 {
		if err := w.insert(ctx, os, ms, now); err != nil {
			return nil, err
		}
	}
	return last, nil
}

// read hands every entry of outbox o after from to sale or money, and
// returns the last entry's id (from when there is none).
func (w *WriteThrough) read(ctx context.Context, o outboxOf, from string, sale func(inventory.OutboxEntry), money func(funds.Entry)) (string, error) {
	for {
		n := 0
		if o.funds {
			es, err := w.funds.OutboxAfter(ctx, o.group, from, writeThroughPage)
			if err != nil {
				return "", err
			}
			for _, e := range es {
				money(e)
				from = e.ID
			}
			n = len(es)
		} else {
			es, err := w.stock.OutboxAfter(ctx, o.part, from, writeThroughPage)
			if err != nil {
				return "", err
			}
			for _, e := range es {
				sale(e)
				from = e.ID
			}
			n = len(es)
		}
		if n < writeThroughPage {
			return from, nil
		}
	}
}

// insert writes the orders and the movements in one transaction. A row
// the ledger refuses for good (an unknown sale, say) is logged and
// remembered (refusal, Written), so the rest are kept.
func (w *WriteThrough) insert(ctx context.Context, os []seckill.Order, ms []seckill.Movement, now time.Time) error {
	err := w.ledger.InTx(ctx, func(ctx context.Context) error {
		if err := w.ledger.InsertOrders(ctx, os); err != nil {
			return err
		}
		return w.ledger.InsertMovements(ctx, ms, now)
	})
	if !orders.Refused(err) {
		return err
	}
	for _, o := range os {
		if err := w.ledger.InsertOrders(ctx, []seckill.Order{o}); orders.Refused(err) {
			w.refuse(o.ID, err)
		} else if err != nil {
			return err
		}
	}
	for _, m := range ms {
		if err := w.ledger.InsertMovements(ctx, []seckill.Movement{m}, now); orders.Refused(err) {
			w.refuse(m.ID, err)
		} else if err != nil {
			return err
		}
	}
	return nil
}

// refuse remembers the ledger's refusal of an order or a movement.
func (w *WriteThrough) refuse(id string, err error) {
	slog.Error("write-through: the ledger refuses a row; it is not answered, its message is dead-lettered", "id", id, "err", err)
	w.mu.Lock()
	w.refused[id] = err
	w.mu.Unlock()
}

// Written is the ledger as the consumers behind this write-through see
// it: every order and movement they are handed is in it already (the
// relays publish an outbox entry only once Durable returned, which waits
// for a write here), or was refused, so their writes are nothing but the
// refusal; what comes after a write (payment timeouts, follows) they
// still do.
func (w *WriteThrough) Written() *WrittenLedger { return &WrittenLedger{w: w} }

// WrittenLedger is a ledger that holds everything already (Written).
type WrittenLedger struct{ w *WriteThrough }

// InsertOrders writes nothing: the orders are in the ledger, or refused.
func (l *WrittenLedger) InsertOrders(_ context.Context, os []seckill.Order) error {
	for _, o := range os {
		if err := l.w.refusal(o.ID); err != nil {
			return err
		}
	}
	return nil
}

// InsertMovements writes nothing: the movements are in the ledger, or
// refused.
func (l *WrittenLedger) InsertMovements(_ context.Context, ms []seckill.Movement, _ time.Time) error {
	for _, m := range ms {
		if err := l.w.refusal(m.ID); err != nil {
			return err
		}
	}
	return nil
}
