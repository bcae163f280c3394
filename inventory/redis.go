package inventory

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/configs"
)

// Open connects to Redis in the topology the configuration names, and
// checks that it answers. This is the one place that knows the topology:
// several addresses in redis_addr are a Redis Cluster, redis_sentinels
// with redis_master a Sentinel set, one address a single server. The rest
// of Seckill sees a redis.UniversalClient, and visits every master through
// EachMaster.
func Open(ctx context.Context, cfg configs.Config) (redis.UniversalClient, error) {
	addrs := configs.SplitList(cfg.RedisAddr)
	var rdb redis.UniversalClient
	var where string
	switch {
	case cfg.RedisSentinels != "":
		rdb = redis.NewFailoverClient(&redis.FailoverOptions{
			MasterName: cfg.RedisMaster, SentinelAddrs: configs.SplitList(cfg.RedisSentinels),
			DB: cfg.RedisDB, Password: cfg.RedisPassword, PoolSize: cfg.RedisPoolSize,
		})
		where = fmt.Sprintf("master %q of the sentinels at %s (SECKILL_REDIS_SENTINELS)", cfg.RedisMaster, cfg.RedisSentinels)
	case len(addrs) > 1:
		rdb = redis.NewClusterClient(&redis.ClusterOptions{
			Addrs: addrs, Password: cfg.RedisPassword, PoolSize: cfg.RedisPoolSize,
			// The slot map is otherwise refreshed only on MOVED/ASK or every
			// minute: calls to a dead master would stall that long.
			ClusterStateReloadInterval: time.Second,
		})
		where = fmt.Sprintf("the cluster at %s (SECKILL_REDIS_ADDR)", cfg.RedisAddr)
	default:
		rdb = redis.NewClient(&redis.Options{
			Addr: cfg.RedisAddr, DB: cfg.RedisDB, Password: cfg.RedisPassword, PoolSize: cfg.RedisPoolSize,
		})
		where = fmt.Sprintf("%s (SECKILL_REDIS_ADDR)", cfg.RedisAddr)
	}
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := EachMaster(pctx, rdb, func(ctx context.Context, c *redis.Client) error { return c.Ping(ctx).Err() }); err != nil {
		rdb.Close()
		return nil, fmt.Errorf("redis at %s does not answer: %w", where, err)
	}
	return rdb, nil
}

// EachMaster runs fn on every master: the one server, the Sentinel set's
// current master, or each master of a cluster (concurrently).
func EachMaster(ctx context.Context, rdb redis.UniversalClient, fn func(context.Context, *redis.Client) error) error {
	switch c := rdb.(type) {
	case *redis.ClusterClient:
		return c.ForEachMaster(ctx, fn)
	case *redis.Client:
		return fn(ctx, c)
	}
	return fmt.Errorf("inventory: unsupported Redis client %T", rdb)
}

// ErrVolatile means Redis keeps what it holds only in memory: a restart
// loses every accepted order the relay has not published yet, and the
// stock.
var ErrVolatile = errors.New("redis does not persist its data (appendonly is off)")

// Durability describes how every master persists its data, and fails with
// ErrVolatile when one keeps it only in memory. With AOF and appendfsync
// everysec a crash of Redis costs at most the last second of writes;
// always costs nothing but speed; RDB snapshots alone cost everything
// since the last snapshot.
func Durability(ctx context.Context, rdb redis.UniversalClient) (string, error) {
	var volatile []string
	var described []string
	err := EachMaster(ctx, rdb, func(ctx context.Context, c *redis.Client) error {
		info, err := c.Info(ctx, "persistence").Result()
		if err != nil {
			return err
		}
		aof := infoField(info, "aof_enabled") == "1"
		fsync := "unknown"
		if v, err := c.ConfigGet(ctx, "appendfsync").Result(); err == nil && v["appendfsync"] != "" {
			fsync = v["appendfsync"] // CONFIG may be renamed away on managed Redis
		}
		addr := c.Options().Addr
		if !aof {
			volatile = append(volatile, addr)
			described = append(described, addr+": no AOF")
			return nil
		}
		described = append(described, addr+": AOF, appendfsync "+fsync)
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("inventory: reading Redis persistence: %w", err)
	}
	desc := strings.Join(described, "; ")
	if len(volatile) > 0 {
		return desc, fmt.Errorf("%w on %s", ErrVolatile, strings.Join(volatile, ", "))
	}
	return desc, nil
}

func infoField(info, name string) string {
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+":"); ok {
			return v
		}
	}
	return ""
}
