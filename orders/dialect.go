package orders

import (
	"context"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/pressly/goose/v3"
	_ "modernc.org/sqlite" // the "sqlite" driver, pure Go

	schema "github.com/seckill/seckill/sql"
)

// dialect is what differs between the ledger's two databases; everything
// else is one store, one set of queries. MySQL (or MariaDB) is the
// production ledger; SQLite serves the embedded mode.
type dialect struct {
	goose      goose.Dialect
	migrations fs.FS
	// skipDuplicates ends a multi-row INSERT so that rows already present
	// (by primary or unique key) are kept as they are. Not INSERT IGNORE,
	// which would hide truncation and failed checks as well.
	skipDuplicates string
	// lockRow ends a SELECT whose row stays locked until the transaction
	// ends. SQLite has no row locks: its write transactions (begun
	// IMMEDIATE) already run one at a time.
	lockRow string
	// lockShared ends a SELECT whose rows stay share-locked until the
	// transaction ends: it waits for a row another transaction inserted
	// and has not committed yet, and then sees it.
	lockShared string
	// upsertImage ends the INSERT of a sale's image so that it replaces
	// the one the sale had: one statement, no gap lock of a DELETE of a
	// row that is not there (two first uploads deadlocked on those).
	upsertImage string
	// hasVersionTable counts the goose version table (0 or 1).
	hasVersionTable string
}

var (
	mysqlDialect = dialect{
		goose: goose.DialectMySQL, migrations: schema.MySQL,
		skipDuplicates: ` ON DUPLICATE KEY UPDATE id = id`,
		lockRow:        ` FOR UPDATE`,
		lockShared:     ` LOCK IN SHARE MODE`,
		upsertImage: ` ON DUPLICATE KEY UPDATE etag = VALUES(etag), width = VALUES(width), height = VALUES(height),
			bytes = VALUES(bytes), updated_at = VALUES(updated_at)`,
		hasVersionTable: `SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'goose_db_version'`,
	}
	sqliteDialect = dialect{
		goose: goose.DialectSQLite3, migrations: schema.SQLite,
		skipDuplicates: ` ON CONFLICT DO NOTHING`,
		upsertImage: ` ON CONFLICT (sale_id) DO UPDATE SET etag = excluded.etag, width = excluded.width, height = excluded.height,
			bytes = excluded.bytes, updated_at = excluded.updated_at`,
		hasVersionTable: `SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = 'goose_db_version'`,
	}
)

func dialectOf(db *sqlx.DB) dialect {
	if db.DriverName() == "sqlite" {
		return sqliteDialect
	}
	return mysqlDialect
}

// OpenSQLite opens (creating it if needed) the SQLite ledger ledger.db in
// dir: write-ahead logging (readers never wait for the writer), foreign
// keys on, write transactions begun IMMEDIATE (so two never deadlock
// upgrading a read lock), a busy timeout for the writer's turn, and
// synchronous FULL: a commit returns once the log is on the disk, so a
// transaction committed survives a power loss, not only a crash of the
// process (embedded mode answers a buy once its transaction committed).
// Statement journals stay in memory (temp_store): a multi-row INSERT that
// may fail a constraint keeps the pages it changes there, and on a file
// they cost a write each. The page cache is 32 MiB.
func OpenSQLite(ctx context.Context, dir string) (*sqlx.DB, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("orders: data directory: %w", err)
	}
	path := filepath.Join(dir, "ledger.db")
	q := url.Values{}
	for _, p := range []string{"journal_mode(WAL)", "foreign_keys(1)", "busy_timeout(10000)", "synchronous(FULL)", "temp_store(MEMORY)", "cache_size(-32768)"} {
		q.Add("_pragma", p)
	}
	q.Set("_txlock", "immediate")
	q.Set("_time_format", "sqlite")
	db, err := sqlx.Open("sqlite", "file:"+path+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("orders: open %s: %w", path, err)
	}
	db.SetMaxOpenConns(8)
	db.SetMaxIdleConns(8)
	db.SetConnMaxIdleTime(time.Minute)
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("orders: open %s: %w", path, err)
	}
	return db, nil
}
