// Package orders is the ledger in SQL: sales, orders and stock movements
// in MySQL (or MariaDB), or in SQLite for the embedded mode, through one
// store with a dialect switch. It opens and migrates the database and
// translates between its rows and the domain's types; the rules live in
// package seckill, the operations in package sales and package worker.
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

// one reads the one row q selects into R and converts it; notFound when
// there is none.
func one[R, T any](ctx context.Context, s *Store, conv func(R) T, notFound error, what, q string, args ...any) (T, error) {
	var r R
	var zero T
	err := sqlx.GetContext(ctx, s.q(ctx), &r, q, args...)
	if errors.Is(err, sql.ErrNoRows) {
		return zero, notFound
	}
	if err != nil {
		return zero, failed(what, err)
	}
	return conv(r), nil
}

// all reads every row q selects into R, converted.
func all[R, T any](ctx context.Context, s *Store, conv func(R) T, what, q string, args ...any) ([]T, error) {
	var rows []R
	if err := sqlx.SelectContext(ctx, s.q(ctx), &rows, q, args...); err != nil {
		return nil, failed(what, err)
	}
	out := make([]T, len(rows))
	for i, r := range rows {
		out[i] = conv(r)
	}
	return out, nil
}
