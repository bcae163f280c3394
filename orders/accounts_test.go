package orders_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/seckill/seckill"
	"github.com/seckill/seckill/orders"
	"github.com/seckill/seckill/system/servertest"
)

// TestAccountsInTheLedger: on MySQL and SQLite alike, an email has one
// account; a verification token is spent once, within its life, and a
// refusal by the check changes nothing; a passkey is stored once.
func TestAccountsInTheLedger(t *testing.T) {
	servertest.EachLedger(t, func(t *testing.T, db *sqlx.DB) {
		st := orders.NewStore(db)
		ctx := context.Background()
		now := time.Now().UTC().Truncate(time.Millisecond)
		a := seckill.Account{ID: "a_one", Email: "one@example.com", PasswordHash: "$argon2id$x", CreatedAt: now}
		if err := st.CreateAccount(ctx, a, strings.Repeat("1", 64), now.Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
		b := seckill.Account{ID: "a_two", Email: "one@example.com", PasswordHash: "$argon2id$y", CreatedAt: now}
		if err := st.CreateAccount(ctx, b, strings.Repeat("2", 64), now.Add(time.Hour)); !errors.Is(err, seckill.ErrEmailTaken) {
			t.Fatalf("a second account for the email: %v", err)
		}
		if _, err := st.Account(ctx, "a_two"); !errors.Is(err, seckill.ErrNoAccount) {
			t.Errorf("the refused account exists: %v", err)
		}
		refuse := errors.New("not you")
		if _, err := st.UseAccountToken(ctx, strings.Repeat("1", 64), now, func(seckill.Account) error { return refuse }); err != refuse {
			t.Errorf("refused by the check: %v", err)
		}
		got, err := st.UseAccountToken(ctx, strings.Repeat("1", 64), now, func(seckill.Account) error { return nil })
		if err != nil || !got.Verified() {
			t.Fatalf("spend the token: %+v %v", got, err)
		}
		if _, err := st.UseAccountToken(ctx, strings.Repeat("1", 64), now, func(seckill.Account) error { return nil }); !errors.Is(err, seckill.ErrVerifyLink) {
			t.Errorf("the token spent twice: %v", err)
		}
		if err := st.AddAccountToken(ctx, "a_one", strings.Repeat("0", 64), now.Add(-time.Second)); err != nil {
			t.Fatal(err)
		}
		if _, err := st.UseAccountToken(ctx, strings.Repeat("0", 64), now, func(seckill.Account) error { return nil }); !errors.Is(err, seckill.ErrVerifyLink) {
			t.Errorf("an expired token: %v", err)
		}
		if acc, err := st.AccountByEmail(ctx, "one@example.com"); err != nil || acc.ID != "a_one" || !acc.Verified() {
			t.Errorf("by email: %+v %v", acc, err)
		}
		if err := st.AddPasskey(ctx, "a_one", "cred-1", []byte(`{"id":1}`), now); err != nil {
			t.Fatal(err)
		}
		if err := st.AddPasskey(ctx, "a_one", "cred-1", []byte(`{"id":2}`), now); !errors.Is(err, orders.ErrPasskeyTaken) {
			t.Errorf("a passkey twice: %v", err)
		}
		if err := st.UpdatePasskey(ctx, "a_one", "cred-1", []byte(`{"id":3}`)); err != nil {
			t.Fatal(err)
		}
		if ps, err := st.Passkeys(ctx, "a_one"); err != nil || len(ps) != 1 || string(ps[0]) != `{"id":3}` {
			t.Errorf("passkeys: %q %v", ps, err)
		}
	})
}
