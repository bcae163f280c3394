package sessions

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill"
	"github.com/seckill/seckill/internal/rdb"
)

// Keeper keeps the sessions' records where they outlive Redis: embedded
// mode's Redis lives in the process, so there the SQLite ledger keeps
// them and Restore puts them back at start (orders.Store). Nil on the
// services, whose Redis keeps them itself.
type Keeper interface {
	KeepSession(ctx context.Context, name, value string, expires time.Time) error
	ForgetSession(ctx context.Context, name string) error
	KeptSessions(ctx context.Context, now time.Time) ([]seckill.KeptSession, error)
}

// The names of kept records: an admin session by its token, a shopper's
// sign-out by the user (its value the epoch, unix seconds).
const (
	keptAdmin   = "admin/"
	keptSignOut = "signout/"
)

// Restore puts the records k keeps back into Redis under prefix: the
// admin sessions open when the process stopped, and the sign-outs still
// in force (Shoppers.Load reads them after).
func Restore(ctx context.Context, c rdb.Client, prefix string, k Keeper, now time.Time) (int, error) {
	kept, err := k.KeptSessions(ctx, now)
	if err != nil {
		return 0, err
	}
	keys := rdb.NewKeys(prefix)
	var signOutsUntil time.Time
	_, err = c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, r := range kept {
			switch {
			case strings.HasPrefix(r.Name, keptAdmin):
				if ttl := r.Expires.Sub(now); ttl > 0 { // 0 would keep it for ever
					p.Set(ctx, keys.AdminSession(strings.TrimPrefix(r.Name, keptAdmin)), r.Value, ttl)
				}
			case strings.HasPrefix(r.Name, keptSignOut):
				epoch, err := strconv.ParseInt(r.Value, 10, 64)
				if err != nil {
					return fmt.Errorf("sessions: kept sign-out %s: %w", r.Name, err)
				}
				p.ZAddGT(ctx, keys.SignOuts(), redis.Z{Score: float64(epoch), Member: strings.TrimPrefix(r.Name, keptSignOut)})
				if r.Expires.After(signOutsUntil) {
					signOutsUntil = r.Expires
				}
			}
		}
		if !signOutsUntil.IsZero() {
			p.ExpireAt(ctx, keys.SignOuts(), signOutsUntil)
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("sessions: restore: %w", err)
	}
	return len(kept), nil
}
