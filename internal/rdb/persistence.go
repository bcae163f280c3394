package rdb

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// ErrVolatile means Redis keeps what it holds only in memory: a restart
// loses every accepted order the relay has not published yet, and the
// stock.
var ErrVolatile = errors.New("redis does not persist its data (appendonly is off)")

// Durability describes how every master persists its data, and fails with
// ErrVolatile when one keeps it only in memory. With AOF and appendfsync
// everysec a crash of Redis costs at most the last second of writes;
// always costs nothing but speed; RDB snapshots alone cost everything
// since the last snapshot.
func Durability(ctx context.Context, c Client) (string, error) {
	var volatile []string
	var described []string
	err := EachMaster(ctx, c, func(ctx context.Context, m *redis.Client) error {
		info, err := m.Info(ctx, "persistence").Result()
		if err != nil {
			return err
		}
		aof := infoField(info, "aof_enabled") == "1"
		fsync := "unknown"
		if v, err := m.ConfigGet(ctx, "appendfsync").Result(); err == nil && v["appendfsync"] != "" {
			fsync = v["appendfsync"] // CONFIG may be renamed away on managed Redis
		}
		addr := m.Options().Addr
		if !aof {
			volatile = append(volatile, addr)
			described = append(described, addr+": no AOF")
			return nil
		}
		described = append(described, addr+": AOF, appendfsync "+fsync)
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("rdb: reading Redis persistence: %w", err)
	}
	desc := strings.Join(described, "; ")
	if len(volatile) > 0 {
		return desc, fmt.Errorf("%w on %s", ErrVolatile, strings.Join(volatile, ", "))
	}
	return desc, nil
}

// CPUSeconds returns the CPU time each master has used (INFO cpu:
// used_cpu_user + used_cpu_sys), by address: what a decision costs
// Redis, for the metrics.
func CPUSeconds(ctx context.Context, c Client) (map[string]float64, error) {
	out := map[string]float64{}
	var mu sync.Mutex // a cluster's masters are visited concurrently
	err := EachMaster(ctx, c, func(ctx context.Context, m *redis.Client) error {
		info, err := m.Info(ctx, "cpu").Result()
		if err != nil {
			return err
		}
		user, _ := strconv.ParseFloat(infoField(info, "used_cpu_user"), 64)
		sys, _ := strconv.ParseFloat(infoField(info, "used_cpu_sys"), 64)
		mu.Lock()
		out[m.Options().Addr] = user + sys
		mu.Unlock()
		return nil
	})
	return out, err
}

func infoField(info, name string) string {
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+":"); ok {
			return v
		}
	}
	return ""
}
