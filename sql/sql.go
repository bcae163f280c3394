// Package sql holds the MySQL schema of the ledger as numbered migration
// files, embedded into the binary and applied with goose (seckill migrate).
// The SQL runs unchanged on MariaDB 10.11 and MySQL 8.
package sql

import (
	"embed"
	"io/fs"
)

//go:embed migrations/*.sql
var files embed.FS

// Migrations are the goose migration files, at the root of the FS.
var Migrations, _ = fs.Sub(files, "migrations")
