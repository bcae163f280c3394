package bench

import (
	"context"
	"fmt"
	"syscall"
	"time"

	"github.com/seckill/seckill"
	"github.com/seckill/seckill/inventory"
	"github.com/seckill/seckill/system"
	"github.com/seckill/seckill/system/servertest/topology"
)

// scaleoutCase measures one hot sale on a 3-master Redis Cluster (each
// master with a replica), with the same client load each time: o.Clients
// clients each sending one buy at a time through the coalescing batcher.
// One shard is the sale in one hash slot; 3 buckets spread it over the
// three masters. WAIT 1 makes every batch wait for its replica (durable
// accepts), with the sale in one shard and in 3 buckets.
func scaleoutCase(ctx context.Context, e *Env, o Options) (Table, error) {
	cluster, err := topology.StartRedisCluster(3)
	if err != nil {
		return Table{}, err
	}
	defer cluster.Stop()
	cfg := e.Config
	cfg.Redis.Addr, cfg.Redis.DB = cluster.Addrs(), 0
	rdb, err := system.OpenRedis(ctx, cfg)
	if err != nil {
		return Table{}, err
	}
	defer rdb.Close()
	ic := system.InventoryConfig(cfg)
	plain := inventory.New(rdb, ic)
	ic.WaitReplicas, ic.WaitTimeout = 1, time.Second
	durable := inventory.New(rdb, ic)

	contenders := []struct {
		name    string
		buckets int
		inv     *inventory.Store
	}{
		{"one shard", 1, plain},
		{"3 buckets on 3 masters", 3, plain},
		{"one shard, WAIT 1 per batch", 1, durable},
		{"3 buckets, WAIT 1 per batch", 3, durable},
	}
	var rows [][]string
	var rates []float64
	for i, c := range contenders {
		sale := int64(i + 1)
		now := time.Now()
		_, err := c.inv.Warm(ctx, seckill.Sale{
			ID: sale, Total: 100_000_000, PerUserLimit: 1, PriceCents: 100, Buckets: c.buckets, Status: seckill.StatusActive,
			StartsAt: now.Add(-time.Minute), EndsAt: now.Add(time.Hour),
		})
		if err != nil {
			return Table{}, err
		}
		batcher := inventory.NewBatcher(c.inv, inventory.BatcherConfig{Max: cfg.Buy.BatchMax, Lane: c.inv.Lane})
		cpu0 := ownCPU()
		m, err := decide(ctx, o, batcher, c.inv, rdb, sale)
		if err != nil {
			return Table{}, fmt.Errorf("%s: %w", c.name, err)
		}
		cpu := ownCPU() - cpu0
		rate := float64(m.decisions) / m.took.Seconds()
		rates = append(rates, rate)
		rows = append(rows, []string{c.name, f0(rate), f2(ratio(float64(m.redisUS), float64(m.decisions))),
			f2(ratio(float64(cpu.Microseconds()), float64(m.decisions))), m.verdict, f2(ratio(rate, rates[0]))})
	}
	return Table{
		Title: fmt.Sprintf("Scale-out: one hot sale on a 3-master Redis Cluster, %d clients each sending one buy at a time through the batcher, %s each",
			o.Clients, o.Duration),
		Header: []string{"sale", "decisions/s", "Redis CPU µs/decision (all masters)", "client CPU µs/decision", "final stock", "× one shard"},
		Rows:   rows,
		Goals: []Goal{
			{What: "3 buckets ≥ 2× one shard", Got: ratio(rates[1], rates[0]), Want: 2},
		},
		Notes: []string{
			fmt.Sprintf("WAIT 1 per batch keeps %.2f of the throughput in one shard, %.2f in 3 buckets", ratio(rates[2], rates[0]), ratio(rates[3], rates[1])),
			"the cluster's 6 redis-server processes (3 masters, 3 replicas), the clients, the batchers and go-redis (client CPU: this process's user+system time) share this machine's CPUs: decisions/s × (Redis + client CPU per decision) near the number of cores means the machine, not one master's core, is the bound",
			"stock left throughout: every decision accepts and records an order; a bucketed batch is split into one call per bucket, concurrently",
		},
	}, nil
}

// ownCPU is this process's user+system CPU time so far.
func ownCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
