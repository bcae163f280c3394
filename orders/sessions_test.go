package orders_test

import (
	"context"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/seckill/seckill"
	"github.com/seckill/seckill/orders"
	"github.com/seckill/seckill/system/servertest"
)

// TestKeptSessions: on MySQL and SQLite alike, a session record kept
// again replaces the first, a forgotten one is gone, and an expired one
// is removed when the records are read.
func TestKeptSessions(t *testing.T) {
	servertest.EachLedger(t, func(t *testing.T, db *sqlx.DB) {
		st := orders.NewStore(db)
		ctx := context.Background()
		now := time.Now().UTC().Truncate(time.Second)
		for _, k := range []seckill.KeptSession{
			{Name: "admin/a", Value: "operator", Expires: now.Add(time.Hour)},
			{Name: "admin/b", Value: "merchant:2", Expires: now.Add(time.Hour)},
			{Name: "signout/eve", Value: "100", Expires: now.Add(time.Hour)},
			{Name: "signout/eve", Value: "200", Expires: now.Add(2 * time.Hour)},
			{Name: "admin/old", Value: "operator", Expires: now.Add(-time.Second)},
		} {
			if err := st.KeepSession(ctx, k.Name, k.Value, k.Expires); err != nil {
				t.Fatal(err)
			}
		}
		if err := st.ForgetSession(ctx, "admin/b"); err != nil {
			t.Fatal(err)
		}
		kept, err := st.KeptSessions(ctx, now)
		if err != nil {
			t.Fatal(err)
		}
		want := []seckill.KeptSession{
			{Name: "admin/a", Value: "operator", Expires: now.Add(time.Hour)},
			{Name: "signout/eve", Value: "200", Expires: now.Add(2 * time.Hour)},
		}
		if len(kept) != len(want) {
			t.Fatalf("kept %+v, want %+v", kept, want)
		}
		for i := range want {
			if kept[i].Name != want[i].Name || kept[i].Value != want[i].Value || !kept[i].Expires.Equal(want[i].Expires) {
				t.Errorf("kept %+v, want %+v", kept[i], want[i])
			}
		}
		var n int
		if err := db.Get(&n, "SELECT COUNT(*) FROM kept_sessions"); err != nil || n != 2 {
			t.Errorf("%d rows left, want 2 (%v)", n, err)
		}
	})
}
