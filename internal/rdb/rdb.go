// Package rdb is the foundation every Redis store of Seckill stands on:
// it opens Redis in its topology (one server, a Sentinel set or a
// Cluster), visits every master, finds the master of a key, waits for
// replicas (the durability fence), reads how Redis persists its data,
// follows pub/sub channels and tells a passing failure from a lasting
// one. It names every key in one file (keys.go). It holds no record of
// its own: the stores (package inventory for a sale's live state,
// package sessions for sign-outs, admin sessions and sign-ins under way)
// send their records' commands, and nothing else talks to Redis.
package rdb

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Client is a connection to Redis in any topology, as Open hands it out.
type Client = redis.UniversalClient

// Options say where Redis is and how to talk to it.
type Options struct {
	// Addrs are one server's address, or several seed nodes of a cluster.
	Addrs []string
	// Sentinels and Master name a Sentinel set and the master it watches
	// (then Addrs is not used).
	Sentinels []string
	Master    string
	DB        int
	Password  string
	PoolSize  int
}

// Open connects to Redis in the topology the options name, and checks
// that it answers. This is the one place that knows the topology: several
// addresses are a Redis Cluster, sentinels with a master a Sentinel set,
// one address a single server. The rest of Seckill sees a Client, and
// visits every master through EachMaster.
func Open(ctx context.Context, o Options) (Client, error) {
	var c Client
	var where string
	switch {
	case len(o.Sentinels) > 0:
		c = redis.NewFailoverClient(&redis.FailoverOptions{
			MasterName: o.Master, SentinelAddrs: o.Sentinels, DB: o.DB, Password: o.Password, PoolSize: o.PoolSize,
		})
		where = fmt.Sprintf("master %q of the sentinels at %s", o.Master, strings.Join(o.Sentinels, ","))
	case len(o.Addrs) > 1:
		c = redis.NewClusterClient(&redis.ClusterOptions{
			Addrs: o.Addrs, Password: o.Password, PoolSize: o.PoolSize,
			// The slot map is otherwise refreshed only on MOVED/ASK or every
			// minute: calls to a dead master would stall that long.
			ClusterStateReloadInterval: time.Second,
		})
		where = "the cluster at " + strings.Join(o.Addrs, ",")
	case len(o.Addrs) == 1:
		c = redis.NewClient(&redis.Options{Addr: o.Addrs[0], DB: o.DB, Password: o.Password, PoolSize: o.PoolSize})
		where = o.Addrs[0]
	default:
		return nil, errors.New("rdb: no Redis address")
	}
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := Ping(pctx, c); err != nil {
		c.Close()
		return nil, fmt.Errorf("redis at %s does not answer: %w", where, err)
	}
	return c, nil
}

// Ping checks that every master answers.
func Ping(ctx context.Context, c Client) error {
	return EachMaster(ctx, c, func(ctx context.Context, m *redis.Client) error { return m.Ping(ctx).Err() })
}

// EachMaster runs fn on every master: the one server, the Sentinel set's
// current master, or each master of a cluster (concurrently).
func EachMaster(ctx context.Context, c Client, fn func(context.Context, *redis.Client) error) error {
	switch c := c.(type) {
	case *redis.ClusterClient:
		return c.ForEachMaster(ctx, fn)
	case *redis.Client:
		return fn(ctx, c)
	}
	return fmt.Errorf("rdb: unsupported Redis client %T", c)
}

// MasterFor returns the client of the master that holds key (on a
// cluster, the one serving its slot now).
func MasterFor(ctx context.Context, c Client, key string) (*redis.Client, error) {
	switch c := c.(type) {
	case *redis.ClusterClient:
		return c.MasterForKey(ctx, key)
	case *redis.Client:
		return c, nil
	}
	return nil, fmt.Errorf("rdb: unsupported Redis client %T", c)
}

// OnMaster runs fn with the client of the master that holds key. A
// cluster's master may have changed (a failover): when the node answers
// that the slot moved, or is down, the slot map is read again and fn
// tried again (the node ran nothing), a few times.
func OnMaster(ctx context.Context, c Client, key string, fn func(node *redis.Client) error) error {
	for attempt := 0; ; attempt++ {
		node, err := MasterFor(ctx, c, key)
		if err == nil {
			err = fn(node)
		}
		cc, cluster := c.(*redis.ClusterClient)
		if !cluster || !Redirected(err) || attempt >= 10 {
			return err
		}
		cc.ReloadState(ctx)
		t := time.NewTimer(100 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
	}
}

// Cluster reports whether c is a Redis Cluster's client.
func Cluster(c Client) bool {
	_, ok := c.(*redis.ClusterClient)
	return ok
}

// QuietLogger sends go-redis's own log lines (its retries) to slog at
// debug level: Seckill reports the failures that matter where they
// happen.
func QuietLogger() { redis.SetLogger(debugLogger{}) }

type debugLogger struct{}

func (debugLogger) Printf(ctx context.Context, format string, v ...any) {
	slog.DebugContext(ctx, fmt.Sprintf(format, v...), "from", "go-redis")
}
