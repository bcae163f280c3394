package inventory

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill"
)

// The outbox. Each part of a sale has an outbox stream: buy.lua appends
// one entry per call that accepted orders, in the same atomic step as the
// decrement, so no accepted order exists without its entry. The relay
// (package worker) reads the entries through the consumer group
// outboxGroup, publishes them, and acknowledges and deletes them once the
// broker confirmed them: these methods are all it sends to Redis.

// outboxGroup is the consumer group of every outbox stream.
const outboxGroup = "relay"

// OutboxEntry is an entry of a part's outbox stream: the orders one buy
// call accepted.
type OutboxEntry struct {
	Part Part
	// ID is the entry's stream id, which starts with when it was appended
	// (unix ms).
	ID string
	// Values are the entry's fields as stored (Events decodes them).
	Values map[string]any
}

// Events returns the orders the entry carries.
func (e OutboxEntry) Events() ([]seckill.Event, error) { return DecodeOutbox(e.Values) }

// Trace is the traceparent of the buy call that appended the entry, ""
// when it was not traced.
func (e OutboxEntry) Trace() string {
	tp, _ := e.Values[OutboxTraceField].(string)
	return tp
}

func entries(p Part, msgs []redis.XMessage) []OutboxEntry {
	out := make([]OutboxEntry, len(msgs))
	for i, m := range msgs {
		out[i] = OutboxEntry{Part: p, ID: m.ID, Values: m.Values}
	}
	return out
}

// Outbox returns every entry of a sale's outbox streams, part by part:
// O(outbox), for the reconciler looking for a missing order.
func (s *Store) Outbox(ctx context.Context, sale int64) ([]OutboxEntry, error) {
	parts, err := s.Parts(ctx, sale)
	if err != nil {
		return nil, err
	}
	var out []OutboxEntry
	for _, p := range parts {
		msgs, err := s.rdb.XRange(ctx, s.partKeys(p).Outbox(), "-", "+").Result()
		if err != nil {
			return nil, failed(fmt.Sprintf("outbox of sale %d (part %s)", sale, p.Tag), err)
		}
		out = append(out, entries(p, msgs)...)
	}
	return out, nil
}

// OutboxOldest returns when the oldest entry still in a part's outbox was
// appended; ok is false when the outbox is empty.
func (s *Store) OutboxOldest(ctx context.Context, p Part) (at time.Time, ok bool, err error) {
	first, err := s.rdb.XRangeN(ctx, s.partKeys(p).Outbox(), "-", "+", 1).Result()
	if err != nil {
		return time.Time{}, false, failed("oldest outbox entry of part "+p.Tag, err)
	}
	if len(first) == 0 {
		return time.Time{}, false, nil
	}
	ms, _, _ := strings.Cut(first[0].ID, "-")
	n, err := strconv.ParseInt(ms, 10, 64)
	if err != nil {
		return time.Time{}, false, fmt.Errorf("inventory: outbox entry id %q: %w", first[0].ID, err)
	}
	return time.UnixMilli(n), true, nil
}

// OutboxRead says which entries ReadOutbox returns.
type OutboxRead string

// What ReadOutbox reads.
const (
	// OutboxNew are entries no relay has read yet.
	OutboxNew OutboxRead = ">"
	// OutboxPending are the entries this consumer read and has not
	// acknowledged (after a failure, it publishes them again).
	OutboxPending OutboxRead = "0"
)

// ReadOutbox reads up to n entries of a part's outbox for consumer: new
// ones, waiting up to block for one to come (block < 0: not at all), or
// the consumer's own pending ones. The group is made with the stream, from
// its beginning, so no entry is skipped; before the part's first accepted
// buy there is no stream, and nothing to read.
func (s *Store) ReadOutbox(ctx context.Context, p Part, consumer string, what OutboxRead, n int, block time.Duration) ([]OutboxEntry, error) {
	stream := s.partKeys(p).Outbox()
	args := &redis.XReadGroupArgs{Group: outboxGroup, Consumer: consumer, Streams: []string{stream, string(what)}, Count: int64(n), Block: block}
	streams, err := s.rdb.XReadGroup(ctx, args).Result()
	if noGroup(err) {
		err = s.rdb.XGroupCreate(ctx, stream, outboxGroup, "0").Err()
		if err != nil && !strings.HasPrefix(err.Error(), "BUSYGROUP") {
			if strings.Contains(err.Error(), "requires the key to exist") {
				// No buy yet: no stream to wait on, so wait here a little.
				if block > 0 {
					pause(ctx, min(block, 100*time.Millisecond))
				}
				return nil, nil
			}
			return nil, failed("make the outbox group of part "+p.Tag, err)
		}
		streams, err = s.rdb.XReadGroup(ctx, args).Result()
	}
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		return nil, failed("read the outbox of part "+p.Tag, err)
	}
	if len(streams) == 0 {
		return nil, nil
	}
	return entries(p, streams[0].Messages), nil
}

// ClaimOutbox takes over for consumer up to n entries of a part's outbox
// that another consumer read and left unacknowledged for minIdle or more:
// that relay is presumed dead.
func (s *Store) ClaimOutbox(ctx context.Context, p Part, consumer string, minIdle time.Duration, n int) ([]OutboxEntry, error) {
	msgs, _, err := s.rdb.XAutoClaim(ctx, &redis.XAutoClaimArgs{
		Stream: s.partKeys(p).Outbox(), Group: outboxGroup, Consumer: consumer, MinIdle: minIdle, Start: "0-0", Count: int64(n),
	}).Result()
	if err != nil && !noGroup(err) {
		return nil, failed("claim from the outbox of part "+p.Tag, err)
	}
	return entries(p, msgs), nil
}

// AckOutbox acknowledges and deletes published entries of a part's
// outbox, in one round trip. If it fails, the entries stay pending and
// are published again: the worker absorbs the duplicates.
func (s *Store) AckOutbox(ctx context.Context, p Part, ids []string) error {
	stream := s.partKeys(p).Outbox()
	_, err := s.rdb.TxPipelined(ctx, func(pl redis.Pipeliner) error {
		pl.XAck(ctx, stream, outboxGroup, ids...)
		pl.XDel(ctx, stream, ids...)
		return nil
	})
	if err != nil {
		return failed(fmt.Sprintf("remove %d published outbox entries of part %s", len(ids), p.Tag), err)
	}
	return nil
}

func noGroup(err error) bool { return err != nil && strings.HasPrefix(err.Error(), "NOGROUP") }

// pause waits d or until ctx ends.
func pause(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
