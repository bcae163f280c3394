package rdb

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// ErrNotDurable means a write was made by the master but its replicas did
// not confirm having it in time: if the master failed now, the write could
// be lost. Trying again (with the same ids, so a write that survived is
// found) may pass: Transient reports it.
var ErrNotDurable = errors.New("rdb: write not confirmed by the replicas")

// Replicas is how many replicas must have a write before it is answered
// (WAIT), and for how long to wait: the durability fence. Replication is
// asynchronous, so a master that dies before its replica has a decision
// takes it with it, and the promoted replica decides again; with N > 0
// every write that must survive a failover is followed, on the same
// connection and pipelined, by WAIT N Timeout. N = 0 waits for nothing.
type Replicas struct {
	N       int
	Timeout time.Duration
	// OnTimeout, if set, is told of each WAIT that timed out.
	OnTimeout func()
}

// check reads the answer of a WAIT.
func (r Replicas) check(wait *redis.Cmd) error {
	if n, _ := wait.Int64(); n < int64(r.N) {
		if r.OnTimeout != nil {
			r.OnTimeout()
		}
		return fmt.Errorf("%w: %d of %d replicas within %s", ErrNotDurable, n, r.N, r.Timeout)
	}
	return nil
}

// Run runs script on the master that holds keys[0] and, with replicas
// awaited, WAIT right after it on the same connection (one round trip),
// returning the script's reply once the replicas have it. EVALSHA falls
// back to loading the script when Redis lost it (a pipeline cannot fall
// back to EVAL). An error means nothing is known of the write; a retry
// must be safe (the scripts are idempotent by their ids).
func (r Replicas) Run(ctx context.Context, c Client, script *redis.Script, keys []string, args ...any) (*redis.Cmd, error) {
	if r.N <= 0 {
		cmd := script.Run(ctx, c, keys, args...)
		return cmd, cmd.Err()
	}
	var reply *redis.Cmd
	err := OnMaster(ctx, c, keys[0], func(node *redis.Client) error {
		var wait *redis.Cmd
		pipe := func() error {
			_, err := node.Pipelined(ctx, func(p redis.Pipeliner) error {
				reply = script.EvalSha(ctx, p, keys, args...)
				wait = p.Do(ctx, "WAIT", r.N, r.Timeout.Milliseconds())
				return nil
			})
			return err
		}
		err := pipe()
		if redis.HasErrorPrefix(reply.Err(), "NOSCRIPT") {
			if err := script.Load(ctx, node).Err(); err != nil {
				return err
			}
			err = pipe()
		}
		if err := reply.Err(); err != nil {
			return err
		}
		if err != nil {
			return err
		}
		return r.check(wait)
	})
	return reply, err
}

// Fence returns once the replicas have every write made so far on the
// master that holds key, or fails with ErrNotDurable: a write of its own
// (an increment of key, which expires within the hour), then WAIT on that
// connection. Replication is one ordered stream, so once the replicas have
// the fence they have all that came before it. A process that read
// records it must not pass on before they are safe (the relay, before it
// publishes an outbox) calls it. Without replicas awaited it returns at
// once.
func (r Replicas) Fence(ctx context.Context, c Client, key string) error {
	if r.N <= 0 {
		return nil
	}
	return OnMaster(ctx, c, key, func(node *redis.Client) error {
		var wait *redis.Cmd
		_, err := node.Pipelined(ctx, func(p redis.Pipeliner) error {
			p.Incr(ctx, key)
			p.Expire(ctx, key, time.Hour)
			wait = p.Do(ctx, "WAIT", r.N, r.Timeout.Milliseconds())
			return nil
		})
		if err != nil {
			return err
		}
		return r.check(wait)
	})
}
