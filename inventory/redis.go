package inventory

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

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
// one address a single server. The rest of Seckill sees a
// redis.UniversalClient, and visits every master through EachMaster.
func Open(ctx context.Context, o Options) (redis.UniversalClient, error) {
	var rdb redis.UniversalClient
	var where string
	switch {
	case len(o.Sentinels) > 0:
		rdb = redis.NewFailoverClient(&redis.FailoverOptions{
			MasterName: o.Master, SentinelAddrs: o.Sentinels, DB: o.DB, Password: o.Password, PoolSize: o.PoolSize,
		})
		where = fmt.Sprintf("master %q of the sentinels at %s", o.Master, strings.Join(o.Sentinels, ","))
	case len(o.Addrs) > 1:
		rdb = redis.NewClusterClient(&redis.ClusterOptions{
			Addrs: o.Addrs, Password: o.Password, PoolSize: o.PoolSize,
			// The slot map is otherwise refreshed only on MOVED/ASK or every
			// minute: calls to a dead master would stall that long.
			ClusterStateReloadInterval: time.Second,
		})
		where = "the cluster at " + strings.Join(o.Addrs, ",")
	case len(o.Addrs) == 1:
		rdb = redis.NewClient(&redis.Options{Addr: o.Addrs[0], DB: o.DB, Password: o.Password, PoolSize: o.PoolSize})
		where = o.Addrs[0]
	default:
		return nil, errors.New("inventory: no Redis address")
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

// Redirected reports whether a Redis error says the command went to a node
// that does not serve its slot now (a failover or resharding in progress):
// nothing ran, and the command can go again once the client knows better.
func Redirected(err error) bool {
	for _, prefix := range []string{"MOVED", "ASK", "TRYAGAIN", "CLUSTERDOWN", "READONLY", "LOADING", "MASTERDOWN"} {
		if redis.HasErrorPrefix(err, prefix) {
			return true
		}
	}
	return false
}

// transient reports whether a Redis error may pass if the command is sent
// again: Redis is unreachable or going away, a connection broke, the pool
// or a deadline ran out, or a failover is in progress.
func transient(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) || Redirected(err) || errors.Is(err, redis.ErrPoolTimeout) || errors.Is(err, redis.ErrClosed) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, context.DeadlineExceeded)
}
