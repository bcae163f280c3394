package orders

import (
	"context"
	"database/sql/driver"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"

	"github.com/go-sql-driver/mysql"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// Transient reports whether a ledger error may pass if the operation is
// tried again: the database is unreachable or going away, a lock wait
// timed out (SQLite: busy), a deadlock was broken, the connection pool or
// the disk is full, or the schema is not there yet (an operator runs
// migrate). Retrying is safe: every write of the ledger is idempotent or
// transactional.
func Transient(err error) bool {
	var se *sqlite.Error
	if errors.As(err, &se) {
		switch se.Code() & 0xff { // the primary code of an extended one
		case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED, sqlite3.SQLITE_FULL, sqlite3.SQLITE_IOERR:
			return true
		case sqlite3.SQLITE_ERROR:
			return strings.Contains(se.Error(), "no such table")
		}
		return false
	}
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		switch me.Number {
		case 1040, // too many connections
			1053, // server shutdown in progress
			1146, // table does not exist (not migrated yet)
			1205, // lock wait timeout
			1213, // deadlock
			1927, // connection killed
			2006, // server has gone away
			2013: // lost connection during query
			return true
		}
		return false
	}
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, driver.ErrBadConn) || errors.Is(err, mysql.ErrInvalidConn) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, context.DeadlineExceeded)
}

// Refused reports whether the ledger refused the data itself, for a reason
// that trying again will not heal: a row of an unknown sale (foreign key),
// a value too long or out of range, a failed check constraint (SQLite: a
// constraint, too big, a type mismatch). Anything
// else that is not Transient is neither: the caller keeps retrying rather
// than give a valid order up.
func Refused(err error) bool {
	var se *sqlite.Error
	if errors.As(err, &se) {
		switch se.Code() & 0xff {
		case sqlite3.SQLITE_CONSTRAINT, sqlite3.SQLITE_TOOBIG, sqlite3.SQLITE_MISMATCH:
			return true
		}
		return false
	}
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		switch me.Number {
		case 1048, // column cannot be null
			1264, // out of range value
			1292, // incorrect datetime value
			1366, // incorrect value
			1406, // data too long
			1452, // foreign key: no such sale
			3819, // check constraint (MySQL)
			4025: // check constraint (MariaDB)
			return true
		}
	}
	return false
}

// Duplicate reports whether the ledger refused a row because its primary
// or a unique key is taken.
func Duplicate(err error) bool {
	var se *sqlite.Error
	if errors.As(err, &se) {
		return se.Code() == sqlite3.SQLITE_CONSTRAINT_UNIQUE || se.Code() == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY
	}
	var me *mysql.MySQLError
	return errors.As(err, &me) && me.Number == 1062
}
