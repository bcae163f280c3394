package worker

import (
	"context"
	"log/slog"
	"time"

	"github.com/seckill/seckill/internal/wait"
)

// Beater records that a relay is alive (inventory.Store, funds.Store: a
// key that expires, rdb.Beat).
type Beater interface {
	Beat(ctx context.Context, consumer string, ttl time.Duration) error
}

// A relay beats every relayBeat and is presumed dead relayDeadAfter after
// its last beat; the others look for entries of dead relays every
// relayBeat, so what a relay killed had read is published again within
// about relayDeadAfter + relayBeat.
const (
	relayBeat      = 500 * time.Millisecond
	relayDeadAfter = 2 * time.Second
)

// beat keeps consumer's heartbeat until the returned stop is called
// (which removes it: what the relay left is anyone's at once). The first
// beat is made before it returns, so the relay is alive before it reads.
func beat(ctx context.Context, b Beater, consumer string) (stop func()) {
	if err := b.Beat(ctx, consumer, relayDeadAfter); err != nil {
		slog.Warn("relay: heartbeat failed", "consumer", consumer, "err", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		wait.Every(ctx, relayBeat, func() {
			if err := b.Beat(ctx, consumer, relayDeadAfter); err != nil && ctx.Err() == nil {
				slog.Warn("relay: heartbeat failed", "consumer", consumer, "err", err)
			}
		})
	}()
	return func() {
		cancel()
		<-done
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		_ = b.Beat(sctx, consumer, 0)
	}
}
