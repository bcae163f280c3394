package orders

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/seckill/seckill"
)

// Store reads and writes the ledger, in MySQL or SQLite. Its methods run
// in the transaction InTx put in their context, if there is one.
type Store struct {
	db      *sqlx.DB
	dialect dialect
}

// NewStore returns a Store on db (opened by Open or OpenSQLite).
func NewStore(db *sqlx.DB) *Store { return &Store{db: db, dialect: dialectOf(db)} }

// DB returns the connection pool behind the store.
func (s *Store) DB() *sqlx.DB { return s.db }

// txKey finds a store's transaction in a context: the pool's, so two
// ledgers never share one.
type txKey struct{ db *sqlx.DB }

// InTxNow reports whether ctx runs in a transaction of the store (InTx).
func (s *Store) InTxNow(ctx context.Context) bool {
	_, ok := ctx.Value(txKey{s.db}).(*sqlx.Tx)
	return ok
}

// InTx runs fn with a context that makes every method of the store run in
// one transaction, committed if fn returns nil and rolled back otherwise.
// Inside a transaction already, fn joins it. The application owns the
// change (package sales opens the transaction and calls the store's plain
// methods in order); the context must not outlive fn.
func (s *Store) InTx(ctx context.Context, fn func(ctx context.Context) error) error {
	if _, ok := ctx.Value(txKey{s.db}).(*sqlx.Tx); ok {
		return fn(ctx)
	}
	tx, err := s.db.BeginTxx(ctx, nil)
	if err != nil {
		return failed("begin", err)
	}
	if err := fn(context.WithValue(ctx, txKey{s.db}, tx)); err != nil {
		_ = tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return failed("commit", err)
	}
	return nil
}

// q is where a query of ctx runs: its transaction, or the pool.
func (s *Store) q(ctx context.Context) sqlx.ExtContext {
	if tx, ok := ctx.Value(txKey{s.db}).(*sqlx.Tx); ok {
		return tx
	}
	return s.db
}

// failed wraps an error of the database doing op, marked
// seckill.ErrUnavailable when trying again may get past it (Transient).
func failed(op string, err error) error {
	if Transient(err) {
		return fmt.Errorf("orders: %s: %w: %w", op, seckill.ErrUnavailable, err)
	}
	return fmt.Errorf("orders: %s: %w", op, err)
}

// The sales table's statements, from saleRow's columns (rows.go): a
// field of a sale is spelled once in this package, in saleRow.
var (
	selectSale          = `SELECT ` + saleColumns + ` FROM sales WHERE id = ?`
	selectSaleTotal     = `SELECT total FROM sales WHERE id = ?`
	selectSales         = `SELECT ` + saleColumns + ` FROM sales WHERE ends_at > ? ORDER BY id DESC LIMIT ?`
	selectMerchantSales = `SELECT ` + saleColumns + ` FROM sales WHERE merchant_id = ? ORDER BY id DESC LIMIT ?`
)

// InsertSale stores a new sale (its id, creation and update times as
// given are ignored: the database numbers it, now stamps it) and returns
// it as stored.
func (s *Store) InsertSale(ctx context.Context, sale seckill.Sale, now time.Time) (seckill.Sale, error) {
	sale.CreatedAt = now
	sale.UpdatedAt = now
	res, err := sqlx.NamedExecContext(ctx, s.q(ctx), insertSale, saleRowOf(sale))
	if err != nil {
		return seckill.Sale{}, failed("create sale", err)
	}
	id, err := res.LastInsertId()
	if err != nil {
		return seckill.Sale{}, failed("create sale", err)
	}
	return s.Sale(ctx, id)
}

// UpdateSale writes a sale's settings and status (its id, buckets and
// creation time never change) and stamps it updated at now.
func (s *Store) UpdateSale(ctx context.Context, sale seckill.Sale, now time.Time) error {
	sale.UpdatedAt = now
	if _, err := sqlx.NamedExecContext(ctx, s.q(ctx), updateSale, saleRowOf(sale)); err != nil {
		return failed(fmt.Sprintf("update sale %d", sale.ID), err)
	}
	return nil
}

const insertMovement = `INSERT INTO stock_movements (sale_id, order_id, delta, reason, created_at) VALUES (?, ?, ?, ?, ?)`

// AddMovement records a movement of a sale's stock; order is "" for the
// movements no order causes (initial, restock).
func (s *Store) AddMovement(ctx context.Context, sale int64, order string, delta int64, reason seckill.Reason, now time.Time) error {
	var orderID any
	if order != "" {
		orderID = order
	}
	if _, err := s.q(ctx).ExecContext(ctx, insertMovement, sale, orderID, delta, reason, now.UTC()); err != nil {
		return failed(fmt.Sprintf("%s movement of sale %d", reason, sale), err)
	}
	return nil
}

// Sale returns one sale, or seckill.ErrSaleNotFound.
func (s *Store) Sale(ctx context.Context, id int64) (seckill.Sale, error) {
	return one(ctx, s, saleRow.sale, fmt.Errorf("orders: sale %d: %w", id, seckill.ErrSaleNotFound), fmt.Sprintf("sale %d", id), selectSale, id)
}

// SaleForUpdate returns one sale with its row locked until ctx's
// transaction ends (changes of one sale are made one at a time), or
// seckill.ErrSaleNotFound.
func (s *Store) SaleForUpdate(ctx context.Context, id int64) (seckill.Sale, error) {
	return one(ctx, s, saleRow.sale, fmt.Errorf("orders: sale %d: %w", id, seckill.ErrSaleNotFound), fmt.Sprintf("sale %d", id),
		selectSale+s.dialect.lockRow, id)
}

// Sales lists sales that end after endedAfter, newest first, at most limit.
func (s *Store) Sales(ctx context.Context, endedAfter time.Time, limit int) ([]seckill.Sale, error) {
	return all(ctx, s, saleRow.sale, "list sales", selectSales, endedAfter.UTC(), limit)
}

// MerchantSales lists a merchant's sales, newest first, at most limit.
func (s *Store) MerchantSales(ctx context.Context, merchant int64, limit int) ([]seckill.Sale, error) {
	return all(ctx, s, saleRow.sale, "list sales", selectMerchantSales, merchant, limit)
}

const selectSaleIDs = `SELECT id FROM sales WHERE ends_at > ? ORDER BY id`

// SaleIDs lists the ids of sales that end after endedAfter.
func (s *Store) SaleIDs(ctx context.Context, endedAfter time.Time) ([]int64, error) {
	var ids []int64
	if err := sqlx.SelectContext(ctx, s.q(ctx), &ids, selectSaleIDs, endedAfter.UTC()); err != nil {
		return nil, failed("list sale ids", err)
	}
	return ids, nil
}

// maxRowsPerInsert keeps a multi-row INSERT well under MySQL's limit of
// 65,535 placeholders and SQLite's of 32,766.
const maxRowsPerInsert = 1000

const insertOrdersHead = `INSERT INTO orders
(id, sale_id, user_id, request_id, qty, unit_price_cents, amount_cents, status, created_at, expires_at, persisted_at, paid_at, charge_id) VALUES `

// InsertOrders writes orders with multi-row INSERTs; each is its sale's
// stock movement of -qty (see Totals), so no movement row is written. An
// order comes pending, or paid with its charge's id (an instant
// checkout's, charged in its buy).
// Orders already present are left as they are, so a redelivered event is
// a no-op. The batch is written in one transaction (ctx's, if it has one).
func (s *Store) InsertOrders(ctx context.Context, os []seckill.Order) error {
	return s.InTx(ctx, func(ctx context.Context) error { return s.insertOrders(ctx, os) })
}

func (s *Store) insertOrders(ctx context.Context, os []seckill.Order) error {
	return insertRows(ctx, s, "orders", insertOrdersHead, os, func(o seckill.Order) []any {
		var paid any
		if o.PaidAt != nil {
			paid = o.PaidAt.UTC()
		}
		return []any{o.ID, o.SaleID, o.UserID, o.RequestID, o.Qty, o.UnitPriceCents, o.AmountCents,
			o.Status, o.CreatedAt.UTC(), o.ExpiresAt.UTC(), o.PersistedAt.UTC(), paid, orNull(o.ChargeID)}
	}, s.payCharged)
}

// insertRows writes items with head (an INSERT … VALUES without its
// rows) in multi-row statements of maxRowsPerInsert at most, rows already
// present (by primary or unique key) kept as they are; row gives an
// item's values, one per column of head. after, if set, runs in the same
// context once each statement's items are written.
func insertRows[T any](ctx context.Context, s *Store, what, head string, items []T, row func(T) []any,
	after func(context.Context, []T) error) error {
	for len(items) > 0 {
		n := min(len(items), maxRowsPerInsert)
		chunk := items[:n]
		items = items[n:]
		var b strings.Builder
		var args []any
		b.WriteString(head)
		for i, it := range chunk {
			vs := row(it)
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString("(?" + strings.Repeat(",?", len(vs)-1) + ")")
			args = append(args, vs...)
		}
		b.WriteString(s.dialect.skipDuplicates)
		if _, err := s.q(ctx).ExecContext(ctx, b.String(), args...); err != nil {
			return failed(fmt.Sprintf("insert %d %s", n, what), err)
		}
		if after != nil {
			if err := after(ctx, chunk); err != nil {
				return err
			}
		}
	}
	return nil
}

const orderColumns = `id, sale_id, user_id, request_id, qty, unit_price_cents, amount_cents, status,
created_at, expires_at, paid_at, cancelled_at, persisted_at, charge_id, refunded_at`

const selectOrder = `SELECT ` + orderColumns + ` FROM orders WHERE id = ?`

// Order returns one order, or seckill.ErrOrderNotFound.
func (s *Store) Order(ctx context.Context, id string) (seckill.Order, error) {
	return one(ctx, s, orderRow.order, fmt.Errorf("orders: order %s: %w", id, seckill.ErrOrderNotFound), "order "+id, selectOrder, id)
}

// selectOrders runs a query for orders.
func (s *Store) selectOrders(ctx context.Context, what, q string, args ...any) ([]seckill.Order, error) {
	return all(ctx, s, orderRow.order, what, q, args...)
}

const selectUserOrders = `SELECT ` + orderColumns + ` FROM orders WHERE user_id = ? ORDER BY created_at DESC LIMIT ?`

// UserOrders lists a user's orders, newest first, at most limit.
func (s *Store) UserOrders(ctx context.Context, user string, limit int) ([]seckill.Order, error) {
	return s.selectOrders(ctx, "orders of user", selectUserOrders, user, limit)
}

// OrderForUpdate returns one order with its row locked until ctx's
// transaction ends (a payment and the payment timeout take their turns),
// or seckill.ErrOrderNotFound.
func (s *Store) OrderForUpdate(ctx context.Context, id string) (seckill.Order, error) {
	return one(ctx, s, orderRow.order, fmt.Errorf("orders: order %s: %w", id, seckill.ErrOrderNotFound), "order "+id,
		selectOrder+s.dialect.lockRow, id)
}

const (
	payOrder    = `UPDATE orders SET status = 'paid', paid_at = ?, charge_id = ? WHERE id = ? AND status = 'pending'`
	refundOrder = `UPDATE orders SET status = 'refunded', refunded_at = ? WHERE id = ? AND status = 'paid'`
)

// SetPaid marks a pending order paid at now by chargeID ("" for a free
// order); ok is false when it was not pending.
func (s *Store) SetPaid(ctx context.Context, id, chargeID string, now time.Time) (bool, error) {
	return s.changeRow(ctx, "pay "+id, payOrder, now.UTC(), orNull(chargeID), id)
}

// SetRefunded marks a paid order refunded at now; ok is false when it was
// not paid.
func (s *Store) SetRefunded(ctx context.Context, id string, now time.Time) (bool, error) {
	return s.changeRow(ctx, "refund "+id, refundOrder, now.UTC(), id)
}

func (s *Store) changeRow(ctx context.Context, what, q string, args ...any) (bool, error) {
	res, err := s.q(ctx).ExecContext(ctx, q, args...)
	if err != nil {
		return false, failed(what, err)
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

const cancelOrder = `UPDATE orders SET status = 'cancelled', cancelled_at = ? WHERE id = ? AND status = 'pending'`

// Cancel cancels a pending order and records its cancel movement, in one
// transaction. It returns the order as it stands afterwards: cancelled (now
// or before), paid (seckill.ErrOrderPaid: a paid order is never
// cancelled) or refunded (seckill.ErrOrderRefunded).
func (s *Store) Cancel(ctx context.Context, id string, now time.Time) (seckill.Order, error) {
	var o seckill.Order
	err := s.InTx(ctx, func(ctx context.Context) error {
		res, err := s.q(ctx).ExecContext(ctx, cancelOrder, now.UTC(), id)
		if err != nil {
			return failed("cancel "+id, err)
		}
		if o, err = s.Order(ctx, id); err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 1 {
			if err := s.AddMovement(ctx, o.SaleID, o.ID, o.Qty, seckill.ReasonCancel, now); err != nil {
				return err
			}
		}
		switch o.Status {
		case seckill.OrderPaid:
			return fmt.Errorf("orders: cancel %s: %w", id, seckill.ErrOrderPaid)
		case seckill.OrderRefunded:
			return fmt.Errorf("orders: cancel %s: %w", id, seckill.ErrOrderRefunded)
		}
		return nil
	})
	return o, err
}

const selectPendingOrders = `SELECT ` + orderColumns + ` FROM orders WHERE status = 'pending' ORDER BY expires_at`

// PendingOrders returns every order awaiting payment, the first to expire
// first (to re-arm their timeouts after a restart; O(pending orders)).
func (s *Store) PendingOrders(ctx context.Context) ([]seckill.Order, error) {
	return s.selectOrders(ctx, "pending orders", selectPendingOrders)
}

const selectSaleOrders = `SELECT ` + orderColumns + ` FROM orders WHERE sale_id = ?`

// SaleOrders returns every order of a sale (for reconciling; O(orders)).
func (s *Store) SaleOrders(ctx context.Context, sale int64) ([]seckill.Order, error) {
	return s.selectOrders(ctx, fmt.Sprintf("orders of sale %d", sale), selectSaleOrders, sale)
}

const selectOrderSums = `SELECT status, COUNT(*) AS n, COALESCE(SUM(qty), 0) AS units FROM orders WHERE sale_id = ? GROUP BY status`

// selectMovementSums leaves out reason 'sale': an order is its own sale
// movement, and such rows are what releases before migration 00008 wrote.
const selectMovementSums = `SELECT reason, COALESCE(SUM(delta), 0) AS units FROM stock_movements
WHERE sale_id = ? AND reason <> 'sale' GROUP BY reason`

// Totals returns the sums of a sale's orders and movements. The sale
// movements are the orders: Movements[ReasonSale] is minus the units of
// every order, cancelled or not (a cancel is a movement of its own).
func (s *Store) Totals(ctx context.Context, sale int64) (seckill.Totals, error) {
	// The total alone: a reconciliation reads no column it does not need
	// (nor one a schema a release behind lacks).
	total, err := one(ctx, s, func(n int64) int64 { return n }, fmt.Errorf("orders: sale %d: %w", sale, seckill.ErrSaleNotFound),
		fmt.Sprintf("sale %d", sale), selectSaleTotal, sale)
	if err != nil {
		return seckill.Totals{}, err
	}
	t := seckill.Totals{Total: total, Orders: map[seckill.OrderStatus]int64{}, Units: map[seckill.OrderStatus]int64{},
		Movements: map[seckill.Reason]int64{}}
	var os []struct {
		Status string `db:"status"`
		N      int64  `db:"n"`
		Units  int64  `db:"units"`
	}
	what := fmt.Sprintf("totals of sale %d", sale)
	if err := sqlx.SelectContext(ctx, s.q(ctx), &os, selectOrderSums, sale); err != nil {
		return seckill.Totals{}, failed(what, err)
	}
	for _, r := range os {
		t.Orders[seckill.OrderStatus(r.Status)], t.Units[seckill.OrderStatus(r.Status)] = r.N, r.Units
		t.Movements[seckill.ReasonSale] -= r.Units
	}
	var ms []struct {
		Reason string `db:"reason"`
		Units  int64  `db:"units"`
	}
	if err := sqlx.SelectContext(ctx, s.q(ctx), &ms, selectMovementSums, sale); err != nil {
		return seckill.Totals{}, failed(what, err)
	}
	for _, r := range ms {
		t.Movements[seckill.Reason(r.Reason)] = r.Units
	}
	return t, nil
}

const selectSoldTimes = `SELECT created_at, qty FROM orders WHERE sale_id = ? AND created_at >= ? AND created_at < ? AND status <> 'cancelled'`

// SoldHistory counts the units of a sale's orders (as the ledger holds
// them, cancelled ones left out: their units went back) placed in each of
// n equal slices of [from, to), cumulated: the units sold by each slice's
// end.
func (s *Store) SoldHistory(ctx context.Context, sale int64, from, to time.Time, n int) ([]int64, error) {
	var rows []struct {
		At  time.Time `db:"created_at"`
		Qty int64     `db:"qty"`
	}
	if err := sqlx.SelectContext(ctx, s.q(ctx), &rows, selectSoldTimes, sale, from.UTC(), to.UTC()); err != nil {
		return nil, failed(fmt.Sprintf("history of sale %d", sale), err)
	}
	out := make([]int64, n)
	span := to.Sub(from)
	for _, r := range rows {
		i := min(n-1, max(0, int(int64(n)*int64(r.At.Sub(from))/int64(max(span, 1)))))
		out[i] += r.Qty
	}
	for i := 1; i < n; i++ {
		out[i] += out[i-1]
	}
	return out, nil
}
