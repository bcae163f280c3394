package server

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/inventory"
)

// outcomes counts buy outcomes per sale in memory and adds them to the
// sale's outcomes hash in Redis once a second, so the merchant's dashboard
// sees every server process without a Redis write per request.
type outcomes struct {
	rdb  redis.UniversalClient
	keys inventory.Keys

	mu     sync.Mutex
	counts map[int64]map[string]int64
}

func newOutcomes(rdb redis.UniversalClient, keys inventory.Keys) *outcomes {
	return &outcomes{rdb: rdb, keys: keys, counts: map[int64]map[string]int64{}}
}

func (o *outcomes) add(sale int64, code string) {
	o.mu.Lock()
	m := o.counts[sale]
	if m == nil {
		m = map[string]int64{}
		o.counts[sale] = m
	}
	m[code]++
	o.mu.Unlock()
}

// outcomesTTL bounds the life of a sale's outcome counters after their last
// update.
const outcomesTTL = 7 * 24 * time.Hour

// flush writes the counts gathered since the last flush. Counts that could
// not be written are kept for the next one.
func (o *outcomes) flush(ctx context.Context) error {
	o.mu.Lock()
	counts := o.counts
	o.counts = map[int64]map[string]int64{}
	o.mu.Unlock()
	if len(counts) == 0 {
		return nil
	}
	_, err := o.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for sale, m := range counts {
			key := o.keys.Outcomes(sale)
			for code, n := range m {
				p.HIncrBy(ctx, key, code, n)
			}
			p.Expire(ctx, key, outcomesTTL)
		}
		return nil
	})
	if err != nil {
		o.mu.Lock()
		for sale, m := range counts {
			for code, n := range m {
				if o.counts[sale] == nil {
					o.counts[sale] = map[string]int64{}
				}
				o.counts[sale][code] += n
			}
		}
		o.mu.Unlock()
		return fmt.Errorf("server: flush outcomes: %w", err)
	}
	return nil
}

// read returns the outcome counts of a sale across all processes (as of
// their last flush).
func (o *outcomes) read(ctx context.Context, sale int64) (map[string]int64, error) {
	m, err := o.rdb.HGetAll(ctx, o.keys.Outcomes(sale)).Result()
	if err != nil {
		return nil, fmt.Errorf("server: outcomes of sale %d: %w", sale, err)
	}
	out := map[string]int64{"ok": 0, "sold_out": 0, "limit_exceeded": 0, "rate_limited": 0}
	for code, v := range m {
		var n int64
		fmt.Sscan(v, &n)
		out[code] = n
	}
	return out, nil
}
