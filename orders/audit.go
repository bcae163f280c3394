package orders

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/seckill/seckill"
)

// auditRow is a row of the audit log.
type auditRow struct {
	ID     int64          `db:"id"`
	At     time.Time      `db:"at"`
	Actor  string         `db:"actor"`
	Role   string         `db:"role"`
	Action string         `db:"action"`
	SaleID sql.NullInt64  `db:"sale_id"`
	Owner  int64          `db:"owner"`
	Before sql.NullString `db:"before_json"`
	After  sql.NullString `db:"after_json"`
	IP     string         `db:"ip"`
}

func (r auditRow) entry() seckill.AuditEntry {
	e := seckill.AuditEntry{ID: r.ID, At: r.At, Actor: r.Actor, Role: r.Role, Action: r.Action, SaleID: r.SaleID.Int64, Owner: r.Owner, IP: r.IP}
	if r.Before.Valid {
		e.Before = json.RawMessage(r.Before.String)
	}
	if r.After.Valid {
		e.After = json.RawMessage(r.After.String)
	}
	return e
}

const (
	insertAudit = `INSERT INTO audit_log (at, actor, role, action, sale_id, owner, before_json, after_json, ip) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`
	selectAudit = `SELECT id, at, actor, role, action, sale_id, owner, before_json, after_json, ip FROM audit_log WHERE 1 = 1`
)

// AppendAudit appends e to the audit log as it is (its time, actor,
// role and address set by the caller: package audit), in ctx's
// transaction if it has one.
func (s *Store) AppendAudit(ctx context.Context, e seckill.AuditEntry) error {
	_, err := s.q(ctx).ExecContext(ctx, insertAudit, e.At.UTC(), e.Actor, e.Role, e.Action,
		nullable(e.SaleID), e.Owner, nullText(e.Before), nullText(e.After), e.IP)
	if err != nil {
		return failed("append to the audit log", err)
	}
	return nil
}

func nullable(id int64) any {
	if id == 0 {
		return nil
	}
	return id
}

func nullText(raw json.RawMessage) any {
	if raw == nil {
		return nil
	}
	return string(raw)
}

// AuditLog reads the audit log, newest first, as f selects.
func (s *Store) AuditLog(ctx context.Context, f seckill.AuditFilter) ([]seckill.AuditEntry, error) {
	q, args := selectAudit, []any{}
	if f.SaleID > 0 {
		q, args = q+` AND sale_id = ?`, append(args, f.SaleID)
	}
	if f.Actor != "" {
		q, args = q+` AND actor = ?`, append(args, f.Actor)
	}
	if f.Action != "" {
		q, args = q+` AND action = ?`, append(args, f.Action)
	}
	if !f.Since.IsZero() {
		q, args = q+` AND at >= ?`, append(args, f.Since.UTC())
	}
	if !f.Until.IsZero() {
		q, args = q+` AND at < ?`, append(args, f.Until.UTC())
	}
	if f.Owner > 0 {
		q, args = q+` AND owner = ?`, append(args, f.Owner)
	}
	if f.BeforeID > 0 {
		q, args = q+` AND id < ?`, append(args, f.BeforeID)
	}
	q, args = q+` ORDER BY id DESC LIMIT ?`, append(args, f.Limit)
	return all(ctx, s, auditRow.entry, "read the audit log", q, args...)
}

// ledgerTables are the tables the application reads and writes; the audit
// log it only reads and appends to.
var ledgerTables = []string{"sales", "orders", "stock_movements", "accounts", "account_tokens", "passkeys", "merchants", "topups", "payouts"}

// appendOnly are the tables the application only reads and appends to:
// history that is never edited (a mistake is corrected by another row).
var appendOnly = []string{"audit_log", "transfers"}

// AppGrants are the MySQL statements that give the application's database
// user (as 'name'@'host') what it needs on database db and no more: it
// may read, insert, update and delete the ledger's rows, but only read
// and append to the audit log and the transfers, so no bug and no stolen
// credential of the application rewrites history. Migrations run as the schema's owner
// (seckill migrate with its DSN). CREATE lets the grants be given before
// the tables exist (MySQL requires it then); it creates a missing table,
// never alters or drops one.
func AppGrants(db, user string) []string {
	out := make([]string, 0, len(ledgerTables)+len(appendOnly)+1)
	for _, t := range ledgerTables {
		out = append(out, fmt.Sprintf("GRANT SELECT, INSERT, UPDATE, DELETE, CREATE ON `%s`.`%s` TO %s", db, t, user))
	}
	out = append(out, fmt.Sprintf("GRANT SELECT, CREATE ON `%s`.`goose_db_version` TO %s", db, user))
	for _, t := range appendOnly {
		out = append(out, fmt.Sprintf("GRANT SELECT, INSERT, CREATE ON `%s`.`%s` TO %s", db, t, user))
	}
	return out
}

// AppUserSQL is the script that creates the application's user with
// AppGrants on database db (configs/mysql-app-user.sql, which
// docker-compose.yml runs when MySQL starts empty).
func AppUserSQL(db, user, password string) string {
	var b strings.Builder
	b.WriteString("-- The application's MySQL user: the ledger's rows, and only SELECT and\n")
	b.WriteString("-- INSERT on the audit log and the transfers (orders.AppGrants; a test\n")
	b.WriteString("-- keeps this file equal to it). Migrations run as root: `seckill migrate`.\n")
	fmt.Fprintf(&b, "CREATE USER IF NOT EXISTS %s IDENTIFIED BY '%s';\n", user, password)
	for _, g := range AppGrants(db, user) {
		b.WriteString(g + ";\n")
	}
	return b.String()
}
