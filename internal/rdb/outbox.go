package rdb

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// An outbox is a stream a store appends to in the same atomic step as the
// change it records (a script's XADD), so no change exists without its
// entry. A relay reads it through the consumer group outboxGroup,
// publishes the entries, and acknowledges and deletes them once the broker
// confirmed them; entries a dead relay left unconfirmed are claimed by a
// live one. Outbox is those reads for the store that owns the stream: a
// sale's part (package inventory), a funds group (package funds).
type Outbox struct {
	c    Client
	keys Keys // where the relays' heartbeats are
	key  string
}

// NewOutbox is the outbox stream at key, its relays' heartbeats under
// keys.
func NewOutbox(c Client, keys Keys, key string) Outbox { return Outbox{c: c, keys: keys, key: key} }

// Beat records that the relay named consumer is alive for the next ttl
// (0: it stops, and what it read is anyone's at once). A relay beats
// several times a ttl; one whose beat lapsed is presumed dead, and the
// entries it read and did not acknowledge are claimed by the next relay
// that looks (Claim), without waiting for them to be idle.
func Beat(ctx context.Context, c Client, keys Keys, consumer string, ttl time.Duration) error {
	if ttl <= 0 {
		return c.Del(ctx, keys.Relay(consumer)).Err()
	}
	return c.Set(ctx, keys.Relay(consumer), 1, ttl).Err()
}

// outboxGroup is the consumer group of every outbox stream.
const outboxGroup = "relay"

// Entry is an entry of an outbox: its stream id, which starts with when it
// was appended (unix ms), and its fields as stored.
type Entry struct {
	ID     string
	Values map[string]any
}

func entries(msgs []redis.XMessage) []Entry {
	out := make([]Entry, len(msgs))
	for i, m := range msgs {
		out[i] = Entry{ID: m.ID, Values: m.Values}
	}
	return out
}

// OutboxRead says which entries Read returns.
type OutboxRead string

// What Read reads.
const (
	// OutboxNew are entries no relay has read yet.
	OutboxNew OutboxRead = ">"
	// OutboxPending are the entries this consumer read and has not
	// acknowledged (after a failure, it publishes them again).
	OutboxPending OutboxRead = "0"
)

// All returns every entry: O(outbox), for a reconciler looking for a
// missing record.
func (o Outbox) All(ctx context.Context) ([]Entry, error) {
	msgs, err := o.c.XRange(ctx, o.key, "-", "+").Result()
	if err != nil {
		return nil, err
	}
	return entries(msgs), nil
}

// After returns up to n entries appended after the entry id, oldest
// first (id "": from the first), whether or not a relay read them: for a
// writer that keeps what an outbox held before its callers are answered
// (embedded mode's write-through).
func (o Outbox) After(ctx context.Context, id string, n int) ([]Entry, error) {
	start := "-"
	if id != "" {
		start = "(" + id
	}
	msgs, err := o.c.XRangeN(ctx, o.key, start, "+", int64(n)).Result()
	if err != nil {
		return nil, err
	}
	return entries(msgs), nil
}

// Oldest returns when the oldest entry still in the outbox was appended;
// ok is false when it is empty.
func (o Outbox) Oldest(ctx context.Context) (at time.Time, ok bool, err error) {
	first, err := o.c.XRangeN(ctx, o.key, "-", "+", 1).Result()
	if err != nil || len(first) == 0 {
		return time.Time{}, false, err
	}
	ms, _, _ := strings.Cut(first[0].ID, "-")
	n, err := strconv.ParseInt(ms, 10, 64)
	if err != nil {
		return time.Time{}, false, fmt.Errorf("rdb: outbox entry id %q: %w", first[0].ID, err)
	}
	return time.UnixMilli(n), true, nil
}

// Read reads up to n entries for consumer: new ones, waiting up to block
// for one to come (block < 0: not at all), or the consumer's own pending
// ones. The group is made with the stream, from its beginning, so no
// entry is skipped; before the first append there is no stream, and
// nothing to read (a read that would block waits a little instead).
func (o Outbox) Read(ctx context.Context, consumer string, what OutboxRead, n int, block time.Duration) ([]Entry, error) {
	args := &redis.XReadGroupArgs{Group: outboxGroup, Consumer: consumer, Streams: []string{o.key, string(what)}, Count: int64(n), Block: block}
	streams, err := o.c.XReadGroup(ctx, args).Result()
	if noGroup(err) {
		err = o.c.XGroupCreate(ctx, o.key, outboxGroup, "0").Err()
		if err != nil && !strings.HasPrefix(err.Error(), "BUSYGROUP") {
			if strings.Contains(err.Error(), "requires the key to exist") {
				if block > 0 {
					pause(ctx, min(block, 100*time.Millisecond))
				}
				return nil, nil
			}
			return nil, err
		}
		streams, err = o.c.XReadGroup(ctx, args).Result()
	}
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if len(streams) == 0 {
		return nil, nil
	}
	return entries(streams[0].Messages), nil
}

// Claim takes over for consumer up to n entries other consumers read and
// did not acknowledge: first those of relays whose heartbeat lapsed
// (Beat), at once, then those left for minIdle or more by any other (a
// relay that beats and does not move is presumed dead too). A relay
// taken for dead while it lives publishes what it had again: the
// consumers keep an order or a movement once.
func (o Outbox) Claim(ctx context.Context, consumer string, minIdle time.Duration, n int) ([]Entry, error) {
	dead, err := o.claimDead(ctx, consumer, n)
	if err != nil || len(dead) > 0 {
		return dead, err
	}
	msgs, _, err := o.c.XAutoClaim(ctx, &redis.XAutoClaimArgs{
		Stream: o.key, Group: outboxGroup, Consumer: consumer, MinIdle: minIdle, Start: "0-0", Count: int64(n),
	}).Result()
	if err != nil && !noGroup(err) {
		return nil, err
	}
	return entries(msgs), nil
}

// claimDead claims for consumer up to n entries read by relays whose
// heartbeat lapsed.
func (o Outbox) claimDead(ctx context.Context, consumer string, n int) ([]Entry, error) {
	sum, err := o.c.XPending(ctx, o.key, outboxGroup).Result()
	if noGroup(err) || errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var owners []string
	for owner, count := range sum.Consumers {
		if owner != consumer && count > 0 {
			owners = append(owners, owner)
		}
	}
	var out []Entry
	for _, owner := range owners {
		alive, err := o.c.Exists(ctx, o.keys.Relay(owner)).Result()
		if err != nil {
			return nil, err
		}
		if alive > 0 {
			continue
		}
		pending, err := o.c.XPendingExt(ctx, &redis.XPendingExtArgs{
			Stream: o.key, Group: outboxGroup, Start: "-", End: "+", Count: int64(n - len(out)), Consumer: owner,
		}).Result()
		if err != nil {
			return nil, err
		}
		ids := make([]string, len(pending))
		for i, p := range pending {
			ids[i] = p.ID
		}
		if len(ids) == 0 {
			continue
		}
		msgs, err := o.c.XClaim(ctx, &redis.XClaimArgs{Stream: o.key, Group: outboxGroup, Consumer: consumer, Messages: ids}).Result()
		if err != nil {
			return nil, err
		}
		out = append(out, entries(msgs)...)
		if len(out) >= n {
			break
		}
	}
	return out, nil
}

// Ack acknowledges and deletes published entries, in one round trip. If
// it fails, the entries stay pending and are published again: consumers
// absorb the duplicates.
func (o Outbox) Ack(ctx context.Context, ids []string) error {
	_, err := o.c.TxPipelined(ctx, func(pl redis.Pipeliner) error {
		pl.XAck(ctx, o.key, outboxGroup, ids...)
		pl.XDel(ctx, o.key, ids...)
		return nil
	})
	return err
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
