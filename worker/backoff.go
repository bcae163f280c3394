package worker

import (
	"context"
	"math/rand/v2"
	"time"
)

// backoff waits exponentially longer between retries, 50 ms up to 5 s,
// with jitter so that many processes do not retry in step.
type backoff struct{ next time.Duration }

func newBackoff() *backoff { return &backoff{next: 50 * time.Millisecond} }

func (b *backoff) peek() time.Duration { return b.next }

func (b *backoff) wait(ctx context.Context) error {
	d := b.next/2 + rand.N(b.next/2+1)
	b.next = min(2*b.next, 5*time.Second)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func (b *backoff) reset() { b.next = 50 * time.Millisecond }

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
