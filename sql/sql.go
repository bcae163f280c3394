// Package sql holds the ledger's schema as numbered migration files, one
// set per database, embedded into the binary and applied with goose
// (seckill migrate): MySQL (the production ledger; the SQL runs unchanged
// on MariaDB 10.11 and MySQL 8) and SQLite (the embedded mode). The two
// sets move in step: migration N does the same in both.
package sql

import (
	"embed"
	"io/fs"
)

//go:embed migrations
var files embed.FS

// Migrations are the goose migration files of each database, at the root
// of their FS.
var (
	MySQL, _  = fs.Sub(files, "migrations/mysql")
	SQLite, _ = fs.Sub(files, "migrations/sqlite")
)
