package identity

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill"
)

// Pending keeps what a sign-in under way needs between its two requests
// (an OpenID Connect login's state, a passkey ceremony's challenge), in
// Redis for a few minutes, each taken once: any server process may serve
// the second request.
type Pending struct {
	rdb    redis.UniversalClient
	prefix string
}

// NewPending keeps the records under prefix in rdb.
func NewPending(rdb redis.UniversalClient, prefix string) *Pending {
	return &Pending{rdb: rdb, prefix: prefix + ":signin:"}
}

// errNoPending is a second request whose first is unknown, expired or
// already finished.
var errNoPending = seckill.Errorf(seckill.CodeUnauthenticated, "This sign-in has expired or was finished already; start again.")

// key names the record of a sign-in of kind: <prefix>:signin:<kind>:<id>.
func (p *Pending) key(kind, id string) string { return p.prefix + kind + ":" + id }

func (p *Pending) put(ctx context.Context, kind, id string, v []byte, ttl time.Duration) error {
	if err := p.rdb.Set(ctx, p.key(kind, id), v, ttl).Err(); err != nil {
		return fmt.Errorf("identity: keep a sign-in: %w: %w", seckill.ErrUnavailable, err)
	}
	return nil
}

func (p *Pending) take(ctx context.Context, kind, id string) ([]byte, error) {
	if id == "" || len(id) > 128 {
		return nil, errNoPending
	}
	v, err := p.rdb.GetDel(ctx, p.key(kind, id)).Bytes()
	switch {
	case errors.Is(err, redis.Nil):
		return nil, errNoPending
	case err != nil:
		return nil, fmt.Errorf("identity: read a sign-in: %w: %w", seckill.ErrUnavailable, err)
	}
	return v, nil
}

// LoginTTL is how long a browser has to sign in at the provider.
const LoginTTL = 10 * time.Minute

// PutLogin keeps a browser's sign-in at the provider, by its state.
func (p *Pending) PutLogin(ctx context.Context, l Login) error {
	b, err := json.Marshal(l)
	if err != nil {
		return err
	}
	return p.put(ctx, "oidc", l.State, b, LoginTTL)
}

// TakeLogin returns the sign-in of state, once.
func (p *Pending) TakeLogin(ctx context.Context, state string) (Login, error) {
	b, err := p.take(ctx, "oidc", state)
	if err != nil {
		return Login{}, err
	}
	var l Login
	if err := json.Unmarshal(b, &l); err != nil {
		return Login{}, fmt.Errorf("identity: a kept sign-in: %w", err)
	}
	return l, nil
}
