package orders

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"
	"github.com/pressly/goose/v3"
)

// Open connects to MySQL, creating the database named in the DSN if it is
// missing. The DSN must ask for parseTime=true.
func Open(ctx context.Context, dsn string) (*sqlx.DB, error) {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("orders: mysql dsn: %w", err)
	}
	if !cfg.ParseTime {
		return nil, errors.New("orders: mysql dsn: parseTime=true is required")
	}
	cfg.Loc = time.UTC
	// One round trip per query instead of prepare/execute/close: the batch
	// INSERTs carry thousands of placeholders. Safe with utf8mb4.
	cfg.InterpolateParams = true
	if cfg.DBName != "" {
		if err := createDatabase(ctx, *cfg); err != nil {
			return nil, err
		}
	}
	db, err := sqlx.Open("mysql", cfg.FormatDSN())
	if err != nil {
		return nil, fmt.Errorf("orders: open mysql: %w", err)
	}
	db.SetMaxOpenConns(32)
	db.SetMaxIdleConns(32)
	db.SetConnMaxLifetime(5 * time.Minute)
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("orders: mysql at %s: %w", cfg.Addr, err)
	}
	return db, nil
}

// Ping reports whether the MySQL server of a DSN answers, without opening
// or creating its database.
func Ping(ctx context.Context, dsn string) error {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return fmt.Errorf("orders: mysql dsn: %w", err)
	}
	cfg.DBName = ""
	db, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		return err
	}
	defer db.Close()
	return db.PingContext(ctx)
}

func createDatabase(ctx context.Context, cfg mysql.Config) error {
	name := cfg.DBName
	cfg.DBName = ""
	db, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		return fmt.Errorf("orders: open mysql: %w", err)
	}
	defer db.Close()
	q := "CREATE DATABASE IF NOT EXISTS `" + strings.ReplaceAll(name, "`", "``") + "` CHARACTER SET utf8mb4"
	if _, err := db.ExecContext(ctx, q); err != nil {
		return fmt.Errorf("orders: create database %s at %s: %w", name, cfg.Addr, err)
	}
	return nil
}

// Migrate brings the schema up to date with the embedded migrations of
// db's database.
func Migrate(ctx context.Context, db *sqlx.DB) ([]*goose.MigrationResult, error) {
	p, err := provider(db)
	if err != nil {
		return nil, err
	}
	res, err := p.Up(ctx)
	if err != nil {
		return res, fmt.Errorf("orders: migrate: %w", err)
	}
	return res, nil
}

func provider(db *sqlx.DB) (*goose.Provider, error) {
	d := dialectOf(db)
	p, err := goose.NewProvider(d.goose, db.DB, d.migrations, goose.WithDisableGlobalRegistry(true))
	if err != nil {
		return nil, fmt.Errorf("orders: migrations: %w", err)
	}
	return p, nil
}

// ErrSchemaBehind means the ledger's schema is older than this binary's:
// every query might fail on a missing table or column.
var ErrSchemaBehind = errors.New("the ledger schema is behind this binary: run `seckill migrate` (or set SECKILL_AUTO_MIGRATE=1)")

// CheckSchema compares the ledger's applied migrations with the ones this
// binary carries, without changing anything: ErrSchemaBehind (saying both
// versions) if some are missing.
func CheckSchema(ctx context.Context, db *sqlx.DB) error {
	p, err := provider(db)
	if err != nil {
		return err
	}
	var want int64
	for _, src := range p.ListSources() {
		want = max(want, src.Version)
	}
	var tables int
	if err := db.GetContext(ctx, &tables, dialectOf(db).hasVersionTable); err != nil {
		return fmt.Errorf("orders: schema version: %w", err)
	}
	var have int64
	if tables > 0 {
		const applied = `SELECT COALESCE(MAX(version_id), 0) FROM goose_db_version WHERE is_applied`
		if err := db.GetContext(ctx, &have, applied); err != nil {
			return fmt.Errorf("orders: schema version: %w", err)
		}
	}
	if have < want {
		return fmt.Errorf("%w (it is at version %d, this binary needs %d)", ErrSchemaBehind, have, want)
	}
	return nil
}

// Store reads and writes the ledger, in MySQL or SQLite. A Store made by
// InTx runs every query in that transaction.
type Store struct {
	db      *sqlx.DB
	exec    sqlx.ExtContext
	dialect dialect
}

// NewStore returns a Store on db (opened by Open or OpenSQLite).
func NewStore(db *sqlx.DB) *Store { return &Store{db: db, exec: db, dialect: dialectOf(db)} }

// DB returns the connection pool behind the store.
func (s *Store) DB() *sqlx.DB { return s.db }

// InTx runs fn with a Store bound to one transaction, committed if fn
// returns nil and rolled back otherwise.
func (s *Store) InTx(ctx context.Context, fn func(tx *Store) error) error {
	if _, ok := s.exec.(*sqlx.Tx); ok {
		return fn(s)
	}
	tx, err := s.db.BeginTxx(ctx, nil)
	if err != nil {
		return fmt.Errorf("orders: begin: %w", err)
	}
	if err := fn(&Store{db: s.db, exec: tx, dialect: s.dialect}); err != nil {
		_ = tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("orders: commit: %w", err)
	}
	return nil
}

const saleColumns = `id, name, item, price_cents, total, per_user_limit, starts_at, ends_at, status, buckets, require_ticket, pow_difficulty, created_at, updated_at`

const insertSale = `
INSERT INTO sales (name, item, price_cents, total, per_user_limit, starts_at, ends_at, status, buckets,
  require_ticket, pow_difficulty, created_at, updated_at)
VALUES (?, ?, ?, ?, ?, ?, ?, 'active', ?, ?, ?, ?, ?)`

// CreateSale stores a new sale with its initial stock movement and returns
// it with its id. Run it in InTx together with the Redis warm-up.
func (s *Store) CreateSale(ctx context.Context, sale Sale, now time.Time) (Sale, error) {
	now = now.UTC().Truncate(time.Millisecond)
	res, err := s.exec.ExecContext(ctx, insertSale, sale.Name, sale.Item, sale.PriceCents, sale.Total,
		sale.PerUserLimit, sale.StartsAt.UTC(), sale.EndsAt.UTC(), max(1, sale.Buckets), sale.RequireTicket, sale.PowDifficulty, now, now)
	if err != nil {
		return Sale{}, fmt.Errorf("orders: create sale: %w", err)
	}
	id, err := res.LastInsertId()
	if err != nil {
		return Sale{}, fmt.Errorf("orders: create sale: %w", err)
	}
	if err := s.addMovement(ctx, id, sale.Total, ReasonInitial, now); err != nil {
		return Sale{}, err
	}
	return s.Sale(ctx, id)
}

const insertMovement = `INSERT INTO stock_movements (sale_id, order_id, delta, reason, created_at) VALUES (?, NULL, ?, ?, ?)`

func (s *Store) addMovement(ctx context.Context, sale, delta int64, reason string, now time.Time) error {
	if _, err := s.exec.ExecContext(ctx, insertMovement, sale, delta, reason, now.UTC()); err != nil {
		return fmt.Errorf("orders: %s movement of sale %d: %w", reason, sale, err)
	}
	return nil
}

const selectSale = `SELECT ` + saleColumns + ` FROM sales WHERE id = ?`

// Sale returns one sale.
func (s *Store) Sale(ctx context.Context, id int64) (Sale, error) {
	return s.getSale(ctx, selectSale, id)
}

// SaleForUpdate returns one sale and locks its row until the transaction ends.
func (s *Store) SaleForUpdate(ctx context.Context, id int64) (Sale, error) {
	return s.getSale(ctx, selectSale+s.dialect.lockRow, id)
}

func (s *Store) getSale(ctx context.Context, q string, id int64) (Sale, error) {
	var sale Sale
	err := sqlx.GetContext(ctx, s.exec, &sale, q, id)
	if errors.Is(err, sql.ErrNoRows) {
		return Sale{}, fmt.Errorf("orders: sale %d: %w", id, ErrSaleNotFound)
	}
	if err != nil {
		return Sale{}, fmt.Errorf("orders: sale %d: %w", id, err)
	}
	return sale, nil
}

const selectSales = `SELECT ` + saleColumns + ` FROM sales WHERE ends_at > ? ORDER BY id DESC LIMIT ?`

// Sales lists sales that end after endedAfter, newest first, at most limit.
func (s *Store) Sales(ctx context.Context, endedAfter time.Time, limit int) ([]Sale, error) {
	sales := []Sale{}
	if err := sqlx.SelectContext(ctx, s.exec, &sales, selectSales, endedAfter.UTC(), limit); err != nil {
		return nil, fmt.Errorf("orders: list sales: %w", err)
	}
	return sales, nil
}

const selectSaleIDs = `SELECT id FROM sales WHERE ends_at > ? ORDER BY id`

// SaleIDs lists the ids of sales that end after endedAfter.
func (s *Store) SaleIDs(ctx context.Context, endedAfter time.Time) ([]int64, error) {
	var ids []int64
	if err := sqlx.SelectContext(ctx, s.exec, &ids, selectSaleIDs, endedAfter.UTC()); err != nil {
		return nil, fmt.Errorf("orders: list sale ids: %w", err)
	}
	return ids, nil
}

const updateSale = `
UPDATE sales SET name = ?, item = ?, price_cents = ?, per_user_limit = ?, starts_at = ?, ends_at = ?,
  require_ticket = ?, pow_difficulty = ?, updated_at = ?
WHERE id = ?`

// UpdateSale writes a sale's editable fields.
func (s *Store) UpdateSale(ctx context.Context, sale Sale, now time.Time) error {
	_, err := s.exec.ExecContext(ctx, updateSale, sale.Name, sale.Item, sale.PriceCents, sale.PerUserLimit,
		sale.StartsAt.UTC(), sale.EndsAt.UTC(), sale.RequireTicket, sale.PowDifficulty, now.UTC(), sale.ID)
	if err != nil {
		return fmt.Errorf("orders: update sale %d: %w", sale.ID, err)
	}
	return nil
}

const updateSaleStatus = `UPDATE sales SET status = ?, updated_at = ? WHERE id = ?`

// SetSaleStatus records the merchant status of a sale.
func (s *Store) SetSaleStatus(ctx context.Context, id int64, status string, now time.Time) error {
	if _, err := s.exec.ExecContext(ctx, updateSaleStatus, status, now.UTC(), id); err != nil {
		return fmt.Errorf("orders: set status of sale %d: %w", id, err)
	}
	return nil
}

const restockSale = `UPDATE sales SET total = total + ?, updated_at = ? WHERE id = ?`

// Restock adds qty to a sale's total with a restock movement.
func (s *Store) Restock(ctx context.Context, id, qty int64, now time.Time) error {
	if _, err := s.exec.ExecContext(ctx, restockSale, qty, now.UTC(), id); err != nil {
		return fmt.Errorf("orders: restock sale %d: %w", id, err)
	}
	return s.addMovement(ctx, id, qty, ReasonRestock, now)
}

// maxRowsPerInsert keeps a multi-row INSERT well under MySQL's limit of
// 65,535 placeholders and SQLite's of 32,766.
const maxRowsPerInsert = 1000

const insertOrdersHead = `INSERT INTO orders
(id, sale_id, user_id, request_id, qty, unit_price_cents, amount_cents, status, created_at, expires_at, persisted_at) VALUES `

const insertMovementsHead = `INSERT INTO stock_movements (sale_id, order_id, delta, reason, created_at) VALUES `

// InsertOrders writes orders and their sale movements with multi-row
// INSERTs. Orders already present are left as they are, so a redelivered
// event is a no-op. Run it in InTx to write a batch atomically.
func (s *Store) InsertOrders(ctx context.Context, os []Order) error {
	for len(os) > 0 {
		n := min(len(os), maxRowsPerInsert)
		chunk := os[:n]
		os = os[n:]
		var b strings.Builder
		args := make([]any, 0, 11*n)
		b.WriteString(insertOrdersHead)
		for i, o := range chunk {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString("(?,?,?,?,?,?,?,?,?,?,?)")
			args = append(args, o.ID, o.SaleID, o.UserID, o.RequestID, o.Qty, o.UnitPriceCents, o.AmountCents,
				o.Status, o.CreatedAt.UTC(), o.ExpiresAt.UTC(), o.PersistedAt.UTC())
		}
		b.WriteString(s.dialect.skipDuplicates)
		if _, err := s.exec.ExecContext(ctx, b.String(), args...); err != nil {
			return fmt.Errorf("orders: insert %d orders: %w", n, err)
		}

		b.Reset()
		args = args[:0]
		b.WriteString(insertMovementsHead)
		for i, o := range chunk {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString("(?,?,?,?,?)")
			args = append(args, o.SaleID, o.ID, -o.Qty, ReasonSale, o.CreatedAt.UTC())
		}
		b.WriteString(s.dialect.skipDuplicates)
		if _, err := s.exec.ExecContext(ctx, b.String(), args...); err != nil {
			return fmt.Errorf("orders: insert %d movements: %w", n, err)
		}
	}
	return nil
}

const orderColumns = `id, sale_id, user_id, request_id, qty, unit_price_cents, amount_cents, status,
created_at, expires_at, paid_at, cancelled_at, persisted_at`

const selectOrder = `SELECT ` + orderColumns + ` FROM orders WHERE id = ?`

// Order returns one order.
func (s *Store) Order(ctx context.Context, id string) (Order, error) {
	var o Order
	err := sqlx.GetContext(ctx, s.exec, &o, selectOrder, id)
	if errors.Is(err, sql.ErrNoRows) {
		return Order{}, fmt.Errorf("orders: order %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return Order{}, fmt.Errorf("orders: order %s: %w", id, err)
	}
	return o, nil
}

const selectUserOrders = `SELECT ` + orderColumns + ` FROM orders WHERE user_id = ? ORDER BY created_at DESC LIMIT ?`

// UserOrders lists a user's orders, newest first, at most limit.
func (s *Store) UserOrders(ctx context.Context, user string, limit int) ([]Order, error) {
	os := []Order{}
	if err := sqlx.SelectContext(ctx, s.exec, &os, selectUserOrders, user, limit); err != nil {
		return nil, fmt.Errorf("orders: orders of user: %w", err)
	}
	return os, nil
}

const payOrder = `UPDATE orders SET status = 'paid', paid_at = ?
WHERE id = ? AND user_id = ? AND status = 'pending' AND expires_at > ?`

// Pay marks a pending order of user paid, if its payment window is open. It
// returns the order as it stands: paying a paid order again succeeds;
// ErrNotFound for an unknown order or another user's, ErrCancelled for a
// cancelled one, ErrExpired for a pending one whose window has closed (the
// caller cancels it).
func (s *Store) Pay(ctx context.Context, id, user string, now time.Time) (Order, error) {
	var o Order
	err := s.InTx(ctx, func(tx *Store) error {
		res, err := tx.exec.ExecContext(ctx, payOrder, now.UTC(), id, user, now.UTC())
		if err != nil {
			return fmt.Errorf("orders: pay %s: %w", id, err)
		}
		paid, _ := res.RowsAffected()
		if o, err = tx.Order(ctx, id); err != nil {
			return err
		}
		if o.UserID != user {
			// Another user's order is answered as if it did not exist.
			return fmt.Errorf("orders: pay %s: %w", id, ErrNotFound)
		}
		switch {
		case paid == 1 || o.Status == StatusPaid:
			return nil
		case o.Status == StatusCancelled:
			return fmt.Errorf("orders: pay %s: %w", id, ErrCancelled)
		}
		return fmt.Errorf("orders: pay %s: %w", id, ErrExpired)
	})
	return o, err
}

const cancelOrder = `UPDATE orders SET status = 'cancelled', cancelled_at = ? WHERE id = ? AND status = 'pending'`

const insertCancelMovement = `INSERT INTO stock_movements (sale_id, order_id, delta, reason, created_at) VALUES (?, ?, ?, 'cancel', ?)`

// Cancel cancels a pending order and records its cancel movement, in one
// transaction. It returns the order as it stands afterwards: cancelled (now
// or before) or paid (ErrPaid, a paid order is never cancelled).
func (s *Store) Cancel(ctx context.Context, id string, now time.Time) (Order, error) {
	var o Order
	err := s.InTx(ctx, func(tx *Store) error {
		res, err := tx.exec.ExecContext(ctx, cancelOrder, now.UTC(), id)
		if err != nil {
			return fmt.Errorf("orders: cancel %s: %w", id, err)
		}
		if o, err = tx.Order(ctx, id); err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 1 {
			if _, err := tx.exec.ExecContext(ctx, insertCancelMovement, o.SaleID, o.ID, o.Qty, now.UTC()); err != nil {
				return fmt.Errorf("orders: cancel movement of %s: %w", id, err)
			}
		}
		if o.Status == StatusPaid {
			return fmt.Errorf("orders: cancel %s: %w", id, ErrPaid)
		}
		return nil
	})
	return o, err
}

const selectPendingOrders = `SELECT ` + orderColumns + ` FROM orders WHERE status = 'pending' ORDER BY expires_at`

// PendingOrders returns every order awaiting payment, the first to expire
// first (to re-arm their timeouts after a restart; O(pending orders)).
func (s *Store) PendingOrders(ctx context.Context) ([]Order, error) {
	os := []Order{}
	if err := sqlx.SelectContext(ctx, s.exec, &os, selectPendingOrders); err != nil {
		return nil, fmt.Errorf("orders: pending orders: %w", err)
	}
	return os, nil
}

const selectSaleOrders = `SELECT ` + orderColumns + ` FROM orders WHERE sale_id = ?`

// SaleOrders returns every order of a sale (for reconciling; O(orders)).
func (s *Store) SaleOrders(ctx context.Context, sale int64) ([]Order, error) {
	os := []Order{}
	if err := sqlx.SelectContext(ctx, s.exec, &os, selectSaleOrders, sale); err != nil {
		return nil, fmt.Errorf("orders: orders of sale %d: %w", sale, err)
	}
	return os, nil
}

// Ledger sums what MySQL holds about one sale.
type Ledger struct {
	Total     int64
	Orders    map[string]int64 // order count by status
	Units     map[string]int64 // units by order status
	Movements map[string]int64 // delta sum by reason
}

// Sold is the units of the sale's orders that are not cancelled.
func (l Ledger) Sold() int64 { return l.Units[StatusPending] + l.Units[StatusPaid] }

// Available is the sum of all stock movements.
func (l Ledger) Available() int64 {
	var sum int64
	for _, d := range l.Movements {
		sum += d
	}
	return sum
}

const selectOrderSums = `SELECT status, COUNT(*) AS n, COALESCE(SUM(qty), 0) AS units FROM orders WHERE sale_id = ? GROUP BY status`

const selectMovementSums = `SELECT reason, COALESCE(SUM(delta), 0) AS units FROM stock_movements WHERE sale_id = ? GROUP BY reason`

// Ledger returns the sums of a sale's orders and movements.
func (s *Store) Ledger(ctx context.Context, sale int64) (Ledger, error) {
	sl, err := s.Sale(ctx, sale)
	if err != nil {
		return Ledger{}, err
	}
	l := Ledger{Total: sl.Total, Orders: map[string]int64{}, Units: map[string]int64{}, Movements: map[string]int64{}}
	var os []struct {
		Status string `db:"status"`
		N      int64  `db:"n"`
		Units  int64  `db:"units"`
	}
	if err := sqlx.SelectContext(ctx, s.exec, &os, selectOrderSums, sale); err != nil {
		return Ledger{}, fmt.Errorf("orders: ledger of sale %d: %w", sale, err)
	}
	for _, r := range os {
		l.Orders[r.Status], l.Units[r.Status] = r.N, r.Units
	}
	var ms []struct {
		Reason string `db:"reason"`
		Units  int64  `db:"units"`
	}
	if err := sqlx.SelectContext(ctx, s.exec, &ms, selectMovementSums, sale); err != nil {
		return Ledger{}, fmt.Errorf("orders: ledger of sale %d: %w", sale, err)
	}
	for _, r := range ms {
		l.Movements[r.Reason] = r.Units
	}
	return l, nil
}
