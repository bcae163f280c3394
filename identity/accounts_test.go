package identity_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/seckill/seckill"
	"github.com/seckill/seckill/identity"
)

// accountStore is an account store holding accounts by id; it counts its
// lookups. Methods a test does not give are the nil interface's.
type accountStore struct {
	identity.AccountStore
	byID    map[string]seckill.Account
	lookups int
}

var errStoreDown = errors.New("store down")

func (s *accountStore) Account(_ context.Context, id string) (seckill.Account, error) {
	s.lookups++
	if id == "a_down" {
		return seckill.Account{}, errStoreDown
	}
	a, ok := s.byID[id]
	if !ok {
		return seckill.Account{}, seckill.ErrNoAccount
	}
	return a, nil
}

// TestAccountVerifiedNow: an account is verified once its email is
// confirmed, as the store says now; a guest's or a provider's user is
// not, without a lookup; a failed lookup is an error.
func TestAccountVerifiedNow(t *testing.T) {
	at := time.Now()
	store := &accountStore{byID: map[string]seckill.Account{
		"a_new":  {ID: "a_new", Email: "new@example.com"},
		"a_done": {ID: "a_done", Email: "done@example.com", VerifiedAt: &at},
	}}
	accounts := identity.NewAccounts(store, identity.LogMail{}, identity.AccountsConfig{Argon2: identity.Argon2{Memory: 64, Time: 1, Threads: 1}}, time.Now)
	ctx := context.Background()
	for user, want := range map[string]bool{"a_new": false, "a_done": true} {
		if got, err := accounts.Verified(ctx, user); err != nil || got != want {
			t.Errorf("%s: %v, %v; want %v", user, got, err, want)
		}
	}
	if _, err := accounts.Verified(ctx, "a_down"); !errors.Is(err, errStoreDown) {
		t.Errorf("a failed lookup: %v", err)
	}
	store.lookups = 0
	for _, user := range []string{"u_01JGUEST", identity.UserID("https://idp.example", "someone")} {
		if got, err := accounts.Verified(ctx, user); err != nil || got {
			t.Errorf("%s: %v, %v; want false", user, got, err)
		}
	}
	if store.lookups != 0 {
		t.Errorf("%d lookups for users who are no accounts", store.lookups)
	}
}
