package orders_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"

	"github.com/seckill/seckill"
	"github.com/seckill/seckill/orders"
	"github.com/seckill/seckill/system/servertest"
)

// TestAuditLogAppendOnly: on MariaDB, the application's user under
// orders.AppGrants appends to the audit log and reads it, and may not
// update or delete a row (the server refuses); on SQLite, triggers refuse
// both for anyone.
func TestAuditLogAppendOnly(t *testing.T) {
	ctx := context.Background()
	cfg := servertest.Config(t)
	root := servertest.MySQL(t, cfg)
	dsn, err := mysql.ParseDSN(cfg.MySQL.DSN)
	if err != nil {
		t.Fatal(err)
	}
	user := "sk_app_" + servertest.Unique()
	account := fmt.Sprintf("'%s'@'127.0.0.1'", user)
	if _, err := root.Exec("CREATE USER " + account + " IDENTIFIED BY 'app-password'"); err != nil {
		t.Fatalf("create the application's user: %v", err)
	}
	t.Cleanup(func() { root.Exec("DROP USER " + account) })
	for _, g := range orders.AppGrants(dsn.DBName, account) {
		if _, err := root.Exec(g); err != nil {
			t.Fatalf("%s: %v", g, err)
		}
	}
	app := *dsn
	app.User, app.Passwd, app.Net, app.Addr = user, "app-password", "tcp", "127.0.0.1:3306"
	db, err := sqlx.Open("mysql", app.FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	st := orders.NewStore(db)
	if err := st.AppendAudit(ctx, seckill.AuditEntry{At: time.Now(), Actor: "operator", Role: seckill.RoleOperator, Action: seckill.AuditLogin, After: json.RawMessage(`{"x":1}`)}); err != nil {
		t.Fatalf("the application appends: %v", err)
	}
	if rows, err := st.AuditLog(ctx, seckill.AuditFilter{Limit: 10}); err != nil || len(rows) != 1 {
		t.Fatalf("the application reads: %v %v", rows, err)
	}
	for _, q := range []string{"UPDATE audit_log SET actor = 'someone else'", "DELETE FROM audit_log", "TRUNCATE TABLE audit_log",
		"DROP TABLE audit_log", "UPDATE transfers SET amount_cents = 1", "DELETE FROM transfers", "TRUNCATE TABLE transfers"} {
		if _, err := db.Exec(q); err == nil || !strings.Contains(err.Error(), "denied") {
			t.Errorf("%s as the application: %v, want denied", q, err)
		}
	}
	// It runs a process (seckill all migrates first: nothing to do here).
	if _, err := orders.Migrate(ctx, db); err != nil {
		t.Errorf("migrate an up-to-date schema as the application: %v", err)
	}
	// The ledger's own tables stay writable for it.
	if _, err := db.Exec("UPDATE sales SET name = name WHERE id = 0"); err != nil {
		t.Errorf("the application updates sales: %v", err)
	}

	// docker-compose.yml's script is these grants.
	want := orders.AppUserSQL("seckill", "'seckill'@'%'", "seckill")
	if got, err := os.ReadFile("../configs/mysql-app-user.sql"); err != nil || string(got) != want {
		t.Errorf("configs/mysql-app-user.sql differs from orders.AppUserSQL (%v); it should be:\n%s", err, want)
	}

	lite := orders.NewStore(servertest.SQLite(t))
	if err := lite.AppendAudit(ctx, seckill.AuditEntry{At: time.Now(), Actor: "operator", Role: seckill.RoleOperator, Action: seckill.AuditLogin}); err != nil {
		t.Fatal(err)
	}
	if err := lite.InsertMovements(ctx, []seckill.Movement{seckill.CreditMovement("u", "r", 5, time.Now())}, time.Now()); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"UPDATE audit_log SET actor = 'someone else'", "DELETE FROM audit_log",
		"UPDATE transfers SET amount_cents = 1", "DELETE FROM transfers"} {
		if _, err := lite.DB().Exec(q); err == nil || !strings.Contains(err.Error(), "append-only") {
			t.Errorf("SQLite: %s: %v, want refused", q, err)
		}
	}
}
