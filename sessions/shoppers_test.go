package sessions_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckill/seckill"
	"github.com/seckill/seckill/sessions"
	"github.com/seckill/seckill/system/servertest"
)

// countingProvider is a provider whose every check is counted.
type countingProvider struct{ calls atomic.Int64 }

func (p *countingProvider) Verify(_ context.Context, raw string) (sessions.User, time.Time, error) {
	p.calls.Add(1)
	if raw != "provider-token" {
		return sessions.User{}, time.Time{}, sessions.ErrBadToken
	}
	return sessions.User{ID: "o_someone", Name: "someone", Verified: true, IssuedAt: time.Now().Unix()}, time.Now().Add(time.Hour), nil
}

func shoppers(t *testing.T) *sessions.Shoppers {
	cfg := servertest.Config(t)
	return sessions.NewShoppers(servertest.Redis(t, cfg), sessions.Config{Prefix: cfg.Redis.Prefix, Secret: []byte(servertest.JWTSecret), TTL: time.Hour}, time.Now)
}

// TestProviderTokensCached: a provider's token is checked once, then its
// user comes from the cache; a bad one is refused every time (and never
// cached); session tokens do not go to the provider.
func TestProviderTokensCached(t *testing.T) {
	s := shoppers(t)
	p := &countingProvider{}
	s.Accept(p)
	ctx := context.Background()
	for range 100 {
		u, err := s.Verify(ctx, "provider-token")
		if err != nil || u.ID != "o_someone" || !u.Verified {
			t.Fatalf("provider token: %+v %v", u, err)
		}
	}
	if n := p.calls.Load(); n != 1 {
		t.Errorf("100 uses of one token checked it %d times, want 1", n)
	}
	for range 3 {
		if _, err := s.Verify(ctx, "forged"); seckill.CodeOf(err) != seckill.CodeUnauthenticated {
			t.Errorf("forged: %v", err)
		}
	}
	if n := p.calls.Load(); n != 4 {
		t.Errorf("provider checks %d, want 4 (a refusal is not cached)", n)
	}
	tok, _, err := s.Mint(sessions.User{ID: "u_guest", Name: "guest"})
	if err != nil {
		t.Fatal(err)
	}
	if u, err := s.Verify(ctx, tok); err != nil || u.ID != "u_guest" || u.Verified {
		t.Errorf("session token: %+v %v", u, err)
	}
	if n := p.calls.Load(); n != 4 {
		t.Errorf("a session token went to the provider")
	}
}

// TestSignInRightAfterSignOut: a session minted in the same second as the
// user's sign-out is dated after it and works; the tokens from before stay
// revoked.
func TestSignInRightAfterSignOut(t *testing.T) {
	s := shoppers(t)
	ctx := context.Background()
	u := sessions.User{ID: "a_quick", Name: "quick", Verified: true}
	old, _, err := s.Mint(u)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SignOut(ctx, u.ID); err != nil {
		t.Fatal(err)
	}
	fresh, _, err := s.Mint(u)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Verify(ctx, old); err != sessions.ErrSignedOut {
		t.Errorf("token from before the sign-out: %v", err)
	}
	if got, err := s.Verify(ctx, fresh); err != nil || !got.Verified {
		t.Errorf("token minted right after the sign-out: %+v %v", got, err)
	}
}
