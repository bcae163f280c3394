// Package wait polls for a condition with a deadline, for the tools and
// tests that wait on processes and services they started (the benchmark
// suite, the test topologies, the tests), and runs the services' periodic
// chores.
package wait

import (
	"context"
	"fmt"
	"time"
)

// Until calls check every interval until it reports done or an error, ctx
// ends or limit passes; the error then gives the last state check reported.
func Until(ctx context.Context, limit, every time.Duration, check func() (done bool, state string, err error)) error {
	deadline := time.Now().Add(limit)
	for {
		done, state, err := check()
		if done || err != nil {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("still %s after %s", state, limit)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(every):
		}
	}
}

// NoError calls fn every interval until it returns nil, ctx ends or limit
// passes; the error then names fn's last.
func NoError(ctx context.Context, limit, every time.Duration, fn func() error) error {
	return Until(ctx, limit, every, func() (bool, string, error) {
		if err := fn(); err != nil {
			return false, err.Error(), nil
		}
		return true, "", nil
	})
}

// Every calls fn every interval, the first time one interval from now,
// until ctx ends.
func Every(ctx context.Context, interval time.Duration, fn func()) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			fn()
		}
	}
}
