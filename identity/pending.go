package identity

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// SignIns keeps records of sign-ins under way between their two
// requests, each taken once (sessions.SignIns, in Redis).
type SignIns interface {
	Put(ctx context.Context, kind, id string, v []byte, ttl time.Duration) error
	Take(ctx context.Context, kind, id string) ([]byte, error)
}

// Pending keeps what a sign-in under way needs between its two requests
// (an OpenID Connect login's state, a passkey ceremony's challenge), for a
// few minutes, each taken once: any server process may serve the second
// request.
type Pending struct{ store SignIns }

// NewPending keeps the records in store.
func NewPending(store SignIns) *Pending { return &Pending{store: store} }

func (p *Pending) put(ctx context.Context, kind, id string, v []byte, ttl time.Duration) error {
	return p.store.Put(ctx, kind, id, v, ttl)
}

func (p *Pending) take(ctx context.Context, kind, id string) ([]byte, error) {
	return p.store.Take(ctx, kind, id)
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
