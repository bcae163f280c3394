package server

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/wait"
	"github.com/seckill/seckill/inventory"
)

// signOuts makes signing out revoke a shopper's tokens, not only clear the
// cookie: each user has a session epoch, the time of their last sign-out,
// and tokens issued until then are refused (sign-out ends every session of
// that user). The epochs live in a sorted set in Redis (user → unix
// seconds); every process keeps a copy in memory, so checking a token costs
// no round trip. A sign-out is announced over pub/sub and applied by every
// process at once; the whole set is read again at start, on reconnection
// and every resync, so a lost message costs at most that long. Epochs are
// kept for session_ttl, the life of the tokens this server issues.
type signOuts struct {
	rdb  redis.UniversalClient
	keys inventory.Keys
	keep time.Duration

	mu sync.RWMutex
	at map[string]int64 // user → unix seconds of the last sign-out
}

// signOutResync is how often the whole set is read again.
const signOutResync = 30 * time.Second

func newSignOuts(rdb redis.UniversalClient, keys inventory.Keys, keep time.Duration) *signOuts {
	return &signOuts{rdb: rdb, keys: keys, keep: keep, at: map[string]int64{}}
}

// revoked reports whether a token of user issued at iat (unix seconds; 0
// when the token does not say) predates the user's last sign-out.
func (so *signOuts) revoked(user string, iat int64) bool {
	so.mu.RLock()
	epoch, ok := so.at[user]
	so.mu.RUnlock()
	return ok && iat <= epoch
}

// signOut records that user signed out at now, here and in Redis, and
// announces it to the other processes.
func (so *signOuts) signOut(ctx context.Context, user string, now time.Time) error {
	epoch := now.Unix()
	so.note(user, epoch)
	key := so.keys.SignOuts()
	_, err := so.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.ZAddGT(ctx, key, redis.Z{Score: float64(epoch), Member: user})
		p.ZRemRangeByScore(ctx, key, "-inf", strconv.FormatInt(now.Add(-so.keep).Unix(), 10))
		p.Expire(ctx, key, so.keep)
		return nil
	})
	if err != nil {
		return fmt.Errorf("server: record sign-out: %w", err)
	}
	// Announced only once recorded: a process that subscribes after the
	// message must find the sign-out when it reads the set. In one
	// pipeline a Redis Cluster may run the PUBLISH first, on another node,
	// and a process subscribing in between missed both.
	if err := so.rdb.Publish(ctx, so.keys.SignedOut(), user+"|"+strconv.FormatInt(epoch, 10)).Err(); err != nil {
		return fmt.Errorf("server: announce sign-out: %w", err)
	}
	return nil
}

func (so *signOuts) note(user string, epoch int64) {
	so.mu.Lock()
	so.at[user] = max(so.at[user], epoch)
	so.mu.Unlock()
}

// load replaces the copy with the set in Redis.
func (so *signOuts) load(ctx context.Context, now time.Time) error {
	zs, err := so.rdb.ZRangeByScoreWithScores(ctx, so.keys.SignOuts(), &redis.ZRangeBy{
		Min: strconv.FormatInt(now.Add(-so.keep).Unix(), 10), Max: "+inf",
	}).Result()
	if err != nil {
		return fmt.Errorf("server: read sign-outs: %w", err)
	}
	at := make(map[string]int64, len(zs))
	for _, z := range zs {
		if user, ok := z.Member.(string); ok {
			at[user] = int64(z.Score)
		}
	}
	so.mu.Lock()
	for user, epoch := range so.at { // signed out here since the read began
		at[user] = max(at[user], epoch)
	}
	so.at = at
	so.mu.Unlock()
	return nil
}

// run applies other processes' sign-outs until ctx ends.
func (so *signOuts) run(ctx context.Context, now func() time.Time) {
	go wait.Every(ctx, signOutResync, func() {
		if err := so.load(ctx, now()); err != nil && ctx.Err() == nil {
			slog.Warn("server: reading sign-outs failed", "err", err)
		}
	})
	inventory.Follow(ctx, so.rdb, so.keys.SignedOut(), func(ctx context.Context) error { return so.load(ctx, now()) },
		func(payload string) {
			user, epoch, _ := strings.Cut(payload, "|")
			if n, err := strconv.ParseInt(epoch, 10, 64); err == nil {
				so.note(user, n)
			}
		})
}
