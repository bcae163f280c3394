package sessions

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill"
	"github.com/seckill/seckill/internal/rdb"
)

// SignIns keeps what a sign-in under way needs between its two requests
// (an OpenID Connect login's state, a passkey ceremony's challenge), in
// Redis for a few minutes, each taken once: any server process may serve
// the second request. Package identity says what the records hold.
type SignIns struct {
	rdb  rdb.Client
	keys rdb.Keys
}

// NewSignIns keeps the records under the configured prefix in c.
func NewSignIns(c rdb.Client, cfg Config) *SignIns {
	return &SignIns{rdb: c, keys: rdb.NewKeys(cfg.Prefix)}
}

// ErrNoSignIn is a second request whose first is unknown, expired or
// already finished.
var ErrNoSignIn = seckill.Errorf(seckill.CodeUnauthenticated, "This sign-in has expired or was finished already; start again.")

// maxSignInID bounds the id a second request names.
const maxSignInID = 128

// Put keeps v as the sign-in of kind and id for ttl.
func (s *SignIns) Put(ctx context.Context, kind, id string, v []byte, ttl time.Duration) error {
	if err := s.rdb.Set(ctx, s.keys.SignIn(kind, id), v, ttl).Err(); err != nil {
		return fmt.Errorf("sessions: keep a sign-in: %w: %w", seckill.ErrUnavailable, err)
	}
	return nil
}

// Take returns and removes the sign-in of kind and id: ErrNoSignIn if
// there is none.
func (s *SignIns) Take(ctx context.Context, kind, id string) ([]byte, error) {
	if id == "" || len(id) > maxSignInID {
		return nil, ErrNoSignIn
	}
	v, err := s.rdb.GetDel(ctx, s.keys.SignIn(kind, id)).Bytes()
	switch {
	case errors.Is(err, redis.Nil):
		return nil, ErrNoSignIn
	case err != nil:
		return nil, fmt.Errorf("sessions: read a sign-in: %w: %w", seckill.ErrUnavailable, err)
	}
	return v, nil
}
